"""Tables, charts and the explorer of the chapter "The machines at a glance".

Every number comes from :mod:`companion.hardware` (the cited registry in ``data/hardware/``);
this module only arranges the numbers into frames and charts. The seeds' claims are compared
with the registry in :func:`seed_claims`, which states each comparison next to its verdict.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import altair as alt
import pandas as pd

import numpy as np

from .. import checks, claims, hardware, roofline, units
from ..catalogue.hardware import MEGATRON_1T_FLOPS
from .core import log_grid

#: The registry's GPUs, oldest first, and the short label each gets on a chart axis.
SHORT_NAMES = {
    "V100": "V100", "A100": "A100", "H100": "H100", "H200": "H200",
    "B200": "B200 (HGX)", "GB200": "B200 (GB200)", "B300": "B300 (HGX)",
    "GB300": "B300 (GB300)", "MI300X": "MI300X", "MI325X": "MI325X", "MI355X": "MI355X",
    "H100 PCIe": "H100 PCIe", "H100 NVL": "H100 NVL", "H200 NVL": "H200 NVL",
    "GH200": "H100 (GH200)",
}
#: The flagship configurations the chapter compares; the Hopper variants are listed apart
#: (:data:`HOPPER_VARIANTS`), because several of their rows lack peaks no document gave.
GPU_NAMES = tuple(SHORT_NAMES)[:11]
HOPPER_VARIANTS = ("H100", "H100 PCIe", "H100 NVL", "H200", "H200 NVL", "GH200")

#: Groups the explorer's "GPUs" menu offers.
GPU_SETS = {
    "all": GPU_NAMES,
    "NVIDIA": GPU_NAMES[:8],
    "AMD": GPU_NAMES[8:],
    "8-GPU boards (HGX, OAM)": ("V100", "A100", "H100", "H200", "B200", "B300",
                                "MI300X", "MI325X", "MI355X"),
    "Hopper: SXM, PCIe, NVL, GH200": HOPPER_VARIANTS,
}

#: Precisions the explorer offers, in ladder order (``fp16`` so that V100 has a bar).
EXPLORER_PRECISIONS = ("fp64", "fp64_tensor", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4")

#: Quantities the explorer can draw, by menu label, each as (function of GPU, precision and
#: sparse, unit).
METRICS = {
    "peak TFLOP/s": (lambda g, p, s: units.to_tflops(g.peak_flops(p, s)), "TFLOP/s"),
    "ridge point (FLOP/byte)": (lambda g, p, s: g.ridge_point(p, s), "FLOP/byte"),
    "GFLOP/s per watt": (lambda g, p, s: g.flops_per_watt(p, s) / units.GIGA, "GFLOP/s/W"),
}


@functools.cache
def _spec(name):
    # The registry resolves names through pandas; the explorer asks thousands of times.
    return hardware.gpu(name)


@functools.cache
def label(name):
    """Chart label of a GPU: release year and short name, so that labels sort by age."""
    g = _spec(name)
    key = next((k for k in SHORT_NAMES if _spec(k).key == g.key), g.name)
    return f"{g.year} {SHORT_NAMES.get(key, g.name)}"


def sixteen_bit(g):
    """The 16-bit tensor precision a GPU has: bf16, or fp16 on Volta (same rate elsewhere)."""
    return "bf16" if "bf16" in g.precisions() else "fp16"


#: Column names of :func:`peaks` that title the explorer's axes (words, with the unit).
PEAK_GPU = "GPU (release year and configuration)"
PEAK_VALUE = "value (TFLOP/s, FLOP/byte or GFLOP/s per W, per the metric menu)"

#: Keyword arguments shared by the explorer's static and live charts.
PEAKS_CHART = dict(x=f"{PEAK_GPU}:N", y=f"{PEAK_VALUE}:Q", mark="bar",
                   tooltip=[PEAK_GPU, "arch", "precision", "convention", PEAK_VALUE, "unit",
                            "tdp_w"],
                   title="TFLOP/s, FLOP/byte or GFLOP/s per watt (see the metric menu); no "
                         "bar: not published")


def peaks(precision="bf16", sparsity="dense", metric="peak TFLOP/s", gpus="all"):
    """The explorer's model: one row per GPU of ``gpus`` that has the chosen peak.

    A GPU without the precision (V100 has no bf16, A100 no fp8) or without a sparse figure
    gets no row: a missing bar means "not published", never zero. So does a GPU without the
    TDP that "GFLOP/s per watt" needs (GH200's limit covers the whole module).
    """
    checks.choice("precision", precision, EXPLORER_PRECISIONS)
    checks.choice("sparsity", sparsity, ("dense", "sparse"))
    checks.choice("metric", metric, list(METRICS))
    checks.choice("gpus", gpus, list(GPU_SETS))
    sparse = sparsity == "sparse"
    fn, unit = METRICS[metric]
    rows = []
    for name in GPU_SETS[gpus]:
        g = _spec(name)
        have = g.sparse_precisions() if sparse else g.precisions()
        if precision not in have or (metric == "GFLOP/s per watt" and g.tdp_w is None):
            continue
        rows.append({PEAK_GPU: label(name), "vendor": g.vendor, "arch": g.arch,
                     "precision": precision, "convention": "2:4 sparse" if sparse else "dense",
                     PEAK_VALUE: fn(g, precision, sparse), "unit": unit, "tdp_w": g.tdp_w})
    return pd.DataFrame(rows, columns=[PEAK_GPU, "vendor", "arch", "precision", "convention",
                                       PEAK_VALUE, "unit", "tdp_w"])


#: The road from the "20 PFLOPS FP4" headline to the number a BF16 training run can use.
HEADLINE_TO_TRAINING = (
    ("GB200", "fp4", True, "headline: GB200's B200 (1200 W), FP4, 2:4 sparse"),
    ("B200", "fp4", True, "same GPU in an HGX/DGX B200 (1000 W)"),
    ("B200", "fp4", False, "drop 2:4 sparsity: dense"),
    ("B200", "fp8", False, "FP4 -> FP8: half the rate"),
    ("B200", "bf16", False, "FP8 -> BF16: half again"),
)


def ladder(steps=HEADLINE_TO_TRAINING):
    """Peak PFLOP/s at each step of ``steps`` (gpu, precision, sparse, description)."""
    rows, previous = [], None
    for i, (name, precision, sparse, what) in enumerate(steps, start=1):
        g = hardware.gpu(name)
        flops = g.peak_flops(precision, sparse)
        rows.append({"step": i, "what": what, "gpu": g.name, "precision": precision,
                     "convention": "sparse" if sparse else "dense",
                     "pflops": units.to_pflops(flops),
                     "factor_from_previous": None if previous is None else previous / flops})
        previous = flops
    return pd.DataFrame(rows)


def ladder_chart(frame):
    """Horizontal bars of a :func:`ladder` frame, the headline on top."""
    return alt.Chart(frame).mark_bar().encode(
        y=alt.Y("what:N", sort=list(frame["what"]), title=None),
        x=alt.X("pflops:Q", title="peak PFLOP/s per GPU"),
        color=alt.Color("convention:N", title="convention"),
        tooltip=["gpu", "precision", "convention", alt.Tooltip("pflops:Q", format=".3g")],
    ).properties(width=420, height=170, title="From the spec-sheet headline to dense BF16")


def sparsity_factors(names=GPU_NAMES, precisions=("tf32", "bf16", "fp8", "fp4")):
    """Sparse over dense peak per GPU and precision, as text; blank where none is published."""
    rows = []
    for name in names:
        g = hardware.gpu(name)
        row = {"gpu": label(name)}
        for p in precisions:
            row[p] = f"{g.sparsity_factor(p):.3g}" if p in g.sparse_precisions() else ""
        rows.append(row)
    return pd.DataFrame(rows).set_index("gpu")


def spec_table(names=GPU_NAMES):
    """Per GPU: dense 16-bit peak, HBM, TDP and the ratios derived from them (SI units, but
    HBM capacity in GiB)."""
    rows = []
    for name in names:
        g = hardware.gpu(name)
        p = sixteen_bit(g)
        rows.append({
            "gpu": label(name), "vendor": g.vendor, "year": g.year,
            "precision": p, "dense_tflops": units.to_tflops(g.peak_flops(p)),
            "hbm_gib": units.to_gib(g.hbm_bytes), "hbm_tb_per_s": g.hbm_Bps / units.TB,
            "tdp_w": g.tdp_w, "ridge_flop_per_byte": g.ridge_point(p),
            "gflops_per_w": g.flops_per_watt(p) / units.GIGA,
            "hbm_sweep_ms": g.hbm_bytes / g.hbm_Bps * 1e3,
        })
    return pd.DataFrame(rows)


def variants_table(names=HOPPER_VARIANTS):
    """The Hopper configurations side by side: what each row's documents give, blank where
    none was found, and which figures are from secondary copies only ("unverified")."""
    def maybe(value, scale=1.0):
        return np.nan if value is None else value / scale

    rows = []
    for name in names:
        g = hardware.gpu(name)
        rows.append({
            "GPU": g.name, "form factor": g.form_factor, "SMs": maybe(g.sm_count),
            "BF16 dense TFLOP/s": (units.to_tflops(g.peak_flops("bf16"))
                                   if "bf16" in g.precisions() else np.nan),
            "HBM GiB (nominal)": g.hbm_bytes / units.GiB,
            "HBM GiB (driver-visible)": maybe(g.hbm_visible_bytes, units.GiB),
            "HBM TB/s": maybe(g.hbm_Bps, units.TB), "TDP W": maybe(g.tdp_w),
            "scale-up GB/s per direction": maybe(g.scaleup_Bps, units.GB),
            "unverified": ", ".join(g.unverified)})
    return pd.DataFrame(rows).set_index("GPU")


def generations(names=("V100", "A100", "H100", "H200", "B200", "B300")):
    """:func:`spec_table` of a lineage plus each generation's growth over the one before."""
    frame = spec_table(names)
    for col, new in (("dense_tflops", "x_flops"), ("hbm_tb_per_s", "x_bandwidth"),
                     ("hbm_gib", "x_capacity"), ("tdp_w", "x_power")):
        frame[new] = frame[col] / frame[col].shift(1)
    return frame


def rooflines(names=("A100", "H100", "H200", "B200"), precision="bf16",
              intensities=tuple(log_grid(1.0, 1e4, 41))):
    """Attainable dense TFLOP/s against arithmetic intensity (FLOP/byte) for each GPU.

    Each GPU's own ridge point is added to ``intensities`` so that the corner is drawn sharp.
    """
    rows = []
    for name in names:
        g = _spec(name)
        xs = np.unique(np.append(np.asarray(intensities, dtype=float), g.ridge_point(precision)))
        attainable = roofline.attainable_flops(xs, g, precision)
        rows += [{"gpu": label(name), "intensity": i, "tflops": units.to_tflops(a)}
                 for i, a in zip(xs, attainable)]
    return pd.DataFrame(rows)


def roofline_chart(frame, title="Rooflines (dense BF16)"):
    """Log-log lines of a :func:`rooflines` frame."""
    return alt.Chart(frame).mark_line().encode(
        x=alt.X("intensity:Q", scale=alt.Scale(type="log"),
                title="arithmetic intensity (FLOP per byte of HBM traffic)"),
        y=alt.Y("tflops:Q", scale=alt.Scale(type="log"), title="attainable TFLOP/s"),
        color=alt.Color("gpu:N", title="GPU"),
        tooltip=["gpu", alt.Tooltip("intensity:Q", format=".3g"),
                 alt.Tooltip("tflops:Q", format=".4g")],
    ).properties(width=460, height=300, title=title)


def capacity_bandwidth_chart(frame):
    """HBM capacity against bandwidth of a :func:`spec_table` frame; GPUs that share a point
    share a label."""
    points = (frame.groupby(["hbm_tb_per_s", "hbm_gib", "hbm_sweep_ms"], as_index=False)
              .agg(gpu=("gpu", " / ".join),
                   vendor=("vendor", lambda v: " / ".join(dict.fromkeys(v)))))
    base = alt.Chart(points).encode(
        x=alt.X("hbm_tb_per_s:Q", title="HBM bandwidth (TB/s)", scale=alt.Scale(domain=[0, 12])),
        y=alt.Y("hbm_gib:Q", title="HBM capacity (GiB)"),
        color=alt.Color("vendor:N", legend=alt.Legend(orient="bottom-right")),
        tooltip=["gpu", alt.Tooltip("hbm_gib:Q", format=".0f"),
                 alt.Tooltip("hbm_tb_per_s:Q", format=".2f"),
                 alt.Tooltip("hbm_sweep_ms:Q", format=".1f", title="ms to read all HBM")])
    dots = base.mark_point(filled=True, size=70)
    text = base.mark_text(align="center", dy=-10, fontSize=10).encode(text="gpu:N")
    return (dots + text).properties(width=560, height=300, title="HBM capacity against bandwidth")


#: Colours that do not swap when the explorer's menus filter one vendor out.
VENDOR_COLOR = alt.Color("vendor:N", scale=alt.Scale(domain=["NVIDIA", "AMD"]), title="vendor")


def sources(names=GPU_NAMES):
    """Each GPU row's ``source`` (document titles and URLs) as the registry stores it."""
    return pd.DataFrame([{"gpu": hardware.gpu(n).name, "source": hardware.gpu(n).source}
                         for n in names])


@dataclass(frozen=True)
class PublishedThroughput:
    """A training throughput someone measured and published (model FLOP/s per GPU)."""

    what: str
    gpu: str
    num_gpus: int
    precision: str
    achieved_flops: float
    reported_fraction: float
    source: str


#: The 1-trillion-parameter GPT of Narayanan et al. (SC21, abstract and Table 1) ran on 3072
#: A100s at 163 TFLOP/s per GPU, "52% of theoretical peak" (mixed precision, fp16).
MEGATRON_1T = PublishedThroughput(
    what="GPT 1T, 3072 A100 GPUs, Megatron-LM", gpu="A100", num_gpus=3072, precision="fp16",
    achieved_flops=MEGATRON_1T_FLOPS, reported_fraction=0.52,
    source="Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU "
           "Clusters Using Megatron-LM' (SC21), abstract and Table 1, "
           "https://arxiv.org/abs/2104.04473")


def mfu_denominators(run=MEGATRON_1T):
    """One measured throughput divided by three candidate peaks, as libraries have done.

    The dense peak is right. The sparse headline halves the utilisation; a dense peak halved
    "to remove sparsity" a second time doubles it (allenai/OLMo-core PR 614 fixed this for
    A100).
    """
    g = hardware.gpu(run.gpu)
    dense = g.peak_flops(run.precision)
    rows = [("dense peak (right)", dense),
            ("2:4-sparse headline", g.peak_flops(run.precision, sparse=True)),
            ("dense peak halved again", dense / units.SPARSITY_2_4)]
    return pd.DataFrame([{"denominator": d, "peak_tflops": units.to_tflops(p),
                          "mfu": run.achieved_flops / p} for d, p in rows])


# --- the seeds' claims against the registry ---------------------------------------------------
# The checks live in companion.claims (one per claim id); this chapter shows the hardware ones.

CLAIMS_PATH = claims.CLAIMS_PATH
B100_FP8_DENSE_FLOPS_THIRD_PARTY = claims.B100_FP8_DENSE_FLOPS_THIRD_PARTY
CLAIM_TOLERANCE = claims.TOLERANCE


def verdict(agreements):
    """correct if every checked figure agrees, wrong if none does, partly-correct otherwise."""
    return claims.verdict_of(claims.Finding("", "", bool(ok)) for ok in agreements)


def _cell(text):
    # one Markdown table cell: pipes escaped, line breaks kept as <br> so long quotes wrap
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def claims_markdown(frame, columns=(("id", "claim"), ("quote_zh", "seed (Chinese)"),
                                    ("quote_en", "translation"), ("seed_says", "seed says"),
                                    ("registry_says", "registry says"),
                                    ("verdict", "verdict"))):
    """A :func:`seed_claims` frame as a Markdown table (pipe syntax), which the book renders
    with wrapped cells instead of a wide DataFrame."""
    head = "| " + " | ".join(title for _, title in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_cell(row[col]) for col, _ in columns) + " |"
            for _, row in frame.iterrows()]
    return "\n".join([head, rule, *body])


def seed_claims(chapter="hardware"):
    """The chapter's claims from ``data/claims.yaml`` with the registry's figures and verdicts.

    Columns: quote (Chinese), translation, what the seed says and what the registry says
    (one line per checked figure), the verdict computed by :func:`companion.claims.evaluate`
    and the catalogue's verdict.
    """
    rows = []
    for c in claims.load():
        if c["chapter"] != chapter:
            continue
        if c["id"] not in claims.checkable():
            raise ValueError(f"claim {c['id']!r} has no numeric check in companion.claims")
        check = claims.evaluate(c["id"])
        rows.append({
            "id": c["id"], "quote_zh": c["quote_zh"], "quote_en": c["quote_en"],
            "seed_says": "; ".join(f.said for f in check.findings),
            "registry_says": "; ".join(f.found for f in check.findings),
            "verdict": check.verdict,
            "catalogue_verdict": c["expected_verdict"], "why": c["why"]})
    return pd.DataFrame(rows)
