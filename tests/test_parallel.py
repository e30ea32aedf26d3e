"""companion.parallel: step time against published runs, FLOP conventions, the pipeline bubble,
and clear errors for layouts Megatron cannot run."""
import numpy as np
import pytest

from companion import fabric
from companion.parallel import (STACKS, Cluster, Layout, cluster, estimate, model_flops_per_token,
                                preset, published_runs, search, tp_layer, validate)
from companion.steptime import _all_reduce_s
from companion.calibration import DEFAULT


@pytest.fixture(scope="module")
def validation():
    return validate()


def test_published_runs_hold_the_papers_numbers():
    runs = published_runs().set_index("run_id")
    # Korthikanti et al. 2022 (arXiv:2205.05198), Table 5: iteration time in seconds, full
    # recomputation vs sequence parallel + selective recomputation
    table5 = {"22b": (1.42, 1.10), "175b": (18.13, 13.75), "530b": (49.05, 37.83),
              "1t": (94.42, 71.49)}
    for size, (full, sel) in table5.items():
        assert runs.loc[f"korthikanti2022_t5_{size}_full", "measured_step_time_s"] == full
        assert runs.loc[f"korthikanti2022_t5_{size}_selective", "measured_step_time_s"] == sel
    # Narayanan et al. 2021 (arXiv:2104.04473), Table 1: achieved teraFLOP/s per GPU
    tflops = runs.filter(like="narayanan", axis=0)["measured_tflops_per_gpu"].tolist()
    assert tflops == [137, 138, 142, 135, 138, 140, 148, 155, 163, 163]
    # the abstract: "502 petaFLOP/s on 3072 GPUs" for 1T, i.e. 163.4 per GPU
    assert 502e3 / 3072 == pytest.approx(163, abs=0.5)
    assert runs["source"].str.contains("arXiv:2205.05198|arXiv:2104.04473").all()
    assert runs["flop_convention"].notna().all()


def test_korthikanti_table5_mean_3_worst_6_percent(validation):
    err = validation[validation["table"] == "Table 5"]["error_pct"].abs()
    assert len(err) == 8
    assert err.mean() <= 3.0 and err.max() <= 6.0


def test_narayanan_table1_mean_8_percent(validation):
    err = validation[validation["table"] == "Table 1"]["error_pct"].abs()
    assert len(err) == 10 and err.mean() <= 8.0


def test_megatron_flops_match_korthikanti_mfu():
    # Korthikanti Sec. 6.3 model FLOPs: 72 B s l h^2 (1 + s/6h + V/12lh) per step; the
    # Megatron-LM README reports MFU 56.3% for the 1T model (TP 8, PP 64, batch 512 on 512
    # A100s), whose Table 5 iteration time is 71.49 s, against 312 TFLOP/s per A100.
    m = preset("korthikanti-1t")
    s, l, h, v = m.seq_len, m.layers, m.hidden, m.vocab
    per_step = 72 * 512 * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
    assert model_flops_per_token(m) * 512 * s == pytest.approx(per_step, rel=1e-3)
    assert per_step / (71.49 * 512 * 312e12) == pytest.approx(0.563, abs=0.002)


def test_flop_conventions():
    m = preset("llama3-8b")
    mega, bridge = model_flops_per_token(m), model_flops_per_token(m, "bridge")
    # Megatron-Bridge counts causal attention: half of 12 s a d per layer
    assert mega - bridge == pytest.approx(6 * m.seq_len * m.heads * m.head_dim * m.layers)
    assert model_flops_per_token(m, "6n") == 6 * m.params  # Kaplan et al. 2020: C = 6N
    with pytest.raises(ValueError, match="convention"):
        model_flops_per_token(m, "palm")


def _gpt_layout(**kw):
    base = dict(tp=8, pp=8, dp=1, vpp=3, microbatch=1, global_batch=64, precision="fp16",
                recompute="full")
    return Layout(**{**base, **kw})


def test_breakdown_adds_up_and_bubble_is_p_minus_1_over_m_v():
    e = estimate("korthikanti-175b", _gpt_layout(), "A100", software="megatron-2022")
    assert sum(e.breakdown().values()) == pytest.approx(e.step_time_s, rel=1e-12)
    # Narayanan et al. 2021, Section 2.2.2: interleaved bubble fraction (p - 1) / (m v)
    steady = e.step_time_s - e.bubble_s - e.pp_p2p_s - e.dp_exposed_s - e.optimizer_s
    assert e.bubble_s / steady == pytest.approx((8 - 1) / (64 * 3))
    assert 0 < e.mfu < e.hfu < 1 and e.fits


def test_overlap_hides_communication():
    lay = _gpt_layout(dp=4, global_batch=256, recompute="selective", sequence_parallel=True,
                      distributed_optimizer=True)
    old = estimate("gpt3-175b", lay, "H100", num_gpus=256, software="megatron-2022")
    new = estimate("gpt3-175b", lay, "H100", num_gpus=256, software=STACKS["megatron-core"])
    assert old.tp_exposed_s == old.tp_comm_s > 0
    assert new.tp_exposed_s < new.tp_comm_s and new.step_time_s < old.step_time_s


def test_clusters_from_the_registry():
    a100 = cluster("A100")  # Narayanan et al. 2021 Sec. 5: 8 GPUs and 8 HDR (200 Gb/s) HCAs
    assert (a100.gpus_per_domain, a100.scaleout_Bps) == (8, 25e9)
    h100 = cluster("H100")  # DGX H100: 8 GPUs, 8 x 400 Gb/s ConnectX-7
    assert (h100.gpus_per_domain, h100.scaleout_Bps) == (8, 50e9)
    assert cluster("B200", "GB200 NVL72").gpus_per_domain == 72
    custom = Cluster("two racks", 72, 900e9, 100e9)
    assert cluster("B200", custom) is custom


def test_hierarchical_all_reduce_matches_fabric():
    cl = cluster("H100")
    n, stride, size = np.array([64]), np.array([8]), np.array([1e9])
    got = _all_reduce_s(size, n, stride, cl, DEFAULT)[0]
    fab = fabric.Fabric(1, cl.scaleup_Bps * DEFAULT.scaleup_efficiency,
                        cl.scaleout_Bps * DEFAULT.scaleout_efficiency)
    assert got == pytest.approx(fabric.hierarchical_all_reduce_time_s(1e9, fab, 64).total_s)


@pytest.mark.parametrize("kw, match", [
    (dict(tp=5, pp=1, dp=1, global_batch=4), "tp=5 must divide heads"),
    (dict(tp=8, pp=5, dp=1, global_batch=4), r"pp \* vpp=5 must divide layers"),
    (dict(tp=8, pp=1, dp=2, global_batch=3), "global_batch"),
    # Megatron's interleaved schedule refuses 12 microbatches on 8 stages
    (dict(tp=8, pp=8, dp=1, vpp=3, global_batch=12), "multiple of pp=8"),
])
def test_bad_layouts_name_the_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        estimate("korthikanti-175b", Layout(**kw), "A100")


def test_gpu_count_expert_count_and_batch_errors():
    with pytest.raises(ValueError, match="= 64 must equal num_gpus=72"):
        estimate("korthikanti-175b", _gpt_layout(), "A100", num_gpus=64 + 8)
    with pytest.raises(ValueError, match="global_batch must be set"):
        estimate("korthikanti-175b", Layout(tp=8), "A100")
    with pytest.raises(ValueError, match="ep=3 must divide experts"):
        estimate("deepseek-v3", Layout(tp=1, dp=6, ep=3, global_batch=6), "H100")
    with pytest.raises(TypeError, match="layout must be a Layout"):
        estimate("gpt3-175b", {"tp": 8}, "H100")


def test_uneven_stages_only_when_asked():
    lay = Layout(tp=8, pp=4, dp=1, global_batch=64)  # 105 layers over 4 stages
    with pytest.raises(ValueError, match="must divide layers"):
        estimate("turing-530b", lay, "A100")
    e = estimate("turing-530b", lay, "A100", uneven_stages=True)
    assert e.step_time_s > 0


def test_embedding_and_loss_take_a_layer_slot_each():
    """Megatron's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split:
    Llama 3.1 405B's 126 layers + 2 slots = 128 = 8 stages x 8 chunks x 2 (Megatron-Bridge's
    llama31_405b recipe; MLPerf's ASYM_PP_EMBED / ASYM_PP_LOSS). Middle stages hold 16
    layers, the last 15 and the output layer; padded stages give every stage 16 and the last
    the output layer as well, so the slot split is faster by at most one layer per
    microbatch."""
    from companion.steptime import stage_layers
    assert int(stage_layers(126, 8, 8, embedding_loss=True)) == 128 // 8 == 16
    assert int(stage_layers(94, 8, 3, embedding_loss=True)) == (94 + 2) // 8  # Qwen3-235B
    lay = Layout(tp=8, pp=8, vpp=8, dp=1, global_batch=64, precision="fp8",
                 sequence_parallel=True)
    slots = estimate("llama3-405b", lay, "H100", embedding_loss_slots=True)
    padded = estimate("llama3-405b", lay, "H100", uneven_stages=True)
    assert sum(slots.breakdown().values()) == pytest.approx(slots.step_time_s, rel=1e-12)
    per_layer = (padded.step_time_s - padded.bubble_s) / (64 * 16)  # an upper bound
    assert padded.step_time_s - 64 * per_layer * 1.05 < slots.step_time_s < padded.step_time_s
    one = Layout(tp=8, pp=1, dp=8, global_batch=64, precision="fp8")
    assert (estimate("llama3-405b", one, "H100", embedding_loss_slots=True).step_time_s
            == estimate("llama3-405b", one, "H100").step_time_s)  # one stage: nothing moves
    with pytest.raises(ValueError, match="pp x vpp = 20 to divide layers \\+ 2 = 128"):
        estimate("llama3-405b", Layout(tp=8, pp=4, vpp=5, dp=1, global_batch=64), "H100",
                 embedding_loss_slots=True)
    with pytest.raises(ValueError, match="pass at most one"):
        estimate("llama3-405b", lay, "H100", uneven_stages=True, embedding_loss_slots=True)
    with pytest.raises(TypeError, match="embedding_loss_slots"):
        estimate("llama3-405b", lay, "H100", embedding_loss_slots="yes")


def test_infeasible_layout_says_why():
    e = estimate("gpt3-175b", Layout(tp=8, pp=1, dp=1, global_batch=8), "H100")
    assert not e.fits and "does not fit" in e.reason and "optimizer" in e.reason


def test_seed_moe_layout_on_nvl72():
    # seed 003: TP4 / PP8 / EP128 / VPP2 / CP2 on "8192 B200 in 128 NVL72"
    assert 128 * 72 == 9216 != 8192  # 128 racks of 72 GPUs are 9216 GPUs, not 8192
    lay = Layout(tp=4, pp=8, cp=2, dp=128, ep=128, vpp=2, global_batch=1024,
                 sequence_parallel=True, recompute="selective", distributed_optimizer=True)
    e = estimate("seed-1.7t-moe", lay, "B200", num_gpus=8192, system="GB200 NVL72")
    assert e.ep_comm_s > 0 and e.cp_comm_s > 0
    # the top-24 dispatched copies (3.2 GB per MoE layer per microbatch) do not fit (issue 12)
    assert not e.fits and "activations" in e.reason
    assert sum(e.breakdown().values()) == pytest.approx(e.step_time_s)


def test_tp1_needs_nothing_hidden():
    # a TP group of one sends nothing, so no share of it needs hiding (was ZeroDivisionError)
    assert tp_layer(tp=1).hidden_fraction_for(0.1) == 0.0
    with pytest.raises(TypeError, match="calibration must be"):
        estimate("llama3-8b", Layout(tp=8, global_batch=8), "H100", calibration=None)


def test_a_gpu_in_another_familys_system_is_refused():
    # an H100 priced in a GB200 NVL72 rack would get 72-GPU NVLink 5 domains it never has
    with pytest.raises(ValueError, match="system='GB200 NVL72' holds"):
        estimate("llama3-70b", Layout(tp=8, pp=2, dp=9, global_batch=72), "H100",
                 system="GB200 NVL72")
    assert cluster("B200", "GB200 NVL72").gpus_per_domain == 72  # same die, the rack's links


@pytest.mark.parametrize("kw", [dict(routing_skew=2.0), dict(dispatch_precision="fp8"),
                                dict(etp=1)])
def test_expert_settings_on_a_dense_model_are_refused(kw):
    # they would change nothing, so a reader asking for them has the wrong model
    with pytest.raises(ValueError, match="applies to MoE layers; llama3-8b has experts=1"):
        estimate("llama3-8b", Layout(tp=8, global_batch=8, **kw), "H100")


def test_fp32_layouts_size_memory_but_are_not_timed():
    with pytest.raises(ValueError, match="precision='fp32' sizes memory only"):
        estimate("llama3-8b", Layout(tp=8, global_batch=8, precision="fp32"), "H100")


def test_a_stack_switch_must_be_a_bool():
    # "False" is a truthy string: it priced the gradient overlap as on
    from dataclasses import replace
    from companion.machine import STACKS
    with pytest.raises(TypeError, match="overlap_grad_reduce must be True or False"):
        replace(STACKS["megatron-core"], overlap_grad_reduce="False")
    with pytest.raises(ValueError, match="grad_reduce_bytes must be 2"):
        replace(STACKS["megatron-core"], grad_reduce_bytes=3)


def test_mxfp8_recipe_is_refused_only_where_fp8_gemms_run():
    # Transformer Engine's check_mxfp8_support: "Device compute capability 10.0 or higher
    # required for MXFP8 execution"; an H100 is 9.0. A BF16 step on the same stack scales
    # nothing to FP8, so it is the plain Megatron-Bridge step (as it already was on a B200).
    lay = Layout(tp=1, dp=8, global_batch=128, precision="bf16")
    for gpu in ("H100", "B200"):
        mx = estimate("llama3-8b", lay, gpu, software="megatron-bridge-mxfp8")
        plain = estimate("llama3-8b", lay, gpu, software="megatron-bridge")
        assert mx.step_time_s == pytest.approx(plain.step_time_s)
    with pytest.raises(ValueError, match="compute capability 10.0"):
        estimate("llama3-8b", Layout(tp=1, dp=8, global_batch=128, precision="fp8"), "H100",
                 software="megatron-bridge-mxfp8")
    with pytest.raises(ValueError, match="compute capability 10.0"):
        search("llama3-8b", "H100", 8, 128, precision="fp8", software="megatron-bridge-mxfp8")
