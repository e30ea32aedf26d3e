"""Collective communication: alpha-beta costs and the conventions of nccl-tests.

Every cost here is ``time = latency terms + traffic / bandwidth`` (the alpha-beta or
Hockney model). Two conventions matter and are easy to get wrong:

- ``bandwidth_Bps`` is the bandwidth of one GPU **in one direction** (bytes/s it can send
  while it also receives as much). NVLink 4's "900 GB/s" is the bidirectional sum: its
  per-direction line rate is 450 GB/s, which is what an all-reduce's bus bandwidth is
  compared with (NCCL maintainer in nccl-tests issue 212,
  https://github.com/NVIDIA/nccl-tests/issues/212).
- ``size_bytes`` follows nccl-tests: for all-reduce, broadcast and reduce it is the buffer
  each rank holds; for all-gather and reduce-scatter it is the **total** (gathered) buffer,
  ``n`` times the per-rank piece; for all-to-all it is the buffer each rank sends (all
  peers' pieces together); for send/recv it is the message.

Formulas (``n`` ranks, ``S`` bytes, ``B`` per-direction bandwidth, ``a`` latency per step):

============== ========= ==============================================================
op             algorithm time
============== ========= ==============================================================
all_reduce     ring      2(n-1) a + 2(n-1)/n S/B
all_reduce     tree      2 floor(log2 n) a + 2 S/B  (double binary tree)
all_reduce     nvls      2 a + (n+1)/n S/B          (NVLink SHARP in the NVSwitch)
all_reduce     sharp     2 a + S/B                  (InfiniBand SHARP in the switches)
reduce_scatter ring      (n-1) a + (n-1)/n S/B
all_gather     ring      (n-1) a + (n-1)/n S/B
broadcast      ring      (n-1) a + S/B              (pipelined chain)
reduce         ring      (n-1) a + S/B
all_to_all     direct    a + (n-1)/n S/B            (all peers at once)
send_recv      direct    a + S/B
============== ========= ==============================================================

Sources: the ring bandwidth terms are the lower bounds derived in nccl-tests'
doc/PERFORMANCE.md (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md);
the tree's ``2 S/B`` and its ``2 log2`` latency are NCCL's own tuning model
(src/graph/tuning.cc in https://github.com/NVIDIA/nccl: tree algorithm bandwidth is half
the bus bandwidth; tree latency is twice the depth, ``2 * log2i(nNodes) * interLat`` with
``log2i`` rounding down, as :func:`companion.fabric.all_reduce_latency_s` counts it too), described in the NCCL 2.4 blog
(https://developer.nvidia.com/blog/massively-scale-deep-learning-training-nccl-2-4/).
NVLS: each GPU's link carries ``S`` to the switch for the multimem load-reduce of every
chunk plus ``S/n`` for its own reduced chunk's multicast store, and the same inbound.
All-to-all: NCCL runs it as grouped send/recv that progress concurrently
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/p2p.html).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from companion import checks

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce",
       "send_recv")

# The first algorithm of each op is its default.
ALGORITHMS = {
    "all_reduce": ("ring", "tree", "nvls", "sharp"),
    "reduce_scatter": ("ring",),
    "all_gather": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("direct",),
    "send_recv": ("direct",),
}
ALL_ALGORITHMS = ("ring", "tree", "nvls", "sharp", "direct")


def _op(op: str) -> str:
    return checks.choice("op", op, OPS)


def _algorithm(op: str, algorithm: str | None) -> str:
    allowed = ALGORITHMS[op]
    if algorithm is None:
        return allowed[0]
    checks.choice("algorithm", algorithm, ALL_ALGORITHMS)
    if algorithm not in allowed:
        raise ValueError(f"algorithm {algorithm!r} is not modelled for op {op!r}; "
                         f"allowed for {op}: {', '.join(allowed)}")
    return algorithm


def _sizes(param: str, size_bytes):
    """Nonnegative finite sizes as float64; scalars stay scalars (returned flag)."""
    if isinstance(size_bytes, bool):
        raise TypeError(f"{param} must be a number or an array of numbers; got bool")
    arr = np.asarray(size_bytes)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{param} must be a number or an array of numbers; got {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{param} must be finite")
    if np.any(arr < 0):
        raise ValueError(f"{param} must be >= 0; got min {arr.min()!r}")
    return arr, arr.ndim == 0


def _ranks(n, param: str = "n"):
    """Rank counts as int64 (>= 1); scalar or array."""
    if isinstance(n, bool):
        raise TypeError(f"{param} must be an integer number of ranks; got bool")
    arr = np.asarray(n)
    if arr.ndim == 0:
        return np.int64(checks.number(param, arr.item(), integer=True, minimum=1))
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{param} must hold integers; got dtype {arr.dtype}")
    if np.any(arr < 1):
        raise ValueError(f"{param} must be >= 1 (number of ranks); got min {arr.min()!r}")
    return arr.astype(np.int64)


def _out(x, scalar: bool):
    return float(x) if scalar and np.ndim(x) == 0 else np.asarray(x, dtype=np.float64)


def bus_factor(op: str, n) -> float | np.ndarray:
    """nccl-tests' correction from algorithm to bus bandwidth for ``op`` on ``n`` ranks.

    all_reduce 2(n-1)/n; reduce_scatter, all_gather and all_to_all (n-1)/n; broadcast,
    reduce and send_recv 1 (doc/PERFORMANCE.md and the ``src/*.cu`` files of nccl-tests).
    nccl-tests applies the all-reduce factor whatever algorithm NCCL picked, so with NVLS or
    SHARP the printed bus bandwidth can exceed the link's line rate.
    """
    op = _op(op)
    n = _ranks(n)
    if op == "all_reduce":
        f = 2.0 * (n - 1) / n
    elif op in ("reduce_scatter", "all_gather", "all_to_all"):
        f = (n - 1) / n
    else:
        f = np.ones_like(n, dtype=np.float64)
    return _out(f, np.ndim(n) == 0)


def algo_bandwidth(size_bytes, seconds):
    """Algorithm bandwidth ``S / t`` in bytes/s, as nccl-tests' ``algbw`` column."""
    s, scalar = _sizes("size_bytes", size_bytes)
    t = checks.real_array("seconds", seconds, positive=True)
    return _out(s / t, scalar and t.ndim == 0)


def bus_bandwidth(op: str, size_bytes, n, seconds):
    """Bus bandwidth in bytes/s, as nccl-tests' ``busbw`` column: algbw times :func:`bus_factor`.

    It is comparable with one GPU's per-direction link bandwidth whatever ``n`` is.
    ``size_bytes`` follows the nccl-tests convention described in the module docstring.
    """
    return algo_bandwidth(size_bytes, seconds) * bus_factor(op, n)


def collective_time_s(op: str, size_bytes, n, bandwidth_Bps: float, latency_s: float,
                      algorithm: str | None = None):
    """Alpha-beta time of one collective, in seconds (table in the module docstring).

    ``bandwidth_Bps`` is one GPU's per-direction bandwidth; ``latency_s`` the latency of one
    step (one hop of a ring, one level of a tree, one trip through the switch). ``size_bytes``
    and ``n`` may be numpy arrays (broadcast together). One rank communicates nothing: 0 s.
    """
    op = _op(op)
    algorithm = _algorithm(op, algorithm)
    s, scalar = _sizes("size_bytes", size_bytes)
    n = _ranks(n)
    b = checks.number("bandwidth_Bps", bandwidth_Bps, positive=True)
    a = checks.number("latency_s", latency_s, nonnegative=True)
    nf = np.asarray(n, dtype=np.float64)
    if op == "send_recv":
        t = a + s / b + 0.0 * nf
    elif algorithm == "ring" and op == "all_reduce":
        t = 2 * (nf - 1) * a + 2 * (nf - 1) / nf * s / b
    elif algorithm == "tree":
        depth = np.floor(np.log2(np.maximum(nf, 1)))  # NCCL's log2i
        t = 2 * depth * a + 2 * s / b
    elif algorithm == "nvls":
        t = 2 * a + (nf + 1) / nf * s / b
    elif algorithm == "sharp":
        t = 2 * a + s / b
    elif op in ("reduce_scatter", "all_gather"):
        t = (nf - 1) * a + (nf - 1) / nf * s / b
    elif op in ("broadcast", "reduce"):
        t = (nf - 1) * a + s / b
    else:  # all_to_all, direct
        t = a + (nf - 1) / nf * s / b
    t = np.where(nf > 1, t, 0.0)
    return _out(t, scalar and np.ndim(n) == 0)


@dataclass(frozen=True)
class PublishedEfficiency:
    """A large-message bandwidth NCCL reaches with ``algorithm`` on ``link``, as a share of
    the alpha-beta bound of that algorithm at the link's line rate (``efficiency``)."""
    algorithm: str
    link: str
    efficiency: float
    measured: str
    source: str


# Issue 212 quotes the line rate too ("450GB/s is the line rate"). On 8 GPUs NVLS's busbw
# bound is the line rate times 2(n-1)/n over (n+1)/n = 14/9: 700 GB/s.
_NVLS_BOUND_OVER_LINE_8 = (2 * 7 / 8) / (9 / 8)

#: What the algorithms reach in practice: the gains of the switch reductions (NVLS, SHARP) over
#: the ring are the ratios of these, not of the ideal traffic factors (NVLS on 8 H100: 480 / 370
#: = 1.30x, not 1.56x). NVLS was measured on 8 GPUs; on 4 its measured busbw equals the ring's
#: (NVIDIA/nccl issue 1455), which this single factor reproduces, and on 2 it underestimates.
#: The NDR figure is per NIC whatever the algorithm (ring and tree use it alike).
PUBLISHED_EFFICIENCY = {
    ("ring", "nvlink"): PublishedEfficiency(
        "ring", "nvlink", 370e9 / 450e9, "ring busbw 370 GB/s on 8 H100 (line rate 450 GB/s)",
        "NCCL developer S. Jeaugey in NVIDIA/nccl-tests issue 212 ('NCCL can get an effective "
        "NVLink bandwidth of 370GB/s'); 365-370 GB/s from 2 to 8 GPUs in NVIDIA/nccl issue "
        "1455, https://github.com/NVIDIA/nccl-tests/issues/212"),
    ("nvls", "nvlink"): PublishedEfficiency(
        "nvls", "nvlink", 480e9 / 450e9 / _NVLS_BOUND_OVER_LINE_8,
        "NVLS all-reduce busbw ~480 GB/s (algbw ~275) on 8 H100; the bound is 700 GB/s",
        "NVIDIA/nccl-tests issue 212 (same comment) and NVIDIA/nccl issue 1455 (480 GB/s at 8 "
        "GPUs), https://github.com/NVIDIA/nccl-tests/issues/212"),
    ("ring", "ib"): PublishedEfficiency(
        "ring", "ib", 47e9 / 50e9, "46-48 GB/s per 400 Gb/s NDR NIC (line rate 50 GB/s)",
        "NVIDIA engineer in NVIDIA/nccl-tests issue 290 ('For NDR @ 400Gbps you should see "
        "46-48GB/s per NIC'), https://github.com/NVIDIA/nccl-tests/issues/290"),
    ("sharp", "ib"): PublishedEfficiency(
        "sharp", "ib", 20e9 / 25e9,
        "~20 GB/s per HDR NIC (line rate 25 GB/s) with CollNet/SHARP; a developer's rule of "
        "thumb, not a benchmark",
        "S. Jeaugey in NVIDIA/nccl issue 320 'What is CollNet?' ('My rule of thumb is ~20 GB/s "
        "per NIC'), https://github.com/NVIDIA/nccl/issues/320"),
}


def published_efficiency(algorithm: str, link: str) -> float:
    """The published efficiency of ``algorithm`` on ``link`` (``"nvlink"`` or ``"ib"``)."""
    key = (checks.choice("algorithm", algorithm, ALL_ALGORITHMS),
           checks.choice("link", link, ("nvlink", "ib")))
    if key not in PUBLISHED_EFFICIENCY:
        have = ", ".join(f"{a} on {ln}" for a, ln in PUBLISHED_EFFICIENCY)
        raise ValueError(f"no published efficiency for {algorithm} on {link}; have: {have}")
    return PUBLISHED_EFFICIENCY[key].efficiency


def ring_steps(op: str, n: int) -> int:
    """Latency steps (multiples of ``latency_s``) of ``op``'s default algorithm on ``n`` ranks
    (one integer >= 1)."""
    op = _op(op)
    n = checks.number("n", n, integer=True, minimum=1)
    if n == 1:
        return 0
    if op == "all_reduce":
        return 2 * (n - 1)
    return 1 if op in ("all_to_all", "send_recv") else n - 1


@dataclass(frozen=True)
class AlphaBetaFit:
    """A least-squares fit ``t = alpha_s + beta_s_per_byte * size``.

    ``r2`` is the ordinary coefficient of determination of the fitted line on the measured
    times; ``bandwidth_Bps`` is ``1 / beta_s_per_byte`` (algorithm bandwidth at large sizes).
    """
    alpha_s: float
    beta_s_per_byte: float
    r2: float
    points: int

    def __post_init__(self):
        # a negative latency or per-byte cost would predict negative times (time_s(0) < 0)
        checks.number("alpha_s", self.alpha_s, nonnegative=True)
        checks.number("beta_s_per_byte", self.beta_s_per_byte, nonnegative=True)

    @property
    def bandwidth_Bps(self) -> float:
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf

    def time_s(self, size_bytes):
        """Predicted time for ``size_bytes`` (scalar or array)."""
        s, scalar = _sizes("size_bytes", size_bytes)
        return _out(self.alpha_s + self.beta_s_per_byte * s, scalar)


def fit_alpha_beta(size_bytes, seconds, relative: bool = True) -> AlphaBetaFit:
    """Fit ``t = alpha + beta * S`` to measurements.

    With ``relative=True`` (default) the fit minimises relative residuals, ``sum((t_i -
    fit_i) / t_i)**2``: sizes spanning decades otherwise let the largest message decide the
    intercept, and alpha comes out as noise (even negative).

    A latency or a per-byte cost below zero has no meaning (``time_s(0)`` would be negative),
    so the fit is the least-squares line with ``alpha >= 0`` and ``beta >= 0``: where the free
    line has a negative coefficient, the better of the two boundary lines (through the origin,
    or flat) in the same weighted residual. Noisy timings of small messages can tip a free fit
    below zero; the constrained one is what the measurements support.
    """
    s, _ = _sizes("size_bytes", size_bytes)
    t = checks.real_array("seconds", seconds)
    s = np.atleast_1d(s)
    t = np.atleast_1d(t)
    if s.shape != t.shape or s.ndim != 1:
        raise ValueError(f"size_bytes and seconds must be 1-D of equal length; got "
                         f"{s.shape} and {t.shape}")
    if len(s) < 2 or len(np.unique(s)) < 2:
        raise ValueError("need at least two distinct sizes to fit alpha and beta")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("seconds must be finite and > 0")
    w = 1.0 / t if checks.boolean("relative", relative) else np.ones_like(t)
    design = np.stack([np.ones_like(s), s], axis=1) * w[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, t * w, rcond=None)
    if alpha < 0 or beta < 0:  # the constrained optimum lies on a boundary: try both
        ww = w * w
        lines = [(0.0, float(np.sum(ww * s * t) / np.sum(ww * s * s))),  # through the origin
                 (float(np.sum(ww * t) / np.sum(ww)), 0.0)]  # flat
        alpha, beta = min(lines, key=lambda ab: float(np.sum(ww * (t - ab[0] - ab[1] * s) ** 2)))
    pred = alpha + beta * s
    ss_res = float(np.sum((t - pred) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return AlphaBetaFit(float(alpha), float(beta), r2, len(s))
