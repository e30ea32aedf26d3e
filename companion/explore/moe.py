"""Tables, charts and explorers of the chapter "Expert parallelism".

The numbers come from :mod:`companion.moe` (where an expert-parallel group sits on the
machine, what its all-to-all sends) and :func:`companion.parallel.estimate` (the step they sit
in); this module arranges them into frames. The EP-share explorer and the copies table keep
one GPU (B200 in GB200, 1,200 W) with the GB200 NVL72's NVLink and one 400 Gb/s NIC per GPU,
cut into scale-up domains of 8, 36 or 72 GPUs, so only the domain differs; the sensitivity
table and the case study's machines compare whole systems (GB200 NVL72 against DGX B200, and
DGX H100), GPUs included.
"""
from __future__ import annotations

import functools
from dataclasses import replace

import pandas as pd

from .. import checks, hardware, moe, parallel, validation
from ..calibration import DEFAULT
from ..machine import Cluster, cluster
from ..model import Layout, preset
from .core import Choice

#: The seed's 1.7T MoE on 128 full NVL72 racks: TP4 PP8 CP2 VPP2, expert TP 1 so that any EP up
#: to 128 fits the 1,152-GPU expert grid of a pipeline stage.
SEED_MODEL, SEED_GPU, SEED_GPUS = "seed-1.7t-moe", "GB200", 9216
SEED_LAYOUT = dict(tp=4, pp=8, cp=2, vpp=2, microbatch=1, sequence_parallel=True,
                   distributed_optimizer=True)
SEED_MICROBATCHES = 16
DOMAINS = (8, 36, 72)
EP_DEGREES = (8, 16, 32, 64, 128)


@functools.cache
def domain_cluster(gpus_per_domain: int) -> Cluster:
    """GB200 NVL72's NVLink and NICs, with scale-up domains of ``gpus_per_domain`` GPUs."""
    base = cluster(SEED_GPU, "GB200 NVL72")
    return Cluster(f"{gpus_per_domain}-GPU NVLink domains", gpus_per_domain, base.scaleup_Bps,
                   base.scaleout_Bps, base.source)


def seed_layout(ep: int, etp: int = 1, dispatch: str = "bf16", **kw) -> Layout:
    dp = SEED_GPUS // (SEED_LAYOUT["tp"] * SEED_LAYOUT["pp"] * SEED_LAYOUT["cp"])
    return Layout(**{**SEED_LAYOUT, **kw}, dp=dp, ep=ep, etp=etp, dispatch_precision=dispatch,
                  global_batch=dp * SEED_MICROBATCHES)


#: the explorer's two dispatchers: Megatron-Core with DeepEP (its default here) and with NCCL's
#: all-to-all (``moe_token_dispatcher_type: alltoall``), one copy of a token per routed expert
DISPATCH_STACKS = {"megatron-core": parallel.STACKS["megatron-core"],
                   "megatron-core, NCCL all-to-all": replace(parallel.STACKS["megatron-core"],
                                                             moe_dispatcher="alltoall")}


@functools.lru_cache(maxsize=64)
def ep_share_frame(dispatch: str = "bf16", software: str = "megatron-core",
                   top_k: int = 24) -> pd.DataFrame:
    """The seed's 1.7T MoE on 9,216 GPUs: the all-to-all's share of the step against EP, one
    line per domain size, for a dispatch precision, a stack (DeepEP or NCCL dispatch) and
    top-k."""
    m = preset(SEED_MODEL, top_k=top_k)
    rows = []
    for d in DOMAINS:
        for ep in EP_DEGREES:
            e = parallel.estimate(m, seed_layout(ep, dispatch=dispatch), SEED_GPU,
                                  system=domain_cluster(d), software=DISPATCH_STACKS[
                                      checks.choice("software", software, DISPATCH_STACKS)])
            rows.append({"ep": ep, "domain": f"{d}-GPU domains", "a2a_share_pct":
                         100 * e.ep_exposed_s / e.step_time_s, "ep_comm_s": e.ep_comm_s,
                         "step_time_s": e.step_time_s, "memory_gb": e.memory_bytes / 1e9,
                         "fits": e.fits})
    return pd.DataFrame(rows)


EP_CONTROLS = [Choice("dispatch", moe.DISPATCH_PRECISIONS, "bf16", label="dispatch precision"),
               Choice("software", tuple(DISPATCH_STACKS), "megatron-core",
                      label="stack (DeepEP / NCCL dispatch)"),
               Choice("top_k", (2, 8, 24), 24, label="top-k")]
EP_CHART = dict(x="ep:Q", y="a2a_share_pct:Q", color="domain:N", mark="line", x_scale="log",
                title="Seed's 1.7T MoE on 9,216 GPUs: all-to-all share of the step (%)",
                tooltip=["ep", "domain", "a2a_share_pct", "ep_comm_s", "step_time_s",
                         "memory_gb", "fits"])


def copies_table(size: int = 32, stride: int = 4, experts: int = 128, top_k: int = 24,
                 world: int = SEED_GPUS) -> pd.DataFrame:
    """Copies of one token the worst-placed rank sends, per dispatcher and domain size."""
    rows = []
    for d in DOMAINS:
        lo, hi, doms = moe.group_span(size, stride, d, world)
        for how in moe.DISPATCHERS:
            nvl, net = moe.copies_per_token(how, size, stride, d, experts, top_k, world)
            rows.append({"domain_gpus": d, "dispatcher": how, "fewest_peers_beside": lo - 1,
                         "most_domains": doms, "nvlink_copies": nvl, "network_copies": net})
    return pd.DataFrame(rows)


SEED_SYSTEMS = {"GB200 NVL72": "GB200", "DGX B200": "B200"}


@functools.lru_cache(maxsize=4)
def sensitivity_frame(widths=(1024, 2048, 4096), top_ks=(2, 8, 24)) -> pd.DataFrame:
    """How the seed's verdicts move with top-k and expert width: its own layout (TP4 PP8 CP2
    VPP2 EP128, expert TP = TP) on 8,192 GPUs, NVL72 racks against 8-GPU nodes."""
    rows = []
    dp = 8192 // 64
    lay = Layout(**SEED_LAYOUT, dp=dp, ep=128, global_batch=dp * SEED_MICROBATCHES)
    for width in widths:
        for k in top_ks:
            m = preset(SEED_MODEL, top_k=k, expert_ffn_hidden=width)
            for system, gpu in SEED_SYSTEMS.items():
                e = parallel.estimate(m, lay, gpu, system=system)
                rows.append({"expert_ffn": width, "top_k": k, "system": system,
                             "active_b": m.active_params / 1e9, "total_b": m.params / 1e9,
                             "step_time_s": e.step_time_s,
                             "a2a_share_pct": 100 * e.ep_exposed_s / e.step_time_s,
                             "memory_gb": e.memory_bytes / 1e9, "fits": e.fits})
    return pd.DataFrame(rows)


def grouped_gemm_frame(calibration=None) -> pd.DataFrame:
    """DeepGEMM's published FP8 grouped GEMMs on H800 against the expert-GEMM pricing of the
    step model (the roofline with tile and wave quantization over the groups as a batch)."""
    from ..steptime import _linear_times
    cal = DEFAULT if calibration is None else calibration
    g = hardware.gpu("H800")
    rows = []
    with open(moe.MEASUREMENTS_CSV, newline="") as f:
        import csv
        for r in csv.DictReader(f):
            if r["kind"] != "grouped_gemm":
                continue
            p = dict(kv.split("=") for kv in r["conditions"].split("; ")[:4])
            groups, m, n, k = (int(p[x]) for x in ("groups", "m_per_group", "n", "k"))
            fwd, _ = _linear_times(g, cal, "fp8", [(m, n, k, groups)], 1)
            flops = 2.0 * groups * m * n * k
            rows.append({"groups": groups, "m_per_group": m, "n": n, "k": k,
                         "published_tflops": float(r["value"]) / 1e12,
                         "model_tflops": flops / float(fwd[0, 0]) / 1e12})
    out = pd.DataFrame(rows)
    return out.assign(error_pct=100 * (out["published_tflops"] / out["model_tflops"] - 1))


#: The case study's machines for the seed's 1.7T MoE: the same 9,216 GPUs in racks or in nodes.
SEED_MOE_MACHINES = {"9,216 GB200 in 128 NVL72 racks": ("GB200", "GB200 NVL72"),
                     "9,216 B200 in 1,152 DGX B200": ("B200", "DGX B200"),
                     "9,216 H100 in 1,152 DGX H100": ("H100", "DGX H100")}
SEED_MOE_BATCH = 4608  # sequences of 8,192 tokens: 37.7M tokens a step (the seed names none)


@functools.cache
def seed_moe_outcomes(tokens: float = 1e12, precision: str = "fp8") -> tuple:
    """The fastest layout the search finds for the seed's 1.7T MoE on each machine of
    :data:`SEED_MOE_MACHINES`, priced for ``tokens`` tokens (:func:`companion.cases.price`)."""
    from .. import cases
    return tuple(cases.price(cases.Scenario(label, SEED_MODEL, gpu, SEED_GPUS, tokens,
                                            SEED_MOE_BATCH, precision, system))
                 for label, (gpu, system) in SEED_MOE_MACHINES.items())


def seed_moe_table(tokens: float = 1e12) -> pd.DataFrame:
    """:func:`companion.cases.table` of :func:`seed_moe_outcomes`, with the layout's recompute
    mode and the exposed shares of the step of the expert all-to-all and of the data-parallel
    gradient and parameter traffic."""
    from .. import cases
    outs = seed_moe_outcomes(tokens)
    return cases.table(outs).assign(
        recompute=[o.layout.recompute for o in outs],
        a2a_share_pct=[100 * o.breakdown["ep_exposed_s"] / o.step_time_s for o in outs],
        dp_share_pct=[100 * o.breakdown["dp_exposed_s"] / o.step_time_s for o in outs])


MOE_MODELS = ("deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b")


def validation_frame(calibration=DEFAULT) -> pd.DataFrame:
    """Predicted against measured step time of every held-out published MoE run."""
    v = parallel.validate(calibration, held_out=True, moe=True)
    runs = parallel.published_runs(held_out=True, moe=True)  # same rows, same order
    v["ep"] = runs["ep"]
    # the runs that capture the whole iteration in one CUDA graph (the MLPerf submissions, the
    # MoE recipes' paged-stash variants): no host launches or syncs are left to expose
    stacks = [validation.run_stack(r) for _, r in runs.iterrows()]
    v["full_graph"] = [st.cuda_graphs for st in stacks]
    v["ep_overlap"] = [st.overlap_ep for st in stacks]
    v["local_experts"] = [preset(m).experts // e for m, e in zip(runs["model"], runs["ep"])]
    cols = ["run_id", "model", "gpu", "num_gpus", "tp", "pp", "ep", "local_experts",
            "precision", "full_graph", "ep_overlap", "measured_step_time_s",
            "predicted_step_time_s", "error_pct"]
    return v[cols]


def overlap_by_local_experts(val: pd.DataFrame) -> pd.DataFrame:
    """Held-out MoE errors (a :func:`validation_frame`) grouped by whether the run overlapped
    its expert all-to-all and by its local experts per GPU: runs, mean and mean absolute error
    in percent. A residual table, not a mechanism: it shows where the model's misses sit."""
    rows = []
    for (overlap, local), group in val.groupby(["ep_overlap", "local_experts"]):
        s = error_summary(group)
        rows.append({"ep_overlap": overlap, "local_experts": local, "runs": s["n"],
                     "mean_pct": s["mean_pct"], "mean_abs_pct": s["mean_abs_pct"]})
    return pd.DataFrame(rows)


def ep_overlap_fit() -> dict:
    """The expert-overlap constant and what it stands against: ``hidden`` (the calibration's
    ``ep_overlap_hidden``) and ``pairs``, one row per published pair of
    :data:`companion.validation.EP_OVERLAP_PAIRS` (indexed by the run with the overlap): the
    measured step ratio (without over with the overlap), the model's at ``hidden``, the
    model's if the overlap hid all of the hideable all-to-all (``full_ratio``) and the fraction
    the pair would set on its own (``alone``)."""
    grid = validation.ep_overlap_grid(DEFAULT)
    pairs = pd.DataFrame({"measured_ratio": 1 / validation.ep_overlap_measured(),
                          "model_ratio": 1 / grid.loc[DEFAULT.ep_overlap_hidden],
                          "full_ratio": 1 / grid.loc[1.0],
                          "alone": validation.ep_overlap_alone(DEFAULT)})
    return {"hidden": DEFAULT.ep_overlap_hidden, "pairs": pairs}


def sync_fit() -> dict:
    """The MoE host-sync constant and what it stands against: ``sync_s`` (the calibration's
    ``moe_sync_s``) and the measured step ratio of Megatron-LM's Qwen3-30B-A3B recipe pair
    (dispatcher eager over the whole step in one CUDA graph)."""
    return {"sync_s": DEFAULT.moe_sync_s, "measured_ratio": validation.moe_sync_measured()}


def overlap_host_fit() -> dict:
    """The expert overlap's host-floor constant and what bounds it: ``kernel_s`` (the
    calibration's ``overlap_host_kernel_s``), ``bounds`` (what each run of
    :data:`companion.validation.OVERLAP_HOST_FITTING` allows, seconds per kernel), ``pairs``
    (:func:`companion.validation.overlap_host_pairs`, with each pair's measured steps), and
    for each of the MXFP8 and BF16 runs the kernels one layer issues per microbatch
    (``kernels``) and the floor they make (``layer_s``), both keyed by precision."""
    runs = parallel.published_runs(None, moe=True).set_index("run_id")
    pairs = validation.overlap_host_pairs(DEFAULT)
    for without, with_ in validation.OVERLAP_HOST_PAIRS:
        pairs.loc[with_, "with_s"] = runs.loc[with_, "measured_step_time_s"]
        pairs.loc[with_, "without_s"] = runs.loc[without, "measured_step_time_s"]
    table = validation.overlap_host_table()
    kernels = dict(zip(table["precision"], table["kernels"]))
    return {"kernel_s": DEFAULT.overlap_host_kernel_s, "bounds": table["kernel_s"],
            "pairs": pairs, "kernels": kernels,
            "layer_s": {p: k * DEFAULT.overlap_host_kernel_s for p, k in kernels.items()}}


def overlap_host_bound() -> list:
    """The published runs (held out or not) on which the expert overlap's host pace binds:
    their step is longer with it than with it switched off."""
    runs = parallel.published_runs(None, moe=True)
    return [r["run_id"] for _, r in runs.iterrows()
            if validation.run_stack(r).overlap_ep and validation.run_estimate(r).overlap_host_s > 0]


def without_overlap_host():
    """The default calibration with the expert overlap's host pace switched off."""
    return replace(DEFAULT, off=DEFAULT.off | {"overlap_host"})


def with_ep_overlap_hidden(hidden: float):
    """The default calibration with ``ep_overlap_hidden`` set to ``hidden``."""
    return replace(DEFAULT, ep_overlap_hidden=hidden)


def without_sync():
    """The default calibration with the MoE dispatcher's host sync switched off."""
    return replace(DEFAULT, off=DEFAULT.off | {"host"})


def error_summary(frame: pd.DataFrame) -> dict:
    """Mean signed and absolute error, worst run and count beyond 30% (percent)."""
    err = frame["error_pct"]
    worst = frame.loc[err.abs().idxmax()]
    return {"n": len(frame), "mean_pct": float(err.mean()), "mean_abs_pct": float(err.abs().mean()),
            "beyond_30": int((err.abs() > 30).sum()), "worst_run": worst["run_id"],
            "worst_pct": float(worst["error_pct"])}


def system_of(gpu_name: str) -> str:
    """The registry's usual system for a GPU (for tables)."""
    return cluster(hardware.gpu(gpu_name)).name


__all__ = ["SEED_MODEL", "SEED_GPU", "SEED_GPUS", "SEED_LAYOUT", "DOMAINS", "EP_DEGREES",
           "domain_cluster", "seed_layout", "ep_share_frame", "EP_CONTROLS", "EP_CHART",
           "copies_table", "sensitivity_frame", "grouped_gemm_frame", "SEED_MOE_MACHINES",
           "SEED_MOE_BATCH", "seed_moe_outcomes", "seed_moe_table", "MOE_MODELS",
           "validation_frame", "overlap_by_local_experts", "ep_overlap_fit", "sync_fit", "without_sync",
           "overlap_host_fit", "overlap_host_bound", "without_overlap_host",
           "error_summary", "system_of"]
