"""Bad input found by probing the public functions: each now fails with an error that names the
parameter and what is allowed, where it used to return a number, a NaN or a bare exception."""
import numpy as np
import pytest

from companion import (blockscale, clocks, fabric, machine, memory, moe, parallel, power,
                       search, speedup)
from companion.model import Layout, Transformer


def test_context_parallelism_needs_two_chunks_per_rank():
    # Megatron-Core's get_batch_on_this_cp_rank views the sequence as 2 * cp chunks (the
    # load-balanced causal split), so 2 * cp must divide the sequence length
    tiny = Transformer("t", 4, 1024, 8, 4096, 50000, 1002)
    with pytest.raises(ValueError, match=r"2 \* cp=4 must divide seq_len=1002"):
        parallel.estimate(tiny, Layout(cp=2, global_batch=8), "H100")
    with pytest.raises(ValueError, match=r"2 \* cp=16384 must divide seq_len=8192"):
        parallel.estimate("llama3-8b", Layout(cp=8192, global_batch=64), "H100")
    with pytest.raises(ValueError, match=r"2 \* cp"):
        memory.training_memory(tiny, Layout(cp=2, global_batch=8), "H100")
    # cp = 1 needs nothing, and the search offers only splits Megatron can run: on 2 GPUs the
    # 1,002-token model may take cp = 1 (dp 2 or tp 2) but not cp = 2
    assert parallel.estimate(tiny, Layout(global_batch=8), "H100").step_time_s > 0
    found = search.search(tiny, "H100", 2, 8, max_cp=2, include_infeasible=True)
    assert len(found) and (found["cp"] == 1).all()


def test_interleaved_microbatches_come_in_rounds_of_pp():
    with pytest.raises(ValueError, match=r"num_microbatches = 1, to be a multiple of pp=8"):
        memory.pipeline_inflight_microbatches(8, 4, 1)
    # Korthikanti et al. Eq. 5 with interleaving: pp (1 + (pp - 1) / (pp vpp)) = 4 x 11/8
    assert memory.pipeline_inflight_microbatches(4, 2, 8) == pytest.approx(5.5)
    with pytest.raises(ValueError, match="multiple of pp=4"):
        memory.training_memory("llama3-8b", Layout(pp=4, vpp=2, dp=2), "H100",
                               num_microbatches=1)
    with pytest.raises(ValueError, match="num_microbatches=3 contradicts"):
        memory.training_memory("llama3-8b", Layout(pp=4, dp=2, global_batch=64), "H100",
                               num_microbatches=3)


def test_stage_layers_checks_a_single_layout():
    with pytest.raises(ValueError, match="pp must be > 0"):
        parallel.stage_layers(32, 0, 1)
    with pytest.raises(ValueError, match=r"pp \* vpp=3 must divide layers=32"):
        parallel.stage_layers(32, 3, 1)
    with pytest.raises(ValueError, match="layers \\+ 2"):
        parallel.stage_layers(32, 40, 1, embedding_loss=True)
    with pytest.raises(ValueError, match="vpp must be > 0"):
        parallel.stage_layers(32, 4, 0)
    # Llama 3.1 405B on PP 8 with the embedding and loss in slots: (126 + 2) / 8
    assert parallel.stage_layers(126, 8, 8, embedding_loss=True) == 16
    assert parallel.stage_layers(30, 4, 2, uneven=True) == 8  # ceil(30 / 8) x 2


def test_mxfp8_speedup_needs_mx_matrix_instructions():
    # Transformer Engine: "Device compute capability 10.0 or higher required for MXFP8"; AMD's
    # scaled MFMA instructions are "gfx950 only" (ROCm/aiter test_mfma_scale.h)
    with pytest.raises(ValueError, match="scheme='mxfp8' needs MX block-scaled"):
        speedup.step_speedup(0.7, 4096, 4096, "H100", scheme="mxfp8")
    with pytest.raises(ValueError, match="gfx942"):
        speedup.step_speedup(0.7, 4096, 4096, "MI300X", scheme="mxfp8")
    for gpu in ("B200", "MI355X"):
        assert speedup.step_speedup(0.7, 4096, 4096, gpu, scheme="mxfp8") > 1


def test_group_limited_routing_must_reach_top_k():
    with pytest.raises(ValueError, match="top_k=4 must be <= group_topk x experts / groups = 2"):
        moe.copies_per_token("deepep", 8, 1, 8, 8, 4, groups=4, group_topk=1)
    with pytest.raises(ValueError, match="groups=3 must divide experts=8"):
        moe.copies_per_token("alltoall", 8, 1, 8, 8, 2, groups=3)
    with pytest.raises(TypeError, match="stack must be a companion.machine.Stack"):
        moe.dispatcher_for("megatron-core")
    assert moe.dispatcher_for(machine.stack("megatron-core")) in moe.DISPATCHERS


def test_block_scaling_refuses_values_float32_cannot_hold():
    with pytest.raises(ValueError, match="beyond float32's maximum"):
        blockscale.block_quantize(np.full((1, 32), 1e300), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="beyond float32's maximum"):
        blockscale.tensor_quantize(np.array([1e300, 1.0]))
    with pytest.raises(ValueError, match="amax is inf"):
        blockscale.nvfp4_global_scale(np.array([np.inf, 1.0]))
    with pytest.raises(ValueError, match="amax is nan"):
        blockscale.nvfp4_global_scale(np.array([np.nan, 1.0]))
    # 448 x 6 / amax: E4M3's max times E2M1's max over the tensor's amax
    assert blockscale.nvfp4_global_scale(np.array([3.0])) == pytest.approx(896.0)
    with pytest.raises(ValueError, match="x is empty"):
        blockscale.sqnr_db(np.array([]), np.array([]))
    with pytest.raises(ValueError, match="more than history_len=2"):
        blockscale.DelayedScaling(history_len=2, history=(1000.0, 2.0, 3.0))


def test_small_public_helpers_name_their_parameter():
    with pytest.raises(TypeError, match="cal must be"):
        clocks.capped_gemm_flops("H100", 500, cal={})
    with pytest.raises(TypeError, match="gpus must be a sequence"):
        clocks.sustained_table("H100")
    with pytest.raises(ValueError, match="at least one GPU"):
        clocks.sustained_table(g for g in ())
    with pytest.raises(ValueError, match="at least one value"):
        clocks.cap_table("H100", [])
    with pytest.raises(ValueError, match="dp_cp must be finite and > 0"):
        fabric.megatron_default_bucket_params(0)
    # Megatron's default bucket: max(40M, 1M x dp)
    assert fabric.megatron_default_bucket_params(64) == 64_000_000
    with pytest.raises(ValueError, match="layers must be > 0"):
        memory.check_offload(0, 0, 1, "none")
    assert power.saving_at_equal_throughput(0.5) == -1.0  # documented: twice the power


def test_a_pcie_card_has_no_place_in_an_sxm_system():
    with pytest.raises(ValueError, match="H100 PCIe is a PCIe"):
        parallel.estimate("llama3-8b", Layout(tp=8, global_batch=64), "H100 PCIe",
                          system="DGX H100")
    # the seed's "B200 in NVL72 racks" stays a what-if of one family
    assert parallel.estimate("llama3-8b", Layout(tp=8, global_batch=64), "B200",
                             system="GB200 NVL72").step_time_s > 0


def test_the_reserve_can_be_the_largest_part():
    lay = Layout(tp=8, pp=4, dp=2, global_batch=128)
    e = parallel.estimate("llama3-70b", lay, "H100", reserve_bytes=1e15)
    assert "largest part: reserve, 1000000.0 GB" in e.reason
    m = memory.training_memory("llama3-70b", lay, "H100", reserve_bytes=1e15)
    assert "largest part: reserve, 1000000.0 GB" in m.reason
    # 16-bit gradients and full recomputation: the FP32 gradient copy outgrows the activations,
    # and the reserve is still what was set aside, in both entry points
    full = Layout(tp=8, global_batch=1, recompute="full")
    e = parallel.estimate("llama3-70b", full, "H100", software="megatron-2022",
                          reserve_bytes=120e9)
    m = memory.training_memory("llama3-70b", full, "H100", grad_bytes=2, reserve_bytes=120e9)
    assert e.reason == m.reason and "largest part: reserve, 120.0 GB" in e.reason


def test_the_planner_says_what_it_means(capsys):
    from companion.__main__ import main
    # one GPU sits in one 8-GPU node: nothing can cross the network, so a note, not a warning
    assert main(["plan", "--model", "llama3-8b", "--gpu", "B200", "--gpus", "1",
                 "--global-batch", "8", "--top", "1"]) == 0
    err = capsys.readouterr().err
    assert "note: 1 GPU sits in one scale-up domain of 8" in err and "WARNING" not in err
    # nothing fits: the same exit status with --json as without
    argv = ["plan", "--model", "llama3-405b", "--gpu", "H100", "--gpus", "8", "--global-batch",
            "16"]
    assert main(argv) == 1 and main(argv + ["--json"]) == 1
    capsys.readouterr()
    # a hint names only flags not yet given
    assert main(["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "100",
                 "--global-batch", "128", "--uneven-stages"]) == 2
    err = capsys.readouterr().err
    assert "--round-batch" in err and "--uneven-stages" not in err
    # --explain names the layout the table shows, +EL included
    assert main(["plan", "--model", "llama3-405b", "--gpu", "H100", "--gpus", "1024",
                 "--global-batch", "512", "--embedding-loss-slots", "--top", "1",
                 "--explain"]) == 0
    out = capsys.readouterr().out
    best = [line for line in out.splitlines() if line.startswith("Best layout")][0]
    assert "+EL" in best and "overlap slowdown: compute slowed" in out
    # env refuses a GPU record on a machine without one, as the benchmarks do
    import torch
    if not torch.cuda.is_available():
        assert main(["env", "--device", "cuda"]) == 2


def test_array_builders_and_row_readers_name_what_they_want():
    from companion.model import preset
    llama = preset("llama3-8b")
    with pytest.raises(TypeError, match="layout must be a companion.model.Layout"):
        moe.layout_arrays(None)
    with pytest.raises(TypeError, match="st must be a companion.machine.Stack"):
        parallel.layout_arrays(llama, Layout(tp=8, global_batch=8), 3)
    with pytest.raises(ValueError, match="layout.global_batch is needed"):
        parallel.layout_arrays(llama, Layout(tp=8), "megatron-core")
    # a stack name works as estimate takes one
    assert parallel.layout_arrays(llama, Layout(tp=8, global_batch=8), "megatron-core")["tp"][0] == 8
    with pytest.raises(TypeError, match="row must be a row of published_runs"):
        parallel.run_layout({})
    with pytest.raises(TypeError, match="row must be a row of published_runs"):
        parallel.role({})


def test_plan_lists_what_its_flags_take(capsys):
    from companion.__main__ import main
    assert main(["plan", "--list"]) == 0
    out = capsys.readouterr().out
    # a preset with its size and sequence, a GPU the planner can place, every registry system
    assert "llama3-405b" in out and "seq 8,192" in out and "GB200 NVL72" in out
    assert "A100" in out and "H100 SXM" in out
