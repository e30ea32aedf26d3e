"""The interconnect chapter's explorers and exercises against their sources.

Sources named per test: NVIDIA's link figures (via the registry), nccl-tests' PERFORMANCE.md
and issue 212, Narayanan et al. 2021 (the per-layer FLOP count), Megatron-LM's DDP default.
"""
import math

import numpy as np
import pytest

from companion import claims, comm, fabric
from companion.exercises import check, exercises, get
from companion.explore import interconnect as ic

GB = 1e9


# Each exercise worked by hand from its documents: H100 datasheet (NVLink 900 GB/s, the sum of
# both directions; 989.4 TFLOPS dense BF16), nccl-tests PERFORMANCE.md (all-reduce busbw =
# algbw x 2(n-1)/n) and issue 212 (275 GB/s algbw on 8 H100s), NVIDIA's NDR/HDR port rates
# (400 and 200 Gb/s per direction), Narayanan et al. 2021 (72 b s h^2 + 12 b s^2 h FLOPs).
_TP_FLOPS = (72 * 4096 * 5120 ** 2 + 12 * 4096 ** 2 * 5120) / 8  # one of 8 ranks, one layer
_TP_COMM_S = 4 * 2 * 7 / 8 * (4096 * 5120 * 2) / 450e9  # four ring all-reduces of b s h bf16


def _tp_layer_compute_s():
    """One rank's 18 GEMMs of the 13B layer (QKV, scores, values, projection, FC1, FC2; each
    forward, dgrad, wgrad) on the H100 roofline (989.4 TFLOP/s, 3.35 TB/s), 128x128 output
    tiles in waves over 132 SMs (NVIDIA's matrix-multiplication guide, 'Wave Quantization';
    every dimension here is a multiple of 128, so there is no tile quantization)."""
    s, h, hd, heads = 4096, 5120 // 8, 128, 40 // 8
    t = flops = 0.0
    for m, n, k, b in ((s, 3 * h, 8 * h, 1), (s, s, hd, heads), (s, hd, s, heads),
                       (s, 8 * h, h, 1), (s, 4 * h, 8 * h, 1), (s, 8 * h, 4 * h, 1)):
        for mm, nn, kk in ((m, n, k), (m, k, n), (k, n, m)):
            tiles = math.ceil(mm / 128) * math.ceil(nn / 128) * b
            wave = tiles / (math.ceil(tiles / 132) * 132)
            t += max(2 * mm * nn * kk * b / (989.4e12 * wave),
                     2 * (mm * kk + kk * nn + mm * nn) * b / 3.35e12)
            flops += 2 * mm * nn * kk * b
    assert flops == _TP_FLOPS  # Narayanan et al.'s 72bsh^2 + 12bs^2h, split over 8 ranks
    return t
# The 8-byte ring: 2(n-1) = 3,998 steps of 4 us each; or, as the question now asks (on main),
# 498 of them across the 250 nodes at 4 us and 3,500 over NVLink at 1.9 us (NCCL tuning.cc)
_Q = {e.id: e.question for e in exercises("interconnect")}
_RING_MS = ((3500 * 1.9e-6 + 498 * 4e-6) if "250 DGX B200" in _Q.get("ic-8byte-ring-2000", "")
            else 2 * 1999 * 4e-6) * 1e3
# A job on k leaves, one leaf in 8 HDR: it touches one with 1 - (7/8)^k (k = 8), or, as main
# asks, touches none with (7/8)^k over 8 rails x ceil(250 / 32) = 64 leaves
_LEAF_P = (1 - 1 / 8) ** 64 if "touches no HDR" in _Q.get("ic-slow-leaf-probability", "") \
    else 1 - (1 - 1 / 8) ** 8
SOURCED = {
    "ic-nvlink4-per-direction": 900 / 2,
    "ic-ring-1gib-h100": 2 * 7 / 8 * 2 ** 30 / 450e9 * 1e3,
    "ic-busbw-issue212": 275 * 2 * 7 / 8,
    "ic-8byte-ring-2000": _RING_MS,  # the 8 bytes' bandwidth term is negligible
    "ic-hdr-leaf-factor": (400 / 8) / (200 / 8),  # the ring runs at the HDR leaf's rate
    "ic-slow-leaf-probability": _LEAF_P,
    # plus NCCL's 1.9 us per ring step (tuning.cc hwLat, LL128), 2(n-1) = 14 steps each
    "ic-tp-share-h100": (_TP_COMM_S + 4 * 14 * 1.9e-6)
                        / (_TP_COMM_S + 4 * 14 * 1.9e-6 + _tp_layer_compute_s()),
    # DGX B200: NVLink 5 900 GB/s per direction against eight 400 Gb/s NICs per node
    "ic-tp16-cross-node": 900 / (8 * 400 / 8),
}


def test_every_exercise_matches_its_sources(against_sources):
    assert all(math.isfinite(e.answer()) for e in exercises("interconnect"))
    against_sources("interconnect", SOURCED)


def test_link_ladder_keeps_both_conventions():
    ladder = ic.link_ladder().set_index("key")
    # NVIDIA HGX H100 blog: "NVLink bidirectional speed of 900 GB/s" -> 450 GB/s each way.
    assert ladder.loc["nvlink4", "bidirectional_GBps"] == pytest.approx(900)
    assert ladder.loc["nvlink4", "per_direction_GBps"] == pytest.approx(450)
    # NVIDIA MMA4Z00-NS: NDR line rate 400 Gb/s, per direction -> 50 GB/s.
    assert ladder.loc["ib_ndr", "per_direction_GBps"] == pytest.approx(400 / 8)
    assert ladder.loc["ib_ndr", "printed as"] == "per direction"
    # NV-HBI: NVIDIA prints 10 TB/s without a convention; the ladder must not invent one.
    assert np.isnan(ladder.loc["nv_hbi", "per_direction_GBps"])


def test_published_issue_212_against_the_model():
    # nccl-tests issue 212 (NCCL developer): 8 H100, NVLS all-reduce busBw ~480 GB/s at
    # algbw ~275 GB/s; line rate 450 GB/s per direction.
    table = ic.published_vs_model("H100").set_index("quantity")["GBps"]
    assert table["busbw from the published algbw x 2(n-1)/n"] == pytest.approx(480, rel=0.01)
    # PERFORMANCE.md: an ideal ring's busbw equals the per-direction link bandwidth.
    assert table["ring all-reduce busbw bound"] == pytest.approx(450, rel=0.01)
    assert table["line rate per direction (registry)"] < 480 < table["nvls all-reduce busbw bound"]


def test_collective_curves_reach_the_line_rate_and_respect_the_link():
    df = ic.collective_curves("all_reduce", "NVLink 4", 8)
    ring = df[df.algorithm == "ring"]
    # PERFORMANCE.md: ring all-reduce busbw -> link bandwidth at large sizes (450 GB/s).
    assert ring.busbw_GBps.iloc[-1] == pytest.approx(450, rel=0.01)
    assert set(df.algorithm) == {"ring", "tree", "nvls"}
    ib = ic.collective_curves("all_reduce", "IB NDR", 64)
    assert set(ib.algorithm) == {"ring", "tree", "sharp"}
    assert set(ic.collective_curves("all_gather", "IB NDR", 64).algorithm) == {"ring"}
    with pytest.raises(ValueError, match="link"):
        ic.collective_curves(link="NVLink 9")


def test_half_bandwidth_size_of_a_ring_is_n_alpha_b():
    # PERFORMANCE.md ring all-reduce: 2(n-1) a = 2(n-1)/n S/B  <=>  S = n a B.
    n = 8
    bw, a = ic.explorer_link("NVLink 4")
    assert ic.half_bandwidth_size("all_reduce", "NVLink 4", n) == pytest.approx(n * a * bw)


def test_tp_layer_counts_megatron_flops_and_four_all_reduces():
    b, s, h, t = 1, 4096, 5120, 8
    r = ic.tp_layer("H100", hidden=h, heads=40, seq_len=s, micro_batch=b, tp=t)
    # Narayanan et al. 2021 (arXiv:2104.04473): forward + backward of one layer without
    # recomputation = 72 b s h^2 + 12 b s^2 h FLOPs, split over t tensor-parallel GPUs.
    assert r.flops == pytest.approx((72 * b * s * h ** 2 + 12 * b * s ** 2 * h) / t)
    assert r.all_reduce_bytes == b * s * h * 2  # bf16 activations
    ring = comm.collective_time_s("all_reduce", r.all_reduce_bytes, t, 450 * GB,
                                  fabric.NCCL_NVLINK_STEP_S)
    assert r.comm_s == pytest.approx(4 * ring)
    assert r.comm_share == pytest.approx(r.comm_s / (r.compute_s + r.comm_s))
    assert 0 < r.gemm_mfu <= 1
    hidden = ic.tp_layer("H100", overlap=True)
    assert hidden.exposed_comm_s == 0 and hidden.layer_s == pytest.approx(r.compute_s)
    # Exposing exactly the target share after hiding the computed fraction.
    f = r.hidden_fraction_for(0.03)
    exposed = (1 - f) * r.comm_s
    assert exposed / (r.compute_s + exposed) == pytest.approx(0.03)


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(tp=3), ValueError, "tp"),
    (dict(hidden=5100), ValueError, "heads"),
    (dict(overlap="yes"), TypeError, "overlap"),
    (dict(link_efficiency=1.5), ValueError, "link_efficiency"),
    (dict(algorithm="rings"), ValueError, "ring"),
])
def test_tp_layer_bad_input(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        ic.tp_layer("H100", **kwargs)


def test_system_fabrics_come_from_the_registry():
    # NVIDIA GB200 NVL72 page: 72 GPUs in one NVLink domain, NVLink 5 at 1.8 TB/s total
    # (900 GB/s per direction); one 400 Gb/s ConnectX-7 per GPU in the reference design.
    nvl = ic.system_fabric("GB200 NVL72")
    assert nvl.gpus_per_domain == 72 and nvl.scaleup_Bps == 900 * GB
    assert nvl.nic_Bps == 50 * GB and nvl.nics_per_gpu == 1
    dgx = ic.system_fabric("DGX B200", slow_leaf_fraction=0.125, slow_link="HDR")
    assert dgx.gpus_per_domain == 8 and dgx.bottleneck_nic_Bps == 25 * GB  # HDR 200 Gb/s


def test_hierarchical_shard_is_size_over_domain():
    table = ic.hierarchical_table(8e9, total_gpus=576).set_index("fabric")
    assert table.loc["DGX B200", "network shard MB"] == pytest.approx(8e9 / 8 / 1e6)
    assert table.loc["GB200 NVL72", "network shard MB"] == pytest.approx(8e9 / 72 / 1e6)
    assert table.loc["GB200 NVL72", "network_ms"] < table.loc["DGX B200", "network_ms"]
    with pytest.raises(ValueError, match="total_gpus"):
        ic.hierarchical_curves(total_gpus=100)


def test_moe_inside_nvl72_stays_on_nvlink():
    df = ic.moe_curves(ic.moe_dispatch_bytes(4096, 8, 7168))
    df = df.set_index(["fabric", "expert_parallel"])
    assert df.loc[("GB200 NVL72", 64), "network_ms"] == 0
    assert df.loc[("DGX B200", 64), "network_ms"] > 0
    assert ic.moe_dispatch_bytes(4096, 8, 7168) == 4096 * 8 * 7168 * 2


def test_tail_curves_are_seeded_and_congestion_doubles_the_step():
    a = ic.tail_curves(straggler_prob=1e-4)
    assert a.equals(ic.tail_curves(straggler_prob=1e-4))
    p = a.pivot(index="gpus", columns="percentile", values="step_over_ideal")
    assert (p["P99"] >= p["P50"]).all()
    # With every link congested and no jitter, the step is compute + comm (1 + x): the x from
    # congestion_to_double_p99 makes it exactly twice the ideal step.
    c, m = 0.8, 0.2
    x = ic.congestion_to_double_p99(c, m)
    r = fabric.tail_latency([8], c, m, jitter=0.0, straggler_prob=0.0, congested_link_prob=1.0,
                            congestion_slowdown=x, steps=10)
    assert r.p50_s[0] == pytest.approx(2 * (c + m))
    q = ic.congested_link_prob_for(0.99, 2000)
    assert 1 - (1 - q) ** 2000 == pytest.approx(0.01)


def test_megatron_default_bucket():
    # Megatron-LM distributed_data_parallel.py: bucket_size = max(40000000, 1000000 * dp_size).
    assert ic.megatron_default_bucket_elements(10) == 40_000_000
    assert ic.megatron_default_bucket_elements(2000) == 2_000_000_000


def test_buckets_ring_latency_vs_tree():
    df = ic.bucket_curves(gpus=2000, link="NDR", backward_ms=500, buckets=(100e6, 400e6))
    ring = df[df.algorithm == "ring"].set_index("bucket_MB")["exposed_ms"]
    tree = df[df.algorithm == "tree"].set_index("bucket_MB")["exposed_ms"]
    assert ring[100] > ring[400] > tree[400]


def test_hdr_leaf_story_halves_the_network_but_not_the_step():
    s = ic.hdr_leaf_story()
    # rail-optimized: ceil(250 / 32) = 8 leaves on each of a DGX node's 8 rails
    assert s.domains == 250 and s.rails == 8 and s.leaves_per_rail == 8 and s.leaves == 64
    assert s.p_touch_slow_leaf == pytest.approx(1 - (7 / 8) ** 64)
    assert s.hdr_Bps / s.ndr_Bps == pytest.approx(0.5)  # HDR 200 vs NDR 400 Gb/s
    assert 1.0 < s.step_ratio < 2.0
    assert s.comm_mixed_s < 2 * s.comm_healthy_s


def test_tp16_across_two_nodes_is_a_2_25x_cliff_not_18x():
    # DGX B200: NVLink 5 900 GB/s per direction, 8 x 400 Gb/s ConnectX-7 per node (DGX B200
    # user guide). NCCL spreads a ring's channels over all 8 rails: 8 x 50 = 400 GB/s per GPU.
    t = ic.tp_cross_node_table(1e12).set_index("ring")
    inside, across, naive = t["time_ms"]
    assert t["GB/s per GPU per direction"].tolist() == pytest.approx([900, 400, 50])
    assert across / inside == pytest.approx(900 / 400, rel=1e-3)
    assert naive / inside == pytest.approx(18, rel=1e-2)
    # latency: 2 of the 2 x 15 ring steps cross the network (NCCL tuning.cc: nInterSteps)
    assert t["latency_us"].iloc[1] == pytest.approx(28 * 1.9 + 2 * 4.0)
    assert check("ic-tp16-cross-node", 2.25)


def test_ring_latency_is_nccls_tuning_model_everywhere():
    # NCCL src/graph/tuning.cc, ring: (nsteps - nInterSteps) intraLat + nInterSteps interLat
    # with nsteps = 2(nRanks-1), nInterSteps = 2(nNodes-1), LL128 1.9 us NVLink, 4.0 us network;
    # tree: 2((nRanks/nNodes - 1) intraLat + log2i(nNodes) interLat) at 1.25 and 8.5 us.
    f = ic.bucket_fabric("NDR")
    ring_s = (2 * 1999 - 2 * 249) * 1.9e-6 + 2 * 249 * 4.0e-6
    tree_s = 2 * (7 * 1.25e-6 + 7 * 8.5e-6)
    assert fabric.all_reduce_latency_s(f, 250) == pytest.approx(ring_s)
    assert fabric.all_reduce_latency_s(f, 250, "tree") == pytest.approx(tree_s)
    # the exercise, the claim and the bucket explorer agree with it
    assert get("ic-8byte-ring-2000").answer() == pytest.approx(ring_s * 1e3, rel=1e-6)
    c = claims.evaluate("allreduce-8-bytes-bandwidth-scaling")
    assert f"{ring_s * 1e3:.1f} ms" in c.detail and c.verdict == "wrong"
    one = ic.bucket_curves(gpus=2000, grad_bytes=1e3, backward_ms=0.0, buckets=(1e3,))
    ring = one.set_index("algorithm")["exposed_ms"]
    assert ring["ring"] == pytest.approx(ring_s * 1e3, rel=1e-3)
    assert ring["tree"] == pytest.approx(tree_s * 1e3, rel=1e-3)


def test_switch_reductions_at_their_published_gains():
    # nccl-tests issue 212: ring 370 GB/s of 450; NVLS busbw 480 GB/s where the bound is 700.
    assert comm.published_efficiency("nvls", "nvlink") == pytest.approx(480 / 700)
    assert comm.published_efficiency("ring", "nvlink") == pytest.approx(370 / 450)
    with pytest.raises(ValueError, match="no published efficiency"):
        comm.published_efficiency("tree", "nvlink")
    measured = ic.tp_share_curves(algorithm="nvls").set_index(["gpu", "hidden"])["comm_share"]
    ideal = ic.tp_share_curves(algorithm="nvls", bandwidth="line rate").set_index(
        ["gpu", "hidden"])["comm_share"]
    assert (measured > ideal).all()
    # SHARP halves the network traffic (S/B instead of 2(n-1)/n S/B) but runs at 80% of the
    # line rate (nccl issue 320) against the ring's 94% (46-48 GB/s per NDR NIC, nccl-tests 290)
    big = {}
    for alg in ("ring", "sharp"):
        c = ic.hierarchical_curves(inter_algorithm=alg)
        big[alg] = c[(c.fabric == "DGX hier.") & (c.size_bytes == 2 ** 34)]["network_ms"].item()
    d = 72
    # (the ring also pays 2(d-1) network latency steps: 0.6% of this 2 GiB shard)
    assert big["ring"] / big["sharp"] == pytest.approx(2 * (d - 1) / d * 0.8 / 0.94, rel=1e-2)


def test_default_jitter_is_a_labelled_assumption():
    assert fabric.ASSUMED_JITTER == 0.02
    r = fabric.tail_latency([2048], 1.0, straggler_prob=0.0, steps=4000)
    # the maximum of n Exp(1) draws has median about ln n + 0.37 (Gumbel): noise alone
    assert r.p50_s[0] == pytest.approx(1 + 0.02 * (math.log(2048) + 0.3665), rel=0.01)
