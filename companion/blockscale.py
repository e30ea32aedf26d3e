"""Block scaling, per-tensor scaling, the random Hadamard transform and error metrics.

Re-exported by :mod:`companion.formats`; builds on :mod:`companion.minifloat` only. The schemes
follow their published recipes:

- ``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp6_e3m2``, ``mxfp6_e2m3``, ``mxfp4``: OCP Microscaling
  Formats (MX) Specification v1.0 (2023), section 6.3. Blocks of 32 along ``axis`` share an
  E8M0 scale. ``scale_rule="floor"`` is the spec's X = 2^(floor(log2(amax)) - emax_elem): a
  block maximum above the element format's max saturates (448 in E4M3: values that round past
  it, above 464, clip). ``scale_rule="up"`` is
  TransformerEngine's X = 2^ceil(log2(amax * (1/max_elem))), the PTX conversion
  ``cvt.rp.satfinite.ue8m0x2.f32`` of ``float_to_e8m0`` in transformer_engine/common/util/ptx.cuh
  (the rule NVIDIA's MXFP8 pretraining paper, arXiv:2506.08027, adopts): nothing saturates.
  Either way X is clamped to E8M0's range [2^-127, 2^127]; elements V/X are rounded to the
  element format and saturated. An all-zero block gets the
  smallest scale, 2^-127 (as Microsoft's microxcaling reference does); a block holding inf or
  NaN gets a NaN scale and dequantizes to NaN.
- ``nvfp4``: NVIDIA TransformerEngine's NVFP4 recipe (docs "NVFP4", and the reference quantizer
  ``NVFP4QuantizerRef._quantize_blockwise_reference`` in
  transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py; paper arXiv:2509.25149).
  E2M1 elements, one E4M3 scale per 16 values (``role="activation"``) or per 16x16 tile over
  the last two axes (``role="weight"``), and an FP32 per-tensor scale
  s_global = 448 * 6 / amax(x). Dequantized value = q * s_block / s_global.
- ``deepseek_fp8``: DeepSeek-V3 (arXiv:2412.19437, section 3.3) with its released kernel
  (inference/kernel.py ``act_quant``): E4M3 values, one FP32 scale amax/448 per 1x128 tile
  (``role="activation"``) or per 128x128 block over the last two axes (``role="weight"``).
- ``fp8_e4m3_tensor``, ``fp8_e5m2_tensor``: one FP32 scale for the whole tensor, computed from
  the current amax (TransformerEngine's Float8CurrentScaling); :class:`DelayedScaling` uses an
  amax history instead.

Block schemes compute in float32, as the recipes do. Where a per-tensor scale is involved
(``nvfp4``, ``*_tensor``), a non-finite value anywhere makes the whole result NaN.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers

import numpy as np

from companion import checks
from companion import minifloat as _f

_MX = {"mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2", "mxfp6_e3m2": "e3m2",
       "mxfp6_e2m3": "e2m3", "mxfp4": "e2m1"}
_TENSOR = {"fp8_e4m3_tensor": "e4m3", "fp8_e5m2_tensor": "e5m2"}
SCHEMES = (*_MX, "nvfp4", "deepseek_fp8", *_TENSOR)
MX_SCHEMES = tuple(_MX)
ROLES = ("activation", "weight")
SCALE_RULES = ("floor", "up")  # MX schemes only: OCP spec, TransformerEngine
_FP32_MAX = float(np.finfo(np.float32).max)
#: Smallest per-tensor scale: float32's smallest normal. Below it the scale's inverse, by which
#: the result is multiplied back, overflows float32.
_MIN_SCALE = 2.0 ** -126
#: Largest ``hadamard_size`` (``size`` of :func:`random_hadamard`): 2**12. The rotation is a
#: dense size x size matrix built in float64 (128 MiB at 2**12, under a second); the NVFP4
#: recipe uses 16.
MAX_HADAMARD_SIZE = 2 ** 12


def margin_limit(fmt: str) -> int:
    """Largest ``|margin|`` of per-tensor scaling in ``fmt``: the format's span in binades,
    floor(log2(max / min_subnormal)) (17 for E4M3, 31 for E5M2, 8 for E3M2, 5 for E2M3, 3 for
    E2M1). A margin beyond it shifts the scaled amax further than the format's whole range: a
    positive one flushes every value to zero, a negative one saturates every value within the
    format's span of the amax."""
    fi = _f.info(fmt)
    return math.floor(math.log2(fi.max / fi.min_subnormal))


def _checked_margin(margin, fmt):
    """``margin``: an integer power-of-two exponent in [-margin_limit(fmt), margin_limit(fmt)]."""
    limit = margin_limit(fmt)
    return checks.integer_in("margin", margin, -limit, limit)


def _signed_format(fmt):
    """Canonical name of a per-tensor scaling format; E8M0 (unsigned, a scale format) raises."""
    fmt = _f.format_name(fmt)
    if fmt == "e8m0":
        raise ValueError("fmt='e8m0' is a scale format; per-tensor scaling needs a signed format, "
                         f"one of {[f for f in _f.FORMATS if f != 'e8m0']}")
    return fmt


def _nonempty(xw, what):
    """Raise unless ``xw`` holds at least one value (a per-tensor amax of nothing is undefined,
    and so is an error metric over nothing)."""
    if math.prod(xw.shape) == 0:
        raise ValueError(f"x is empty (shape {tuple(xw.shape)}): {what} needs at least one "
                         f"value")


def _f32(ops, xw):
    """``xw`` in float32, the precision the recipes scale in. A finite value beyond float32's
    range would become inf there and turn its block's scale to NaN, so it is refused."""
    wide = (xw.element_size() if ops.is_torch else xw.dtype.itemsize) > 4  # float64 only
    if wide and ops.any(ops.isfinite(xw) & (ops.abs(xw) > _FP32_MAX)):
        raise ValueError(f"x holds finite values beyond float32's maximum ({_FP32_MAX:.4g}), "
                         f"which the float32 scaling recipes cannot represent")
    return ops.f32(xw)


def _scale_too_small(scale, margin, amax, fmt):
    """The error for a per-tensor scale below :data:`_MIN_SCALE`, suggesting a margin."""
    fmax = _f.info(fmt).max
    best = math.floor(math.log2(fmax / amax) + 126) if amax > 0 else 0
    return ValueError(
        f"margin={margin} is too large for amax={amax:g}: the scale max/amax/2**margin = "
        f"{scale:g} is below float32's smallest normal 2**-126 (its inverse overflows); use "
        f"margin <= {best}")


def block_shape(scheme: str, role: str = "activation") -> tuple[int, int]:
    """(rows, columns) of one scaling block; (1, n) means n consecutive values along ``axis``."""
    checks.choice("scheme", scheme, SCHEMES)
    checks.choice("role", role, ROLES)
    if scheme in _MX:
        return (1, 32)
    if scheme == "nvfp4":
        return (1, 16) if role == "activation" else (16, 16)
    if scheme == "deepseek_fp8":
        return (1, 128) if role == "activation" else (128, 128)
    return (0, 0)  # per-tensor


# ----------------------------------------------------------------------------- blocking
def _pad(ops, a, rows, cols):
    if ops.is_torch:
        return ops.t.nn.functional.pad(a, (0, cols) if a.ndim == 1 else (0, cols, 0, rows))
    widths = [(0, 0)] * a.ndim
    widths[-1] = (0, cols)
    if a.ndim >= 2:
        widths[-2] = (0, rows)
    return np.pad(a, widths)


def _blocks(x, ops, axis, tile, pad):
    """View ``x`` as blocks. Returns (blocked, reduce axes, undo values, undo scales)."""
    br, bc = tile
    if br == 1:
        xm = ops.moveaxis(x, axis, -1) if axis != x.ndim - 1 else x
    else:
        if x.ndim < 2:
            raise ValueError(f"role='weight' needs x with at least 2 dimensions; got shape "
                             f"{tuple(x.shape)}")
        xm = x
    shape = tuple(xm.shape)
    n_r = shape[-2] if br > 1 else 1
    n_c = shape[-1]
    pr, pc = (-n_r) % br, (-n_c) % bc
    if (pr or pc) and not pad:
        dim = f"x.shape[{axis}]={n_c}" if br == 1 else f"x.shape[-2:]={shape[-2:]}"
        raise ValueError(f"block size {br}x{bc} does not divide {dim}; pass pad=True to zero-pad "
                         f"the last block")
    if pr or pc:
        xm = _pad(ops, xm, pr, pc)
    padded = tuple(xm.shape)
    if br == 1:
        xb = xm.reshape(*padded[:-1], padded[-1] // bc, bc)
        axes = (-1,)
    else:
        xb = xm.reshape(*padded[:-2], padded[-2] // br, br, padded[-1] // bc, bc)
        axes = (-3, -1)

    def undo(yb):
        y = yb.reshape(padded)
        if pr:
            y = y[..., :n_r, :]
        if pc:
            y = y[..., :n_c]
        return ops.moveaxis(y, -1, axis) if br == 1 and axis != x.ndim - 1 else y

    def undo_scales(s):
        if br == 1:
            s = s[..., 0]
            return ops.moveaxis(s, -1, axis) if axis != x.ndim - 1 else s
        return s[..., :, 0, :, 0]

    return xb, axes, undo, undo_scales


# ----------------------------------------------------------------------------- schemes
def _mx_exponent_up(amax, fmax, ops):
    """ceil(log2(amax * fl32(1/fmax))) as TransformerEngine's float_to_e8m0 computes it."""
    r = amax * np.float32(1.0 / fmax)
    bits = ops.int_view(r)
    field, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    # round up unless already a power of two; a subnormal ratio at most 2^-127 stays at code 0
    up = (mant > 0) & ((field > 0) | (mant > 0x400000))
    return ops.where(up, field + 1, field) - 127


def _mx(xb, ops, axes, rounding, seed, want_clipped, elem="e4m3", scale_rule="floor"):
    a = ops.abs(xb)
    amax = ops.amax(a, axes)
    emax = _f.info(elem).emax
    if scale_rule == "up":
        e = _mx_exponent_up(amax, _f.info(elem).max, ops)
    else:
        # floor(log2(amax)) is the exponent field; zero and subnormal amax fall to the clamp
        e = ((ops.int_view(amax) & 0x7F800000) >> 23) - 127 - emax
    ops.max_(e, -127)
    ops.min_(e, 127)
    inv = ops.float_view((127 - e) << 23)  # 2**-e, a normal float32 for every e used here
    scale = 1.0 / inv  # exact; 2**-127 is a float32 subnormal
    a *= inv
    q, clipped = _f._quantize_core(xb, elem, ops, rounding, "saturate", seed, want_clipped,
                                   magnitude=a)
    q *= scale
    bad = ~ops.isfinite(amax)
    if ops.any(bad):
        q = ops.where(bad, math.nan, q)
        scale = ops.where(bad, math.nan, scale)
    return q, scale, clipped


def _nvfp4(xb, ops, axes, rounding, seed, want_clipped, gamax=None):
    a = ops.abs(xb)
    bamax = ops.amax(a, axes)
    if gamax is None and math.prod(bamax.shape) == 0:  # no blocks: nothing to scale
        gamax = ops.const(np.zeros((1,) * bamax.ndim), bamax)
    elif gamax is None:  # the per-tensor amax; a chunk of a larger tensor is given it
        gamax = ops.amax(bamax, tuple(range(bamax.ndim)))
    # TransformerEngine NVFP4QuantizerRef, step by step in float32
    g_enc = ops.min_(ops.div(448.0 * 6.0, gamax), _FP32_MAX)
    g_dec = 1.0 / g_enc
    dec = ops.min_(bamax * (g_enc * np.float32(1.0 / 6.0)), 448.0)
    dec, _ = _f._quantize_core(dec, "e4m3", ops)  # the block scale is stored as E4M3
    enc = ops.min_(1.0 / (dec * g_dec), _FP32_MAX)
    a *= enc
    q, clipped = _f._quantize_core(xb, "e2m1", ops, rounding, "saturate", seed, want_clipped,
                                   magnitude=a)
    if want_clipped:
        clipped &= dec > 0  # a block whose scale flushed to zero is flushed, not clipped
    q *= dec
    q *= g_dec
    if not ops.any(ops.isfinite(gamax)):
        q = ops.full_like(q, math.nan)
    return q, dec, clipped


def _deepseek(xb, ops, axes, rounding, seed, want_clipped):
    a = ops.abs(xb)
    amax = ops.amax(a, axes)
    s = ops.div(amax, 448.0)
    # The released kernel divides by zero on an all-zero tile, and amax / 448 also underflows to
    # zero when amax is a float32 subnormal: either way 0/0 would be NaN. Such a tile keeps
    # scale 1, so its values flush to zero like any value below E4M3's smallest subnormal.
    s = ops.where(s > 0, s, 1.0)
    a /= s
    q, clipped = _f._quantize_core(xb, "e4m3", ops, rounding, "saturate", seed, want_clipped,
                                   magnitude=a)
    q *= s
    return q, s, clipped


_CHUNK_VALUES = 1 << 18  # 1 MiB of float32: a chunk's working arrays stay in cache


def _chunked(core, xb):
    """``core`` over cache-sized chunks of rows of 1-D blocks ``xb`` (numpy, round to nearest):
    the dozen element-wise passes then reuse cached, already-mapped buffers instead of
    allocating and faulting in fresh arrays of the full size (on 2^24 values under load up to
    2x faster; on an idle machine about even); the result is the same, since every block is
    independent."""
    rows = xb.reshape(-1, xb.shape[-1])
    step = max(1, _CHUNK_VALUES // rows.shape[1])
    q, s = np.empty_like(rows), np.empty((rows.shape[0], 1), np.float32)
    for i in range(0, rows.shape[0], step):
        q[i:i + step], s[i:i + step], _ = core(rows[i:i + step])
    return q.reshape(xb.shape), s.reshape(*xb.shape[:-1], 1), None


def _scale_from_amax(amax, fmax, margin, ops):
    """TransformerEngine's rule (quantization.py ``_default_sf_compute``): scale = fmax / amax /
    2**margin; amax == 0 keeps the scale at 1 and a scale that overflows becomes FLT_MAX."""
    safe = ops.where(amax > 0, amax, 1.0)
    scale = ops.where(amax > 0, ops.div(fmax, safe) / 2.0 ** margin, 1.0)
    return ops.min_(scale, _FP32_MAX)


def _tensor(x, fmt, ops, scale=None, margin=0, rounding="nearest", seed=None,
            want_clipped=False):
    """Per-tensor scaling: q = fmt(x * scale) / scale, with the current amax unless ``scale``."""
    a = ops.abs(x)
    amax = ops.amax(a, tuple(range(a.ndim)))
    if scale is None:
        scale = _scale_from_amax(amax, _f.info(fmt).max, margin, ops)
        # with margin <= 0 the scale is at least max/FP32_MAX, far above _MIN_SCALE
        if margin > 0 and ops.any(ops.isfinite(amax) & (scale < _MIN_SCALE)):
            raise _scale_too_small(float(scale.reshape(())), margin,
                                   float(amax.reshape(())), fmt)
    else:
        scale = ops.const(scale, x)
    a *= scale
    q, clipped = _f._quantize_core(x, fmt, ops, rounding, "saturate", seed, want_clipped,
                                   magnitude=a)
    q *= 1.0 / scale
    if ops.any(~ops.isfinite(amax)):
        q = ops.full_like(q, math.nan)
    return q, scale, clipped


def _run(x, scheme, axis, pad, role, rounding, seed, hadamard_seed, hadamard_size,
         want_clipped, scale_rule="floor"):
    # zero blocks divide by zero on the way to a finite, checked result: no numpy warnings
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return _run_unchecked(x, scheme, axis, pad, role, rounding, seed, hadamard_seed,
                              hadamard_size, want_clipped, scale_rule)


def _run_unchecked(x, scheme, axis, pad, role, rounding, seed, hadamard_seed, hadamard_size,
                   want_clipped, scale_rule):
    checks.choice("scheme", scheme, SCHEMES)
    checks.choice("role", role, ROLES)
    checks.choice("rounding", rounding, _f.ROUNDINGS)
    checks.choice("scale_rule", scale_rule, SCALE_RULES)
    if scale_rule != "floor" and scheme not in _MX:
        raise ValueError(f"scale_rule={scale_rule!r} applies to the MX schemes {tuple(_MX)}; "
                         f"scheme={scheme!r} has its own scale rule")
    pad = checks.boolean("pad", pad)
    seed = _f.checked_seed(seed)
    ops, xw = _f._checked("x", x)
    xw = _f32(ops, xw)
    if xw.ndim == 0:
        raise ValueError("x must have at least one dimension for block scaling")
    axis = checks.number("axis", axis, integer=True, minimum=-xw.ndim, maximum=xw.ndim - 1)
    axis = axis % xw.ndim
    n_axis = xw.shape[axis]
    if hadamard_seed is not None:
        hadamard_seed = checks.number("hadamard_seed", hadamard_seed, integer=True,
                                      nonnegative=True)
        hadamard_size = _checked_hadamard_size("hadamard_size", hadamard_size)
        extra = (-n_axis) % hadamard_size
        if extra and not pad:
            raise ValueError(f"hadamard_size={hadamard_size} must divide x.shape[{axis}]="
                             f"{n_axis}; pass pad=True to zero-pad the last block")
        if extra:  # zero-pad so the rotation blocks fit; sliced off again below
            xw = ops.moveaxis(_pad(ops, ops.moveaxis(xw, axis, -1), 0, extra), -1, axis)
        xw = random_hadamard(xw, hadamard_seed, hadamard_size, axis)
    if scheme in _TENSOR:
        _nonempty(xw, f"per-tensor scheme {scheme!r}")
        deq, scales, clipped = _tensor(xw, _TENSOR[scheme], ops, rounding=rounding, seed=seed,
                                       want_clipped=want_clipped)
        scales = scales.reshape(())
    else:
        tile = block_shape(scheme, role)
        xb, axes, undo, undo_scales = _blocks(xw, ops, axis, tile, pad)
        if scheme in _MX:
            core = functools.partial(_mx, elem=_MX[scheme], scale_rule=scale_rule)
        else:
            core = {"nvfp4": _nvfp4, "deepseek_fp8": _deepseek}[scheme]
        if (not ops.is_torch and tile[0] == 1 and rounding == "nearest" and not want_clipped
                and xb.size >= 4 * _CHUNK_VALUES):
            if scheme == "nvfp4":  # one per-tensor scale for all chunks; NaN stays NaN
                core = functools.partial(
                    core, gamax=np.full((1, 1), max(xw.max(), -xw.min()), np.float32))
            deq, scales, clipped = _chunked(
                lambda rows: core(rows, ops=ops, axes=axes, rounding=rounding, seed=None,
                                  want_clipped=False), xb)
        else:
            deq, scales, clipped = core(xb, ops=ops, axes=axes, rounding=rounding, seed=seed,
                                        want_clipped=want_clipped)
        deq, scales = undo(deq), undo_scales(scales)
        clipped = undo(clipped) if want_clipped else None
    if hadamard_seed is not None:
        deq = random_hadamard(deq, hadamard_seed, hadamard_size, axis, inverse=True)
        if deq.shape[axis] != n_axis:
            index = [slice(None)] * deq.ndim
            index[axis] = slice(0, n_axis)
            deq = deq[tuple(index)]
            clipped = clipped[tuple(index)] if clipped is not None else None
    return deq, scales, clipped


@_f.via_numpy
def block_quantize(x, scheme: str, axis: int = -1, pad: bool = False, role: str = "activation",
                   rounding: str = "nearest", seed: int | None = None,
                   hadamard_seed: int | None = None, hadamard_size: int = 16,
                   scale_rule: str = "floor"):
    """Quantize-dequantize ``x`` with a block-scaling ``scheme``; returns (dequantized, scales).

    Blocks run along ``axis`` (the GEMM's reduction axis); ``role="weight"`` selects the 2D
    tiles of ``nvfp4`` (16x16) and ``deepseek_fp8`` (128x128) over the last two axes. With
    ``pad=True`` a partial last block is zero-padded instead of raising. ``scales`` are the
    float32 values of the block scales (for ``nvfp4`` the E4M3 block scales; the per-tensor
    scale is :func:`nvfp4_global_scale`). With ``hadamard_seed``, blocks of ``hadamard_size``
    along ``axis`` are rotated by a random Hadamard matrix before quantizing and rotated back
    after, so the result is directly comparable with ``x``; ``hadamard_size`` is a power of two
    up to ``MAX_HADAMARD_SIZE`` (2**12) and must divide ``x.shape[axis]`` unless ``pad``.
    ``scale_rule`` picks the E8M0 scale of the MX schemes: ``"floor"`` (OCP spec) or ``"up"``
    (TransformerEngine). ``pad`` is a strict bool; ``seed`` (stochastic rounding) and
    ``hadamard_seed`` are None or non-negative integers.

    Empty ``x`` (a zero-length axis): the block schemes (MX, ``nvfp4``, ``deepseek_fp8``) have
    no blocks and return empty values and empty scales; the per-tensor schemes
    (``fp8_*_tensor``) raise ValueError, as a scale from the amax of no values is undefined.
    """
    deq, scales, _ = _run(x, scheme, axis, pad, role, rounding, seed, hadamard_seed,
                          hadamard_size, False, scale_rule)
    return deq, scales


@_f.via_numpy
def nvfp4_global_scale(x) -> float:
    """NVFP4's FP32 per-tensor encode scale, 448 * 6 / amax(x) (capped at the float32 max).
    Empty ``x`` raises ValueError: the amax of no values is undefined."""
    ops, xw = _f._checked("x", x)
    _nonempty(xw, "the NVFP4 per-tensor scale")
    amax = float(ops.amax(ops.abs(_f32(ops, xw)), tuple(range(xw.ndim))).reshape(()))
    if not math.isfinite(amax):
        raise ValueError(f"x must be finite to set the NVFP4 per-tensor scale (amax is {amax})")
    with np.errstate(over="ignore"):  # a tiny amax: the scale caps at the float32 max
        return min(float(np.float32(448.0 * 6.0) / np.float32(amax)) if amax else math.inf,
                   _FP32_MAX)


@_f.via_numpy
def tensor_quantize(x, fmt: str = "e4m3", amax: float | None = None, margin: int = 0,
                    rounding: str = "nearest", seed: int | None = None):
    """Per-tensor scaled quantization; returns (dequantized, scale).

    scale = max(fmt) / amax / 2**margin, with amax the current amax of ``x`` unless given (the
    delayed-scaling case; at most the float32 max). Values beyond the scaled range saturate.
    ``fmt`` is a signed format (not ``e8m0``). ``margin`` is an integer power-of-two exponent
    (as in TransformerEngine's recipes) with ``|margin| <= margin_limit(fmt)``, the format's
    span in binades (17 for E4M3, 31 for E5M2, 3 for E2M1); a margin that pushes the scale
    below float32's smallest normal (a huge amax) raises ValueError. Empty ``x`` raises
    ValueError (its amax is undefined).
    """
    fmt = _signed_format(fmt)
    margin = _checked_margin(margin, fmt)
    checks.choice("rounding", rounding, _f.ROUNDINGS)
    seed = _f.checked_seed(seed)
    if amax is not None:
        amax = checks.number("amax", amax, nonnegative=True, maximum=_FP32_MAX)
    ops, xw = _f._checked("x", x)
    _nonempty(xw, "per-tensor scaling")
    xw, undo = _f.at_least_1d(ops, _f32(ops, xw))
    scale = None
    if amax is not None:
        scale = float(_scale_from_amax(np.float32(amax), _f.info(fmt).max, margin, _f._NUMPY))
        if amax > 0 and scale < _MIN_SCALE:
            raise _scale_too_small(scale, margin, float(amax), fmt)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        deq, scale, _ = _tensor(xw, fmt, ops, scale, margin, rounding, seed)
    return undo(deq), float(scale.reshape(()))


@dataclasses.dataclass(frozen=True)
class DelayedScaling:
    """Delayed per-tensor scaling: the scale for this step comes from earlier steps' amaxes.

    A frozen state: :meth:`quantize` returns the result and the next state. ``algo="max"``
    uses the largest amax in the history, ``"most_recent"`` the last one (TransformerEngine's
    ``amax_compute_algo``). Before any history the scale is 1.

    ``fmt`` is a signed format (not ``e8m0``); ``margin`` an integer with
    ``|margin| <= margin_limit(fmt)`` (see :func:`tensor_quantize`). ``history`` holds amaxes:
    numbers in [0, float32 max], or inf or NaN (an amax of a non-finite tensor, which is
    skipped, as :meth:`quantize` records it); it is stored as a tuple of floats.
    """

    fmt: str = "e4m3"
    history_len: int = 1024  # TransformerEngine's DelayedScaling defaults: 1024, "max"
    algo: str = "max"
    margin: int = 0
    history: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "fmt", _signed_format(self.fmt))
        checks.number("history_len", self.history_len, positive=True, integer=True)
        checks.choice("algo", self.algo, ("max", "most_recent"))
        object.__setattr__(self, "margin", _checked_margin(self.margin, self.fmt))
        object.__setattr__(self, "history", _checked_history(self.history))
        if len(self.history) > self.history_len:
            raise ValueError(f"history holds {len(self.history)} amaxes, more than "
                             f"history_len={self.history_len}")

    @property
    def amax(self) -> float | None:
        """The amax the next :meth:`quantize` will use (None before any step)."""
        finite = [h for h in self.history if math.isfinite(h) and h > 0]
        if not finite:
            return None
        return max(finite) if self.algo == "max" else finite[-1]

    @property
    def scale(self) -> float:
        """The scale the next :meth:`quantize` will multiply by (1 before any history)."""
        amax = self.amax
        if amax is None:
            return 1.0
        scale = _f.info(self.fmt).max / amax / 2.0 ** self.margin
        if scale < _MIN_SCALE:
            raise _scale_too_small(scale, self.margin, amax, self.fmt)
        return min(scale, _FP32_MAX)

    @_f.via_numpy
    def quantize(self, x, rounding: str = "nearest", seed: int | None = None):
        """Quantize ``x`` with the current scale; returns (dequantized, next state).
        Empty ``x`` raises ValueError: it has no amax to record."""
        checks.choice("rounding", rounding, _f.ROUNDINGS)
        seed = _f.checked_seed(seed)
        ops, xw = _f._checked("x", x)
        _nonempty(xw, "delayed scaling")
        xw, undo = _f.at_least_1d(ops, _f32(ops, xw))
        amax_now = float(ops.amax(ops.abs(xw), tuple(range(xw.ndim))).reshape(()))
        deq, _, _ = _tensor(xw, self.fmt, ops, self.scale, rounding=rounding, seed=seed)
        deq = undo(deq)
        nxt = dataclasses.replace(self, history=(self.history + (amax_now,))[-self.history_len:])
        return deq, nxt


def _checked_history(history) -> tuple:
    """DelayedScaling's ``history`` as a tuple of floats, each an amax: a number in
    [0, float32 max], or +inf or NaN (what :meth:`DelayedScaling.quantize` records for a
    non-finite tensor; :attr:`DelayedScaling.amax` skips them)."""
    if isinstance(history, (str, bytes)) or not hasattr(history, "__iter__"):
        raise TypeError(f"history must be a tuple of amaxes (numbers); got "
                        f"{type(history).__name__} {history!r:.40}")
    items = tuple(history)
    # fast path: every quantize step re-checks a history of up to history_len plain floats
    if all(type(h) is float for h in items) and not any(
            h < 0 or _FP32_MAX < h < math.inf for h in items):  # NaN compares False: kept
        return items
    out = []
    for i, h in enumerate(items):
        v = checks.scalar(h)
        if (isinstance(v, numbers.Real) and not isinstance(v, bool)
                and (math.isnan(v) or v == math.inf)):
            out.append(float(v))
        else:
            out.append(float(checks.number(f"history[{i}]", v, nonnegative=True,
                                           maximum=_FP32_MAX)))
    return tuple(out)


# ----------------------------------------------------------------------------- Hadamard
def _checked_hadamard_size(param, size) -> int:
    """A Hadamard block size: a power of two from 1 to ``MAX_HADAMARD_SIZE``."""
    size = checks.integer_in(param, size, 1, MAX_HADAMARD_SIZE)
    if size & (size - 1):
        raise ValueError(f"{param} must be a power of two (at most {MAX_HADAMARD_SIZE}); "
                         f"got {size}")
    return size


def _hadamard_matrix(size, seed):
    h = np.ones((1, 1))
    while h.shape[0] < size:
        h = np.block([[h, h], [h, -h]])  # Sylvester construction
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size)
    return (signs[:, None] * h / math.sqrt(size)).astype(np.float32)


@_f.via_numpy
def random_hadamard(x, seed: int, size: int = 16, axis: int = -1, inverse: bool = False):
    """Rotate consecutive blocks of ``size`` along ``axis`` by D H / sqrt(size).

    H is the Sylvester Hadamard matrix and D a diagonal of random signs drawn from ``seed``
    (the random Hadamard transform of the NVFP4 recipe, which uses size 16). The matrix is
    orthogonal, so ``inverse=True`` undoes the rotation. ``size`` is a power of two up to
    ``MAX_HADAMARD_SIZE`` (2**12); ``axis`` an integer in [-x.ndim, x.ndim); ``inverse`` a
    strict bool.
    """
    size = _checked_hadamard_size("size", size)
    seed = checks.number("seed", seed, integer=True, nonnegative=True)
    inverse = checks.boolean("inverse", inverse)
    ops, xw = _f._checked("x", x)
    xw = _f32(ops, xw)
    if xw.ndim == 0:
        raise ValueError("x must have at least one dimension for the Hadamard transform")
    axis = checks.number("axis", axis, integer=True, minimum=-xw.ndim, maximum=xw.ndim - 1)
    axis = axis % xw.ndim
    n = xw.shape[axis]
    if n % size:
        raise ValueError(f"Hadamard size={size} must divide x.shape[{axis}]={n}")
    m = _hadamard_matrix(size, seed)
    m = ops.const(m.T if inverse else m, xw)
    xm = ops.moveaxis(xw, axis, -1)
    y = (xm.reshape(*xm.shape[:-1], n // size, size) @ m).reshape(xm.shape)
    return ops.moveaxis(y, -1, axis)


# ----------------------------------------------------------------------------- metrics
def _pair(x, xq):
    """Both arrays in float64 after checks: same shape, ``x`` finite, ``xq`` finite."""
    ops, xw = _f._checked("x", x)
    _, qw = _f._checked("xq", xq)
    if tuple(xw.shape) != tuple(qw.shape):
        raise ValueError(f"x and xq must have the same shape; got {tuple(xw.shape)} and "
                         f"{tuple(qw.shape)}")
    _nonempty(xw, "an error metric")
    if ops.any(~ops.isfinite(xw)):
        raise ValueError("x must be finite for an error metric")
    if ops.any(~ops.isfinite(qw)):
        raise ValueError("xq contains inf or NaN: the quantization overflowed")
    if ops.is_torch:
        return ops, xw.double(), qw.double()
    return ops, xw.astype(np.float64), qw.astype(np.float64)


@_f.via_numpy
def sqnr_db(x, xq) -> float:
    """Signal-to-quantization-noise ratio, 10 log10(sum x^2 / sum (x - xq)^2), in dB."""
    ops, xw, qw = _pair(x, xq)
    signal = ops.f64_sum(xw * xw)
    noise = ops.f64_sum((xw - qw) * (xw - qw))
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


@_f.via_numpy
def relative_error(x, xq) -> float:
    """Relative error in the Frobenius norm, ||x - xq|| / ||x|| (inf for x = 0, xq != 0)."""
    ops, xw, qw = _pair(x, xq)
    noise = ops.f64_sum((xw - qw) * (xw - qw))
    signal = ops.f64_sum(xw * xw)
    if noise == 0:
        return 0.0
    return math.sqrt(noise / signal) if signal > 0 else math.inf


@_f.via_numpy
def fraction_flushed(x, xq) -> float:
    """Fraction of the nonzero values of ``x`` that became zero."""
    ops, xw, qw = _pair(x, xq)
    nonzero = ops.f64_sum(xw != 0)
    return ops.f64_sum((xw != 0) & (qw == 0)) / nonzero if nonzero else 0.0


@dataclasses.dataclass(frozen=True)
class QuantStats:
    """Error of one quantization: SQNR (dB), relative error, fraction clipped and flushed."""

    sqnr_db: float
    relative_error: float
    fraction_clipped: float
    fraction_flushed: float


@_f.via_numpy
def quant_stats(x, scheme: str, **kwargs) -> QuantStats:
    """Quantize ``x`` with a block ``scheme`` or a scalar format and measure the error.

    A value counts as clipped when rounding it without saturation would exceed the format's
    largest value (after block scaling). Keyword arguments go to :func:`block_quantize`
    (block schemes) or :func:`companion.formats.quantize` with ``overflow="saturate"`` (scalar formats).
    Scalar formats may be named as :func:`companion.formats.quantize` accepts them, including
    the ml_dtypes names (``"float8_e4m3fn"``).
    """
    allowed = SCHEMES + _f.FORMATS + tuple(_f._ALIASES)
    checks.choice("scheme", scheme, allowed)
    if scheme not in SCHEMES:
        scheme = _f.format_name(scheme)
    if scheme in SCHEMES:
        args = dict(axis=-1, pad=False, role="activation", rounding="nearest", seed=None,
                    hadamard_seed=None, hadamard_size=16, scale_rule="floor")
        unknown = set(kwargs) - set(args)
        if unknown:
            raise TypeError(f"unexpected arguments {sorted(unknown)}; allowed: {sorted(args)}")
        args.update(kwargs)
        deq, _, clipped = _run(x, scheme, want_clipped=True, **args)
    else:
        args = dict(rounding="nearest", seed=None)  # overflow is "saturate": clipping counted
        unknown = set(kwargs) - set(args)
        if unknown:
            raise TypeError(f"unexpected arguments {sorted(unknown)} for scalar format "
                            f"{scheme!r}; allowed: {sorted(args)}")
        args.update(kwargs)
        checks.choice("rounding", args["rounding"], _f.ROUNDINGS)
        args["seed"] = _f.checked_seed(args["seed"])
        ops, xw = _f._checked("x", x)
        xw, undo = _f.at_least_1d(ops, ops.f32(xw))
        deq, clipped = _f._quantize_core(xw, scheme, ops, args["rounding"], "saturate",
                                         args["seed"], want_clipped=True)
        deq, clipped = undo(deq), undo(clipped)
    ops = _f.backend(deq)
    n = deq.numel() if ops.is_torch else deq.size
    frac_clipped = ops.f64_sum(clipped) / n if (clipped is not None and n) else 0.0
    return QuantStats(sqnr_db(x, deq), relative_error(x, deq), frac_clipped,
                      fraction_flushed(x, deq))


@_f.via_numpy
def fraction_clipped(x, scheme: str, **kwargs) -> float:
    """Fraction of values that saturate under ``scheme`` (see :func:`quant_stats`)."""
    return quant_stats(x, scheme, **kwargs).fraction_clipped
