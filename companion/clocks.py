"""Power cap -> SM clock -> the GEMM rate a training step sustains.

The step-time model prices GEMMs at a *sustained* rate (:func:`companion.calibration.sustained_fraction`): the published back-to-back GEMM time of a whole layer at the part's own
power limit, against the burst (MAMF) rate of a short, cache-flushed matmul loop. This module
joins that rate to the power chapter's cap model (:func:`companion.power.power_cap`): a cap
below the board's maximum lowers the clock, and a clock-bound GEMM slows in proportion.

What is measured and what is assumed:

- the sustained rate at the board limit is measured (Transformer Engine's GEMM profiling
  tutorial on a B300; other Blackwells borrow it by family; Hopper has no record, so its
  sustained rate is the burst rate, an optimistic bound, which a published sustainable
  rate on an H200 SXM puts within 5%: :func:`msmf_check`);
- the clock a cap leaves is the power chapter's toy model, whose floor and exponent are the
  reader's assumptions;
- the published points in :data:`PUBLISHED_POINTS` are third-party measurements of clocks and
  GEMM rates under power limits, shown beside the model, never fitted to; so are the sustained
  matmul rates :func:`msmf_check` sets against it (H200 SXM and B200 BF16).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from companion import calibration, checks, hardware, power


def sustained_gemm_flops(gpu, precision: str = "bf16",
                         cal: calibration.Calibration | None = None) -> float:
    """Dense FLOP/s a large GEMM sustains inside a training step at the GPU's own power limit,
    before tile and wave quantization: datasheet peak x published burst fraction (MAMF) x
    ``gemm_in_training`` x :func:`~companion.calibration.sustained_fraction`."""
    if cal is not None and not isinstance(cal, calibration.Calibration):
        raise TypeError(f"cal must be a companion.calibration.Calibration (e.g. "
                        f"calibration.DEFAULT); got {type(cal).__name__}")
    cal = calibration.DEFAULT if cal is None else cal
    g = hardware.gpu(gpu) if not isinstance(gpu, hardware.GPU) else gpu
    p = hardware.precision_name(precision)
    return (g.peak_flops(p) * calibration.gemm_peak_fraction(g, p) * cal.gemm_in_training
            * calibration.sustained_fraction(g, p, cal))


@dataclass(frozen=True)
class CappedRate:
    """A GEMM's sustained rate under a power cap (see :func:`capped_gemm_flops`)."""

    gpu: str
    precision: str
    cap_w: float
    max_w: float
    clock_fraction: float
    sustained_flops: float
    capped_flops: float


def capped_gemm_flops(gpu, cap_w: float, precision: str = "bf16", *, floor_fraction: float = 0.3,
                      exponent: float = 3.0,
                      cal: calibration.Calibration | None = None) -> CappedRate:
    """The sustained GEMM rate (:func:`sustained_gemm_flops`) under a board-power cap
    ``cap_w``: the power chapter's model (:func:`companion.power.power_cap`, floor
    ``floor_fraction`` x TDP, power ~ clock ** ``exponent``) sets the clock as a fraction of
    the clock at the TDP, and a clock-bound GEMM runs at that fraction of its sustained rate.
    A cap at or above the TDP changes nothing."""
    g = hardware.gpu(gpu) if not isinstance(gpu, hardware.GPU) else gpu
    frac = checks.number("floor_fraction", floor_fraction, nonnegative=True, maximum=0.99)
    top = g.need("tdp_w") if hasattr(g, "need") else g.tdp_w
    c = power.power_cap(cap_w, top, floor_w=frac * top, exponent=exponent)
    rate = sustained_gemm_flops(g, precision, cal)
    return CappedRate(gpu=g.name, precision=hardware.precision_name(precision), cap_w=c.cap_w,
                      max_w=top, clock_fraction=c.clock_fraction, sustained_flops=rate,
                      capped_flops=rate * c.clock_fraction)


def sustained_table(gpus=("H100", "H200", "B200", "GB200", "B300", "GB300"),
                    precision: str = "bf16") -> pd.DataFrame:
    """Per GPU: TDP, datasheet dense peak, burst (MAMF) and sustained rates in TFLOP/s, and
    where the sustained factor comes from."""
    if isinstance(gpus, (str, bytes)) or not hasattr(gpus, "__iter__"):
        raise TypeError(f"gpus must be a sequence of GPU names; got {gpus!r:.40}")
    gpus = list(gpus)
    if not gpus:
        raise ValueError("gpus must name at least one GPU")
    rows = []
    for name in gpus:
        g = hardware.gpu(name)
        p = hardware.precision_name(precision)
        burst = g.peak_flops(p) * calibration.gemm_peak_fraction(g, p)
        basis = calibration.gemm_fraction_table((p,)).set_index("GPU").loc[g.name, "sustained basis"]
        rows.append({"GPU": g.name, "TDP (W)": g.tdp_w,
                     "dense peak (TFLOP/s)": g.peak_flops(p) / 1e12,
                     "burst, MAMF (TFLOP/s)": burst / 1e12,
                     "sustained in a step (TFLOP/s)": sustained_gemm_flops(g, p) / 1e12,
                     "sustained basis": basis})
    return pd.DataFrame(rows)


def cap_table(gpu, caps_w, precision: str = "bf16", *, floor_fraction: float = 0.3,
              exponents=(1.0, 2.0, 3.0)) -> pd.DataFrame:
    """:func:`capped_gemm_flops` for each cap and each power-clock exponent."""
    checks.real_array("caps_w", caps_w, positive=True)  # then as given: 500 prints as 500
    ex = checks.real_array("exponents", exponents, positive=True)
    if (ex < 1).any():  # power_cap's range, named here: clock falls no faster than power
        raise ValueError(f"exponents must be >= 1; got {ex[ex < 1][:3].tolist()}")
    caps_w, exponents = (x if np.ndim(x) else [x] for x in (caps_w, exponents))
    if not (len(caps_w) and len(exponents)):
        raise ValueError("caps_w and exponents must each hold at least one value")
    rows = []
    for a in exponents:
        for cap in caps_w:
            r = capped_gemm_flops(gpu, cap, precision, floor_fraction=floor_fraction, exponent=a)
            rows.append({"cap (W)": r.cap_w, "exponent": a, "clock / clock at TDP":
                         r.clock_fraction, "sustained GEMM (TFLOP/s)": r.capped_flops / 1e12})
    return pd.DataFrame(rows)


#: Published clocks and GEMM rates under power limits (third-party measurements, labelled so).
PUBLISHED_POINTS = (
    {"GPU": "B200", "what": "SM clock, kernels back to back vs with idle gaps",
     "before": 1965.0, "after": 1580.0, "unit": "MHz", "power_w": 1000.0,
     "detail": "board at ~1000 W; FA4 forward 1450 -> 1237 TFLOP/s over 100 iterations",
     "source": "flashinfer-ai/flashinfer PR 2899 (2026-03-26)"},
    {"GPU": "H800", "what": "SM clock when overlapped compute and communication pass the power limit",
     "before": 1980.0, "after": 1575.0, "unit": "MHz", "power_w": None,
     "detail": "FP8 inference; locking at 1575 MHz lowered end-to-end throughput",
     "source": "deepseek-ai/DeepGEMM issue 120 (2025-06-25)"},
    {"GPU": "GB300", "what": "cuBLAS GEMM at a 500 W cap vs the 1400 W default (low end of its range)",
     "before": 1600.0, "after": 617.0, "unit": "TFLOP/s", "power_w": 500.0,
     "detail": "~617 TFLOP/s at 500 W vs ~1600-2174 TFLOP/s at 1400 W; precision not stated",
     "source": "facebookexperimental/triton PR 2023 (2026-07-14)"},
    {"GPU": "GB300", "what": "cuBLAS GEMM at a 500 W cap vs the 1400 W default (high end of its range)",
     "before": 2174.0, "after": 617.0, "unit": "TFLOP/s", "power_w": 500.0,
     "detail": "as above", "source": "facebookexperimental/triton PR 2023 (2026-07-14)"},
)


def msmf_check(cal: calibration.Calibration | None = None) -> pd.DataFrame:
    """The companion's sustained BF16 GEMM rate (:func:`sustained_gemm_flops`) beside each
    published maximum *sustainable* matmul rate (``kind == "gemm_sustained"`` rows of
    ``data/published_measurements.csv``: mamf-finder's MSMF, the best shape held over a 4 s
    window once load has settled the clock at the power limit). A check, never fitted to:
    ``ratio`` = model / published."""
    rows = []
    for _, r in calibration.measurements("gemm_sustained").iterrows():
        g = hardware.gpu(r["hardware"])
        model = sustained_gemm_flops(g, "bf16", cal)
        rows.append({"GPU": g.name, "published MSMF (TFLOP/s)": r["value"] / 1e12,
                     "model sustained (TFLOP/s)": model / 1e12, "ratio": model / r["value"],
                     "id": r["id"]})
    return pd.DataFrame(rows)


def published_points() -> pd.DataFrame:
    """:data:`PUBLISHED_POINTS` as a table, with ``ratio`` = after / before."""
    df = pd.DataFrame(PUBLISHED_POINTS)
    return df.assign(ratio=df["after"] / df["before"])


__all__ = ["sustained_gemm_flops", "CappedRate", "capped_gemm_flops", "sustained_table",
           "cap_table", "PUBLISHED_POINTS", "published_points", "msmf_check"]
