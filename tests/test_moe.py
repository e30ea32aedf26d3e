"""Expert parallelism (issue 12): topology with fractional domains, the all-to-all as DeepEP and
NCCL run it, expert kernels, MoE memory, presets and bad input."""
import math

import numpy as np
import pytest

from companion import hardware, moe, parallel
from companion.memory import training_memory
from companion.model import Layout, check_layout, preset

# seed 003's MoE layout at the scale of 128 NVL72 racks: TP4 PP8 CP2 VPP2 EP32 on 9216 GPUs
SEED = Layout(tp=4, pp=8, cp=2, dp=144, ep=32, vpp=2, microbatch=1, global_batch=144 * 16,
              sequence_parallel=True, distributed_optimizer=True)


def _seed(system, gpu, **kw):
    return parallel.estimate("seed-1.7t-moe", SEED, gpu, system=system, **kw)


def test_nvl72_rack_makes_the_seed_all_to_all_clearly_cheaper_than_8_gpu_nodes():
    rack, node = _seed("GB200 NVL72", "GB200"), _seed("DGX B200", "B200")
    # DeepEP sends a token once per remote domain holding one of its 24 experts: a 72-GPU rack
    # holds 18 of the group's 32 ranks, an 8-GPU node 2, so the rack cuts the network copies
    # from about 12 per token to about 2
    assert rack.ep_comm_s < 0.5 * node.ep_comm_s
    # an NCCL all-to-all (one copy per routed expert) gains nothing for the worst-placed rank:
    # EP32 x ETP4 spans 128 ranks, which 72-GPU racks cut so that some rank keeps only one peer
    lo, hi, _ = moe.group_span(32, 4, 72, 9216)
    assert (lo, hi) == (2, 18) and moe.group_span(32, 4, 8, 9216)[:2] == (2, 2)
    from dataclasses import replace
    nccl = replace(parallel.STACKS["megatron-core"], moe_dispatcher="alltoall")
    old_rack = _seed("GB200 NVL72", "GB200", software=nccl).ep_comm_s
    old_node = _seed("DGX B200", "B200", software=nccl).ep_comm_s
    assert old_rack == pytest.approx(old_node, rel=1e-6)


@pytest.mark.parametrize("dispatcher", moe.DISPATCHERS)
@pytest.mark.parametrize("chain", [(4, 8, 72), (4, 36, 72), (1, 8, 72)])
def test_a_bigger_domain_never_makes_a_group_slower(dispatcher, chain):
    # each domain size a multiple of the last: every pair sharing the small domain shares the
    # big one, so no rank loses a peer beside it and none sends more over the network
    up, net = 800e9 * 0.8, 50e9 * 0.94
    for size in (2, 4, 8, 16, 32, 64, 128):  # sizes dividing the 256 experts
        for stride in (1, 2, 4, 8):
            world = size * stride * 72 * 4
            times = []
            for domain in chain:
                nvl, out = moe.copies_per_token(dispatcher, size, stride, domain, 256, 8, world)
                times.append(float(moe.all_to_all_s(4096 * 7168 * 2, nvl, out, up, net)))
            assert times == sorted(times, reverse=True), (size, stride, times)


def test_fractional_domains_are_counted_exactly():
    # EP32 four ranks apart on 72-GPU racks: 128-rank groups; rack boundaries every 72 ranks.
    # Group 0 (ranks 0..124): 18 in rack 0, 14 in rack 1. Group 5 (ranks 640..764): 2 in rack
    # 8 (640, 644), 18 in rack 9, 12 in rack 10.
    c = moe._cells(32, 4, 72, 1152)
    assert sorted(c[0][c[0] > 0]) == [14, 18]
    assert sorted(c[20][c[20] > 0]) == [2, 12, 18]  # group 5 of offset 0 is row 5 * 4 = 20
    assert c.sum() == 1152 and (c.sum(axis=1) == 32).all()
    # a group of 12 on 8-GPU boards from a board's start: 8 + 4
    assert moe.group_span(12, 1, 8, 12) == (4, 8, 2)
    with pytest.raises(ValueError, match="world"):
        moe.group_span(12, 1, 8, 20)


def test_hit_probability_is_the_hypergeometric_miss():
    # chance a token's 8 of 256 experts include one of 32 held: 1 - C(224, 8) / C(256, 8)
    assert moe.hit_probability(32, 256, 8) == pytest.approx(1 - math.comb(224, 8) / math.comb(256, 8))
    assert moe.hit_probability(0, 256, 8) == 0.0 and moe.hit_probability(256, 256, 8) == 1.0


def test_deepep_dedup_never_sends_more_than_nccl():
    for size, stride, domain in ((64, 1, 8), (32, 4, 72), (16, 1, 8), (256, 1, 72)):
        _, dedup = moe.copies_per_token("deepep", size, stride, domain, 256, 8, size * stride * 9)
        _, plain = moe.copies_per_token("alltoall", size, stride, domain, 256, 8,
                                        size * stride * 9)
        assert dedup <= plain
    # DeepSeek-V3 on 2048 H800: EP64 over 8 nodes, top-8 of 256. NCCL: 8 x 56/64 = 7 copies
    # per token cross the network; DeepEP: one per remote node hit, at most M = 4 nodes
    # (node-limited routing, arXiv:2412.19437 Section 2.1.2), so at most 4 - P(own node)
    _, plain = moe.copies_per_token("alltoall", 64, 1, 8, 256, 8, 2048)
    _, limited = moe.copies_per_token("deepep", 64, 1, 8, 256, 8, 2048, max_domains=4)
    assert plain == pytest.approx(7.0) and limited <= 4.0


def test_fp8_dispatch_moves_about_half_the_bytes():
    # E4M3 plus one FP32 scale per 128 channels: 1 + 4/128 bytes per element vs 2
    assert moe.wire_bytes("fp8") == pytest.approx(1.03125) and moe.wire_bytes("bf16") == 2.0
    bf = _seed("DGX B200", "B200").ep_comm_s
    fp = parallel.estimate("seed-1.7t-moe", Layout(**{**SEED.__dict__,
                                                      "dispatch_precision": "fp8"}),
                           "B200", system="DGX B200").ep_comm_s
    # dispatch forward is one of four BF16-sized transfers (combine, two backward)
    assert fp == pytest.approx(bf * (3 + 1.03125 / 2) / 4, rel=1e-3)


def test_published_all_to_all_bandwidths():
    # DeepEP README: H800 intranode dispatch 153 GB/s of NVLink's 200 GB/s per direction;
    # V2 SM100 EP8 726 GB/s of NVLink 5's 900; NDR NICs carry 46-48 GB/s (nccl-tests #290)
    assert moe.NVLINK_A2A_FRACTION["Hopper"] * 200e9 == pytest.approx(153e9)
    assert moe.NVLINK_A2A_FRACTION["Blackwell"] * 900e9 == pytest.approx(726e9)
    assert 46e9 <= moe.NIC_A2A_FRACTION * 50e9 <= 48e9


def test_top24_routing_adds_at_least_its_dispatched_copies():
    """Same layout, top-24 vs top-2 of 128 experts (seed-1.7t-moe: hidden 16384, sequence
    8192). Per MoE layer per in-flight microbatch a GPU keeps the dispatched copies of its
    tokens: sequence / CP = 4096 tokens, gathered over ETP = TP = 4, each copied top_k times
    at 2 bytes x 16384: 22 extra copies are 22 x 4096 x 16384 x 2 = 2.95 GB. With 128 layers
    on PP8 (16 per stage) and the 1F1B schedule's in-flight microbatches, the top-24 run needs
    at least 22 x 2 x 4096 x 16384 x 16 layers x in-flight more."""
    from companion.memory import pipeline_inflight_microbatches
    lay = Layout(tp=4, pp=8, cp=2, dp=16, ep=32, vpp=2, microbatch=1, global_batch=16 * 16,
                 sequence_parallel=True, distributed_optimizer=True)
    m24, m2 = preset("seed-1.7t-moe"), preset("seed-1.7t-moe", top_k=2)
    a24 = training_memory(m24, lay).activations_bytes
    a2 = training_memory(m2, lay).activations_bytes
    copies = (24 - 2) * 4096 * 16384 * 2
    assert copies == pytest.approx(2.95e9, rel=1e-3)
    inflight = pipeline_inflight_microbatches(8, 2, 16)
    assert a24 - a2 >= copies * 16 * inflight
    # the figure: about 3.2 GB of top-24 copies per MoE layer per microbatch
    assert moe.saved_bytes_per_layer(4096, 16384, 128, 24, 4, 4) == pytest.approx(3.2e9, rel=0.02)


def test_expert_tp_decouples_expert_shapes_from_tp():
    # Megatron-Bridge runs Qwen3-235B on H100 at TP2 with EP32 and expert TP 1: the expert grid
    # 1 x 32 x 1 fills tp x dp = 2 x 16 per stage
    lay = Layout(tp=2, pp=8, dp=16, ep=32, etp=1, vpp=4, global_batch=2048,
                 sequence_parallel=True, distributed_optimizer=True, precision="fp8")
    check_layout(preset("qwen3-235b-a22b", layers=96), lay, 256)  # 94 layers: uneven stages
    assert lay.expert_tp == 1 and lay.expert_optimizer_shards == 1
    with pytest.raises(ValueError, match="ep"):
        Layout(tp=2, pp=8, dp=16, ep=32, global_batch=2048)  # ETP = TP 2: 64 > 32 ranks


@pytest.mark.parametrize("kw, words", [
    (dict(ep=6, dp=48, global_batch=48), "ep=6 must divide experts=128"),
    (dict(etp=5, ep=8), "etp=5 must divide expert_ffn_hidden=768"),
    (dict(routing_skew=17.0), "routing_skew"),
    (dict(routing_skew=0.5), "routing_skew"),
])
def test_bad_moe_layouts_name_the_parameter(kw, words):
    lay = dict(tp=1, pp=1, dp=40, ep=8, global_batch=40)
    with pytest.raises(ValueError, match=words):
        check_layout(preset("qwen3-30b-a3b"), Layout(**{**lay, **kw}))


def test_top_k_above_experts_is_refused():
    with pytest.raises(ValueError, match="top_k=9 must be <= experts=8"):
        preset("mixtral-8x7b", top_k=9)
    with pytest.raises(ValueError, match="dispatcher"):
        moe.copies_per_token("nccl", 8, 1, 8, 8, 2)
    with pytest.raises(ValueError, match="dispatch_precision"):
        Layout(dispatch_precision="fp4")
    assert moe.max_skew(128, 8) == 16


@pytest.mark.parametrize("call, words", [
    # group-limited routing enumerates the group choices: C(64, 32) ~ 1.8e18 would never end
    (lambda: preset("deepseek-v3", router_groups=64, router_group_topk=32), "router_group_topk"),
    (lambda: moe.copies_per_token("deepep", 64, 1, 8, 1024, 8, groups=64, group_topk=32),
     "group_topk=32 of groups=64"),  # its own parameters' names
    (lambda: moe.copies_per_token("deepep", 0, 1, 8, 256, 8), "size must be >= 1"),
    (lambda: moe.copies_per_token("deepep", 64, 1, 8, 256, 8, groups=8, group_topk=0),
     "group_topk must be >= 1"),
    (lambda: moe.copies_per_token("deepep", 64, 1, 8, 256, -1), "top_k must be >= 1"),
    # a rank pattern counted rank by rank: a billion-rank group is refused, not allocated
    (lambda: moe.group_span(2 ** 30, 1, 8), "size must be <="),
    (lambda: moe.group_span(2 ** 20, 3, 7), "group-domain cells"),
])
def test_topology_inputs_too_large_or_empty_are_refused(call, words):
    with pytest.raises(ValueError, match=words):
        call()
    # DeepSeek-V3's own routing (4 of 8 groups: 70 choices) still prices
    assert moe.copies_per_token("deepep", 64, 1, 8, 256, 8, 2048, groups=8, group_topk=4)[1] < 4


@pytest.mark.parametrize("name, total, active", [
    # Qwen3 Technical Report (arXiv:2505.09388) Table 2 and model cards: 30.5B / 3.3B,
    # 235B / 22B; Mixtral (arXiv:2401.04088): 47B total, 13B active; Mixtral 8x22B model card:
    # 141B / 39B
    ("qwen3-30b-a3b", 30.5e9, 3.3e9), ("qwen3-235b-a22b", 235e9, 22e9),
    ("mixtral-8x7b", 47e9, 13e9), ("mixtral-8x22b", 141e9, 39e9)])
def test_moe_presets_match_their_published_sizes(name, total, active):
    m = preset(name)
    assert m.params == pytest.approx(total, rel=0.02)
    assert m.active_params == pytest.approx(active, rel=0.05)


def test_qwen3_rows_follow_the_bridge_flop_count():
    # Megatron-Bridge 25.11, DGX-GB200: Qwen3-235B-A22B 728 TFLOP/s at 4916 tokens/s/GPU
    from companion.steptime import model_flops_per_token
    per_token = 728e12 / 4916
    assert model_flops_per_token(preset("qwen3-235b-a22b"), "bridge") == pytest.approx(
        per_token, rel=2e-3)


def test_routing_skew_slows_the_busiest_rank():
    lay = Layout(tp=1, pp=1, dp=8, ep=8, microbatch=4, global_batch=512, precision="fp8",
                 distributed_optimizer=True)
    even = parallel.estimate("qwen3-30b-a3b", lay, "B200", system="DGX B200")
    skew = parallel.estimate("qwen3-30b-a3b", Layout(**{**lay.__dict__, "routing_skew": 1.5}),
                             "B200", system="DGX B200")
    assert skew.step_time_s > even.step_time_s and skew.ep_comm_s == pytest.approx(
        1.5 * even.ep_comm_s, rel=0.01)
    assert skew.activations_bytes > even.activations_bytes


def test_moe_exercises_are_answered_and_checked():
    from companion import exercises
    from companion.catalogue import load_all
    load_all()
    ex = exercises.exercises("moe")
    assert len(ex) >= 5
    for e in ex:
        a = e.answer()
        assert np.isfinite(a) and a > 0, e.id
        assert exercises.check(e.id, a) and not exercises.check(e.id, 2 * a), e.id
    # worked from the sources: 8 of 256 experts over 64 ranks, 8 per node: 8 x 56 / 64
    assert exercises.check("moe-nccl-copies-dsv3", 8 * 56 / 64)
    # 4,096 tokens x 24 copies x 16,384 x 2 bytes plus FP32 probabilities over 128 experts
    assert exercises.check("moe-seed-dispatched-gb",
                           (4096 * 24 * 16384 * 2 + 4096 / 4 * (4 * 128 + 8 * 24)) / 1e9)
    assert exercises.check("moe-fp8-dispatch-saving", 1 - (6 + 1 + 4 / 128) / 8)


def test_explorer_frame_has_every_domain_and_ep():
    from companion.explore import moe as mx
    f = mx.ep_share_frame()
    assert set(f["domain"]) == {f"{d}-GPU domains" for d in mx.DOMAINS}
    assert sorted(set(f["ep"])) == list(mx.EP_DEGREES)
    assert ((f["a2a_share_pct"] >= 0) & (f["a2a_share_pct"] < 100)).all()


def test_moe_recompute_trades_the_dispatched_copies_for_a_second_forward():
    # Megatron's --recompute-modules moe: the MoE layer keeps its input only and reruns its
    # router, dispatch, experts and combine in the backward pass
    base = dict(SEED.__dict__, recompute="selective")
    sel = parallel.estimate("seed-1.7t-moe", Layout(**base), "GB200", system="GB200 NVL72")
    rec = parallel.estimate("seed-1.7t-moe", Layout(**{**base, "recompute": "moe"}), "GB200",
                            system="GB200 NVL72")
    assert rec.activations_bytes < 0.5 * sel.activations_bytes
    assert rec.step_time_s > sel.step_time_s and rec.recompute_s > sel.recompute_s
    assert rec.ep_comm_s == pytest.approx(sel.ep_comm_s * 6 / 4, rel=0.02)  # forward pair again
    from companion.search import search
    found = search("qwen3-30b-a3b", "B200", 8, 512, system="DGX B200", precision="fp8",
                   include_infeasible=True)
    assert "moe" in set(found["recompute"])
    dense = search("llama3-8b", "H100", 8, 64, include_infeasible=True)
    assert "moe" not in set(dense["recompute"])  # same as selective for a dense model


def test_grouped_gemm_rows_read_deepgemm_s_table():
    from companion.explore import moe as mx
    gg = mx.grouped_gemm_frame().set_index(["groups", "m_per_group", "n", "k"])
    # DeepGEMM README (first release), H800 FP8: 8 groups of 4096 x 4096 x 7168 at 1288 TFLOPS;
    # masked layout, 4 groups of 256 x 7168 x 2048 at 815 TFLOPS
    assert gg.loc[(8, 4096, 4096, 7168), "published_tflops"] == 1288
    assert gg.loc[(4, 256, 7168, 2048), "published_tflops"] == 815
    # the roofline prices large-M, long-K expert GEMMs within 5% of the published kernels
    big = gg.xs(7168, level="k")
    assert big[big.index.get_level_values("m_per_group") >= 1024]["error_pct"].abs().max() < 5
    # DeepEP's measured fractions come from the same table of published measurements
    assert moe.measurement("deepep-v1-h800-intranode-dispatch")["value"] == "153000000000.0"


def test_heldout_moe_rows():
    moe_rows = parallel.published_runs(held_out=True, moe=True)
    dense = parallel.published_runs(held_out=True)  # the default family: dense runs only
    assert not any(preset(m).is_moe for m in dense["model"])
    assert not set(moe_rows["run_id"]) & set(dense["run_id"])
    assert len(moe_rows) >= 30 and moe_rows["held_out"].all()
    assert (moe_rows["tp"] * moe_rows["pp"] * moe_rows["dp"] * moe_rows["cp"]
            == moe_rows["num_gpus"]).all()
    r = moe_rows.set_index("run_id")
    # Megatron-Bridge 25.11, DGX-GB200: DeepSeekV3 BF16, 256 GPUs, GBS 4096, PP4 VP4 EP64,
    # 3139 tokens/s/GPU, 782 TFLOP/s; the step is GBS x 4096 / (tokens/s/GPU x GPUs)
    g = r.loc["bridge2511_gb200_dsv3_bf16"]
    assert (g["pp"], g["vpp"], g["ep"], g["measured_tokens_per_s_per_gpu"]) == (4, 4, 64, 3139)
    assert g["measured_step_time_s"] == pytest.approx(4096 * 4096 / (3139 * 256))
    # DeepSeek-V3 report: 180K H800 GPU-hours per trillion tokens on 2048 H800, batch 15360
    d = r.loc["deepseek2024_h800_dsv3_2048"]
    assert d["measured_step_time_s"] == pytest.approx(
        15360 * 4096 / 1e12 * 180e3 * 3600 / 2048, rel=1e-3)
    # the Qwen3 rows' TFLOP/s follow Megatron-Bridge's causal FLOP count
    from companion.steptime import model_flops_per_token
    qwen = moe_rows["model"].str.startswith("qwen3") & moe_rows["measured_tflops_per_gpu"].notna()
    for _, q in moe_rows[qwen].iterrows():
        tokens_per_s = q["global_batch"] * 4096 / (q["measured_step_time_s"] * q["num_gpus"])
        per_token = q["measured_tflops_per_gpu"] * 1e12 / tokens_per_s
        assert per_token == pytest.approx(model_flops_per_token(preset(q["model"]), "bridge"),
                                          rel=1e-2), q["run_id"]


@pytest.mark.parametrize("model, layout, kw", [
    ("seed-1.7t-moe", SEED, {}),
    ("deepseek-v3", Layout(tp=2, pp=8, dp=576, ep=64, etp=1, global_batch=576 * 8,
                           sequence_parallel=True, distributed_optimizer=True),
     dict(uneven_stages=True)),
    ("gpt3-175b", Layout(tp=16, pp=8, dp=72, global_batch=72 * 8, sequence_parallel=True,
                         distributed_optimizer=True), {}),
])
def test_no_collective_of_a_job_slows_down_in_a_bigger_domain(model, layout, kw):
    # issue 12, Done when: same GPUs and links, domains of 4, 8, 36 and 72 GPUs; each domain
    # size a multiple of the one it is compared with
    from companion.explore import moe as mx
    parts = ("tp_comm_s", "cp_comm_s", "ep_comm_s", "dp_comm_s", "pp_p2p_s")
    t = {d: parallel.estimate(model, layout, "GB200", system=mx.domain_cluster(d), **kw)
         for d in (4, 8, 36, 72)}
    for small, big in ((4, 8), (8, 72), (4, 36), (36, 72)):
        for p in parts:
            assert getattr(t[big], p) <= getattr(t[small], p) * (1 + 1e-9), (small, big, p)


def test_group_limited_routing_caps_deepseek_v3_at_four_nodes():
    # DeepSeek-V3 (config.json n_group 8, topk_group 4; report Section 2.1.2: each token goes
    # to at most 4 nodes). EP64 over 8 nodes of 8 H800: each routing group of 32 experts is one
    # node's, so a token reaches at most 4 nodes, its own among them with chance 4/8: at most
    # 4 - 1/2 = 3.5 remote nodes on average, against 4.6 with free top-8 routing
    m = preset("deepseek-v3")
    assert (m.router_groups, m.router_group_topk) == (8, 4)
    free = moe.copies_per_token("deepep", 64, 1, 8, 256, 8, 2048)[1]
    grouped = moe.copies_per_token("deepep", 64, 1, 8, 256, 8, 2048, groups=8, group_topk=4)[1]
    assert grouped <= 3.5 < free
    with pytest.raises(ValueError, match="router_group_topk"):
        preset("deepseek-v3", router_group_topk=9)
    with pytest.raises(ValueError, match="top_k=8 must be <="):
        preset("deepseek-v3", router_groups=64, router_group_topk=1)  # 4 experts per group


def test_expert_loop_costs_what_transformer_engine_measured():
    # TE PR 3134 (SM100, 8 experts x 128 tokens, N = K = 2048): the multi-stream cuBLASLt loop
    # 0.267 ms, one CUTLASS launch 0.069 ms; the loop adds (0.267 - 0.069) / 8 per expert GEMM
    per = (0.267e-3 - 0.069e-3) / 8
    fwd, bwd = moe.expert_loop_s(16)
    assert (fwd, bwd) == pytest.approx((16 * 2 * per, 16 * 4 * per))
    # the step pays it per local expert: EP8 of Qwen3-30B's 128 experts keeps 16 per GPU
    lay = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, microbatch=1, global_batch=64, precision="fp8")
    from companion.calibration import DEFAULT
    from dataclasses import replace
    on = parallel.estimate("qwen3-30b-a3b", lay, "B200", software="megatron-bridge")
    off = parallel.estimate("qwen3-30b-a3b", lay, "B200", software="megatron-bridge",
                            calibration=replace(DEFAULT, off=frozenset({"launch"})))
    layers, microbatches = 48, 8
    assert on.gemm_s - off.gemm_s == pytest.approx(layers * microbatches * 16 * 6 * per,
                                                   rel=1e-6)


def test_moe_runs_are_their_own_family_and_only_the_overlap_pairs_fit_a_constant():
    from companion import validation as V
    fam = V.family_errors(["moe"]).set_index("moe")
    # two pairs without and with the overlap set ep_overlap_hidden; two runs with it bound
    # overlap_host_kernel_s
    assert len(V.EP_OVERLAP_FITTING) == 4 and len(V.MOE_FITTING) == 6
    assert fam.loc["MoE", "runs"] == len(parallel.published_runs(True, moe=True)) + 6
    cv = V.cross_validation()
    moe_rows = cv[cv["moe"] == "MoE"]
    fit = moe_rows[moe_rows["role"] == "fit"]
    assert sorted(fit["run_id"]) == sorted(V.MOE_FITTING)
    assert (moe_rows.loc[moe_rows["role"] != "fit", "role"] == "held out").all()
    # no fold fits gemm_in_training on a MoE run: every MoE row gets its source's fold value
    # from the dense rows of the other sources alone
    lin = V._linearized(V.DEFAULT)
    dense = lin["moe"] == "dense"
    for r in fit.itertuples():
        assert r.fold_gemm_in_training == V._fit(lin[dense & (lin["source"] != r.source)])


def test_the_ep_overlap_constant_is_the_pairs_refit():
    # Megatron-MoE model zoo, Qwen3-235B-A22B on 256 H100, EP32 DeepEP: 19.7 s (245 model
    # TFLOP/s/GPU) without and 17.6 s (276) with "+1f1b overlap"; Megatron-Bridge pull
    # request 3862, Qwen3-30B-A3B on 16 H100, EP16 NCCL all-to-all: 41.25 s without, 31.20 s
    # with the overlap and delayed weight gradients (31.31 s with the overlap alone)
    from dataclasses import replace
    from companion import validation as V
    from companion.calibration import DEFAULT
    assert V.fitted_ep_overlap_hidden() == pytest.approx(DEFAULT.ep_overlap_hidden)
    runs = parallel.published_runs(False, moe=True).set_index("run_id")
    published = ((19.7, 17.6), (41.25, 31.20))
    for (without, with_), (plain_s, over_s) in zip(V.EP_OVERLAP_PAIRS, published):
        plain, over = runs.loc[without], runs.loc[with_]
        assert plain["measured_step_time_s"] / over["measured_step_time_s"] == pytest.approx(
            plain_s / over_s)
        # a pair differs in the overlap alone
        same = ["model", "gpu", "system", "tp", "pp", "dp", "ep", "vpp", "microbatch",
                "global_batch", "precision", "dispatcher"]
        assert plain[same].fillna("").equals(over[same].fillna(""))
        assert not V.run_stack(plain).overlap_ep and V.run_stack(over).overlap_ep
    # the pair the all-to-all dispatcher ran hides more than the DeepEP one: one fraction
    # leaves the model's ratio above the DeepEP pair's and below the NCCL pair's
    model = 1 / V.ep_overlap_ratio(DEFAULT.ep_overlap_hidden)
    measured = 1 / V.ep_overlap_measured()
    deepep, nccl = (pair[1] for pair in V.EP_OVERLAP_PAIRS)
    assert model[deepep] > measured[deepep] and model[nccl] < measured[nccl]
    with pytest.raises(ValueError, match="ep_overlap_hidden"):
        replace(DEFAULT, ep_overlap_hidden=1.5)
    lo, hi, basis = V.band("GB200", "fp8", 1.0, moe=True)
    assert "MoE" in basis and lo < 1 < hi
    e = parallel.estimate("qwen3-30b-a3b", Layout(tp=1, pp=1, dp=8, ep=8, etp=1, microbatch=4,
                                                  global_batch=512, precision="fp8"),
                          "GB200", software="megatron-bridge")
    assert "MoE" in e.band_basis
    with pytest.raises(TypeError, match="moe"):
        V.band("GB200", "fp8", 1.0, moe="yes")


def test_fp8_quantizes_every_dispatched_copy():
    """Transformer Engine quantizes each GEMM input and each output gradient; an MoE layer's
    experts read the top_k dispatched copies of a token. Qwen3-30B-A3B (hidden h = 2048,
    expert width f = 768, no shared expert): going from top-1 to top-8 routing adds, per token
    and layer, 7 h + 7 f quantized elements forward (the FC1 inputs and FC2 inputs of 7 more
    copies) and 7 h + 3 x 7 f backward (their FC2 output gradients, and the gated FC1's 3 f per
    copy the model counts), 50,176 elements in all, each at the recipe's published cost per
    element (calibration.quantization_bytes) at hbm_efficiency of the datasheet bandwidth."""
    from dataclasses import replace
    from companion.calibration import DEFAULT, quantization_bytes
    from companion import hardware
    base = preset("qwen3-30b-a3b")
    lay = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, microbatch=4, global_batch=512, precision="fp8")
    bf = replace(lay, precision="bf16")

    def cast_s(model):
        kw = dict(software="megatron-bridge")
        return (parallel.estimate(model, lay, "GB200", **kw).elementwise_s
                - parallel.estimate(model, bf, "GB200", **kw).elementwise_s)

    extra = cast_s(base) - cast_s(replace(base, top_k=1))
    h, f, k = 2048, 768, 8
    per_token = (k - 1) * (h + f) + (k - 1) * (h + 3 * f)
    assert per_token == 50_176
    tokens = 512 * 4096 / 8  # per GPU per step
    g = hardware.gpu("GB200")
    expected = (48 * tokens * per_token * quantization_bytes("fp8_current")
                / (g.hbm_Bps * DEFAULT.hbm_efficiency))
    assert extra == pytest.approx(expected, rel=1e-6)


def test_the_moe_sync_constant_is_the_recipe_pairs_refit():
    """Megatron-LM PR 5728 (measured column), Qwen3-30B-A3B on 16 GB200, TP1 EP16, MBS 4,
    GBS 512, sequence 4096, MXFP8, HybridEP: 480.3 model TFLOP/s per GPU with the dispatcher
    eager (partial CUDA graphs) and 598.1 with the whole step in one graph (paged stash). The
    same FLOPs per step, so the eager step is 598.1 / 480.3 = 1.245 times the graphed one."""
    from dataclasses import replace
    from companion import validation as V
    from companion.calibration import DEFAULT
    assert V.moe_sync_measured() == pytest.approx(598.1 / 480.3)
    assert V.fitted_moe_sync_s() == pytest.approx(DEFAULT.moe_sync_s)
    assert V.moe_sync_ratio(DEFAULT.moe_sync_s) == pytest.approx(598.1 / 480.3, abs=0.01)
    # the sync is paid once per MoE layer forward and once more per recompute of it; a dense
    # model and a whole-step CUDA graph pay nothing
    lay = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, microbatch=4, global_batch=512, precision="fp8")
    e = parallel.estimate("qwen3-30b-a3b", lay, "GB200", software="megatron-bridge")
    layers, microbatches = 48, 512 // (8 * 4)
    assert e.moe_sync_s == pytest.approx(layers * microbatches * DEFAULT.moe_sync_s)
    full = parallel.estimate("qwen3-30b-a3b", replace(lay, recompute="full"), "GB200",
                             software="megatron-bridge")
    assert full.moe_sync_s == pytest.approx(2 * e.moe_sync_s)
    from companion.machine import stack
    graphed = replace(stack("megatron-bridge"), cuda_graphs=True)
    assert parallel.estimate("qwen3-30b-a3b", lay, "GB200", software=graphed).moe_sync_s == 0
    dense = parallel.estimate("llama3-8b", Layout(tp=1, pp=1, dp=8, microbatch=1,
                                                  global_batch=64), "GB200")
    assert dense.moe_sync_s == 0
    off = replace(DEFAULT, off=frozenset({"host"}))
    assert parallel.estimate("qwen3-30b-a3b", lay, "GB200", software="megatron-bridge",
                             calibration=off).moe_sync_s == 0
    with pytest.raises(ValueError, match="moe_sync_s"):
        replace(DEFAULT, moe_sync_s=-1e-3)


def test_the_overlap_host_constant_is_bounded_by_the_pr_runs_with_the_overlap():
    """Megatron-Bridge PR 1760, Qwen3-235B-A22B on 64 B200 (TP1 PP8 EP8, MBS 1, GBS 1024):
    "MXFP8 step time improved from 20.1s to 16.9s. BF16 step time improved from 17.2s to 16s.
    Disable moe_a2a_overlap due to CPU overhead for BF16 and MXFP8. Disable VP for mxfp8." The
    25.11 table's MXFP8 run of the recipe before the PR prints 3,269 tokens/s per GPU:
    1024 x 4096 / (3269 x 64) = 20.05 s. Before the PR both recipes ran two virtual stages
    (qwen3/workload_base_configs.py@767255d2), so the fullest stage holds (94 + 2) / 8 = 12
    layers; 1024 / 8 = 128 microbatches and a bubble of (8 - 1) / 2 = 3.5 more. An MXFP8 layer
    issues 12 + 4 + 24 + 8 + 16 x 6 = 144 kernels, a BF16 one 12 + 24 + 16 x 6 = 132: the runs
    allow 20.05 / (144 x 12 x 131.5) = 88.2 us and 17.2 / (132 x 12 x 131.5) = 82.6 us per
    kernel, so 82 us."""
    from companion import validation as V
    from companion.calibration import DEFAULT
    from companion.machine import stack
    from companion.steptime import overlap_host_kernels
    model = preset("qwen3-235b-a22b")
    assert overlap_host_kernels(model, "fp8", stack("megatron-bridge-mxfp8"), 8) == 144
    assert overlap_host_kernels(model, "bf16", stack("megatron-bridge"), 8) == 132
    bounds = V.overlap_host_bounds()
    fp8, bf16 = V.OVERLAP_HOST_FITTING
    assert bounds[fp8] == pytest.approx(1024 * 4096 / (3269 * 64) / (144 * 12 * 131.5))
    assert bounds[bf16] == pytest.approx(17.2 / (132 * 12 * 131.5))
    assert V.fitted_overlap_host_kernel_s() == pytest.approx(82e-6)
    assert DEFAULT.overlap_host_kernel_s == pytest.approx(V.fitted_overlap_host_kernel_s())
    # each pair differs in the overlap (and the MXFP8 one in its virtual stages), not the layout
    runs = parallel.published_runs(None, moe=True).set_index("run_id")
    same = ["model", "gpu", "num_gpus", "tp", "pp", "dp", "ep", "microbatch", "global_batch",
            "precision", "software", "grad_reduce_bytes"]
    measured = {fp8: (16.9, 1024 * 4096 / (3269 * 64)), bf16: (16.0, 17.2)}
    for without, with_ in V.OVERLAP_HOST_PAIRS:
        a, b = runs.loc[without], runs.loc[with_]
        assert (a[same] == b[same]).all()
        assert (bool(a["ep_overlap"]), bool(b["ep_overlap"])) == (False, True)
        assert (a["measured_step_time_s"], b["measured_step_time_s"]) == pytest.approx(measured[with_])
    # the runs without the overlap set nothing: they are held out
    held = parallel.published_runs(True, moe=True)["run_id"]
    assert {w for w, _ in V.OVERLAP_HOST_PAIRS} <= set(held)
    assert not set(V.OVERLAP_HOST_FITTING) & set(held)


def test_an_eager_overlapped_layer_takes_at_least_the_hosts_time():
    """Qwen3-235B-A22B (94 MoE layers, 128 experts) at EP 8 on 64 B200, MXFP8: 16 local
    experts, so a layer issues 144 kernels (the test above), 144 x 82 us = 11.8 ms a layer and
    microbatch whatever the GPU does meanwhile. With 12 layers on the fullest stage (PP 8,
    uneven stages) and 1024 / 8 = 128 microbatches: a floor of 1,536 x 11.8 ms = 18.1 s."""
    from dataclasses import replace
    from companion.calibration import DEFAULT
    from companion.machine import stack
    lay = Layout(tp=1, pp=8, dp=8, ep=8, etp=1, microbatch=1, global_batch=1024,
                 precision="fp8")
    bridge = stack("megatron-bridge-mxfp8")
    over = replace(bridge, overlap_ep=True)
    assert 144 * DEFAULT.overlap_host_kernel_s == pytest.approx(11.8e-3, abs=0.05e-3)
    e = parallel.estimate("qwen3-235b-a22b", lay, "B200", software=over, uneven_stages=True)
    assert e.overlap_host_s > 0
    assert e.step_time_s >= 12 * 128 * 144 * DEFAULT.overlap_host_kernel_s
    assert sum(e.breakdown().values()) == pytest.approx(e.step_time_s, rel=1e-9)
    # no floor without the overlap, with whole-step CUDA graphs, switched off, on a dense
    # model, or at EP 1 (Megatron-Bridge asserts expert_model_parallel_size > 1 for it)
    plain, graphed, off = (
        parallel.estimate("qwen3-235b-a22b", lay, "B200", software=sw, calibration=cal,
                          uneven_stages=True)
        for sw, cal in ((bridge, DEFAULT), (replace(over, cuda_graphs=True), DEFAULT),
                        (over, replace(DEFAULT, off=frozenset({"overlap_host"})))))
    dense = parallel.estimate("llama3-8b", Layout(tp=1, pp=1, dp=8, microbatch=1,
                                                  global_batch=64), "B200", software=over)
    ep1 = parallel.estimate("qwen3-30b-a3b", Layout(tp=1, pp=1, dp=8, ep=1, microbatch=1,
                                                    global_batch=64, precision="fp8"),
                            "B200", software=over)
    assert plain.overlap_host_s == graphed.overlap_host_s == off.overlap_host_s == 0
    assert dense.overlap_host_s == 0 and ep1.overlap_host_s == 0
    # on a GPU slow enough to cover the host, the floor does not bind (FP8 current scaling:
    # MXFP8 needs Blackwell)
    hopper = replace(stack("megatron-bridge"), overlap_ep=True)
    assert parallel.estimate("qwen3-235b-a22b", replace(lay, microbatch=4, global_batch=4096),
                             "H100", software=hopper, uneven_stages=True).overlap_host_s == 0
    with pytest.raises(ValueError, match="overlap_host_kernel_s"):
        replace(DEFAULT, overlap_host_kernel_s=-1e-6)


def test_a_run_that_packs_64_gpus_per_nvl72_rack_is_priced_so():
    """Megatron-LM's Qwen3-235B-A22B GB200 recipe (128 GPUs, EP 64) tells HybridEP
    NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=64 on 72-GPU racks: each EP-64 group sits in one
    NVLink domain. Packed 72 to a rack, the second group would straddle two racks (ranks 64-71
    in the first, 72-127 in the second) and send part of its all-to-all over InfiniBand."""
    from companion import validation as V
    runs = parallel.published_runs(True, moe=True).set_index("run_id")
    row = runs.loc["mcorerecipes_gb200_qwen3_235b_a22b_128_mxfp8_fullcg"]
    cl = V.run_cluster(row)
    assert cl.gpus_per_domain == 64 and "64 GPUs per domain" in cl.name
    plain = row.drop("domain_gpus")
    assert V.run_cluster(plain) == "GB200 NVL72"
    packed = V._price_row(row, V.DEFAULT)
    straddled = V._price_row(plain, V.DEFAULT)
    assert packed.ep_exposed_s < straddled.ep_exposed_s
    assert packed.gemm_s == straddled.gemm_s


def test_the_expert_overlap_pairs_each_transfer_with_one_sub_module():
    """Megatron-Core's combined 1F1B (TransformerLayerSchedulePlan.run, model_chunk_schedule_
    plan.py): combine_bwd beside attn_fwd, dispatch_fwd and dispatch_bwd beside mlp_bwd and
    mlp_fwd, combine_fwd beside attn_bwd. Even hiding everything it can, the overlap leaves
    the part of each transfer longer than its partner exposed, so on a slow network it hides
    at most the partners' compute, never the whole all-to-all."""
    from dataclasses import replace
    from companion.calibration import DEFAULT
    lay = Layout(tp=1, pp=1, dp=32, ep=32, etp=1, microbatch=1, global_batch=256,
                 precision="fp8")
    st = {o: replace(parallel.STACKS["megatron-bridge"], overlap_ep=o, moe_dispatcher="alltoall")
          for o in (False, True)}
    full = replace(DEFAULT, ep_overlap_hidden=1.0)
    plain, over = (parallel.estimate("qwen3-235b-a22b", lay, "H100", software=st[o],
                                     calibration=full) for o in (False, True))
    assert plain.ep_exposed_s == plain.ep_comm_s
    hidden = over.ep_comm_s - over.ep_exposed_s
    # the partners: the MoE layers' GEMMs and attention, forward and backward
    assert 0 < hidden <= over.gemm_s + over.attention_s
    assert over.ep_exposed_s >= over.ep_comm_s - (over.gemm_s + over.attention_s)
    half = parallel.estimate("qwen3-235b-a22b", lay, "H100", software=st[True],
                             calibration=replace(DEFAULT, ep_overlap_hidden=0.5))
    assert over.ep_comm_s - half.ep_exposed_s == pytest.approx(hidden / 2)


def test_on_hopper_the_expert_overlap_costs_tp_its_kernel_order():
    """Megatron-Bridge's perf_plugins.py (_set_num_cuda_device_max_connections) runs Hopper
    with CUDA_DEVICE_MAX_CONNECTIONS=1 when TP or CP > 1, "to enforce kernel queuing order
    ... Otherwise, communication kernel will be pushed to the end of the GEMM kernel, failing
    to overlap the kernels", but not when moe_a2a_overlap is on (8, or 32 with DeepEP); the
    Megatron MoE model zoo's sbatch_benchmarking.sh sets 32 with A2A_OVERLAP=1 and 1 without.
    SM100 and newer get 32 connections either way. So on H100 the expert overlap leaves the
    TP collectives exposed; on GB200 it does not, and a dense model is never affected."""
    from dataclasses import replace
    lay = Layout(tp=2, pp=1, dp=32, ep=32, etp=1, microbatch=1, global_batch=256,
                 precision="fp8", sequence_parallel=True)
    st = {o: replace(parallel.STACKS["megatron-bridge"], overlap_ep=o) for o in (False, True)}
    h100 = {o: parallel.estimate("qwen3-235b-a22b", lay, "H100", software=st[o])
            for o in (False, True)}
    assert h100[False].tp_exposed_s < h100[False].tp_comm_s
    assert h100[True].tp_exposed_s == pytest.approx(h100[True].tp_comm_s)
    gb200 = parallel.estimate("qwen3-235b-a22b", lay, "GB200", software=st[True])
    assert gb200.tp_exposed_s < gb200.tp_comm_s
    dense = Layout(tp=2, pp=1, dp=32, microbatch=1, global_batch=256, precision="fp8",
                   sequence_parallel=True)
    a, b = (parallel.estimate("llama3-8b", dense, "H100", software=st[o]) for o in (False, True))
    assert a.tp_exposed_s == b.tp_exposed_s < a.tp_comm_s


def test_residuals_grouped_by_expert_overlap_and_local_experts():
    # Qwen3 routes over 128 experts (Qwen3-30B-A3B / Qwen3-235B-A22B model cards), so EP 8 leaves
    # 16 per GPU; the runs' recipes set moe_a2a_overlap (the ep_overlap column, cited per row).
    # Megatron-Bridge's 26.02 B300 Qwen3-235B-A22B recipe ran EP 8 with the overlap
    # (qwen3_workload_base_configs.py@f29a269f, B300_FP8_CS_V1: moe_a2a_overlap=True).
    from companion.explore import moe as mx
    val = mx.validation_frame()
    t = mx.overlap_by_local_experts(val)
    assert t["runs"].sum() == len(val)
    row = val.set_index("run_id").loc["bridge2602_b300_qwen3_235b_a22b_256_fp8mx"]
    assert row["ep"] == 8 and row["local_experts"] == 16 and row["ep_overlap"]
    both = val[val["ep_overlap"] & (val["local_experts"] == 16)]
    cell = t[(t["ep_overlap"]) & (t["local_experts"] == 16)].iloc[0]
    assert cell["runs"] == len(both)
    assert cell["mean_pct"] == pytest.approx(both["error_pct"].mean())


# --- bad input to the low-level helpers: a clear error naming the parameter ----------------
_A2A = dict(nvlink_copies=1.0, network_copies=1.0, nvlink_Bps=4e11, network_Bps=4e10)


@pytest.mark.parametrize("call, error, words", [
    (lambda: moe.max_skew(8, 0), ValueError, "top_k must be >= 1"),
    (lambda: moe.max_skew(0, 1), ValueError, "experts must be >= 1"),
    (lambda: moe.max_skew(8, 9), ValueError, "top_k=9 must be <= experts=8"),
    (lambda: moe.max_skew(8.5, 2), TypeError, "experts must be an integer"),
    (lambda: moe.check_skew(1, 8, 0), ValueError, "top_k must be >= 1"),
    (lambda: moe.check_expert_layout(preset("mixtral-8x7b"), 0, 1), ValueError,
     "ep must be >= 1"),
    (lambda: moe.check_expert_layout(preset("mixtral-8x7b"), 2, 0), ValueError,
     "etp must be >= 1"),
    (lambda: moe.check_expert_layout(None, 2, 1), TypeError,
     "model must be a companion.model.Transformer"),
    (lambda: moe.check_expert_layout("mixtral-8x7b", 2, 1), TypeError, r"preset\('mixtral"),
    (lambda: moe.check_expert_layout(preset("mixtral-8x7b"), 3, 1), ValueError,
     "ep=3 must divide experts=8"),
    (lambda: moe.all_to_all_s(-1e6, **_A2A), ValueError, "hidden_bytes must be finite and >= 0"),
    (lambda: moe.all_to_all_s(math.nan, **_A2A), ValueError, "hidden_bytes"),
    (lambda: moe.all_to_all_s("1", **_A2A), TypeError, "hidden_bytes"),
    (lambda: moe.all_to_all_s(1e6, **{**_A2A, "network_copies": -1.0}), ValueError,
     "network_copies"),
    (lambda: moe.all_to_all_s(1e6, **{**_A2A, "nvlink_Bps": 0.0}), ValueError, "nvlink_Bps"),
    (lambda: moe.all_to_all_s(1e6, **_A2A, routing_skew=0.5), ValueError, "routing_skew"),
    (lambda: moe.all_to_all_s(1e6, **_A2A, network_latency_s=-1e-6), ValueError,
     "network_latency_s"),
    (lambda: moe.all_to_all_s(np.ones(2), **{**_A2A, "nvlink_copies": np.ones(3)}), ValueError,
     "broadcast"),
    (lambda: moe.layer_all_to_all_s(4096, -4096, "bf16", **_A2A), ValueError,
     "hidden must be >= 1"),
    (lambda: moe.layer_all_to_all_s(-1, 4096, "bf16", **_A2A), ValueError, "tokens"),
    (lambda: moe.layer_all_to_all_s(4096, 4096, "bf16", **_A2A, recompute_forward=2),
     ValueError, "recompute_forward"),
    (lambda: moe.layer_all_to_all_s(4096, 4096, "bf16", **_A2A, recompute_forward="yes"),
     TypeError, "recompute_forward"),
    (lambda: moe.saved_bytes_per_layer(-1, 4096, 8, 2, 1, 1), ValueError, "tokens"),
    (lambda: moe.saved_bytes_per_layer(4096, -4096, 8, 2, 1, 1), ValueError, "hidden"),
    (lambda: moe.saved_bytes_per_layer(4096, 4096, 8, 2, 0, 1), ValueError, "tp"),
    (lambda: moe.saved_bytes_per_layer(4096, 4096, 8, 2, 1, np.array([1, -2])), ValueError,
     "etp"),
    (lambda: moe.saved_bytes_per_layer(4096, 4096, 8, 2, 1, 1, routing_skew=math.nan),
     ValueError, "routing_skew"),
    (lambda: moe.expert_loop_s(-3), ValueError, "local_experts must be finite and >= 0"),
    (lambda: moe.expert_loop_s("8"), TypeError, "local_experts"),
])
def test_moe_helpers_refuse_bad_input_naming_the_parameter(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_moe_helpers_keep_array_inputs_and_values():
    # the vectorised step-time model passes numpy arrays (and a boolean recompute mask)
    tokens = np.array([0.0, 4096.0, 8192.0])
    nvl, net = np.array([0.0, 3.0, 7.0]), np.array([0.0, 0.0, 2.5])
    t = moe.layer_all_to_all_s(tokens, 7168, "fp8", nvl, net, 4e11, 4e10, routing_skew=1.2,
                               recompute_forward=np.array([False, True, False]),
                               nvlink_latency_s=1e-6, network_latency_s=4e-6)
    assert t.shape == (3,) and t[0] == 0.0 and np.all(t[1:] > 0)
    one = moe.all_to_all_s(4096 * 7168 * 2.0, 3.0, 0.0, 4e11, 4e10, routing_skew=1.2,
                           nvlink_latency_s=1e-6)
    assert one == pytest.approx(1e-6 + 1.2 * 4096 * 7168 * 2.0 * 3 / 4e11)
    assert moe.all_to_all_s(1e6, 1, 1, 1e9, 1e9) == pytest.approx(1e-3)
    fwd, bwd = moe.expert_loop_s(np.array([0, 8]))
    assert fwd[0] == 0.0 and bwd[1] == pytest.approx(2 * fwd[1])
    saved = moe.saved_bytes_per_layer(4096, 7168, 256, 8, np.array([1, 2]), np.array([1, 2]))
    assert saved.shape == (2,) and saved[0] > saved[1]
    moe.check_expert_layout(preset("mixtral-8x7b"), 2, 1)
    assert moe.max_skew(8, 2) == 4.0 and moe.check_skew(4, 8, 2) == 4


def test_plan_takes_the_expert_overlap_and_whole_step_graphs(capsys):
    # the planner prices the recipe choices the published runs differ in: the expert overlap
    # (Megatron-Bridge's moe_a2a_overlap) and whole-step CUDA graphs (cuda_graph_impl
    # "full_iteration"), each named in the header and kept in the JSON
    import json
    from companion.search import main
    argv = ["--model", "qwen3-30b-a3b", "--gpu", "B200", "--gpus", "8", "--global-batch", "64",
            "--precision", "fp8", "--software", "megatron-bridge", "--top", "1"]
    assert main(argv) == 0
    assert "expert overlap" not in capsys.readouterr().out
    assert main(argv + ["--ep-overlap", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "megatron-bridge, expert overlap, fp8" in out and "EP host floor" in out
    assert main(argv + ["--ep-overlap", "--cuda-graphs", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["ep_overlap"] and plan["cuda_graphs"]
    # whole-step graphs: no host sync and no host floor left to pay
    assert plan["layouts"][0]["moe_sync_s"] == 0 and plan["layouts"][0]["overlap_host_s"] == 0


def test_an_expert_group_must_divide_the_experts():
    # Megatron-Core gives every expert-parallel rank experts / EP experts: 8 on 3 ranks is no
    # layout (before the check this crashed with a raw IndexError under group-limited routing)
    with pytest.raises(ValueError, match="size=3 must divide experts=8"):
        moe.copies_per_token("deepep", 3, 1, 8, 8, 2, None, None, 2, 1)


@pytest.mark.parametrize("call, error, match", [
    (lambda: moe.rows_per_expert(100, 2, 0, 1, 1, 1), ValueError, "experts must be >= 1"),
    (lambda: moe.rows_per_expert(float("nan"), 2, 8, 1, 1, 1), ValueError, "tokens"),
    (lambda: moe.permute_bytes(-100, 4096, 2), ValueError, "tokens"),
    (lambda: moe.router_bytes(100, 8, 2, tp=0), ValueError, "tp"),
    (lambda: moe.transient_bytes("100", 4096, 2, 1), TypeError, "tokens"),
    (lambda: moe.hit_probability(2, 4, 8), ValueError, "top_k=8 must be <= experts=4"),
    (lambda: moe.hit_probability(10, 8, 2), ValueError, "experts_held"),
    (lambda: moe.achieved_Bps(None, -1e9, 1e9, 0.5), ValueError, "scaleup_Bps"),
    (lambda: moe.rows_per_expert(1e20, 2, 8, 8, 1, 1), ValueError, "2\\*\\*53"),
    # a name has no architecture: it fell back to the ring fraction, 0.65 where DeepEP's
    # Hopper measurement is 153/200
    (lambda: moe.achieved_Bps("H100", 450e9, 50e9, 0.65), TypeError, "GPU spec"),
])
def test_moe_byte_and_kernel_helpers_refuse_nonsense(call, error, match):
    # these returned INT64_MIN rows, negative bytes, inf or a probability of 1 for 10 of 8
    with pytest.raises(error, match=match):
        call()


def test_achieved_all_to_all_bandwidth_takes_arrays():
    h100 = hardware.gpu("H100")
    up, out = moe.achieved_Bps(h100, np.array([450e9, 900e9]), 50e9, 0.65)
    assert up == pytest.approx([450e9 * 153 / 200, 900e9 * 153 / 200], rel=1e-3)
    assert out == moe.achieved_Bps(h100, 450e9, 50e9, 0.65)[1]
