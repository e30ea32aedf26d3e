"""Fabrics: scale-up domains, rails, fat trees, mixed link generations and tail latency.

Builds on the alpha-beta costs of :mod:`companion.comm`. A :class:`Fabric` describes what
a job runs on: scale-up domains (8 GPUs on an HGX board, 72 in an NVL72 rack) joined by
NVLink, and a scale-out fat tree reached through ``nics_per_gpu`` NICs per GPU (rails).
All bandwidths are per GPU or per NIC, **per direction**, in bytes/s (400 Gb/s NDR is
50e9 B/s per direction); the numbers come from the caller (for example the hardware
registry), never from this module.

Two effects the averages hide:

- A ring is as fast as its slowest link. If any leaf the job spans still runs the older
  generation (an HDR leaf, 200 Gb/s, in an NDR fabric), every ring passes through it and the
  whole all-reduce runs at the HDR rate, not at a weighted average of the two.
- A synchronous step waits for its slowest participant, so rare stragglers that do not move
  the mean set the P99 step time of a large job (:func:`tail_latency`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from companion import checks
from companion.comm import _out, _ranks, _sizes, collective_time_s
from companion.moe import group_span

# Per-step latencies of NCCL's own tuning model (src/graph/tuning.cc, table hwLat, in
# https://github.com/NVIDIA/nccl at b647562, a release with Blackwell entries): a ring step per
# protocol, (NVLink, network). The models price LL128, the protocol NCCL picks for most
# training-sized messages: a ring step costs 1.9 us over NVLink and 4.0 us over the network, a
# tree level 1.25 us and 8.5 us (unchanged since 2020; LL and Simple were 0.47 and 9.6 us then).
# NCCL adds a fixed per-call baseLat on top, which these models leave out. Defaults only;
# pass measured values when you have them.
NCCL_RING_STEP_S = MappingProxyType({"LL": (0.6e-6, 2.7e-6), "LL128": (1.9e-6, 4.0e-6),
                                     "Simple": (3.4e-6, 14.0e-6)})
NCCL_NVLINK_STEP_S, NCCL_NET_STEP_S = NCCL_RING_STEP_S["LL128"]
NCCL_TREE_NVLINK_STEP_S = 1.25e-6
NCCL_TREE_NET_STEP_S = 8.5e-6
FLAT_ALGORITHMS = ("ring", "tree")


@dataclass(frozen=True)
class Fabric:
    """A job's interconnect. Bandwidths in bytes/s per direction; latencies per step.

    ``gpus_per_domain``: GPUs joined by the scale-up fabric (8 for HGX, 72 for NVL72).
    ``scaleup_Bps``: one GPU's NVLink bandwidth per direction (450e9 for NVLink 4).
    ``nic_Bps``: one NIC's line rate per direction; ``nics_per_gpu``: rails per GPU.
    ``oversubscription``: leaf down-link to up-link capacity ratio (1 = non-blocking).
    ``domains_per_leaf``: domains under one rail leaf switch; 32 is a 64-port switch with
    half its ports down (for example a 64-port NDR Quantum-2 switch).
    ``slow_leaf_fraction``: share of the job's leaves on an older generation whose NIC
    links run at ``slow_nic_Bps`` (for example HDR, 25e9, in an NDR fabric).
    """
    gpus_per_domain: int
    scaleup_Bps: float
    nic_Bps: float
    nics_per_gpu: float = 1.0
    scaleup_latency_s: float = NCCL_NVLINK_STEP_S
    net_latency_s: float = NCCL_NET_STEP_S
    oversubscription: float = 1.0
    domains_per_leaf: int = 32
    slow_leaf_fraction: float = 0.0
    slow_nic_Bps: float | None = None
    name: str = ""

    def __post_init__(self):
        checks.number("gpus_per_domain", self.gpus_per_domain, integer=True, minimum=1)
        checks.number("scaleup_Bps", self.scaleup_Bps, positive=True)
        checks.number("nic_Bps", self.nic_Bps, positive=True)
        checks.number("nics_per_gpu", self.nics_per_gpu, positive=True)
        checks.number("scaleup_latency_s", self.scaleup_latency_s, nonnegative=True)
        checks.number("net_latency_s", self.net_latency_s, nonnegative=True)
        checks.number("oversubscription", self.oversubscription, minimum=1)
        checks.number("domains_per_leaf", self.domains_per_leaf, integer=True, minimum=1)
        checks.number("slow_leaf_fraction", self.slow_leaf_fraction, minimum=0, maximum=1)
        if self.slow_nic_Bps is not None:
            checks.number("slow_nic_Bps", self.slow_nic_Bps, positive=True)
        elif self.slow_leaf_fraction > 0:
            raise ValueError("slow_leaf_fraction > 0 needs slow_nic_Bps (the old links' rate)")

    @property
    def scaleout_Bps(self) -> float:
        """One GPU's network bandwidth per direction on a healthy leaf (all its rails)."""
        return self.nics_per_gpu * self.nic_Bps

    @property
    def bottleneck_nic_Bps(self) -> float:
        """The slowest NIC link any ring of the job crosses."""
        if self.slow_leaf_fraction > 0:
            return min(self.nic_Bps, self.slow_nic_Bps)
        return self.nic_Bps

    def naive_average_nic_Bps(self) -> float:
        """The share-weighted average NIC rate: what a ring does *not* get (for contrast)."""
        slow = self.slow_nic_Bps if self.slow_nic_Bps is not None else self.nic_Bps
        return (1 - self.slow_leaf_fraction) * self.nic_Bps + self.slow_leaf_fraction * slow


def _domains(n_domains) -> int:
    return checks.number("n_domains", n_domains, integer=True, minimum=1,
                         maximum=checks.MAX_GPUS)


def _fabric(fabric) -> "Fabric":
    if not isinstance(fabric, Fabric):
        raise TypeError(f"fabric must be a companion.fabric.Fabric, e.g. "
                        f"Fabric(gpus_per_domain=8, scaleup_Bps=450e9, nic_Bps=50e9) or "
                        f"companion.explore.interconnect.system_fabric('DGX B200'); "
                        f"got {type(fabric).__name__}")
    return fabric


def rails(fabric: Fabric) -> int:
    """Rails of a rail-optimized fabric: one per NIC of a domain (8 on a DGX node).

    NIC *i* of every domain plugs into rail *i*'s leaves, so a job's traffic is spread over
    all of them and each rail has its own leaf switches.
    """
    fabric = _fabric(fabric)
    return max(1, round(fabric.gpus_per_domain * fabric.nics_per_gpu))


def job_leaves(fabric: Fabric, n_domains: int) -> int:
    """Leaf switches a rail-optimized job of ``n_domains`` domains touches: on every rail,
    one leaf per ``domains_per_leaf`` domains (250 DGX nodes: 8 rails x 8 leaves = 64)."""
    fabric = _fabric(fabric)
    return rails(fabric) * -(-_domains(n_domains) // fabric.domains_per_leaf)


def slow_leaf_probability(slow_leaf_fraction: float, leaves: int) -> float:
    """Chance that a job placed at random on ``leaves`` leaves touches at least one slow one."""
    f = checks.number("slow_leaf_fraction", slow_leaf_fraction, minimum=0, maximum=1)
    k = checks.number("leaves", leaves, integer=True, minimum=1)
    return 1.0 - (1.0 - f) ** k


def cross_leaf_fraction(fabric: Fabric, n_domains: int) -> float:
    """Share of a GPU's inter-domain all-to-all traffic that leaves its leaf switch."""
    _fabric(fabric)
    d = _domains(n_domains)
    if d == 1:
        return 0.0
    return (d - min(d, fabric.domains_per_leaf)) / (d - 1)


def scaleout_ring_Bps(fabric: Fabric) -> float:
    """One GPU's per-direction network bandwidth for a rail-aligned ring.

    A ring ordered by leaf leaves each leaf once per channel, so oversubscription barely
    touches it; a slow leaf does: every ring crosses it.
    """
    return _fabric(fabric).nics_per_gpu * fabric.bottleneck_nic_Bps


def scaleout_all_to_all_Bps(fabric: Fabric, n_domains: int) -> float:
    """One GPU's per-direction network bandwidth for uniform all-to-all over ``n_domains``.

    Traffic crossing leaves shares up-links that are ``oversubscription`` times thinner
    than the down-links, and everyone waits for the GPUs behind the slowest leaf.
    """
    share_up = cross_leaf_fraction(fabric, n_domains) * fabric.oversubscription
    return scaleout_ring_Bps(fabric) / max(1.0, share_up)


@dataclass(frozen=True)
class CommBreakdown:
    """Time of a multi-level collective (seconds; arrays when sizes are arrays)."""
    scaleup_s: float | np.ndarray
    scaleout_s: float | np.ndarray
    total_s: float | np.ndarray


def hierarchical_all_reduce_time_s(size_bytes, fabric: Fabric, n_domains: int,
                                   inter_algorithm: str = "ring") -> CommBreakdown:
    """All-reduce of ``size_bytes`` per GPU over ``n_domains`` scale-up domains.

    Reduce-scatter inside each domain (ring over NVLink), all-reduce of the ``S/g`` shard
    across domains over each GPU's own rails (``inter_algorithm``: ring, tree or sharp),
    then all-gather inside the domain. Scale-up and scale-out phases run one after another.
    """
    checks.choice("inter_algorithm", inter_algorithm, ("ring", "tree", "sharp"))
    _fabric(fabric)
    s, scalar = _sizes("size_bytes", size_bytes)
    d = _domains(n_domains)
    g = fabric.gpus_per_domain
    intra = 2 * collective_time_s("all_gather", s, g, fabric.scaleup_Bps,
                                  fabric.scaleup_latency_s)
    inter = collective_time_s("all_reduce", s / g, d, scaleout_ring_Bps(fabric),
                              fabric.net_latency_s, algorithm=inter_algorithm)
    return CommBreakdown(_out(intra, scalar), _out(inter, scalar), _out(intra + inter, scalar))


def flat_Bps(fabric: Fabric, d: int) -> float:
    """Per-GPU bandwidth of one flat ring or tree over ``d`` domains of ``fabric`` (``d`` an
    integer from 1 to :data:`companion.checks.MAX_GPUS`)."""
    fabric = _fabric(fabric)
    d = checks.number("d", d, integer=True, minimum=1, maximum=checks.MAX_GPUS)
    # One ring (or tree) enters and leaves a domain once per channel, so the domain's g GPUs
    # share their g * nics_per_gpu NICs across channels; NVLink caps it inside the domain.
    return fabric.scaleup_Bps if d == 1 else min(fabric.scaleup_Bps,
                                                 fabric.gpus_per_domain * scaleout_ring_Bps(fabric))


def all_reduce_latency_s(fabric: Fabric, n_domains: int, algorithm: str = "ring") -> float:
    """Latency terms of one flat all-reduce over ``g * n_domains`` GPUs, as NCCL prices them.

    Ring: ``2(N-1)`` steps of which the ``2(D-1)`` that cross domains cost ``net_latency_s``
    and the rest ``scaleup_latency_s``. Tree: ``2((g-1) t_nvl + floor(log2 D) t_net)``, a chain
    inside each domain and a binary tree across them, at NCCL's tree latencies (ncclTopoTuneModel
    in src/graph/tuning.cc). NCCL's fixed per-call ``baseLat`` is left out. The step counts
    are the 2020 revision's (its LL128 latencies are today's); later revisions count ``2 D``
    network steps instead of ``2(D-1)`` and add a per-step network overhead, two steps more.
    """
    fabric = _fabric(fabric)
    checks.choice("algorithm", algorithm, FLAT_ALGORITHMS)
    d = _domains(n_domains)
    g = fabric.gpus_per_domain
    n = g * d
    if n == 1:
        return 0.0
    if algorithm == "ring":
        return (2 * (n - 1) - 2 * (d - 1)) * fabric.scaleup_latency_s \
            + 2 * (d - 1) * fabric.net_latency_s
    return 2 * ((g - 1) * NCCL_TREE_NVLINK_STEP_S + math.floor(math.log2(d)) * NCCL_TREE_NET_STEP_S)


def flat_all_reduce_time_s(size_bytes, fabric: Fabric, n_domains: int, algorithm: str = "ring"):
    """One NCCL all-reduce through all ``g * n_domains`` GPUs: ring or tree (not hierarchical).

    Latency from :func:`all_reduce_latency_s`. Bandwidth: the smaller of the NVLink bandwidth
    and the domain's total NIC bandwidth, because NCCL spreads its channels over all the rails
    (a 16-GPU ring over two DGX B200 nodes runs at 8 x 50 GB/s = 400 GB/s per GPU, not at one
    NIC's 50). Traffic ``2(N-1)/N S`` for the ring, ``2 S`` for the tree (NCCL's tree bus
    bandwidth is half its algorithm bandwidth).
    """
    fabric = _fabric(fabric)
    checks.choice("algorithm", algorithm, FLAT_ALGORITHMS)
    s, scalar = _sizes("size_bytes", size_bytes)
    d = _domains(n_domains)
    n = fabric.gpus_per_domain * d
    if n == 1:
        return _out(np.zeros_like(s), scalar)
    traffic = 2 * (n - 1) / n if algorithm == "ring" else 2.0
    return _out(all_reduce_latency_s(fabric, d, algorithm) + traffic * s / flat_Bps(fabric, d),
                scalar)


def flat_ring_all_reduce_time_s(size_bytes, fabric: Fabric, n_domains: int):
    """One ring through all ``g * n_domains`` GPUs, as NCCL's ring algorithm runs it
    (:func:`flat_all_reduce_time_s` with ``algorithm="ring"``)."""
    return flat_all_reduce_time_s(size_bytes, fabric, n_domains, "ring")


def cross_domain_ring_slowdown(fabric: Fabric, size_bytes: float, gpus: int) -> float:
    """How many times longer a ring all-reduce of ``size_bytes`` over ``gpus`` GPUs takes when
    it spans ``gpus / g`` domains of ``fabric`` than inside one domain that holds them all.

    The bandwidth part is ``scaleup_Bps / (g x NIC bandwidth per GPU)`` (2.25 for DGX B200:
    900 / 400 GB/s), and the ``2(D-1)`` network steps add latency on top.
    """
    fabric = _fabric(fabric)
    n = checks.number("gpus", gpus, integer=True, minimum=2)
    checks.divides("gpus_per_domain", fabric.gpus_per_domain, "gpus", n)
    inside = dataclasses.replace(fabric, gpus_per_domain=n)
    return (flat_all_reduce_time_s(size_bytes, fabric, n // fabric.gpus_per_domain)
            / flat_all_reduce_time_s(size_bytes, inside, 1))


def moe_all_to_all_time_s(bytes_per_gpu, expert_parallel: int, fabric: Fabric,
                          stride: int = 1) -> CommBreakdown:
    """One MoE dispatch (or combine) all-to-all over ``expert_parallel`` GPUs ``stride`` ranks
    apart, the group starting at a domain boundary.

    ``bytes_per_gpu`` is what each GPU sends in total (tokens x top-k x hidden x bytes per
    element), spread evenly over the expert-parallel group. Inside one domain it is a plain
    all-to-all over NVLink; across domains the NVLink and network shares go concurrently and
    the slower decides. A group that does not fill whole domains (12 GPUs on 8-GPU boards) is
    priced exactly on its worst-placed member (:func:`companion.moe.group_span`): the one with
    the fewest peers beside it sends the most over the network. For a whole job of such
    groups, and DeepEP's de-duplicated dispatch, see :func:`companion.moe.copies_per_token`.
    """
    _fabric(fabric)
    s, scalar = _sizes("bytes_per_gpu", bytes_per_gpu)
    ep = checks.number("expert_parallel", expert_parallel, integer=True, minimum=1)
    stride = checks.number("stride", stride, integer=True, minimum=1)
    fewest, most, domains = group_span(ep, stride, fabric.gpus_per_domain, ep * stride)
    if domains == 1:
        t = collective_time_s("all_to_all", s, ep, fabric.scaleup_Bps, fabric.scaleup_latency_s)
        zero = np.zeros_like(s)
        return CommBreakdown(_out(t, scalar), _out(zero, scalar), _out(t, scalar))
    up = fabric.scaleup_latency_s + s * (most - 1) / ep / fabric.scaleup_Bps
    out = fabric.net_latency_s + s * (ep - fewest) / ep / scaleout_all_to_all_Bps(fabric, domains)
    return CommBreakdown(_out(up, scalar), _out(out, scalar), _out(np.maximum(up, out), scalar))


@dataclass(frozen=True)
class TailLatency:
    """Step-time percentiles per cluster size from :func:`tail_latency` (seconds)."""
    sizes: np.ndarray
    p50_s: np.ndarray
    p99_s: np.ndarray
    mean_s: np.ndarray
    ideal_s: float


def _max_exponential(rng, m: np.ndarray) -> np.ndarray:
    """One draw of the maximum of ``m`` iid Exp(1) values per entry; 0 where m == 0.

    Inverse CDF of the maximum, F(x)**m with F(x) = 1 - exp(-x): exact, and O(1) per draw
    whatever m is, which keeps a 4096-GPU, 1000-step simulation well under a second.
    """
    u = rng.random(m.shape)
    with np.errstate(divide="ignore"):
        x = -np.log(-np.expm1(np.log(u) / np.maximum(m, 1)))
    return np.where(m > 0, x, 0.0)


#: Per-step compute noise of every GPU, as a fraction of its compute time (the scale of an
#: Exp(1) draw). An ASSUMPTION, not a calibration: no published per-GPU step-time
#: distribution was found to fit it to. It is not small at scale: the slowest of n
#: exponentials averages H_n ~ ln n + 0.58, so 2% alone lengthens the median step of 2,048
#: GPUs by about 16% (the interconnect chapter computes it). Pass jitter=0 to see stragglers
#: and congestion alone.
ASSUMED_JITTER = 0.02


def tail_latency(cluster_sizes, compute_s: float, comm_s: float = 0.0, *,
                 jitter: float = ASSUMED_JITTER,
                 straggler_prob: float = 1e-4, straggler_slowdown: float = 1.0,
                 congested_link_prob: float = 0.0, congestion_slowdown: float = 1.0,
                 steps: int = 1000, seed: int = 0) -> TailLatency:
    """Seeded Monte Carlo of a synchronous data-parallel job.

    Each step every participant computes for ``compute_s * (1 + jitter * E)`` with E drawn
    from Exp(1) (OS noise, clocks; the default scale :data:`ASSUMED_JITTER` is an assumption),
    and with probability ``straggler_prob`` it is a straggler
    that needs ``straggler_slowdown`` times ``compute_s`` more. The collective waits for the
    slowest participant, then takes ``comm_s``, stretched by ``1 + congestion_slowdown`` when
    any of the ring's ``n`` links is congested (each with ``congested_link_prob``).
    Returns P50, P99 and mean step time per cluster size; reproducible for a given ``seed``.
    """
    sizes = _ranks(np.atleast_1d(cluster_sizes), "cluster_sizes")
    c = checks.number("compute_s", compute_s, positive=True)
    m = checks.number("comm_s", comm_s, nonnegative=True)
    j = checks.number("jitter", jitter, nonnegative=True)
    p = checks.number("straggler_prob", straggler_prob, minimum=0, maximum=1)
    slow = checks.number("straggler_slowdown", straggler_slowdown, nonnegative=True)
    q = checks.number("congested_link_prob", congested_link_prob, minimum=0, maximum=1)
    cong = checks.number("congestion_slowdown", congestion_slowdown, nonnegative=True)
    steps = checks.number("steps", steps, integer=True, minimum=1)
    seed = checks.number("seed", seed, integer=True, minimum=0)
    if len(sizes) * steps > checks.MAX_SIM_SEGMENTS:  # several float64 arrays of this shape
        raise ValueError(f"{len(sizes)} cluster sizes x steps={steps} exceeds "
                         f"{checks.MAX_SIM_SEGMENTS:.0e} simulated steps: use fewer steps")
    rng = np.random.default_rng(seed)
    n = np.broadcast_to(sizes[:, None], (len(sizes), steps))
    k = rng.binomial(n, p)  # stragglers this step
    normal = j * _max_exponential(rng, n - k)  # 0 when all are stragglers: never the max
    stragglers = np.where(k > 0, slow + j * _max_exponential(rng, k), 0.0)
    compute = c * (1 + np.maximum(normal, stragglers))
    p_any_link = 1.0 if q == 1 else -np.expm1(n * np.log1p(-q))  # 1 - (1 - q)**n
    congested = rng.random(n.shape) < p_any_link
    step = compute + m * (1 + cong * congested)
    return TailLatency(sizes=np.asarray(sizes), p50_s=np.percentile(step, 50, axis=1),
                       p99_s=np.percentile(step, 99, axis=1), mean_s=step.mean(axis=1),
                       ideal_s=c + m)


def megatron_default_bucket_params(dp_cp):
    """The default DDP gradient bucket, in parameters: ``max(40000000, 1000000 x dp)`` with dp
    the data-parallel size including context parallelism, as Megatron-Bridge and Megatron-LM's
    training loop (``megatron/training/training.py``) set it ("larger DP sizes need larger
    buckets to ensure collectives do not become latency-bound",
    ``distributed_data_parallel_config.py``). Megatron-Core's ``DistributedDataParallel`` on
    its own uses its data-parallel group, without CP. Arrays in, arrays out."""
    dp_cp = checks.real_array("dp_cp", dp_cp, positive=True)
    return np.maximum(40_000_000, 1_000_000 * dp_cp).astype(np.int64)


def megatron_bucket_count(params, bucket_params):
    """Buckets Megatron-Core's DDP makes of ``params`` gradients: it closes a bucket at the
    first parameter past ``bucket_params`` and gives what is left a bucket of its own
    (``_ParamAndGradBuffer``: "Add remaining params to a new bucket"), so
    ``ceil(params / bucket_params)`` of them for parameters small beside a bucket, and at
    least one. Arrays in, arrays out."""
    p = checks.real_array("params", params, positive=True)
    b = checks.real_array("bucket_params", bucket_params, positive=True)
    return np.maximum(1.0, np.ceil(p / b))


def bucketed_exposed_s(bucket_s, window_s, n_buckets, *, chunks=1, chunk_s=0.0, passes=1):
    """Seconds a stream of gradient sends runs past the compute that produces them. Each of
    ``passes`` windows of ``window_s`` (a backward pass) is split into ``chunks`` equal parts;
    the last part fills ``n_buckets`` buckets at an even rate, each sent when full and taking
    ``bucket_s``, and each earlier part is one piece of ``chunk_s`` sent when it ends (an
    interleaved pipeline's later model chunks, which Megatron-Core does not bucket). Sends
    run one after another on one stream; the last bucket can only start when its window
    ends, so with one chunk and one pass the result is ``max(c, N c - window (1 - 1 / N))``
    for N buckets of c seconds. Arrays broadcast.
    Every input must be finite; times >= 0, ``n_buckets``, ``chunks`` and ``passes`` whole
    numbers >= 1."""
    for name, x in (("n_buckets", n_buckets), ("chunks", chunks), ("passes", passes)):
        a = checks.real_array(name, x, positive=True)
        if (a < 1).any() or (a != np.floor(a)).any():
            raise ValueError(f"{name} must be whole numbers >= 1; got {a.ravel()[:3].tolist()}")
    return _bucketed_exposed_s(checks.real_array("bucket_s", bucket_s, nonnegative=True),
                               checks.real_array("window_s", window_s, nonnegative=True),
                               n_buckets, chunks=chunks,
                               chunk_s=checks.real_array("chunk_s", chunk_s, nonnegative=True),
                               passes=passes)


def _bucketed_exposed_s(bucket_s, window_s, n_buckets, *, chunks=1, chunk_s=0.0, passes=1):
    # unchecked: the step model's vectorised path calls it for every layout it prices
    b, w, k = (np.asarray(x, dtype=float) for x in (bucket_s, window_s, n_buckets))
    v, m = np.asarray(chunks, dtype=float), np.asarray(passes, dtype=float)
    p = np.asarray(chunk_s, dtype=float) * (v > 1)  # one chunk: no unbucketed pieces
    one = (v - 1) * p + k * b  # one pass of sends
    part = (v - 1) * w / v  # when the bucketed part of a pass begins
    # the send that starts the longest unbroken run: the pass's first piece, the last
    # unbucketed one, the first or the last bucket; a run that spans passes adds the
    # backlog each later pass leaves (its sends beyond its window)
    first = w / (v * np.where(v > 1, 1.0, k))
    end = np.maximum(np.maximum(first + one, part + p + k * b),
                     np.maximum(part + w / (v * k) + k * b, w + b))
    return end - w + (m - 1) * np.maximum(0.0, one - w)


@dataclass(frozen=True)
class BucketPlan:
    """Gradient all-reduce overlapped with the backward pass, per bucket size (seconds)."""
    bucket_bytes: np.ndarray
    n_buckets: np.ndarray
    per_bucket_s: np.ndarray
    comm_total_s: np.ndarray
    exposed_s: np.ndarray


def bucket_plan(grad_bytes: float, bucket_bytes, backward_s: float, all_reduce_s) -> BucketPlan:
    """Exposed communication after the backward pass as a function of bucket size.

    Gradients appear at a steady rate during ``backward_s``; ``N = ceil(G / b)`` equal
    buckets become ready at ``i * backward_s / N`` and are all-reduced one after another on
    one stream, each taking ``c = all_reduce_s(G / N)`` (a function of the bucket's bytes,
    for example :func:`flat_all_reduce_time_s` on a fabric). The last one ends at
    ``max(backward_s + c, backward_s / N + N c)``: small buckets pay the latency ``N``
    times, large ones leave a big last bucket exposed after the backward pass.
    ``all_reduce_s`` must be callable on an array of bucket sizes and return finite
    seconds >= 0, one per size (or one number for all).
    """
    g = checks.number("grad_bytes", grad_bytes, positive=True)
    b, _ = _sizes("bucket_bytes", bucket_bytes)
    b = np.atleast_1d(b)
    if np.any(b <= 0):
        raise ValueError("bucket_bytes must be > 0")
    bwd = checks.number("backward_s", backward_s, nonnegative=True)
    if not callable(all_reduce_s):
        raise TypeError(f"all_reduce_s must be a function of the bucket bytes returning "
                        f"seconds (e.g. lambda size: flat_all_reduce_time_s(size, fabric, "
                        f"n_domains)); got {type(all_reduce_s).__name__}")
    nb = np.ceil(g / b)
    c = checks.real_array("all_reduce_s(bucket bytes)", all_reduce_s(g / nb), nonnegative=True)
    if c.shape not in ((), nb.shape):
        raise ValueError(f"all_reduce_s must return one time per bucket size ({nb.shape}) or "
                         f"one number; got shape {c.shape}")
    return BucketPlan(bucket_bytes=b, n_buckets=nb.astype(np.int64), per_bucket_s=c,
                      comm_total_s=nb * c, exposed_s=_bucketed_exposed_s(c, bwd, nb))


def bucket_tradeoff(grad_bytes: float, bucket_bytes, backward_s: float, n: int,
                    bandwidth_Bps: float, latency_s: float,
                    algorithm: str = "ring") -> BucketPlan:
    """:func:`bucket_plan` with each bucket a flat alpha-beta all-reduce over ``n`` ranks of
    one link (:func:`companion.comm.collective_time_s`: every step costs ``latency_s``)."""
    for p, v in (("bandwidth_Bps", bandwidth_Bps), ("latency_s", latency_s)):
        checks.number(p, v, nonnegative=True)
    return bucket_plan(grad_bytes, bucket_bytes, backward_s, lambda size: collective_time_s(
        "all_reduce", size, n, bandwidth_Bps, latency_s, algorithm=algorithm))


def p99_slowdown(result: TailLatency) -> np.ndarray:
    """P99 step time over the ideal (no jitter, no stragglers) step time."""
    if not isinstance(result, TailLatency):
        raise TypeError(f"result must be a TailLatency (what companion.fabric.tail_latency "
                        f"returns); got {type(result).__name__}")
    return result.p99_s / result.ideal_s


__all__ = [
    "Fabric", "CommBreakdown", "TailLatency", "BucketPlan", "slow_leaf_probability",
    "cross_leaf_fraction", "scaleout_ring_Bps", "scaleout_all_to_all_Bps",
    "hierarchical_all_reduce_time_s", "flat_ring_all_reduce_time_s", "moe_all_to_all_time_s",
    "tail_latency", "bucket_plan", "bucket_tradeoff", "bucketed_exposed_s",
    "megatron_default_bucket_params", "megatron_bucket_count", "p99_slowdown", "rails", "job_leaves",
    "all_reduce_latency_s", "flat_all_reduce_time_s", "flat_Bps", "cross_domain_ring_slowdown",
    "ASSUMED_JITTER", "NCCL_RING_STEP_S", "NCCL_NVLINK_STEP_S", "NCCL_NET_STEP_S", "NCCL_TREE_NVLINK_STEP_S", "NCCL_TREE_NET_STEP_S",
]
