"""Exercises of the expert-parallelism chapter (where the experts sit, what the all-to-all
sends, what an MoE layer keeps in memory)."""
from .. import moe
from ..exercises import Exercise, register
from ..model import preset

CHAPTER = "moe"


def _mx():
    # Imported on demand: the explore package loads altair, which checking an answer never needs.
    from ..explore import moe as mx
    return mx


def worst_rank_peers_nvl72() -> int:
    """Fewest EP peers a rank finds in its own rack: EP32, ETP4, 9,216 GPUs in 72-GPU racks."""
    return moe.group_span(32, 4, 72, 9216)[0] - 1


def deepep_network_copies_nvl72() -> float:
    """Network copies per token of DeepEP's dispatch for the seed (EP32 x ETP4, top-24 of 128)
    on 72-GPU racks, for the worst-placed rank."""
    return moe.copies_per_token("deepep", 32, 4, 72, 128, 24, 9216)[1]


def nccl_network_copies_dgx() -> float:
    """Network copies per token of an NCCL all-to-all for DeepSeek-V3's EP64 on 8-GPU nodes."""
    return moe.copies_per_token("alltoall", 64, 1, 8, 256, 8, 2048)[1]


def seed_dispatched_gb() -> float:
    """GB of top-24 dispatched copies one MoE layer keeps per microbatch in the seed's layout."""
    m = preset("seed-1.7t-moe")
    tokens = m.seq_len // 2  # CP2
    return float(moe.saved_bytes_per_layer(tokens, m.hidden, m.experts, m.top_k, 4, 4)) / 1e9


def fp8_dispatch_saving() -> float:
    """Fraction of one layer's all-to-all bytes (dispatch, combine, two backward) FP8 dispatch
    saves against BF16."""
    bf = 3 * moe.COMBINE_BYTES + moe.wire_bytes("bf16")
    return 1 - (3 * moe.COMBINE_BYTES + moe.wire_bytes("fp8")) / bf


def seed_top2_share_nvl72() -> float:
    """All-to-all share of the seed's step (its own layout, 8,192 GPUs) on NVL72 at top-2."""
    f = _mx().sensitivity_frame()
    row = f[(f["top_k"] == 2) & (f["expert_ffn"] == 2048) & (f["system"] == "GB200 NVL72")]
    return float(row["a2a_share_pct"].iloc[0]) / 100


register(Exercise(
    id="moe-worst-rank-peers",
    chapter=CHAPTER,
    question="The seed's expert-parallel groups have EP = 32 ranks, four apart (expert TP = "
             "TP = 4), and Megatron numbers the 9,216 GPUs of 128 NVL72 racks in order. Over "
             "all groups, how many other members of its own group does the worst-placed rank "
             "find in its own 72-GPU rack?",
    answer=worst_rank_peers_nvl72,
    why="A group covers 128 consecutive ranks; racks cut every 72. The group starting at rank "
        "640 has ranks 640 and 644 in the rack that ends at 647: one peer beside each.",
    rel_tol=0.0, unit="peers"))

register(Exercise(
    id="moe-nccl-copies-dsv3",
    chapter=CHAPTER,
    question="DeepSeek-V3 routes each token to 8 of 256 experts over EP = 64 ranks on 8-GPU "
             "nodes. With an NCCL all-to-all (one copy per routed expert), how many copies of "
             "a token's hidden vector leave its node on average?",
    answer=nccl_network_copies_dgx,
    why="8 copies, of which 56/64 go to ranks outside the node: 8 x 56 / 64 = 7. DeepSeek's "
        "node-limited routing and DeepEP send one per remote node instead, at most 4.",
    rel_tol=0.01, unit="copies"))

register(Exercise(
    id="moe-deepep-copies-nvl72",
    chapter=CHAPTER,
    question="Same seed layout (EP 32 x ETP 4, top-24 of 128 experts) on NVL72 racks, with "
             "DeepEP's dispatch (one network copy per remote domain that holds any of the "
             "token's experts). How many network copies does the worst-placed rank send per "
             "token?",
    answer=deepep_network_copies_nvl72,
    why="The worst rank's group spreads 2 + 18 + 12 over three racks; with 24 of 128 experts "
        "picked, both remote racks (72 and 48 experts) are hit almost surely: about 2.",
    rel_tol=0.02, unit="copies"))

register(Exercise(
    id="moe-seed-dispatched-gb",
    chapter=CHAPTER,
    question="seed-1.7t-moe: hidden 16,384, sequence 8,192 split by CP = 2, top-24 routing, "
             "expert TP = TP = 4. How many GB of dispatched token copies (BF16, kept for the "
             "expert weight gradient) does one MoE layer hold per microbatch on each GPU, "
             "after the expert-TP gather, router probabilities and indices included?",
    answer=seed_dispatched_gb,
    why="4,096 tokens x 24 copies x 16,384 x 2 bytes = 3.22 GB (gathered over the 4 expert "
        "TP ranks), plus FP32 probabilities over 128 experts: about 3.2 GB per layer per "
        "microbatch, times layers per stage and microbatches in flight.",
    rel_tol=0.02, unit="GB"))

register(Exercise(
    id="moe-fp8-dispatch-saving",
    chapter=CHAPTER,
    question="Dispatch in FP8 (one byte plus one FP32 scale per 128 channels) while combine "
             "and both backward transfers stay BF16. What fraction of one MoE layer's "
             "all-to-all bytes does it save?",
    answer=fp8_dispatch_saving,
    why="Four transfers of 2 bytes per element become 2 + 2 + 2 + 1.03: "
        "1 - 7.03 / 8 = 12%. FP8 dispatch halves one transfer of four, not the all-to-all.",
    rel_tol=0.01, unit=""))

register(Exercise(
    id="moe-seed-top2-share",
    chapter=CHAPTER,
    question="Price the seed's own layout (TP4 PP8 CP2 VPP2 EP128, 8,192 GPUs in NVL72 "
             "racks) with top-2 instead of top-24 routing. What fraction of the step is the "
             "expert all-to-all?",
    answer=seed_top2_share_nvl72,
    why="sensitivity_frame(): fewer copies per token shrink the all-to-all, but the expert "
        "GEMMs shrink with them, so the share moves less than the top-k.",
    rel_tol=0.03, unit=""))
