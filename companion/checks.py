"""Argument checks shared by every module: clear errors that name the parameter.

The book's promise is "bad input gets a clear error": a ``ValueError`` or ``TypeError`` that
names the parameter and what is allowed, and for names, the closest matches. Every public
function calls these at its top, so a bad value fails where the reader passed it, not deep
inside numpy or pandas, and never turns into a silent NaN, inf or wrong answer.

What the layer guarantees:

- numbers are finite and in range; a Python int too large for a float is an error, not an
  ``OverflowError`` later; numpy scalars, 0-d arrays and 0-d tensors count as scalars;
- integers where integers are meant (``3.0`` is accepted as 3, ``3.5`` is not);
- booleans are strict: ``"False"``, ``0`` and ``None`` are not booleans (a non-empty string
  is truthy, so ``fp8_params="False"`` would silently mean True);
- names come from a closed set, with close matches suggested;
- a model is a :class:`~companion.model.Transformer` or a preset name, everywhere;
- sizes that would hang or exhaust memory have documented upper bounds (below).
"""
from __future__ import annotations

import difflib
import math
import numbers
from typing import Iterable

import numpy as np

#: Largest GPU count any function accepts: 2**24 (16.8 million), two orders of magnitude above
#: the largest clusters announced (about 10**5 GPUs). Past it a layout search would enumerate
#: divisors of numbers no cluster has, and step-time formulas lose meaning.
MAX_GPUS = 2 ** 24
#: Largest integer dimension (GEMM m, n, k, token counts): 2**53, the largest integer a float64
#: holds exactly. Every formula here runs in float64.
MAX_EXACT_INT = 2 ** 53
#: Largest number of simulated segments (runs x segments) one Monte Carlo call holds in memory:
#: 2 x 10**6 float64 values, 16 MB.
MAX_SIM_SEGMENTS = 2 * 10 ** 6
#: Largest expected number of random draws in one Monte Carlo call (well under a second of numpy).
MAX_SIM_DRAWS = 10 ** 7
#: Largest expected number of attempts at one segment of a Monte Carlo job, e^((tau+delta+R)/M):
#: each attempt is a pass of numpy over the pending segments, so this bounds the passes.
MAX_SIM_ATTEMPTS = 1000
#: Largest grid (points in a sweep or chart) a function builds.
MAX_GRID_POINTS = 10 ** 6


def suggest(value: str, allowed: Iterable[str], n: int = 3) -> list[str]:
    """Closest matches of ``value`` among ``allowed`` (case-insensitive)."""
    allowed = list(allowed)
    lower = {a.lower(): a for a in allowed}
    hits = difflib.get_close_matches(str(value).lower(), list(lower), n=n, cutoff=0.4)
    return [lower[h] for h in hits]


def choice(param: str, value, allowed: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``allowed``; otherwise raise naming the options."""
    allowed = list(allowed)
    if not isinstance(value, str):
        raise TypeError(f"{param} must be a string, one of {allowed}; got {type(value).__name__}")
    if value in allowed:
        return value
    close = suggest(value, allowed)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"unknown {param} {value!r}; allowed: {', '.join(allowed)}.{hint}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def scalar(value):
    """``value`` as a plain Python scalar if it is a numpy scalar, a 0-d array or a 0-d tensor;
    anything else unchanged."""
    if isinstance(value, np.generic):
        return value.item()
    ndim = getattr(value, "ndim", None)
    if ndim == 0 and hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def number(param: str, value, *, positive: bool = False, nonnegative: bool = False,
           integer: bool = False, minimum=None, maximum=None):
    """Check a scalar number: type, finiteness and range. Returns it (numpy scalars, 0-d arrays
    and 0-d tensors as the plain Python number they hold; integral floats as ``int`` when
    ``integer``). An integer is at most :data:`MAX_EXACT_INT` unless ``maximum`` says
    otherwise: past 2**53 a float64 formula is no longer exact, and past 2**63 numpy's int64
    overflows."""
    value = scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{param} must be {kind}; got {type(value).__name__} {_short(value)}")
    try:
        as_float = float(value)
    except OverflowError:  # an int with hundreds of digits: no formula here can use it
        raise ValueError(f"{param} is too large: {_short(value)} does not fit in a float "
                         f"(about 1.8e308)") from None
    if not math.isfinite(as_float):
        raise ValueError(f"{param} must be finite; got {value!r}")
    if integer and not isinstance(value, numbers.Integral):
        if as_float.is_integer():
            value = int(as_float)
        else:
            raise TypeError(f"{param} must be an integer; got {value!r}")
    if integer and maximum is None:
        maximum = MAX_EXACT_INT
    if positive and not value > 0:
        raise ValueError(f"{param} must be > 0; got {_short(value)}")
    if nonnegative and not value >= 0:
        raise ValueError(f"{param} must be >= 0; got {_short(value)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{param} must be >= {minimum}; got {_short(value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{param} must be <= {maximum}; got {_short(value)}")
    return value


def scaled(param: str, value, factor: float, *, nonnegative: bool = True) -> float:
    """``value * factor`` for a checked ``value``, refusing a product that overflows to inf
    (``gb(1e300)`` is not a number of bytes)."""
    v = number(param, value, nonnegative=nonnegative)
    out = v * factor
    if not math.isfinite(out):
        raise ValueError(f"{param}={v!r} is too large: times {factor:g} it overflows a float")
    return out


def finite_result(param: str, value):
    """Raise if a computed ``value`` (scalar or array) is not finite; the message names the
    inputs (``param``) that produced it. Returns ``value``."""
    arr = np.asarray(value, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{param} too large: the result overflows a float (got "
                         f"{arr[~np.isfinite(arr)][:1].tolist()})")
    return value


def boolean(param: str, value) -> bool:
    """A strict boolean: ``True``/``False`` (or a numpy bool); a string, number or None raises."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{param} must be True or False; got {type(value).__name__} "
                    f"{_short(value)}")


def integer_in(param: str, value, minimum: int, maximum: int) -> int:
    """An integer in ``[minimum, maximum]``; the bound is named in the error."""
    return number(param, value, integer=True, minimum=minimum, maximum=maximum)


def gpu_count(param: str, value) -> int:
    """A GPU count: an integer from 1 to :data:`MAX_GPUS`."""
    return integer_in(param, value, 1, MAX_GPUS)


def divides(param_divisor: str, divisor: int, param_total: str, total: int) -> None:
    """Raise unless ``divisor`` divides ``total``, naming both parameters."""
    if total % divisor:
        raise ValueError(
            f"{param_divisor}={divisor} must divide {param_total}={total} "
            f"(remainder {total % divisor})")


def real_array(param: str, x, *, nonnegative: bool = False, positive: bool = False):
    """``x`` (a number or array-like of numbers) as a float64 array, finite and in range.
    Strings and booleans are refused even where numpy would convert them."""
    kind = np.asarray(x).dtype.kind if not isinstance(x, (str, bytes)) else "U"
    if kind in "USb":
        raise TypeError(f"{param} must be a number or an array of numbers; got "
                        f"{type(x).__name__} {_short(x)}")
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{param} must be a number or an array of numbers; got "
                        f"{type(x).__name__} {_short(x)}") from None
    bad = ~np.isfinite(a)
    if positive:
        bad |= ~(a > 0)
    elif nonnegative:
        bad |= ~(a >= 0)
    if bad.any():
        rule = "finite and > 0" if positive else "finite and >= 0" if nonnegative else "finite"
        raise ValueError(f"{param} must be {rule}; got {a[bad][:3].tolist()}")
    return a


def floating_array(param: str, x):
    """Accept a floating numpy array or torch tensor; reject ints, bools, objects."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        x = np.asarray(x)
        dtype = x.dtype
    is_float = getattr(dtype, "is_floating_point", None)
    if is_float is None:
        is_float = np.issubdtype(dtype, np.floating)
    if not is_float:
        raise TypeError(f"{param} must hold floating-point values; got dtype {dtype}")
    return x
