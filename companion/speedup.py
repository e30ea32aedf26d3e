"""What a faster GEMM buys a training step: Amdahl's law with the quantization kernels counted.

A datasheet doubles the peak from BF16 to FP8 and again to FP4. A training step gets less:

1. Only the GEMMs speed up. If GEMMs are a fraction f of a BF16 step and run s times faster,
   the step runs ``1 / ((1 - f) + f / s)`` times faster (Amdahl 1967).
2. Low-precision GEMMs need their operands quantized first: read in BF16, written in FP8/FP4
   with their scales, by kernels that are bound by memory bandwidth. That time o (a fraction of
   the BF16 step) is added: ``1 / ((1 - f) + f / s + o)``.
3. The low-precision GEMM may reach a smaller fraction of its peak than the BF16 one does.

:func:`linear_layer_step` prices one linear layer's training step (forward, dgrad and wgrad
GEMMs) on a GPU from the registry: GEMM time on a roofline (the compute roof, or the memory
roof when few tokens leave the operands' bytes the larger cost), quantization time on the
memory roof. Each of the three operands (input x, weight w, output gradient g) is read once in
BF16 and written twice in the low-precision format, once per GEMM layout that consumes it (the
forward and the backward GEMMs reduce over different axes, so block-scaled and transposed
copies differ); a per-tensor scale (FP8 current scaling, NVFP4's second level) reads each
tensor once more for its amax. A fused
implementation writes the low-precision copy from the kernel that produces the tensor
(LayerNorm, activation function), which removes the separate pass: ``fused=True``.
"""
from __future__ import annotations

import dataclasses

from companion import checks, hardware, roofline

#: Storage bits per element, scales included, of each scheme's GEMM operands.
#: fp8_tensor: one FP32 scale per tensor (negligible); fp8_block: DeepSeek-V3's 1x128 tiles
#: with an FP32 scale (32/128 bits); mxfp8 / mxfp4: one 8-bit E8M0 scale per 32 values (OCP MX
#: v1.0); nvfp4: one 8-bit E4M3 scale per 16 values (plus a per-tensor FP32 scale).
BITS_PER_ELEMENT = {"bf16": 16.0, "fp8_tensor": 8.0, "fp8_block": 8.25, "mxfp8": 8.25,
                    "mxfp4": 4.25, "nvfp4": 4.5}
#: The tensor-core peak each scheme's GEMMs run at (a key of the hardware registry).
PRECISION = {"bf16": "bf16", "fp8_tensor": "fp8", "fp8_block": "fp8", "mxfp8": "fp8",
             "mxfp4": "fp4", "nvfp4": "fp4"}
SCHEMES = tuple(BITS_PER_ELEMENT)
#: Schemes whose scale needs the whole tensor's amax before any element is written, a pass of
#: its own: per-tensor FP8 current scaling, and NVFP4's per-tensor FP32 scale (amax / (6 x
#: 448), above its E4M3 block scales). Block-only schemes take each block's amax as they go.
AMAX_PASS = ("fp8_tensor", "nvfp4")


def amdahl_speedup(gemm_fraction: float, gemm_speedup: float,
                   overhead_fraction: float = 0.0) -> float:
    """Step speedup 1 / ((1 - f) + f / s + o).

    ``gemm_fraction`` f: share of the BF16 step spent in GEMMs (0 to 1); ``gemm_speedup`` s:
    how many times faster those GEMMs run; ``overhead_fraction`` o: added time (quantization
    kernels) as a fraction of the BF16 step.
    """
    f = checks.number("gemm_fraction", gemm_fraction, minimum=0, maximum=1)
    s = checks.number("gemm_speedup", gemm_speedup, positive=True)
    o = checks.number("overhead_fraction", overhead_fraction, nonnegative=True)
    return 1.0 / ((1.0 - f) + f / s + o)


@dataclasses.dataclass(frozen=True)
class LinearStep:
    """One linear layer's training step (3 GEMMs) in BF16 and in a low-precision scheme."""

    scheme: str
    gpu: str
    gemm_bf16_s: float
    gemm_lowp_s: float
    quantize_s: float

    @property
    def gemm_speedup(self) -> float:
        """BF16 GEMM time over low-precision GEMM time."""
        return self.gemm_bf16_s / self.gemm_lowp_s

    @property
    def overhead_ratio(self) -> float:
        """Quantization time as a fraction of the BF16 GEMM time."""
        return self.quantize_s / self.gemm_bf16_s

    @property
    def speedup(self) -> float:
        """The layer's own speedup, quantization included."""
        return self.gemm_bf16_s / (self.gemm_lowp_s + self.quantize_s)


def linear_layer_step(tokens: int, in_features: int, out_features: int, gpu,
                      scheme: str = "fp8_tensor", relative_efficiency: float = 1.0,
                      fused: bool = False) -> LinearStep:
    """Price a linear layer's forward + dgrad + wgrad GEMMs, BF16 against ``scheme``.

    GEMMs take 2 x tokens x in x out FLOPs each at the GPU's dense peak (the BF16 one, and for
    ``scheme`` its precision's peak times ``relative_efficiency``, the fraction of its peak the
    low-precision GEMM reaches relative to BF16's), or, where it takes longer (few tokens), the
    time HBM needs to read each GEMM's two operands (at the scheme's bits per element) and
    write its BF16 output: a roofline. Quantization moves, per operand, its
    elements x (2 bytes read + 2 x bits/8 written), plus 2 bytes for an amax pass where the
    scheme has a per-tensor scale (:data:`AMAX_PASS`), at the HBM bandwidth; zero if ``fused``.
    """
    checks.choice("scheme", scheme, SCHEMES)
    m = checks.number("tokens", tokens, positive=True, integer=True)
    k = checks.number("in_features", in_features, positive=True, integer=True)
    n = checks.number("out_features", out_features, positive=True, integer=True)
    eff = checks.number("relative_efficiency", relative_efficiency, positive=True, maximum=1)
    fused = checks.boolean("fused", fused)
    g = roofline.resolve_gpu(gpu)
    if scheme == "mxfp8" and not hardware.runs_mx(g):
        raise ValueError(f"scheme='mxfp8' needs MX block-scaled matrix instructions (NVIDIA "
                         f"compute capability 10.0 or higher, AMD gfx950); {g.name} is "
                         f"{g.compute_capability}: use 'fp8_tensor' or 'fp8_block'")
    flops = 3 * 2.0 * m * n * k
    elements = m * k + k * n + m * n  # x, w and g
    # forward, dgrad and wgrad each read two of x, w, g and write the third

    def gemms_s(peak_flops, operand_bytes):
        return max(flops / peak_flops, elements * (2 * operand_bytes + 2.0) / g.hbm_Bps)

    bf16_s = gemms_s(g.peak_flops("bf16"), 2.0)
    if scheme == "bf16":
        return LinearStep(scheme, g.name, bf16_s, bf16_s, 0.0)
    lowp_s = gemms_s(g.peak_flops(PRECISION[scheme]) * eff, BITS_PER_ELEMENT[scheme] / 8)
    per_element = 2.0 + 2 * BITS_PER_ELEMENT[scheme] / 8 + (2.0 if scheme in AMAX_PASS else 0)
    quant_s = 0.0 if fused else elements * per_element / g.hbm_Bps
    return LinearStep(scheme, g.name, bf16_s, lowp_s, quant_s)


def step_speedup(gemm_fraction: float, tokens: int, hidden: int, gpu,
                 scheme: str = "fp8_tensor", relative_efficiency: float = 1.0,
                 fused: bool = False, ffn_ratio: int = 4) -> float:
    """End-to-end step speedup when a fraction ``gemm_fraction`` of the BF16 step is GEMMs.

    The GEMMs are represented by a transformer MLP up-projection (``hidden`` to ``ffn_ratio`` x
    ``hidden`` over ``tokens`` tokens): its GEMM speedup and its quantization overhead ratio
    apply to all GEMM time, and Amdahl's law (:func:`amdahl_speedup`) gives the step.
    """
    checks.number("ffn_ratio", ffn_ratio, positive=True, integer=True)
    layer = linear_layer_step(tokens, hidden, ffn_ratio * hidden, gpu, scheme,
                              relative_efficiency, fused)
    f = checks.number("gemm_fraction", gemm_fraction, minimum=0, maximum=1)
    return amdahl_speedup(f, layer.gemm_speedup, f * layer.overhead_ratio)


__all__ = ["BITS_PER_ELEMENT", "PRECISION", "SCHEMES", "AMAX_PASS", "LinearStep", "amdahl_speedup",
           "linear_layer_step", "step_speedup"]
