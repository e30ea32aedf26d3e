"""Low-precision number formats, exactly: the scalar formats, block scaling and error metrics.

One import for the chapter's library. The scalar formats (E4M3, E5M2, the FP6 and FP4 formats
and E8M0: their values, rounding with saturation or NaN on overflow, bit encoding) live in
:mod:`companion.minifloat`; block scaling, per-tensor and delayed scaling, the random Hadamard
transform and the error metrics in :mod:`companion.blockscale`; the emulated GEMMs and
training recipes, which need torch, in :mod:`companion.formats_torch`, loaded on first use
so numpy users never import torch. Imports run one way (minifloat <- blockscale <-
formats_torch, all three <- formats): there is no cycle.
"""
from __future__ import annotations

from companion.blockscale import (  # noqa: F401
    MAX_HADAMARD_SIZE, MX_SCHEMES, ROLES, SCALE_RULES, SCHEMES, DelayedScaling, QuantStats,
    block_quantize, block_shape, fraction_clipped, fraction_flushed, margin_limit,
    nvfp4_global_scale, quant_stats, random_hadamard, relative_error, sqnr_db, tensor_quantize)
from companion.minifloat import (  # noqa: F401
    FORMATS, MAX_SEED, OVERFLOWS, ROUNDINGS, FormatInfo, decode, encode, format_name, info,
    quantize)

_TORCH_NAMES = ("qmatmul", "QLinear", "RECIPES", "Recipe", "QuantizedLinearFunction", "recipe")

__all__ = [
    "FORMATS", "SCHEMES", "FormatInfo", "info", "format_name", "quantize", "encode", "decode",
    "block_quantize", "tensor_quantize", "DelayedScaling", "random_hadamard", "nvfp4_global_scale",
    "sqnr_db", "relative_error", "fraction_clipped", "fraction_flushed", "quant_stats",
    "QuantStats", "block_shape", "SCALE_RULES", "margin_limit", "MAX_HADAMARD_SIZE", "MAX_SEED",
]  # qmatmul, QLinear, RECIPES and recipe also resolve here but live in formats_torch


def __getattr__(name):
    if name in _TORCH_NAMES:
        from companion import formats_torch
        return getattr(formats_torch, name)
    raise AttributeError(f"module 'companion.formats' has no attribute {name!r}")
