"""The scalar low-precision formats, exactly: their values, rounding, encoding and decoding.

Re-exported by :mod:`companion.formats` (with block scaling from :mod:`companion.blockscale`
and the torch GEMMs of :mod:`companion.formats_torch`); the modules import in that one
direction only.

Scalar formats (OCP 8-bit Floating Point Specification (OFP8) rev 1.0 and OCP Microscaling
Formats (MX) Specification v1.0, https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf):

========  ==================  =====  ==========  ===========================================
name      ml_dtypes name      max    min normal  special values
========  ==================  =====  ==========  ===========================================
e4m3      float8_e4m3fn       448    2^-6        NaN only (S.1111.111); no infinities
e5m2      float8_e5m2         57344  2^-14       +-inf and NaN (IEEE 754 style)
e3m2      float6_e3m2fn       28     2^-2        none
e2m3      float6_e2m3fn       7.5    1           none
e2m1      float4_e2m1fn       6      1           none
e8m0      float8_e8m0fnu      2^127  2^-127      unsigned powers of two; 0xFF is NaN; no zero
========  ==================  =====  ==========  ===========================================

Rounding is to nearest, ties to even (``rounding="nearest"``), or stochastic: up with probability
equal to the distance from the lower neighbour over the grid spacing (``rounding="stochastic"``).
For ``e8m0`` a value exactly between two powers of two rounds up, as ml_dtypes and torch do.

What the two overflow modes do (a value overflows when it rounds to a magnitude above max):

- ``overflow="saturate"``: finite overflow and +-inf become +-max; NaN stays NaN. This is the
  ``.satfinite`` conversion of PTX and what torch does for ``float8_e4m3fn``. It differs from
  torch for ``e5m2``, where torch returns +-inf.
- ``overflow="nan"``: the format's own overflow value, as ml_dtypes converts: ``e4m3`` gives NaN
  (also for +-inf), ``e5m2`` gives +-inf (+-inf stays +-inf), ``e8m0`` gives NaN. The FP6 and FP4
  formats have neither infinities nor NaN, so in both modes they saturate (as the MX spec and
  ml_dtypes do).
- NaN input gives NaN output in every format and mode. ml_dtypes instead turns NaN into -0 for
  the FP6 and FP4 formats; :func:`encode` refuses NaN for formats without a NaN code.
- ``e8m0`` is unsigned: negative inputs give NaN (torch silently takes the magnitude). Zero
  gives NaN under ``"nan"`` (ml_dtypes) and the smallest code 2^-127 under ``"saturate"`` (torch).
  Positive values up to 2^-127 become 2^-127 and values between 2^-127 and 2^-126 become
  2^-126 (both libraries round up in that interval; elsewhere they round to nearest).

Everything works on numpy arrays and on torch tensors (CPU or CUDA). Torch input is computed
with torch operations on its own device and returns a torch tensor; numpy input never needs
torch. Results are float32. Half-precision input is widened exactly to float32; float64 input is
rounded directly (no double rounding).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from companion import checks

FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0")
_ALIASES = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float6_e3m2fn": "e3m2",
            "float6_e2m3fn": "e2m3", "float4_e2m1fn": "e2m1", "float8_e8m0fnu": "e8m0",
            "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2", "fp6_e3m2": "e3m2", "fp6_e2m3": "e2m3",
            "fp4_e2m1": "e2m1"}
ROUNDINGS = ("nearest", "stochastic")
OVERFLOWS = ("saturate", "nan")


@dataclasses.dataclass(frozen=True)
class FormatInfo:
    """One scalar format: its bit layout, range and every finite value it can represent."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max: float
    min_normal: float
    min_subnormal: float
    epsilon: float
    has_inf: bool
    has_nan: bool
    signed: bool
    ml_dtypes_name: str
    torch_dtype_name: str | None
    values: tuple  # every finite value, ascending, +0 and -0 counted once

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value."""
        return round(math.log2(self.min_normal))

    @property
    def emax(self) -> int:
        """Exponent of the largest normal value (the MX spec's emax_elem)."""
        return math.floor(math.log2(self.max))


# name: (exponent bits, mantissa bits, bias, kind, ml_dtypes name, torch dtype name)
# kind: "ieee" has inf and NaN; "fn" has NaN only at all-ones; "finite" has neither.
_LAYOUT = {
    "e4m3": (4, 3, 7, "fn", "float8_e4m3fn", "float8_e4m3fn"),
    "e5m2": (5, 2, 15, "ieee", "float8_e5m2", "float8_e5m2"),
    "e3m2": (3, 2, 3, "finite", "float6_e3m2fn", None),
    "e2m3": (2, 3, 1, "finite", "float6_e2m3fn", None),
    "e2m1": (2, 1, 1, "finite", "float4_e2m1fn", None),
    "e8m0": (8, 0, 127, "e8m0", "float8_e8m0fnu", "float8_e8m0fnu"),
}


def _max_value(e_bits, m_bits, bias, kind) -> float:
    top = 2 ** e_bits - 1 - bias  # exponent of the all-ones exponent field
    if kind == "ieee":
        return (2 - 2.0 ** -m_bits) * 2.0 ** (top - 1)
    if kind == "fn":
        return (2 - 2.0 ** (1 - m_bits)) * 2.0 ** top
    if kind == "e8m0":
        return 2.0 ** (top - 1)
    return (2 - 2.0 ** -m_bits) * 2.0 ** top


def format_name(fmt: str) -> str:
    """Canonical name of a scalar format (accepts ml_dtypes names such as ``float8_e4m3fn``)."""
    if isinstance(fmt, str) and fmt in _ALIASES:
        return _ALIASES[fmt]
    return checks.choice("fmt", fmt, FORMATS + tuple(_ALIASES))


def info(fmt: str) -> FormatInfo:
    """Layout, range, epsilon and all finite values of a scalar format."""
    return _info(format_name(fmt))


@functools.lru_cache(maxsize=None)  # the quantizers ask for it on every call
def _info(name: str) -> FormatInfo:
    e_bits, m_bits, bias, kind, ml_name, torch_name = _LAYOUT[name]
    signed = kind != "e8m0"
    bits = e_bits + m_bits + int(signed)
    vals = decode(np.arange(2 ** bits, dtype=np.uint8), name)
    finite = np.unique(vals[np.isfinite(vals)])
    emin = -bias if kind == "e8m0" else 1 - bias  # e8m0's code 0 is 2**-127, not a subnormal
    return FormatInfo(
        name=name, bits=bits, exponent_bits=e_bits, mantissa_bits=m_bits, bias=bias,
        max=_max_value(e_bits, m_bits, bias, kind), min_normal=2.0 ** emin,
        # e8m0 has no subnormals: its smallest value is its smallest normal (as in ml_dtypes)
        min_subnormal=2.0 ** (emin - m_bits) if m_bits else 2.0 ** emin,
        epsilon=2.0 ** -m_bits, has_inf=kind == "ieee", has_nan=kind in ("ieee", "fn", "e8m0"),
        signed=signed, ml_dtypes_name=ml_name, torch_dtype_name=torch_name,
        values=tuple(float(v) + 0.0 for v in finite))


from .array_ops import (  # noqa: E402  (re-exported for blockscale and formats_torch)
    _NUMPY, _checked, _is_cpu_tensor, _layout_consts, _to_numpy, _to_torch, backend, via_numpy)


# ----------------------------------------------------------------------------- rounding
def _round_magnitude_(a, m_bits, emin, ops, rounding="nearest", seed=None):
    """Round non-negative ``a`` in place onto the grid of ``m_bits`` mantissa bits and minimum
    exponent ``emin`` (unbounded above). ``a`` must be below 2**(emax + 2) or NaN.

    Round to nearest even adds and subtracts 2**(e + P - m_bits), whose float spacing is the
    format's spacing 2**(e - m_bits): the hardware's own round-half-even does the work.
    """
    p, exp_mask, bias = _layout_consts(a)
    ebits = ops.int_view(a) & exp_mask
    ops.max_(ebits, (emin + bias) << p)  # below 2**emin the spacing stays 2**(emin - m)
    if rounding == "nearest":
        ebits += (p - m_bits) << p
        c = ops.float_view(ebits)
        a += c
        a -= c
        return a
    if rounding != "stochastic":  # callers check; never fall through to random rounding
        raise ValueError(f"unknown rounding {rounding!r}; allowed: {', '.join(ROUNDINGS)}")
    ebits -= m_bits << p
    ulp = ops.float_view(ebits)
    a /= ulp
    a += ops.uniform(a, seed)
    ops.floor_(a)
    a *= ulp
    return a


def _quantize_core(x, name, ops, rounding="nearest", overflow="saturate", seed=None,
                   want_clipped=False, magnitude=None):
    """Quantize working array ``x``; returns (values in x's float type, clipped mask or None).

    ``magnitude`` may pass a (scaled) ``abs(x)`` that this function overwrites. A value is
    clipped when rounding it to nearest without a top limit would exceed the format's max.
    """
    e_bits, m_bits, bias, kind, _, _ = _LAYOUT[name]
    if kind == "e8m0":
        return _quantize_e8m0(x, ops, overflow), None
    fmax = _max_value(e_bits, m_bits, bias, kind)
    emax = math.floor(math.log2(fmax))
    a = ops.abs(x) if magnitude is None else magnitude
    clipped = None
    if want_clipped:
        mid = fmax + 2.0 ** (emax - m_bits - 1)  # halfway to the next (missing) grid value
        # an odd max mantissa (all formats but e4m3) sends the tie upwards, out of range
        clipped = (a > mid) if kind == "fn" else (a >= mid)
    if overflow == "saturate" or kind == "finite":
        # max is on the grid and rounding is monotone: clamping first equals clamping after
        ops.min_(a, fmax)
        r = _round_magnitude_(a, m_bits, 1 - bias, ops, rounding, seed)
    else:
        ops.min_(a, 2.0 ** (emax + 2))  # inf and huge values still overflow; NaN stays NaN
        r = _round_magnitude_(a, m_bits, 1 - bias, ops, rounding, seed)
        r = ops.where(r > fmax, math.inf if kind == "ieee" else math.nan, r)
    return ops.copysign_(r, x), clipped


def _quantize_e8m0(x, ops, overflow):
    p, exp_mask, _ = _layout_consts(x)
    a = ops.abs(x)
    too_big = a >= 1.5 * 2.0 ** 127  # rounds to 2**128 or beyond
    ops.min_(a, 2.0 ** 127)
    # Adding half the mantissa range carries into the exponent exactly when the mantissa >= 1.5.
    r = ops.float_view((ops.int_view(a) + (1 << (p - 1))) & exp_mask)
    # Below 2**-126 ml_dtypes and torch both give 2**-127 up to 2**-127 and 2**-126 above it
    # (they round up there rather than to nearest); we match them.
    r = ops.where(a < 2.0 ** -126, ops.where(a <= 2.0 ** -127, 2.0 ** -127, 2.0 ** -126), r)
    r = ops.where(ops.isnan(x), math.nan, r)
    r = ops.where(too_big, 2.0 ** 127 if overflow == "saturate" else math.nan, r)
    bad = (x < 0) if overflow == "saturate" else (x <= 0)
    return ops.where(bad, math.nan, r)


#: Largest ``seed`` of stochastic rounding: 2**64 - 1, the largest seed torch's generators take
#: (numpy's take any non-negative integer).
MAX_SEED = 2 ** 64 - 1


def checked_seed(seed, param: str = "seed"):
    """``seed`` of stochastic rounding: None (fresh entropy) or an integer in [0, 2**64 - 1]
    (an integral float such as ``3.0`` counts as 3; a bool, a string or ``2.5`` does not)."""
    if seed is None:
        return None
    return checks.number(param, seed, integer=True, nonnegative=True, maximum=MAX_SEED)


@via_numpy
def quantize(x, fmt: str, rounding: str = "nearest", overflow: str = "saturate",
             seed: int | None = None):
    """Round ``x`` onto the grid of scalar format ``fmt``; returns float32 of x's array type.

    See the module docstring for what ``overflow`` does with out-of-range values, inf and NaN.
    ``seed`` fixes the random draws of ``rounding="stochastic"``: None (fresh entropy) or an
    integer in [0, 2**64 - 1] (checked for either rounding).
    """
    name = format_name(fmt)
    checks.choice("rounding", rounding, ROUNDINGS)
    checks.choice("overflow", overflow, OVERFLOWS)
    seed = checked_seed(seed)
    ops, xw = _checked("x", x)
    xw, undo = at_least_1d(ops, xw)
    q, _ = _quantize_core(xw, name, ops, rounding, overflow, seed)
    return undo(ops.f32(q))


def at_least_1d(ops, xw):
    """(``xw`` with at least one dimension, a function restoring the original shape).

    The numpy passes work in place (``out=``), which a 0-d array or numpy scalar cannot take,
    so scalars (a Python float, ``np.float32(3)``, a 0-d array or CPU tensor) run as one
    element and come back 0-d.
    """
    if ops.is_torch or xw.ndim:
        return xw, lambda y: y
    return xw.reshape(1), lambda y: y.reshape(())


@via_numpy
def encode(x, fmt: str, rounding: str = "nearest", overflow: str = "saturate",
           seed: int | None = None):
    """Quantize ``x`` and return its bit codes as uint8 (the low ``bits`` bits are used).

    NaN encodes as the format's NaN code (sign kept for e4m3 and e5m2); formats without a NaN
    code raise ValueError on NaN.
    """
    name = format_name(fmt)
    e_bits, m_bits, bias, kind, _, _ = _LAYOUT[name]
    q = quantize(x, name, rounding, overflow, seed)
    ops = backend(q)
    nan = ops.isnan(q)
    if kind == "finite" and ops.any(nan):
        raise ValueError(f"x contains NaN, which fmt={name!r} cannot encode (it has no NaN code)")
    bits = ops.int_view(q)
    if kind == "e8m0":
        code = ops.where(bits < (1 << 23), 0, bits >> 23)  # 2**-127 is a float32 subnormal
        return ops.uint8(ops.where(nan, 255, code))
    sign = (bits >> 31) & 1
    mag = bits & 0x7FFFFFFF
    emin = 1 - bias
    sub = ops.abs(q) < 2.0 ** emin
    sub_mant = ops.to_int32(ops.where(sub, ops.abs(q), 0.0) * 2.0 ** (m_bits - emin))
    exp_field = ops.where(sub, 0, (mag >> 23) - 127 + bias)
    mant = ops.where(sub, sub_mant, (mag >> (23 - m_bits)) & ((1 << m_bits) - 1))
    code = (exp_field << m_bits) | mant
    if kind == "ieee":
        code = ops.where(mag == 0x7F800000, ((1 << e_bits) - 1) << m_bits, code)
        code = ops.where(nan, (((1 << e_bits) - 1) << m_bits) | (1 << (m_bits - 1)), code)
    elif kind == "fn":
        code = ops.where(nan, (1 << (e_bits + m_bits)) - 1, code)
    return ops.uint8(code | (sign << (e_bits + m_bits)))


@via_numpy
def decode(codes, fmt: str):
    """Values (float32) of bit codes of ``fmt``; codes must be integers in [0, 2**bits)."""
    name = format_name(fmt)
    e_bits, m_bits, bias, kind, _, _ = _LAYOUT[name]
    ops = backend(codes)
    dtype = getattr(codes, "dtype", None)
    if not ops.is_torch:
        codes = np.asarray(codes)
        dtype = codes.dtype
    if ops.is_torch:
        integral = not (dtype.is_floating_point or dtype.is_complex or dtype == ops.t.bool)
    else:
        integral = np.issubdtype(dtype, np.integer)
    if not integral:
        raise TypeError(f"codes must be integers; got dtype {dtype}")
    nbits = e_bits + m_bits + (kind != "e8m0")
    # check before narrowing to int32, which would wrap 2**32 + c around to c; torch compares
    # in the tensor's own dtype (256 is 0 in uint8), so widen its codes to int64 first
    wide = codes.to(ops.t.int64) if ops.is_torch else codes
    if ops.any((wide < 0) | (wide >= 2 ** nbits)):
        raise ValueError(f"codes must lie in [0, {2 ** nbits}) for fmt={name!r}")
    c = ops.to_int32(codes)
    if kind == "e8m0":
        val = ops.float_view(ops.where(c == 0, 1 << 22, c << 23))
        return ops.where(c == 255, math.nan, val)
    exp_field = (c >> m_bits) & ((1 << e_bits) - 1)
    mant = c & ((1 << m_bits) - 1)
    normal = ops.float_view(((exp_field - bias + 127) << 23) | (mant << (23 - m_bits)))
    val = ops.where(exp_field == 0, ops.f32(mant) * 2.0 ** (1 - bias - m_bits), normal)
    top = exp_field == (1 << e_bits) - 1
    if kind == "ieee":
        val = ops.where(top & (mant == 0), math.inf, val)
        val = ops.where(top & (mant != 0), math.nan, val)
    elif kind == "fn":
        val = ops.where(top & (mant == (1 << m_bits) - 1), math.nan, val)
    return ops.where(((c >> (e_bits + m_bits)) & 1) == 1, -val, val)
