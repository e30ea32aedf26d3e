"""Frames and charts of the chapter "Software pitfalls, failures and checkpoints".

The numbers come from :mod:`companion.reliability` (Young/Daly intervals, goodput) and
:mod:`companion.stack` (findings); this module only arranges them for
:func:`companion.explore.core.static` / :func:`companion.explore.core.live` and altair.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .. import checks, reliability
from .core import Choice

#: Cluster sizes of the checkpoint explorer (GPUs).
CLUSTER_SIZES = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
#: Per-GPU mean time between job-stopping failures, thousands of hours. Llama 3's 54-day
#: snapshot works out to about 51 (see :data:`companion.reliability.LLAMA3_405B`).
GPU_MTBF_KH = (25, 50, 100, 200)
#: The explorer's menus: cluster sizes, checkpoint stall (s) and restart time (min).
EXPLORER_SIZES = (1024, 4096, 16384, 65536)
CHECKPOINT_S = (10, 60, 300)
RESTART_MIN = (2, 10, 30)


def checkpoint_curves(num_gpus: int = 16384, gpu_mtbf_kh: float = 50, checkpoint_s: float = 60,
                      restart_min: float = 10, points: int = 16) -> pd.DataFrame:
    """Goodput against the checkpoint interval (Daly's model and the first-order estimate).

    Intervals are log-spaced from a tenth to ten times Young's optimum; first-order values
    below zero (outside its validity) are dropped.
    """
    checks.number("points", points, integer=True, minimum=2, maximum=200)
    m = reliability.job_mtbf_s(checks.number("gpu_mtbf_kh", gpu_mtbf_kh, positive=True) * 1e3
                               * reliability.HOUR_S, num_gpus)
    r = checks.number("restart_min", restart_min, nonnegative=True) * 60.0
    young = reliability.young_interval_s(checkpoint_s, m)
    taus = np.geomspace(young / 10, young * 10, points)
    rows = []
    for tau in taus:
        rows.append({"interval (min)": round(tau / 60, 4), "model": "Daly (exact)",
                     "goodput": round(reliability.goodput(tau, checkpoint_s, r, m), 5)})
        try:
            g1 = reliability.goodput_first_order(tau, checkpoint_s, r, m)
        except ValueError:  # negative: outside the estimate's validity
            continue
        rows.append({"interval (min)": round(tau / 60, 4), "model": "first order",
                     "goodput": round(g1, 5)})
    return pd.DataFrame(rows)


def checkpoint_controls():
    """4 cluster sizes x 4 GPU MTBFs x 3 checkpoint times x 3 restart times = 144 frames."""
    return [Choice("num_gpus", EXPLORER_SIZES, 16384, label="GPUs"),
            Choice("gpu_mtbf_kh", GPU_MTBF_KH, 50, label="GPU MTBF (kh)"),
            Choice("checkpoint_s", CHECKPOINT_S, 60, label="checkpoint (s)"),
            Choice("restart_min", RESTART_MIN, 10, label="restart (min)")]


#: Keyword arguments shared by the explorer's static and live charts.
CHECKPOINT_CHART = dict(x="interval (min):Q", y="goodput:Q", color="model:N", mark="line",
                        x_scale="log", tooltip=["model", "interval (min)", "goodput"],
                        width=460, height=260,
                        title="Goodput against the checkpoint interval")


def scale_table(checkpoint_s=(10, 60, 300), restart_s: float = 600, gpu_mtbf_kh: float = 50,
                sizes=CLUSTER_SIZES) -> pd.DataFrame:
    """Job MTBF, Daly's interval and the goodput it achieves, per cluster size and checkpoint
    stall (long form)."""
    gpu_mtbf_kh = checks.number("gpu_mtbf_kh", gpu_mtbf_kh, positive=True)
    rows = []
    for n in sizes:
        for d in checkpoint_s:
            p = reliability.plan(d, restart_s, num_gpus=n,
                                 per_gpu_mtbf_s=gpu_mtbf_kh * 1e3 * reliability.HOUR_S)
            rows.append({"GPUs": n, "checkpoint (s)": d, "job MTBF (h)": p.mtbf_s / 3600,
                         "Daly interval (min)": p.daly_s / 60, "goodput": p.goodput_daly})
    return pd.DataFrame(rows)


def scale_chart(table: pd.DataFrame) -> alt.Chart:
    """Goodput at Daly's interval against cluster size, one line per checkpoint stall."""
    return alt.Chart(table).mark_line(point=True).encode(
        x=alt.X("GPUs:Q", scale=alt.Scale(type="log", base=2)),
        y=alt.Y("goodput:Q", scale=alt.Scale(zero=False)),
        color="checkpoint (s):N",
        tooltip=["GPUs", "checkpoint (s)", "job MTBF (h)", "Daly interval (min)", "goodput"],
    ).properties(width=460, height=260, title="Goodput at the optimal interval, by cluster size")


def simulation_table(work_h: float = 240, interval_s: float = 3600, checkpoint_s: float = 60,
                     restart_s: float = 600, mtbf_h=(1, 3, 12), runs: int = 400,
                     seed: int = 0) -> pd.DataFrame:
    """Seeded Monte Carlo wall time against Daly's expectation, per job MTBF."""
    work_h = checks.number("work_h", work_h, positive=True)
    rows = []
    for h in mtbf_h:
        m = h * reliability.HOUR_S
        sim = reliability.simulate_wall_s(work_h * 3600, interval_s, checkpoint_s, restart_s, m,
                                          runs=runs, seed=seed)
        model = reliability.expected_wall_s(work_h * 3600, interval_s, checkpoint_s,
                                            restart_s, m)
        rows.append({"job MTBF (h)": h, "simulated mean wall (h)": sim.mean() / 3600,
                     "std. error (h)": sim.std(ddof=1) / np.sqrt(runs) / 3600,
                     "Daly model (h)": model / 3600,
                     "simulated goodput": work_h * 3600 / sim.mean()})
    return pd.DataFrame(rows).set_index("job MTBF (h)")


__all__ = ["CLUSTER_SIZES", "EXPLORER_SIZES", "GPU_MTBF_KH", "CHECKPOINT_S", "RESTART_MIN", "checkpoint_curves",
           "checkpoint_controls", "CHECKPOINT_CHART", "scale_table", "scale_chart",
           "simulation_table"]
