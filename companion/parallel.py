"""Megatron-style training step time: TP, SP, PP, DP/ZeRO, CP and EP on a real cluster.

:func:`estimate` prices one training step of a :class:`Transformer` laid out by a
:class:`Layout` on a :class:`Cluster`; :func:`search` (from :mod:`companion.search`) prices
every valid layout at once. Both run :func:`step_arrays`, written once over numpy arrays (``estimate``
passes arrays of length one), so one code path serves one layout and a million.

One step on the critical pipeline stage, per microbatch and per layer: GEMMs (the roofline
of :func:`companion.roofline.gemm_time`, with tile and wave quantization, times the
achievable fraction of :mod:`companion.calibration`), attention (fused Flash kernels or
Megatron's unfused QK^T, softmax, dropout, AV), memory-bound elementwise work, TP/SP
collectives (exposed unless the stack overlaps them with GEMMs), CP ring exchange (hidden
behind attention when it can be), and EP all-to-all. Backward GEMMs cost twice the forward;
recomputation adds a forward (``full``) or the attention core (``selective``). The pipeline
adds a bubble of (p - 1) / v microbatch-stages (Narayanan et al. 2021, Section 2.2: bubble
fraction (p - 1)/(m v)) and point-to-point sends; data parallelism adds the gradient
reduction, hidden behind the last microbatch's backward when the stack overlaps it; the
optimizer streams its state once. Collectives come from :mod:`companion.fabric`.

Software matters as much as hardware: :data:`~companion.machine.STACKS` names what each Megatron generation
did (the 2021-2022 papers ran unfused attention and exposed every collective).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from companion import checks, comm, fabric, hardware, roofline, schema
from companion.calibration import DEFAULT, Calibration
from companion.machine import STACKS, Cluster, Stack, cluster, stack
from companion.model import Layout, Transformer, check_layout, preset, presets
from companion.search import search
from companion.steptime import (FLOP_CONVENTIONS, RECOMPUTE_CODE, derived_arrays,
                                memory_arrays, model_flops_per_token, stage_layers,
                                step_arrays)


def layout_arrays(model: Transformer, layout: Layout, st: Stack, uneven: bool = False) -> dict:
    """One :class:`Layout` as the length-1 arrays :func:`step_arrays` takes."""
    zero = 1 if layout.distributed_optimizer else layout.zero_stage
    vals = dict(tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
                vpp=layout.vpp, mb=layout.microbatch, m=layout.num_microbatches,
                sp=int(layout.sequence_parallel), rc=RECOMPUTE_CODE[layout.recompute],
                zero=zero, grad_bytes=st.grad_reduce_bytes,
                stage_layers=stage_layers(model.layers, layout.pp, layout.vpp, uneven))
    return {k: np.array([v], dtype=np.int64) for k, v in vals.items()}


@dataclass(frozen=True)
class Estimate:
    """One training step of one layout: time, its breakdown, memory and utilization.

    Times are seconds per step on the critical pipeline stage. ``*_comm_s`` is the time a
    collective takes, ``*_exposed_s`` the part not hidden behind compute; the step time is
    the sum of gemm, attention, elementwise, recompute, the exposed parts, the pipeline
    point-to-point sends and bubble, and the optimizer. MFU counts model FLOPs in the
    convention ``flop_convention`` against the dense peak at the layout's precision; HFU
    adds the recomputed FLOPs.
    """

    model: str
    gpu: str
    cluster: str
    stack: str
    layout: Layout
    num_gpus: int
    step_time_s: float
    gemm_s: float
    attention_s: float
    elementwise_s: float
    recompute_s: float
    tp_comm_s: float
    tp_exposed_s: float
    cp_comm_s: float
    cp_exposed_s: float
    ep_comm_s: float
    ep_exposed_s: float
    pp_p2p_s: float
    bubble_s: float
    dp_comm_s: float
    dp_exposed_s: float
    optimizer_s: float
    memory_bytes: float
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float
    fits: bool
    reason: str
    mfu: float
    hfu: float
    model_tflops_per_gpu: float
    tokens_per_s: float
    flop_convention: str

    def breakdown(self) -> dict:
        """The parts that add up to the step time (seconds)."""
        keys = ("gemm_s", "attention_s", "elementwise_s", "recompute_s", "tp_exposed_s",
                "cp_exposed_s", "ep_exposed_s", "pp_p2p_s", "bubble_s", "dp_exposed_s",
                "optimizer_s")
        return {k: getattr(self, k) for k in keys}


def _reason(mem, capacity):
    if mem["fits"]:
        return f"fits: {mem['memory_bytes'] / 1e9:.1f} GB of {capacity / 1e9:.1f} GB"
    parts = {k: mem[k + "_bytes"] for k in ("weights", "grads", "optimizer", "activations")}
    big = max(parts, key=parts.get)
    return (f"does not fit: needs {mem['memory_bytes'] / 1e9:.1f} GB > {capacity / 1e9:.1f} GB "
            f"(largest part: {big}, {parts[big] / 1e9:.1f} GB)")


def estimate(model, layout: Layout, gpu, num_gpus: int | None = None, system=None, *,
             software="megatron-core", calibration: Calibration = DEFAULT,
             uneven_stages: bool = False, reserve_bytes: float = 0.0,
             flop_convention: str = "megatron") -> Estimate:
    """Step time, breakdown, memory and MFU of ``layout`` training ``model`` on ``gpu``.

    ``model`` is a :class:`Transformer` or a preset name; ``gpu`` a registry name or spec;
    ``num_gpus`` (default ``layout.num_gpus``) must equal tp x pp x dp x cp; ``system`` a
    registry system name, a :class:`Cluster`, or None for the GPU's usual node (see
    :func:`cluster`); ``software`` a :data:`~companion.machine.STACKS` name or :class:`Stack`;
    ``layout.global_batch`` must be set. A layout that does not fit in memory is still timed,
    with ``fits=False`` and the reason.
    """
    model = preset(model) if isinstance(model, str) else model
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer or one of {presets()}; got "
                        f"{type(model).__name__}")
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout; got {type(layout).__name__}")
    if layout.global_batch is None:
        raise ValueError("layout.global_batch must be set to time a step (it fixes the "
                         "number of microbatches)")
    reserve_bytes = checks.number("reserve_bytes", reserve_bytes, nonnegative=True)
    checks.boolean("uneven_stages", uneven_stages)
    g, st = hardware.gpu(gpu), stack(software)
    cl = cluster(g, system)
    num_gpus = layout.num_gpus if num_gpus is None else num_gpus
    checks.gpu_count("num_gpus", num_gpus)
    lst = stage_layers(model.layers, layout.pp, layout.vpp, uneven_stages)
    padded = replace(model, layers=lst * layout.pp) if uneven_stages else model
    check_layout(padded, layout, num_gpus)
    if uneven_stages and lst * (layout.pp - 1) >= model.layers:
        raise ValueError(f"pp={layout.pp} leaves the last stage empty for {model.layers} layers")
    X = layout_arrays(model, layout, st, uneven_stages)
    mem = memory_arrays(model, g, st, X, reserve_bytes, layout.precision)
    X.update(dense_params=mem["dense_params"], expert_params=mem["expert_params"])
    bd = step_arrays(model, g, cl, calibration, st, layout.precision, X)
    der = derived_arrays(model, g, X, bd, mem, st, layout.precision, flop_convention)
    one = {k: float(v[0]) for k, v in {**bd, **der}.items() if k != "global_batch"}
    memf = {k: float(mem[k][0]) for k in ("memory_bytes", "weights_bytes", "grads_bytes",
                                           "optimizer_bytes", "activations_bytes")}
    fits = bool(mem["fits"][0])
    return Estimate(model.name, g.name, cl.name, st.name, layout, num_gpus, **one, **memf,
                    capacity_bytes=g.hbm_bytes, fits=fits,
                    reason=_reason({**memf, "fits": fits}, g.hbm_bytes),
                    flop_convention=flop_convention)


# -- published runs ---------------------------------------------------------------------------
PUBLISHED_RUNS = Path(__file__).resolve().parents[1] / "data" / "published_runs.csv"


def _narayanan_flops(model: Transformer, global_batch: int) -> float:
    """Narayanan et al. 2021, Section 5.1: 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs per step,
    the recomputed forward pass included (their Table 1's teraFLOP/s use it)."""
    s, l, h, v = model.seq_len, model.layers, model.hidden, model.vocab
    return 96.0 * global_batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def published_runs(held_out: bool = False) -> pd.DataFrame:
    """``data/published_runs.csv`` with ``measured_step_time_s`` filled in where the source
    reports throughput and ``step_time_derived`` saying which rows were converted.

    ``held_out=False`` (default) gives the A100 runs the calibration was set on and checked
    against (Korthikanti et al. 2022 Table 5, Narayanan et al. 2021 Table 1); ``held_out=True``
    gives the later runs (H100, B200, GB200; FP8) that were never used to set anything.
    Tokens/s per GPU converts exactly: GBS x sequence / (tokens/s/GPU x GPUs). TFLOP/s per GPU
    converts with the source's own FLOP count (column ``flop_convention``; only the Narayanan
    rows need it).
    """
    if not isinstance(held_out, bool):
        raise TypeError(f"held_out must be True or False; got {held_out!r}")
    schema.check(PUBLISHED_RUNS)  # strict booleans: one "no" would make every flag truthy
    runs = pd.read_csv(PUBLISHED_RUNS)
    runs = runs[runs["held_out"].astype(bool) == held_out].reset_index(drop=True)
    derived = runs["measured_step_time_s"].isna()
    for i in runs.index[derived]:
        r = runs.loc[i]
        model = preset(r["model"])
        tokens = r["measured_tokens_per_s_per_gpu"]
        if pd.notna(tokens):
            step = r["global_batch"] * model.seq_len / (r["num_gpus"] * tokens)
        else:
            step = _narayanan_flops(model, int(r["global_batch"])) / (
                r["num_gpus"] * r["measured_tflops_per_gpu"] * 1e12)
        runs.loc[i, "measured_step_time_s"] = step
    runs["step_time_derived"] = derived
    return runs


def _needs_uneven(row) -> bool:
    # Megatron-Bridge runs Llama 3.1 405B (126 layers) with pp x vpp = 64: the remainder goes
    # to uneven stages, which estimate() prices when asked.
    return preset(row["model"]).layers % (int(row["pp"]) * int(row["vpp"])) != 0


def run_layout(row) -> Layout:
    """The :class:`Layout` of one row of :func:`published_runs`."""
    return Layout(tp=int(row["tp"]), pp=int(row["pp"]), dp=int(row["dp"]), cp=int(row["cp"]),
                  ep=int(row["ep"]), vpp=int(row["vpp"]), microbatch=int(row["microbatch"]),
                  global_batch=int(row["global_batch"]),
                  sequence_parallel=bool(row["sequence_parallel"]),
                  recompute=str(row["recompute"]), precision=str(row["precision"]),
                  zero_stage=int(row.get("zero_stage", 0)),
                  distributed_optimizer=bool(row.get("distributed_optimizer", False)))


def validate(calibration: Calibration = DEFAULT, held_out: bool = False) -> pd.DataFrame:
    """Predicted against measured step time for every published run: one row each, with the
    signed error in percent (positive: the model is slower than the run).

    ``held_out`` selects the rows as in :func:`published_runs`; held-out rows also get the
    GPU, precision, the source's FLOP convention and the predicted and reported model
    TFLOP/s per GPU in that convention.
    """
    runs = published_runs(held_out)
    ests = [estimate(r["model"], run_layout(r), r["gpu"], system=_system(r),
                     software=r["software"], calibration=calibration,
                     uneven_stages=_needs_uneven(r),
                     flop_convention=_convention(r) if held_out else "megatron")
            for _, r in runs.iterrows()]
    out = runs[["run_id", "table", "model", "gpu", "num_gpus", "tp", "pp", "dp", "vpp",
                "microbatch", "global_batch", "sequence_parallel", "recompute",
                "measured_step_time_s", "step_time_derived"]].copy()
    out["predicted_step_time_s"] = [e.step_time_s for e in ests]
    out["error_pct"] = 100 * (out["predicted_step_time_s"] / out["measured_step_time_s"] - 1)
    if held_out:
        out = out.assign(cp=runs["cp"], precision=runs["precision"],
                         flop_convention=[_convention(r) for _, r in runs.iterrows()],
                         measured_tflops_per_gpu=runs["measured_tflops_per_gpu"],
                         predicted_tflops_per_gpu=[e.model_tflops_per_gpu for e in ests],
                         predicted_mfu=[e.mfu for e in ests])
    return out


def _convention(row) -> str:
    # The CSV's flop_convention text starts with the convention's name ("megatron: ...").
    return checks.choice("flop_convention", str(row["flop_convention"]).split(":")[0],
                         FLOP_CONVENTIONS + ("narayanan",))


def _system(row):
    # The A100 rows name Selene, which is not in the registry: None picks DGX A100 for them.
    name = row.get("system")
    return name if isinstance(name, str) and name in set(hardware.systems()["name"]) else None


__all__ = ["published_runs", "run_layout", "validate", "PUBLISHED_RUNS", "search", "Transformer", "Layout", "check_layout", "preset", "presets", "Cluster", "cluster",
           "Stack", "STACKS", "stack", "FLOP_CONVENTIONS", "model_flops_per_token", "Estimate",
           "estimate", "step_arrays", "memory_arrays", "layout_arrays", "derived_arrays",
           "stage_layers"]


# ----------------------------------------------------------------------------- one TP layer
@dataclass(frozen=True)
class TPLayer:
    """One transformer layer, forward and backward, on one of ``tp`` GPUs (seconds)."""
    gpu: str
    compute_s: float
    comm_s: float
    layer_s: float
    exposed_comm_s: float
    comm_share: float
    flops: float
    gemm_mfu: float
    all_reduce_bytes: float
    bandwidth_Bps: float

    def hidden_fraction_for(self, share: float) -> float:
        """Fraction of the TP communication that must hide behind GEMMs for an exposed share
        of ``share`` of the layer time (0 if none needs hiding)."""
        share = checks.number("share", share, minimum=0, maximum=0.999)
        exposed = share / (1 - share) * self.compute_s
        return max(0.0, 1 - exposed / self.comm_s)


def _layer_gemms(hidden, heads, ffn_hidden, seq_len, micro_batch, tp):
    """Forward GEMMs of one Megatron TP rank, as (m, n, k, batch): QKV, scores, values,
    projection, FC1, FC2 (Shoeybi et al. 2019, column- then row-parallel)."""
    tokens, d = micro_batch * seq_len, hidden // heads
    heads_rank = heads // tp
    return [(tokens, 3 * hidden // tp, hidden, 1),
            (seq_len, seq_len, d, micro_batch * heads_rank),
            (seq_len, d, seq_len, micro_batch * heads_rank),
            (tokens, hidden, hidden // tp, 1),
            (tokens, ffn_hidden // tp, hidden, 1),
            (tokens, hidden, ffn_hidden // tp, 1)]


def tp_layer(gpu: str = "H100", hidden: int = 5120, heads: int = 40, ffn_hidden: int | None = None,
             seq_len: int = 4096, micro_batch: int = 1, tp: int = 8, algorithm: str = "ring",
             overlap: bool = False, link_efficiency: float = 1.0) -> TPLayer:
    """Share of a layer's time spent in tensor-parallel all-reduces (a GPT layer, 4h MLP).

    Compute: every forward GEMM of one rank (QKV, scores, values, projection, FC1, FC2) timed by
    :func:`companion.roofline.gemm_time` (roofline with tile and wave quantization), and the
    backward pass as two GEMMs of the same size per forward GEMM (data and weight gradients),
    so 3x the forward FLOPs (72bsh^2 + 12bs^2h in all, Narayanan et al. 2021). Elementwise
    ops, layernorm and softmax are left out. Communication: four all-reduces of the
    activations (b s h bf16 values) per layer, two forward and two backward (Megatron's f and
    g operators), over ``tp`` GPUs at the GPU's per-direction NVLink bandwidth from the
    registry times ``link_efficiency``. ``overlap=True`` assumes perfect overlap (layer time
    = max of the two); ``False`` adds them.
    """
    g = hardware.gpu(gpu)
    if g.scaleup_Bps is None:
        raise ValueError(f"tp_layer needs the GPU's scale-up (NVLink) bandwidth; the registry "
                         f"has none for {g.name}: pass a GPU with one, e.g. H100 or B200")
    for p, v in (("hidden", hidden), ("heads", heads), ("seq_len", seq_len),
                 ("micro_batch", micro_batch), ("tp", tp)):
        checks.number(p, v, integer=True, minimum=1)
    ffn = 4 * hidden if ffn_hidden is None else checks.number("ffn_hidden", ffn_hidden,
                                                              integer=True, minimum=1)
    checks.divides("heads", heads, "hidden", hidden)
    checks.divides("tp", tp, "heads", heads)
    checks.divides("tp", tp, "ffn_hidden", ffn)
    eff = checks.number("link_efficiency", link_efficiency, positive=True, maximum=1)
    checks.boolean("overlap", overlap)
    fwd_s = bwd_s = flops = 0.0
    for m, n, k, batch in _layer_gemms(hidden, heads, ffn, seq_len, micro_batch, tp):
        est = roofline.gemm_time(m, n, k, g, batch=batch)
        fwd_s += est.timing.time_s
        bwd_s += roofline.gemm_time(m, k, n, g, batch=batch).timing.time_s  # dgrad
        bwd_s += roofline.gemm_time(k, n, m, g, batch=batch).timing.time_s  # wgrad
        flops += 3 * est.cost.flops
    compute_s = fwd_s + bwd_s
    size = micro_batch * seq_len * hidden * roofline.dtype_bytes("bf16")
    bw = g.scaleup_Bps * eff
    comm_s = 4 * comm.collective_time_s("all_reduce", size, tp, bw, fabric.NCCL_NVLINK_STEP_S,
                                        algorithm=algorithm)
    layer_s = max(compute_s, comm_s) if overlap else compute_s + comm_s
    exposed = layer_s - compute_s
    return TPLayer(g.name, compute_s, comm_s, layer_s, exposed, exposed / layer_s, flops,
                   flops / compute_s / g.peak_flops("bf16"), size, bw)
