"""Rooflines: FLOPs, bytes moved, arithmetic intensity, and what a GPU can do with them.

A kernel is a :class:`Cost` (FLOPs and the bytes it must move to and from HBM). The roofline
(Williams, Waterman and Patterson 2009) bounds its time by ``max(flops / peak, bytes /
bandwidth)``; the ridge point ``peak / bandwidth`` is the intensity where the two meet.

GEMMs on a GPU lose a further, predictable fraction to quantization (NVIDIA, *Matrix
Multiplication Background User's Guide*, Deep Learning Performance documentation,
https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html,
sections "Tile Quantization" and "Wave Quantization"): the output is cut into tiles, one
thread block per tile, so a dimension that is not a multiple of the tile pays for a whole
extra tile; and the tiles run in waves of one tile per SM, so a last wave that leaves SMs
idle wastes their share. :func:`gemm_efficiency` multiplies the two fractions. The default
tile is 128 x 128 outputs, one of the tile sizes that guide lists for cuBLAS (256x128,
128x256, 128x128, 64x128, ...): the Ampere picture of one such CTA per SM. Newer GPUs run
bigger tiles, and :data:`TILE_PRESETS` names them per architecture (``tile="hopper"``,
``tile="blackwell"`` or ``tile="auto"`` for the GPU's own): Hopper's CUTLASS kernels use
128 x 256 (or 256 x 128) tiles in 2-CTA clusters, one CTA per SM; Blackwell's 2-SM UMMA
computes a 256 x 256 tile on a pair of SMs, so the wave is counted in SM pairs. Libraries pick
per shape, so pass ``tile=`` to test others. What the model leaves out (so it is an upper
bound): kernel launch latency (``overhead_s``), pipeline fill for short K, split-K and
stream-K schedules.

HBM is not the only memory level. A working set that fits in the last-level cache (NVIDIA's L2,
50 MiB on an H100 and 126.5 MiB on a B200; AMD's 256 MiB Infinity Cache on MI300X) is read from
there when the cache is warm, as in any loop that times one kernel without flushing:
:func:`cached_roofline_time` prices that case. NVIDIA publishes no L2 bandwidth, so with a warm
cache and no ``cache_Bps`` the compute roof is the only bound it can state (a lower bound on
time), and it says so in the result.

The ``gpu`` argument is a name resolved by :func:`companion.hardware.gpu`, or any object with
``peak_flops(precision, sparse=False)``, ``hbm_Bps`` and ``sm_count``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from companion import checks

#: Bytes per element of each storage type (fp6/fp4 are packed sub-byte formats).
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "e4m3": 1,
               "e5m2": 1, "int8": 1, "fp6": 0.75, "fp4": 0.5, "int4": 0.5}
# Storage type -> tensor-core precision whose peak applies.
_PRECISION_OF = {"e4m3": "fp8", "e5m2": "fp8", "int4": "fp4"}

SEED_FFN_SHAPE = (512, 4096, 512)  # the seeds' "typical FFN" GEMM, M x N x K

#: The book's labels of its two GEMM efficiency figures, shown side by side wherever a GEMM
#: efficiency appears: this module's roofline (tile and wave quantization its only losses) and
#: the same with the compute roof at the published best GEMM (MAMF), a burst rate.
IDEAL_LABEL = "ideal roofline (tile/wave quantization only)"
BURST_LABEL = "published burst (MAMF)"


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (one of :data:`DTYPE_BYTES`)."""
    return DTYPE_BYTES[checks.choice("dtype", dtype, DTYPE_BYTES)]


def _pos(param, value):
    # 2**53: the float64 formulas below are exact for every integer up to it
    return checks.number(param, value, integer=True, positive=True, maximum=checks.MAX_EXACT_INT)


def resolve_gpu(gpu):
    """A GPU spec from a registry name, or the object itself if it has the needed attributes."""
    if isinstance(gpu, str):
        from companion import hardware  # lazy: the registry loads data files
        return hardware.gpu(gpu)
    missing = [a for a in ("peak_flops", "hbm_Bps", "sm_count") if not hasattr(gpu, a)]
    if missing:
        raise TypeError(f"gpu must be a GPU name or a spec with peak_flops, hbm_Bps and "
                        f"sm_count; {type(gpu).__name__} lacks {', '.join(missing)}")
    return gpu


@dataclass(frozen=True)
class Cost:
    """Work of one kernel: ``flops`` and ``bytes_moved`` to/from HBM (compulsory traffic)."""

    name: str
    flops: float
    bytes_moved: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes_moved


def _positive_ints(param, x):
    """``x`` as a float64 array of positive integers (exact below 2**53), or a ValueError
    (a TypeError for strings and booleans, which numpy would convert)."""
    if isinstance(x, (str, bytes)) or np.asarray(x).dtype.kind in "USb":
        raise TypeError(f"{param} must be a positive integer or an array of them; got "
                        f"{type(x).__name__} {x!r:.40}")
    try:
        a = np.asarray(x, dtype=np.float64)
    except OverflowError:
        raise ValueError(f"{param} must hold positive integers up to 2**53; got one too large "
                         f"for a float") from None
    ok = (a > 0) & (a == np.floor(a)) & (a <= checks.MAX_EXACT_INT)
    if not ok.all():
        raise ValueError(f"{param} must hold positive integers up to 2**53; got "
                         f"{a[~ok][:3].tolist()}")
    return a


def gemm_arrays(m, n, k, dtype: str = "bf16", out_dtype: str | None = None, batch=1):
    """FLOPs and bytes of :func:`gemm` for arrays of shapes (broadcast together): the one
    implementation of the formulas, which :func:`gemm` calls with single values."""
    m, n, k, batch = (_positive_ints(p, v) for p, v in (("m", m), ("n", n), ("k", k),
                                                         ("batch", batch)))
    a = dtype_bytes(dtype)
    c = a if out_dtype is None else dtype_bytes(out_dtype)
    return 2.0 * batch * m * n * k, batch * ((m * k + k * n) * a + m * n * c)


def gemm(m: int, n: int, k: int, dtype: str = "bf16", out_dtype: str | None = None,
         batch: int = 1) -> Cost:
    """C[m,n] = A[m,k] B[k,n], ``batch`` times: 2mnk FLOPs (one multiply and one add per
    multiply-accumulate); bytes = A and B read once in ``dtype`` plus C written once in
    ``out_dtype`` (default ``dtype``)."""
    m, n, k, batch = (_pos(p, v) for p, v in (("m", m), ("n", n), ("k", k), ("batch", batch)))
    flops, moved = gemm_arrays(m, n, k, dtype, out_dtype, batch)
    return Cost(_gemm_name(m, n, k, batch), float(flops), float(moved))


def _gemm_name(m, n, k, batch):
    return f"gemm {m}x{n}x{k}" + (f" x{batch}" if batch > 1 else "")


def batched_gemm(batch: int, m: int, n: int, k: int, dtype: str = "bf16",
                 out_dtype: str | None = None) -> Cost:
    """``batch`` independent GEMMs of the same shape (e.g. attention heads)."""
    return gemm(m, n, k, dtype, out_dtype, batch=batch)


def attention(seq_len: int, heads: int, head_dim: int, batch: int = 1,
              kv_heads: int | None = None, causal: bool = False, dtype: str = "bf16",
              flash: bool = True) -> Cost:
    """Forward attention softmax(QK^T)V.

    FLOPs: the two GEMMs, 4 b a s^2 d (halved when ``causal`` and ``flash``: FlashAttention
    skips fully masked blocks; a naive kernel computes them all). Bytes, naive (standard
    attention, Algorithm 0 of Dao et al. 2022, arXiv:2205.14135): read Q, K, V; write S,
    read S, write P, read P; write O: Theta(Nd + N^2) per head. Bytes, ``flash=True``: Q, K,
    V read once and O written once, the compulsory lower bound that FlashAttention's tiling
    approaches (Dao et al. 2022, Theorem 2, when K/V blocks are reused from on-chip memory).
    """
    s, a, d, b = (_pos(p, v) for p, v in (("seq_len", seq_len), ("heads", heads),
                                          ("head_dim", head_dim), ("batch", batch)))
    g = a if kv_heads is None else _pos("kv_heads", kv_heads)
    checks.divides("kv_heads", g, "heads", a)
    causal, flash = checks.boolean("causal", causal), checks.boolean("flash", flash)
    e = dtype_bytes(dtype)
    flops = 4.0 * b * a * s * s * d * (0.5 if (causal and flash) else 1.0)
    qkvo = b * s * d * (2 * a + 2 * g) * e
    scores = 0.0 if flash else 4.0 * b * a * s * s * e  # S write+read, P write+read
    kind = "flash" if flash else "naive"
    return Cost(f"attention {kind} s={s}", flops, qkvo + scores)


def elementwise(n_elements: int, dtype: str = "bf16", reads: int = 1, writes: int = 1,
                flops_per_element: float = 1.0, name: str = "elementwise") -> Cost:
    """A pointwise op over ``n_elements``: each element read ``reads`` times (inputs) and
    written ``writes`` times, ``flops_per_element`` FLOPs each (e.g. GELU, residual add)."""
    n = _pos("n_elements", n_elements)
    checks.number("reads", reads, integer=True, nonnegative=True)
    checks.number("writes", writes, integer=True, nonnegative=True)
    checks.number("flops_per_element", flops_per_element, nonnegative=True)
    if reads + writes == 0:
        raise ValueError("reads + writes must be > 0")
    return Cost(name, float(n) * flops_per_element,
                float(n) * (reads + writes) * dtype_bytes(dtype))


def layernorm(rows: int, hidden: int, dtype: str = "bf16", rms: bool = False) -> Cost:
    """LayerNorm (or RMSNorm) forward: read x, write y. About 5 FLOPs per element (mean,
    variance, normalize, scale, shift; 4 for RMSNorm): an order-of-magnitude count, which is
    enough: the op sits two orders of magnitude below any GPU's ridge point."""
    n = _pos("rows", rows) * _pos("hidden", hidden)
    rms = checks.boolean("rms", rms)
    return elementwise(n, dtype, 1, 1, 4.0 if rms else 5.0, "rmsnorm" if rms else "layernorm")


def softmax(rows: int, cols: int, dtype: str = "bf16") -> Cost:
    """Row softmax: read and write each element; max, subtract, exp, sum, divide."""
    return elementwise(_pos("rows", rows) * _pos("cols", cols), dtype, 1, 1, 5.0, "softmax")


def _precision(dtype: str, precision: str | None) -> str:
    if precision is not None:
        return precision
    dtype_bytes(dtype)  # validates
    return _PRECISION_OF.get(dtype, dtype)


def ridge_point(gpu, precision: str = "bf16", sparse: bool = False) -> float:
    """Intensity (FLOP/byte) where the compute roof meets the HBM roof: peak / bandwidth."""
    g = resolve_gpu(gpu)
    return g.peak_flops(precision, sparse=sparse) / _hbm_Bps(g)


def attainable_flops(intensity, gpu, precision: str = "bf16", sparse: bool = False):
    """Roofline: min(peak, intensity x bandwidth) in FLOP/s; ``intensity`` may be an array."""
    g = resolve_gpu(gpu)
    checks.real_array("intensity (FLOP per byte)", intensity, positive=True)  # no overflow
    x = np.asarray(intensity, dtype=float)
    if np.any(~np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("intensity must be finite and > 0 (FLOP per byte)")
    out = np.minimum(g.peak_flops(precision, sparse=sparse), x * _hbm_Bps(g))
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class Timing:
    """Roofline time of a kernel on a GPU, with the two bounds it came from."""

    name: str
    flops: float
    bytes_moved: float
    compute_s: float
    memory_s: float
    time_s: float
    bound: str  # "compute" or "memory"
    achieved_flops: float  # FLOP/s
    fraction_of_peak: float  # achieved / peak: the kernel's MFU ceiling


def roofline_time_arrays(flops, bytes_moved, gpu, precision: str = "bf16", efficiency=1.0,
                         overhead_s: float = 0.0):
    """Compute time, memory time and time (seconds, arrays) of kernels with ``flops`` and
    ``bytes_moved`` (arrays, broadcast with ``efficiency``): the one implementation of
    :func:`roofline_time`'s formulas."""
    g = resolve_gpu(gpu)
    flops = checks.real_array("flops", flops, nonnegative=True)
    bytes_moved = checks.real_array("bytes_moved", bytes_moved, nonnegative=True)
    eff = checks.real_array("efficiency", efficiency)
    ok = (eff > 0) & (eff <= 1)
    if not ok.all():
        raise ValueError(f"efficiency must be in (0, 1]; got {eff[~ok][:3].tolist()}")
    checks.number("overhead_s", overhead_s, nonnegative=True)
    compute_s = np.asarray(flops, dtype=np.float64) / (g.peak_flops(precision) * eff)
    memory_s = np.asarray(bytes_moved, dtype=np.float64) / _hbm_Bps(g)
    return compute_s, memory_s, np.maximum(compute_s, memory_s) + overhead_s


def _timing(name, flops, moved, compute_s, memory_s, time_s, peak) -> Timing:
    return Timing(name, flops, moved, compute_s, memory_s, time_s,
                  "compute" if compute_s >= memory_s else "memory", flops / time_s,
                  flops / time_s / peak)


def _check_cost(cost) -> None:
    if not isinstance(cost, Cost):
        raise TypeError(f"cost must be a Cost (e.g. roofline.gemm(m, n, k)); got "
                        f"{type(cost).__name__}")
    checks.number("cost.flops", cost.flops, nonnegative=True)
    checks.number("cost.bytes_moved", cost.bytes_moved, nonnegative=True)


def roofline_time(cost: Cost, gpu, precision: str = "bf16", efficiency: float = 1.0,
                  overhead_s: float = 0.0) -> Timing:
    """Time of ``cost`` on ``gpu``: max(FLOPs / (peak x efficiency), bytes / bandwidth) +
    ``overhead_s`` (launch latency, not modelled by default)."""
    g = resolve_gpu(gpu)
    _check_cost(cost)
    checks.number("efficiency", efficiency, positive=True, maximum=1)
    if cost.flops == cost.bytes_moved == 0 and overhead_s == 0:
        raise ValueError("cost has no FLOPs and no bytes and overhead_s is 0: its time is 0, "
                         "and its achieved FLOP/s undefined")
    compute_s, memory_s, t = (float(x) for x in roofline_time_arrays(
        cost.flops, cost.bytes_moved, g, precision, efficiency, overhead_s))
    return _timing(cost.name, cost.flops, cost.bytes_moved, compute_s, memory_s, t,
                   g.peak_flops(precision))


@dataclass(frozen=True)
class CacheTiming:
    """Roofline time of a kernel with the last-level cache as a memory level (see
    :func:`cached_roofline_time`). ``bound`` is ``"compute"``, ``"HBM"``, ``"cache"`` or
    ``"launch/latency"`` (the fixed per-kernel cost is at least as long as both roofs)."""

    name: str
    flops: float
    working_set_bytes: float
    cache_name: str | None
    cache_bytes: float | None
    resident: bool  # warm cache and the working set fits: operands come from the cache
    compute_s: float
    hbm_s: float  # the compulsory bytes from HBM: the time with a flushed (cold) cache
    cache_s: float | None  # None where the cache bandwidth is not published
    overhead_s: float
    time_s: float
    bound: str

    @property
    def roofs_s(self) -> float:
        """The longer of the roofs that apply, without the fixed overhead."""
        return self.time_s - self.overhead_s

    @property
    def lower_bound_only(self) -> bool:
        """True when the cache bandwidth is unknown and the time is the compute roof alone."""
        return self.resident and self.cache_s is None


def cached_roofline_time(cost: Cost, gpu, precision: str = "bf16", warm: bool = True,
                         cache_Bps: float | None = None, efficiency: float = 1.0,
                         overhead_s: float = 0.0,
                         working_set_bytes: float | None = None) -> CacheTiming:
    """Time of ``cost`` with a last-level-cache level: if the cache is ``warm`` and the working
    set (default: the compulsory bytes, each operand touched once) fits in the GPU's
    ``llc_bytes``, bytes come from the cache at ``cache_Bps`` (default: the GPU's published
    ``llc_Bps``; NVIDIA publishes none, and then the compute roof is the only bound);
    otherwise from HBM, as :func:`roofline_time`. ``warm=False`` is a benchmark that flushes
    the cache between calls, or a kernel whose inputs were evicted by the kernels before it.
    """
    g = resolve_gpu(gpu)
    _check_cost(cost)
    checks.number("efficiency", efficiency, positive=True, maximum=1)
    checks.number("overhead_s", overhead_s, nonnegative=True)
    warm = checks.boolean("warm", warm)
    ws = cost.bytes_moved if working_set_bytes is None else checks.number(
        "working_set_bytes", working_set_bytes, positive=True)
    size = getattr(g, "llc_bytes", None)
    if warm and size is None:
        raise ValueError(f"{getattr(g, 'name', 'this GPU')} has no last-level cache size in the "
                         "registry (data/hardware/gpu_details.csv); pass warm=False or a spec "
                         "with llc_bytes")
    bw = getattr(g, "llc_Bps", None) if cache_Bps is None else checks.number(
        "cache_Bps", cache_Bps, positive=True)
    compute_s = cost.flops / (g.peak_flops(precision) * efficiency)
    hbm_s = cost.bytes_moved / _hbm_Bps(g)
    resident = bool(warm and ws <= size)
    cache_s = cost.bytes_moved / bw if (resident and bw is not None) else None
    memory_s = (cache_s or 0.0) if resident else hbm_s
    roofs = max(compute_s, memory_s)
    if overhead_s > 0 and overhead_s >= roofs:
        bound = "launch/latency"
    elif compute_s >= memory_s:
        bound = "compute"
    else:
        bound = "cache" if resident else "HBM"
    return CacheTiming(cost.name, cost.flops, ws, getattr(g, "llc_name", None), size, resident,
                       compute_s, hbm_s, cache_s, overhead_s, roofs + overhead_s, bound)


def _hbm_Bps(g):
    bw = g.hbm_Bps
    if bw is None:
        raise ValueError(f"{getattr(g, 'name', 'this GPU')} has no published HBM bandwidth in "
                         "the registry")
    return bw


@dataclass(frozen=True)
class GemmEfficiency:
    """Tile and wave quantization of a GEMM's output over a GPU's SMs."""

    tiles_m: int
    tiles_n: int
    tiles: int
    sm_count: int
    waves: int
    tile_efficiency: float  # useful outputs / outputs computed in whole tiles
    wave_efficiency: float  # tiles / (waves x tile slots: SMs, or SM pairs for 2-SM tiles)
    efficiency: float  # product of the two


@dataclass(frozen=True)
class TilePreset:
    """The output tile one GEMM work unit computes and how many SMs share it."""

    name: str
    tile: tuple[int, int]  # output rows x columns of one tile
    sms_per_tile: int  # 2 for Blackwell's 2-SM UMMA: the wave is counted in SM pairs
    source: str


#: Tile presets per architecture, from NVIDIA's documentation and CUTLASS's own kernels.
TILE_PRESETS = {
    "ampere": TilePreset(
        "ampere", (128, 128), 1,
        "NVIDIA, Matrix Multiplication Background User's Guide, 'Tile Quantization': cuBLAS "
        "tiles 256x128, 128x256, 128x128, 64x128, ... one thread block per tile "
        "https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html"),
    "hopper": TilePreset(
        "hopper", (128, 256), 1,
        "NVIDIA CUTLASS, examples/55_hopper_mixed_dtype_gemm/55_hopper_mixed_dtype_gemm.cu: "
        "ArchTag Sm90, TileShape Shape<_128,_256,_64>, ClusterShape Shape<_2,_1,_1>, "
        "KernelTmaWarpSpecializedCooperative (one CTA per SM, clusters of two sharing TMA "
        "multicast) https://github.com/NVIDIA/cutlass ; 256x128 is the transposed choice in "
        "NVIDIA's cuBLAS tile list. Presets are typical, not fixed: CUTLASS's FP32 example 48 "
        "uses 128x128x32"),
    "blackwell": TilePreset(
        "blackwell", (256, 256), 2,
        "NVIDIA CUTLASS, examples/cute/tutorial/blackwell/04_mma_tma_2sm_sm100.cu: "
        "SM100_MMA_F16BF16_2x1SM_SS with MMA tile 256x256 across a pair of SMs (a 2-CTA "
        "cluster, each CTA holding 128 rows of the output) https://github.com/NVIDIA/cutlass"),
}


def tile_preset(gpu) -> TilePreset:
    """The :data:`TILE_PRESETS` entry for ``gpu``'s architecture: compute capability 10 and up
    Blackwell, 9 Hopper, older (and non-NVIDIA parts, which have no preset here) Ampere's."""
    from companion.hardware import compute_major  # lazy, as resolve_gpu's registry
    major = compute_major(resolve_gpu(gpu))
    return TILE_PRESETS["blackwell" if major >= 10 else "hopper" if major == 9 else "ampere"]


def _tile(tile, g=None):
    """(rows, cols, SMs per tile) of a (rows, cols) tuple, a preset name, "auto" or a preset."""
    if isinstance(tile, str):
        if tile == "auto":
            if g is None:
                raise ValueError('tile="auto" needs a GPU')
            tile = tile_preset(g)
        else:
            tile = TILE_PRESETS[checks.choice("tile", tile, [*TILE_PRESETS, "auto"])]
    if isinstance(tile, TilePreset):
        return tile.tile[0], tile.tile[1], tile.sms_per_tile
    if not (isinstance(tile, tuple) and len(tile) == 2):
        raise TypeError(f"tile must be a (rows, cols) tuple, a TilePreset or one of "
                        f"{[*TILE_PRESETS, 'auto']}; got {tile!r}")
    return _pos("tile[0]", tile[0]), _pos("tile[1]", tile[1]), 1


def _sm_count(g):
    if g.sm_count is None:  # e.g. a product whose SM count is not published
        raise ValueError(f"{getattr(g, 'name', 'this GPU')} has no SM count in the registry; "
                         "wave quantization needs one (pass a spec with sm_count)")
    return _pos("sm_count", g.sm_count)


def gemm_efficiency_arrays(m, n, gpu, tile: tuple[int, int] = (128, 128),
                           batch=1) -> GemmEfficiency:
    """:func:`gemm_efficiency` for arrays of output shapes (broadcast together): a
    :class:`GemmEfficiency` whose fields are float64 arrays. The one implementation of the
    tile and wave arithmetic; :func:`gemm_efficiency` calls it with single values."""
    g = resolve_gpu(gpu)
    m, n, batch = _positive_ints("m", m), _positive_ints("n", n), _positive_ints("batch", batch)
    tm, tn, per = _tile(tile, g)
    sms = _sm_count(g)
    slots = sms // per  # tiles that run at once: SMs, or SM pairs for a 2-SM tile
    tiles_m, tiles_n = np.ceil(m / tm), np.ceil(n / tn)
    tiles = tiles_m * tiles_n * batch
    waves = np.ceil(tiles / slots)
    tile_eff = (m * n) / (tiles_m * tm * tiles_n * tn)
    wave_eff = tiles / (waves * slots)
    return GemmEfficiency(tiles_m, tiles_n, tiles, sms, waves, tile_eff, wave_eff,
                          tile_eff * wave_eff)


def gemm_efficiency(m: int, n: int, gpu, tile: tuple[int, int] = (128, 128),
                    batch: int = 1) -> GemmEfficiency:
    """Fraction of the compute peak left after tile and wave quantization (see module doc).

    One thread block per ``tile[0] x tile[1]`` output tile, one resident block per SM (the
    large-tile case of NVIDIA's guide); ``batch`` multiplies the tile count. ``tile`` may also
    be a :data:`TILE_PRESETS` name or ``"auto"`` (the GPU's architecture); a 2-SM preset
    (Blackwell) runs one tile per SM pair, and ``sm_count`` then counts SMs, not pairs.
    """
    g = resolve_gpu(gpu)
    m, n, batch = _pos("m", m), _pos("n", n), _pos("batch", batch)
    return _one(gemm_efficiency_arrays(m, n, g, tile, batch))


def _one(q: GemmEfficiency) -> GemmEfficiency:
    """The single GEMM of a length-one :func:`gemm_efficiency_arrays` result, as numbers."""
    return GemmEfficiency(int(q.tiles_m), int(q.tiles_n), int(q.tiles), q.sm_count,
                          int(q.waves), float(q.tile_efficiency), float(q.wave_efficiency),
                          float(q.efficiency))


@dataclass(frozen=True)
class GemmEstimate:
    """A GEMM's cost, quantization and roofline time on one GPU."""

    m: int
    n: int
    k: int
    gpu: str
    cost: Cost
    quantization: GemmEfficiency
    timing: Timing

    @property
    def mfu(self) -> float:
        """Predicted FLOP/s as a fraction of the GPU's dense peak (an upper bound)."""
        return self.timing.fraction_of_peak


@dataclass(frozen=True)
class GemmTimes:
    """:func:`gemm_time_arrays`' result: one entry per GEMM in each float64 array."""

    flops: np.ndarray
    bytes_moved: np.ndarray
    quantization: GemmEfficiency  # fields are arrays
    compute_s: np.ndarray
    memory_s: np.ndarray
    time_s: np.ndarray


def gemm_time_arrays(m, n, k, gpu, dtype: str = "bf16", precision: str | None = None,
                     tile: tuple[int, int] = (128, 128), batch=1,
                     overhead_s: float = 0.0) -> GemmTimes:
    """:func:`gemm_time` for arrays of shapes (broadcast together), in one pass of numpy:
    :func:`gemm_arrays`, :func:`gemm_efficiency_arrays` and :func:`roofline_time_arrays`.
    :func:`gemm_time` calls it with single values, so the two always agree."""
    g = resolve_gpu(gpu)
    flops, moved = gemm_arrays(m, n, k, dtype, batch=batch)
    q = gemm_efficiency_arrays(m, n, g, tile, batch)
    compute_s, memory_s, t = roofline_time_arrays(flops, moved, g, _precision(dtype, precision),
                                                  q.efficiency, overhead_s)
    return GemmTimes(flops, moved, q, compute_s, memory_s, t)


def gemm_time(m: int, n: int, k: int, gpu, dtype: str = "bf16", precision: str | None = None,
              tile: tuple[int, int] = (128, 128), batch: int = 1,
              overhead_s: float = 0.0) -> GemmEstimate:
    """Predicted time of an m x n x k GEMM: the roofline with the compute roof lowered by
    :func:`gemm_efficiency`. ``precision`` (default: from ``dtype``) picks the peak."""
    g = resolve_gpu(gpu)
    m, n, k, batch = (_pos(p, v) for p, v in (("m", m), ("n", n), ("k", k), ("batch", batch)))
    r = gemm_time_arrays(m, n, k, g, dtype, precision, tile, batch, overhead_s)
    cost = Cost(_gemm_name(m, n, k, batch), float(r.flops), float(r.bytes_moved))
    q = _one(r.quantization)
    timing = _timing(cost.name, cost.flops, cost.bytes_moved, float(r.compute_s),
                     float(r.memory_s), float(r.time_s),
                     g.peak_flops(_precision(dtype, precision)))
    return GemmEstimate(m, n, k, getattr(g, "name", str(gpu)), cost, q, timing)


def seed_ffn_gemm(gpu, dtype: str = "bf16", **kwargs) -> GemmEstimate:
    """The seed's 512 x 4096 x 512 "typical FFN" GEMM (claimed 48% MFU on H100, 55% on B200).

    With the H100 SXM datasheet figures (132 SMs, 989.4 TFLOP/s BF16 dense, 3.35 TB/s) it
    has 128 tiles of 128x128 (one wave, 97% of SMs busy) and an intensity of 241 FLOP/byte,
    below the ridge point of 295: HBM-bound if its operands come from HBM, so this HBM-only
    roofline caps it at about 82% of peak. But its 8.9 MB working set fits the 50 MiB L2 (and
    B200's 126.5 MiB), so a loop that times it without flushing reads from L2: see
    :func:`cached_roofline_time`, which finds it compute-bound at about 2.2 microseconds on
    H100 and 1 on B200, times so short that a kernel's fixed costs (launch, fill) set its pace.
    """
    return gemm_time(*SEED_FFN_SHAPE, gpu, dtype, **kwargs)


__all__ = ["DTYPE_BYTES", "SEED_FFN_SHAPE", "IDEAL_LABEL", "BURST_LABEL", "Cost", "Timing", "GemmEfficiency", "GemmEstimate",
           "TilePreset", "TILE_PRESETS", "tile_preset", "CacheTiming", "cached_roofline_time",
           "dtype_bytes", "resolve_gpu", "gemm", "batched_gemm", "attention", "elementwise",
           "layernorm", "softmax", "ridge_point", "attainable_flops", "roofline_time",
           "gemm_efficiency", "gemm_time", "seed_ffn_gemm", "gemm_arrays",
           "roofline_time_arrays", "gemm_efficiency_arrays", "GemmTimes", "gemm_time_arrays"]
