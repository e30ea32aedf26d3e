"""companion.search: every candidate is a layout Megatron can run, the ranking comes from the
same code as estimate(), and the search is fast."""
import time

import numpy as np
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
