"""companion.search: every candidate is a layout Megatron can run, the ranking comes from the
same code as estimate(), and the search is fast."""
import time

import numpy as np
import pandas as pd
import pytest

from companion.model import Transformer
from companion.parallel import estimate, preset
from companion.search import candidates, layout_of, search


def test_candidates_are_valid_layouts():
    m = preset("gpt3-175b")
    X = candidates(m, 256, 2048)
    n = X["tp"] * X["pp"] * X["dp"] * X["cp"]
    assert (n == 256).all()
    assert (m.heads % X["tp"] == 0).all() and (m.layers % (X["pp"] * X["vpp"]) == 0).all()
    assert (X["m"] * X["mb"] * X["dp"] == 2048).all()  # whole microbatches, exact batch
    assert ((X["sp"] == 0) | (X["tp"] > 1)).all()


def test_search_rows_agree_with_estimate():
    frame = search("gpt3-175b", "H100", 256, 2048, precision="fp8", top=3)
    assert list(frame["step_time_s"]) == sorted(frame["step_time_s"])
    assert frame["fits"].all() and frame.attrs["candidates"] > 1000
    for _, row in frame.iterrows():  # one code path: the row is what estimate() says
        e = estimate("gpt3-175b", layout_of(row, "fp8"), "H100", num_gpus=256)
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
        assert e.memory_bytes / 1e9 == pytest.approx(row["memory_gb"], rel=1e-9)


def test_moe_search_respects_experts():
    m = Transformer("tiny-moe", 16, 2048, 16, 1024, 32000, 4096, kv_heads=4, ffn_type="swiglu",
                    experts=8, top_k=2, tied_embeddings=False, bias=False,
                    learned_positions=False)
    frame = search(m, "H100", 64, 256, include_infeasible=True)
    assert (8 % frame["ep"] == 0).all() and ((frame["dp"] * frame["cp"]) % frame["ep"] == 0).all()
    assert frame["ep"].max() == 8 and (frame["ep_comm_s"][frame["ep"] > 1] > 0).all()


def test_no_layout_is_an_error_and_rounding_is_explicit():
    # 5128 = 8 x 641: no data parallel degree divides a batch of 2520
    with pytest.raises(ValueError, match="exact_batch=False"):
        search("turing-530b", "A100", 5128, 2520, precision="fp16")
    frame = search("turing-530b", "A100", 5128, 2520, precision="fp16", exact_batch=False,
                   uneven_stages=True, zero=(0, 1, 2, 3), include_infeasible=True)
    assert (frame["global_batch"] <= 2520).all() and (~frame["fits"]).any()
    assert frame[frame["fits"]]["zero"].eq(3).all()  # only sharded weights fit 530B on <= 8-way MP


def test_bad_arguments():
    with pytest.raises(ValueError, match="recompute"):
        search("gpt3-175b", "H100", 256, 2048, recompute=("some",))
    with pytest.raises(ValueError, match="precision"):
        search("gpt3-175b", "H100", 256, 2048, precision="fp7")
    with pytest.raises(ValueError, match="global_batch"):
        search("gpt3-175b", "H100", 256, 0)


def test_turing_search_is_fast():
    # Calculon (Isaev et al. SC'23) needed 24 s for this search on the project's machines
    t0 = time.perf_counter()
    search("turing-530b", "A100", 5128, 2520, precision="fp16", exact_batch=False,
           uneven_stages=True, zero=(0, 1, 2, 3))
    assert time.perf_counter() - t0 < 2.0


def _nested_loops(model, num_gpus, global_batch, *, max_microbatch=8, uneven=False,
                  exact_batch=True, vpp=(1, 2, 3, 4, 6, 8), zero=(0, 1)):
    """The enumeration rules written as plain loops, for checking the numpy grid."""
    L, rows = model.layers, []
    divs = [d for d in range(1, num_gpus + 1) if num_gpus % d == 0]
    for tp in divs:
        if any(x % tp for x in (model.heads, model.kv_heads_used, model.ffn_hidden)):
            continue
        for pp in divs:
            if (num_gpus // tp) % pp or pp > L or (not uneven and L % pp):
                continue
            for cp in divs:
                if (num_gpus // (tp * pp)) % cp or model.seq_len % cp:
                    continue
                dp = num_gpus // (tp * pp * cp)
                per = global_batch // dp if not exact_batch or global_batch % dp == 0 else 0
                for v in [1] if pp == 1 else (range(1, L + 1) if vpp == "all" else vpp):
                    if not uneven and L % (pp * v):
                        continue
                    lst = -(-L // (pp * v)) * v if uneven else L // pp
                    if v > lst or (uneven and lst * (pp - 1) >= L):
                        continue  # a virtual stage without a layer, or an empty last stage
                    for mb in range(1, per + 1):
                        if per % mb or (max_microbatch and mb > max_microbatch):
                            continue
                        if v > 1 and (per // mb) % pp:
                            continue  # Megatron's interleaved schedule: whole rounds of pp
                        eps = [e for e in range(1, model.experts + 1) if model.experts % e == 0]
                        for ep in eps if model.is_moe else [1]:
                            if (dp * cp) % ep:
                                continue
                            for sp in (0, 1):
                                for rc in (0, 1, 2, 3) if model.is_moe else (0, 1, 2):
                                    for z in zero:
                                        if sp and (tp == 1 or (model.seq_len // cp) % tp):
                                            continue
                                        if z and dp * cp == 1:
                                            continue
                                        rows.append((tp, pp, cp, dp, ep, v, mb, per // mb, lst,
                                                     sp, rc, z))
    return rows


@pytest.mark.parametrize("name, gpus, batch, kw", [
    ("gpt3-175b", 256, 2048, {}),
    ("turing-530b", 5128, 2520, dict(uneven=True, exact_batch=False, vpp="all",
                                     max_microbatch=None, zero=(0, 1, 2, 3))),
    ("deepseek-v3", 512, 1024, dict(vpp=(2, 4))),
])
def test_numpy_grid_lists_what_nested_loops_list(name, gpus, batch, kw):
    m = preset(name)
    X = candidates(m, gpus, batch, max_microbatch=kw.get("max_microbatch", 8),
                   uneven_stages=kw.get("uneven", False), exact_batch=kw.get("exact_batch", True),
                   vpp=kw.get("vpp", (1, 2, 3, 4, 6, 8)), zero=kw.get("zero", (0, 1)))
    keys = ("tp", "pp", "cp", "dp", "ep", "vpp", "mb", "m", "stage_layers", "sp", "rc", "zero")
    got = list(zip(*(X[k].tolist() for k in keys)))
    assert got == _nested_loops(m, gpus, batch, **kw)  # same layouts, same order


def test_full_space_rows_agree_with_estimate():
    # every interleaving degree and microbatch size, uneven stages, rounded batch (Calculon's
    # conventions); the rows are what estimate() says for the same layout
    kw = dict(precision="fp16", exact_batch=False, uneven_stages=True, zero=(0, 1, 2, 3),
              vpp="all", max_microbatch=None, include_infeasible=True)
    frame = search("turing-530b", "A100", 5128, 2520, **kw)
    assert len(frame) == frame.attrs["candidates"] > 0
    # one to three sequences per replica leave no whole round of pp microbatches to interleave
    assert (frame["vpp"] == 1).all()
    # a rounded batch differs by layout: rows are ranked by time per sequence (tokens/s)
    assert (frame["step_time_s"] / frame["global_batch"]).is_monotonic_increasing
    assert frame["tokens_per_s"].is_monotonic_decreasing
    rows = frame.iloc[np.random.default_rng(5).choice(len(frame), 6, replace=False)]
    for _, row in pd.concat([frame.head(2), rows]).iterrows():
        e = estimate("turing-530b", layout_of(row, "fp16"), "A100", num_gpus=5128,
                     uneven_stages=True)
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-12)
        assert e.memory_bytes / 1e9 == pytest.approx(row["memory_gb"], rel=1e-12)
        assert e.mfu == pytest.approx(row["mfu"], rel=1e-12) and e.fits == row["fits"]
    feasible = search("turing-530b", "A100", 5128, 2520, **{**kw, "include_infeasible": False})
    assert len(feasible) == frame.attrs["feasible"] == frame["fits"].sum()
    assert feasible["step_time_s"].tolist() == frame[frame["fits"]]["step_time_s"].tolist()


def test_interleaved_layouts_run_whole_rounds_of_pp_microbatches():
    # Megatron-LM's interleaved schedule raises unless pp divides the microbatch count
    frame = search("gpt3-175b", "H100", 256, 64, include_infeasible=True)
    inter = frame[frame["vpp"] > 1]
    assert len(inter) and (inter["num_microbatches"] % inter["pp"] == 0).all()
    plain = frame[(frame["vpp"] == 1) & (frame["pp"] > 1)]
    assert (plain["num_microbatches"] % plain["pp"] != 0).any()  # allowed without interleaving
    # interleaved rows price as estimate() prices the same layout (the same code path)
    rows = inter.iloc[np.random.default_rng(7).choice(len(inter), 5, replace=False)]
    for _, row in rows.iterrows():
        e = estimate("gpt3-175b", layout_of(row), "H100", num_gpus=256)
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-12)
        assert e.breakdown()["pp_p2p_s"] == pytest.approx(row["pp_p2p_s"], rel=1e-12)


def test_bad_search_options():
    with pytest.raises(TypeError, match="vpp"):
        search("gpt3-175b", "H100", 256, 2048, vpp="some")
    with pytest.raises(ValueError, match="vpp"):
        search("gpt3-175b", "H100", 256, 2048, vpp=(0, 2))
    with pytest.raises(ValueError, match="max_microbatch"):
        search("gpt3-175b", "H100", 256, 2048, max_microbatch=0)


def test_full_turing_search_is_fast():
    # the benchmark's case (benchmarks/search.py); generous bound for a loaded 2-core machine
    t0 = time.perf_counter()
    frame = search("turing-530b", "A100", 5128, 2520, precision="fp16", exact_batch=False,
                   uneven_stages=True, zero=(0, 1, 2, 3), vpp="all", max_microbatch=None)
    assert time.perf_counter() - t0 < 1.0 and frame.attrs["candidates"] > 0


def test_search_tries_the_embedding_and_loss_slots_when_asked():
    # Llama 3.1 405B: 126 layers, so PP16 VPP8 (Megatron-Bridge's GB200 recipe) runs only with
    # the embedding and the loss in a layer's slot each: 128 = 16 x 8 x 1
    kw = dict(precision="fp8", software="megatron-bridge", system="GB200 NVL72")
    plain = search("llama3-405b", "GB200", 256, 1536, **kw)
    assert not ((plain["pp"] == 16) & (plain["vpp"] == 8)).any()
    frame = search("llama3-405b", "GB200", 256, 1536, embedding_loss_slots=True, **kw)
    rows = frame[(frame["pp"] == 16) & (frame["vpp"] == 8)]
    assert len(rows) and rows["embedding_loss_slots"].all()
    assert not frame.loc[frame["pp"] == 1, "embedding_loss_slots"].any()
    for _, row in pd.concat([rows.head(2), frame.head(2)]).iterrows():
        e = estimate("llama3-405b", layout_of(row, "fp8"), "GB200", system="GB200 NVL72",
                     software="megatron-bridge",
                     embedding_loss_slots=bool(row["embedding_loss_slots"]))
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
        assert e.memory_bytes / 1e9 == pytest.approx(row["memory_gb"], rel=1e-9)
    with pytest.raises(ValueError, match="at most one"):
        search("llama3-405b", "GB200", 256, 1536, uneven_stages=True,
               embedding_loss_slots=True, **kw)


@pytest.mark.parametrize("kw, err, words", [
    (dict(reserve_bytes=float("nan")), ValueError, "reserve_bytes must be finite"),
    (dict(reserve_bytes=-1), ValueError, "reserve_bytes must be >= 0"),
    (dict(top=0), ValueError, "top must be >= 1"),
    (dict(top=2.5), TypeError, "top must be an integer"),
    (dict(include_infeasible="no"), TypeError, "include_infeasible must be True or False"),
    (dict(exact_batch=0), TypeError, "exact_batch must be True or False"),
    (dict(recompute="full"), TypeError, "recompute must be a non-empty sequence"),
    (dict(sequence_parallel=True), TypeError, "sequence_parallel must be a non-empty sequence"),
    (dict(zero=(1, 1)), ValueError, "zero lists a choice twice"),
    (dict(calibration=None), TypeError, "calibration must be a companion.calibration"),
])
def test_search_options_fail_clearly(kw, err, words):
    # each of these used to return a silently wrong frame or fail deep inside numpy
    with pytest.raises(err, match=words):
        search("llama3-8b", "H100", 8, 64, **kw)
