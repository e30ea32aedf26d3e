"""Tables, charts and explorers of the chapter "FP8 and FP4 for real".

The numbers come from :mod:`companion.formats` (exact formats and block scaling),
:mod:`companion.speedup` (Amdahl with quantization kernels), :mod:`companion.experiment` (the
training sweep), :mod:`companion.hardware` (peaks) and recorded benches; this module arranges
them into frames and charts.
"""
from __future__ import annotations

import functools
import math

import altair as alt
import ml_dtypes
import numpy as np
import pandas as pd

from .. import calibration, checks, formats, hardware, seedstats, speedup, units
from .core import Choice, Slider

# ----------------------------------------------------------------------------- the formats
#: 16-bit formats that FP8 replaces, for comparison (values from ml_dtypes / numpy finfo).
_WIDE = {"fp16": np.finfo(np.float16), "bf16": ml_dtypes.finfo(ml_dtypes.bfloat16)}


def e2m1_table() -> pd.DataFrame:
    """Every 4-bit code of E2M1 (the FP4 element of MXFP4 and NVFP4) and its value."""
    codes = np.arange(16, dtype=np.uint8)
    values = formats.decode(codes, "e2m1")
    return pd.DataFrame({
        "code": [f"{c:04b}" for c in codes], "sign": codes >> 3, "exponent": [
            f"{(c >> 1) & 3:02b}" for c in codes], "mantissa": codes & 1,
        "value": values}).set_index("code")


def format_table(names=("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")) -> pd.DataFrame:
    """Range and precision of scalar formats next to FP16 and BF16 (dynamic range in binades
    = log2(max / smallest subnormal); epsilon = spacing just above 1)."""
    rows = []
    for name in names:
        i = formats.info(name)
        rows.append({"format": name, "bits": i.bits, "max": i.max, "min normal": i.min_normal,
                     "min subnormal": i.min_subnormal, "epsilon": i.epsilon,
                     "binades": math.log2(i.max / i.min_subnormal),
                     "inf": i.has_inf, "NaN": i.has_nan})
    for name, fi in _WIDE.items():
        mx, sub = float(fi.max), float(fi.smallest_subnormal)
        rows.append({"format": name, "bits": fi.bits, "max": mx,
                     "min normal": float(fi.smallest_normal), "min subnormal": sub,
                     "epsilon": float(fi.eps), "binades": math.log2(mx / sub),
                     "inf": True, "NaN": True})
    return pd.DataFrame(rows).set_index("format")


def error_by_magnitude(fmts=("e4m3", "e5m2"), lo_log2: int = -20, hi_log2: int = 18,
                       per_binade: int = 64) -> pd.DataFrame:
    """Median relative error of rounding values of each magnitude (one row per binade and
    format), unscaled and saturating: where each format loses precision or range."""
    # float64 holds 2**e for |e| < 1024; a few thousand binades at most
    lo_log2 = checks.number("lo_log2", lo_log2, integer=True, minimum=-1000, maximum=1000)
    hi_log2 = checks.number("hi_log2", hi_log2, integer=True, minimum=lo_log2 + 1, maximum=1000)
    per_binade = checks.number("per_binade", per_binade, integer=True, minimum=1,
                               maximum=100_000)
    rng = np.random.default_rng(0)
    rows = []
    for e in range(lo_log2, hi_log2):
        x = (2.0 ** (e + rng.random(per_binade))).astype(np.float32)
        for f in fmts:
            q = formats.quantize(x, f)
            rows.append({"format": f, "magnitude": 2.0 ** (e + 0.5),
                         "relative error": float(np.median(np.abs(q - x) / x))})
    return pd.DataFrame(rows)


def error_chart(frame: pd.DataFrame) -> alt.Chart:
    """Relative error against magnitude, log-log, one line per format."""
    return alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("magnitude:Q", scale=alt.Scale(type="log", base=2), title="|x|",
                axis=alt.Axis(format=".0e")),
        y=alt.Y("relative error:Q", scale=alt.Scale(type="log", domainMin=1e-3),
                title="median relative error"),
        color="format:N", tooltip=["format", "magnitude", "relative error"],
    ).properties(width=480, height=260,
                 title="Rounding x to FP8 with no scale: precision vs range")


def cast_pitfalls() -> pd.DataFrame:
    """What torch, ml_dtypes and companion.formats do with out-of-range values and inf."""
    import torch
    x = np.array([300.0, 448.0, 464.0, 1000.0, np.inf], dtype=np.float32)
    rows = {"input": x,
            "torch .to(float8_e4m3fn)": torch.from_numpy(x).to(torch.float8_e4m3fn).float(),
            "ml_dtypes astype(float8_e4m3fn)": x.astype(ml_dtypes.float8_e4m3fn).astype(
                np.float32),
            'formats.quantize(overflow="saturate")': formats.quantize(x, "e4m3"),
            'formats.quantize(overflow="nan")': formats.quantize(x, "e4m3", overflow="nan"),
            "torch .to(float8_e5m2)": torch.from_numpy(x).to(torch.float8_e5m2).float()}
    return pd.DataFrame({k: np.asarray(v) for k, v in rows.items()}).set_index("input")


# ----------------------------------------------------------------------------- block scaling
#: Block schemes of companion.formats, plus E2M1 with a single per-tensor scale (no blocks).
OUTLIER_SCHEMES = ("fp8_e4m3_tensor", "deepseek_fp8", "mxfp8_e4m3", "fp4_e2m1_tensor", "mxfp4",
                   "nvfp4")
DISTRIBUTIONS = ("normal", "laplace", "student-t (3)")
ROWS, COLS, OUTLIER_CHANNEL = 64, 512, 7


def outlier_activation(distribution: str = "normal", outlier_log10: float = 0.0, seed: int = 0):
    """The explorer's test activation: ROWS x COLS values of ``distribution`` (unit variance)
    with channel OUTLIER_CHANNEL multiplied by ``10**outlier_log10`` (float32)."""
    checks.choice("distribution", distribution, DISTRIBUTIONS)
    # 10**30 keeps the outlier channel finite in float32 (max 3.4e38) next to unit values
    outlier_log10 = checks.number("outlier_log10", outlier_log10, minimum=-30, maximum=30)
    seed = checks.number("seed", seed, integer=True, nonnegative=True)
    rng = np.random.default_rng(seed)
    shape = (ROWS, COLS)
    if distribution == "normal":
        x = rng.standard_normal(shape)
    elif distribution == "laplace":
        x = rng.laplace(size=shape) / math.sqrt(2)
    else:
        x = rng.standard_t(3, size=shape) / math.sqrt(3)
    # an outlier channel, as in LLM activations: one hidden dimension that is large in every
    # token (Dettmers et al. 2022, LLM.int8())
    x[:, OUTLIER_CHANNEL] *= 10.0 ** outlier_log10
    return x.astype(np.float32)


def _quantize(x, scheme):
    if scheme == "fp4_e2m1_tensor":
        return formats.tensor_quantize(x, "e2m1")[0], x.size
    deq, _ = formats.block_quantize(x, scheme)
    br, bc = formats.block_shape(scheme)
    return deq, (br * bc if bc else x.size)


def outlier_sqnr(distribution: str = "normal", outlier_log10: float = 2.0) -> pd.DataFrame:
    """SQNR of the ordinary values under each block-scaling scheme, for a 64 x 512 activation
    whose channel 7 is ``10**outlier_log10`` times larger than the rest; blocks run along the
    512 channels. The outlier channel itself is left out of the SQNR: it dominates the signal
    power and is always well represented; the question is what happens to its neighbours."""
    x = outlier_activation(distribution, outlier_log10)
    ordinary = np.ones(COLS, dtype=bool)
    ordinary[OUTLIER_CHANNEL] = False
    rows = []
    for scheme in OUTLIER_SCHEMES:
        deq, per_scale = _quantize(x, scheme)
        rows.append({"scheme": scheme, "values per scale": per_scale,
                     "SQNR (dB)": formats.sqnr_db(x[:, ordinary], deq[:, ordinary]),
                     "flushed to zero": formats.fraction_flushed(x[:, ordinary],
                                                                 deq[:, ordinary]),
                     "element": "FP4 (E2M1)" if "fp4" in scheme else "FP8 (E4M3)"})
    return pd.DataFrame(rows)


def outlier_controls():
    """The distribution of the ordinary values and the size of the outlier channel."""
    return [Choice("distribution", DISTRIBUTIONS, "normal", label="distribution"),
            Slider("outlier_log10", 0.0, 4.0, 0.5, 2.0, label="outlier channel: log10(x std)")]


OUTLIER_CHART = dict(x="values per scale:Q", y="SQNR (dB):Q", color="scheme:N", mark="point",
                     x_scale="log", title="Quantization SNR vs block size, one outlier channel",
                     tooltip=["scheme", "values per scale", "SQNR (dB)", "flushed to zero"])


# ----------------------------------------------------------------------------- speed
LADDER_GPUS = ("H100", "B200", "GB300")
LADDER_PRECISIONS = ("tf32", "bf16", "fp8", "fp6", "fp4")


def ladder(gpus=LADDER_GPUS, precisions=LADDER_PRECISIONS) -> pd.DataFrame:
    """Dense and sparse peak TFLOP/s by precision from the registry, with the ratio to BF16."""
    rows = []
    for name in gpus:
        g = hardware.gpu(name)
        for p in precisions:
            if p not in g.precisions():
                continue
            sparse = (g.peak_flops(p, sparse=True) if p in g.sparse_precisions() else np.nan)
            rows.append({"GPU": g.name, "precision": p,
                         "dense TFLOP/s": g.peak_flops(p) / units.TERA,
                         "sparse TFLOP/s": sparse / units.TERA,
                         "x BF16 (dense)": g.peak_flops(p) / g.peak_flops("bf16")})
    return pd.DataFrame(rows).set_index(["GPU", "precision"])


#: (GPU, scheme) pairs the Amdahl explorer draws: each GPU with the formats it runs natively.
AMDAHL_CONFIGS = (("H100", "fp8_tensor"), ("H100", "fp8_block"), ("B200", "mxfp8"),
                  ("B200", "nvfp4"), ("GB300", "nvfp4"))
AMDAHL_TOKENS = 4096  # one 4096-token sequence per micro-batch


@functools.cache
def _gpu(name):
    # the registry resolves names through pandas; the static explorer asks thousands of times
    return hardware.gpu(name)


def amdahl(log2_hidden: int = 13, relative_efficiency: float = 1.0,
           fused: str = "no") -> pd.DataFrame:
    """Step speedup over BF16 against the GEMM share of the BF16 step, per GPU and scheme,
    from :func:`companion.speedup.step_speedup` (MLP up-projection as the GEMM shape)."""
    checks.choice("fused", fused, ("no", "yes"))
    # 2**30 is far past any model's hidden size; larger exponents only build huge integers
    hidden = 2 ** checks.number("log2_hidden", log2_hidden, integer=True, minimum=0, maximum=30)
    rows = []
    for gpu, scheme in AMDAHL_CONFIGS:
        label = f"{gpu} {scheme}"
        for f in np.linspace(0, 1, 21):
            rows.append({"config": label, "GEMM share of BF16 step": float(f),
                         "step speedup": speedup.step_speedup(
                             float(f), AMDAHL_TOKENS, hidden, _gpu(gpu), scheme,
                             relative_efficiency, fused == "yes")})
    return pd.DataFrame(rows)


def amdahl_controls():
    """Hidden size, relative GEMM efficiency and fusion of the quantization kernels."""
    return [Slider("log2_hidden", 10, 14, 1, 13, label="log2(hidden)"),
            Slider("relative_efficiency", 0.5, 1.0, 0.1, 1.0,
                   label="low-precision GEMM efficiency vs BF16"),
            Choice("fused", ("no", "yes"), "no", label="quantization fused")]


AMDAHL_CHART = dict(x="GEMM share of BF16 step:Q", y="step speedup:Q", color="config:N",
                    mark="line", title="End-to-end speedup over BF16 (Amdahl + quantization)",
                    tooltip=["config", "GEMM share of BF16 step", "step speedup"])


# ----------------------------------------------------------------------------- the sweeps
def sweep_frame(results: list[dict]) -> pd.DataFrame:
    """One row per recorded run (:func:`companion.experiment.load_sweep`): recipe, remedy,
    gain, lr, seed, ``final loss`` (a run that diverged counts at the uniform loss, as in
    :func:`companion.seedstats.final_losses`) and the flags."""
    return seedstats.final_losses(results).rename(columns={"final": "final loss"})


def complete_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the seeds that have a run in every cell of the grid (a sweep still running,
    or cut short, leaves its last seed incomplete; paired statistics need whole seeds)."""
    cells = ["recipe", "remedy", "gain", "lr"]
    n_cells = len(frame.drop_duplicates(cells))
    per_seed = frame.drop_duplicates(cells + ["seed"]).groupby("seed").size()
    return frame[frame["seed"].isin(per_seed[per_seed == n_cells].index)]


def _stats(frame):
    return frame.rename(columns={"final loss": "final"})


def sweep_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Final loss by recipe (rows) and learning rate (columns): mean over seeds."""
    return frame.pivot_table(index="recipe", columns="lr", values="final loss",
                             aggfunc="mean", sort=False)


def spread_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Seed-to-seed standard deviation of the final loss, by recipe and learning rate."""
    return frame.pivot_table(index="recipe", columns="lr", values="final loss",
                             aggfunc="std", sort=False)


def optimum_table(frame: pd.DataFrame, reference: str = "bf16") -> pd.DataFrame:
    """Per recipe: the loss-optimal learning rate with its 95% bootstrap interval over seeds,
    how many times lower it is than ``reference``'s (paired interval) and the verdict on
    "needs a 2x (or more) lower rate" (:func:`companion.seedstats.lr_verdict`)."""
    f = _stats(frame)
    rows = []
    for recipe in dict.fromkeys(f["recipe"]):
        opt = seedstats.optimum_lr(f, recipe)
        row = {"recipe": recipe, "optimal lr": opt["lr"], "lr lo": opt["lo"],
               "lr hi": opt["hi"], "at grid edge": opt["at_edge"],
               "loss at best grid lr": opt["loss"], "seeds": opt["n_seeds"]}
        if recipe != reference:
            r = seedstats.lr_ratio(f, recipe, reference)
            row.update({f"{reference} / recipe": r["ratio"], "ratio lo": r["lo"],
                        "ratio hi": r["hi"], "2x lower?": seedstats.lr_verdict(r)})
        rows.append(row)
    return pd.DataFrame(rows).set_index("recipe")


def gap_table(frame: pd.DataFrame, lr: float, reference: str = "bf16") -> pd.DataFrame:
    """Paired loss difference of every recipe against ``reference`` at one learning rate:
    mean over seeds and its 95% Student-t interval (nats; positive = worse)."""
    f = _stats(frame)
    f = f[np.isclose(f["lr"], lr)]
    ref = f[f["recipe"] == reference].set_index("seed")["final"]
    rows = []
    for recipe, df in f.groupby("recipe", sort=False):
        if recipe == reference:
            continue
        mine = df.set_index("seed")["final"]
        seeds = sorted(set(mine.index) & set(ref.index))
        d = seedstats.paired_difference(mine[seeds].to_numpy(), ref[seeds].to_numpy())
        rows.append({"recipe": recipe, "gap (nats)": d["mean"], "gap lo": d["lo"],
                     "gap hi": d["hi"], "seeds": d["n"]})
    return pd.DataFrame(rows).set_index("recipe")


def outlier_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Experiment 2: per outlier gain and arm (recipe + remedy), the mean final loss and the
    paired gap to BF16 at the same gain with its 95% interval."""
    f = _stats(frame).copy()
    f["arm"] = np.where(f["remedy"] == "none", f["recipe"], f["recipe"] + " + " + f["remedy"])
    rows = []
    for gain, g in f.groupby("gain"):
        ref = g[g["arm"] == "bf16"].set_index("seed")["final"]
        for arm, df in g.groupby("arm", sort=False):
            mine = df.set_index("seed")["final"]
            row = {"gain": gain, "arm": arm, "mean loss": float(mine.mean()),
                   "seeds": len(mine), "diverged": int(df["diverged"].sum())}
            if arm != "bf16":
                seeds = sorted(set(mine.index) & set(ref.index))
                d = seedstats.paired_difference(mine[seeds].to_numpy(), ref[seeds].to_numpy())
                row.update({"gap to bf16": d["mean"], "gap lo": d["lo"], "gap hi": d["hi"]})
            rows.append(row)
    return pd.DataFrame(rows).set_index(["gain", "arm"])


def sweep_chart(frame: pd.DataFrame, entropies: dict) -> alt.Chart:
    """Final held-out loss against peak learning rate: the seed mean per recipe (line) and
    every seed (points), with the language's entropies (``{"label": nats}``) as rules."""
    order = list(dict.fromkeys(frame["recipe"]))
    mean = frame.groupby(["recipe", "lr"], sort=False, as_index=False)["final loss"].mean()
    color = alt.Color("recipe:N", sort=order)
    x = alt.X("lr:Q", scale=alt.Scale(type="log"), title="peak learning rate")
    y = alt.Y("final loss:Q", title="held-out loss (nats/token)", scale=alt.Scale(zero=False))
    lines = alt.Chart(mean).mark_line(point=True).encode(x=x, y=y, color=color,
                                                         tooltip=["recipe", "lr", "final loss"])
    dots = alt.Chart(frame).mark_point(opacity=0.35, size=18).encode(
        x=x, y=y, color=color, tooltip=["recipe", "lr", "seed", "final loss", "learned"])
    rules = pd.DataFrame({"reference": list(entropies), "nats": list(entropies.values())})
    rule = alt.Chart(rules).mark_rule(strokeDash=[4, 4], color="gray").encode(
        y="nats:Q", tooltip=["reference", "nats"])
    text = alt.Chart(rules).mark_text(align="left", dx=4, dy=-6, color="gray").encode(
        y="nats:Q", x=alt.value(0), text="reference:N")
    return (rule + text + dots + lines).properties(
        width=520, height=320,
        title="Final loss vs learning rate: seed mean (lines) and each seed (points)")


def outlier_chart(table: pd.DataFrame) -> alt.Chart:
    """Experiment 2: paired gap to BF16 per arm and outlier gain, with 95% intervals."""
    t = table.reset_index().dropna(subset=["gap to bf16"])
    t["gain"] = t["gain"].map(lambda g: f"{g:.0e}")
    base = alt.Chart(t).encode(y=alt.Y("arm:N", title=None, sort=list(dict.fromkeys(t["arm"]))),
                               color="gain:N", yOffset="gain:N")
    bars = base.mark_rule().encode(x=alt.X("gap lo:Q", title="final loss minus BF16's (nats)"),
                                   x2="gap hi:Q")
    dots = base.mark_point(filled=True).encode(
        x="gap to bf16:Q", tooltip=["arm", "gain", "gap to bf16", "gap lo", "gap hi"])
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="gray").encode(x="x:Q")
    return (zero + bars + dots).properties(
        width=480, height=260, title="Outlier channels: loss gap to BF16 (mean, 95% interval)")


def loss_curves(results: list[dict], lr: float, seed: int = 0, every: int = 3) -> pd.DataFrame:
    """Training-loss curves of every recipe at one learning rate and seed of a sweep."""
    rows = []
    for r in results:
        if not math.isclose(r["lr"], lr, rel_tol=1e-9) or r["seed"] != seed:
            continue
        for step in range(0, len(r["loss"]), every):
            v = r["loss"][step]
            if v is not None:
                rows.append({"recipe": r["recipe"], "step": step, "training loss": v})
    return pd.DataFrame(rows)


def mx_rule_table(n: int = 1 << 16, seed: int = 0) -> pd.DataFrame:
    """SQNR and saturated share of normal values under MXFP8 (E4M3) with the OCP floor rule
    and TransformerEngine's round-up rule, next to per-tensor E4M3."""
    x = np.random.default_rng(seed).standard_normal((n // 1024, 1024)).astype(np.float32)
    rows = []
    for label, scheme, kw in (("per-tensor E4M3", "fp8_e4m3_tensor", {}),
                              ("MXFP8, OCP floor", "mxfp8_e4m3", {"scale_rule": "floor"}),
                              ("MXFP8, TE round-up", "mxfp8_e4m3", {"scale_rule": "up"})):
        q = formats.quant_stats(x, scheme, **kw)
        rows.append({"scaling": label, "SQNR (dB)": q.sqnr_db, "saturated": q.fraction_clipped})
    return pd.DataFrame(rows).set_index("scaling")


# ----------------------------------------------------------------------------- measurements
_PRECISION_OF_BENCH = {"tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8",
                       "fp4": "fp4"}


def gemm_records_table(records) -> pd.DataFrame:
    """Best measured TFLOP/s of each recorded GEMM (dtype, shape) against the registry's dense
    peak for that device and precision (NaN where the device is not in the registry, e.g. a
    CPU)."""
    rows = []
    for rec in records:
        device = rec.get("meta", {}).get("device", "?")
        try:
            g = hardware.gpu(device)
        except (ValueError, TypeError):
            g = None
        for r in rec.get("results", []):
            if r.get("status") != "ok":
                continue
            p = _PRECISION_OF_BENCH.get(r["dtype"])
            peak = g.peak_flops(p) if g is not None and p in g.precisions() else np.nan
            rows.append({"record": rec.get("path", ""), "device": device, "dtype": r["dtype"],
                         "shape": f"{r['m']}x{r['n']}x{r['k']}",
                         "best TFLOP/s": r["best_flops"] / units.TERA,
                         "peak TFLOP/s": peak / units.TERA,
                         "fraction of peak": r["best_flops"] / peak})
    return pd.DataFrame(rows, columns=["record", "device", "dtype", "shape", "best TFLOP/s",
                                       "peak TFLOP/s", "fraction of peak"])


def published_mamf() -> pd.DataFrame:
    """The published best-shape matmul TFLOP/s (``kind == "gemm"`` rows of
    ``data/published_measurements.csv``: Stas Bekman's mamf-finder table, and where it has no
    row a square-shape sweep, which can only understate the best shape) against the
    registry's dense peaks, with each record's method: the same records the step-time model
    prices GEMMs with (:func:`companion.calibration.mamf_records`)."""
    rec = calibration.mamf_records()
    what = calibration.measurements("gemm")["what"].reindex(rec["id"]).to_numpy()
    method = ["square-shape sweep (a lower bound)" if "square" in w else "mamf-finder"
              for w in what]
    return pd.DataFrame({"GPU": rec["gpu"], "precision": rec["precision"],
                         "measured TFLOP/s (published)": rec["measured_flops"] / units.TERA,
                         "peak TFLOP/s": rec["peak_flops"] / units.TERA,
                         "fraction of peak": rec["fraction"], "method": method}
                        ).set_index(["GPU", "precision"])


def replay_frame(live: dict, results: list[dict], lr: float, seed: int = 0) -> pd.DataFrame:
    """Training-loss curves of runs just made (``{recipe: run dict}``) next to the same
    recipes' recorded curves at learning rate ``lr`` and ``seed``, over the steps the live
    runs made."""
    rows = []
    recorded = {r["recipe"]: r for r in results
                if math.isclose(r["lr"], lr) and r["seed"] == seed}
    for recipe, run in live.items():
        for source, losses in (("this run", run["loss"]),
                               ("recorded", recorded[recipe]["loss"][:len(run["loss"])])):
            rows += [{"recipe": recipe, "source": source, "step": i, "training loss": v}
                     for i, v in enumerate(losses)]
    return pd.DataFrame(rows)


def curve_chart(frame: pd.DataFrame, title: str) -> alt.Chart:
    """Loss curves, one colour per recipe and one dash per source."""
    enc = {"x": "step:Q", "y": alt.Y("training loss:Q", scale=alt.Scale(zero=False)),
           "color": "recipe:N"}
    if "source" in frame:
        enc["strokeDash"] = "source:N"
    return alt.Chart(frame).mark_line().encode(**enc).properties(width=520, height=280,
                                                                 title=title)
