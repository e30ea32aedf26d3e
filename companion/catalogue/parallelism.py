"""Exercises of the parallelism chapter (Megatron's TP, PP, DP, CP and EP at 2026 scale)."""
import math

from .. import hardware
from ..exercises import Exercise, register
from ..model import Layout
from ..parallel import estimate, model_flops_per_token, preset, published_runs, run_layout

CHAPTER = "parallelism"


def _px():
    # Imported on demand: the explore package loads altair, which checking an answer never needs.
    from ..explore import parallelism
    return parallelism


def table5_bubble_over_steady() -> float:
    """Pipeline bubble over the steady-state time of Korthikanti et al.'s 175B layout."""
    run = published_runs().set_index("run_id").loc["korthikanti2022_t5_175b_selective"]
    e = estimate(run["model"], run_layout(run), run["gpu"], software=run["software"])
    steady = e.step_time_s - e.bubble_s - e.pp_p2p_s - e.dp_exposed_s - e.optimizer_s
    return e.bubble_s / steady


def table5_1t_mfu() -> float:
    """MFU of Korthikanti et al.'s 1T run with selective recomputation, from its step time."""
    run = published_runs().set_index("run_id").loc["korthikanti2022_t5_1t_selective"]
    m = preset(run["model"])
    tokens = int(run["global_batch"]) * m.seq_len
    peak = hardware.gpu(run["gpu"]).peak_flops(run["precision"])
    return (model_flops_per_token(m) * tokens
            / (run["measured_step_time_s"] * int(run["num_gpus"]) * peak))


def _tp16_cross_node_why() -> str:
    # computed, not typed: the ring as NCCL runs it over two DGX B200 nodes (companion.fabric)
    from ..machine import cluster, cross_domain_ring
    cl = cluster("B200", "DGX B200")
    r = cross_domain_ring(cl, 16, 1e9)
    return (f"Across nodes {r.hops_off_scaleup} of the {r.gpus} ring hops leave NVLink; NCCL "
            f"spreads them over the node's {cl.gpus_per_domain} NICs ({r.ring_Bps / 1e9:.0f} GB/s "
            f"per GPU, {r.bandwidth_ratio:.2f}x less than NVLink 5, plus network latency), and "
            "the all-reduces no longer hide behind the GEMMs.")


def tp16_domain_ratio() -> float:
    """Step time with TP 16 in 8-GPU nodes over TP 16 inside NVL72 racks (Megatron-Core)."""
    f = _px().tp_domain_frame("megatron-core")
    t = f[f["tp"] == 16].set_index("system")["step_time_s"]
    return float(t["8-GPU DGX B200 nodes"] / t["72-GPU GB200 NVL72 racks"])


def best_tp_gpt3_1024_h100() -> int:
    """TP degree of the fastest layout of GPT-3 175B on 1,024 H100 at global batch 2048."""
    return int(_px().best_layout("gpt3-175b", "H100", 1024, 2048, "bf16").iloc[0]["tp"])


def seed_175b_speedup() -> float:
    """Best step time of the seeds' 175B on 256 H100 (FP8) over 256 B200 (FP4)."""
    t = _px().seed_175b_table()["step_time_s"]
    return float(t["256 H100, FP8 (seed)"] / t["256 B200, FP4 (seed)"])


register(Exercise(
    id="par-microbatches",
    chapter=CHAPTER,
    question="The third seed's layout TP 8 x PP 4 x DP 8 runs a global batch of 2,048 "
             "sequences with microbatches of one sequence. How many microbatches does each "
             "pipeline run per step?",
    answer=lambda: Layout(tp=8, pp=4, dp=8, microbatch=1, global_batch=2048).num_microbatches,
    why="Each of the DP = 8 pipelines takes 2048 / 8 sequences, one per microbatch: "
        "m = global batch / (microbatch x DP).",
    rel_tol=0.0, unit="microbatches"))

register(Exercise(
    id="par-bubble-table5",
    chapter=CHAPTER,
    question="Korthikanti et al.'s 175B runs (Table 5) use p = 8 pipeline stages, m = 64 "
             "microbatches and v = 3 virtual stages per GPU. By what fraction does the "
             "pipeline bubble lengthen the steady-state time?",
    answer=table5_bubble_over_steady,
    why="The interleaved 1F1B bubble is (p - 1)/(m v) of the steady state "
        "(Narayanan et al. 2021, Section 2.2): 7 / 192.",
    rel_tol=0.01, unit=""))

register(Exercise(
    id="par-mfu-1t",
    chapter=CHAPTER,
    question="Korthikanti et al.'s 1T model (128 layers, hidden 25,600, sequence 2,048, vocab "
             "51,200) took 71.49 s per step of 512 sequences on 512 A100s (312 TFLOP/s dense "
             "FP16) with selective recomputation. What MFU is that, counting FLOPs the way "
             "Megatron does?",
    answer=table5_1t_mfu,
    why="Model FLOPs per step 72 B s l h^2 (1 + s/6h + V/12lh), divided by the step time, "
        "the GPU count and the peak.",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="par-tp16-domain",
    chapter=CHAPTER,
    question="GPT-3 175B on 512 B200 (PP 8, sequence parallel, selective recomputation, "
             "global batch 1,024, Megatron-Core; microbatch 1, BF16, no interleaving, the same "
             "1,000 W B200 in both systems). With TP = 16, how many times longer is a step "
             "when each TP group spans two 8-GPU DGX B200 nodes than when it sits inside one "
             "NVL72 rack?",
    answer=tp16_domain_ratio,
    why=_tp16_cross_node_why(),
    rel_tol=0.03, unit="x"))

register(Exercise(
    id="par-search-best-tp",
    chapter=CHAPTER,
    question="Search every layout of GPT-3 175B on 1,024 H100 (DGX H100 nodes) at a global "
             "batch of 2,048 in BF16. What TP degree does the fastest layout use?",
    answer=best_tp_gpt3_1024_h100,
    why="search('gpt3-175b', 'H100', 1024, 2048).iloc[0]; TP stays inside the 8-GPU NVLink "
        "domain (its all-reduces stay off InfiniBand), and the search finds a degree below the "
        "domain's size faster, with more pipeline stages instead.",
    rel_tol=0.0, unit=""))

register(Exercise(
    id="par-ep128-racks",
    chapter=CHAPTER,
    question="In the seed's MoE layout an expert-parallel group is EP = 128 ranks, each a TP "
             "group of 4 GPUs. How many GB200 NVL72 racks does one such group span at least?",
    answer=lambda: math.ceil(4 * 128 / hardware.system("GB200 NVL72").scaleup_domain_gpus),
    why="4 x 128 = 512 GPUs against 72 per NVLink domain: 512 / 72 = 7.1, so at least 8 racks; "
        "the expert all-to-all crosses InfiniBand whatever the rack.",
    rel_tol=0.0, unit="racks"))

register(Exercise(
    id="par-seed-175b-speedup",
    chapter=CHAPTER,
    question="With the fastest layout the search finds for each, how many times faster is a "
             "step of the seeds' 175B (sequence 2,048, global batch 2,048) on 256 B200 in FP4 "
             "than on 256 H100 in FP8?",
    answer=seed_175b_speedup,
    why="Both searched with the same model: B200's dense FP4 peak is 4.5x H100's FP8, and "
        "the memory-bound and communication parts gain less than that.",
    rel_tol=0.05, unit="x"))
