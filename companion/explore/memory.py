"""Tables, charts and explorers of the chapter "HBM: rooflines and where every byte lives".

Every number comes from :mod:`companion.roofline`, :mod:`companion.memory` and the cited
registry (:mod:`companion.hardware`); measured points come from the benches in
:mod:`companion.bench.bandwidth` and :mod:`companion.bench.gemm`. This module only arranges
those results into long-form frames for :func:`companion.explore.core.static` and
:func:`companion.explore.core.live`, and into altair charts.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .. import calibration, checks, hardware, memory, roofline, units
from ..model import Layout, preset
from .core import Choice, Slider, log_grid

#: GPUs drawn on the roofline chart, oldest first.
ROOFLINE_GPUS = ("A100", "H100", "H200", "B200", "B300", "MI300X", "MI355X")

#: Models of the ledger explorer and the pipeline stages each is split into.
LEDGER_MODELS = {"gpt3-175b": 8, "llama3-70b": 4, "llama3-8b": 1}

#: GPUs whose HBM capacity the ledger draws next to the stacks.
LEDGER_GPUS = ("H100", "H200", "B200", "B300")

#: How the ledger shards model state over data-parallel ranks (bar label to Layout fields).
#: Labels start with a digit so that the bars sort in this order on the chart.
OPTIMIZER_SHARDING = {
    "1 Adam, replicated": {},
    "2 distributed optimizer": {"distributed_optimizer": True},
    "3 ZeRO-3": {"zero_stage": 3},
}

#: Layouts of Korthikanti et al. 2022 (arXiv 2205.05198, Table 3 and Section 6), TP 8 for all,
#: as model name to (pipeline stages, interleaved stages, microbatch, global batch).
KORTHIKANTI_TABLE3 = {"korthikanti-22b": (1, 1, 4, 4), "korthikanti-175b": (8, 3, 1, 64),
                      "korthikanti-530b": (35, 3, 1, 280), "korthikanti-1t": (64, 1, 1, 512)}

#: The paper's five settings (its Figure 7), as column label to (sequence parallel, recompute).
KORTHIKANTI_SETTINGS = {
    "TP (baseline)": (False, "none"),
    "TP + SP": (True, "none"),
    "TP + selective": (False, "selective"),
    "TP + SP + selective": (True, "selective"),
    "TP + full recompute": (False, "full"),
}

_STREAM_COST = {  # (reads, writes, FLOPs per element) of the bandwidth bench's kernels
    "scale": (1, 1, 1.0), "triad": (2, 1, 2.0), "read": (1, 0, 1.0)}
_BENCH_DTYPE = {"float32": "fp32", "float64": "fp64", "fp32": "fp32", "tf32": "tf32",
                "bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "e4m3", "fp4": "fp4"}


def short_name(gpu) -> str:
    """The registry key's product part in capitals: ``"H100"``, ``"B200"``, ``"MI300X"``."""
    return hardware.gpu(gpu).key.split("_")[0].upper()


# -- rooflines ---------------------------------------------------------------------------------
def gpu_table(gpus=ROOFLINE_GPUS) -> pd.DataFrame:
    """Peak, HBM and ridge points of each GPU (blank where the registry has no such peak)."""
    rows = []
    for name in gpus:
        g = hardware.gpu(name)
        row = {"GPU": g.name, "BF16 dense TFLOP/s": units.to_tflops(g.peak_flops("bf16")),
               "HBM TB/s": g.hbm_Bps / units.TB, "HBM GiB (nominal)": g.hbm_bytes / units.GiB,
               "HBM GiB (driver-visible)": (np.nan if g.hbm_visible_bytes is None
                                            else g.hbm_visible_bytes / units.GiB),
               "last-level cache MiB": (np.nan if g.llc_bytes is None
                                        else g.llc_bytes / units.MiB),
               "ridge BF16 (FLOP/B)": g.ridge_point("bf16")}
        row["ridge FP8 (FLOP/B)"] = (g.ridge_point("fp8") if "fp8" in g.precisions()
                                     else np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def roofline_curves(gpus=ROOFLINE_GPUS, precision: str = "bf16", lo: float = 1.0,
                    hi: float = 1e4, points: int = 61) -> pd.DataFrame:
    """Attainable TFLOP/s against arithmetic intensity, one line per GPU (log-spaced)."""
    x = log_grid(lo, hi, points)
    frames = [pd.DataFrame({"GPU": short_name(g), "intensity": x,
                            "TFLOP/s": roofline.attainable_flops(x, g, precision) / units.TERA})
              for g in gpus]
    return pd.concat(frames, ignore_index=True)


def roofline_chart(curves: pd.DataFrame, points: pd.DataFrame | None = None,
                   title: str | None = None, width: int = 520, height: int = 340) -> alt.Chart:
    """Log-log roofline lines (``GPU``, ``intensity``, ``TFLOP/s``), with optional labelled
    points (columns ``label``, ``intensity``, ``TFLOP/s``)."""
    lines = alt.Chart(curves).mark_line().encode(
        x=alt.X("intensity:Q", scale=alt.Scale(type="log"),
                title="arithmetic intensity (FLOP per byte of HBM/DRAM traffic)"),
        y=alt.Y("TFLOP/s:Q", scale=alt.Scale(type="log"), title="attainable TFLOP/s"),
        color=alt.Color("GPU:N"), tooltip=["GPU", "intensity", "TFLOP/s"])
    chart = lines
    if points is not None and len(points):
        dots = alt.Chart(points).mark_point(filled=True, size=70, color="black").encode(
            x="intensity:Q", y="TFLOP/s:Q", shape=alt.Shape("label:N", title="point"),
            tooltip=list(points.columns))
        chart = lines + dots
    return chart.properties(width=width, height=height, **({"title": title} if title else {}))


def kernel_table(costs, gpus=("H100", "B200"), precision: str = "bf16") -> pd.DataFrame:
    """Roofline time of each :class:`companion.roofline.Cost` on each GPU."""
    rows = []
    for c in costs:
        row = {"kernel": c.name, "GFLOP": c.flops / units.GIGA,
               "MB moved": c.bytes_moved / units.MB, "FLOP/B": c.intensity}
        for g in gpus:
            t = roofline.roofline_time(c, g, precision)
            row[f"{short_name(g)} bound"] = t.bound
            row[f"{short_name(g)} us"] = t.time_s * 1e6
        rows.append(row)
    return pd.DataFrame(rows)


#: Labels of the two GEMM efficiency figures the book shows side by side.
IDEAL_LABEL = roofline.IDEAL_LABEL
BURST_LABEL = roofline.BURST_LABEL


def seed_gemm_table(gpus=("H100", "B200"), **kwargs) -> pd.DataFrame:
    """The seed's 512 x 4096 x 512 GEMM on each GPU: tiles, waves, the HBM roofline (a flushed
    cache), the cache level (a warm L2 holds the whole working set) and the ideal ceiling."""
    rows = []
    for g in gpus:
        e = roofline.seed_ffn_gemm(g, **kwargs)
        q = e.quantization.efficiency  # the compute roof lowered by tile and wave quantization
        cold = roofline.cached_roofline_time(e.cost, g, warm=False, efficiency=q)
        warm = roofline.cached_roofline_time(e.cost, g, warm=True, efficiency=q)
        rows.append({"GPU": short_name(g), "FLOP/B": e.cost.intensity,
                     "ridge (FLOP/B)": roofline.ridge_point(g),
                     "tiles": e.quantization.tiles, "SMs": e.quantization.sm_count,
                     "SMs busy": e.quantization.wave_efficiency,
                     "working set MB": e.cost.bytes_moved / units.MB,
                     "L2 MB": warm.cache_bytes / units.MB,
                     "compute us": e.timing.compute_s * 1e6,
                     "HBM us": e.timing.memory_s * 1e6,
                     "bound, flushed cache": cold.bound, "bound, warm L2": warm.bound,
                     f"{IDEAL_LABEL}, flushed": e.mfu,
                     f"{IDEAL_LABEL}, warm": e.cost.flops / warm.time_s
                     / hardware.gpu(g).peak_flops("bf16")})
    return pd.DataFrame(rows)


def seed_overhead_sweep(gpus=("H100", "B200"), overheads_us=(0.0, 0.5, 1.0, 2.0, 3.0, 5.0)
                        ) -> pd.DataFrame:
    """Fraction of peak of the seed GEMM with a warm L2 against a fixed per-kernel cost, with the
    bound each point falls in (``"launch/latency"`` once the fixed cost exceeds the roofs)."""
    rows = []
    for g in gpus:
        e = roofline.seed_ffn_gemm(g)
        cost, q = e.cost, e.quantization.efficiency
        peak = hardware.gpu(g).peak_flops("bf16")
        for us in overheads_us:
            t = roofline.cached_roofline_time(cost, g, warm=True, efficiency=q,
                                              overhead_s=us * 1e-6)
            rows.append({"GPU": short_name(g), "fixed cost per kernel (us)": us,
                         "time (us)": t.time_s * 1e6, "fraction of dense BF16 peak":
                         cost.flops / t.time_s / peak, "bound": t.bound})
    return pd.DataFrame(rows)


def tile_table(gpus=("A100", "H100", "B200"), shapes=((512, 4096), (8192, 8192))
               ) -> pd.DataFrame:
    """Tile and wave quantization of output shapes (m x n) with the Ampere picture (128x128, one
    CTA per SM) and with each GPU's own architecture preset
    (:func:`companion.roofline.tile_preset`: Hopper 128x256, Blackwell 256x256 on an SM pair)."""
    rows = []
    for g in gpus:
        own = roofline.tile_preset(g)
        presets = dict.fromkeys([roofline.TILE_PRESETS["ampere"], own])
        for m, n in shapes:
            for preset in presets:
                q = roofline.gemm_efficiency(m, n, g, tile=preset)
                rows.append({"GPU": short_name(g), "output m x n": f"{m} x {n}",
                             "tiles": f"{preset.name} {preset.tile[0]}x{preset.tile[1]}",
                             "SMs per tile": preset.sms_per_tile, "tile count": q.tiles,
                             "waves": q.waves, "slots busy": q.wave_efficiency,
                             IDEAL_LABEL: q.efficiency})
    return pd.DataFrame(rows)


def gemm_efficiency_table(gpus=("H100", "H200", "B200"), size: int = 8192) -> pd.DataFrame:
    """One square BF16 GEMM per GPU: the ideal ceiling next to the published burst figure
    (:func:`companion.calibration.gemm_peak_fraction`) and its basis."""
    rows = []
    for g in gpus:
        e = roofline.gemm_time(size, size, size, g)
        frac = calibration.gemm_peak_fraction(g, "bf16")
        basis = calibration.gemm_fraction_table(("bf16",)).set_index("GPU").loc[
            hardware.gpu(g).name, "basis"]
        rows.append({"GPU": short_name(g), "GEMM": f"{size}^3 BF16", IDEAL_LABEL: e.mfu,
                     BURST_LABEL: frac, "basis of the published figure": basis})
    return pd.DataFrame(rows)


#: Columns of :func:`state_table`: (label, ZeRO stage, convention); Megatron's distributed
#: optimizer is stage 1.
STATE_COLUMNS = (
    ("Adam, replicated (Megatron, 18 B)", 0, "megatron"),
    ("distributed optimizer (Megatron, 6 + 12/DP)", 1, "megatron"),
    ("ZeRO-2, Megatron accounting (FP32 grads, 18 B)", 2, "megatron"),
    ("ZeRO-2, ZeRO paper (16-bit grads, 16 B)", 2, "zero-paper"),
    ("ZeRO-3, Megatron accounting (18 B)", 3, "megatron"),
    ("ZeRO-3, ZeRO paper (16 B)", 3, "zero-paper"),
)


def state_table(dps=(1, 8, 64, 512)) -> pd.DataFrame:
    """Model-state bytes per parameter per GPU, in both accountings, labelled."""
    return pd.DataFrame({label: [memory.bytes_per_param(dp, stage, conv) for dp in dps]
                         for label, stage, conv in STATE_COLUMNS},
                        index=pd.Index(dps, name="DP ranks"))


# -- this machine, measured --------------------------------------------------------------------
def measured_points(bandwidth_results, gemm_results=()) -> pd.DataFrame:
    """Measured kernels as roofline points (``label``, ``intensity``, ``TFLOP/s``, ...).

    Bandwidth kernels count FLOPs per element as STREAM defines them (scale 1, triad 2, sum 1;
    copy does none and has no point); GEMMs use 2mnk over operands read once and the output
    written once (:func:`companion.roofline.gemm`). Skipped GEMM cases are left out.
    """
    rows = []
    for r in bandwidth_results:
        if r["kernel"] not in _STREAM_COST:
            continue
        reads, writes, fpe = _STREAM_COST[r["kernel"]]
        c = roofline.elementwise(r["elements"], _BENCH_DTYPE[r["dtype"]], reads, writes, fpe)
        rows.append({"label": f"{r['kernel']} ({r['cache_level']})", "kind": "bandwidth bench",
                     "size": f"{r['array_bytes'] / units.MiB:g} MiB",
                     "intensity": c.intensity, "TFLOP/s": c.flops / r["best_s"] / units.TERA,
                     "GB/s": r["best_Bps"] / units.GB})
    for r in gemm_results:
        if r.get("status") != "ok":
            continue
        c = roofline.gemm(r["m"], r["n"], r["k"], _BENCH_DTYPE[r["dtype"]])
        rows.append({"label": f"GEMM {r['dtype']}", "kind": "gemm bench",
                     "size": f"{r['m']}x{r['n']}x{r['k']}", "intensity": c.intensity,
                     "TFLOP/s": r["best_flops"] / units.TERA,
                     "GB/s": c.bytes_moved / r["best_s"] / units.GB})
    return pd.DataFrame(rows)


def measured_roof(memory_Bps: float, peak_flops: float, name: str = "this machine (measured)",
                  lo: float = 0.05, hi: float = 1e3, points: int = 61) -> pd.DataFrame:
    """A roofline drawn from measured roofs: min(peak, intensity x bandwidth), in TFLOP/s."""
    checks.number("memory_Bps", memory_Bps, positive=True)
    checks.number("peak_flops", peak_flops, positive=True)
    x = log_grid(lo, hi, points)
    return pd.DataFrame({"GPU": name, "intensity": x,
                         "TFLOP/s": np.minimum(peak_flops, x * memory_Bps) / units.TERA})


_PRECISION_OF_BENCH = {"tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8",
                       "fp4": "fp4"}


def _cuda_results(rec):
    res = [r for r in rec.get("results", []) if r.get("device") == "cuda"]
    if rec.get("kind") == "bandwidth":
        res = [r for r in res if r.get("cache_level") == "HBM"]
    elif rec.get("kind") == "gemm":
        res = [r for r in res if r.get("status") == "ok"]
    else:
        res = []
    return res


def recorded_gpu_points(records) -> pd.DataFrame:
    """Roofline points of recorded CUDA runs (bandwidth kernels at HBM sizes, GEMMs), each
    labelled with its device."""
    frames = []
    for rec in records:
        res = _cuda_results(rec)
        if not res:
            continue
        bw = res if rec["kind"] == "bandwidth" else ()
        mm = res if rec["kind"] == "gemm" else ()
        pts = measured_points(bw, mm)
        device = rec.get("meta", {}).get("device", "GPU")
        pts["label"] = f"recorded {device}: " + pts["label"]
        pts["record"] = rec.get("path", "")
        frames.append(pts)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["label", "kind", "size", "intensity", "TFLOP/s", "GB/s", "record"])


def gpu_records_table(records) -> pd.DataFrame:
    """Best recorded CUDA result of each run against the registry's figure for its device:
    HBM bandwidth for bandwidth runs, the dense peak of the dtype for GEMM runs."""
    rows = []
    for rec in records:
        res = _cuda_results(rec)
        if not res:
            continue
        name = rec.get("meta", {}).get("device", "?")
        try:
            g = hardware.gpu(name)
        except ValueError:
            g = None
        groups = ({r["kernel"]: None for r in res} if rec["kind"] == "bandwidth"
                  else {r["dtype"]: None for r in res})
        for key in groups:
            if rec["kind"] == "bandwidth":
                best = max((r["best_Bps"] for r in res if r["kernel"] == key))
                spec = g.hbm_Bps if g is not None else np.nan
                rows.append({"record": rec["path"], "device": name, "what": f"{key} GB/s",
                             "best": best / units.GB, "datasheet": spec / units.GB,
                             "fraction": best / spec})
                continue
            best = max((r["best_flops"] for r in res if r["dtype"] == key))
            p = _PRECISION_OF_BENCH.get(key)
            spec = (g.peak_flops(p) if g is not None and p in g.precisions() else np.nan)
            rows.append({"record": rec["path"], "device": name, "what": f"GEMM {key} TFLOP/s",
                         "best": best / units.TERA, "datasheet": spec / units.TERA,
                         "fraction": best / spec})
    return pd.DataFrame(rows, columns=["record", "device", "what", "best", "datasheet",
                                       "fraction"])


# -- the memory ledger -------------------------------------------------------------------------
def ledger_layout(model: str, tp: int, microbatch: int, recompute: str, num_gpus: int = 1024,
                  pp: int | None = None, **sharding) -> Layout:
    """The layout the ledger explorer uses: ``num_gpus`` = tp x pp x dp, sequence parallel
    whenever tp > 1 (as Megatron runs TP), bf16 with Adam."""
    pp = LEDGER_MODELS.get(model, 1) if pp is None else pp
    checks.gpu_count("num_gpus", num_gpus)
    tp = checks.gpu_count("tp", tp)
    pp = checks.gpu_count("pp", pp)
    checks.divides("tp * pp", tp * pp, "num_gpus", num_gpus)
    return Layout(tp=tp, pp=pp, dp=num_gpus // (tp * pp), microbatch=microbatch,
                  sequence_parallel=tp > 1, recompute=recompute, **sharding)


def ledger(model: str = "gpt3-175b", tp: int = 8, microbatch: int = 1,
           recompute: str = "selective", num_gpus: int = 1024, pp: int | None = None,
           gpus=LEDGER_GPUS) -> pd.DataFrame:
    """Per-GPU memory of one training step, one stacked bar per optimizer sharding
    (``OPTIMIZER_SHARDING``), plus one bar per GPU showing its HBM capacity, in GiB."""
    m = preset(model)
    rows = []
    for bar, sharding in OPTIMIZER_SHARDING.items():
        layout = ledger_layout(model, tp, microbatch, recompute, num_gpus, pp, **sharding)
        r = memory.training_memory(m, layout)
        for part, value in zip(("weights", "gradients", "optimizer state", "activations"),
                               (r.weights_bytes, r.grads_bytes, r.optimizer_bytes,
                                r.activations_bytes)):
            rows.append({LEDGER_BAR: f"{bar} (dp={layout.dp})", LEDGER_PART: part,
                         LEDGER_GIB: round(value / units.GiB, 3)})  # 1 MiB: plenty for a chart
    for i, g in enumerate(gpus, start=len(OPTIMIZER_SHARDING) + 1):
        spec = hardware.gpu(g)
        seen = "driver-visible" if spec.hbm_visible_bytes is not None else "nominal"
        rows.append({LEDGER_BAR: f"{i} {short_name(g)} HBM ({seen})",
                     LEDGER_PART: "HBM capacity", LEDGER_GIB: spec.usable_hbm_bytes / units.GiB})
    return pd.DataFrame(rows)


def ledger_controls():
    """The ledger explorer's controls: 3 models x 3 recompute x 4 TP x 4 microbatch = 144."""
    return [Choice("model", tuple(LEDGER_MODELS), "gpt3-175b"),
            Choice("recompute", ("none", "selective", "full"), "selective"),
            Choice("tp", (1, 2, 4, 8), 8, label="TP"),
            Slider("microbatch", 1, 4, 1, 1)]


#: Column names of :func:`ledger` (they title the chart's axes and legend).
LEDGER_BAR = "optimizer sharding, or GPU HBM"
LEDGER_PART = "memory part"
LEDGER_GIB = "memory per GPU (GiB)"

#: Keyword arguments shared by the ledger's static and live charts.
LEDGER_CHART = dict(x=f"{LEDGER_GIB}:Q", y=f"{LEDGER_BAR}:N", color=f"{LEDGER_PART}:N",
                    mark="bar", tooltip=[LEDGER_BAR, LEDGER_PART, LEDGER_GIB], width=460,
                    height=220, title="Per-GPU memory of a training step (first pipeline stage)")


# -- Korthikanti et al. reproduced -------------------------------------------------------------
def korthikanti_layout(model: str, sequence_parallel: bool, recompute: str) -> Layout:
    """The paper's Table 3 layout of ``model`` with one of its five settings."""
    checks.choice("model", model, KORTHIKANTI_TABLE3)
    pp, vpp, b, gb = KORTHIKANTI_TABLE3[model]
    return Layout(tp=8, pp=pp, vpp=vpp, microbatch=b, global_batch=gb,
                  sequence_parallel=sequence_parallel, recompute=recompute)


def korthikanti_table(what: str = "activations") -> pd.DataFrame:
    """Per-GPU activation memory (GB) of the paper's four models at its five settings;
    ``what="fraction"`` divides by the baseline, ``what="total"`` adds model state."""
    checks.choice("what", what, ("activations", "fraction", "total"))
    rows = []
    for name in KORTHIKANTI_TABLE3:
        m = preset(name)
        row = {"model": name.removeprefix("korthikanti-").upper()}
        base = None
        for col, (sp, rc) in KORTHIKANTI_SETTINGS.items():
            r = memory.training_memory(m, korthikanti_layout(name, sp, rc))
            value = r.total_bytes if what == "total" else r.activations_bytes
            base = value if base is None else base
            row[col] = value / base if what == "fraction" else value / units.GB
        rows.append(row)
    return pd.DataFrame(rows).set_index("model")


# -- KV cache ----------------------------------------------------------------------------------
KV_MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b")
KV_BATCHES = (1, 8, 64, 512)


def kv_growth(batch: int = 512, kv_dtype: str = "bf16", tp: int = 1, models=KV_MODELS,
              max_context: int = 131072, points: int = 16) -> pd.DataFrame:
    """KV cache per GPU (GiB) against context length, one line per model."""
    points = checks.number("points", points, integer=True, minimum=2, maximum=1000)
    max_context = checks.number("max_context", max_context, integer=True, minimum=points)
    ctx = np.linspace(max_context / points, max_context, points).astype(int)
    rows = [{"model": name, "context tokens": int(s),
             "KV GiB per GPU": round(memory.kv_cache_bytes(preset(name), int(s), batch, kv_dtype,
                                                           tp) / units.GiB, 3)}
            for name in models for s in ctx]
    return pd.DataFrame(rows)


def kv_controls():
    """The KV explorer's controls: 4 batch sizes x 2 dtypes x 2 TP = 16 grid points."""
    return [Choice("batch", KV_BATCHES, 512),
            Choice("kv_dtype", ("bf16", "fp8"), "bf16", label="KV dtype"),
            Choice("tp", (1, 8), 1, label="TP")]


__all__ = ["IDEAL_LABEL", "BURST_LABEL", "seed_overhead_sweep", "gemm_efficiency_table", "tile_table",
           "STATE_COLUMNS", "state_table", "LEDGER_BAR", "LEDGER_PART", "LEDGER_GIB",
           "ROOFLINE_GPUS", "LEDGER_MODELS", "LEDGER_GPUS", "OPTIMIZER_SHARDING",
           "KORTHIKANTI_TABLE3", "KORTHIKANTI_SETTINGS", "KV_MODELS", "KV_BATCHES",
           "LEDGER_CHART", "short_name", "gpu_table", "roofline_curves", "roofline_chart",
           "kernel_table", "seed_gemm_table", "measured_points", "measured_roof",
           "recorded_gpu_points", "gpu_records_table", "ledger_layout", "ledger", "ledger_controls",
           "korthikanti_layout", "korthikanti_table", "kv_growth", "kv_controls"]
