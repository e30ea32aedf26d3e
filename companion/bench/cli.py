"""argparse types for the bench commands: a bad flag exits 2 with one line naming it.

Each type wraps a check from :mod:`companion.checks` and turns its ``ValueError`` or
``TypeError`` into ``argparse.ArgumentTypeError``, which argparse prints as
``error: argument --iters: iters must be > 0; got 0`` and exits with status 2: no traceback,
and (for torchrun benchmarks) no worker started.
"""
from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from companion import checks

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    """``"4K"``, ``"64KiB"``, ``"1M"``, ``"4096"`` -> bytes (binary prefixes)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"size {text!r} not understood; use e.g. 4096, 4K, 64KiB, 1M, 1G")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line: ``prog: error: message (--help for
    usage)``, exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (--help for usage)\n")


def _typed(fn, name: str):
    """An argparse type from ``fn(text)``; its errors become one-line argparse errors."""
    def convert(text):
        try:
            return fn(text)
        except (ValueError, TypeError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name  # argparse names the type in "invalid <name> value"
    return convert


def _number(text: str, integer: bool):
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {'an integer' if integer else 'a number'}") from None
    return value


def integer(param: str, minimum: int = 0, maximum: int | None = None):
    """An integer flag in ``[minimum, maximum]``."""
    return _typed(lambda t: checks.number(param, _number(t, True), integer=True,
                                          minimum=minimum, maximum=maximum), "integer")


def real(param: str, *, positive: bool = False, nonnegative: bool = False,
         maximum: float | None = None):
    """A finite number flag (``nan`` and ``inf`` refused)."""
    return _typed(lambda t: checks.number(param, _number(t, False), positive=positive,
                                          nonnegative=nonnegative, maximum=maximum), "number")


def sizes(param: str = "sizes", minimum: int = 1, maximum: int = 1 << 40):
    """A comma-separated list of byte sizes (``4K,64KiB,1M``), each in ``[minimum, maximum]``."""
    def convert(text):
        items = [s for s in str(text).split(",") if s.strip()]
        if not items:
            raise ValueError(f"{param} must list at least one size, e.g. 4K,1M")
        return [checks.number(param, parse_size(s), integer=True, minimum=minimum,
                              maximum=maximum) for s in items]
    return _typed(convert, "sizes")


def names(param: str, allowed):
    """A comma-separated list of names from ``allowed`` (close matches suggested)."""
    allowed = tuple(allowed)

    def convert(text):
        items = [s.strip() for s in str(text).split(",") if s.strip()]
        if not items:
            raise ValueError(f"{param} must list at least one of {', '.join(allowed)}")
        return [checks.choice(param.rstrip("s"), s, allowed) for s in items]
    return _typed(convert, "names")


def directory(text: str) -> Path:
    """A directory a record can be written to (created if missing), checked before any run."""
    def convert(t):
        path = Path(t)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"cannot create the record directory {t!r}: {exc.strerror}") \
                from None
        if not os.access(path, os.W_OK):
            raise ValueError(f"the record directory {t!r} is not writable")
        return path
    return _typed(convert, "directory")(text)


def finite_seconds(param: str, maximum: float = 24 * 3600.0):
    """A duration in seconds: finite, > 0 and at most ``maximum`` (a day by default)."""
    return real(param, positive=True, maximum=maximum)


__all__ = ["Parser", "parse_size", "integer", "real", "sizes", "names", "directory", "finite_seconds"]
