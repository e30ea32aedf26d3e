"""Every valid layout of a model on a cluster, priced at once.

:func:`search` enumerates tensor, pipeline, context, data and expert parallel degrees, virtual
pipeline stages, microbatch sizes, sequence parallelism, recomputation and optimizer sharding;
keeps the combinations Megatron can run (TP divides heads, KV heads and the MLP width; PP
divides the layers unless uneven stages are allowed; CP divides the sequence; EP divides the
experts and DP x CP; the degrees multiply to the GPU count; the global batch splits into whole
microbatches); prices them all with :func:`companion.steptime.step_arrays`, the same code that
:func:`companion.parallel.estimate` runs for one layout; and returns a DataFrame sorted by step
time, with the breakdown, memory and MFU of each. Layouts that do not fit in memory are
dropped, or kept with ``fits=False`` when ``include_infeasible=True``.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from companion import checks, hardware
from companion.calibration import DEFAULT, Calibration
from companion.model import PRECISIONS, RECOMPUTE, Layout, Transformer, preset
from companion.parallel import cluster, stack
from companion.steptime import (derived_arrays, memory_arrays, stage_layers, step_arrays)

ZERO_NAMES = {0: "none", 1: "distributed optimizer", 2: "zero-2", 3: "zero-3"}
VPP_CHOICES = (1, 2, 3, 4, 6, 8)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _structures(model, num_gpus, global_batch, max_tp, max_cp, max_microbatch, uneven,
                exact_batch):
    """(tp, pp, cp, dp, ep, vpp, mb, m, stage_layers) rows Megatron can run."""
    rows = []
    for tp in _divisors(num_gpus):
        if tp > max_tp or any(x % tp for x in (model.heads, model.kv_heads_used,
                                                model.ffn_hidden)):
            continue
        for pp in _divisors(num_gpus // tp):
            if pp > model.layers or (not uneven and model.layers % pp):
                continue
            for cp in _divisors(num_gpus // (tp * pp)):
                if cp > max_cp or model.seq_len % cp:
                    continue
                dp = num_gpus // (tp * pp * cp)
                per_dp = global_batch // dp if not exact_batch or global_batch % dp == 0 else 0
                eps = ([e for e in _divisors(model.experts) if (dp * cp) % e == 0]
                       if model.is_moe else [1])
                vpps = [1] if pp == 1 else [v for v in VPP_CHOICES
                                            if uneven or model.layers % (pp * v) == 0]
                for v in vpps:
                    lst = stage_layers(model.layers, pp, v, uneven)
                    if v > lst or lst * (pp - 1) >= model.layers + (0 if uneven else lst):
                        continue
                    for mb in _divisors(per_dp) if per_dp else []:
                        if mb <= max_microbatch:
                            rows += [(tp, pp, cp, dp, e, v, mb, per_dp // mb, lst) for e in eps]
    return np.array(rows, dtype=np.int64).reshape(-1, 9)


def candidates(model, num_gpus: int, global_batch: int, *, max_tp: int | None = None,
               max_cp: int | None = None, max_microbatch: int = 8,
               recompute=RECOMPUTE, sequence_parallel=(False, True), zero=(0, 1),
               uneven_stages: bool = False, exact_batch: bool = True,
               grad_bytes: int = 2) -> dict:
    """Every candidate layout as a dict of int64 arrays (the keys :func:`companion.steptime.step_arrays` takes).

    ``exact_batch=False`` follows Calculon: when DP does not divide ``global_batch``, each
    replica takes ``global_batch // dp`` sequences (the batch is rounded down).
    """
    s = _structures(model, num_gpus, global_batch, max_tp or num_gpus, max_cp or num_gpus,
                    max_microbatch, uneven_stages, exact_batch)
    knobs = np.array([(sp, ("none", "selective", "full").index(rc), z)
                      for sp in sequence_parallel for rc in recompute for z in zero],
                     dtype=np.int64).reshape(-1, 3)
    n_s, n_k = len(s), len(knobs)
    s, k = np.repeat(s, n_k, axis=0), np.tile(knobs, (n_s, 1))
    X = {name: s[:, i] for i, name in enumerate(("tp", "pp", "cp", "dp", "ep", "vpp", "mb", "m",
                                                 "stage_layers"))}
    X.update(sp=k[:, 0], rc=k[:, 1], zero=k[:, 2])
    keep = ((X["sp"] == 0) | ((X["tp"] > 1) & ((model.seq_len // X["cp"]) % X["tp"] == 0)))
    keep &= (X["zero"] == 0) | (X["dp"] * X["cp"] > 1)
    X = {key: val[keep] for key, val in X.items()}
    X["grad_bytes"] = np.full(len(X["tp"]), grad_bytes, dtype=np.int64)
    return X


def _check_choices(recompute, sequence_parallel, zero):
    for r in recompute:
        checks.choice("recompute", r, RECOMPUTE)
    for sp in sequence_parallel:
        if not isinstance(sp, bool):
            raise TypeError(f"sequence_parallel must hold True/False; got {sp!r}")
    for z in zero:
        checks.number("zero", z, integer=True, minimum=0, maximum=3)


def search(model, gpu, num_gpus: int, global_batch: int, *, system=None,
           software="megatron-core", precision: str = "bf16", calibration: Calibration = DEFAULT,
           max_tp: int | None = None, max_cp: int | None = None, max_microbatch: int = 8,
           recompute=RECOMPUTE, sequence_parallel=(False, True), zero=(0, 1),
           uneven_stages: bool = False, exact_batch: bool = True,
           include_infeasible: bool = False, reserve_bytes: float = 0.0,
           flop_convention: str = "megatron", top: int | None = None) -> pd.DataFrame:
    """All valid layouts of ``model`` on ``num_gpus`` ``gpu`` s, fastest first.

    Arguments as in :func:`companion.parallel.estimate`; ``recompute``,
    ``sequence_parallel`` and ``zero`` (0 none, 1 Megatron's distributed optimizer, 2 and 3
    ZeRO stages) list the options to try; ``max_tp``, ``max_cp`` and ``max_microbatch`` bound
    the enumeration. The frame's ``attrs`` record how many candidates were priced
    (``candidates``) and how many fit (``feasible``).
    """
    model = preset(model) if isinstance(model, str) else model
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer or a preset name; got {type(model).__name__}")
    checks.number("num_gpus", num_gpus, integer=True, minimum=1)
    checks.number("global_batch", global_batch, integer=True, minimum=1)
    checks.number("max_microbatch", max_microbatch, integer=True, minimum=1)
    checks.choice("precision", precision, PRECISIONS)
    _check_choices(recompute, sequence_parallel, zero)
    g, st = hardware.gpu(gpu), stack(software)
    cl = cluster(g, system)
    X = candidates(model, num_gpus, global_batch, max_tp=max_tp, max_cp=max_cp,
                   max_microbatch=max_microbatch, recompute=recompute,
                   sequence_parallel=sequence_parallel, zero=zero, uneven_stages=uneven_stages,
                   exact_batch=exact_batch, grad_bytes=st.grad_reduce_bytes)
    n = len(X["tp"])
    if n == 0:
        raise ValueError(f"no layout of {model.name} divides {num_gpus} GPUs and a global batch "
                         f"of {global_batch} (try exact_batch=False or uneven_stages=True)")
    mem = memory_arrays(model, g, st, X, reserve_bytes, precision)
    X.update(dense_params=mem["dense_params"], expert_params=mem["expert_params"])
    bd = step_arrays(model, g, cl, calibration, st, precision, X)
    der = derived_arrays(model, g, X, bd, mem, st, precision, flop_convention)
    cols = {
        "tp": X["tp"], "pp": X["pp"], "dp": X["dp"], "cp": X["cp"], "ep": X["ep"],
        "vpp": X["vpp"], "microbatch": X["mb"], "num_microbatches": X["m"],
        "global_batch": der.pop("global_batch"), "sequence_parallel": X["sp"].astype(bool),
        "recompute": X["rc"], "zero": X["zero"], **bd, **der,
        "memory_gb": mem["memory_bytes"] / 1e9, "fits": mem["fits"]}
    # order (and filter) with numpy, then build the frame once: cheaper than pandas' sort
    order = np.argsort(bd["step_time_s"], kind="stable")
    if not include_infeasible:
        order = order[mem["fits"][order]]
    if top:
        order = order[:top]
    frame = pd.DataFrame({k: v[order] for k, v in cols.items()})
    frame["recompute"] = pd.Categorical.from_codes(frame["recompute"].to_numpy(),
                                                   ["none", "selective", "full"])
    frame.attrs.update(candidates=n, feasible=int(mem["fits"].sum()), model=model.name,
                       gpu=g.name, cluster=cl.name, stack=st.name, precision=precision)
    return frame


def layout_of(row, precision: str = "bf16") -> Layout:
    """The :class:`companion.model.Layout` of one row of :func:`search`'s frame (for :func:`companion.parallel.estimate`)."""
    z = int(row["zero"])
    return Layout(tp=int(row["tp"]), pp=int(row["pp"]), dp=int(row["dp"]), cp=int(row["cp"]),
                  ep=int(row["ep"]), vpp=int(row["vpp"]), microbatch=int(row["microbatch"]),
                  global_batch=int(row["global_batch"]),
                  sequence_parallel=bool(row["sequence_parallel"]),
                  recompute=str(row["recompute"]), precision=precision,
                  distributed_optimizer=z == 1, zero_stage=0 if z == 1 else z)


_SHOW = ["tp", "pp", "dp", "cp", "ep", "vpp", "microbatch", "sequence_parallel", "recompute",
         "zero", "step_time_s", "mfu", "memory_gb", "gemm_s", "attention_s", "elementwise_s",
         "recompute_s", "tp_exposed_s", "cp_exposed_s", "ep_exposed_s", "pp_p2p_s", "bubble_s",
         "dp_exposed_s", "optimizer_s"]


def main(argv=None) -> int:
    """``python -m companion plan``: the fastest layouts and their breakdown."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m companion plan",
                                description="Search every Megatron layout; print the fastest.")
    p.add_argument("--model", required=True, help="preset name, e.g. gpt3-175b")
    p.add_argument("--gpu", required=True, help="GPU name, e.g. H100")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs")
    p.add_argument("--global-batch", type=int, required=True, help="sequences per step")
    p.add_argument("--top", type=int, default=5, help="layouts to show (default 5)")
    p.add_argument("--system", default=None, help="system name, e.g. 'GB200 NVL72'")
    p.add_argument("--software", default="megatron-core", help="megatron-core or megatron-2022")
    p.add_argument("--precision", default="bf16", help="GEMM precision (bf16, fp16, fp8, fp4)")
    p.add_argument("--uneven-stages", action="store_true", help="allow PP not dividing layers")
    p.add_argument("--round-batch", action="store_true",
                   help="round the batch down to a multiple of DP (as Calculon does)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    try:
        frame = search(args.model, args.gpu, args.gpus, args.global_batch, system=args.system,
                       software=args.software, precision=args.precision,
                       uneven_stages=args.uneven_stages, exact_batch=not args.round_batch,
                       zero=(0, 1, 2, 3))
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    best = frame.head(args.top)[_SHOW]
    if args.json:
        rows = json.loads(best.to_json(orient="records"))
        print(json.dumps({**frame.attrs, "layouts": rows}, indent=1))
        return 0
    a = frame.attrs
    print(f"{a['model']} on {args.gpus} x {a['gpu']} ({a['cluster']}, {a['stack']}, "
          f"{a['precision']}): {a['feasible']} of {a['candidates']} layouts fit")
    if best.empty:
        print("no layout fits in memory")
        return 1
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(best.round(4).to_string(index=False))
    return 0


__all__ = ["search", "candidates", "layout_of", "main", "ZERO_NAMES"]
