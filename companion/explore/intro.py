"""The intro's demonstration explorer: how close one GEMM gets to the spec sheet's peak."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import roofline

GPUS = ("H100 SXM", "H200 SXM", "B200")
SIZES = tuple(int(s) for s in np.arange(256, 8192 + 1, 256))


def gemm_fraction_of_peak(gpu: str = "H100 SXM", overhead_us: float = 0.0,
                          sizes=SIZES) -> pd.DataFrame:
    """Predicted fraction of dense BF16 peak for square GEMMs (m = n = k) on ``gpu``.

    One call of :func:`companion.roofline.gemm_time` per size: roofline, tile and wave
    quantization, plus a fixed per-kernel ``overhead_us`` (launch latency).
    """
    rows = []
    for s in sizes:
        est = roofline.gemm_time(s, s, s, gpu, overhead_s=overhead_us * 1e-6)
        rows.append({"size": s, "fraction_of_peak": est.mfu, "gpu": gpu})
    return pd.DataFrame(rows)
