"""Explorers and tables of the interconnect chapter (NVLink and InfiniBand).

Every number here comes from the hardware registry (:mod:`companion.hardware`) and every cost
from :mod:`companion.comm`, :mod:`companion.fabric` and :mod:`companion.roofline`; this module
only picks the cases, lays them out as long-form DataFrames and draws the fixed charts.
Bandwidths are bytes/s per direction throughout, as in the registry.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import checks, comm, fabric, hardware, roofline
from ..parallel import TPLayer, tp_layer  # noqa: F401  (the model lives with the step-time model)

CHART_DIGITS = 4  # significant digits kept in chart data: pages stay light, tooltips readable


def _chart_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Round the float columns of a chart's data to ``CHART_DIGITS`` significant digits."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = [float(f"{v:.{CHART_DIGITS}g}") for v in out[col]]
    return out


#: Chart column names in words with units (the model functions keep short names for code).
CHART_LABELS = {
    "size_bytes": "message size (bytes)", "time_us": "time (µs)",
    "busbw_GBps": "bus bandwidth (GB/s)", "hidden": "hidden size",
    "comm_share": "TP all-reduce share of layer time", "gpu": "GPU",
    "time_ms": "time (ms)", "network_ms": "network phase (ms)", "domains": "NVLink domains",
    "expert_parallel": "expert-parallel GPUs", "nvlink_ms": "NVLink part (ms)",
    "gpus": "GPUs", "step_over_ideal": "step / ideal step",
    "bucket_MB": "bucket size (MB)", "exposed_ms": "exposed after the backward pass (ms)",
    "buckets": "buckets per step",
}


def labelled(fn):
    """``fn`` with its frame's columns renamed by :data:`CHART_LABELS`, for chart axes and
    tooltips; the numbers are ``fn``'s own."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs).rename(columns=CHART_LABELS)
    return wrapper


def label(column: str, kind: str = "Q") -> str:
    """Altair shorthand for a labelled column: ``label("size_bytes")`` -> ``"message size
    (bytes):Q"``."""
    return f"{CHART_LABELS.get(column, column)}:{kind}"


# -- links -------------------------------------------------------------------------------------

#: Registry keys of the link ladder shown in the chapter (scale-up, then scale-out).
LADDER_KEYS = ("nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvlink5", "nv_hbi", "pcie5_x16",
               "ib_hdr", "ib_ndr200", "ib_ndr", "ib_xdr")

#: Links offered by the collective explorer: label -> (registry key, NCCL step latency).
EXPLORER_LINKS = {
    "NVLink 4": ("nvlink4", fabric.NCCL_NVLINK_STEP_S),
    "NVLink 5": ("nvlink5", fabric.NCCL_NVLINK_STEP_S),
    "IB HDR": ("ib_hdr", fabric.NCCL_NET_STEP_S),
    "IB NDR": ("ib_ndr", fabric.NCCL_NET_STEP_S),
    "IB XDR": ("ib_xdr", fabric.NCCL_NET_STEP_S),
}
EXPLORER_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
EXPLORER_GPUS = (2, 4, 8, 16, 72, 256, 1024, 2048)
EXPLORER_SIZES = tuple(2 ** e for e in range(3, 35, 2))  # 8 B .. 8 GiB


def link_ladder() -> pd.DataFrame:
    """NVLink generations and network rates from the registry, both conventions side by side.

    ``per_direction_GBps`` is what one GPU (or port) can send while it receives as much;
    ``bidirectional_GBps`` is the sum that NVLink and PCIe datasheets print. NV-HBI's
    convention is not stated by NVIDIA, so both columns are empty for it.
    """
    rows = []
    for key in LADDER_KEYS:
        ln = hardware.link(key)
        per = ln.per_direction_Bps
        rows.append({"key": key, "link": ln.name, "year": ln.year, "printed": ln.printed,
                     "printed as": ln.printed_convention,
                     "per_direction_GBps": None if per is None else per / 1e9,
                     "bidirectional_GBps": None if per is None else ln.bidirectional_Bps / 1e9})
    return pd.DataFrame(rows)


def link_ladder_chart(frame: pd.DataFrame | None = None):
    """Per-direction bandwidth of each link as a dot on a log scale (bars cannot start at 0
    on a log axis), scale-up and scale-out in one picture."""
    import altair as alt
    df = (link_ladder() if frame is None else frame).dropna(subset=["per_direction_GBps"])
    return alt.Chart(df).mark_circle(size=140, opacity=1).encode(
        x=alt.X("per_direction_GBps:Q", scale=alt.Scale(type="log"),
                title="GB/s per direction (log scale)"),
        y=alt.Y("link:N", sort=list(df["link"]), title=None),
        color=alt.Color("printed as:N", title="datasheet prints",
                        legend=alt.Legend(orient="bottom")),
        tooltip=["link", "printed", "printed as", "per_direction_GBps", "bidirectional_GBps"],
    ).properties(width=420, height=260)


def explorer_link(label: str) -> tuple[float, float]:
    """(per-direction bytes/s from the registry, NCCL step latency) of an explorer link."""
    checks.choice("link", label, tuple(EXPLORER_LINKS))
    key, latency_s = EXPLORER_LINKS[label]
    return hardware.link(key).per_direction_Bps, latency_s


def algorithms_for(op: str, label: str) -> tuple[str, ...]:
    """Algorithms of ``op`` that exist on this kind of link: NVLS needs an NVSwitch, SHARP an
    InfiniBand switch; ring and tree run anywhere."""
    algs = comm.ALGORITHMS[checks.choice("op", op, comm.OPS)]
    nvlink = EXPLORER_LINKS[checks.choice("link", label, tuple(EXPLORER_LINKS))][0].startswith(
        "nvlink")
    return tuple(a for a in algs if not (a == "nvls" and not nvlink) and
                 not (a == "sharp" and nvlink))


def collective_curves(op: str = "all_reduce", link: str = "NVLink 4", gpus: int = 8,
                      sizes=EXPLORER_SIZES) -> pd.DataFrame:
    """Alpha-beta time and nccl-tests bus bandwidth against message size, one line per algorithm.

    ``gpus`` ranks, each with the per-direction bandwidth of ``link`` (a flat collective over
    that link, as if every GPU had it); latency per step from NCCL's tuning table.
    """
    bw, lat = explorer_link(link)
    s = np.asarray(sizes, dtype=float)
    frames = []
    for alg in algorithms_for(op, link):
        t = comm.collective_time_s(op, s, gpus, bw, lat, algorithm=alg)
        busbw = comm.bus_bandwidth(op, s, gpus, t) if gpus > 1 else np.zeros_like(s)
        frames.append(pd.DataFrame({"size_bytes": np.asarray(sizes), "time_us": t * 1e6,
                                    "busbw_GBps": busbw / 1e9, "algorithm": alg}))
    return _chart_frame(pd.concat(frames, ignore_index=True))


def half_bandwidth_size(op: str, link: str, gpus: int, algorithm: str | None = None) -> float:
    """Message size (bytes) at which the latency and bandwidth terms of ``op`` are equal: below
    it the collective is latency-bound, and it reaches half its large-message bandwidth there."""
    bw, lat = explorer_link(link)
    t0 = comm.collective_time_s(op, 0.0, gpus, bw, lat, algorithm=algorithm)
    per_byte = comm.collective_time_s(op, 1.0, gpus, bw, lat, algorithm=algorithm) - t0
    return t0 / per_byte


# -- a published measurement -------------------------------------------------------------------

#: nccl-tests issue 212, comment by NCCL developer Sylvain Jeaugey (2024-05-06): 8 x H100,
#: "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an effective
#: NVLink bandwidth of 370GB/s ... On 8 GPUs, you should reach a peak busBw of ~480GB/s
#: (algbw ~275GB/s)" with NVLink SHARP (NVLS).
PUBLISHED_H100_NVLS = {
    "gpus": 8, "busbw_Bps": 480e9, "algbw_Bps": 275e9, "ring_effective_Bps": 370e9,
    "source": "NVIDIA/nccl-tests issue 212, 'H100 all reduce performance is poor', comment "
              "by the NCCL developer https://github.com/NVIDIA/nccl-tests/issues/212",
}


def published_vs_model(gpu: str = "H100") -> pd.DataFrame:
    """The issue-212 measurement next to the model's bounds for 8 GPUs of ``gpu``.

    Rows: the line rate (registry), the ring bound (busbw equals the line rate), the NVLS
    bound (each link carries (n+1)/n S instead of 2(n-1)/n S), and the published figures.
    """
    n = PUBLISHED_H100_NVLS["gpus"]
    line = hardware.gpu(gpu).scaleup_Bps
    size = 16 * 2 ** 30  # large enough that latency does not matter
    rows = [("line rate per direction (registry)", "model", line)]
    for alg in ("ring", "nvls"):
        t = comm.collective_time_s("all_reduce", size, n, line, fabric.NCCL_NVLINK_STEP_S,
                                   algorithm=alg)
        rows.append((f"{alg} all-reduce busbw bound", "model",
                     comm.bus_bandwidth("all_reduce", size, n, t)))
    p = PUBLISHED_H100_NVLS
    rows += [("ring effective NVLink bandwidth", "published", p["ring_effective_Bps"]),
             ("NVLS all-reduce algbw", "published", p["algbw_Bps"]),
             ("NVLS all-reduce busbw", "published", p["busbw_Bps"]),
             ("busbw from the published algbw x 2(n-1)/n", "nccl-tests factor",
              comm.bus_bandwidth("all_reduce", p["algbw_Bps"], n, 1.0))]
    return pd.DataFrame(rows, columns=["quantity", "kind", "GBps"]).assign(
        GBps=lambda d: d["GBps"] / 1e9)


# -- tensor parallelism inside one NVLink domain -----------------------------------------------

#: The seed's figures (claims.yaml, tp8-comm-under-3-percent): share of time in TP communication.
SEED_TP_SHARE = {"B200": 0.03, "H100": 0.07}


def tp_table(gpus=("H100", "B200"), **kwargs) -> pd.DataFrame:
    """:func:`tp_layer` for each GPU, with and without overlap, as a table (ms, %)."""
    rows = []
    for name in gpus:
        for overlap in (False, True):
            r = tp_layer(name, overlap=overlap, **kwargs)
            rows.append({"gpu": r.gpu, "overlap": "perfect" if overlap else "none",
                         "NVLink GB/s per direction": r.bandwidth_Bps / 1e9,
                         f"GEMM, {roofline.IDEAL_LABEL}": r.gemm_mfu, "compute_ms": r.compute_s * 1e3,
                         "tp_comm_ms": r.comm_s * 1e3, "layer_ms": r.layer_s * 1e3,
                         "exposed comm share": r.comm_share})
    return pd.DataFrame(rows)


TP_HIDDENS = (2048, 4096, 5120, 8192, 12288, 16384)


TP_BANDWIDTHS = ("measured", "line rate")


def tp_share_curves(seq_len: int = 4096, tp: int = 8, algorithm: str = "ring",
                    bandwidth: str = "measured") -> pd.DataFrame:
    """Exposed TP share (no overlap) against hidden size for A100, H100 and B200.

    ``bandwidth="measured"`` runs each algorithm at its published efficiency on NVLink
    (:data:`companion.comm.PUBLISHED_EFFICIENCY`: ring 82%, NVLS 69% of its bound), so NVLS
    shows the gain it has in practice; ``"line rate"`` shows the alpha-beta bounds.
    """
    checks.choice("bandwidth", bandwidth, TP_BANDWIDTHS)
    eff = comm.published_efficiency(algorithm, "nvlink") if bandwidth == "measured" else 1.0
    rows = []
    for name in ("A100", "H100", "B200"):
        for h in TP_HIDDENS:
            r = tp_layer(name, hidden=h, heads=h // 128, seq_len=seq_len, tp=tp,
                         algorithm=algorithm, link_efficiency=eff)
            rows.append({"hidden": h, "comm_share": r.comm_share, "gpu": name})
    return _chart_frame(pd.DataFrame(rows))


# -- fabrics from the registry -----------------------------------------------------------------

def system_fabric(system: str, slow_leaf_fraction: float = 0.0, slow_link: str | None = None,
                  oversubscription: float = 1.0) -> fabric.Fabric:
    """A :class:`companion.fabric.Fabric` for a registry system (``"DGX B200"``, ``"GB200 NVL72"``).

    NVLink bandwidth from the system's GPU, NIC rate and NICs per GPU from the system row;
    ``slow_link`` names the older generation (e.g. ``"HDR"``) on ``slow_leaf_fraction`` of
    the leaves.
    """
    s = hardware.system(system)
    slow = None if slow_link is None else hardware.link(slow_link).per_direction_Bps
    return fabric.Fabric(gpus_per_domain=s.scaleup_domain_gpus, scaleup_Bps=s.gpu().scaleup_Bps,
                         nic_Bps=s.nic_per_direction_Bps, nics_per_gpu=s.nic_count / s.gpu_count,
                         oversubscription=oversubscription, slow_leaf_fraction=slow_leaf_fraction,
                         slow_nic_Bps=slow, name=s.name)


def measured_fabric(f: fabric.Fabric, inter_algorithm: str) -> fabric.Fabric:
    """``f`` with its NICs at the published efficiency of ``inter_algorithm``: 94% of line rate
    for ring and tree (46-48 GB/s per NDR NIC), 80% for SHARP (the switches' reduction; a
    developer's rule of thumb), from :data:`companion.comm.PUBLISHED_EFFICIENCY`."""
    alg = checks.choice("inter_algorithm", inter_algorithm, ("ring", "tree", "sharp"))
    eff = comm.published_efficiency("sharp" if alg == "sharp" else "ring", "ib")
    return dataclasses.replace(f, nic_Bps=f.nic_Bps * eff)


HIER_SYSTEMS = ("DGX B200", "GB200 NVL72")
_SHORT = {"DGX B200": "DGX", "GB200 NVL72": "NVL72"}  # legend labels short enough to show
HIER_SIZES = tuple(2 ** e for e in range(16, 36, 2))  # 64 KiB .. 16 GiB


def hierarchical_curves(total_gpus: int = 576, inter_algorithm: str = "ring",
                        sizes=HIER_SIZES) -> pd.DataFrame:
    """All-reduce time against size on ``total_gpus`` GPUs: 8-GPU nodes ("DGX") vs NVL72 racks.

    Hierarchical (:func:`companion.fabric.hierarchical_all_reduce_time_s`) and, for contrast,
    one flat NCCL ring (:func:`companion.fabric.flat_ring_all_reduce_time_s`), every NIC at the
    published efficiency of its algorithm (:func:`measured_fabric`).
    """
    n = checks.number("total_gpus", total_gpus, integer=True, minimum=1)
    s = np.asarray(sizes, dtype=float)
    frames = []
    for name in HIER_SYSTEMS:
        f = system_fabric(name)
        checks.divides("gpus per domain", f.gpus_per_domain, "total_gpus", n)
        d = n // f.gpus_per_domain
        h = fabric.hierarchical_all_reduce_time_s(s, measured_fabric(f, inter_algorithm), d,
                                                  inter_algorithm)
        flat = fabric.flat_ring_all_reduce_time_s(s, measured_fabric(f, "ring"), d)
        frames.append(pd.DataFrame({"size_bytes": np.asarray(sizes), "time_ms": h.total_s * 1e3,
                                    "network_ms": h.scaleout_s * 1e3, "domains": d,
                                    "fabric": f"{_SHORT[name]} hier."}))
        frames.append(pd.DataFrame({"size_bytes": np.asarray(sizes), "time_ms": flat * 1e3,
                                    "network_ms": np.nan, "domains": d,
                                    "fabric": f"{_SHORT[name]} flat"}))
    return _chart_frame(pd.concat(frames, ignore_index=True))


def hierarchical_table(size_bytes: float, total_gpus: int = 576) -> pd.DataFrame:
    """NVLink and network phases of one hierarchical all-reduce on the two fabrics, and the
    time of one flat ring for comparison (ms)."""
    rows = []
    for name in HIER_SYSTEMS:
        f = system_fabric(name)
        d = total_gpus // f.gpus_per_domain
        h = fabric.hierarchical_all_reduce_time_s(size_bytes, f, d)
        rows.append({"fabric": name, "GPUs per NVLink domain": f.gpus_per_domain, "domains": d,
                     "network shard MB": size_bytes / f.gpus_per_domain / 1e6,
                     "nvlink_ms": h.scaleup_s * 1e3, "network_ms": h.scaleout_s * 1e3,
                     "total_ms": h.total_s * 1e3,
                     "flat_ring_ms": fabric.flat_ring_all_reduce_time_s(size_bytes, f, d) * 1e3})
    return pd.DataFrame(rows)


# -- MoE all-to-all ------------------------------------------------------------------------------

MOE_EP = (8, 16, 32, 64, 72, 144, 288)


def moe_dispatch_bytes(tokens: int, top_k: int, hidden: int, dtype: str = "bf16") -> float:
    """Bytes one GPU sends in one dispatch: each token goes to ``top_k`` experts, ``hidden``
    values each (the combine all-to-all sends as much back)."""
    for p, v in (("tokens", tokens), ("top_k", top_k), ("hidden", hidden)):
        checks.number(p, v, integer=True, minimum=1)
    return float(tokens * top_k * hidden * roofline.dtype_bytes(dtype))


def moe_curves(bytes_per_gpu: float, eps=MOE_EP) -> pd.DataFrame:
    """One dispatch all-to-all against expert-parallel size on DGX B200 nodes and NVL72 racks."""
    rows = []
    for name in HIER_SYSTEMS:
        f = system_fabric(name)
        for ep in eps:
            r = fabric.moe_all_to_all_time_s(bytes_per_gpu, ep, f)
            rows.append({"expert_parallel": ep, "fabric": name, "nvlink_ms": r.scaleup_s * 1e3,
                         "network_ms": r.scaleout_s * 1e3, "time_ms": r.total_s * 1e3})
    return _chart_frame(pd.DataFrame(rows))


# -- tensor parallelism across two nodes -------------------------------------------------------

def tp_cross_node_table(size_bytes: float, tp: int = 16, system: str = "DGX B200") -> pd.DataFrame:
    """One ring all-reduce of ``size_bytes`` over ``tp`` GPUs: inside one NVLink domain that
    holds them all, across ``tp / g`` nodes of ``system`` as NCCL runs it (channels over all the
    rails, :func:`companion.fabric.flat_all_reduce_time_s`), and the naive reading in which the
    cross-node hop has one NIC's bandwidth (for contrast: NCCL does not run it that way)."""
    f = system_fabric(system)
    n = checks.number("tp", tp, integer=True, minimum=2)
    checks.divides("gpus per node", f.gpus_per_domain, "tp", n)
    d = n // f.gpus_per_domain
    inside = dataclasses.replace(f, gpus_per_domain=n)
    one_nic = comm.collective_time_s("all_reduce", size_bytes, n, f.nic_Bps, f.net_latency_s)
    rows = [("inside one NVLink domain", f.scaleup_Bps,
             fabric.all_reduce_latency_s(inside, 1),
             fabric.flat_all_reduce_time_s(size_bytes, inside, 1)),
            (f"across {d} {system} nodes (NCCL: all rails)", fabric.flat_Bps(f, d),
             fabric.all_reduce_latency_s(f, d), fabric.flat_all_reduce_time_s(size_bytes, f, d)),
            ("naive: one NIC per GPU on every hop", f.nic_Bps,
             comm.collective_time_s("all_reduce", 0.0, n, f.nic_Bps, f.net_latency_s), one_nic)]
    out = pd.DataFrame(rows, columns=["ring", "bandwidth_Bps", "latency_s", "time_s"])
    return pd.DataFrame({"ring": out["ring"],
                         "GB/s per GPU per direction": out["bandwidth_Bps"] / 1e9,
                         "latency_us": out["latency_s"] * 1e6, "time_ms": out["time_s"] * 1e3,
                         "x inside": out["time_s"] / out["time_s"].iloc[0]})


# -- the mixed HDR/NDR fabric, tail latency, buckets ------------------------------------------

TAIL_SIZES = (8, 32, 128, 512, 2048, 8192)


def tail_curves(straggler_prob: float = 1e-4, congested_link_prob: float = 0.0,
                congestion_slowdown: float = 0.0, comm_fraction: float = 0.15,
                straggler_slowdown: float = 0.5, jitter: float = fabric.ASSUMED_JITTER,
                sizes=TAIL_SIZES, steps: int = 2000, seed: int = 0) -> pd.DataFrame:
    """P50 and P99 step time over the ideal step, against cluster size (seeded Monte Carlo).

    A step is 1 unit of work, ``comm_fraction`` of it exposed communication; each GPU is a
    straggler with ``straggler_prob`` (``straggler_slowdown`` extra compute) and each link is
    congested with ``congested_link_prob`` (the collective takes ``1 + congestion_slowdown``
    times longer); every GPU's compute also carries ``jitter`` (an assumed noise scale, see
    :data:`companion.fabric.ASSUMED_JITTER`). See :func:`companion.fabric.tail_latency`.
    """
    c = checks.number("comm_fraction", comm_fraction, minimum=0, maximum=0.99)
    r = fabric.tail_latency(sizes, 1.0 - c, c, jitter=jitter, straggler_prob=straggler_prob,
                            straggler_slowdown=straggler_slowdown,
                            congested_link_prob=congested_link_prob,
                            congestion_slowdown=congestion_slowdown, steps=steps, seed=seed)
    return pd.concat([pd.DataFrame({"gpus": r.sizes, "step_over_ideal": r.p50_s / r.ideal_s,
                                    "percentile": "P50"}),
                      pd.DataFrame({"gpus": r.sizes, "step_over_ideal": r.p99_s / r.ideal_s,
                                    "percentile": "P99"})], ignore_index=True).pipe(_chart_frame)


def congestion_to_double_p99(compute_s: float, comm_s: float) -> float:
    """The ``congestion_slowdown`` x at which a congested step takes twice the ideal step.

    A congested collective takes ``1 + x`` times its normal time (the step model of
    :func:`companion.fabric.tail_latency`, without jitter): ``compute + comm (1 + x) =
    2 (compute + comm)``.
    """
    c = checks.number("compute_s", compute_s, nonnegative=True)
    m = checks.number("comm_s", comm_s, positive=True)
    return (c + m) / m


def congested_link_prob_for(percentile: float, links: int) -> float:
    """Per-link congestion probability at which a step over ``links`` links is congested with
    probability ``1 - percentile`` (the inverse of ``1 - (1 - q)**links``)."""
    p = checks.number("percentile", percentile, minimum=0, maximum=1)
    n = checks.number("links", links, integer=True, minimum=1)
    return -math.expm1(math.log(p) / n)


@dataclass(frozen=True)
class HdrLeafStory:
    """The seed's 2,000-GPU data-parallel job on an NDR fabric with HDR leaves (seconds)."""
    gpus: int
    domains: int
    leaves: int  # all rails together
    rails: int
    slow_leaf_fraction: float
    p_touch_slow_leaf: float
    grad_bytes: float
    compute_s: float
    comm_healthy_s: float
    comm_mixed_s: float
    ndr_Bps: float
    hdr_Bps: float
    seq_len: int
    microbatches: int

    @property
    def leaves_per_rail(self) -> int:
        return self.leaves // self.rails

    @property
    def step_healthy_s(self) -> float:
        return self.compute_s + self.comm_healthy_s

    @property
    def step_mixed_s(self) -> float:
        return self.compute_s + self.comm_mixed_s

    @property
    def step_ratio(self) -> float:
        """Mixed over healthy step time: what the HDR leaf alone does to every step."""
        return self.step_mixed_s / self.step_healthy_s

    @property
    def congestion_to_double(self) -> float:
        """The extra factor x (a congested all-reduce takes 1 + x times as long) that makes a
        healthy step twice as long."""
        return congestion_to_double_p99(self.compute_s, self.comm_healthy_s)


#: The 13B GPT layer stack of the seeds' TP case (40 layers, hidden 5120, 40 heads, 4h MLP).
GPT_13B = dict(layers=40, hidden=5120, heads=40)


def hdr_leaf_story(gpus: int = 2000, system: str = "DGX B200", seq_len: int = 4096,
                   microbatches: int = 4, slow_leaf_fraction: float = 0.125,
                   slow_link: str = "HDR") -> HdrLeafStory:
    """Step time of a data-parallel 13B job with and without slow leaves.

    Compute per step: the roofline time of :func:`tp_layer` (``tp=1``) for 40 layers and
    ``microbatches`` sequences of ``seq_len`` tokens per GPU (an upper bound on speed, so the
    communication share is, if anything, overstated). Communication: one hierarchical
    all-reduce of the bf16 gradients (:class:`companion.model.Transformer` parameter count),
    not overlapped. The job spans ``gpus / 8`` nodes; a rail's leaf takes 32 of them, and a
    rail-optimized node plugs each of its 8 NICs into a different rail, so the job touches
    ``8 x ceil(nodes / 32)`` leaves (:func:`companion.fabric.job_leaves`).
    """
    from ..model import Transformer
    n = checks.gpu_count("gpus", gpus)
    microbatches = checks.number("microbatches", microbatches, integer=True, minimum=1)
    healthy = system_fabric(system)
    mixed = system_fabric(system, slow_leaf_fraction=slow_leaf_fraction, slow_link=slow_link)
    checks.divides("gpus per domain", healthy.gpus_per_domain, "gpus", n)
    d = n // healthy.gpus_per_domain
    leaves = fabric.job_leaves(healthy, d)
    gpu = hardware.system(system).gpu()
    m = Transformer("gpt-13b", GPT_13B["layers"], GPT_13B["hidden"], GPT_13B["heads"],
                    4 * GPT_13B["hidden"], 51200, seq_len)
    layer = tp_layer(gpu.key, hidden=m.hidden, heads=m.heads, seq_len=seq_len, tp=1)
    compute_s = layer.compute_s * m.layers * microbatches
    grad = m.params * roofline.dtype_bytes("bf16")
    t_h = fabric.hierarchical_all_reduce_time_s(grad, healthy, d).total_s
    t_m = fabric.hierarchical_all_reduce_time_s(grad, mixed, d).total_s
    return HdrLeafStory(n, d, leaves, fabric.rails(healthy), slow_leaf_fraction,
                        fabric.slow_leaf_probability(slow_leaf_fraction, leaves), grad,
                        compute_s, t_h, t_m, healthy.nic_Bps, mixed.bottleneck_nic_Bps,
                        seq_len, microbatches)


BUCKET_SIZES = tuple(float(x) for x in np.logspace(6, 10, 17))  # 1 MB .. 10 GB


def megatron_default_bucket_elements(dp: int) -> int:
    """Megatron-Core's default DDP bucket: max(40,000,000, 1,000,000 x DP) elements
    (megatron/core/distributed/distributed_data_parallel.py, NVIDIA/Megatron-LM)."""
    dp = checks.number("dp", dp, integer=True, minimum=1)
    return int(fabric.megatron_default_bucket_params(dp))


def bucket_fabric(link: str = "NDR", system: str = "DGX B200") -> fabric.Fabric:
    """``system``'s fabric with its NICs running at ``link``'s rate (``"NDR"``, ``"HDR"``)."""
    return dataclasses.replace(system_fabric(system),
                               nic_Bps=hardware.link(link).per_direction_Bps)


def bucket_curves(gpus: int = 2048, link: str = "NDR", backward_ms: float = 800.0,
                  grad_bytes: float = 26e9, system: str = "DGX B200",
                  buckets=BUCKET_SIZES) -> pd.DataFrame:
    """Exposed gradient communication after the backward pass against bucket size.

    One flat NCCL all-reduce per bucket over ``gpus`` ranks in ``system`` nodes whose NICs run
    at ``link``'s rate, ring or tree, priced as NCCL's tuning model prices it
    (:func:`companion.fabric.flat_all_reduce_time_s`: only the steps that cross nodes pay the
    network latency; the ring's bandwidth is the node's NICs together, capped by NVLink), and
    scheduled by :func:`companion.fabric.bucket_plan`.
    """
    f = bucket_fabric(link, system)
    n = checks.number("gpus", gpus, integer=True, minimum=1)
    backward_ms = checks.number("backward_ms", backward_ms, nonnegative=True)
    checks.divides("gpus per node", f.gpus_per_domain, "gpus", n)
    d = n // f.gpus_per_domain
    frames = []
    for alg in fabric.FLAT_ALGORITHMS:
        plan = fabric.bucket_plan(grad_bytes, np.asarray(buckets), backward_ms * 1e-3,
                                  lambda size: fabric.flat_all_reduce_time_s(size, f, d, alg))
        frames.append(pd.DataFrame({"bucket_MB": plan.bucket_bytes / 1e6,
                                    "exposed_ms": plan.exposed_s * 1e3,
                                    "buckets": plan.n_buckets, "algorithm": alg}))
    return _chart_frame(pd.concat(frames, ignore_index=True))


# -- the measurement -----------------------------------------------------------------------------

def measured_frame(result: dict) -> pd.DataFrame:
    """Rows of a :func:`companion.bench.collectives.launch` result with the fitted line."""
    rows = pd.DataFrame(result["rows"])
    f = result["fit"]
    fit = comm.AlphaBetaFit(f["alpha_s"], f["beta_s_per_byte"], f["r2"], len(rows))
    return pd.DataFrame({"size_bytes": rows["size_bytes"], "median_us": rows["time_s"] * 1e6,
                         "p10_us": rows["time_p10_s"] * 1e6,
                         "fit_us": fit.time_s(rows["size_bytes"].to_numpy()) * 1e6,
                         "algbw_GBps": rows["algbw_Bps"] / 1e9,
                         "busbw_GBps": rows["busbw_Bps"] / 1e9})


def measured_chart(frame: pd.DataFrame, title: str = ""):
    """Measured p10 and median times (points) and the alpha-beta line, log-log."""
    import altair as alt
    long = frame.melt(id_vars="size_bytes", value_vars=["p10_us", "median_us", "fit_us"],
                      var_name="series", value_name="time_us")
    base = alt.Chart(long).encode(
        x=alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title="message size (bytes)"),
        y=alt.Y("time_us:Q", scale=alt.Scale(type="log"), title="time per call (us)"),
        color="series:N", tooltip=["series", "size_bytes", "time_us"])
    points = base.transform_filter("datum.series != 'fit_us'").mark_point(filled=True)
    line = base.transform_filter("datum.series == 'fit_us'").mark_line()
    return (points + line).properties(width=420, height=260, title=title)


__all__ = ["CHART_LABELS", "labelled", "label", "LADDER_KEYS", "EXPLORER_LINKS", "EXPLORER_OPS", "EXPLORER_GPUS", "link_ladder",
           "link_ladder_chart", "explorer_link", "algorithms_for", "collective_curves",
           "half_bandwidth_size",
           "PUBLISHED_H100_NVLS", "published_vs_model", "SEED_TP_SHARE", "TPLayer", "tp_layer",
           "tp_table", "tp_share_curves", "system_fabric", "hierarchical_curves",
           "hierarchical_table", "measured_fabric", "tp_cross_node_table", "TP_BANDWIDTHS",
           "bucket_fabric", "moe_dispatch_bytes", "moe_curves", "tail_curves",
           "congestion_to_double_p99", "congested_link_prob_for", "HdrLeafStory", "GPT_13B",
           "hdr_leaf_story",
           "megatron_default_bucket_elements", "bucket_curves", "measured_frame",
           "measured_chart"]
