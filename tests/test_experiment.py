"""The CPU training experiment: determinism, learning, the record, input checks.

Reference values: the entropy of a uniform choice among V tokens is ln V (Shannon 1948); the
entropy rate of a Markov chain is sum over states of pi(s) H(P(.|s)) (Cover and Thomas,
Elements of Information Theory, Theorem 4.2.4), which bounds the loss of any model from below.
"""
import json
import math

import numpy as np
import pytest

pytest.importorskip("torch")

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


def test_main_writes_a_record(tmp_path, capsys):
    assert E.main(["--recipes", "bf16,fp8_current", "--lrs", "0.01", "--steps", "2",
                   "--batch", "2", "--out", str(tmp_path)]) == 0
    recs = record.load_records(kind=E.KIND, directory=tmp_path)
    assert len(recs) == 1
    rec = recs[0]
    assert [r["recipe"] for r in rec["results"]] == ["bf16", "fp8_current"]
    assert rec["meta"]["settings"]["steps"] == 2 and "torch" in rec["meta"]
    assert rec["meta"]["command"].startswith("python -m companion.experiment")
    assert "git_commit" in rec["meta"]
    json.dumps(rec)  # plain JSON, no NaN objects hiding in it
    assert "saved" in capsys.readouterr().out


def test_bad_inputs():
    with pytest.raises(ValueError, match="nvfp4"):
        E.run("nvfp5", 1e-3, steps=1)
    with pytest.raises(ValueError, match="lr"):
        E.run("bf16", -1.0, steps=1)
    with pytest.raises(ValueError, match="recipe"):
        E.sweep(["bf16", "fp9"], [1e-3], steps=1)
    with pytest.raises(ValueError, match="heads"):
        E.ModelConfig(d_model=30, heads=4)
    with pytest.raises(ValueError, match="vocab"):
        E.run("bf16", 1e-3, steps=1, config=TINY, language=E.MarkovLanguage(vocab=16))
    assert E.main(["--recipes", "bf17", "--steps", "1", "--no-save"]) == 2
    assert E.main(["--lrs", "fast", "--steps", "1", "--no-save"]) == 2


def test_learned_threshold():
    # halfway between the bigram level and the entropy rate
    assert E.learned(1.4, 2.0, 1.0) and not E.learned(1.5, 2.0, 1.0)
    assert not E.learned(None, 2.0, 1.0) and not E.learned(float("nan"), 2.0, 1.0)


def test_summary_and_best_lr():
    runs = [
        {"recipe": "a", "lr": 1e-3, "seed": 0, "final_loss": 1.0, "entropy_rate_nats": 0.5,
         "diverged": False, "learned": True},
        {"recipe": "a", "lr": 2e-3, "seed": 0, "final_loss": 0.8, "entropy_rate_nats": 0.5,
         "diverged": False, "learned": True},
        {"recipe": "a", "lr": 4e-3, "seed": 0, "final_loss": 2.0, "entropy_rate_nats": 0.5,
         "diverged": False, "learned": False},
    ]
    best = E.best_lr(runs)["a"]
    assert best == {"best_lr": 2e-3, "best_loss": 0.8, "max_lr_learned": 2e-3}
    assert list(E.summary(runs)["gap_nats"].round(3)) == [0.5, 0.3, 1.5]
