"""Companion package of *Spec Sheet to Step Time*.

Each chapter of the book has one module here (``hardware``, ``formats``, ``roofline``,
``memory``, ``comm``, ...). Submodules load on first use, so ``import companion`` stays cheap
and ``companion.hardware.gpu("H100")`` works without a separate import.
"""
from importlib import import_module

__version__ = "0.1.0"

_SUBMODULES = (
    "units", "hardware", "formats", "minifloat", "blockscale", "formats_torch", "experiment",
    "seedstats", "speedup", "roofline", "memory", "model", "comm", "fabric", "moe", "parallel",
    "search", "steptime", "calibration", "estimator", "validation", "clocks", "machine", "power",
    "cases", "reliability", "stack", "claims", "claims_core", "exercises", "explore", "bench",
    "checks",
)
__all__ = ["__version__", *_SUBMODULES]


def __getattr__(name):
    # Lazy submodule access: chapters import only what they use.
    if name in _SUBMODULES:
        return import_module(f"companion.{name}")
    raise AttributeError(f"module 'companion' has no attribute {name!r}")
