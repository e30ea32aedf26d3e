"""The published runs the step-time model is checked against, and what they say about its
uncertainty.

:func:`published_runs` reads ``data/published_runs.csv``; :func:`validate` prices every row with
:func:`companion.estimator.price`. Which rows set which constant is explicit: :func:`role` says
``fit`` (Korthikanti et al. 2022, Table 5: the one fitted constant, ``gemm_in_training``; and
the MoE runs of :data:`MOE_FITTING`: four H100 runs that set ``ep_overlap_hidden`` and two
B200 runs that bound ``overlap_host_kernel_s``), ``check``
(Narayanan et al. 2021, Table 1: predicted with the fitted value, never used to set it) or
``held out`` (everything else: no constant was set on them).
:func:`cross_validation` refits the fitted constant with each source left out in turn and
predicts that source; :func:`band` turns the cross-validated errors of the matching family
(the GPU, or its generation where it has fewer than ten runs, and precision) into a low-high
step-time band.
"""
from __future__ import annotations

import functools
import math
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from companion import checks, hardware, schema
from companion.calibration import DEFAULT, Calibration, measurements
from companion.estimator import price
from companion.machine import Stack, cluster, stack
from companion.model import Layout, Transformer, layout_text, preset
from companion.steptime import (FLOP_CONVENTIONS, RECOMPUTE_CODE, model_flops_per_token,
                                needs_slots, overlap_host_kernels, stage_layers)


PUBLISHED_RUNS = Path(__file__).resolve().parents[1] / "data" / "published_runs.csv"
#: The bands :func:`band` reads, pinned from :func:`band_table` (``python tools/pin_bands.py``
#: rewrites it; ``tests/test_validation.py`` fails when it no longer matches the computation).
BANDS_CSV = PUBLISHED_RUNS.with_name("validation_bands.csv")


def _narayanan_flops(model: Transformer, global_batch: int) -> float:
    """Narayanan et al. 2021, Section 5.1: 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs per step,
    the recomputed forward pass included (their Table 1's teraFLOP/s use it)."""
    s, l, h, v = model.seq_len, model.layers, model.hidden, model.vocab
    return 96.0 * global_batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def published_runs(held_out: bool | None = False, moe: bool | None = False) -> pd.DataFrame:
    """``data/published_runs.csv`` with ``measured_step_time_s`` filled in where the source
    reports throughput and ``step_time_derived`` saying which rows were converted.

    ``held_out=False`` (default) gives the runs a constant was set on or checked against: the
    A100 runs of Korthikanti et al. 2022 Table 5 and Narayanan et al. 2021 Table 1, and the six
    expert-overlap runs of ``companion.validation.MOE_FITTING``; ``held_out=True``
    gives the later runs (H100 to GB300) that were never used to set anything; ``None`` both.
    Tokens/s per GPU converts exactly: GBS x sequence / (tokens/s/GPU x GPUs). TFLOP/s per GPU
    converts with the source's own FLOP count: the row's ``source_gflops_per_token`` where the
    source's counter is known to differ from the companion's (DeepSeek-V3's MLA and MTP layer),
    else column ``flop_convention``: Narayanan et al.'s formula for their rows,
    :func:`companion.steptime.model_flops_per_token` for the others.
    ``moe`` picks a family: dense runs (False, default), mixture-of-experts runs (True, the
    chapter "Expert parallelism" validates them) or both (None); every MoE run but the six
    expert-overlap fitting runs is held out (the six come with ``held_out=False, moe=True``
    or ``moe=None``), and :func:`cross_validation` never fits ``gemm_in_training`` on one.
    """
    if held_out is not None and not isinstance(held_out, bool):
        raise TypeError(f"held_out must be True, False or None; got {held_out!r}")
    if moe is not None and not isinstance(moe, bool):
        raise TypeError(f"moe must be True, False or None; got {moe!r}")
    schema.check(PUBLISHED_RUNS)
    runs = pd.read_csv(PUBLISHED_RUNS)
    keep = pd.Series(True, index=runs.index)
    if held_out is not None:
        keep &= runs["held_out"].astype(bool) == held_out
    if moe is not None:
        keep &= runs["model"].map(lambda m: preset(m).is_moe) == moe
    runs = runs[keep].reset_index(drop=True)
    derived = runs["measured_step_time_s"].isna()
    for i in runs.index[derived]:
        r = runs.loc[i]
        model = preset(r["model"])
        tokens = r["measured_tokens_per_s_per_gpu"]
        if pd.notna(tokens):
            step = r["global_batch"] * model.seq_len / (r["num_gpus"] * tokens)
        else:  # the FLOPs the source counted per step, over what it reports per second
            conv = _convention(r)
            own = r.get("source_gflops_per_token", float("nan"))
            flops = (_narayanan_flops(model, int(r["global_batch"])) if conv == "narayanan"
                     else (own * 1e9 if pd.notna(own) else model_flops_per_token(model, conv))
                     * r["global_batch"] * model.seq_len)
            step = flops / (r["num_gpus"] * r["measured_tflops_per_gpu"] * 1e12)
        runs.loc[i, "measured_step_time_s"] = step
    runs["step_time_derived"] = derived
    return runs


def pipeline_split(row) -> dict:
    """How a published run splits its layers over pipeline stages, as keyword arguments of
    :func:`~companion.estimator.price`: nothing where pp x vpp divides the layers;
    ``embedding_loss_slots`` where it divides layers + 2 instead, as in every run of that kind
    here (Llama 3.1 405B's 126 layers, Qwen3-235B-A22B's 94): their recipes set Megatron's
    ``account_for_embedding_in_pipeline_split`` and ``account_for_loss_in_pipeline_split``
    (Megatron-Bridge ``src/megatron/bridge/recipes/llama/llama31_405b.py`` @3594df94 and
    ``recipes/qwen/qwen3_moe.py`` @2afd2d34 ``qwen3_235b_a22b_pretrain_config``; NVIDIA
    CloudAI's NeMo 2 ``cloudai_llama3_405b_recipe``; MLPerf Training's 405B configs,
    ``ASYM_PP_EMBED=True``, ``ASYM_PP_LOSS=True``; the Megatron-LM MoE recipes' Qwen3-235B);
    ``uneven_stages`` for the rest (DeepSeek-V3's explicit pipeline layouts are priced as
    padded stages)."""
    L, pp, vpp = preset(row["model"]).layers, int(row["pp"]), int(row["vpp"])
    if needs_slots(L, pp, vpp):
        return {"embedding_loss_slots": True}
    return {"uneven_stages": True} if L % (pp * vpp) else {}


def _row_fields(row, fields) -> None:
    """Raise TypeError unless ``row`` is a mapping with ``fields`` (a row of published_runs)."""
    if not hasattr(row, "keys") or any(f not in row.keys() for f in fields):
        raise TypeError(f"row must be a row of published_runs() (a pandas Series with "
                        f"{', '.join(fields)}); got {type(row).__name__}")


def run_layout(row) -> Layout:
    """The :class:`~companion.model.Layout` of one row of :func:`published_runs`."""
    _row_fields(row, ("tp", "pp", "dp", "cp", "ep", "vpp", "microbatch", "global_batch",
                      "sequence_parallel", "recompute", "precision"))
    return Layout(tp=int(row["tp"]), pp=int(row["pp"]), dp=int(row["dp"]), cp=int(row["cp"]),
                  ep=int(row["ep"]), vpp=int(row["vpp"]), microbatch=int(row["microbatch"]),
                  global_batch=int(row["global_batch"]),
                  sequence_parallel=bool(row["sequence_parallel"]),
                  recompute=str(row["recompute"]), precision=str(row["precision"]),
                  zero_stage=int(row.get("zero_stage", 0)),
                  distributed_optimizer=bool(row.get("distributed_optimizer", False)),
                  etp=None if pd.isna(row.get("expert_tp")) else int(row["expert_tp"]),
                  dispatch_precision=None if pd.isna(row.get("dispatch_precision"))
                  else str(row["dispatch_precision"]))


def _given(value) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value)) and value != ""


def _true(value) -> bool:
    return str(value).strip().lower() in ("true", "1")


@functools.lru_cache(maxsize=64)
def _run_stack(software: str, grad_bytes, graphs, ep_overlap=None, dispatcher=None,
               attention=None, bucket=None) -> Stack:
    st = stack(software)
    if _given(bucket):
        st = replace(st, ddp_bucket_params=bucket)  # Stack checks it and makes it an int
    if _given(attention):
        st = replace(st, attention_kernel=str(attention))
    if _given(grad_bytes):
        st = replace(st, grad_reduce_bytes=int(grad_bytes))
    if _given(graphs):
        st = replace(st, cuda_graphs=_true(graphs))
    if _given(ep_overlap):
        st = replace(st, overlap_ep=_true(ep_overlap))
    if _given(dispatcher):
        st = replace(st, moe_dispatcher=str(dispatcher))
    return st


def run_stack(row) -> Stack:
    """The :class:`~companion.machine.Stack` a published run ran: its ``software`` column's
    stack, with the row's own ``grad_reduce_bytes``, ``cuda_graphs`` and ``ep_overlap`` (the
    expert all-to-all hidden behind compute, as Megatron-Core's
    ``--overlap-moe-expert-parallel-comm`` does) and ``dispatcher`` (``alltoall``: Megatron's
    NCCL all-to-all token dispatcher; ``deepep``: its flex dispatcher with DeepEP or HybridEP)
    and ``attention_kernel`` (``flash-attn-2`` where the run's launcher switched cuDNN
    attention off) where the CSV gives them (empty: the stack's default). NVIDIA's performance configurations
    reduce gradients in BF16 (Megatron-Bridge ``scripts/performance/configs/llama/llama3_llm_pretrain.py``,
    ``set_llama3_common_configs``: ``grad_reduce_in_fp32 = False``; NeMo 2's
    ``scripts/performance/llm`` likewise), against the FP32 default of Megatron-LM's
    ``--bf16`` and Megatron-Bridge's library recipes; the same set runs Llama 3 8B on
    Blackwell with full-iteration CUDA graphs (``llama3_workload_base_configs.py``:
    ``cuda_graph_scope="full_iteration"``)."""
    return _run_stack(str(row["software"]), row.get("grad_reduce_bytes"), row.get("cuda_graphs"),
                      row.get("ep_overlap"), row.get("dispatcher"), row.get("attention_kernel"),
                      row.get("ddp_bucket_params"))


def validate(calibration: Calibration = DEFAULT, held_out: bool = False,
             moe: bool | None = False) -> pd.DataFrame:
    """Predicted against measured step time for every published run: one row each, with the
    signed error in percent (positive: the model is slower than the run).

    ``held_out`` and ``moe`` select the rows as in :func:`published_runs`; held-out rows also get the
    GPU, precision, the source's FLOP convention and the predicted and reported model
    TFLOP/s per GPU in that convention.
    """
    runs = published_runs(held_out, moe)
    ests = [_price_row(r, calibration,
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


def _price_row(row, calibration: Calibration, software: Stack | None = None,
               split: dict | None = None, **kw):
    """The model's estimate of one published run, as the run was laid out and configured
    (``software``: another stack in place of the run's own; ``split``: another pipeline
    split in place of :func:`pipeline_split`'s)."""
    offload = row.get("offload_layers")
    return price(row["model"], run_layout(row), row["gpu"], system=run_cluster(row),
                 software=run_stack(row) if software is None else software,
                 calibration=calibration, **(pipeline_split(row) if split is None else split),
                 offload_layers=int(offload) if _given(offload) else 0, **kw)


def run_estimate(row, calibration: Calibration = DEFAULT):
    """The model's :class:`~companion.estimator.Estimate` of one published run (a row of
    :func:`published_runs`) as the run was laid out and configured: its stack
    (:func:`run_stack`), system (:func:`run_cluster`), pipeline split
    (:func:`pipeline_split`) and activation offload (``offload_layers``)."""
    return _price_row(row, calibration)


def errors_with_stack(run_ids, calibration: Calibration = DEFAULT, *, split: dict | None = None,
                      **stack_fields) -> pd.Series:
    """Signed step-time error (percent, positive: the model is slower) of the published runs
    ``run_ids`` priced with their stack changed by ``stack_fields`` (fields of
    :class:`~companion.machine.Stack`, e.g. ``attention_kernel="cudnn"``) and, if given, their
    pipeline split replaced by ``split`` (``{"uneven_stages": True}``: padded stages in place
    of the embedding and loss slots): what a row's own facts explain, shown by taking one
    away."""
    known = {f.name for f in fields(Stack)} - {"name"}
    wrong = sorted(set(stack_fields) - known)
    if wrong:
        raise TypeError(f"errors_with_stack got {', '.join(wrong)}; Stack fields are "
                        f"{', '.join(sorted(known))}")
    runs = published_runs(True, None).set_index("run_id")
    missing = [r for r in run_ids if r not in runs.index]
    if missing:
        raise ValueError(f"unknown run_ids {missing[:3]}; see data/published_runs.csv")
    out = {}
    for rid in run_ids:
        row = runs.loc[rid]
        est = _price_row(row, calibration, replace(run_stack(row), **stack_fields), split)
        out[rid] = 100 * (est.step_time_s / row["measured_step_time_s"] - 1)
    return pd.Series(out, name="error_pct")


def _convention(row) -> str:
    # The CSV's flop_convention text starts with the convention's name ("megatron: ...").
    return checks.choice("flop_convention", str(row["flop_convention"]).split(":")[0],
                         FLOP_CONVENTIONS + ("narayanan",))


def run_cluster(row):
    """The system a published run ran on, as :func:`companion.estimator.price` takes it: the
    row's ``system`` (None where the registry lacks it, e.g. Selene: the GPU's usual node),
    or, where the row gives ``domain_gpus``, that system's cluster with that many GPUs in
    each scale-up domain (the job's ranks packed into part of each NVL72 rack)."""
    name = row.get("system")
    name = name if isinstance(name, str) and name in _system_names() else None
    # A job that places fewer ranks in each scale-up domain than the domain holds (Megatron's
    # HybridEP told NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=64 on 72-GPU NVL72 racks) packs
    # its ranks into domains of that size
    if _given(row.get("domain_gpus")):
        full = cluster(row["gpu"], name)
        return replace(full, name=f"{full.name} ({int(row['domain_gpus'])} GPUs per domain)",
                       gpus_per_domain=int(row["domain_gpus"]))
    return name


@functools.cache
def _system_names() -> frozenset:
    return frozenset(hardware.systems()["name"])




# -- who sets what, and what the rest say ---------------------------------------------------------
ROLES = ("fit", "check", "held out")
#: The fitting subsets: the only rows any constant was set on. Dense: ``gemm_in_training``.
FITTING_SUBSET = "Korthikanti et al. 2022, Table 5"
#: MoE: ``ep_overlap_hidden``, from the two published pairs of one layout run without and with
#: the expert overlap, (without, with): the Megatron MoE model zoo's Qwen3-235B-A22B on 256 H100
#: with DeepEP, and Megatron-Bridge pull request 3862's Qwen3-30B-A3B on 16 H100 with the NCCL
#: all-to-all dispatcher.
EP_OVERLAP_PAIRS = (("mcore_modelzoo_h100_qwen3_235b_ep32_deepep",
                     "mcore_modelzoo_h100_qwen3_235b_ep32_deepep_overlap"),
                    ("bridgepr3862_h100_qwen3_30b_a3b_16_bf16_alltoall",
                     "bridgepr3862_h100_qwen3_30b_a3b_16_bf16_alltoall_overlap"))
#: the runs of :data:`EP_OVERLAP_PAIRS`
EP_OVERLAP_FITTING = tuple(run for pair in EP_OVERLAP_PAIRS for run in pair)
#: MoE: ``overlap_host_kernel_s``, bounded by the two runs with the expert overlap of
#: Megatron-Bridge pull request 1760's pairs: Qwen3-235B-A22B on 64 B200 before the PR turned
#: the overlap off "due to CPU overhead", MXFP8 (20.05 s, the 25.11 table's run; the PR says
#: 20.1 s) and BF16 (17.2 s).
OVERLAP_HOST_FITTING = ("bridge2511_b200_qwen3_235b_a22b_fp8mx",
                        "bridgepr1760_b200_qwen3_235b_a22b_bf16_overlap")
#: the pull request's pairs, (without, with) the overlap: the runs without it (16.9 s MXFP8,
#: 16.0 s BF16) set nothing and are held out
OVERLAP_HOST_PAIRS = (("bridgepr1760_b200_qwen3_235b_a22b_fp8mx", OVERLAP_HOST_FITTING[0]),
                      ("bridgepr1760_b200_qwen3_235b_a22b_bf16", OVERLAP_HOST_FITTING[1]))
#: the MoE family's fitting rows: no fold refits their constants, so their residuals are
#: in-sample and bands skip them
MOE_FITTING = EP_OVERLAP_FITTING + OVERLAP_HOST_FITTING


def role(row) -> str:
    """``fit`` for the fitting subsets (Korthikanti et al. 2022, Table 5; the MoE pairs
    :data:`companion.validation.MOE_FITTING`), ``check`` for Narayanan et al.
    2021, Table 1 (predicted with the fitted constant), ``held out`` for the rest (no
    constant was set on them)."""
    _row_fields(row, ("held_out", "run_id"))
    if bool(row["held_out"]):
        return "held out"
    rid = str(row["run_id"])
    return "fit" if rid.startswith("korthikanti") or rid in MOE_FITTING else "check"


def source(row) -> str:
    """The publication a row comes from, the unit of leave-one-source-out cross-validation:
    a paper's table, one release of a framework's performance table, one MLPerf Training
    round, or one pull request."""
    table = str(row["table"])
    if table.startswith("Table"):
        return f"{str(row['run_id']).split('_')[0]} {table}"
    if table.startswith("dgxc"):
        return "DGX Cloud benchmarking recipes"
    # "MLPerf Training v5.1 405B" -> its round; "Megatron-Bridge PR 1760 DGX-B200" -> its PR
    words = 3 if table.startswith(("MLPerf Training", "Megatron-Bridge PR")) else 2
    return " ".join(table.split()[:words])


def generation(gpu) -> str:
    """GPU architecture family, e.g. "NVIDIA Hopper" (H100 and H200 share it):
    :attr:`companion.hardware.GPU.family`."""
    return hardware.gpu(gpu).family


def every_run(calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """:func:`validate` of every published run with its role, source and families: GPU
    generation, precision, dense or MoE, software (the source's release)."""
    parts = []
    for held in (False, True):
        v = validate(calibration, held_out=held, moe=None)
        runs = published_runs(held, moe=None)
        v = v.assign(precision=runs["precision"], software=runs["software"],
                     role=[role(r) for _, r in runs.iterrows()],
                     source=[source(r) for _, r in runs.iterrows()])
        parts.append(v)
    out = pd.concat(parts, ignore_index=True)
    out["generation"] = [generation(g) for g in out["gpu"]]
    out["moe"] = np.where([preset(m).is_moe for m in out["model"]], "MoE", "dense")
    return out


# the fitted constant is refitted over this range (the physical range of the module
# docstring of companion.calibration)
_FIT_GRID = np.linspace(0.70, 1.0, 301)


def _linearized(calibration: Calibration) -> pd.DataFrame:
    """Every run priced at two values of ``gemm_in_training``: the step is a + b / g to first
    order (GEMM time scales as 1 / g), so any refit is arithmetic."""
    lo, hi = 0.80, 0.95
    a = every_run(replace(calibration, gemm_in_training=lo))
    b = every_run(replace(calibration, gemm_in_training=hi))
    slope = (a["predicted_step_time_s"] - b["predicted_step_time_s"]) / (1 / lo - 1 / hi)
    a["b"] = slope
    a["a"] = a["predicted_step_time_s"] - slope / lo
    return a


def _fit(rows: pd.DataFrame) -> float:
    """The grid value of gemm_in_training minimizing the squared log error over ``rows``."""
    pred = rows["a"].to_numpy()[:, None] + rows["b"].to_numpy()[:, None] / _FIT_GRID[None, :]
    err = np.log(pred / rows["measured_step_time_s"].to_numpy()[:, None])
    return float(_FIT_GRID[np.argmin((err ** 2).sum(axis=0))])


def cross_validation(calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """Leave-one-source-out cross-validation: for each source, ``gemm_in_training`` is refitted
    on every other source's rows and that source's rows are predicted with it. One row per
    published run: role, source, families, the production prediction and error, the refitted
    value (``fold_gemm_in_training``), the cross-validated prediction and its error in percent
    (positive: the model is slower), and the ratio measured / predicted that :func:`band`
    reads. Computed once per process and calibration (a few seconds); a copy: edit freely."""
    return _cross_validation(calibration).copy()


@functools.cache
def _cross_validation(calibration: Calibration) -> pd.DataFrame:
    lin = _linearized(calibration)
    out = lin.drop(columns=["a", "b"]).copy()
    # the production prediction (the fitting subset's constant), next to the folds'
    out["predicted_step_time_s"] = lin["a"] + lin["b"] / calibration.gemm_in_training
    out["error_pct"] = 100 * (out["predicted_step_time_s"] / out["measured_step_time_s"] - 1)
    # no fold fits gemm_in_training on an MoE run (the MoE fitting runs set ep_overlap_hidden
    # and overlap_host_kernel_s, which no fold refits: their residuals are in-sample, and bands
    # skip them)
    dense = lin["moe"] == "dense"
    for src in lin["source"].unique():
        mask = lin["source"] == src
        g = _fit(lin[~mask & dense])
        out.loc[mask, "fold_gemm_in_training"] = g
        out.loc[mask, "cv_predicted_step_time_s"] = lin.loc[mask, "a"] + lin.loc[mask, "b"] / g
    out["cv_error_pct"] = 100 * (out["cv_predicted_step_time_s"] / out["measured_step_time_s"] - 1)
    out["ratio"] = out["measured_step_time_s"] / out["cv_predicted_step_time_s"]
    return out


def fitted_gemm_in_training(calibration: Calibration = DEFAULT) -> float:
    """``gemm_in_training`` refitted on the fitting subset alone (the value the default
    calibration should carry; a test pins that it does)."""
    lin = _linearized(calibration)
    return _fit(lin[(lin["role"] == "fit") & (lin["moe"] == "dense")])


def _ep_overlap_pairs():
    runs = published_runs(False, moe=True).set_index("run_id")
    return [(runs.loc[a], runs.loc[b]) for a, b in EP_OVERLAP_PAIRS]


def ep_overlap_measured() -> pd.Series:
    """For each pair of :data:`companion.validation.EP_OVERLAP_PAIRS` (indexed by the run
    with the overlap), its measured step with the expert overlap over the step without it:
    17.6 s / 19.7 s (DeepEP) and 31.20 s / 41.25 s (NCCL all-to-all)."""
    return pd.Series({b.name: float(b["measured_step_time_s"] / a["measured_step_time_s"])
                      for a, b in _ep_overlap_pairs()}, name="measured_ratio")


def _ep_overlap_ratios(fractions, calibration: Calibration) -> pd.DataFrame:
    # each pair's step with the overlap over its step without, one row per fraction hidden;
    # the run without the overlap does not depend on the fraction, so it is priced once
    pairs = _ep_overlap_pairs()
    plain = [_price_row(a, calibration).step_time_s for a, _ in pairs]
    rows = [[_price_row(b, replace(calibration, ep_overlap_hidden=f)).step_time_s / p
             for (_, b), p in zip(pairs, plain)] for f in fractions]
    return pd.DataFrame(rows, columns=[b.name for _, b in pairs],
                        index=pd.Index(fractions, name="ep_overlap_hidden"))


def ep_overlap_ratio(hidden: float, calibration: Calibration = DEFAULT) -> pd.Series:
    """The model's step of each pair's run with the expert overlap over the run without it
    (indexed as :func:`ep_overlap_measured`), when the overlap hides ``hidden`` of the
    hideable all-to-all."""
    return _ep_overlap_ratios([hidden], calibration).iloc[0].rename("model_ratio")


#: the fractions the expert-overlap fit tries
EP_OVERLAP_GRID = np.round(np.linspace(0.0, 1.0, 101), 2)


@functools.cache
def ep_overlap_grid(calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """:func:`ep_overlap_ratio` at every fraction of :data:`EP_OVERLAP_GRID` (rows) for each
    pair (columns)."""
    return _ep_overlap_ratios(EP_OVERLAP_GRID, calibration)


def fitted_ep_overlap_hidden(calibration: Calibration = DEFAULT) -> float:
    """``ep_overlap_hidden`` refitted on :data:`companion.validation.EP_OVERLAP_PAIRS` alone:
    the fraction (to 0.01) whose modelled ratios (:func:`ep_overlap_ratio`) come nearest the
    measured ones (:func:`ep_overlap_measured`), in the sum of squared log ratios, each pair
    weighted alike. The default calibration carries it (a test pins that)."""
    grid = ep_overlap_grid(calibration)
    miss = (np.log(grid) - np.log(ep_overlap_measured())).pow(2).sum(axis=1)
    return float(miss.idxmin())


def ep_overlap_alone(calibration: Calibration = DEFAULT) -> pd.Series:
    """The fraction each pair of :data:`EP_OVERLAP_PAIRS` would set on its own (the grid value
    whose modelled ratio is nearest its measured one): how far the pairs disagree."""
    grid = ep_overlap_grid(calibration)
    return (grid - ep_overlap_measured()).abs().idxmin().rename("alone")


def _grid_fit(grid, model_ratio, measured: float) -> float:
    # a constant set on one measured pair: the grid value whose modelled ratio is nearest
    return float(grid[np.argmin(np.abs(np.array([model_ratio(x) for x in grid]) - measured))])


def overlap_host_table() -> pd.DataFrame:
    """For each run of :data:`OVERLAP_HOST_FITTING` (indexed by run): its ``precision``, the
    ``kernels`` one layer issues per microbatch
    (:func:`~companion.steptime.overlap_host_kernels`), the ``slots`` the step model pays the
    floor in (the layers of its fullest pipeline stage times its microbatches and the bubble's
    (pp - 1) / vpp more) and ``kernel_s``, the most host time per kernel the run allows: its
    measured step over kernels x slots. A floor cannot be longer than the run it sits under."""
    runs = published_runs(None, moe=True).set_index("run_id")
    rows = {}
    for rid in OVERLAP_HOST_FITTING:
        row = runs.loc[rid]
        model, split = preset(row["model"]), pipeline_split(row)
        pp, vpp = int(row["pp"]), int(row["vpp"])
        layers = stage_layers(model.layers, pp, vpp, split.get("uneven_stages", False),
                              split.get("embedding_loss_slots", False))
        micro = int(row["global_batch"]) // (int(row["dp"]) * int(row["microbatch"]))
        kernels = int(overlap_host_kernels(model, row["precision"], run_stack(row),
                                           int(row["ep"]), RECOMPUTE_CODE[row["recompute"]]))
        slots = int(layers) * (micro + (pp - 1) / vpp)
        rows[rid] = {"precision": row["precision"], "kernels": kernels, "slots": slots,
                     "kernel_s": float(row["measured_step_time_s"]) / (kernels * slots)}
    return pd.DataFrame(rows).T.astype({"kernels": int, "slots": float, "kernel_s": float})


def overlap_host_bounds() -> pd.Series:
    """``kernel_s`` of :func:`overlap_host_table`: for each run of :data:`OVERLAP_HOST_FITTING`,
    the most host time per kernel it allows (seconds)."""
    return overlap_host_table()["kernel_s"]


def fitted_overlap_host_kernel_s() -> float:
    """``overlap_host_kernel_s`` from :data:`OVERLAP_HOST_FITTING` alone: the smallest of
    :func:`overlap_host_bounds`, rounded down to a whole microsecond. The default calibration
    carries it (a test pins that)."""
    return math.floor(overlap_host_bounds().min() * 1e6) / 1e6


def overlap_host_pairs(calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """Each pair of :data:`OVERLAP_HOST_PAIRS` (indexed by the run with the overlap): the
    measured step with the overlap over the step without it, the model's, and the model's
    with the host floor switched off."""
    runs = published_runs(None, moe=True).set_index("run_id")
    off = replace(calibration, off=calibration.off | {"overlap_host"})
    rows = {}
    for without, with_ in OVERLAP_HOST_PAIRS:
        a, b = runs.loc[without], runs.loc[with_]
        rows[with_] = {
            "measured_ratio": float(b["measured_step_time_s"] / a["measured_step_time_s"]),
            "model_ratio": _price_row(b, calibration).step_time_s
            / _price_row(a, calibration).step_time_s,
            "unpriced_ratio": _price_row(b, off).step_time_s / _price_row(a, off).step_time_s}
    return pd.DataFrame(rows).T


#: MoE: ``moe_sync_s``, from Megatron-LM's paired Qwen3-30B-A3B recipes on 16 GB200s
#: (``data/published_measurements.csv``): the dispatcher eager (partial CUDA graphs) and the
#: whole step in one CUDA graph with the sync-free paged stash.
MOE_SYNC_FITTING = ("mcore-moe-recipe-qwen3-30b-gb200-mxfp8-partial-cg",
                    "mcore-moe-recipe-qwen3-30b-gb200-mxfp8-paged-stash")


def moe_sync_measured() -> float:
    """The step of the eager-dispatcher recipe of :data:`MOE_SYNC_FITTING` over the
    whole-step-graph one (the same FLOPs per step: 598.1 / 480.3 model TFLOP/s per GPU)."""
    df = measurements()
    eager, graphed = (float(df.loc[i, "value"]) for i in MOE_SYNC_FITTING)
    return graphed / eager


def moe_sync_ratio(sync_s: float, calibration: Calibration = DEFAULT) -> float:
    """The model's step for the eager-dispatcher recipe of :data:`MOE_SYNC_FITTING` over the
    whole-step-graph one when each MoE layer's host sync costs ``sync_s``: Qwen3-30B-A3B on
    16 GB200s (one NVL72 domain), TP1 PP1 EP16, microbatch 4, 512 sequences of 4096,
    MXFP8, HybridEP (the model's ``deepep`` dispatcher)."""
    cal = replace(calibration, moe_sync_s=sync_s)
    lay = Layout(tp=1, pp=1, dp=16, ep=16, etp=1, microbatch=4, global_batch=512,
                 precision="fp8", sequence_parallel=True)
    eager, graphed = (price("qwen3-30b-a3b", lay, "GB200", system="GB200 NVL72",
                            software=_run_stack("megatron-bridge-mxfp8", None, g, None,
                                                "deepep"), calibration=cal).step_time_s
                      for g in (False, True))
    return eager / graphed


def fitted_moe_sync_s(calibration: Calibration = DEFAULT) -> float:
    """``moe_sync_s`` refitted on :data:`MOE_SYNC_FITTING` alone: the value (to 0.1 ms) at
    which :func:`moe_sync_ratio` equals :func:`moe_sync_measured`. The default calibration
    carries it (a test pins that)."""
    return _grid_fit(np.round(np.arange(0.0, 10.05e-3, 0.1e-3), 5),
                     lambda h: moe_sync_ratio(h, calibration), moe_sync_measured())


def family_errors(by=("generation",), calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """Cross-validated errors per family (any of generation, precision, moe, software,
    source, role): rows, mean signed error, mean absolute error and the worst, in percent."""
    cv = _cross_validation(calibration)
    for b in by:
        checks.choice("by", b, ("generation", "precision", "moe", "software", "source", "role"))
    g = cv.groupby(list(by))["cv_error_pct"]
    return pd.DataFrame({"runs": g.size(), "mean_error_pct": g.mean(),
                         "mean_abs_error_pct": g.apply(lambda x: x.abs().mean()),
                         "worst_abs_error_pct": g.apply(lambda x: x.abs().max())}).reset_index()


# fewer rows than this and a family's band borrows from its generation, then from everything
BAND_MIN_ROWS = 3
BAND_QUANTILES = (0.10, 0.90)  # with BAND_QUANTILE_ROWS rows or more; fewer: min and max
BAND_QUANTILE_ROWS = 10
# a family's band needs runs from this many publications: one table's runs share its stack,
# system and release, so their spread says how consistent that table is, not how far the model
# is off on a new one (the twelve H100 BF16 runs, all DGX Cloud's, span 6%)
BAND_MIN_SOURCES = 2


def _gpu_keys(names) -> list:
    # the registry key of each published run's GPU name ("H100 SXM" -> "h100_sxm")
    keys = {n: hardware.gpu(n).key for n in set(names)}
    return [keys[n] for n in names]


def _computed_band(key: str, gen: str, precision: str,
                   family: str = "dense") -> tuple[float, float, str]:
    cv = _cross_validation(DEFAULT)
    cv = cv[~cv["run_id"].isin(MOE_FITTING)]  # in-sample: no fold refits their constants
    same = cv[cv["moe"] == family]
    mine = same[(np.array(_gpu_keys(same["gpu"])) == key) & (same["precision"] == precision)]
    # each candidate with the fewest runs it needs: a GPU's own runs set its band only with
    # enough of them for the percentiles, since a few runs of one GPU would give a band
    # narrower than its generation's spread says it should be; and every candidate needs
    # runs from BAND_MIN_SOURCES publications
    runs = f"{BAND_MIN_ROWS}+ runs from {BAND_MIN_SOURCES}+ publications"
    for label, rows, need in (
            (f"{hardware.gpu(key).name} {precision} {family}", mine, BAND_QUANTILE_ROWS),
            (f"{gen} {precision} {family}",
             same[(same["generation"] == gen) & (same["precision"] == precision)],
             BAND_MIN_ROWS),
            (f"{gen} {family}, every precision (no {precision} family of {runs})",
             same[same["generation"] == gen], BAND_MIN_ROWS),
            (f"{gen}, dense and MoE (no {family} family of {runs})",
             cv[cv["generation"] == gen], BAND_MIN_ROWS)):
        r = rows["ratio"]
        if len(r) >= need and rows["source"].nunique() >= BAND_MIN_SOURCES:
            if len(r) >= BAND_QUANTILE_ROWS:
                lo, hi = r.quantile(list(BAND_QUANTILES))
                how = f"{BAND_QUANTILES[0]:.0%}-{BAND_QUANTILES[1]:.0%} of"
            else:
                lo, hi, how = r.min(), r.max(), "min-max of"
            return float(lo), float(hi), (f"{how} {len(r)} cross-validated published runs "
                                          f"({label})")
    r = np.log(cv["ratio"])
    lo, hi = np.exp(2 * r.min()), np.exp(2 * r.max())
    return float(lo), float(hi), (f"no published run of {gen}: the widest error of every "
                                  f"family ({len(r)} runs), doubled in log; an unvalidated "
                                  f"guess, not a measured spread")


FAMILIES = ("dense", "MoE")


def band_table() -> pd.DataFrame:
    """The band of every GPU in the registry at every precision, dense and MoE, computed from
    :func:`cross_validation` (a few seconds): what ``data/validation_bands.csv`` pins."""
    rows = [(k, generation(k), p, f, *_computed_band(k, generation(k), p, f))
            for k in hardware.gpus()["key"] for p in hardware.PRECISIONS for f in FAMILIES]
    return pd.DataFrame(rows, columns=["gpu", "generation", "precision", "family", "low",
                                       "high", "basis"])


@functools.cache
def _pinned_bands() -> dict:
    if not BANDS_CSV.exists():
        return {}
    schema.check(BANDS_CSV)
    df = pd.read_csv(BANDS_CSV)
    return {(r.gpu, r.precision, r.family): (float(r.low), float(r.high), r.basis)
            for r in df.itertuples()}


@functools.cache
def _band(key: str, gen: str, precision: str, family: str = "dense"
          ) -> tuple[float, float, str]:
    # the pinned table answers in microseconds; a GPU it lacks (a what-if GPU under a new key)
    # is computed from the cross-validation
    hit = _pinned_bands().get((key, precision, family))
    return hit if hit is not None else _computed_band(key, gen, precision, family)


def band(gpu, precision: str, step_time_s: float, moe: bool = False
         ) -> tuple[float, float, str]:
    """(low, high, basis) for a predicted step time on ``gpu`` at ``precision``: the step x the
    spread of measured / cross-validated predicted step of published runs of the same family
    (dense, or mixture-of-experts when ``moe``) and precision, on this GPU where it has 10+
    such runs (their 10th-90th percentile: the GPUs of one generation are not priced equally
    well; measured over predicted, GB300's runs sit below GB200's), else on its GPU generation
    (the 10th-90th percentile with 10+ runs, min-max with 3-9). A family with fewer than 3
    runs, or with runs of one publication only, borrows its generation's runs of the same family, then of both; a
    generation with none gets every run's widest error doubled, and the basis says so. Read from the pinned
    ``data/validation_bands.csv`` (:func:`~companion.validation.band_table`), so the first
    call costs no cross-validation."""
    if not isinstance(moe, bool):
        raise TypeError(f"moe must be True or False; got {moe!r}")
    step_time_s = checks.number("step_time_s", step_time_s, nonnegative=True)
    g = hardware.gpu(gpu)
    g.peak_flops(precision)  # a precision the GPU cannot run has no step to band: say so
    lo, hi, basis = _band(g.key, g.family, hardware.precision_name(precision),
                          "MoE" if moe else "dense")
    return step_time_s * lo, step_time_s * hi, basis


#: What a pair of published runs may differ in for :func:`paired_runs`: the GPU, the software
#: stack (e.g. the FP8 recipe), or the publication (one release of one table, :func:`source`).
PAIR_FACTORS = ("gpu", "software", "release")


#: What makes two published runs the same run: model, every parallel degree, batch, precision
#: and the gradient bucket its recipe records (empty: Megatron's default).
_RUN_KEYS = ("model", "tp", "pp", "cp", "dp", "ep", "vpp", "microbatch", "global_batch",
             "precision", "ddp_bucket_params")


def _held_out_priced(calibration: Calibration) -> pd.DataFrame:
    """The held-out runs, dense and MoE, with their publication (``release``, :func:`source`)
    and the model's step (``predicted``)."""
    runs = published_runs(True, None)
    pred = validate(calibration, held_out=True, moe=None).set_index("run_id")
    return runs.assign(release=[source(r) for _, r in runs.iterrows()],
                       predicted=pred.loc[runs["run_id"], "predicted_step_time_s"].to_numpy(),
                       ddp_bucket_params=runs["ddp_bucket_params"].fillna(0))


def paired_runs(differ: str = "gpu", calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """Held-out published runs that are the same run but for one thing: same model, layout
    (every parallel degree, microbatch, global batch), precision and publication (one release
    of one table: :func:`source`), different ``differ``: ``"gpu"`` (e.g. DGX B200 against
    GB200), ``"software"`` (the stack, e.g. FP8 per-tensor current scaling against MXFP8 on
    the same GPUs) or ``"release"`` (the same GPUs and stack in two publications, e.g. two
    releases of Megatron-Bridge's table); ``same`` holds the other factor (the GPU for
    ``"release"``). One row per pair, ``a`` before ``b`` in name order: the measured step of
    ``a`` over ``b``, the model's, and ``miss`` = measured / model (above 1: ``a`` is slower
    against ``b`` than the model says). What no single row shows: whether the model ranks two
    GPUs or two recipes the way the same publisher measured them, and how far one recipe moves
    between releases."""
    checks.choice("differ", differ, PAIR_FACTORS)
    runs = _held_out_priced(calibration)
    pred = runs.set_index("run_id")["predicted"]
    same = [*_RUN_KEYS, *(f for f in PAIR_FACTORS if f != differ)]
    rows = []
    for _, group in runs.groupby(same, sort=True):
        group = group.sort_values([differ, "run_id"]).drop_duplicates(differ)
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                a, b = group.iloc[i], group.iloc[j]
                meas = a["measured_step_time_s"] / b["measured_step_time_s"]
                model = pred.loc[a["run_id"]] / pred.loc[b["run_id"]]
                rows.append({"model": a["model"], "release": a["release"],
                             "layout": layout_text(run_layout(a)),
                             "same": a["software" if differ == "gpu" else "gpu"], "a": a[differ],
                             "b": b[differ], "run_a": a["run_id"], "run_b": b["run_id"],
                             "measured_ratio": meas, "model_ratio": model,
                             "miss": meas / model})
    return pd.DataFrame(rows, columns=["model", "release", "layout", "same", "a", "b", "run_a",
                                       "run_b", "measured_ratio", "model_ratio", "miss"])


def release_spread(calibration: Calibration = DEFAULT, tolerance: float = 0.005) -> pd.DataFrame:
    """How far one recipe moves between publications: held-out runs grouped by model, layout,
    precision, GPU and stack, published in two or more releases (:func:`source`), whose
    predicted steps agree within ``tolerance`` (so no recorded recipe field, such as the CUDA
    graph scope, tells them apart). One row per group: the releases, the measured steps'
    spread (``spread_pct``, longest over shortest, minus one) and ``mean_dev_pct``, the mean
    absolute deviation of the group's runs from their geometric mean. A model that knows only
    the recipe prices every run of a group alike, so this is error no such model removes."""
    checks.number("tolerance", tolerance, minimum=0.0)
    runs = _held_out_priced(calibration)
    rows = []
    for _, group in runs.groupby([*_RUN_KEYS, "gpu", "software"], sort=True):
        group = group.sort_values(["release", "run_id"]).drop_duplicates("release")
        if len(group) < 2 or group["predicted"].max() > group["predicted"].min() * (1 + tolerance):
            continue
        step = group["measured_step_time_s"].to_numpy(dtype=float)
        dev = step / np.exp(np.log(step).mean()) - 1
        first = group.iloc[0]
        rows.append({"model": first["model"], "gpu": first["gpu"], "software": first["software"],
                     "precision": first["precision"], "layout": layout_text(run_layout(first)),
                     "global_batch": int(first["global_batch"]), "releases": len(group),
                     "runs": ", ".join(group["run_id"]),
                     "spread_pct": 100 * (step.max() / step.min() - 1),
                     "mean_dev_pct": 100 * np.abs(dev).mean()})
    return pd.DataFrame(rows, columns=["model", "gpu", "software", "precision", "layout",
                                       "global_batch", "releases", "runs", "spread_pct",
                                       "mean_dev_pct"])


#: The mechanisms in the order the chapter adds them, with reader-facing names.
MECHANISM_STEPS = (
    ("sustained", "sustained GEMM rate (FP4 from NVFP4 kernels)"),
    ("attention", "fused attention per GPU and sequence length"),
    ("memory", "RoPE, cross-entropy and quantization at published cost"),
    ("overlap", "overlap slows the compute it hides behind"),
    ("launch", "kernel gaps"),
    ("zero", "ZeRO-2/3 reduce-scatter per microbatch; backward-only window"),
    ("fp32_grads", "FP32 gradient reduction"),
    ("buckets", "the last gradient bucket waits for the backward pass"),
)


def mechanism_table(calibration: Calibration = DEFAULT) -> pd.DataFrame:
    """What each mechanism does to the validation: starting with every mechanism of
    :data:`MECHANISM_STEPS` switched off (``Calibration.off``), each row adds one and reports
    the held-out dense runs' mean signed and mean absolute error and the worst, and the two A100
    tables' mean absolute error (Korthikanti's worst too). Constants are not refitted."""
    rows, off = [], set(name for name, _ in MECHANISM_STEPS)
    for name, label in (("", "none of them"),) + MECHANISM_STEPS:
        off.discard(name)
        cal = replace(calibration, off=frozenset(off))
        held, base = validate(cal, held_out=True), validate(cal)
        t5 = base.loc[base["table"] == "Table 5", "error_pct"].abs()
        t1 = base.loc[base["table"] == "Table 1", "error_pct"].abs()
        rows.append({"mechanism added": label,
                     "held-out mean error %": held["error_pct"].mean(),
                     "held-out mean |error| %": held["error_pct"].abs().mean(),
                     "held-out worst |error| %": held["error_pct"].abs().max(),
                     "Korthikanti T5 mean |error| %": t5.mean(),
                     "Korthikanti T5 worst %": t5.max(),
                     "Narayanan T1 mean |error| %": t1.mean()})
    return pd.DataFrame(rows)


__all__ = ["mechanism_table", "MECHANISM_STEPS", "paired_runs", "PAIR_FACTORS", "release_spread", "published_runs", "run_layout", "validate", "role", "source", "generation",
           "every_run", "run_stack", "pipeline_split", "run_estimate", "cross_validation", "fitted_gemm_in_training", "family_errors", "band",
           "band_table", "BANDS_CSV", "run_cluster", "ep_overlap_measured", "ep_overlap_ratio",
           "fitted_ep_overlap_hidden", "ep_overlap_grid", "ep_overlap_alone", "EP_OVERLAP_GRID",
           "MOE_SYNC_FITTING", "moe_sync_measured",
           "moe_sync_ratio", "fitted_moe_sync_s", "errors_with_stack",
           "PUBLISHED_RUNS", "FITTING_SUBSET", "EP_OVERLAP_FITTING", "EP_OVERLAP_PAIRS", "ROLES",
           "OVERLAP_HOST_FITTING", "OVERLAP_HOST_PAIRS", "MOE_FITTING", "overlap_host_bounds",
           "overlap_host_table",
           "fitted_overlap_host_kernel_s", "overlap_host_pairs"]
