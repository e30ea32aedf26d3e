"""Tests of companion.comm (alpha-beta collectives, nccl-tests conventions) and
companion.fabric (topology, mixed links, tail latency, gradient buckets)."""
import math
import time

import numpy as np
import pytest

from companion import comm, fabric

GB = 1e9
GIB = 1 << 30


# --- nccl-tests conventions ---------------------------------------------------------------
# Source: nccl-tests doc/PERFORMANCE.md, "Summary" (AllReduce 2(n-1)/n, ReduceScatter and
# AllGather (n-1)/n, Broadcast and Reduce 1, AlltoAll (n-1)/n),
# https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md, and the *GetBw
# functions of nccl-tests src/ (SendRecvGetBw: factor 1).
NCCL_TESTS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


@pytest.mark.parametrize("op", comm.OPS)
def test_bus_factor_matches_nccl_tests(op):
    for n in (1, 2, 3, 4, 8, 16, 72, 1024):
        assert comm.bus_factor(op, n) == pytest.approx(NCCL_TESTS_FACTOR[op](n))
    ns = np.array([2, 8, 64])
    np.testing.assert_allclose(comm.bus_factor(op, ns), [NCCL_TESTS_FACTOR[op](n) for n in ns])


def test_algbw_busbw_definitions():
    # algbw = S / t; busbw = algbw * factor (PERFORMANCE.md).
    assert comm.algo_bandwidth(1 * GB, 0.01) == pytest.approx(100 * GB)
    assert comm.bus_bandwidth("all_reduce", 1 * GB, 8, 0.01) == pytest.approx(175 * GB)
    assert comm.bus_bandwidth("all_gather", 1 * GB, 8, 0.01) == pytest.approx(87.5 * GB)
    sizes = np.array([1e6, 1e9])
    np.testing.assert_allclose(comm.algo_bandwidth(sizes, np.array([1e-3, 1e-1])), [1e9, 1e10])


def test_published_h100_nvls_busbw_factor():
    # NCCL maintainer, nccl-tests issue 212 (https://github.com/NVIDIA/nccl-tests/issues/212):
    # "On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)".
    busbw = comm.bus_bandwidth("all_reduce", 275 * GB, 8, 1.0)
    assert busbw == pytest.approx(480 * GB, rel=0.01)


@pytest.mark.parametrize("n", [2, 3, 8, 72, 1000])
def test_ring_all_reduce_zero_latency(n):
    size, bw = 3.0 * GIB, 450 * GB
    expected = 2 * (n - 1) / n * size / bw  # PERFORMANCE.md: t = (S/B) * 2(n-1)/n
    assert comm.collective_time_s("all_reduce", size, n, bw, 0.0) == pytest.approx(expected)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                "reduce", "all_to_all", "send_recv"])
def test_ideal_busbw_equals_link_bandwidth_for_any_n(op):
    # The point of busbw (PERFORMANCE.md): with the bandwidth-optimal algorithm it equals the
    # per-rank link bandwidth, independently of the number of ranks.
    bw = 450 * GB
    for n in (2, 4, 8, 64):
        t = comm.collective_time_s(op, 1 * GIB, n, bw, 0.0)
        assert comm.bus_bandwidth(op, 1 * GIB, n, t) == pytest.approx(bw)


def test_h100_nvlink4_ring_cannot_exceed_line_rate_but_nvls_can():
    # nccl-tests issue 212 (NCCL maintainer): NVLink 4 line rate 450 GB/s per direction; ring
    # gets ~370 GB/s effective (~20% protocol overhead); NVLS all-reduce reaches ~480 GB/s
    # busbw on 8 H100, above the line rate.
    line, n, alpha = 450 * GB, 8, 2e-6
    sizes = np.logspace(3, 34, 32, base=2)
    ring = comm.bus_bandwidth("all_reduce", sizes, n,
                              comm.collective_time_s("all_reduce", sizes, n, line, alpha))
    assert np.all(ring <= line)
    assert ring[-1] == pytest.approx(line, rel=0.01)  # 16 GiB: latency negligible
    # The maintainer's ~370 GB/s effective ring bandwidth is ~82% of the line rate.
    assert 370 / 450 == pytest.approx(0.8, abs=0.03)
    nvls_bound = comm.bus_bandwidth("all_reduce", 16 * GIB, n, comm.collective_time_s(
        "all_reduce", 16 * GIB, n, line, alpha, algorithm="nvls"))
    measured_nvls_busbw = 480 * GB
    assert line < measured_nvls_busbw < nvls_bound
    # NVLS moves (n+1)/n S per direction instead of 2(n-1)/n S: bound 2(n-1)/(n+1) B.
    assert nvls_bound == pytest.approx(2 * (n - 1) / (n + 1) * line, rel=1e-3)


def test_tree_matches_nccl_tuning_model():
    # NCCL src/graph/tuning.cc: tree algorithm bandwidth = busBw * 0.5 (t_bw = 2 S/B) and
    # latency 2 * log2i(nNodes) * interLat, log2i rounding down: 2000 ranks, 10 levels
    bw, a = 25 * GB, 5e-6
    for n, levels in ((2, 1), (16, 4), (1024, 10), (2000, 10)):
        t = comm.collective_time_s("all_reduce", 1e9, n, bw, a, algorithm="tree")
        assert t == pytest.approx(2 * levels * a + 2 * 1e9 / bw)
    # Small messages on many ranks: the tree's log latency wins; big messages on few: ring.
    small = [comm.collective_time_s("all_reduce", 1e4, 2048, bw, a, algorithm=al)
             for al in ("ring", "tree")]
    big = [comm.collective_time_s("all_reduce", 1e10, 8, bw, a, algorithm=al)
           for al in ("ring", "tree")]
    assert small[1] < small[0] and big[0] < big[1]


def test_ring_step_latencies_are_nccl_hwlat():
    # NCCL src/graph/tuning.cc at b647562, hwLat, Ring (LL/LL128/Simple) in us:
    # NVLINK { .6, 1.9, 3.4 }, NET { 2.7, 4.0, 14.0 }; the models price LL128
    us = {p: tuple(round(s * 1e6, 2) for s in v) for p, v in fabric.NCCL_RING_STEP_S.items()}
    assert us == {"LL": (0.6, 2.7), "LL128": (1.9, 4.0), "Simple": (3.4, 14.0)}
    # Tree (LL/LL128/Simple): NVLINK { .6, 1.25, 4.0 }, NET { 5.0, 8.5, 14 }
    assert (fabric.NCCL_TREE_NVLINK_STEP_S, fabric.NCCL_TREE_NET_STEP_S) == (1.25e-6, 8.5e-6)
    assert (fabric.NCCL_NVLINK_STEP_S, fabric.NCCL_NET_STEP_S) == fabric.NCCL_RING_STEP_S["LL128"]
    with pytest.raises(TypeError):
        fabric.NCCL_RING_STEP_S["LL128"] = (0.0, 0.0)


def test_other_formulas():
    bw, a, s = 100 * GB, 1e-6, 8e8
    assert comm.collective_time_s("all_gather", s, 4, bw, a) == pytest.approx(3 * a + 0.75 * s / bw)
    assert comm.collective_time_s("broadcast", s, 4, bw, a) == pytest.approx(3 * a + s / bw)
    assert comm.collective_time_s("all_to_all", s, 4, bw, a) == pytest.approx(a + 0.75 * s / bw)
    assert comm.collective_time_s("send_recv", s, 2, bw, a) == pytest.approx(a + s / bw)
    sharp = comm.collective_time_s("all_reduce", s, 4, bw, a, "sharp")
    assert sharp == pytest.approx(2 * a + s / bw)
    assert comm.collective_time_s("all_reduce", s, 1, bw, a) == 0.0
    # one rank communicates nothing, a send to itself included
    assert comm.collective_time_s("send_recv", s, 1, bw, a) == 0.0


def test_vectorised_over_sizes_and_ranks():
    sizes = np.array([0.0, 1e6, 1e9])
    t = comm.collective_time_s("all_reduce", sizes, 8, 50 * GB, 1e-5)
    assert t.shape == (3,) and np.all(np.diff(t) > 0)
    ns = np.array([2, 8, 64])
    t2 = comm.collective_time_s("all_reduce", 1e9, ns, 50 * GB, 0.0)
    np.testing.assert_allclose(t2, 2 * (ns - 1) / ns * 1e9 / (50 * GB))
    assert isinstance(comm.collective_time_s("all_reduce", 1e9, 8, 50 * GB, 0.0), float)


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(n=0), ValueError, "n must be >= 1"),
    (dict(n=-3), ValueError, "n must be >= 1"),
    (dict(n=2.5), TypeError, "integer"),
    (dict(n=np.array([2, 0])), ValueError, "n must be >= 1"),
    (dict(size_bytes=-1), ValueError, "size_bytes must be >= 0"),
    (dict(size_bytes=np.array([1.0, np.nan])), ValueError, "finite"),
    (dict(size_bytes="1GB"), TypeError, "size_bytes"),
    (dict(op="allreduce"), ValueError, "all_reduce"),
    (dict(algorithm="rings"), ValueError, "ring"),
    (dict(op="all_gather", algorithm="tree"), ValueError, "allowed for all_gather: ring"),
    (dict(bandwidth_Bps=0), ValueError, "bandwidth_Bps"),
    (dict(latency_s=-1e-6), ValueError, "latency_s"),
])
def test_bad_input(kwargs, exc, words):
    args = dict(op="all_reduce", size_bytes=1e6, n=8, bandwidth_Bps=1e9, latency_s=0.0)
    args.update(kwargs)
    with pytest.raises(exc, match=words):
        comm.collective_time_s(**args)


def test_bad_bandwidth_inputs():
    with pytest.raises(ValueError, match="seconds"):
        comm.algo_bandwidth(1e6, 0.0)
    with pytest.raises(ValueError, match="unknown op"):
        comm.bus_factor("alltoall", 8)


def test_fit_alpha_beta_recovers_line():
    sizes = np.logspace(10, 26, 9, base=2)
    alpha, beta = 30e-6, 1 / (20 * GB)
    fit = comm.fit_alpha_beta(sizes, alpha + beta * sizes)
    assert fit.alpha_s == pytest.approx(alpha) and fit.beta_s_per_byte == pytest.approx(beta)
    assert fit.r2 == pytest.approx(1.0) and fit.bandwidth_Bps == pytest.approx(20 * GB)
    assert fit.time_s(1e6) == pytest.approx(alpha + beta * 1e6)
    with pytest.raises(ValueError, match="two distinct sizes"):
        comm.fit_alpha_beta([1e6, 1e6], [1e-3, 1e-3])
    with pytest.raises(ValueError, match="> 0"):
        comm.fit_alpha_beta([1e3, 1e6], [1e-3, -1.0])


# --- fabric -------------------------------------------------------------------------------
# InfiniBand rates: NDR 400 Gb/s and HDR 200 Gb/s per 4x port (NVIDIA DGX SuperPOD NDR
# overview, docs.nvidia.com/dgx-superpod/design-guide-cabling-data-centers/latest/
# ndr-overview.html) -> 50e9 and 25e9 bytes/s per direction. NVLink 4: 450e9 per direction
# (nccl-tests issue 212).
NDR_BPS, HDR_BPS, NVLINK4_BPS = 400e9 / 8, 200e9 / 8, 450e9


def hgx(**kw):
    return fabric.Fabric(gpus_per_domain=8, scaleup_Bps=NVLINK4_BPS, nic_Bps=NDR_BPS, **kw)


def test_hdr_leaf_halves_the_ring_not_the_average():
    healthy = hgx()
    mixed = hgx(slow_leaf_fraction=0.05, slow_nic_Bps=HDR_BPS)
    size, d = 14e9, 250  # bf16 grads of a 7B model over 2000 GPUs
    h = fabric.hierarchical_all_reduce_time_s(size, healthy, d)
    m = fabric.hierarchical_all_reduce_time_s(size, mixed, d)
    bw_part = lambda f: 2 * (d - 1) / d * size / 8 / fabric.scaleout_ring_Bps(f)
    assert bw_part(mixed) == pytest.approx(2 * bw_part(healthy))  # the seed's "50%"
    assert m.scaleout_s > 1.9 * h.scaleout_s - 1e-3
    assert m.scaleup_s == pytest.approx(h.scaleup_s)
    assert mixed.naive_average_nic_Bps() == pytest.approx(0.95 * NDR_BPS + 0.05 * HDR_BPS)
    assert fabric.slow_leaf_probability(0.05, 8) == pytest.approx(1 - 0.95 ** 8)


def test_oversubscription_hurts_all_to_all_not_rings():
    flat, over = hgx(domains_per_leaf=4), hgx(domains_per_leaf=4, oversubscription=2.0)
    assert fabric.scaleout_ring_Bps(over) == fabric.scaleout_ring_Bps(flat)
    assert fabric.scaleout_all_to_all_Bps(over, 1) == fabric.scaleout_all_to_all_Bps(flat, 1)
    # 64 domains, 4 per leaf: 60 of 63 peers are across leaves, each up-link half as thick.
    frac = fabric.cross_leaf_fraction(over, 64)
    assert frac == pytest.approx(60 / 63)
    assert fabric.scaleout_all_to_all_Bps(over, 64) == pytest.approx(NDR_BPS / (2 * frac))


def test_hierarchical_reduces_to_ring_in_one_domain_and_flat_ring_bandwidth():
    f = hgx()
    one = fabric.hierarchical_all_reduce_time_s(1e9, f, 1)
    assert one.total_s == pytest.approx(comm.collective_time_s(
        "all_reduce", 1e9, 8, NVLINK4_BPS, f.scaleup_latency_s))
    # A flat ring across nodes is limited by the node's 8 NICs, not one NIC: min(450, 8*50).
    t = fabric.flat_ring_all_reduce_time_s(np.array([1e9]), fabric.Fabric(
        8, NVLINK4_BPS, NDR_BPS, scaleup_latency_s=0, net_latency_s=0), 4)
    assert t[0] == pytest.approx(2 * 31 / 32 * 1e9 / (8 * NDR_BPS))
    # Same bandwidth term as hierarchical; hierarchical has fewer latency steps.
    h = fabric.hierarchical_all_reduce_time_s(1e3, f, 64).total_s
    assert h < fabric.flat_ring_all_reduce_time_s(1e3, f, 64)
    sharp = fabric.hierarchical_all_reduce_time_s(1e9, f, 64, inter_algorithm="sharp")
    assert sharp.scaleout_s == pytest.approx(2 * f.net_latency_s + 1e9 / 8 / NDR_BPS)
    with pytest.raises(ValueError, match="inter_algorithm"):
        fabric.hierarchical_all_reduce_time_s(1e9, f, 64, inter_algorithm="nvls")


def test_moe_all_to_all():
    f = hgx()
    inside = fabric.moe_all_to_all_time_s(1e8, 8, f)
    assert inside.total_s == pytest.approx(comm.collective_time_s(
        "all_to_all", 1e8, 8, NVLINK4_BPS, f.scaleup_latency_s))
    across = fabric.moe_all_to_all_time_s(np.array([1e8, 2e8]), 64, f)
    assert np.all(across.scaleout_s > across.scaleup_s)  # NICs are 9x thinner than NVLink
    assert across.total_s[0] == pytest.approx(f.net_latency_s + 1e8 * 56 / 64 / NDR_BPS)
    nvl72 = fabric.Fabric(72, 900e9, NDR_BPS)
    assert fabric.moe_all_to_all_time_s(1e8, 64, nvl72).scaleout_s == 0.0
    # 12 GPUs on 8-GPU boards: 8 + 4. The worst member has 3 peers beside it and sends 8/12
    # of its bytes over the network; the best has 7 NVLink peers (issue 12: fractional domains)
    part = fabric.moe_all_to_all_time_s(1e8, 12, f)
    assert part.scaleout_s == pytest.approx(f.net_latency_s + 1e8 * 8 / 12 / NDR_BPS)
    assert part.scaleup_s == pytest.approx(f.scaleup_latency_s + 1e8 * 7 / 12 / NVLINK4_BPS)


@pytest.mark.parametrize("kw, words", [
    (dict(gpus_per_domain=0), "gpus_per_domain"),
    (dict(nic_Bps=-1), "nic_Bps"),
    (dict(oversubscription=0.5), "oversubscription"),
    (dict(slow_leaf_fraction=0.1), "slow_nic_Bps"),
    (dict(slow_leaf_fraction=1.5, slow_nic_Bps=1e9), "slow_leaf_fraction"),
])
def test_fabric_validation(kw, words):
    args = dict(gpus_per_domain=8, scaleup_Bps=NVLINK4_BPS, nic_Bps=NDR_BPS)
    args.update(kw)
    with pytest.raises(ValueError, match=words):
        fabric.Fabric(**args)


# --- tail latency -------------------------------------------------------------------------
def test_tail_latency_seeded_fast_and_growing():
    sizes = [8, 64, 512, 4096]
    t0 = time.perf_counter()
    a = fabric.tail_latency(sizes, 1.0, 0.2, straggler_prob=1e-3, seed=7)
    assert time.perf_counter() - t0 < 1.0
    b = fabric.tail_latency(sizes, 1.0, 0.2, straggler_prob=1e-3, seed=7)
    c = fabric.tail_latency(sizes, 1.0, 0.2, straggler_prob=1e-3, seed=8)
    np.testing.assert_array_equal(a.p99_s, b.p99_s)
    assert not np.array_equal(a.p50_s, c.p50_s)
    assert np.all(np.diff(a.p99_s) >= 0) and a.p99_s[-1] > a.p99_s[0]
    assert np.all(np.diff(a.p50_s) > 0)


def test_tail_latency_against_closed_forms():
    # No stragglers: step = c (1 + j max of n Exp(1)); E[max] is the harmonic number H_n.
    r = fabric.tail_latency([1, 16, 1024], 1.0, jitter=0.1, straggler_prob=0.0, steps=20000)
    h = np.array([sum(1 / k for k in range(1, n + 1)) for n in (1, 16, 1024)])
    np.testing.assert_allclose(r.mean_s, 1 + 0.1 * h, rtol=0.01)
    # P(no straggler among n) = (1-p)^n: with p = 1e-3, 8 GPUs keep the P99 clean
    # (0.8% < 1%), 4096 GPUs have a straggler in 98% of steps, so even the median doubles.
    r = fabric.tail_latency([8, 4096], 1.0, jitter=0.0, straggler_prob=1e-3, steps=5000)
    assert r.p99_s[0] == pytest.approx(1.0) and r.p50_s[1] == pytest.approx(2.0)
    ideal = fabric.tail_latency([4096], 1.0, 0.5, jitter=0.0, straggler_prob=0.0)
    assert ideal.p99_s[0] == ideal.ideal_s == 1.5
    # Congested links: the chance some link of an n-link ring is congested is 1-(1-q)^n.
    r = fabric.tail_latency([1000], 1.0, 1.0, jitter=0, straggler_prob=0,
                            congested_link_prob=1e-3, steps=20000, seed=3)
    assert (r.mean_s[0] - 2.0) == pytest.approx(1 - 0.999 ** 1000, abs=0.02)


def test_tail_latency_bad_input():
    with pytest.raises(ValueError, match="cluster_sizes must be >= 1"):
        fabric.tail_latency([0, 8], 1.0)
    with pytest.raises(ValueError, match="straggler_prob"):
        fabric.tail_latency([8], 1.0, straggler_prob=1.5)
    with pytest.raises(ValueError, match="compute_s"):
        fabric.tail_latency([8], 0.0)


# --- gradient buckets ---------------------------------------------------------------------
def _simulate_buckets(grad, bucket, bwd, c_of):
    nb = math.ceil(grad / bucket)
    return _simulate_pieces(c_of(grad / nb), bwd, nb, 1, 0.0, 1)


def test_bucketed_exposure_by_hand():
    # 5 buckets of 6 ms behind a 30 ms pass: each waits for 6 ms of gradients and takes 6 ms,
    # so only the last one is left: 6 ms
    assert fabric.bucketed_exposed_s(6.0, 30.0, 5) == pytest.approx(6.0)
    assert fabric.bucketed_exposed_s(30.0, 30.0, 1) == pytest.approx(30.0)  # no overlap
    # too much to hide: the stream is busy from the first bucket on (4 + 40 - 20)
    assert fabric.bucketed_exposed_s(8.0, 20.0, 5) == pytest.approx(24.0)
    # an unbucketed earlier chunk (interleaved pipeline) leaves at the middle of the window:
    # 12 ms sent from 10 ms, then two 3 ms buckets ready at 15 and 20 ms: 22 + 3 + 3 - 20
    assert fabric.bucketed_exposed_s(3.0, 20.0, 2, chunks=2, chunk_s=12.0) == pytest.approx(8.0)
    assert fabric.megatron_default_bucket_params(10) == 40_000_000
    assert list(fabric.megatron_default_bucket_params([64, 512])) == [64_000_000, 512_000_000]


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"n_buckets": 0}, ValueError, "n_buckets must be"),
    ({"n_buckets": 2.5}, ValueError, "whole numbers"),
    ({"chunks": 0}, ValueError, "chunks must be"),
    ({"passes": 1.5}, ValueError, "passes must be whole"),
    ({"bucket_s": -1.0}, ValueError, "bucket_s must be finite and >= 0"),
    ({"window_s": float("nan")}, ValueError, "window_s must be finite"),
    ({"chunk_s": -0.1}, ValueError, "chunk_s must be finite and >= 0"),
    ({"bucket_s": "6"}, TypeError, "bucket_s must be a number"),
    ({"n_buckets": [1, 0]}, ValueError, "n_buckets must be"),
])
def test_bucketed_exposure_refuses_bad_input(kwargs, exc, words):
    # before, 0 buckets gave inf, 2.5 buckets a number, a negative send time a negative
    # exposure and NaN passed through
    args = {"bucket_s": 6.0, "window_s": 30.0, "n_buckets": 5} | kwargs
    with pytest.raises(exc, match=words):
        fabric.bucketed_exposed_s(**args)
    # numpy integers and whole floats are whole numbers
    assert fabric.bucketed_exposed_s(6.0, 30.0, np.int64(5), passes=2.0) == pytest.approx(
        fabric.bucketed_exposed_s(6.0, 30.0, 5, passes=2))


def _simulate_pieces(bucket, window, k, chunks, chunk_s, passes):
    pieces = []
    for p in range(passes):
        base = p * window
        pieces += [(base + j * window / chunks, chunk_s) for j in range(1, chunks)]
        pieces += [(base + (chunks - 1) * window / chunks + i * window / (chunks * k), bucket)
                   for i in range(1, k + 1)]
    end = 0.0
    for ready, send in sorted(pieces):
        end = max(end, ready) + send
    return end - passes * window


@pytest.mark.parametrize("bucket, window, k, chunks, chunk_s, passes", [
    (1.0, 30.0, 5, 1, 0.0, 1), (9.0, 30.0, 5, 1, 0.0, 1), (2.0, 10.0, 3, 4, 2.5, 1),
    (0.5, 10.0, 3, 4, 4.0, 1), (0.2, 10.0, 4, 4, 3.0, 1), (1.0, 8.0, 4, 1, 0.0, 3),
    (3.0, 8.0, 4, 1, 0.0, 3), (0.5, 12.0, 2, 3, 5.0, 4), (4.0, 12.0, 2, 3, 1.0, 4)])
def test_bucketed_exposure_matches_a_send_by_send_simulation(bucket, window, k, chunks,
                                                             chunk_s, passes):
    got = fabric.bucketed_exposed_s(bucket, window, k, chunks=chunks, chunk_s=chunk_s,
                                    passes=passes)
    assert got == pytest.approx(_simulate_pieces(bucket, window, k, chunks, chunk_s, passes))


def test_bucket_tradeoff_closed_form_and_u_shape():
    n, bw, a, grad, bwd = 256, NDR_BPS, 10e-6, 14e9, 1.0
    buckets = np.array([1e6, 5e6, 25e6, 100e6, 400e6, 2e9, 14e9])
    plan = fabric.bucket_tradeoff(grad, buckets, bwd, n, bw, a)
    c_of = lambda s: comm.collective_time_s("all_reduce", s, n, bw, a)
    brute = [_simulate_buckets(grad, b, bwd, c_of) for b in buckets]
    np.testing.assert_allclose(plan.exposed_s, brute, rtol=1e-9)
    best = int(np.argmin(plan.exposed_s))
    assert 0 < best < len(buckets) - 1  # too small: latency; too big: last bucket exposed
    assert plan.n_buckets[-1] == 1 and plan.exposed_s[-1] == pytest.approx(plan.per_bucket_s[-1])
    with pytest.raises(ValueError, match="bucket_bytes"):
        fabric.bucket_tradeoff(grad, [0.0], bwd, n, bw, a)


def test_rail_optimized_leaves_and_flat_tree():
    # A DGX node's 8 NICs sit on 8 rails; 250 nodes at 32 per leaf: ceil(250/32) = 8 per rail.
    f = fabric.Fabric(gpus_per_domain=8, scaleup_Bps=900e9, nic_Bps=50e9)
    assert fabric.rails(f) == 8 and fabric.job_leaves(f, 250) == 64
    assert fabric.job_leaves(f, 32) == 8 and fabric.job_leaves(f, 33) == 16
    # NCCL's tree bus bandwidth is half its algorithm bandwidth: 2 S / B at large sizes
    big = 1e12
    t = fabric.flat_all_reduce_time_s(big, f, 4, "tree")
    assert t == pytest.approx(2 * big / 400e9, rel=1e-4)  # plus 51 us of tree latency
    assert fabric.all_reduce_latency_s(f, 1) == pytest.approx(14 * 1.9e-6)  # one node: NVLink
    with pytest.raises(ValueError, match="algorithm"):
        fabric.flat_all_reduce_time_s(1.0, f, 2, "sharp")


# --- bad input: a clear error naming the parameter ------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: fabric.all_reduce_latency_s(None, 4),
    lambda: fabric.flat_Bps(None, 4),
    lambda: fabric.rails(None),
    lambda: fabric.job_leaves(None, 4),
    lambda: fabric.cross_domain_ring_slowdown(None, 1e9, 16),
    lambda: fabric.flat_all_reduce_time_s(1e9, "DGX B200", 2),
])
def test_fabric_functions_want_a_fabric(call):
    with pytest.raises(TypeError, match="fabric must be a companion.fabric.Fabric") as e:
        call()
    # the suggested ways of getting one exist and work
    assert "system_fabric('DGX B200')" in str(e.value)
    from companion.explore.interconnect import system_fabric
    assert isinstance(system_fabric("DGX B200"), fabric.Fabric)


def test_p99_slowdown_wants_a_tail_latency():
    with pytest.raises(TypeError, match="result must be a TailLatency"):
        fabric.p99_slowdown(None)
    r = fabric.tail_latency([8], 1.0, jitter=0.0, straggler_prob=0.0, steps=10)
    assert fabric.p99_slowdown(r)[0] == pytest.approx(1.0)


@pytest.mark.parametrize("d, error", [(0, ValueError), (-3, ValueError), (2.5, TypeError),
                                      (None, TypeError), (2 ** 40, ValueError)])
def test_flat_bandwidth_needs_a_domain_count(d, error):
    with pytest.raises(error, match=r"\bd must be"):
        fabric.flat_Bps(hgx(), d)
    assert fabric.flat_Bps(hgx(), 1) == NVLINK4_BPS
    assert fabric.flat_Bps(hgx(), 2) == min(NVLINK4_BPS, 8 * NDR_BPS)


def test_alpha_beta_fit_never_predicts_negative_times():
    # a free line through these would have a negative latency (first) or a negative per-byte
    # cost (second); the fit keeps both >= 0: the best line through the origin, or flat
    through_origin = comm.fit_alpha_beta([1e3, 1e6, 1e9], [1e-3, 1e-6, 1e-1])
    assert through_origin.alpha_s == 0 and through_origin.beta_s_per_byte > 0
    assert through_origin.time_s(0) == 0
    flat = comm.fit_alpha_beta([1e3, 1e6, 1e9], [3e-3, 2e-3, 1e-3])
    assert flat.beta_s_per_byte == 0 and 1e-3 < flat.alpha_s < 3e-3
    with pytest.raises(ValueError, match="alpha_s must be >= 0"):
        comm.AlphaBetaFit(-1e-5, 1e-9, 1.0, 3)
    # a line through the origin: rounding may put alpha a hair below 0; it is taken as 0
    sizes = np.array([1e3, 1e6, 1e9])
    fit = comm.fit_alpha_beta(sizes, sizes / (20 * GB))
    assert fit.alpha_s >= 0 and fit.time_s(0) >= 0
    assert fit.beta_s_per_byte == pytest.approx(1 / (20 * GB))


@pytest.mark.parametrize("all_reduce_s, error, words", [
    (5, TypeError, "all_reduce_s must be a function"),
    (lambda size: -size / 1e9, ValueError, r"all_reduce_s\(bucket bytes\) must be finite and >= 0"),
    (lambda size: size * math.nan, ValueError, r"all_reduce_s\(bucket bytes\)"),
    (lambda size: "fast", TypeError, r"all_reduce_s\(bucket bytes\)"),
    (lambda size: np.ones(5), ValueError, "one time per bucket size"),
])
def test_bucket_plan_checks_its_all_reduce_function(all_reduce_s, error, words):
    with pytest.raises(error, match=words):
        fabric.bucket_plan(1e9, [1e7, 1e8], 1.0, all_reduce_s)
    plan = fabric.bucket_plan(1e9, [1e7, 1e8], 1.0, lambda size: 1e-4 + size / 50e9)
    assert np.all(plan.exposed_s > 0)


@pytest.mark.parametrize("n, error", [([2, 4], TypeError), (np.array([2, 4]), TypeError),
                                      (2.5, TypeError), (True, TypeError), (0, ValueError)])
def test_ring_steps_needs_one_rank_count(n, error):
    with pytest.raises(error, match=r"\bn must be"):
        comm.ring_steps("all_reduce", n)
    assert comm.ring_steps("all_reduce", np.int64(8)) == 14 == comm.ring_steps("all_reduce", 8.0)


def test_megatron_buckets_give_the_remainder_its_own_bucket():
    # Megatron-Core's _ParamAndGradBuffer closes a bucket once it holds bucket_size
    # parameters and puts what is left in a new bucket: 1.4e7 in buckets of 1e7 is two
    from companion import fabric
    assert fabric.megatron_bucket_count(1.4e7, 1e7) == 2
    assert fabric.megatron_bucket_count(2.0e7, 1e7) == 2
    assert fabric.megatron_bucket_count(1.0, 4e7) == 1
    with pytest.raises(ValueError, match="bucket_params"):
        fabric.megatron_bucket_count(1e9, 0)
