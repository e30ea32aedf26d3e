"""The CPU training experiment: determinism, learning, the record, input checks.

Reference values: the entropy of a uniform choice among V tokens is ln V (Shannon 1948); the
entropy rate of a Markov chain is sum over states of pi(s) H(P(.|s)) (Cover and Thomas,
Elements of Information Theory, Theorem 4.2.4), which bounds the loss of any model from below.
"""
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companion import experiment as E  # noqa: E402
from companion.bench import record  # noqa: E402

TINY = E.ModelConfig(vocab=8, context=16, d_model=32, heads=2, layers=1, d_ff=64)
LANG = E.MarkovLanguage(vocab=8, alpha=0.1, seed=3)


def test_language_entropies():
    lang = E.MarkovLanguage(vocab=8, alpha=0.1, seed=3)
    h0, h1, h2 = (lang.entropy_nats(o) for o in (0, 1, 2))
    assert h2 < h1 < h0 <= math.log(8) + 1e-12  # conditioning never raises entropy
    # the entropy rate equals the average log-loss of the true model on a long sample
    s = lang.sample(400, 300, np.random.default_rng(0))
    p = lang.table[s[:, :-2], s[:, 1:-1], s[:, 2:]]
    assert math.isclose(-np.log(p).mean(), h2, rel_tol=0.02)
    # a uniform table has entropy rate ln V
    flat = E.MarkovLanguage(vocab=4, alpha=1e6)
    assert math.isclose(flat.entropy_nats(2), math.log(4), rel_tol=1e-4)


def test_tiny_run_is_deterministic_and_learns_in_bf16():
    a = E.run("bf16", 1e-2, steps=60, seed=1, config=TINY, language=LANG, batch=8)
    b = E.run("bf16", 1e-2, steps=60, seed=1, config=TINY, language=LANG, batch=8)
    assert a["loss"] == b["loss"] and a["final_loss"] == b["final_loss"]
    c = E.run("bf16", 1e-2, steps=60, seed=2, config=TINY, language=LANG, batch=8)
    assert c["loss"] != a["loss"]
    assert a["eval"][-1][1] < a["eval"][0][1] - 0.2  # the held-out loss falls
    assert not a["diverged"] and a["final_loss"] > a["entropy_rate_nats"]


def test_stochastic_rounding_recipe_is_deterministic():
    a = E.run("nvfp4", 1e-2, steps=3, seed=0, config=TINY, language=LANG, batch=4)
    b = E.run("nvfp4", 1e-2, steps=3, seed=0, config=TINY, language=LANG, batch=4)
    assert a["loss"] == b["loss"]


def test_stop_after_replays_the_start():
    full = E.run("fp8_delayed", 1e-2, steps=12, seed=0, config=TINY, language=LANG, batch=4)
    part = E.run("fp8_delayed", 1e-2, steps=12, stop_after=5, seed=0, config=TINY,
                 language=LANG, batch=4)
    assert part["loss"] == full["loss"][:5] and part["steps_run"] == 5


def test_runs_are_paired_across_recipes_and_the_eval_set_is_fixed():
    # one seed: the same initial weights under every recipe; the held-out set never moves
    a = E.build_model(TINY, "bf16", seed=4)
    b = E.build_model(TINY, "fp8_current", seed=4)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb and torch.equal(pa, pb)
    r0 = E.run("bf16", 1e-2, steps=2, seed=0, config=TINY, language=LANG, batch=4)
    r1 = E.run("bf16", 1e-2, steps=2, seed=1, config=TINY, language=LANG, batch=4)
    assert r0["loss"] != r1["loss"]
    held = E.held_out_set(LANG, 8, 16)
    assert np.array_equal(held, E.held_out_set(LANG, 8, 16))
    assert not np.array_equal(held, E.held_out_set(E.MarkovLanguage(8, 0.1, seed=4), 8, 16))


def test_model_is_swiglu_at_width_128_by_default():
    cfg = E.ModelConfig()
    assert cfg.d_model % 128 == 0 and cfg.d_ff % 128 == 0
    m = E.build_model(cfg, "bf16")
    blk = m.blocks[0]
    assert blk.up.weight.shape == (2 * cfg.d_ff, cfg.d_model)  # gate and value: SwiGLU
    assert blk.down.lin.weight.shape == (cfg.d_model, cfg.d_ff)


def test_nvfp4_keeps_its_last_linears_in_bf16():
    # about 16% of the linear layers, counted from the output end (arXiv:2509.25149)
    cfg = E.ModelConfig()
    assert E.bf16_layer_names(cfg, "nvfp4") == ("blocks.1.up", "blocks.1.down")
    assert E.bf16_layer_names(cfg, "fp8_current") == ()
    m = E.build_model(cfg, "nvfp4")
    assert m.blocks[1].down.lin.recipe.name == "bf16" and m.blocks[0].down.lin.recipe.name == "nvfp4"


def test_outliers_leave_the_function_unchanged():
    # the gain on the down projection's input is undone in its weight: exact arithmetic (fp32)
    # computes the same function, so only a quantizer can tell
    torch.manual_seed(0)
    tokens = torch.randint(0, TINY.vocab, (2, TINY.context))
    plain = E.build_model(TINY, "fp32", 3)(tokens)
    for remedy in ("none", "smooth"):
        out = E.build_model(TINY, "fp32", 3, E.Outliers(gain=1024.0, remedy=remedy))(tokens)
        assert torch.allclose(out, plain, rtol=1e-5, atol=1e-5)
    bf16 = E.build_model(TINY, "fp32", 3, E.Outliers(gain=1024.0, remedy="bf16_layer"))(tokens)
    assert not torch.equal(bf16, plain) and torch.allclose(bf16, plain, atol=1e-2)
    idx = E.Outliers(channels=2).channel_index(64)
    assert len(set(idx.tolist())) == 2 and idx.max() < 64
    with pytest.raises(ValueError, match="remedy"):
        E.Outliers(remedy="magic")
    with pytest.raises(ValueError, match="gain"):
        E.Outliers(gain=0)


def test_outliers_hurt_per_tensor_fp8_and_bf16_layer_recovers_it():
    # the mechanism of experiment 2 on one forward pass: with outliers of gain 2^20 per-tensor
    # E4M3 flushes the other channels of the down projection's input
    torch.manual_seed(0)
    tokens = torch.randint(0, TINY.vocab, (4, TINY.context))
    ref = E.build_model(TINY, "fp32", 1)(tokens)

    def err(recipe, remedy):
        out = E.build_model(TINY, recipe, 1, E.Outliers(gain=2.0 ** 20, remedy=remedy))(tokens)
        return float(((out - ref).norm() / ref.norm()).detach())
    assert err("fp8_current", "none") > 2 * err("fp8_current", "bf16_layer")
    assert err("fp8_current", "smooth") < err("fp8_current", "none")


def test_sweep_records_each_job_and_resumes(tmp_path):
    counts = E.run_sweep("smoke", tmp_path, seeds=(0,), steps=2, progress=False, limit=3)
    assert counts == {"done": 3, "skipped": 0, "total": 4}
    again = E.run_sweep("smoke", tmp_path, seeds=(0,), steps=2, progress=False)
    assert again == {"done": 1, "skipped": 3, "total": 4}  # a killed sweep loses nothing done
    runs = E.load_sweep("smoke", tmp_path)
    assert len(runs) == 4 and {r["recipe"] for r in runs} == {"bf16", "fp8_current"}
    meta = runs[0]["meta"]
    assert {"git_commit", "torch", "cpu", "date_utc", "job"} <= set(meta)
    for p in tmp_path.glob("*.json"):
        json.loads(p.read_text())  # plain JSON, no NaN objects
    assert not list(tmp_path.glob(".tmp-*"))


def test_sweep_grids():
    lr = E.sweep_jobs("lr")
    assert len(lr) == len(E.LR_RECIPES) * len(E.LR_GRID) * len(E.SEEDS)
    assert len(E.SEEDS) >= 5 and set(E.LR_RECIPES) >= {"fp8_delayed", "mxfp4_sr_rht", "nvfp4"}
    assert [j.seed for j in lr[:3]] == [0, 0, 0] and lr[-1].seed == max(E.SEEDS)  # seed-major
    out = E.sweep_jobs("outliers")
    assert {(j.recipe, j.outliers.remedy) for j in out} == set(E.OUTLIER_ARMS)
    assert len({j.name for j in lr + out}) == len(lr) + len(out)


def test_main(tmp_path, capsys):
    assert E.main(["smoke", "--seeds", "0", "--steps", "1", "--out", str(tmp_path),
                   "--no-progress"]) == 0
    assert "4 run, 0 already recorded" in capsys.readouterr().out
    assert E.main(["smoke", "--seeds", "x", "--no-progress"]) == 2
    assert E.main(["smoke", "--seeds", "-1", "--out", str(tmp_path), "--no-progress"]) == 2


def test_learned_threshold():
    # halfway between the bigram level and the entropy rate
    assert E.learned(1.4, 2.0, 1.0) and not E.learned(1.5, 2.0, 1.0)
    assert not E.learned(None, 2.0, 1.0) and not E.learned(float("nan"), 2.0, 1.0)
