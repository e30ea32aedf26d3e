"""Tables, charts and explorers of the chapter "Power, energy and cost".

The numbers come from :mod:`companion.power` (energy = power x time, PUE, cost, the power-cap
model) and :mod:`companion.hardware` (TDP, peaks, system power); this module arranges them
into frames and charts. The seeds' inputs are kept in :data:`SEED` with the sentence each
comes from, and :func:`seed_claims` shows every power claim of ``data/claims.yaml`` with the
verdict :func:`companion.claims.evaluate` computes.
"""
from __future__ import annotations

import functools

import altair as alt
import pandas as pd

from .. import checks, claims, hardware, power, units
from .hardware import label

CLAIMS_PATH = claims.CLAIMS_PATH

#: Model sizes and token counts the training-run explorer offers (dense models, 6ND).
MODEL_SIZES = {"13B": 13e9, "70B": 70e9, "175B": 175e9, "405B": 405e9}
TOKEN_COUNTS = {"0.3T": 0.3e12, "1T": 1e12, "15T": 15e12}

#: GPU -> the registry system whose nameplate maximum gives its host share.
GPU_SYSTEMS = {"H100": "DGX H100", "H200": "DGX H200", "B200": "DGX B200",
               "GB200": "GB200 NVL72", "B300": "DGX B300"}

#: GPUs of the FLOP/s-per-watt comparison, oldest first.
EFFICIENCY_GPUS = ("V100", "A100", "H100", "B200", "GB200", "B300", "GB300", "MI300X", "MI355X")


@functools.cache
def _gpu(name):
    return hardware.gpu(name)


@functools.cache
def _system(name):
    return power.system_power(name)


# -- FLOP/s per watt -----------------------------------------------------------------------
def efficiency_table(names=EFFICIENCY_GPUS, precisions=("bf16", "fp8", "fp4")):
    """Dense peak TFLOP/s per kW of TDP, one row per GPU and precision it has (long form)."""
    rows = []
    for name in names:
        g = _gpu(name)
        for p in precisions:
            p_used = "fp16" if p == "bf16" and "bf16" not in g.precisions() else p
            if p_used not in g.precisions():
                continue  # no FP8 on A100, no FP4 on Hopper: no bar, not a zero
            rows.append({"gpu": label(name), "precision": p, "tdp_w": g.tdp_w,
                         "dense_tflops": units.to_tflops(g.peak_flops(p_used)),
                         "tflops_per_kw": g.flops_per_watt(p_used) / units.TERA * 1e3})
    return pd.DataFrame(rows)


def efficiency_chart(frame):
    """Grouped bars of :func:`efficiency_table`."""
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("gpu:N", title=None, sort=list(dict.fromkeys(frame["gpu"]))),
        xOffset=alt.XOffset("precision:N", sort=["bf16", "fp8", "fp4"]),
        y=alt.Y("tflops_per_kw:Q", title="dense TFLOP/s per kW of TDP"),
        color=alt.Color("precision:N", sort=["bf16", "fp8", "fp4"]),
        tooltip=["gpu", "precision", "tdp_w", alt.Tooltip("dense_tflops:Q", format=".0f"),
                 alt.Tooltip("tflops_per_kw:Q", format=".0f")],
    ).properties(width=520, height=260, title="Peak work per joule: dense FLOP/s per watt")


# -- training run explorer -----------------------------------------------------------------
def _sig(x, digits=4):
    # Four significant digits: the static chart embeds every grid point, so shorter numbers
    # keep the page light; no reader needs a fifth digit of a projected energy bill.
    return float(f"{x:.{digits}g}")


def run_frame(model="70B", tokens="1T", num_gpus=1024, precision="bf16", mfu=0.4, pue=1.3,
              price_per_kwh=0.1):
    """The training-run explorer's model: one row per GPU that has ``precision``.

    Each GPU draws its TDP plus its share of the host from the registry system's nameplate
    maximum (:data:`GPU_SYSTEMS`), an upper bound; ``pue`` multiplies at the meter.
    """
    checks.choice("model", model, list(MODEL_SIZES))
    checks.choice("tokens", tokens, list(TOKEN_COUNTS))
    rows = []
    for name, system in GPU_SYSTEMS.items():
        g = _gpu(name)
        if precision not in g.precisions():
            continue
        run = power.training_run(MODEL_SIZES[model], TOKEN_COUNTS[tokens], g, num_gpus,
                                 mfu=mfu, precision=precision, pue=pue,
                                 host_w_per_gpu=_system(system).rest_per_gpu_w,
                                 price_per_kwh=price_per_kwh)
        rows.append({"gpu": label(name), "days": _sig(run.days), "mwh": _sig(run.mwh),
                     "electricity_cost": _sig(run.electricity_cost),
                     "gpu_hours": _sig(run.gpu_hours),
                     "kw_per_gpu_at_meter": _sig(run.facility_w / num_gpus / 1e3)})
    return pd.DataFrame(rows, columns=["gpu", "days", "mwh", "electricity_cost", "gpu_hours",
                                       "kw_per_gpu_at_meter"])


#: Chart column names in words with units (the model functions keep short names for code).
CHART_LABELS = {"gpu": "GPU", "days": "training time (days)", "mwh": "energy at the meter (MWh)",
                "electricity_cost": "electricity cost", "gpu_hours": "GPU-hours",
                "kw_per_gpu_at_meter": "kW per GPU at the meter", "cap_w": "power cap (W)",
                "fraction": "fraction of the uncapped value"}


def run_chart_frame(**kwargs):
    """:func:`run_frame` with chart labels for its columns (the explorer's function)."""
    return run_frame(**kwargs).rename(columns=CHART_LABELS)


def cap_chart_frame(**kwargs):
    """:func:`cap_frame` with chart labels for its columns (the explorer's function)."""
    return cap_frame(**kwargs).rename(columns=CHART_LABELS)


def _t(col, fmt):
    return alt.Tooltip(f"{CHART_LABELS[col]}:Q", format=fmt)


RUN_TOOLTIP = [CHART_LABELS["gpu"], _t("days", ".3g"), _t("mwh", ".4g"),
               _t("electricity_cost", ",.0f"), _t("gpu_hours", ",.0f"),
               _t("kw_per_gpu_at_meter", ".2f")]
RUN_CHART = dict(x=f"{CHART_LABELS['days']}:Q", y=f"{CHART_LABELS['mwh']}:Q",
                 color=f"{CHART_LABELS['gpu']}:N", mark="point", tooltip=RUN_TOOLTIP,
                 title="Days against MWh at the meter, one point per GPU")
CAP_CHART = dict(x=f"{CHART_LABELS['cap_w']}:Q", y=f"{CHART_LABELS['fraction']}:Q",
                 color="quantity:N", mark="line",
                 tooltip=[CHART_LABELS["cap_w"], "quantity", CHART_LABELS["fraction"]],
                 title="Throughput and energy per unit of work against the power cap")


# -- power cap explorer --------------------------------------------------------------------
CAP_GPUS = ("H100", "B200", "GB200")
CAP_FRACTIONS = tuple(round(0.45 + 0.05 * i, 2) for i in range(12))  # 45% .. 100% of TDP


def cap_frame(gpu="H100", floor_pct=30, exponent=2, clock_bound_pct=80):
    """Throughput and energy per unit of work against the power cap (long form)."""
    g = _gpu(gpu)
    floor_pct = checks.number("floor_pct", floor_pct, minimum=0, maximum=100)
    clock_bound_pct = checks.number("clock_bound_pct", clock_bound_pct, minimum=0, maximum=100)
    rows = []
    for f in CAP_FRACTIONS:
        c = power.power_cap(f * g.tdp_w, g.tdp_w, floor_w=floor_pct / 100 * g.tdp_w,
                            exponent=exponent, clock_bound_share=clock_bound_pct / 100)
        rows.append({"cap_w": c.cap_w, "quantity": "throughput", "fraction": c.throughput_fraction})
        rows.append({"cap_w": c.cap_w, "quantity": "energy per unit of work",
                     "fraction": c.energy_fraction})
    return pd.DataFrame(rows)


# -- racks ---------------------------------------------------------------------------------
RACK_SYSTEMS = ("DGX H100", "DGX B200", "DGX B300", "GB200 NVL72")


def rack_table(names=RACK_SYSTEMS):
    """Per system: GPUs at TDP, the rest of the nameplate maximum, cooling (kW)."""
    rows = []
    for name in names:
        s = _system(name)
        rows.append({"system": s.name, "gpus": s.gpu_count, "gpu_tdp_w": s.gpu_tdp_w,
                     "gpus_kw": s.gpus_w / 1e3, "rest_kw": s.rest_w / 1e3, "max_kw": s.max_w / 1e3,
                     "rest_per_gpu_w": s.rest_per_gpu_w, "gpu_share": s.gpu_share,
                     "cooling": s.cooling})
    return pd.DataFrame(rows)


def rack_chart(frame):
    """Stacked bars: GPU TDP and everything else, per system."""
    long = frame.melt(id_vars=["system"], value_vars=["gpus_kw", "rest_kw"], var_name="part",
                      value_name="kw").replace({"gpus_kw": "GPUs at TDP",
                                                "rest_kw": "CPUs, NICs, switches, fans"})
    return alt.Chart(long).mark_bar().encode(
        y=alt.Y("system:N", sort=list(frame["system"]), title=None),
        x=alt.X("kw:Q", stack=True, title="nameplate maximum power (kW)"),
        color=alt.Color("part:N", title=None),
        tooltip=["system", "part", alt.Tooltip("kw:Q", format=".1f")],
    ).properties(width=460, height=150, title="Where a node's or rack's power goes")


def pue_table(system="GB200 NVL72"):
    """``system`` at its nameplate maximum behind each sourced PUE level: a measured
    liquid-cooled hall, the liquid-cooled typical band and the industry average (kW at the
    meter)."""
    it_w = _system(system).max_w
    levels = [("liquid-cooled, measured (NREL ESIF)", power.PUE_LIQUID_MEASURED),
              ("liquid-cooled, typical low", power.PUE_LIQUID_TYPICAL_RANGE[0]),
              ("liquid-cooled, typical high", power.PUE_LIQUID_TYPICAL_RANGE[1]),
              ("industry average (Uptime 2023)", power.PUE_INDUSTRY_AVERAGE)]
    return pd.DataFrame([{"hall": k, "PUE": v, "meter_kw": power.facility_w(it_w, v) / 1e3}
                         for k, v in levels])


def nvl72_power_range_kw():
    """The GB200 NVL72's sourced power range (kW) and its 72 GPUs at TDP (kW)."""
    lo, hi = power.GB200_NVL72_RACK_W_RANGE
    return lo / 1e3, hi / 1e3, _system("GB200 NVL72").gpus_w / 1e3


# -- the seeds' claims ---------------------------------------------------------------------
#: The seeds' inputs, each with its sentence (seed 003 unless marked 000).
SEED = {
    "h100_fp8_tflops": 1980.0,      # "H100的FP8稠密算力是1.98 PFLOPS"
    "b200_fp4_tflops": 10000.0,     # "B200的FP4稠密算力可达10 PFLOPS"
    "h100_w": 700.0, "b200_w": 1000.0,
    "h100_tflops_per_w": 2.83,      # "每瓦提供约2.83 TFLOPS"
    "b200_tflops_per_w": 10.0,      # "每瓦提供10 TFLOPS"
    "cluster_pflops_before": 38.4, "cluster_pflops_after": 74.2,
    "claimed_saving": 0.60,         # "总功耗可以下降超过60%"
    "h100_gpu_hours": 3800.0, "h100_avg_kw": 0.69,   # "约3800 GPU小时 ... 0.69千瓦"
    "b200_gpu_hours": 1200.0, "b200_avg_kw": 1.0,    # "1200 GPU小时 ... 1千瓦"
    "claimed_54": 0.54,
    "params_13b": 13e9, "tokens_13b": 300e9, "gpus_13b": 128, "days_13b": 3.5,
    "yuan_13b": 4000.0, "yuan_per_kwh": 0.8, "node_kw": 8.5,
    "time_ratio_175b": 0.5, "claimed_41": 0.41,
    "server_kw": 5.6,               # "8卡H100服务器满载 ... 5.6千瓦"
    "nvl72_kw": 60.0, "reserve_kw": 80.0,
    "dgx_b200_kw": 10.0,            # seed 000: "峰值功耗轻松突破10kW"
}


def _pct(x):
    return f"{100 * x:.0f}%"


def _check_rows():
    """Per claim id: (seed says, model says), the chapter's own wording of each comparison.

    The verdicts come from :func:`companion.claims.evaluate`; these two texts stay here
    because the chapter states the comparisons with :mod:`companion.power`'s functions and
    figures (the measured H100 node power, the energy ratios), which the catalogue's
    findings word differently.
    """
    S, p = SEED, power
    h100, b200, gb200 = _gpu("H100"), _gpu("B200"), _gpu("GB200")
    dgx_h100, dgx_b200, nvl72 = _system("DGX H100"), _system("DGX B200"), _system("GB200 NVL72")
    rows = {}

    rows["dgx-b200-8u-liquid-cooled"] = (
        "an 8U liquid-cooled node",
        f"registry: DGX B200 cooling '{dgx_b200.cooling}', {dgx_b200.max_w / 1e3:.1f} kW max; "
        f"liquid: GB200 NVL72 ('{nvl72.cooling}')")

    rows["b200-tdp-dgx-power-over-10kw"] = (
        f"B200 {S['b200_w']:.0f} W; DGX B200 > {S['dgx_b200_kw']:.0f} kW",
        f"B200 {b200.tdp_w:.0f} W; DGX B200 max {dgx_b200.max_w / 1e3:.1f} kW")

    gpus_only = dgx_h100.gpu_count * h100.tdp_w
    typical = p.H100_NODE_TYPICAL_FRACTION * dgx_h100.max_w
    rows["h100-server-5p6kw-full-load"] = (
        f"{S['server_kw']:.1f} kW for an 8-GPU server",
        f"8 x {h100.tdp_w:.0f} W = {gpus_only / 1e3:.1f} kW is the GPUs alone; node max "
        f"{dgx_h100.max_w / 1e3:.1f} kW; in training typically {typical / 1e3:.1f} kW, at most "
        f"{p.H100_NODE_MAX_MEASURED_W / 1e3:.1f} kW measured")

    seed_ratio = S["b200_tflops_per_w"] / S["h100_tflops_per_w"]
    same = b200.flops_per_watt("fp8") / h100.flops_per_watt("fp8")
    rows["perf-per-watt-fp4-vs-fp8"] = (
        f"{seed_ratio:.2f}x more TFLOPS per W (FP4 on B200 vs FP8 on H100)",
        f"same precision (FP8 dense): {same:.2f}x; the 10 PFLOPS part is GB200 at "
        f"{gb200.tdp_w:.0f} W")

    gain = S["cluster_pflops_after"] / S["cluster_pflops_before"]
    saving = p.saving_at_equal_throughput(gain)
    rows["cluster-1p93x-means-60pct-less-power"] = (
        f"{gain:.2f}x throughput -> more than {_pct(S['claimed_saving'])} less power",
        f"1 - 1/{gain:.2f} = {_pct(saving)} at most")

    e_h100 = p.energy_j(S["h100_avg_kw"] * 1e3, S["h100_gpu_hours"] * p.SECONDS_PER_HOUR)
    e_b200 = p.energy_j(S["b200_avg_kw"] * 1e3, S["b200_gpu_hours"] * p.SECONDS_PER_HOUR)
    cut = 1 - e_b200 / e_h100
    speedup = S["h100_gpu_hours"] / S["b200_gpu_hours"]
    rows["b200-energy-54pct-from-assumed-gpu-hours"] = (
        f"{p.to_kwh(e_h100):,.0f} kWh -> {p.to_kwh(e_b200):,.0f} kWh, {_pct(S['claimed_54'])} less",
        f"arithmetic {_pct(cut)}, but it assumes a {speedup:.2f}x per-GPU speed-up "
        f"(dense peak ratios: FP4/FP8 {b200.peak_flops('fp4') / h100.peak_flops('fp8'):.2f}x, "
        f"FP8/FP8 {b200.peak_flops('fp8') / h100.peak_flops('fp8'):.2f}x), GPUs only")

    flops = p.training_flops(S["params_13b"], S["tokens_13b"])
    mfu = flops / (S["gpus_13b"] * S["days_13b"] * p.SECONDS_PER_DAY * h100.peak_flops("bf16"))
    hours = S["days_13b"] * 24
    gpu_cost = p.electricity_cost(
        p.energy_j(S["gpus_13b"] * S["h100_avg_kw"] * 1e3, hours * 3600), S["yuan_per_kwh"])
    node_cost = p.electricity_cost(
        p.energy_j(S["gpus_13b"] / 8 * S["node_kw"] * 1e3, hours * 3600), S["yuan_per_kwh"])
    rows["13b-300b-tokens-3p5-days-4000-yuan"] = (
        f"{S['days_13b']} days, {S['yuan_13b']:,.0f} yuan",
        f"needs {_pct(mfu)} BF16 MFU; electricity {gpu_cost:,.0f} yuan (GPUs at "
        f"{S['h100_avg_kw']} kW) to {node_cost:,.0f} yuan (nodes at {S['node_kw']} kW)")

    ratio = p.energy_ratio(S["b200_w"] / S["h100_w"], S["time_ratio_175b"])
    need = p.time_ratio_for_saving(S["claimed_41"], S["b200_w"] / S["h100_w"])
    rows["175b-half-time-41pct-energy"] = (
        f"half the time -> {_pct(S['claimed_41'])} less energy",
        f"({S['b200_w']:.0f}/{S['h100_w']:.0f}) x {S['time_ratio_175b']} = {ratio:.2f}: "
        f"{_pct(1 - ratio)} less; {_pct(S['claimed_41'])} needs a time ratio of {need:.2f}")

    rows["nvl72-rack-60kw-reserve-80kw"] = (
        f"about {S['nvl72_kw']:.0f} kW per NVL72; reserve {S['reserve_kw']:.0f} kW",
        f"GPUs alone {nvl72.gpus_w / 1e3:.1f} kW ({nvl72.gpu_count} x {nvl72.gpu_tdp_w:.0f} W); "
        f"rack {p.GB200_NVL72_RACK_W_RANGE[0] / 1e3:.0f}-{p.GB200_NVL72_RACK_W_RANGE[1] / 1e3:.0f} kW")
    return rows


def seed_claims(chapter="power"):
    """The chapter's claims from ``data/claims.yaml``: what the seed and the model say, the
    verdict :func:`companion.claims.evaluate` computes and the catalogue's."""
    table = _check_rows()
    rows = []
    for c in claims.load():
        if c["chapter"] != chapter:
            continue
        if c["id"] not in table:
            raise ValueError(f"claim {c['id']!r} has no check in {__name__}")
        seed_says, model_says = table[c["id"]]
        rows.append({"id": c["id"], "quote_zh": c["quote_zh"], "quote_en": c["quote_en"],
                     "seed_says": seed_says, "model_says": model_says,
                     "verdict": claims.evaluate(c["id"]).verdict,
                     "catalogue_verdict": c["expected_verdict"]})
    return pd.DataFrame(rows)
