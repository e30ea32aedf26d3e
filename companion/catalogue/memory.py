"""Exercises of the chapter "HBM: rooflines and where every byte of a training step lives"."""
from .. import memory, roofline, units
from ..exercises import Exercise, register
from ..model import preset


def _seed_bench_understatement(dtype="fp16"):
    # True GB/s of y.copy_(x) over what the seed prints: it counts 2 x size bytes (one byte per
    # element, read + write) where 2 x size x element bytes move, and divides by 2**30, not 1e9.
    true_bytes = 2 * roofline.dtype_bytes(dtype)
    return (true_bytes / units.GB) / (2 / units.GiB)


def _selective_saving(name="gpt3-175b"):
    m = preset(name)
    none = memory.activations_per_layer_bytes(m.seq_len, 1, m.hidden, m.heads)
    sel = memory.activations_per_layer_bytes(m.seq_len, 1, m.hidden, m.heads,
                                             recompute="selective")
    return 1 - sel / none


register(Exercise(
    id="mem-ridge-h200", chapter="memory",
    question="H200 SXM has H100 SXM's BF16 peak but HBM3e at 4.8 TB/s. What is its BF16 ridge "
             "point, in FLOP per byte?",
    answer=lambda: roofline.ridge_point("H200", "bf16"),
    why="ridge point = dense peak FLOP/s / HBM bytes/s; same peak, more bandwidth, lower ridge.",
    rel_tol=0.02, unit="FLOP/byte"))

register(Exercise(
    id="mem-seed-gemm-intensity", chapter="memory",
    question="What is the arithmetic intensity of the seed's 512 x 4096 x 512 BF16 GEMM, with A "
             "and B read once and C written once?",
    answer=lambda: roofline.gemm(*roofline.SEED_FFN_SHAPE, "bf16").intensity,
    why="2mnk FLOPs over 2(mk + kn + mn) bytes.",
    rel_tol=0.02, unit="FLOP/byte"))

register(Exercise(
    id="mem-seed-bench-factor", chapter="memory",
    question="The seed's copy benchmark prints (size * 2 * 100) / (duration * 1024**3) for FP16 "
             "tensors. By what factor is the true bandwidth in GB/s larger than the printed "
             "number?",
    answer=_seed_bench_understatement,
    why="A copy reads and writes 2 bytes per FP16 element (4 x size bytes, not 2 x size), and "
        "a GB is 1e9 bytes, not 2**30.",
    rel_tol=0.01))

register(Exercise(
    id="mem-distopt-bytes", chapter="memory",
    question="With Megatron's distributed optimizer and 64 data-parallel ranks, how many bytes "
             "of weights, gradients and optimizer state does each GPU hold per parameter of its "
             "model shard?",
    answer=lambda: memory.megatron_bytes_per_param(64, distributed_optimizer=True),
    why="2 (BF16 weights) + 4 (FP32 gradients) stay; the 12 bytes of FP32 master weights and "
        "Adam moments are split over DP: 6 + 12/DP.",
    rel_tol=0.01, unit="bytes"))

register(Exercise(
    id="mem-kv-405b-batch512", chapter="memory",
    question="How large is the BF16 KV cache of Llama 3 405B (126 layers, 8 KV heads of 128) "
             "for a batch of 512 sequences of 8,192 tokens, in TB?",
    answer=lambda: memory.kv_cache_bytes(preset("llama3-405b"), 8192, 512) / units.TB,
    why="2 (K and V) x layers x KV heads x head dim x 2 bytes per token, times batch x tokens: "
        "linear in both.",
    rel_tol=0.02, unit="TB"))

register(Exercise(
    id="mem-selective-saving-gpt3", chapter="memory",
    question="For GPT-3 175B (96 heads, hidden 12288, sequence 2048) without tensor parallelism, "
             "what fraction of a layer's activation memory does selective recomputation save?",
    answer=_selective_saving,
    why="Per layer sbh(34 + 5as/h) without recompute and 34 sbh with it: the saving is "
        "(5as/h) / (34 + 5as/h).",
    rel_tol=0.0, abs_tol=0.01))

register(Exercise(
    id="mem-seed-l2-share", chapter="memory",
    question="The seed's 512 x 4096 x 512 BF16 GEMM reads A and B and writes C once. What "
             "fraction of an H100 SXM's 50 MiB L2 (52,428,800 bytes, as deviceQuery reports it) "
             "does that working set fill?",
    answer=lambda: (roofline.gemm(*roofline.SEED_FFN_SHAPE, "bf16").bytes_moved
                    / roofline.resolve_gpu("H100").llc_bytes),
    why="2(mk + kn + mn) bytes over the L2 size: far below 1, so a loop that does not flush the "
        "cache times the GEMM from L2, not from HBM.",
    rel_tol=0.02))
