"""Exercises of the chapter "FP8 and FP4 for real"."""
import numpy as np

from .. import formats, hardware, speedup
from ..exercises import Exercise, register


def _binades(fmt):
    i = formats.info(fmt)
    return float(np.log2(i.max / i.min_subnormal))


def _mxfp4_scale(amax=20.0):
    block = np.zeros(32, dtype=np.float32)
    block[0] = amax
    _, scales = formats.block_quantize(block, "mxfp4")
    return float(scales[0])


def _nvfp4_bits():
    rows, cols = formats.block_shape("nvfp4")
    return formats.info("e2m1").bits + formats.info("e4m3").bits / (rows * cols)


def _torch_cast(value=1000.0):
    import torch
    return float(torch.tensor(value).to(torch.float8_e4m3fn).float())


def _h100_fp8_amdahl(gemm_fraction=0.7):
    g = hardware.gpu("H100")
    return speedup.amdahl_speedup(gemm_fraction, g.peak_flops("fp8") / g.peak_flops("bf16"))


register(Exercise(
    id="lp-e2m1-values", chapter="low_precision",
    question="E2M1 has 16 bit patterns. How many distinct real values do they represent?",
    answer=lambda: len(formats.info("e2m1").values),
    why="+0 and -0 are the same number; the other 14 codes are +-0.5, 1, 1.5, 2, 3, 4, 6.",
    rel_tol=0.0))

register(Exercise(
    id="lp-e4m3-binades", chapter="low_precision",
    question="How many binades (factors of two) separate E4M3's largest finite value from its "
             "smallest subnormal, as log2 of their ratio?",
    answer=lambda: _binades("e4m3"),
    why="log2(448 / 2^-9): max 448 = 1.75 x 2^8, smallest subnormal 2^-6 x 2^-3.",
    rel_tol=0.01, unit="binades"))

register(Exercise(
    id="lp-mxfp4-scale", chapter="low_precision",
    question="An MXFP4 block of 32 values has largest magnitude 20.0. What is its shared E8M0 "
             "scale?",
    answer=_mxfp4_scale,
    why="OCP MX v1.0: X = 2^(floor(log2(amax)) - emax_elem); floor(log2 20) = 4 and E2M1's "
        "emax is 2, so X = 2^2. 20 / 4 = 5 then rounds to the E2M1 grid (4 or 6).",
    rel_tol=0.0))

register(Exercise(
    id="lp-nvfp4-bits", chapter="low_precision",
    question="Counting its E4M3 block scales but not the per-tensor FP32 scale, how many bits "
             "does an NVFP4 activation take per element?",
    answer=_nvfp4_bits,
    why="4 bits of E2M1 plus one 8-bit E4M3 scale shared by 16 elements: 4 + 8/16.",
    rel_tol=0.0, abs_tol=1e-9, unit="bits"))

register(Exercise(
    id="lp-amdahl-h100", chapter="low_precision",
    question="GEMMs take 70% of a BF16 training step on H100. If FP8 made them exactly as much "
             "faster as the dense peaks promise, and quantization cost nothing, what would the "
             "step speedup be?",
    answer=_h100_fp8_amdahl,
    why="Amdahl: 1 / (0.3 + 0.7 / 2), with 2 = 1979 / 989 TFLOP/s dense (FP8 over BF16).",
    rel_tol=0.01, unit="x"))

register(Exercise(
    id="lp-torch-saturates", chapter="low_precision",
    question="What does torch return for torch.tensor(1000.0).to(torch.float8_e4m3fn), read "
             "back as a float?",
    answer=_torch_cast,
    why="torch's E4M3 cast saturates: out-of-range values become +-448, E4M3's largest "
        "finite value (ml_dtypes returns NaN instead).",
    rel_tol=0.0))
