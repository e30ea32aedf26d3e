"""Every valid layout of a model on a cluster, priced at once.

:func:`search` enumerates tensor, pipeline, context, data and expert parallel degrees, virtual
pipeline stages, microbatch sizes, sequence parallelism, recomputation and optimizer sharding;
keeps the combinations Megatron can run (TP divides heads, KV heads and the MLP width; PP
divides the layers unless uneven stages are allowed; CP divides the sequence; EP divides the
experts and DP x CP; the degrees multiply to the GPU count; the global batch splits into whole
microbatches, in whole rounds of PP when stages are interleaved); prices them all with :func:`companion.steptime.step_arrays`, the same code that
:func:`companion.parallel.estimate` runs for one layout; and returns a DataFrame sorted by step
time, with the breakdown, memory and MFU of each. Layouts that do not fit in memory are
dropped, or kept with ``fits=False`` when ``include_infeasible=True``.

No Python loop runs per layout: the candidates are a numpy grid (:func:`grid`) whose axes are
the parallel splits and the training knobs, built one broadcast per parallel dimension, and
the model is evaluated on that grid by broadcasting, so each quantity is computed once per
combination of what it depends on. ``benchmarks/search.py`` times it on Calculon's case.
"""
from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pandas as pd

from companion import checks, hardware
from companion.calibration import DEFAULT, Calibration, checked
from companion.model import RECOMPUTE, STEP_PRECISIONS, Layout, Transformer, layout_text, preset
from companion.machine import check_fp8_recipe, cluster, domain_fill, resolve, stack
from companion.steptime import (check_split, derived_arrays, memory_arrays, needs_slots,
                                stage_layers, step_arrays)
from companion.validation import band

ZERO_NAMES = {0: "none", 1: "distributed optimizer", 2: "zero-2", 3: "zero-3"}
#: Largest GPU count :func:`search` takes: ten times the largest published training job
#: (Meta's Llama 3 405B on 16,384 H100s), so no request enumerates an absurd space.
MAX_GPUS = 163_840
MAX_BATCH = 2 ** 24
VPP_CHOICES = (1, 2, 3, 4, 6, 8)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _cross(rows: dict, name: str, choices, keep) -> dict:
    """Every row crossed with every choice of ``name`` (rows outer, choices inner: the order
    of nested loops), keeping the pairs where ``keep`` holds; ``keep`` gets the columns as a
    rows x choices broadcast (rows as (n, 1) arrays, the choices as a (1, c) array)."""
    c = np.asarray(choices, dtype=np.int64)
    pairs = {k: v[:, None] for k, v in rows.items()}
    pairs[name] = c[None, :]
    mask = np.broadcast_to(keep(pairs), (len(next(iter(rows.values()))), len(c)))
    r, j = np.nonzero(mask)
    out = {k: v[r] for k, v in rows.items()}
    out[name] = c[j]
    return out


def _structures(model, num_gpus, global_batch, max_tp, max_cp, max_microbatch, uneven,
                exact_batch, vpp, slots=False):
    """Columns tp, pp, cp, dp, vpp, mb, m, stage_layers, ep of the splits Megatron can run
    (and embed_loss with ``slots``: the embedding and the loss take a layer's slot each where
    pp x vpp divides layers + 2 but not the layers)."""
    L, divs = model.layers, _divisors(num_gpus)
    tp = np.array([t for t in divs if t <= max_tp and not any(
        x % t for x in (model.heads, model.kv_heads_used, model.ffn_hidden))], dtype=np.int64)
    X = {"tp": tp}
    X = _cross(X, "pp", divs, lambda g: (num_gpus // g["tp"] % g["pp"] == 0) & (g["pp"] <= L)
               & (uneven | (L % g["pp"] == 0) | (slots & ((L + 2) % g["pp"] == 0))))
    X = _cross(X, "cp", divs, lambda g: (num_gpus // (g["tp"] * g["pp"]) % g["cp"] == 0)
               & (g["cp"] <= max_cp)
               & ((g["cp"] == 1) | (model.seq_len % (2 * g["cp"]) == 0)))
    X["dp"] = num_gpus // (X["tp"] * X["pp"] * X["cp"])
    per_dp = global_batch // X["dp"]
    if exact_batch:
        per_dp = np.where(global_batch % X["dp"] == 0, per_dp, 0)
    # pp == 1 runs without interleaving; otherwise each virtual stage needs whole layers
    vpps = sorted(set(range(1, L + 1) if vpp == "all" else vpp) | {1})
    allowed = np.isin(vpps, range(1, L + 1) if vpp == "all" else vpp)

    def slotted(p, v):
        return slots & needs_slots(L, p, v)

    def layers_of(p, v):
        return np.where(slotted(p, v), stage_layers(L, p, v, embedding_loss=True),
                        stage_layers(L, p, v, uneven))

    def stage_ok(g):
        v, p = g["vpp"], g["pp"]
        lst = layers_of(p, v)
        ok = np.where(p == 1, v == 1,
                      allowed[None, :] & (uneven | (L % (p * v) == 0) | slotted(p, v)))
        return ok & (v <= lst) & (lst * (p - 1) < L + np.where(uneven, 0, lst))

    X["per_dp"] = per_dp
    X = _cross(X, "vpp", vpps, stage_ok)
    X["stage_layers"] = layers_of(X["pp"], X["vpp"])
    if slots:
        X["embed_loss"] = slotted(X["pp"], X["vpp"]).astype(np.int64)
    cap = max_microbatch or int(X["per_dp"].max(initial=0))
    mbs = sorted({d for b in np.unique(X["per_dp"]) if b > 0 for d in _divisors(int(b))
                  if d <= cap})
    # Megatron's interleaved schedule needs the microbatches in whole rounds of pp
    # (megatron/core/pipeline_parallel/schedules.py), else it raises
    X = _cross(X, "mb", mbs, lambda g: (g["per_dp"] > 0) & (g["per_dp"] % g["mb"] == 0)
               & ((g["vpp"] == 1) | ((g["per_dp"] // g["mb"]) % g["pp"] == 0)))
    X["m"] = X.pop("per_dp") // X["mb"]
    eps = _divisors(model.experts) if model.is_moe else [1]
    return _cross(X, "ep", eps, lambda g: (g["dp"] * g["cp"]) % g["ep"] == 0)


def grid(model, num_gpus: int, global_batch: int, *, max_tp: int | None = None,
         max_cp: int | None = None, max_microbatch: int | None = 8, recompute=RECOMPUTE,
         sequence_parallel=(False, True), zero=(0, 1), uneven_stages: bool = False,
         exact_batch: bool = True, grad_bytes: int = 2, vpp=VPP_CHOICES,
         embedding_loss_slots: bool = False):
    """The candidate layouts as a broadcast grid: (arrays, valid).

    The grid's four axes are the parallel splits (tp, pp, cp, dp, ep, vpp, microbatch),
    ``sequence_parallel``, ``recompute`` and ``zero``; ``arrays`` maps the keys
    :func:`companion.steptime.step_arrays` takes to int64 arrays that vary along one axis
    only (shape (splits, 1, 1, 1), (1, n, 1, 1), ...), so numpy computes each quantity at
    the size of what it depends on: GEMM times once per split, activations once per split,
    sequence parallel choice and recomputation mode, optimizer state once per split and
    sharding. ``valid`` (the grid's shape) marks the combinations Megatron can run.
    Arguments as in :func:`candidates`, which flattens the grid.
    """
    _check_choices(recompute, sequence_parallel, zero, vpp)
    check_split(uneven_stages, embedding_loss_slots)
    S = _structures(model, num_gpus, global_batch, max_tp or num_gpus, max_cp or num_gpus,
                    max_microbatch, uneven_stages, exact_batch, vpp, embedding_loss_slots)
    X = {name: S[name].reshape(-1, 1, 1, 1) for name in (
        "tp", "pp", "cp", "dp", "ep", "vpp", "mb", "m", "stage_layers") + (
        ("embed_loss",) if embedding_loss_slots else ())}
    X["sp"] = np.array([int(v) for v in sequence_parallel], dtype=np.int64).reshape(1, -1, 1, 1)
    X["rc"] = np.array([RECOMPUTE.index(r) for r in recompute],
                       dtype=np.int64).reshape(1, 1, -1, 1)
    X["zero"] = np.array(zero, dtype=np.int64).reshape(1, 1, 1, -1)
    X["grad_bytes"] = np.full((1, 1, 1, 1), grad_bytes, dtype=np.int64)
    shape = (len(X["tp"]), X["sp"].size, X["rc"].size, X["zero"].size)
    # sequence parallelism splits the sequence over TP ranks; sharding needs DP x CP ranks
    valid = ((X["sp"] == 0) | ((X["tp"] > 1) & ((model.seq_len // X["cp"]) % X["tp"] == 0)))
    valid = valid & ((X["zero"] == 0) | (X["dp"] * X["cp"] > 1))
    if not model.is_moe:  # recompute "moe" is "selective" for a dense model: one copy of each
        valid = valid & (X["rc"] != RECOMPUTE.index("moe"))
    return X, np.broadcast_to(valid, shape)


class _Cells:
    """Chosen cells of a grid (index arrays, one per axis), in a chosen order."""

    def __init__(self, shape, index):
        self.shape, self.index, self._flat = shape, index, {}

    def take(self, x, out=None):
        """The chosen entries of ``x`` (broadcastable to the grid), as a 1-D array: one gather
        from ``x`` itself, whatever axes it varies along."""
        x = np.asarray(x)
        x = np.ascontiguousarray(x.reshape((1,) * (len(self.shape) - x.ndim) + x.shape))
        flat = self._flat.get(x.shape)
        if flat is None:
            flat, stride = 0, 1
            for n, idx in zip(reversed(x.shape), reversed(self.index)):
                if n > 1:
                    flat = flat + idx * stride
                stride *= n
            flat = self._flat[x.shape] = np.broadcast_to(flat, self.index[0].shape)
        return np.take(x.reshape(-1), flat, out=out)

    def __getitem__(self, order):
        return _Cells(self.shape, tuple(i[order] for i in self.index))


def candidates(model, num_gpus: int, global_batch: int, *, max_tp: int | None = None,
               max_cp: int | None = None, max_microbatch: int | None = 8,
               recompute=RECOMPUTE, sequence_parallel=(False, True), zero=(0, 1),
               uneven_stages: bool = False, exact_batch: bool = True,
               grad_bytes: int = 2, vpp=VPP_CHOICES,
               embedding_loss_slots: bool = False) -> dict:
    """Every candidate layout as a dict of int64 arrays (the keys :func:`companion.steptime.step_arrays` takes).

    Enumerated with numpy, one broadcast grid per parallel dimension, in the order of nested
    loops over tp, pp, cp, vpp, microbatch, ep, then sequence_parallel, recompute and zero.
    ``exact_batch=False`` follows Calculon: when DP does not divide ``global_batch``, each
    replica takes ``global_batch // dp`` sequences (the batch is rounded down).
    ``max_microbatch=None`` tries every microbatch size that divides a replica's batch;
    ``vpp`` lists the interleaving degrees to try when pp > 1, or is ``"all"`` (every degree
    that leaves whole layers on each virtual stage, as Calculon enumerates them).
    """
    X, valid = grid(model, num_gpus, global_batch, max_tp=max_tp, max_cp=max_cp,
                    max_microbatch=max_microbatch, recompute=recompute,
                    sequence_parallel=sequence_parallel, zero=zero,
                    uneven_stages=uneven_stages, exact_batch=exact_batch,
                    grad_bytes=grad_bytes, vpp=vpp, embedding_loss_slots=embedding_loss_slots)
    cells = _Cells(valid.shape, np.nonzero(valid))
    return {key: cells.take(val) for key, val in X.items()}


def _listed(opts) -> bool:
    # a non-empty sequence of choices to try: a bare "full" or True is a likely slip for
    # ("full",) or (True,), and iterating it would give a baffling message
    return not isinstance(opts, str) and np.iterable(opts) and len(opts) > 0


def _check_choices(recompute, sequence_parallel, zero, vpp):
    if not (isinstance(vpp, str) and vpp == "all"):
        if not _listed(vpp):
            raise TypeError(f"vpp must be 'all' or a sequence of interleaving degrees; got {vpp!r}")
        for v in vpp:
            checks.number("vpp", v, integer=True, minimum=1)
    for name, opts, example in (("recompute", recompute, "('none', 'full')"),
                                ("sequence_parallel", sequence_parallel, "(False, True)"),
                                ("zero", zero, "(0, 1)")):
        if not _listed(opts):
            raise TypeError(f"{name} must be a non-empty sequence of choices to try, e.g. "
                            f"{example}; got {opts!r}")
        if len(set(opts)) < len(opts):
            raise ValueError(f"{name} lists a choice twice: {opts!r}")
    for r in recompute:
        checks.choice("recompute", r, RECOMPUTE)
    for sp in sequence_parallel:
        if not isinstance(sp, bool):
            raise TypeError(f"sequence_parallel must hold True/False; got {sp!r}")
    for z in zero:
        checks.number("zero", z, integer=True, minimum=0, maximum=3)


def search(model, gpu, num_gpus: int, global_batch: int, *, system=None,
           software="megatron-core", precision: str = "bf16", calibration: Calibration = DEFAULT,
           max_tp: int | None = None, max_cp: int | None = None,
           max_microbatch: int | None = 8, recompute=RECOMPUTE,
           sequence_parallel=(False, True), zero=(0, 1), vpp=VPP_CHOICES,
           uneven_stages: bool = False, exact_batch: bool = True,
           include_infeasible: bool = False, reserve_bytes: float = 0.0,
           flop_convention: str = "bridge", top: int | None = None,
           embedding_loss_slots: bool = False) -> pd.DataFrame:
    """All valid layouts of ``model`` on ``num_gpus`` ``gpu`` s, fastest first.

    Arguments as in :func:`companion.parallel.estimate`; ``recompute``,
    ``sequence_parallel`` and ``zero`` (0 none, 1 Megatron's distributed optimizer, 2 and 3
    ZeRO stages) list the options to try, and ``vpp`` the interleaving degrees (or
    ``"all"``); ``max_tp``, ``max_cp`` and ``max_microbatch`` bound the enumeration (None: no
    bound). ``embedding_loss_slots`` also tries the splits where pp x vpp divides layers + 2
    (the embedding and the loss take a layer's slot each, as Megatron-Bridge's 405B and
    Qwen3-235B recipes run them); the frame then says which rows need it. See :func:`~companion.search.candidates`. The frame's ``attrs`` record how many candidates were priced
    (``candidates``) and how many fit (``feasible``). Rows are ranked by time per sequence
    (step time / global batch), which is the step time when the batch is exact and tokens
    per second when ``exact_batch=False`` lets DP round it down. ``step_time_low_s`` and
    ``step_time_high_s`` carry the band of :func:`companion.validation.band` (its basis in
    ``attrs["band_basis"]``); ``num_gpus`` is at most ``MAX_GPUS``.
    """
    model = preset(model) if isinstance(model, str) else model
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer or a preset name; got {type(model).__name__}")
    checks.number("num_gpus", num_gpus, integer=True, minimum=1, maximum=MAX_GPUS)
    checks.number("global_batch", global_batch, integer=True, minimum=1, maximum=MAX_BATCH)
    for name, bound in (("max_tp", max_tp), ("max_cp", max_cp), ("max_microbatch", max_microbatch)):
        if bound is not None:
            checks.number(name, bound, integer=True, minimum=1)
    checks.choice("precision", precision, STEP_PRECISIONS)
    for name, flag in (("uneven_stages", uneven_stages), ("exact_batch", exact_batch),
                       ("include_infeasible", include_infeasible),
                       ("embedding_loss_slots", embedding_loss_slots)):
        checks.boolean(name, flag)
    checks.number("reserve_bytes", reserve_bytes, nonnegative=True)
    if top is not None:
        checks.number("top", top, integer=True, minimum=1)
    checked(calibration)
    g, st, cl = resolve(gpu, system, software)
    check_fp8_recipe(g, st, precision)
    if not st.context_parallel:  # the stack cannot split the sequence
        max_cp = 1
    X, valid = grid(model, num_gpus, global_batch, max_tp=max_tp, max_cp=max_cp,
                    max_microbatch=max_microbatch, recompute=recompute,
                    sequence_parallel=sequence_parallel, zero=zero,
                    uneven_stages=uneven_stages, exact_batch=exact_batch,
                    grad_bytes=st.grad_reduce_bytes, vpp=vpp,
                    embedding_loss_slots=embedding_loss_slots)
    cells = _Cells(valid.shape, np.nonzero(valid))  # row-major: candidates()' order
    n = len(cells.index[0])
    if n == 0:
        untried = [k for k, on in (("exact_batch=False", not exact_batch),
                                   ("uneven_stages=True", uneven_stages)) if not on]
        raise ValueError(f"no layout of {model.name} divides {num_gpus} GPUs and a global batch "
                         f"of {global_batch}"
                         + (f" (try {' or '.join(untried)})" if untried else ""))
    # every cell of the grid is priced at once; the invalid ones are dropped after
    mem = memory_arrays(model, g, st, X, reserve_bytes, precision)
    X.update(dense_params=mem["dense_params"], expert_params=mem["expert_params"])
    bd = step_arrays(model, g, cl, calibration, st, precision, X)
    der = derived_arrays(model, g, X, bd, mem, st, precision, flop_convention)
    fits = cells.take(mem["fits"])
    # order (and filter) with numpy, then build the frame once: cheaper than pandas' sort.
    # Time per sequence: equal to step-time order when every layout runs the same batch
    step = cells.take(bd["step_time_s"] / der["global_batch"])
    if include_infeasible:
        order = np.argsort(step, kind="stable")
    else:  # a stable sort of the feasible rows keeps the same order among equal times
        keep = np.flatnonzero(fits)
        order = keep[np.argsort(step[keep], kind="stable")]
    if top:
        order = order[:top]
    pick = cells[order]
    cols = {
        "tp": X["tp"], "pp": X["pp"], "dp": X["dp"], "cp": X["cp"], "ep": X["ep"],
        "vpp": X["vpp"], "microbatch": X["mb"], "num_microbatches": X["m"],
        "global_batch": der.pop("global_batch"), "sequence_parallel": X["sp"].astype(bool),
        "recompute": X["rc"], "zero": X["zero"], **bd, **der,
        "memory_gb": mem["memory_bytes"] / 1e9, "fits": mem["fits"]}
    if embedding_loss_slots:  # which rows need estimate(..., embedding_loss_slots=True)
        cols["embedding_loss_slots"] = X["embed_loss"].astype(bool)
    cols = {k: pick.take(v) for k, v in cols.items()}
    cols["recompute"] = pd.Categorical.from_codes(cols["recompute"], list(RECOMPUTE))
    lo, hi, basis = band(g, precision, 1.0, moe=model.is_moe)
    cols["step_time_low_s"] = cols["step_time_s"] * lo
    cols["step_time_high_s"] = cols["step_time_s"] * hi
    frame = pd.DataFrame(cols)
    frame.attrs.update(candidates=n, feasible=int(fits.sum()), model=model.name,
                       gpu=g.name, cluster=cl.name, stack=st.name,
                       attention_kernel=st.attention_kernel,
                       ddp_bucket_params=st.ddp_bucket_params, ep_overlap=st.overlap_ep,
                       cuda_graphs=st.cuda_graphs, precision=precision,
                       flop_convention=flop_convention, peak_flops=g.peak_flops(precision),
                       band_basis=basis, capacity_gb=g.usable_hbm_bytes / 1e9,
                       capacity_basis=g.usable_hbm_basis,
                       global_batch=global_batch)
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


_PARTS = {"gemm_s": "GEMM", "attention_s": "attention", "elementwise_s": "elementwise",
          "recompute_s": "recompute", "launch_s": "kernel gaps", "moe_sync_s": "MoE host sync",
          "overlap_host_s": "EP host floor",
          "overlap_slowdown_s": "overlap slowdown", "tp_exposed_s": "TP comm",
          "cp_exposed_s": "CP comm", "ep_exposed_s": "EP comm", "pp_p2p_s": "PP sends",
          "bubble_s": "bubble", "dp_exposed_s": "DP comm", "optimizer_s": "optimizer"}
# the costs a layout choice can remove (GEMM, attention and elementwise work it cannot)
_EXPOSED = tuple(k for k in _PARTS if k not in ("gemm_s", "attention_s", "elementwise_s"))


def _layout_text(r, precision: str) -> str:
    text = layout_text(layout_of(r, precision), full=True)
    if bool(r.get("embedding_loss_slots", False)):  # Megatron's account_for_embedding/loss
        text += " +EL"
    return text


def _largest_exposed(r) -> str:
    return ", ".join(f"{_PARTS[k]} {r[k]:.3g} s" for k in sorted(_EXPOSED, key=lambda k: -r[k])[:2])


def compact(frame: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """The planner's table: one row per distinct price (layouts whose step times agree to
    0.1 ms and memory to 0.1 GB collapse into one, ``same`` counting the others), with the layout
    as one string, step time and band, MFU, tokens/s per GPU, memory and the two largest
    exposed costs."""
    checks.number("top", top, integer=True, minimum=1)
    precision = frame.attrs.get("precision", "bf16")
    key = pd.Series(list(zip(frame["step_time_s"].round(4), frame["memory_gb"].round(1))),
                    index=frame.index)
    first = ~key.duplicated()
    rows = []
    for i in frame.index[first][:top]:
        r = frame.loc[i]
        n = int(frame.attrs.get("num_gpus") or r["tp"] * r["pp"] * r["dp"] * r["cp"])
        rows.append({
            "layout": _layout_text(r, precision),
            "step_s": r["step_time_s"], "low_s": r["step_time_low_s"],
            "high_s": r["step_time_high_s"], "mfu": r["mfu"],
            "tokens_per_s_per_gpu": r["tokens_per_s"] / n, "memory_gb": r["memory_gb"],
            "largest_exposed": _largest_exposed(r),
            "same": int((key == key[i]).sum()) - 1, "global_batch": int(r["global_batch"])})
    table = pd.DataFrame(rows)
    asked = frame.attrs.get("global_batch")
    if asked is None or (table.empty or (table["global_batch"] == asked).all()):
        table = table.drop(columns="global_batch", errors="ignore")  # only when rounded
    return table


class _Parser:
    """argparse whose errors are one line on stderr and exit status 2."""

    def __new__(cls, **kw):
        import argparse

        class P(argparse.ArgumentParser):
            def error(self, message):
                print(f"error: {message}", file=sys.stderr)
                raise SystemExit(2)
        return P(**kw)


def _count(name, lo, hi):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise _Bad(f"{name} must be a whole number; got {text!r}") from None
        if not lo <= value <= hi:
            raise _Bad(f"{name} must be between {lo} and {hi:,}; got {value:,}")
        return value
    return parse


class _Bad(Exception):
    pass


# search()'s keyword hints in its errors, and the CLI flags that set them
_CLI_FLAGS = {"exact_batch=False": "--round-batch", "uneven_stages=True": "--uneven-stages",
              "uneven_stages": "--uneven-stages", "embedding_loss_slots": "--embedding-loss-slots",
              "attention_kernel": "--attention-kernel",
              "pass system= (a registry name or a Cluster)": "pass --system (a registry name)"}


def _print_choices() -> None:
    """``plan --list``: the names --model, --gpu and --system take."""
    from companion.model import presets
    print("models (--model): name, parameters, active per token, sequence length")
    for name in presets():
        m = preset(name)
        active = f", {m.active_params / 1e9:,.1f}B active" if m.is_moe else ""
        print(f"  {name:<24} {m.params / 1e9:>8,.1f}B{active}, seq {m.seq_len:,}")
    def placed(key):  # machine.cluster finds the GPU a system (its rule, not a copy of it)
        try:
            return bool(cluster(key))
        except ValueError:
            return False

    gpus = hardware.gpus()
    print("GPUs (--gpu, the short name first) with a system to put them in:")
    for _, g in gpus[gpus["key"].map(placed)].iterrows():
        print(f"  {g['aliases'].split(';')[0]:<8} {g['name']}")
    print("systems (--system): " + ", ".join(hardware.systems()["name"]))


def main(argv=None) -> int:
    """``python -m companion plan``: the fastest layouts, compact, with bands and conventions."""
    import argparse
    import json

    argv = sys.argv[1:] if argv is None else argv
    if "--list" in argv:
        _print_choices()
        return 0

    p = _Parser(prog="python -m companion plan",
                description="Search every Megatron layout; print the fastest.")
    p.add_argument("--model", required=True, help="preset name, e.g. gpt3-175b")
    p.add_argument("--gpu", required=True, help="GPU name, e.g. H100")
    p.add_argument("--gpus", required=True, help=f"number of GPUs (1 to {MAX_GPUS:,})")
    p.add_argument("--global-batch", required=True, help="sequences per step")
    p.add_argument("--top", default="5", help="distinct layouts in the table (default 5); with --json, the first "
                   "rows")
    p.add_argument("--system", default=None, help="system name, e.g. 'GB200 NVL72'")
    p.add_argument("--software", default="megatron-core", help="megatron-core, megatron-bridge, "
                   "megatron-bridge-mxfp8 or megatron-2022")
    p.add_argument("--precision", default="bf16", help="GEMM precision (bf16, fp16, fp8, fp4)")
    p.add_argument("--attention-kernel", default=None,
                   help="cudnn or flash-attn-2 (what Transformer Engine runs with "
                        "NVTE_FUSED_ATTN=0); default: the software stack's")
    p.add_argument("--bucket-params", default=None,
                   help="parameters per data-parallel gradient bucket (Megatron-Core's "
                        "bucket_size); default max(40,000,000, 1,000,000 x DP x CP)")
    p.add_argument("--ep-overlap", action="store_true",
                   help="hide the expert all-to-all behind the other microbatch's compute "
                        "(Megatron-Core's --overlap-moe-expert-parallel-comm, Megatron-Bridge's "
                        "moe_a2a_overlap); eager, each layer then waits for the host")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="capture the whole step in CUDA graphs: 1 us kernel gaps, no MoE host "
                        "syncs, no host floor under the expert overlap")
    p.add_argument("--uneven-stages", action="store_true", help="allow PP not dividing layers")
    p.add_argument("--embedding-loss-slots", action="store_true",
                   help="also try pipelines where pp x vpp divides layers + 2: the embedding "
                        "and the loss take a layer's slot each (Megatron's "
                        "account_for_embedding/loss_in_pipeline_split)")
    p.add_argument("--round-batch", action="store_true",
                   help="round the batch down to a multiple of DP (as Calculon does); layouts "
                        "are then ranked by tokens per second")
    p.add_argument("--reserve-gb", default="0",
                   help="GB per GPU kept out of the fit for what the model does not count "
                        "(CUDA context, NCCL buffers, allocator fragmentation; a few GB in "
                        "practice); default 0")
    p.add_argument("--explain", action="store_true", help="print the best layout's breakdown")
    p.add_argument("--json", action="store_true", help="print JSON with every field")
    p.add_argument("--list", action="store_true",
                   help="list the models, GPUs and systems the other flags take, and stop")
    args = p.parse_args(argv)
    try:
        gpus = _count("--gpus", 1, MAX_GPUS)(args.gpus)
        batch = _count("--global-batch", 1, MAX_BATCH)(args.global_batch)
        top = _count("--top", 1, 10_000)(args.top)
        try:
            reserve_gb = float(args.reserve_gb)
        except ValueError:
            raise _Bad(f"--reserve-gb must be a number of GB; got {args.reserve_gb!r}") from None
        if not 0 <= reserve_gb < 1e4:
            raise _Bad(f"--reserve-gb must be between 0 and 10,000 GB; got {args.reserve_gb}")
        software = stack(args.software)
        if args.attention_kernel is not None:
            software = replace(software, attention_kernel=args.attention_kernel)
        if args.bucket_params is not None:
            software = replace(software, ddp_bucket_params=_count(
                "--bucket-params", 1, 10**12)(args.bucket_params))
        if args.ep_overlap and not preset(args.model).is_moe:
            raise _Bad(f"--ep-overlap overlaps the expert all-to-all; {args.model} is dense "
                       f"(no experts): drop the flag or pick an MoE preset")
        if args.ep_overlap or args.cuda_graphs:
            software = replace(software, overlap_ep=software.overlap_ep or args.ep_overlap,
                               cuda_graphs=software.cuda_graphs or args.cuda_graphs)
        frame = search(args.model, args.gpu, gpus, batch, system=args.system,
                       software=software, precision=args.precision.lower(),
                       uneven_stages=args.uneven_stages, exact_batch=not args.round_batch,
                       zero=(0, 1, 2, 3), embedding_loss_slots=args.embedding_loss_slots,
                       reserve_bytes=reserve_gb * 1e9)
        fill = domain_fill(resolve(args.gpu, args.system, software)[2], gpus)
    except (ValueError, TypeError, _Bad) as err:
        msg = str(err)
        for keyword, flag in _CLI_FLAGS.items():  # the hint names what a CLI user types
            msg = msg.replace(keyword, flag)
        print(f"error: {msg}", file=sys.stderr)
        return 2
    frame.attrs["num_gpus"] = gpus
    a = frame.attrs
    conv = {"bridge": "causal attention as it runs, Megatron-Bridge's convention",
            "megatron": "the full s x s attention, Megatron-LM's and NeMo's convention",
            "6n": "6N per token"}[a["flop_convention"]]
    mfu_note = (f"MFU (a fraction, 0 to 1) = model FLOPs per GPU-second / dense "
                f"{a['precision'].upper()} peak {a['peak_flops'] / 1e12:,.0f} TFLOP/s; model FLOPs "
                f"count {conv}")
    if not fill.whole:
        print(f"{'note' if fill.domains == 1 else 'WARNING'}: {fill.message}.", file=sys.stderr)
    built = hardware.system(args.system).gpu() if args.system else None  # search resolved it
    if built is not None and built.key != hardware.gpu(args.gpu).key:
        print(f"WARNING: a {args.system} is built with {built.name}; {a['gpu']} in it is a "
              f"what-if (the same links and domain, this GPU's compute and memory).",
              file=sys.stderr)
    if args.json:
        if args.explain:
            print("note: --explain prints nothing more with --json: every layout's parts are in "
                  "the JSON already", file=sys.stderr)
        head = frame.head(top)
        rows = json.loads(head.to_json(orient="records"))
        for row, (_, r) in zip(rows, head.iterrows()):
            row.update(layout=_layout_text(r, a["precision"]),
                       tokens_per_s_per_gpu=r["tokens_per_s"] / gpus,
                       largest_exposed=_largest_exposed(r))
        print(json.dumps({**a, "reserve_gb": reserve_gb, "mfu_convention": mfu_note,
                          "domain_fill": fill.message, "part_names": _PARTS,
                          "layouts": rows}, indent=1))
        return 0 if rows else 1
    kernel = "" if a["attention_kernel"] == "cudnn" else f", {a['attention_kernel']} attention"
    if a["ddp_bucket_params"]:
        kernel += f", gradient buckets of {a['ddp_bucket_params']:,} parameters"
    if a["ep_overlap"]:
        kernel += ", expert overlap"
    if a["cuda_graphs"]:
        kernel += ", whole-step CUDA graphs"
    print(f"{a['model']} on {gpus} x {a['gpu']} ({a['cluster']}, {a['stack']}{kernel}, "
          f"{a['precision']}): {a['feasible']} of {a['candidates']} layouts fit in "
          f"{a['capacity_gb']:.1f} GB per GPU ({a['capacity_basis']}; "
          + (f"{reserve_gb:g} GB of it reserved (--reserve-gb))" if reserve_gb else
             "nothing reserved for the allocator or NCCL: --reserve-gb)"))
    if frame.empty:
        print("no layout fits in memory")
        return 1
    table = compact(frame, top)
    table["tokens_per_s_per_gpu"] = table["tokens_per_s_per_gpu"].round().astype(int)
    with pd.option_context("display.width", 220, "display.max_columns", 30,
                           "display.max_colwidth", 60):
        width = int(table["layout"].str.len().max())  # layouts read left to right
        print(table.round({"step_s": 3, "low_s": 3, "high_s": 3, "mfu": 3, "memory_gb": 1})
              .to_string(index=False,
                         formatters={"layout": lambda s: s.ljust(width)}))
    print(mfu_note + ".")
    print(f"Step band (low_s-high_s): {a['band_basis']}.")
    below = (table["step_s"] < table["low_s"]).any()
    if below or (table["step_s"] > table["high_s"]).any():
        print(f"The band is where measured steps fell around the model's: for this family "
              f"published runs ran {'slower' if below else 'faster'} than priced, so step_s "
              f"lies {'below' if below else 'above'} its band; read the band as the expected "
              f"measurement.")
    print("layout: TP PP VPP DP CP EP mb<microbatch>, SP when sequence parallelism is on, then "
          "the recomputation (none, sel(ective), full or moe) and ZeRO<stage>; +EL: the "
          "embedding and the loss take a layer's pipeline slot each.")
    if reserve_gb:
        print(f"memory_gb includes the {reserve_gb:g} GB reserve.")
    if "global_batch" in table:
        print(f"global_batch: the batch each layout runs, rounded down from {a['global_batch']} "
              f"to a multiple of its data-parallel size (--round-batch).")
    print("same: other layouts whose step time and memory round to the row's (0.1 ms, 0.1 GB), "
          "not shown (--json lists layouts one by one).")
    if args.explain:
        best = frame.iloc[0]
        print(f"\nBest layout, {_layout_text(best, a['precision'])}: "
              f"{best['step_time_s']:.3f} s per step")
        print("  (communication rows are what the step waits for, after overlap; --json has "
              "each collective's whole time as tp_comm_s, cp_comm_s, dp_comm_s, ep_comm_s)")
        for k, name in _PARTS.items():
            print(f"  {name:<17} {best[k]:10.4f} s  {100 * best[k] / best['step_time_s']:5.1f}%")
        print(f"  {'HFU':<17} {best['hfu']:10.3f}    (executed FLOPs, recompute included)")
        print("  kernel gaps: launch gaps between kernels; MoE host sync: the GPU idle at the "
              "dispatcher's host syncs; EP host floor: host time under the expert overlap; "
              "overlap slowdown: compute slowed by the collectives it hides; PP sends: exposed "
              "pipeline sends; bubble: pipeline fill and drain.")
    return 0


__all__ = ["search", "candidates", "grid", "layout_of", "compact", "main", "ZERO_NAMES", "MAX_GPUS"]
