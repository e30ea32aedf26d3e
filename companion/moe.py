"""Mixture-of-experts mechanisms: where an expert-parallel group sits on the machine, what its
all-to-all moves and at what achieved bandwidth, how big its expert GEMMs are, and what an
MoE layer keeps in memory.

Chapter "Expert parallelism". :mod:`companion.steptime` and :mod:`companion.memory` call
these; the functions are plain numbers in, numbers out, and the array forms take numpy arrays.

Topology (:func:`group_span`). Megatron orders ranks tp, cp, dp, pp (the expert grid etp, ep,
edp, pp), so an expert-parallel group of ``ep`` ranks ``etp`` apart, repeated over the job,
falls on scale-up domains (8-GPU HGX boards, 72-GPU NVL72 racks, 4-GPU GB200 trays) in a
pattern that need not be whole domains: EP32 at ETP4 covers 128 ranks, which 72-GPU racks cut
18 + 14 in one group and 4 + 18 + 10 in the next. :func:`group_span` enumerates every rank of
one period of that pattern and reports the worst member exactly; a synchronous step waits for
it. A domain size that is a multiple of another never puts fewer of a rank's peers beside it
(every pair sharing the small domain shares the big one); one that is not (8-GPU groups on
36-GPU racks) can, because groups straddle racks.

All-to-all (:func:`all_to_all_s`). Two dispatchers, as Megatron-Core names them:
``alltoall`` (NCCL all-to-all: one copy per (token, expert) pair, to every expert's rank) and
``deepep`` (DeepEP / HybridEP, Megatron's ``flex`` dispatcher: one copy per token per remote
domain over the network, forwarded inside the domain over NVLink, one copy per destination
rank; DeepSeek-V3 Section 3.2.2). Dispatch travels in BF16 or FP8 (E4M3 plus one FP32 scale
per 128 channels, DeepSeek-V3's 1 x 128 activation tiles); combine and both backward passes
stay BF16 (DeepEP README: "FP8 dispatching and BF16 combining"). Achieved bandwidths are
published measurements, set apart from the ring all-reduce calibration: DeepEP's normal
kernels reach 153 GB/s over H800 NVLink (200 GB/s per direction) and 726 GB/s over B200
NVLink 5 (900 GB/s); an NDR NIC carries 46-48 GB/s of NCCL traffic (NVIDIA's nccl-tests
maintainers, issues #267 and #290) and NCCL all-to-all cannot aggregate several NICs.

Routing. Tokens pick ``top_k`` of ``experts`` uniformly (the force-balanced routing of
Megatron-Bridge's MoE benchmarks); ``routing_skew`` >= 1 is the busiest rank's load over the
mean, which both its expert GEMMs and its share of the all-to-all wait for.
"""
from __future__ import annotations

import csv
import functools
import itertools
import math
from pathlib import Path

import numpy as np

from companion import checks

DISPATCHERS = ("alltoall", "deepep")
DISPATCH_PRECISIONS = ("bf16", "fp8")
# Bytes per hidden element on the wire. FP8 dispatch: one E4M3 byte plus one FP32 scale per
# 1 x 128 tile (DeepSeek-AI 2024, arXiv:2412.19437, Section 3.3.2, fine-grained quantization).
WIRE_BYTES = {"bf16": 2.0, "fp8": 1.0 + 4.0 / 128}
COMBINE_BYTES = 2.0  # combine and the backward pass's gradients: BF16

MEASUREMENTS_CSV = Path(__file__).resolve().parents[1] / "data" / "published_measurements.csv"


@functools.cache
def measurement(row_id: str) -> dict:
    """One row of ``data/published_measurements.csv`` by id (value, peak, fraction, source)."""
    with open(MEASUREMENTS_CSV, newline="") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    return rows[checks.choice("row_id", row_id, rows)]


def _fraction(row_id: str) -> float:
    row = measurement(row_id)
    return float(row["value"]) / float(row["peak"])


# Achieved all-to-all bandwidth as a fraction of the per-direction nameplate, by GPU family,
# from published measurements: DeepEP's intranode EP8 dispatch, 153 GB/s of the H800's 200 GB/s
# per direction (V1 table) and 726 GB/s of NVLink 5's 900 GB/s (V2 table, SM100).
NVLINK_A2A_FRACTION = {"Hopper": _fraction("deepep-v1-h800-intranode-dispatch"),
                       "Blackwell": _fraction("deepep-v2-sm100-intranode-dispatch")}
# NCCL over a 400 Gb/s NDR NIC: "46-48GB/s per NIC" (nccl-tests issue 290), the middle.
NIC_A2A_FRACTION = _fraction("nccl-ndr-nic-alltoall")


def _family(gpu) -> str | None:
    # a name has no arch and would fall back silently; this module sits below the registry
    if not isinstance(getattr(gpu, "arch", None), str):
        raise TypeError(f"gpu must be a GPU spec (companion.hardware.gpu(name)); got "
                        f"{type(gpu).__name__} {gpu!r:.40}")
    arch = gpu.arch
    return next((f for f in NVLINK_A2A_FRACTION if arch.startswith(f)), None)


def achieved_Bps(gpu, scaleup_Bps, scaleout_Bps, fallback_scaleup_fraction):
    """(NVLink, network) bandwidth one GPU reaches in an MoE all-to-all, bytes/s per direction.
    GPU families without a published measurement use ``fallback_scaleup_fraction`` (the ring
    calibration) over NVLink."""
    up_Bps, out_Bps = (checks.real_array(p, x, positive=True) for p, x in
                       (("scaleup_Bps", scaleup_Bps), ("scaleout_Bps", scaleout_Bps)))
    checks.number("fallback_scaleup_fraction", fallback_scaleup_fraction, positive=True,
                  maximum=1)
    fam = _family(gpu)
    up = NVLINK_A2A_FRACTION[fam] if fam else fallback_scaleup_fraction
    pair = up_Bps * up, out_Bps * NIC_A2A_FRACTION  # arrays broadcast, as the callers' do
    return tuple(float(x) if x.ndim == 0 else x for x in pair)


def wire_bytes(dispatch_precision: str) -> float:
    """Bytes per hidden element a dispatch moves in ``dispatch_precision`` (bf16 or fp8)."""
    return WIRE_BYTES[checks.choice("dispatch_precision", dispatch_precision,
                                    DISPATCH_PRECISIONS)]


# -- checks ----------------------------------------------------------------------------------
def _count(param, value) -> int:
    return checks.number(param, value, integer=True, minimum=1)


def _experts_top_k(experts, top_k) -> tuple[int, int]:
    """``experts`` and ``top_k`` as integers >= 1 with ``top_k <= experts``."""
    e, k = _count("experts", experts), _count("top_k", top_k)
    if k > e:
        raise ValueError(f"top_k={k} must be <= experts={e}")
    return e, k


def _skew(routing_skew):
    """``routing_skew`` (a number or array) as float64, finite and >= 1."""
    a = checks.real_array("routing_skew", routing_skew, positive=True)
    if (a < 1).any():
        raise ValueError(f"routing_skew must be >= 1 (the busiest rank's load over the mean); "
                         f"got {a[a < 1][:3].tolist()}")
    return a


def _flags(param: str, x):
    """A boolean or 0/1 number, or an array of them, as float64 0.0/1.0."""
    kind = np.asarray(x).dtype.kind if not isinstance(x, (str, bytes)) else "U"
    if kind == "b":
        return np.asarray(x, dtype=np.float64)
    a = checks.real_array(param, x)
    if ((a != 0) & (a != 1)).any():
        raise ValueError(f"{param} must be True/False (or 0/1 per row); got "
                         f"{a[(a != 0) & (a != 1)][:3].tolist()}")
    return a


def _broadcast(**arrays) -> None:
    """Raise naming the parameters unless ``arrays`` broadcast together."""
    try:
        np.broadcast_shapes(*(np.shape(a) for a in arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(a)}" for k, a in arrays.items() if np.ndim(a))
        raise ValueError(f"array arguments must broadcast together; got shapes {shapes}") \
            from None


def max_skew(experts: int, top_k: int) -> float:
    """The largest routing skew there is: every token picks the busiest expert, which then
    holds experts / top_k times the mean load. ``experts`` and ``top_k`` are integers >= 1,
    ``top_k <= experts``."""
    e, k = _experts_top_k(experts, top_k)
    return e / k


def check_skew(routing_skew, experts: int, top_k: int) -> float:
    """``routing_skew`` (busiest expert's tokens over the mean) must lie in [1, experts/top_k]."""
    return checks.number("routing_skew", routing_skew, minimum=1.0,
                         maximum=max_skew(experts, top_k))


def check_expert_layout(model, ep: int, etp: int) -> None:
    """Raise ValueError unless ``ep`` divides the experts and ``etp`` the expert width.
    ``model`` is a :class:`~companion.model.Transformer` (``companion.model.preset(name)``;
    this module sits below the model module, so it takes no names); ``ep`` and ``etp`` are GPU
    counts (integers >= 1)."""
    if not (hasattr(model, "experts") and hasattr(model, "expert_ffn")):
        raise TypeError(f"model must be a companion.model.Transformer (e.g. "
                        f"companion.model.preset({model!r}) for a name); got "
                        f"{type(model).__name__}")
    ep = checks.gpu_count("ep", ep)
    etp = checks.gpu_count("etp", etp)
    checks.divides("ep", ep, "experts", model.experts)
    checks.divides("etp", etp, "expert_ffn_hidden", model.expert_ffn)


# -- topology ----------------------------------------------------------------------------------
#: the most (group, domain) cells one period of a rank pattern may hold: the topology is
#: counted exactly, rank by rank, so a pattern that repeats only every billion ranks is refused
MAX_PATTERN_CELLS = 2 ** 24
#: the most choices of expert groups group-limited routing may have: they are enumerated
#: (DeepSeek-V3's 4 of 8 groups: 70)
MAX_ROUTER_SUBSETS = 10_000


def _check_pattern(size, stride, domain_gpus, world) -> None:
    for p, v in (("size", size), ("stride", stride), ("domain_gpus", domain_gpus)):
        checks.number(p, v, integer=True, minimum=1, maximum=checks.MAX_GPUS)
    if world is not None:
        checks.number("world", world, integer=True, minimum=1, maximum=checks.MAX_GPUS)
    period = math.lcm(int(size) * int(stride), int(domain_gpus))
    n = period if world is None else min(period, int(world))
    cells = -(-n // int(size)) * -(-n // int(domain_gpus))
    if cells > MAX_PATTERN_CELLS:
        raise ValueError(f"groups of size={size} ranks stride={stride} apart on domains of "
                         f"domain_gpus={domain_gpus} repeat every {n:,} ranks: {cells:,} "
                         f"group-domain cells, more than the {MAX_PATTERN_CELLS:,} counted")


def check_router_groups(groups, group_topk, experts=None, top_k=None,
                        names=("router_groups", "router_group_topk")) -> None:
    """Raise ValueError unless ``group_topk`` of ``groups`` expert groups has at most
    :data:`MAX_ROUTER_SUBSETS` choices (they are enumerated) and, given ``experts`` and
    ``top_k``, the groups split the experts evenly and the chosen groups hold ``top_k``."""
    g_name, k_name = names  # the caller's parameter names
    if experts is not None:
        checks.divides(g_name, groups, "experts", experts)
        reach = int(group_topk) * experts // int(groups)
        if top_k is not None and top_k > reach:
            raise ValueError(f"top_k={top_k} must be <= {k_name} x experts / {g_name} = {reach}")
    n = math.comb(int(groups), int(group_topk))
    if n > MAX_ROUTER_SUBSETS:
        raise ValueError(f"{k_name}={group_topk} of {g_name}={groups} gives "
                         f"{n:,} group choices; at most {MAX_ROUTER_SUBSETS:,} are enumerated "
                         f"(DeepSeek-V3: 4 of 8, 70)")


def _cells(size: int, stride: int, domain: int, world: int | None):
    """Members of each group in each domain, as a (groups, domains) count matrix, over one
    period of the rank pattern (or the whole ``world`` when shorter)."""
    block = size * stride
    period = math.lcm(block, domain)
    n = period if world is None else min(period, world)
    if n % block:
        raise ValueError(f"world={world} must hold whole groups of {size} ranks {stride} "
                         f"apart ({block} ranks)")
    r = np.arange(n)
    group = (r // block) * stride + r % stride
    dom = r // domain
    counts = np.zeros((group.max() + 1, dom.max() + 1), dtype=np.int64)
    np.add.at(counts, (group, dom), 1)
    return counts


@functools.lru_cache(maxsize=4096)
def group_span(size: int, stride: int, domain_gpus: int, world: int | None = None):
    """How groups of ``size`` ranks ``stride`` apart fall on domains of ``domain_gpus``.

    Returns ``(min_local, max_local, max_domains)``: the fewest and the most members of its own
    group a rank finds in its own domain (itself included), and the most domains one group
    spans, over every group of the job (``world`` ranks; None: the pattern repeats forever).
    """
    _check_pattern(size, stride, domain_gpus, world)
    c = _cells(int(size), int(stride), int(domain_gpus), world)
    local = c[c > 0]
    return int(local.min()), int(local.max()), int((c > 0).sum(axis=1).max())


def hit_probability(experts_held, experts: int, top_k: int):
    """Chance that a token's ``top_k`` distinct experts, drawn uniformly from ``experts``,
    include at least one of ``experts_held``: 1 - C(E - m, k) / C(E, k)."""
    experts, top_k = _experts_top_k(experts, top_k)
    m = checks.real_array("experts_held", experts_held, nonnegative=True)
    if np.any(m > experts):
        raise ValueError(f"experts_held must be <= experts={experts}; got {m.max():g}")
    miss = np.ones_like(m)
    for i in range(top_k):
        miss = miss * np.clip((experts - m - i) / (experts - i), 0.0, 1.0)
    return 1.0 - miss


def _member_domains(size: int, stride: int, domain: int, world: int | None):
    """Domain of each member of each group: a (groups, size) array over one period."""
    block = size * stride
    period = math.lcm(block, domain)
    n = period if world is None else min(period, world)
    r = np.arange(n)
    out = np.empty(((r // block * stride + r % stride).max() + 1, size), dtype=np.int64)
    out[r // block * stride + r % stride, (r // stride) % size] = r // domain
    return out


def _grouped_remote(size, stride, domain, experts, top_k, world, groups, group_topk):
    """Worst member's expected remote domains hit when each token first picks ``group_topk``
    of ``groups`` expert groups (uniformly) and then its ``top_k`` experts among theirs
    (DeepSeek-V3's group-limited routing; Megatron's --moe-router-num-groups / group-topk).
    Experts sit on ranks in order, ``experts / size`` each."""
    per_rank, per_group = experts // size, experts // groups
    owner = np.arange(experts) // per_rank  # member index holding each expert
    subsets = np.array(list(itertools.combinations(range(groups), group_topk)))
    pool = group_topk * per_group
    worst = 0.0
    for doms in _member_domains(size, stride, domain, world):
        uniq = np.unique(doms)
        # experts of each domain in each routing group: (domains, groups)
        held = np.stack([np.bincount(np.arange(experts)[doms[owner] == d] // per_group,
                                     minlength=groups) for d in uniq])
        m = held[:, subsets].sum(axis=2)  # (domains, subsets)
        miss = np.ones(m.shape)
        for t in range(top_k):
            miss *= np.clip((pool - m - t) / (pool - t), 0.0, 1.0)
        hit = (1.0 - miss).mean(axis=1)
        worst = max(worst, float(hit.sum() - hit.min()))
    return worst


@functools.lru_cache(maxsize=4096)
def copies_per_token(dispatcher: str, size: int, stride: int, domain_gpus: int,
                     experts: int, top_k: int, world: int | None = None,
                     max_domains: int | None = None, groups: int = 1,
                     group_topk: int | None = None):
    """(NVLink copies, network copies) of one token's hidden vector that the worst-placed
    rank of an expert-parallel group sends in one dispatch.

    ``alltoall``: one copy per routed expert: top_k x (peers in the domain) / size over
    NVLink, top_k x (peers outside) / size over the network. ``deepep``: one network copy per
    remote domain holding any of the token's experts (expected value; ``max_domains`` caps
    the domains a token may reach; ``groups`` and ``group_topk`` apply group-limited routing,
    which with groups aligned to nodes is DeepSeek-V3's node-limited routing, M = 4), and one
    NVLink copy per other destination rank (sent directly, or forwarded after crossing).
    """
    checks.choice("dispatcher", dispatcher, DISPATCHERS)
    _check_pattern(size, stride, domain_gpus, world)
    _experts_top_k(experts, top_k)
    # Megatron-Core gives every rank of an expert-parallel group the same number of experts
    checks.divides("size", size, "experts", experts)
    checks.number("groups", groups, integer=True, minimum=1)
    if max_domains is not None:
        checks.number("max_domains", max_domains, integer=True, minimum=1)
    if group_topk is None:
        checks.divides("groups", groups, "experts", experts)
    else:
        checks.number("group_topk", group_topk, integer=True, minimum=1, maximum=groups)
        check_router_groups(groups, group_topk, experts, top_k, ("groups", "group_topk"))
    n = size
    if n == 1:
        return 0.0, 0.0
    c = _cells(size, stride, domain_gpus, world)
    if dispatcher == "alltoall":
        local = c[c > 0]
        return top_k * (local.max() - 1) / n, top_k * (n - local.min()) / n
    per_rank = experts / n
    hit = hit_probability(c * per_rank, experts, top_k) * (c > 0)
    remote = (hit.sum(axis=1, keepdims=True) - hit)[c > 0]  # other domains of each member
    if max_domains is not None:
        own = hit[c > 0]
        remote = np.minimum(remote, np.maximum(0.0, max_domains - own))
    worst = float(remote.max())
    if groups > 1 and group_topk is not None and group_topk < groups:
        worst = min(worst, _grouped_remote(size, stride, domain_gpus, experts, top_k, world,
                                           groups, group_topk))
    nvlink = (n - 1) * float(hit_probability(per_rank, experts, top_k))
    return nvlink, worst


def _a2a_args(nvlink_copies, network_copies, nvlink_Bps, network_Bps, routing_skew,
              nvlink_latency_s, network_latency_s) -> dict:
    """The path arguments of :func:`all_to_all_s`, checked: copies and latencies finite and
    >= 0, bandwidths > 0, skew >= 1 (numbers or arrays)."""
    return {"nvlink_copies": checks.real_array("nvlink_copies", nvlink_copies, nonnegative=True),
            "network_copies": checks.real_array("network_copies", network_copies,
                                                nonnegative=True),
            "nvlink_Bps": checks.real_array("nvlink_Bps", nvlink_Bps, positive=True),
            "network_Bps": checks.real_array("network_Bps", network_Bps, positive=True),
            "routing_skew": _skew(routing_skew),
            "nvlink_latency_s": checks.real_array("nvlink_latency_s", nvlink_latency_s,
                                                  nonnegative=True),
            "network_latency_s": checks.real_array("network_latency_s", network_latency_s,
                                                   nonnegative=True)}


def _a2a(s, nvlink_copies, network_copies, nvlink_Bps, network_Bps, routing_skew,
         nvlink_latency_s, network_latency_s):
    s = s * routing_skew
    up = np.where(nvlink_copies > 0, nvlink_latency_s + s * nvlink_copies / nvlink_Bps, 0.0)
    out = np.where(network_copies > 0, network_latency_s + s * network_copies / network_Bps,
                   0.0)
    return np.maximum(up, out)


def all_to_all_s(hidden_bytes, nvlink_copies, network_copies, nvlink_Bps, network_Bps,
                 routing_skew=1.0, nvlink_latency_s=0.0, network_latency_s=0.0):
    """One dispatch or combine: ``hidden_bytes`` (tokens x hidden x bytes per element on one
    GPU) times the copies over each path, the busiest rank carrying ``routing_skew`` times the
    mean; NVLink and network run concurrently and the slower decides (DeepEP overlaps its
    NVLink forwarding with RDMA). Each path that carries anything pays its latency once, as
    :func:`companion.comm.collective_time_s` prices a direct all-to-all. Arrays broadcast.
    Sizes, copies and latencies must be finite and >= 0, bandwidths > 0, ``routing_skew`` >= 1."""
    s = checks.real_array("hidden_bytes", hidden_bytes, nonnegative=True)
    kw = _a2a_args(nvlink_copies, network_copies, nvlink_Bps, network_Bps, routing_skew,
                   nvlink_latency_s, network_latency_s)
    _broadcast(hidden_bytes=s, **kw)
    return checks.finite_result("hidden_bytes", _a2a(s, **kw))


def layer_all_to_all_s(tokens, hidden: int, dispatch_precision: str, nvlink_copies,
                       network_copies, nvlink_Bps, network_Bps, routing_skew=1.0,
                       recompute_forward=False, nvlink_latency_s=0.0, network_latency_s=0.0):
    """All-to-all time of one MoE layer for one microbatch, forward and backward: dispatch
    (``dispatch_precision``) and combine (BF16) forward, their two BF16 mirror images
    backward, and the forward pair again where the layer is recomputed. ``tokens`` >= 0,
    ``hidden`` an integer >= 1, ``recompute_forward`` True/False (or 0/1 per row); the other
    arguments as :func:`all_to_all_s` takes them."""
    t = checks.real_array("tokens", tokens, nonnegative=True)
    h = checks.number("hidden", hidden, integer=True, minimum=1)
    wire = wire_bytes(dispatch_precision)
    rerun = _flags("recompute_forward", recompute_forward)
    kw = _a2a_args(nvlink_copies, network_copies, nvlink_Bps, network_Bps, routing_skew,
                   nvlink_latency_s, network_latency_s)
    _broadcast(tokens=t, recompute_forward=rerun, **kw)
    unit = functools.partial(_a2a, **kw)
    base = t * h
    fwd = unit(base * wire) + unit(base * COMBINE_BYTES)
    bwd = 2 * unit(base * COMBINE_BYTES)
    return checks.finite_result("tokens and hidden", fwd * (1 + rerun) + bwd)


# -- kernels -----------------------------------------------------------------------------------
def rows_per_expert(tokens, top_k: int, experts: int, ep, etp, tp, routing_skew=1.0):
    """Tokens one local expert multiplies per microbatch on the busiest rank: the group's
    tokens (``tokens`` per TP group, gathered over ETP) x top_k spread over the experts,
    times the skew; at least 1."""
    experts, top_k = _experts_top_k(experts, top_k)
    tokens, tp = _tokens_tp(tokens, tp)
    ep, etp = (checks.real_array(p, x, positive=True) for p, x in (("ep", ep), ("etp", etp)))
    rows = tokens * etp / tp * top_k * ep / experts * _skew(routing_skew)
    if (rows >= 2.0 ** 53).any():  # beyond exact float64 integers; int64 would wrap
        raise ValueError(f"tokens up to {float(np.max(tokens)):.3g} give {float(np.max(rows)):.3g} "
                         f"rows per expert; no step holds 2**53 or more")
    return np.maximum(1, np.ceil(rows)).astype(np.int64)


def permute_bytes(tokens, hidden: int, top_k: int, tp=1):
    """HBM bytes of permute plus unpermute in one direction: read each token (BF16), write its
    top_k copies, and the reverse (Megatron's fused ``moe_permute`` / ``moe_unpermute``)."""
    tokens, tp = _tokens_tp(tokens, tp)
    hidden, top_k = _count("hidden", hidden), _count("top_k", top_k)
    return 2.0 * 2.0 * tokens / tp * hidden * (1 + top_k)


def router_bytes(tokens, experts: int, top_k: int, tp=1):
    """HBM bytes of the router after its GEMM, one direction: FP32 logits written and read by
    softmax / top-k, probabilities and int64 indices of the top_k written."""
    experts, top_k = _experts_top_k(experts, top_k)
    tokens, tp = _tokens_tp(tokens, tp)
    return tokens / tp * (experts * 4.0 * 3 + top_k * (4.0 + 8.0))


def _tokens_tp(tokens, tp):
    """``tokens`` (>= 0) and ``tp`` (> 0) as float64 arrays: the checked inputs of the
    per-rank kernel and byte counts."""
    return (checks.real_array("tokens", tokens, nonnegative=True),
            checks.real_array("tp", tp, positive=True))


#: GEMMs each local expert runs per MoE layer and microbatch: FC1 and FC2 forward, their
#: dgrad and wgrad backward.
EXPERT_GEMMS = (2, 4)


def expert_loop_s(local_experts) -> tuple:
    """Forward and backward seconds that the expert loop adds per MoE layer and microbatch
    beyond the GEMMs themselves: 25 us per local expert GEMM (``EXPERT_GEMMS`` of them per
    expert, forward and backward). Transformer Engine's ``GroupedLinear`` (Megatron-Core's
    grouped GEMM) runs an MoE layer's experts as one cuBLASLt GEMM per expert spread over
    CUDA streams (TE PR 853, "Grouped
    GEMM via multi-stream cuBLAS"); TE PR 3134 measured that loop on SM100 at 0.267 ms for 8
    experts of 128 tokens (N = K = 2048) where one CUTLASS launch of the same GEMMs takes
    0.069 ms: (0.267 - 0.069) / 8 = 25 us per expert GEMM (the two rows of kind
    ``grouped_gemm_dispatch``). Returns (forward, backward) seconds for arrays of local
    expert counts (finite, >= 0)."""
    n = checks.real_array("local_experts", local_experts, nonnegative=True)
    per = (_value("te-grouped-linear-multistream-sm100-8x128")
           - _value("te-grouped-linear-cutlass-sm100-8x128")) / 8
    return n * EXPERT_GEMMS[0] * per, n * EXPERT_GEMMS[1] * per


def _value(row_id: str) -> float:
    return float(measurement(row_id)["value"])


# -- memory -------------------------------------------------------------------------------------
def saved_bytes_per_layer(tokens, hidden: int, experts: int, top_k: int, tp, etp,
                          routing_skew=1.0):
    """Bytes one MoE layer keeps for its backward pass per microbatch beyond a dense MLP's input:
    the dispatched copies (top_k BF16 hidden vectors per token, the expert FC1 input saved for
    its weight gradient; gathered over ETP), the router's FP32 probabilities over all experts
    and its int64 top-k indices. ``tokens``: tokens of the microbatch on one TP group (>= 0);
    ``hidden``, ``experts`` and ``top_k`` integers >= 1; ``tp`` and ``etp`` > 0 and
    ``routing_skew`` >= 1 (numbers or arrays)."""
    t, tp = _tokens_tp(tokens, tp)
    hidden = _count("hidden", hidden)
    experts, top_k = _experts_top_k(experts, top_k)
    etp = checks.real_array("etp", etp, positive=True)
    skew = _skew(routing_skew)
    _broadcast(tokens=t, tp=tp, etp=etp, routing_skew=skew)
    dispatched = 2.0 * top_k * t * etp / tp * hidden * skew
    return checks.finite_result("tokens and hidden",
                                dispatched + t / tp * (4.0 * experts + 8.0 * top_k))


def transient_bytes(tokens, hidden: int, top_k: int, tp):
    """The permutation buffer alive while one MoE layer dispatches: the top_k permuted BF16
    copies of the rank's tokens before they leave (one layer at a time)."""
    tokens, tp = _tokens_tp(tokens, tp)
    hidden, top_k = _count("hidden", hidden), _count("top_k", top_k)
    return 2.0 * top_k * tokens / tp * hidden




def layout_arrays(layout) -> dict:
    """A :class:`~companion.model.Layout`'s MoE fields as the length-1 arrays
    :func:`companion.steptime.step_arrays` reads: ``etp``, ``fp8_dispatch`` (0/1) and
    ``skew``. Rows without them (the search's) take ETP = TP, BF16 and balanced routing."""
    if not all(hasattr(layout, a) for a in ("expert_tp", "dispatch_precision", "routing_skew")):
        raise TypeError(f"layout must be a companion.model.Layout; got {type(layout).__name__}")
    return {"etp": np.array([layout.expert_tp], dtype=np.int64),
            "fp8_dispatch": np.array([int(layout.dispatch_precision == "fp8")], dtype=np.int64),
            "skew": np.array([float(layout.routing_skew)])}




#: The dispatcher each software stack runs (``companion.machine.STACKS`` names).
#: ``megatron-2022``: the papers' Megatron-LM had no MoE path of its own; an NCCL all-to-all.
#: ``megatron-core``: Megatron-Core's ``flex`` token dispatcher with DeepEP, its recommended
#: setting for cross-node expert parallelism (Megatron-LM MoE README, "Token dispatcher").
#: ``megatron-bridge``: HybridEP / DeepEP, the ``moe_flex_dispatcher_backend`` of every
#: DeepSeek-V3 performance recipe (Megatron-Bridge scripts/performance/configs/deepseek).
STACK_DISPATCHER = {"megatron-2022": "alltoall", "megatron-core": "deepep",
                    "megatron-bridge": "deepep", "megatron-bridge-mxfp8": "deepep"}


def dispatcher_for(stack) -> str:
    """The dispatcher of ``stack`` (a :class:`~companion.machine.Stack`): its own
    ``moe_dispatcher`` attribute if it has one, else :data:`STACK_DISPATCHER`, else
    ``alltoall``."""
    if isinstance(stack, (str, bytes)) or not isinstance(getattr(stack, "name", None), str):
        raise TypeError(f"stack must be a companion.machine.Stack (machine.stack(name)); got "
                        f"{type(stack).__name__} {stack!r:.40}")
    own = getattr(stack, "moe_dispatcher", None)
    if own is not None:
        return checks.choice("moe_dispatcher", own, DISPATCHERS)
    return STACK_DISPATCHER.get(getattr(stack, "name", ""), "alltoall")


__all__ = ["DISPATCHERS", "DISPATCH_PRECISIONS", "WIRE_BYTES", "COMBINE_BYTES",
           "NVLINK_A2A_FRACTION", "NIC_A2A_FRACTION", "achieved_Bps",
           "wire_bytes", "max_skew", "check_skew", "check_expert_layout", "group_span",
           "hit_probability", "copies_per_token", "all_to_all_s", "layer_all_to_all_s",
           "rows_per_expert", "permute_bytes", "router_bytes", "saved_bytes_per_layer",
           "transient_bytes", "layout_arrays",
           "STACK_DISPATCHER", "dispatcher_for"]
