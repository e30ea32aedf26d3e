"""Argument checks shared by every module: clear errors that name the parameter.

The book's promise is "bad input gets a clear error": a ``ValueError`` or ``TypeError`` that
names the parameter and what is allowed, and for names, the closest matches.
"""
from __future__ import annotations

import difflib
import math
import numbers
from typing import Iterable

import numpy as np


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


def number(param: str, value, *, positive: bool = False, nonnegative: bool = False,
           integer: bool = False, minimum=None, maximum=None):
    """Check a scalar number: type, finiteness and range. Returns it unchanged."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{param} must be {kind}; got {type(value).__name__} {value!r}")
    if integer and not isinstance(value, numbers.Integral):
        if float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{param} must be an integer; got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{param} must be finite; got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{param} must be > 0; got {value!r}")
    if nonnegative and not value >= 0:
        raise ValueError(f"{param} must be >= 0; got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{param} must be >= {minimum}; got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{param} must be <= {maximum}; got {value!r}")
    return value


def divides(param_divisor: str, divisor: int, param_total: str, total: int) -> None:
    """Raise unless ``divisor`` divides ``total``, naming both parameters."""
    if total % divisor:
        raise ValueError(
            f"{param_divisor}={divisor} must divide {param_total}={total} "
            f"(remainder {total % divisor})")


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
