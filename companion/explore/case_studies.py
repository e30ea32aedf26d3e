"""Tables, charts and the explorer of the chapter "Case studies".

The numbers come from :mod:`companion.cases` (a scenario's fastest layout, days, energy and
cost), which asks :mod:`companion.search` and :mod:`companion.power`; the seeds' inputs are
the ones the other chapters use (:data:`companion.explore.parallelism.SEED_175B`, the third
seed's electricity price and measured H100 draw in :mod:`companion.claims`). This module
arranges them into frames and charts.
"""
from __future__ import annotations

import functools

import altair as alt
import pandas as pd

from .. import cases, checks, claims, hardware, power
from ..cases import Scenario
from ..model import layout_text
from . import parallelism as px
from .core import Choice, Slider

#: The third seed's 13B run: 300B tokens on 128 GPUs ("在128张H100上训300B tokens"); a batch of
#: 1,024 sequences of 2,048 tokens (2M tokens, GPT-3 13B's batch in Brown et al. 2020,
#: Table 2.1) is this chapter's assumption: the seed names none.
SEED_13B = dict(model="seed-13b", num_gpus=128, tokens=300e9, global_batch=1024)
#: The same seed's 175B comparison, as the parallelism chapter prices it.
SEED_175B = dict(model=px.LAYOUT_MODEL, num_gpus=px.LAYOUT_GPUS, tokens=px.SEED_TOKENS,
                 global_batch=px.LAYOUT_BATCH)
#: GPU and precision of each machine the chapter compares: the seed's two and the
#: like-for-like one.
MACHINES = {"H100, FP8": ("H100", "fp8"), "B200, FP8": ("B200", "fp8"),
            "B200, FP4": ("B200", "fp4")}
#: Seed 000's cluster: 2,000 B200 in 8-GPU x86 nodes, training in BF16, a 13B model. The
#: global batch (2,000 sequences of 2,048 tokens, 4M tokens) is this chapter's assumption.
SEED_2000 = dict(model="seed-13b", gpu="B200", num_gpus=2000, tokens=300e9,
                 global_batch=2000, precision="bf16")
#: Seed 000's fabric, read four ways (bytes/s per GPU per direction, from the link registry):
#: the DGX B200 as shipped (one 400 Gb/s NDR NIC per GPU); one single-port 200 Gb/s NDR link
#: per GPU (the most generous reading of "200Gb/s单口的NDR"); that at half bandwidth everywhere
#: (a bound on its "cross-pod bandwidth only 50% of theory", which the model cannot confine to
#: cross-pod traffic); and two 200 Gb/s HCAs per 8-GPU node, as its NCCL_IB_HCA=mlx5_0,mlx5_1
#: names.
FABRICS = {
    "NDR400 per GPU, as shipped": lambda: hardware.link("NDR").per_direction_Bps,
    "NDR200 per GPU": lambda: hardware.link("NDR200").per_direction_Bps,
    "NDR200 per GPU, at half everywhere": lambda: 0.5 * hardware.link("NDR200").per_direction_Bps,
    "two NDR200 HCAs per node": lambda: 2 * hardware.link("NDR200").per_direction_Bps / 8,
}
PUE = power.PUE_INDUSTRY_AVERAGE


def quote(claim_id: str) -> str:
    """A seed's sentence and its translation as Markdown, from ``data/claims.yaml``."""
    c = claims.claim(claim_id)
    return f"> {c['quote_zh']}\n>\n> *{c['quote_en']}*"


def _scenario(label, gpu, precision, **kw):
    return Scenario(label, gpu=gpu, precision=precision, **kw)


@functools.cache
def outcomes(which: str, seed_power: bool = False) -> tuple:
    """The outcomes of ``"13b"`` or ``"175b"`` on each of :data:`MACHINES`: GPUs at TDP (or
    the seed's measured H100 draw for the H100 when ``seed_power``), hosts at their DGX
    nameplate share, :data:`PUE`, the seed's electricity price."""
    spec = {"13b": SEED_13B, "175b": SEED_175B}[checks.choice("which", which, ("13b", "175b"))]
    out = []
    for label, (gpu, precision) in MACHINES.items():
        gpu_w = claims.SEED_GPU_KW * 1e3 if seed_power and gpu == "H100" else None
        out.append(cases.price(_scenario(label, gpu, precision, **spec), gpu_w=gpu_w, pue=PUE,
                               price_per_kwh=claims.SEED_YUAN_PER_KWH))
    return tuple(out)


def outcome_table(which: str) -> pd.DataFrame:
    """:func:`companion.cases.table` of :func:`outcomes`: days with the step-time band's low
    and high ends (``days_low``, ``days_high``)."""
    t = cases.table(outcomes(which)).set_index("scenario")
    return t.drop(columns=["gpu", "precision", "gpus"]).rename(
        columns={"electricity_cost": "electricity_yuan"})


def by_label(which: str) -> dict:
    """:func:`outcomes` keyed by machine label."""
    return {o.scenario.name: o for o in outcomes(which)}


# -- seed 000: the headline against the step-time model -------------------------------------
@functools.cache
def fabric_outcomes() -> tuple:
    """Seed 000's 13B on 2,000 B200 in BF16 on each of :data:`FABRICS`."""
    out = []
    for label, bw in FABRICS.items():
        c = cases.with_scaleout("DGX B200", bw(), f"DGX B200, {label}")
        out.append(cases.price(Scenario(label, system=c, **SEED_2000), pue=PUE))
    return tuple(out)


def fabric_table() -> pd.DataFrame:
    """Step, MFU, model TFLOP/s per GPU, and the share of the step that is exposed
    communication (TP, pipeline sends, DP) or pipeline bubble, per fabric."""
    rows = []
    for o in fabric_outcomes():
        rows.append({"fabric": o.scenario.name,
                     "scaleout_Gbps_per_gpu": 8 * o.scenario.system.scaleout_Bps / 1e9,
                     "layout": layout_text(o.layout),
                     "step_s": o.step_time_s, "mfu": o.mfu,
                     "tflops_per_gpu": o.model_tflops_per_gpu,
                     "exposed_share": sum(o.breakdown.get(k, 0.0) for k in (
                         "tp_exposed_s", "pp_p2p_s", "dp_exposed_s", "bubble_s"))
                     / o.step_time_s})
    return pd.DataFrame(rows).set_index("fabric")


MODELLED = "step-time model, 13B on 2,000 GPUs, "
BF16_DENSE = "BF16 dense (what the seed trains in)"


def headline_gap() -> pd.DataFrame:
    """From the B200 spec-sheet headline to what seed 000's 13B run sustains per GPU: each
    rung in PFLOP/s and the factor from the headline."""
    b200 = hardware.gpu("B200")
    rows = [("the seed's 20 PFLOP/s: GB200's B200, FP4, sparse",
             hardware.gpu("GB200").peak_flops("fp4", sparse=True)),
            ("HGX/DGX B200 (1000 W), FP4, sparse", b200.peak_flops("fp4", sparse=True)),
            ("FP4 dense", b200.peak_flops("fp4")),
            (BF16_DENSE, b200.peak_flops("bf16"))]
    for o in fabric_outcomes():
        rows.append((f"{MODELLED}{o.scenario.name}", o.model_tflops_per_gpu * 1e12))
    top = rows[0][1]
    return pd.DataFrame([{"rung": r, "pflops": v / 1e15, "factor_from_headline": top / v}
                         for r, v in rows]).set_index("rung")


def headline_chart(frame: pd.DataFrame) -> alt.Chart:
    """Bars of :func:`headline_gap`, the headline on top."""
    data = frame.reset_index()
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y("rung:N", sort=list(data["rung"]), title=None),
        x=alt.X("pflops:Q", title="PFLOP/s per B200"),
        tooltip=["rung", alt.Tooltip("pflops:Q", format=".3g"),
                 alt.Tooltip("factor_from_headline:Q", format=".3g")],
    ).properties(width=420, height=210, title="From 20 PFLOP/s to what a step sustains")


# -- the explorer: your own run ---------------------------------------------------------------
EXPLORER_MODELS = {"13B": "seed-13b", "175B": "seed-175b"}
EXPLORER_GPUS = (64, 128, 256, 512, 1024)
EXPLORER_BATCH = {"seed-13b": 1024, "seed-175b": 2048}
METRICS = {"days": "days", "GPU-hours (thousands)": "gpu_khours",
           "MWh at the meter": "facility_mwh"}
#: the run chart's y field: one column for whichever metric the menu shows, its unit beside it
RUN_Y = "days, thousand GPU-hours or MWh"


@functools.cache
def _run(model, machine, num_gpus):
    gpu, precision = MACHINES[machine]
    s = Scenario(machine, model, gpu, num_gpus, 1e12, EXPLORER_BATCH[model], precision)
    try:
        return cases.price(s, pue=PUE)
    except cases.NoLayoutFits:  # a point the chart leaves out; any other error is a bug
        return None


def run_frame(model: str = "175B", tokens_t: float = 1.0, metric: str = "days") -> pd.DataFrame:
    """Days, thousands of GPU-hours or MWh at the meter (:data:`PUE`) to train ``model`` on
    ``tokens_t`` trillion tokens, per machine and GPU count, at each one's fastest layout.
    Counts where nothing fits are left out."""
    checks.choice("model", model, EXPLORER_MODELS)
    checks.number("tokens_t", tokens_t, positive=True)
    col = METRICS[checks.choice("metric", metric, METRICS)]
    rows = []
    for machine in MACHINES:
        for n in EXPLORER_GPUS:
            o = _run(EXPLORER_MODELS[model], machine, n)
            if o is None:
                continue
            values = {"days": o.days, "gpu_khours": o.gpu_hours / 1e3,
                      "facility_mwh": o.facility_kwh / 1e3}
            rows.append({"machine": machine, "gpus": n, RUN_Y: values[col] * tokens_t,
                         "unit": metric})
    return pd.DataFrame(rows)


RUN_CONTROLS = [Choice("model", tuple(EXPLORER_MODELS), "175B", label="model"),
                Slider("tokens_t", 0.5, 3.0, 0.5, 1.0, label="tokens (trillions)"),
                Choice("metric", tuple(METRICS), "days", label="show")]
RUN_CHART = dict(x="gpus:Q", y=f"{RUN_Y}:Q", color="machine:N", mark="line", x_scale="log",
                 y_scale="log", tooltip=["machine", "gpus", alt.Tooltip(f"{RUN_Y}:Q", format=".3g"),
                                         "unit"],
                 title="Training a dense model: the fastest layout at each GPU count")

__all__ = ["MODELLED", "BF16_DENSE", "SEED_13B", "SEED_175B", "SEED_2000", "MACHINES", "FABRICS", "PUE", "quote",
           "outcomes", "outcome_table", "by_label", "fabric_outcomes", "fabric_table",
           "headline_gap", "headline_chart", "run_frame", "RUN_CONTROLS", "RUN_CHART", "RUN_Y"]
