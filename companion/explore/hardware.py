"""Tables, charts and the explorer of the chapter "The machines at a glance".

Every number comes from :mod:`companion.hardware` (the cited registry in ``data/hardware/``);
this module only arranges the numbers into frames and charts. The seeds' claims are compared
with the registry in :func:`seed_claims`, which states each comparison next to its verdict.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import pandas as pd

import numpy as np

from .. import checks, hardware, roofline, units
from ..catalogue.hardware import MEGATRON_1T_FLOPS

#: The registry's GPUs, oldest first, and the short label each gets on a chart axis.
SHORT_NAMES = {
    "V100": "V100", "A100": "A100", "H100": "H100", "H200": "H200",
    "B200": "B200 (HGX)", "GB200": "B200 (GB200)", "B300": "B300 (HGX)",
    "GB300": "B300 (GB300)", "MI300X": "MI300X", "MI325X": "MI325X", "MI355X": "MI355X",
}
GPU_NAMES = tuple(SHORT_NAMES)

#: Groups the explorer's "GPUs" menu offers.
GPU_SETS = {
    "all": GPU_NAMES,
    "NVIDIA": GPU_NAMES[:8],
    "AMD": GPU_NAMES[8:],
    "8-GPU boards (HGX, OAM)": ("V100", "A100", "H100", "H200", "B200", "B300",
                                "MI300X", "MI325X", "MI355X"),
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
    key = next((k for k in GPU_NAMES if _spec(k).key == g.key), g.name)
    return f"{g.year} {SHORT_NAMES.get(key, g.name)}"


def sixteen_bit(g):
    """The 16-bit tensor precision a GPU has: bf16, or fp16 on Volta (same rate elsewhere)."""
    return "bf16" if "bf16" in g.precisions() else "fp16"


def peaks(precision="bf16", sparsity="dense", metric="peak TFLOP/s", gpus="all"):
    """The explorer's model: one row per GPU of ``gpus`` that has the chosen peak.

    A GPU without the precision (V100 has no bf16, A100 no fp8) or without a sparse figure
    gets no row: a missing bar means "not published", never zero.
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
        if precision not in have:
            continue
        rows.append({"gpu": label(name), "vendor": g.vendor, "arch": g.arch,
                     "value": fn(g, precision, sparse), "unit": unit, "tdp_w": g.tdp_w})
    return pd.DataFrame(rows, columns=["gpu", "vendor", "arch", "value", "unit", "tdp_w"])


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
    """Per GPU: dense 16-bit peak, HBM, TDP and the ratios derived from them (SI-based units)."""
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


def generations(names=("V100", "A100", "H100", "H200", "B200", "B300")):
    """:func:`spec_table` of a lineage plus each generation's growth over the one before."""
    frame = spec_table(names)
    for col, new in (("dense_tflops", "x_flops"), ("hbm_tb_per_s", "x_bandwidth"),
                     ("hbm_gib", "x_capacity"), ("tdp_w", "x_power")):
        frame[new] = frame[col] / frame[col].shift(1)
    return frame


def rooflines(names=("A100", "H100", "H200", "B200"), precision="bf16",
              intensities=tuple(np.logspace(0, 4, 41))):
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

CLAIMS_PATH = Path(hardware.DATA_DIR).parent / "claims.yaml"

#: B100 is not in the registry (no NVIDIA document was found); its dense FP8 peak comes from a
#: third-party table cited in data/claims.yaml: hmc-tech (unofficial spec database), "NVIDIA
#: B200 vs NVIDIA B100" (B100 700 W: 3.5 PFLOP/s dense FP8),
#: https://hmc-tech.com/gpus/nvidia-b200-vs-nvidia-b100
B100_FP8_DENSE_FLOPS_THIRD_PARTY = 3.5e15

#: Relative tolerance within which a seed's figure agrees with the registry (datasheets round
#: to 2-3 digits).
CLAIM_TOLERANCE = 0.03


def _near(a, b):
    return abs(a - b) <= CLAIM_TOLERANCE * abs(b)


def _pf(x):
    return f"{units.to_pflops(x):.4g} PF"


def _checks():
    """claim id -> list of (what the seed says, what the registry says, agrees?)."""
    b200, gb200, h100, b300 = (hardware.gpu(n) for n in ("B200", "GB200", "H100", "B300"))
    nvl72, dgx_b200 = hardware.system("GB200 NVL72"), hardware.system("DGX B200")
    nvlink5, hbi = hardware.link("NVLink 5"), hardware.link("NV-HBI")
    gb = units.to_gib  # vendors' "GB" of HBM is GiB (see companion.hardware)
    b200_fp8_ratio = b200.peak_flops("fp8") / B100_FP8_DENSE_FLOPS_THIRD_PARTY
    b_series = [hardware.gpu(n) for n in GPU_NAMES if n.lstrip("G").startswith("B")]
    per_superchip = nvl72.gpu_count // nvl72.cpu_count  # a GB200 is 1 Grace + 2 GPUs
    return {
        "b200-headline-20pf-fp4-192gb": [
            ("20 PF FP4 per DGX B200 GPU", f"{_pf(b200.peak_flops('fp4', True))} sparse, "
             f"{_pf(b200.peak_flops('fp4'))} dense; GB200's sparse FP4 is "
             f"{_pf(gb200.peak_flops('fp4', True))}",
             _near(20e15, b200.peak_flops("fp4", True))),
            ("192 GB HBM3e", f"{gb(b200.hbm_bytes):.0f} GB per GPU (HGX/DGX B200)",
             _near(192, gb(b200.hbm_bytes))),
            ("1.8 TB/s NVLink 5", f"{b200.scaleup_bidirectional_Bps / units.TB:.2g} TB/s "
             "bidirectional", _near(1.8e12, b200.scaleup_bidirectional_Bps))],
        "b200-bf16-5pf-training": [
            ("5 PF BF16 per B200", f"{_pf(b200.peak_flops('bf16'))} dense; GB200's sparse BF16 is "
             f"{_pf(gb200.peak_flops('bf16', True))}", _near(5e15, b200.peak_flops("bf16")))],
        "blackwell-package-with-switch": [
            ("a switch inside the GPU package", f"dies joined by {hbi.name.split(' (')[0]} "
             f"({hbi.category}); switches are separate: {dgx_b200.scaleup_switch}",
             hbi.category == "nvswitch")],
        "nvl72-is-36-gpus": [
            ("36 GPUs in NVL72", f"{nvl72.gpu_count} GPUs, {nvl72.cpu_count} Grace CPUs",
             nvl72.gpu_count == 36),
            ("36 GPUs = 9 GB200", f"9 GB200 x {per_superchip} GPUs = {9 * per_superchip}",
             9 * per_superchip == 36)],
        "b100-is-hopper-table": [
            ("B100 is Hopper", f"every B-series GPU here is {b200.arch.split(' (')[0]}; "
             f"{h100.arch} is H100 and H200", any(g.arch.startswith("Hopper") for g in b_series)),
            ("B100: 3.35 TB/s HBM", f"no Blackwell GPU has it; H100 SXM has "
             f"{h100.hbm_Bps / units.TB:.3g} TB/s",
             any(_near(3.35e12, g.hbm_Bps) for g in b_series)),
            ("B100: NVLink 5 at 900 GB/s", f"NVLink 5 is {nvlink5.bidirectional_Bps / units.TB:.2g}"
             f" TB/s bidirectional per GPU", _near(900e9, nvlink5.bidirectional_Bps))],
        "b200-fp8-training-2x-b100": [
            ("B200 FP8 = 2x B100", f"{_pf(b200.peak_flops('fp8'))} / "
             f"{_pf(B100_FP8_DENSE_FLOPS_THIRD_PARTY)} (B100, third-party) "
             f"= {b200_fp8_ratio:.2f}x", _near(2.0, b200_fp8_ratio))],
        "blackwell-ultra-is-b200": [
            ("Blackwell Ultra = B200", f"Blackwell Ultra is {b300.name.split(' (')[0]}; "
             f"B200 is {b200.arch.split(' (')[0]}", b200.arch.startswith("Blackwell Ultra"))],
        "b200-fp4-10pf-h100-fp8-1p98pf": [
            ("B200 10 PF dense FP4",
             f"{_pf(b200.peak_flops('fp4'))}; GB200's is {_pf(gb200.peak_flops('fp4'))}",
             _near(10e15, b200.peak_flops("fp4"))),
            ("H100 1.98 PF dense FP8", _pf(h100.peak_flops("fp8")),
             _near(1.98e15, h100.peak_flops("fp8"))),
            ("H100 990 TF FP16", f"{units.to_tflops(h100.peak_flops('fp16')):.4g} TF dense",
             _near(990e12, h100.peak_flops("fp16")))],
        "nvl72-over-500pf-fp4": [
            ("72 GPUs + 36 Grace", f"{nvl72.gpu_count} GPUs, {nvl72.cpu_count} CPUs",
             (nvl72.gpu_count, nvl72.cpu_count) == (72, 36)),
            ("> 500 PF FP4", f"{_pf(nvl72.peak_flops('fp4'))} dense, "
             f"{_pf(nvl72.peak_flops('fp4', True))} sparse", nvl72.peak_flops("fp4") > 500e15)],
    }


def verdict(agreements):
    """correct if every checked figure agrees, wrong if none does, partly-correct otherwise."""
    agreements = list(agreements)
    if all(agreements):
        return "correct"
    return "wrong" if not any(agreements) else "partly-correct"


def seed_claims(chapter="hardware"):
    """The chapter's claims from ``data/claims.yaml`` with the registry's figures and verdicts.

    Columns: quote (Chinese), translation, what the seed says and what the registry says
    (one line per checked figure), the verdict computed here and the catalogue's verdict.
    """
    import yaml

    with open(CLAIMS_PATH, encoding="utf-8") as f:
        claims = [c for c in yaml.safe_load(f) if c["chapter"] == chapter]
    table = _checks()
    rows = []
    for c in claims:
        if c["id"] not in table:
            raise ValueError(f"claim {c['id']!r} has no registry check in {__name__}")
        items = table[c["id"]]
        rows.append({
            "id": c["id"], "quote_zh": c["quote_zh"], "quote_en": c["quote_en"],
            "seed_says": "; ".join(s for s, _, _ in items),
            "registry_says": "; ".join(r for _, r, _ in items),
            "verdict": verdict(ok for _, _, ok in items),
            "catalogue_verdict": c["expected_verdict"], "why": c["why"]})
    return pd.DataFrame(rows)
