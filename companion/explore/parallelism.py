"""Tables, charts and explorers of the chapter "Megatron's arithmetic at 2026 scale".

Every step time here is :func:`companion.parallel.estimate` or
:func:`companion.search.search` (one code path); every verdict is
:func:`companion.claims.evaluate`. This module only picks the cases, lays the results out as
long-form DataFrames and draws the fixed charts.
"""
from __future__ import annotations

import functools

import altair as alt
import pandas as pd

from .. import checks, claims
from ..model import Layout, layout_text
from ..parallel import estimate, validate
from ..validation import band, cross_validation
from ..search import search
from .core import Choice

CHAPTER = "parallelism"
DAY_S = 86400.0

#: The parts of :meth:`companion.parallel.Estimate.breakdown`, with reader-facing names.
PARTS = {"gemm_s": "GEMMs", "attention_s": "Attention core", "elementwise_s": "Elementwise",
         "recompute_s": "Recomputation", "launch_s": "Kernel gaps",
         "moe_sync_s": "MoE dispatcher host sync",
         "overlap_host_s": "EP overlap, host floor",
         "overlap_slowdown_s": "Overlap slowdown", "tp_exposed_s": "TP/SP comm, exposed",
         "cp_exposed_s": "CP comm, exposed", "ep_exposed_s": "EP all-to-all, exposed",
         "pp_p2p_s": "PP sends", "bubble_s": "PP bubble", "dp_exposed_s": "DP reduce, exposed",
         "optimizer_s": "Optimizer"}
TOTAL = "= step time"
#: Communication time of a step, hidden or not (``*_comm_s``) and exposed (the breakdown's).
COMM_TOTAL = ("tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_p2p_s", "dp_comm_s")
COMM_EXPOSED = ("tp_exposed_s", "cp_exposed_s", "ep_exposed_s", "pp_p2p_s", "dp_exposed_s")


def breakdown(e) -> pd.DataFrame:
    """The parts of one estimate's step, seconds and share of the step (zero parts dropped)."""
    rows = [{"part": PARTS[k], "seconds": v, "share_pct": 100 * v / e.step_time_s}
            for k, v in e.breakdown().items() if v > 0]
    return pd.DataFrame(rows).set_index("part")


def comm_share(e, exposed: bool = True) -> float:
    """Communication as a fraction of the step: the exposed parts, or every collective's full
    time (``exposed=False``, what a profiler shows on the communication stream)."""
    keys = COMM_EXPOSED if exposed else COMM_TOTAL
    return float(sum(getattr(e, k) for k in keys) / e.step_time_s)


# -- the pipeline bubble -------------------------------------------------------------------------
BUBBLE_MODEL = "gpt3-175b"
BUBBLE_MICROBATCHES = (1, 2, 4, 8, 16, 32, 64)
BUBBLE_VPP = (1, 2, 3)


@functools.lru_cache(maxsize=64)
def bubble_frame(pp: int = 8, model: str = BUBBLE_MODEL, gpu: str = "H100") -> pd.DataFrame:
    """Pipeline bubble of ``model`` with TP 8 and ``pp`` stages, one pipeline (DP 1), per
    number of microbatches m and virtual stages v: the bubble over the steady-state time
    (the model applies (p - 1)/(m v)) and the bubble's share of the whole step. Interleaved
    schedules (v > 1) are drawn for m >= p only, where they are used."""
    if pp not in (2, 4, 8, 16):
        raise ValueError(f"pp must be one of 2, 4, 8, 16 (they divide the 96 layers with v up to "
                         f"3); got {pp!r}")
    rows = []
    for v in BUBBLE_VPP:
        for m in BUBBLE_MICROBATCHES:
            if v > 1 and m < pp:
                continue
            lay = Layout(tp=8, pp=pp, dp=1, vpp=v, microbatch=1, global_batch=m,
                         sequence_parallel=True, recompute="selective")
            e = estimate(model, lay, gpu)
            steady = (e.step_time_s - e.bubble_s - e.pp_p2p_s - e.dp_exposed_s
                      - e.optimizer_s)
            rows.append({"microbatches": m, "schedule": f"v = {v}",
                         "bubble_over_steady": e.bubble_s / steady,
                         "bubble_share_pct": 100 * e.bubble_s / e.step_time_s,
                         "step_time_s": e.step_time_s})
    return pd.DataFrame(rows)


BUBBLE_CONTROLS = [Choice("pp", (2, 4, 8, 16), 8, label="pipeline stages p")]
BUBBLE_CHART = dict(x="microbatches:Q", y="bubble_share_pct:Q", color="schedule:N",
                    mark="line", x_scale="log",
                    title="Share of the step lost to the pipeline bubble (%)",
                    tooltip=["microbatches", "schedule", "bubble_share_pct", "step_time_s"])


# -- the layout explorer -------------------------------------------------------------------------
#: The seeds' 175B case (seed 003): sequence 2048, global batch 2048, 256 GPUs.
LAYOUT_MODEL, LAYOUT_GPUS, LAYOUT_BATCH = "seed-175b", 256, 2048
#: Menu label -> (GPU, GEMM precision).
MACHINES = {"H100 BF16": ("H100", "bf16"), "H100 FP8": ("H100", "fp8"),
            "B200 FP8": ("B200", "fp8"), "B200 FP4": ("B200", "fp4")}
FITS = ("fits", "does not fit")


@functools.lru_cache(maxsize=8)
def _layouts(machine: str) -> pd.DataFrame:
    # One vectorised search prices every layout of the menu at once (the same code path as
    # estimate(), see tests/test_search.py); the explorer then only looks rows up.
    gpu, precision = MACHINES[checks.choice("machine", machine, MACHINES)]
    f = search(LAYOUT_MODEL, gpu, LAYOUT_GPUS, LAYOUT_BATCH, precision=precision, zero=(0, 1),
               max_microbatch=4, include_infeasible=True)
    keep = ((f["vpp"] == 1) & (f["cp"] == 1) & (f["sequence_parallel"] == (f["tp"] > 1))
            & (f["zero"] == (f["dp"] > 1)))
    return f[keep].set_index(["tp", "pp", "microbatch", "recompute"]).sort_index()


def layout_frame(machine: str = "H100 FP8", tp: int = 8, pp: int = 4, microbatch: int = 1,
                 recompute: str = "selective") -> pd.DataFrame:
    """Step-time breakdown of the seeds' 175B on 256 GPUs for one layout: one row per part
    (seconds), plus the step total; DP = 256 / (TP x PP), sequence parallel when TP > 1,
    Megatron's distributed optimizer (when DP > 1), no interleaving. Rows come from
    :func:`companion.search.search`, so they equal :func:`companion.parallel.estimate`."""
    table = _layouts(machine)
    key = (tp, pp, microbatch, recompute)
    if key not in table.index:
        raise ValueError(f"no layout tp={tp}, pp={pp}, microbatch={microbatch}, "
                         f"recompute={recompute!r} of {LAYOUT_MODEL} on {LAYOUT_GPUS} GPUs")
    r = table.loc[key]
    # A dense model has no CP or EP here: those parts are left out, and values are rounded,
    # to keep the static chart's embedded grid light.
    parts = [(PARTS[k], float(r[k])) for k in PARTS if k not in ("cp_exposed_s", "ep_exposed_s")]
    parts.append((TOTAL, float(r["step_time_s"])))
    return pd.DataFrame({"part": [p for p, _ in parts],
                         "seconds": [float(f"{v:.4g}") for _, v in parts],
                         "dp": int(r["dp"]), "mfu_pct": round(100 * float(r["mfu"]), 1),
                         "memory_gb": round(float(r["memory_gb"]), 1),
                         "memory": FITS[0] if bool(r["fits"]) else FITS[1]})


LAYOUT_CONTROLS = [Choice("machine", tuple(MACHINES), "H100 FP8", label="GPU and precision"),
                   Choice("tp", (1, 2, 4, 8, 16, 32), 8, label="TP"),
                   Choice("pp", (1, 2, 4, 8), 4, label="PP"),
                   Choice("microbatch", (1, 4), 1, label="microbatch"),
                   Choice("recompute", ("none", "selective", "full"), "selective")]
LAYOUT_CHART = dict(
    x="seconds:Q", y="part:N",
    color=alt.Color("memory:N", scale=alt.Scale(domain=list(FITS),
                                                range=["#4c78a8", "#e45756"])),
    mark="bar", title="Seeds' 175B on 256 GPUs, global batch 2048: one step (s)",
    tooltip=["part", "seconds", "dp", "mfu_pct", "memory_gb"])


# -- why TP stays inside the NVLink domain ---------------------------------------------------------
DOMAIN_SYSTEMS = {"8-GPU DGX B200 nodes": "DGX B200", "72-GPU GB200 NVL72 racks": "GB200 NVL72"}
DOMAIN_TP = (1, 2, 4, 8, 16, 32)


@functools.lru_cache(maxsize=8)
def tp_domain_frame(software: str = "megatron-core", model: str = "gpt3-175b",
                    gpu: str = "B200", num_gpus: int = 512, pp: int = 8,
                    global_batch: int = 1024) -> pd.DataFrame:
    """Step time of ``model`` on ``num_gpus`` ``gpu`` s against TP, in 8-GPU nodes and in
    NVL72 racks (the same GPU in both, so only the NVLink domain differs); PP fixed, DP the
    rest, sequence parallel, selective recomputation, distributed optimizer."""
    rows = []
    for label, system in DOMAIN_SYSTEMS.items():
        for tp in DOMAIN_TP:
            lay = Layout(tp=tp, pp=pp, dp=num_gpus // (tp * pp), microbatch=1,
                         global_batch=global_batch, sequence_parallel=tp > 1,
                         recompute="selective", distributed_optimizer=True)
            e = estimate(model, lay, gpu, system=system, software=software)
            rows.append({"tp": tp, "system": label, "step_time_s": e.step_time_s,
                         "tp_comm_s": e.tp_comm_s, "tp_exposed_s": e.tp_exposed_s,
                         "mfu_pct": 100 * e.mfu, "fits": e.fits})
    return pd.DataFrame(rows)


DOMAIN_CONTROLS = [Choice("software", ("megatron-core", "megatron-2022"), "megatron-core",
                          label="software")]
DOMAIN_CHART = dict(x="tp:Q", y="step_time_s:Q", color="system:N", mark="line", x_scale="log",
                    title="GPT-3 175B on 512 B200: step time (s) against TP",
                    tooltip=["tp", "system", "step_time_s", "tp_comm_s", "tp_exposed_s",
                             "mfu_pct", "fits"])


# -- predicted against measured --------------------------------------------------------------------
def validation_frame(held_out: bool = False) -> pd.DataFrame:
    """:func:`companion.parallel.validate`, one row per published dense run (the fitting
    and check tables, or the held-out runs), with a ``source`` label: the paper's table, or
    for the held-out runs the software release."""
    v = validate(held_out=held_out)
    if held_out:  # "Megatron-Bridge 25.11 DGX-B200" -> "Megatron-Bridge 25.11 (held out)"
        return v.assign(source=v["table"].str.rsplit(" ", n=1).str[0] + " (held out)")
    return v.assign(source=v["table"].map({"Table 5": "Korthikanti et al. 2022, Table 5",
                                           "Table 1": "Narayanan et al. 2021, Table 1"}))


def error_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean absolute and worst absolute error (%) per source table."""
    err = frame.assign(abs_error_pct=frame["error_pct"].abs())
    return err.groupby("source", sort=False)["abs_error_pct"].agg(
        runs="count", mean_abs_error_pct="mean", worst_abs_error_pct="max")


def validation_chart(frame: pd.DataFrame):
    """Predicted against measured step time, log-log, with the line y = x."""
    lo, hi = 0.8 * frame["measured_step_time_s"].min(), 1.2 * frame["measured_step_time_s"].max()
    line = alt.Chart(pd.DataFrame({"x": [lo, hi], "y": [lo, hi]})).mark_line(
        color="gray", strokeDash=[4, 4]).encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log")), y=alt.Y("y:Q", scale=alt.Scale(type="log")))
    data = frame[["run_id", "source", "measured_step_time_s", "predicted_step_time_s",
                  "error_pct"]].round(3)
    pts = alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=alt.X("measured_step_time_s:Q", scale=alt.Scale(type="log"),
                title="measured step time (s, published)"),
        y=alt.Y("predicted_step_time_s:Q", scale=alt.Scale(type="log"),
                title="predicted step time (s)"),
        color=alt.Color("source:N", legend=alt.Legend(orient="bottom")),
        tooltip=["run_id", "measured_step_time_s", "predicted_step_time_s", "error_pct"])
    return (line + pts).properties(width=420, height=380,
                                   title="Predicted against measured, published dense runs")


# -- search ---------------------------------------------------------------------------------------
SEARCH_COLUMNS = {"tp": "TP", "pp": "PP", "dp": "DP", "cp": "CP", "ep": "EP", "vpp": "VPP",
                  "microbatch": "mb", "sequence_parallel": "SP", "recompute": "recompute",
                  "zero": "ZeRO", "step_time_s": "step (s)", "step_time_low_s": "low (s)",
                  "step_time_high_s": "high (s)", "mfu": "MFU",
                  "memory_gb": "memory (GB)", "gemm_s": "GEMMs", "tp_exposed_s": "TP exposed",
                  "bubble_s": "bubble", "dp_exposed_s": "DP exposed", "ep_exposed_s": "EP exposed"}


def search_table(frame: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """The first ``top`` rows of a :func:`companion.search.search` frame, the columns the
    chapter discusses, rounded for reading."""
    return frame.head(top)[list(SEARCH_COLUMNS)].rename(columns=SEARCH_COLUMNS).round(3)


# -- the seeds -------------------------------------------------------------------------------------
#: Seed 003's 175B comparison: label -> (GPU, precision); 256 GPUs, sequence 2048, batch 2048.
SEED_175B = {"256 H100, FP8 (seed)": ("H100", "fp8"), "256 B200, FP4 (seed)": ("B200", "fp4"),
             "256 B200, FP8": ("B200", "fp8")}
SEED_TOKENS = 1.0e12  # "训练至1.0T tokens"


@functools.lru_cache(maxsize=8)
def best_layout(model: str, gpu: str, num_gpus: int, global_batch: int, precision: str,
                system=None):
    """The fastest layout the search finds that fits, as a one-row frame."""
    return search(model, gpu, num_gpus, global_batch, precision=precision, system=system,
                  top=1)


def seed_175b_table() -> pd.DataFrame:
    """The seeds' 175B on 256 H100 (FP8) and 256 B200 (FP4, and FP8 for a like-for-like
    comparison): the best layout each, its step time, MFU and days to 1.0T tokens."""
    rows = []
    for label, (gpu, precision) in SEED_175B.items():
        r = best_layout(LAYOUT_MODEL, gpu, LAYOUT_GPUS, LAYOUT_BATCH, precision).iloc[0]
        rows.append({"machine": label, "TP": r.tp, "PP": r.pp, "DP": r.dp, "VPP": r.vpp,
                     "mb": r.microbatch, "recompute": r.recompute,
                     "step_time_s": r.step_time_s, "mfu_pct": 100 * r.mfu,
                     "days_to_1T_tokens": SEED_TOKENS / r.tokens_per_s / DAY_S})
    return pd.DataFrame(rows).set_index("machine")


def seed_claims() -> pd.DataFrame:
    """Every parallelism claim of ``data/claims.yaml``: the seed's words (Chinese and
    English), the verdict :func:`companion.claims.evaluate` computes and the catalogue's."""
    rows = []
    for c in claims.load():
        if c["chapter"] != CHAPTER:
            continue
        check = claims.evaluate(c["id"])
        rows.append({"id": c["id"], "quote_zh": c["quote_zh"], "quote_en": c["quote_en"],
                     "verdict": check.verdict, "catalogue_verdict": c["expected_verdict"],
                     "checked": check.computed is not None})
    return pd.DataFrame(rows).set_index("id")


def band_frame() -> pd.DataFrame:
    """Every published run with the model's prediction and the band it would print
    (:func:`companion.validation.band` for the run's GPU, precision and family), from
    :func:`companion.validation.cross_validation`."""
    cv = cross_validation()
    lo, hi = zip(*(band(g, p, s, moe=m == "MoE")[:2] for g, p, s, m in zip(
        cv["gpu"], cv["precision"], cv["predicted_step_time_s"], cv["moe"])))
    return cv.assign(predicted_low_s=lo, predicted_high_s=hi)


def band_chart(frame: pd.DataFrame):
    """Predicted against measured step time, log-log, each prediction with its band (a
    vertical bar: a run inside its band crosses the y = x line), coloured by GPU generation."""
    lo = 0.7 * frame[["measured_step_time_s", "predicted_low_s"]].min().min()
    hi = 1.3 * frame[["measured_step_time_s", "predicted_high_s"]].max().max()
    log = alt.Scale(type="log")
    line = alt.Chart(pd.DataFrame({"x": [lo, hi], "y": [lo, hi]})).mark_line(
        color="gray", strokeDash=[4, 4]).encode(x=alt.X("x:Q", scale=log),
                                                y=alt.Y("y:Q", scale=log))
    data = frame[["run_id", "generation", "precision", "role", "measured_step_time_s",
                  "predicted_step_time_s", "predicted_low_s", "predicted_high_s",
                  "error_pct"]].round(3)
    base = alt.Chart(data).encode(
        x=alt.X("measured_step_time_s:Q", scale=log, title="measured step time (s, published)"),
        color=alt.Color("generation:N", legend=alt.Legend(orient="bottom")))
    bars = base.mark_rule(opacity=0.5).encode(
        y=alt.Y("predicted_low_s:Q", scale=log, title="predicted step time and band (s)"),
        y2="predicted_high_s:Q")
    pts = base.mark_point(filled=True, size=50).encode(
        y=alt.Y("predicted_step_time_s:Q", scale=log), shape="role:N",
        tooltip=["run_id", "precision", "measured_step_time_s", "predicted_step_time_s",
                 "predicted_low_s", "predicted_high_s", "error_pct"])
    return (line + bars + pts).properties(
        width=460, height=400, title="Every published run: prediction, band and measurement")


__all__ = ["band_frame", "band_chart", "PARTS", "breakdown", "comm_share", "layout_text", "bubble_frame", "BUBBLE_CONTROLS",
           "BUBBLE_CHART", "MACHINES", "layout_frame", "LAYOUT_CONTROLS", "LAYOUT_CHART",
           "tp_domain_frame", "DOMAIN_CONTROLS", "DOMAIN_CHART", "validation_frame",
           "error_summary", "validation_chart", "search_table", "best_layout",
           "seed_175b_table", "seed_claims"]
