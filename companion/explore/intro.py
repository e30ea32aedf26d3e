"""The intro's demonstration explorer: how close one GEMM gets to the spec sheet's peak.

Two curves per GPU, both from :func:`companion.roofline.gemm_time_arrays`: the ideal roofline
(tile and wave quantization only, the compute roof at the datasheet peak) and the same model
with the compute roof lowered to the best published burst throughput of a GEMM on that GPU
(:func:`companion.calibration.gemm_peak_fraction`, Stas Bekman's MAMF measurements). Column
names are the axis titles, so they are words with units.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import calibration, checks, roofline

GPUS = ("H100 SXM", "H200 SXM", "B200")
SIZES = tuple(int(s) for s in np.arange(256, 8192 + 1, 256))

#: Column names of :func:`gemm_fraction_of_peak` (they label the chart's axes and legend).
SIZE = "square GEMM size m = n = k"
FRACTION = "fraction of dense BF16 peak"
SERIES = "model"
IDEAL = roofline.IDEAL_LABEL
BURST = roofline.BURST_LABEL


def gemm_fraction_of_peak(gpu: str = "H100 SXM", overhead_us: float = 0.0,
                          sizes=SIZES) -> pd.DataFrame:
    """Predicted fraction of dense BF16 peak for square GEMMs (m = n = k) on ``gpu``.

    The roofline with tile and wave quantization plus a fixed per-kernel ``overhead_us``
    (launch latency), once at the datasheet peak (:data:`IDEAL`) and once with the compute roof
    at the published best-GEMM fraction of that peak (:data:`BURST`). A sustained, power-capped
    loop runs lower still; that is not modelled here.
    """
    s = np.asarray(sizes, dtype=np.float64)
    overhead_us = checks.number("overhead_us", overhead_us, nonnegative=True)
    overhead_s = overhead_us * 1e-6
    r = roofline.gemm_time_arrays(s, s, s, gpu, overhead_s=overhead_s)
    peak = roofline.resolve_gpu(gpu).peak_flops("bf16")
    burst = calibration.gemm_peak_fraction(gpu, "bf16")
    burst_s = np.maximum(r.compute_s / burst, r.memory_s) + overhead_s
    frames = [pd.DataFrame({SIZE: s.astype(int), FRACTION: r.flops / t / peak, SERIES: label,
                            "gpu": gpu}) for label, t in ((IDEAL, r.time_s), (BURST, burst_s))]
    return pd.concat(frames, ignore_index=True)


__all__ = ["GPUS", "SIZES", "SIZE", "FRACTION", "SERIES", "IDEAL", "BURST",
           "gemm_fraction_of_peak"]
