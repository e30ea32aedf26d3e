"""The HBM chapter's exercises and explorer frames, against their sources."""
import pytest

from companion import memory as mem
from companion.exercises import check, exercises
from companion.explore import memory as em
from companion.model import preset

GiB = 2**30


def test_every_exercise_matches_its_sources(against_sources):
    ids = [e.id for e in exercises("memory")]
    assert all(i.startswith("mem-") for i in ids)
    against_sources("memory", dict(SOURCED))


# (exercise id, expected value, source)
SOURCED = [
    # NVIDIA H200 datasheet: 1,979 TFLOPS BF16 with sparsity (989.4 dense, as H100 SXM), 4.8 TB/s
    ("mem-ridge-h200", 989.4e12 / 4.8e12),
    # FLOPs = 2mnk; bytes = 2 (mk + kn + mn) for BF16 A, B, C: worked by hand
    ("mem-seed-gemm-intensity", 2 * 512 * 4096 * 512 / (2 * (512 * 512 + 512 * 4096 + 512 * 4096))),
    # a copy moves 2 x 2 bytes per FP16 element; SI GB = 1e9, IEC GiB = 2**30
    ("mem-seed-bench-factor", 2 * 2**30 / 1e9),
    # Megatron-LM megatron/training/theoretical_memory_usage.py: 6 + 12 / data_parallel_size
    ("mem-distopt-bytes", 6 + 12 / 64),
    # Llama 3 paper (arXiv:2407.21783) Table 3: 405B has 126 layers, 8 KV heads, hidden 16384 over
    # 128 heads (head dim 128): 2 x 126 x 8 x 128 x 2 bytes = 516,096 bytes per token
    ("mem-kv-405b-batch512", 516096 * 512 * 8192 / 1e12),
    # Korthikanti et al. 2022, Section 5: selective recomputation saves 70% for GPT-3
    ("mem-selective-saving-gpt3", 0.70),
    # 2 (512*512 + 512*4096 + 512*4096) bytes over the deviceQuery L2 size 52,428,800 bytes
    ("mem-seed-l2-share", 8912896 / 52428800),
]


@pytest.mark.parametrize("exercise_id, expected", SOURCED)
def test_answers_match_sources(exercise_id, expected):
    assert check(exercise_id, expected), check(exercise_id, expected, reveal=True)


def test_ledger_matches_training_memory_and_registry():
    bar, part, gib = em.LEDGER_BAR, em.LEDGER_PART, em.LEDGER_GIB
    df = em.ledger("gpt3-175b", tp=8, microbatch=2, recompute="selective")
    stacks = df[df[part] != "HBM capacity"]
    assert set(stacks[part]) == {"weights", "gradients", "optimizer state", "activations"}
    for label, sharding in em.OPTIMIZER_SHARDING.items():
        layout = em.ledger_layout("gpt3-175b", 8, 2, "selective", **sharding)
        assert layout.num_gpus == 1024 and layout.sequence_parallel
        total = stacks[stacks[bar].str.startswith(label)][gib].sum()
        assert total * GiB == pytest.approx(  # the frame rounds each part to 1e-3 GiB
            mem.training_memory(preset("gpt3-175b"), layout).total_bytes, abs=4 * 5e-4 * GiB)
    cap = df[df[part] == "HBM capacity"].set_index(bar)[gib]
    # nvidia-smi memory.total: H100 81,559 MiB (NVIDIA/nccl#1264), H200 143,771 MiB; the bars
    # show what the driver gives, not the nominal 80 / 141 GiB
    assert cap["4 H100 HBM (driver-visible)"] == pytest.approx(81559 / 1024)
    assert cap["5 H200 HBM (driver-visible)"] == pytest.approx(143771 / 1024)
    # sharding only ever shrinks the stack: replicated >= distributed optimizer >= ZeRO-3
    sums = [stacks[stacks[bar].str.startswith(b)][gib].sum() for b in em.OPTIMIZER_SHARDING]
    assert sums[0] >= sums[1] >= sums[2]
    # axis titles are words with units, not column names
    assert "GiB" in em.LEDGER_CHART["x"] and " " in em.LEDGER_CHART["y"]


def test_ledger_grid_is_small_and_valid():
    from companion import explore
    grid = explore.evaluate_grid(em.ledger, em.ledger_controls())
    assert len(grid) <= 5000 and grid[em.LEDGER_GIB].ge(0).all()


def test_state_table_labels_both_conventions():
    # Megatron 18 B/param (FP32 grads) and the ZeRO paper's 16 (Rajbhandari et al. 2020)
    t = em.state_table((1, 64))
    assert t.loc[1, "ZeRO-2, Megatron accounting (FP32 grads, 18 B)"] == 18
    assert t.loc[1, "ZeRO-2, ZeRO paper (16-bit grads, 16 B)"] == 16
    assert t.loc[64, "ZeRO-3, ZeRO paper (16 B)"] == pytest.approx(16 / 64)
    assert t.loc[64, "distributed optimizer (Megatron, 6 + 12/DP)"] == pytest.approx(6 + 12 / 64)


def test_seed_gemm_table_restates_the_verdict_with_l2():
    # 8.9 MB working set < 50 MB (H100 datasheet) and 126.5 MiB (B200 device query) of L2
    t = em.seed_gemm_table().set_index("GPU")
    assert (t["working set MB"] < t["L2 MB"]).all()
    assert list(t["bound, flushed cache"]) == ["HBM", "HBM"]
    assert list(t["bound, warm L2"]) == ["compute", "compute"]
    sweep = em.seed_overhead_sweep(overheads_us=(0.0, 3.0))
    assert set(sweep[sweep["fixed cost per kernel (us)"] == 3.0]["bound"]) == {"launch/latency"}
    eff = em.gemm_efficiency_table(("H100",)).iloc[0]
    # mamf-finder (Stas Bekman): best BF16 matmul on H100 SXM reaches 0.80 of 989.4 TFLOP/s
    assert eff[em.BURST_LABEL] == pytest.approx(0.80, abs=0.01)
    assert eff[em.IDEAL_LABEL] == pytest.approx(0.97, abs=0.005)


def test_kv_growth_is_linear():
    def kv(batch):
        df = em.kv_growth(batch, models=("llama3-405b",), points=4, max_context=32768)
        return df.set_index("context tokens")["KV GiB per GPU"]

    one, two = kv(1), kv(2)
    # doubling the context doubles it, and so does doubling the batch (the frame rounds each
    # value to 1e-3 GiB, hence the tolerance)
    assert one[16384] == pytest.approx(2 * one[8192], rel=1e-3)
    assert list(two / one) == pytest.approx([2] * len(one), rel=1e-3)
    # Llama 3 405B: 516,096 bytes per token (see above); the frame rounds to 1e-3 GiB
    assert one[8192] * GiB == pytest.approx(516096 * 8192, abs=1e-3 * GiB)


def test_korthikanti_table_reproduces_section_6():
    frac = em.korthikanti_table("fraction")
    assert (frac["TP (baseline)"] == 1).all()
    # Section 6.1: sequence parallelism and selective recomputation together: "a 5x reduction"
    assert (1 / frac["TP + SP + selective"]).between(4.9, 6.5).all()
    # Figure 1: with both, all four configurations fit an 80 GB A100; without, none does
    total = em.korthikanti_table("total")
    assert (total["TP + SP + selective"] < 80).all() and (total["TP (baseline)"] > 80).all()


def test_measured_points_follow_stream_counting():
    # STREAM (McCalpin): triad a = b + s c moves 3 arrays and does 2 FLOPs per element
    bw = [{"kernel": "triad", "elements": 1000, "dtype": "float32", "cache_level": "DRAM",
           "array_bytes": 4000, "best_s": 1e-6, "best_Bps": 12000 / 1e-6},
          {"kernel": "copy", "elements": 1000, "dtype": "float32", "cache_level": "DRAM",
           "array_bytes": 4000, "best_s": 1e-6, "best_Bps": 8000 / 1e-6}]
    mm = [{"status": "ok", "dtype": "fp32", "m": 64, "n": 64, "k": 64, "best_s": 1e-5,
           "best_flops": 2 * 64**3 / 1e-5},
          {"status": "skipped", "dtype": "bf16", "m": 64, "n": 64, "k": 64, "reason": "test"}]
    pts = em.measured_points(bw, mm)
    assert len(pts) == 2  # copy does no FLOPs, the skipped GEMM has no time
    triad = pts.iloc[0]
    assert triad["intensity"] == pytest.approx(2 / 12) and triad["GB/s"] == pytest.approx(12)
    assert pts.iloc[1]["intensity"] == pytest.approx(64 / 6)  # 2n^3 / (3 n^2 x 4 bytes)


def test_recorded_gpu_points_and_table():
    rec = {"kind": "bandwidth", "path": "data/measurements/x.json",
           "meta": {"device": "NVIDIA H200"},
           "results": [{"kernel": "triad", "device": "cuda", "elements": 2**28,
                        "dtype": "float32", "cache_level": "HBM", "array_bytes": 2**30,
                        "best_s": 3 * 2**30 / 4e12, "best_Bps": 4e12}]}
    table = em.gpu_records_table([rec])
    # H200 datasheet: 4.8 TB/s
    assert table.iloc[0]["fraction"] == pytest.approx(4e12 / 4.8e12)
    pts = em.recorded_gpu_points([rec])
    assert pts.iloc[0]["label"].startswith("recorded NVIDIA H200")
    assert em.recorded_gpu_points([]).empty and em.gpu_records_table([]).empty


@pytest.mark.parametrize("call, match", [
    (lambda: em.ledger("gpt3-175b", tp=3), "num_gpus"),
    (lambda: em.ledger("gpt-4"), "model"),
    (lambda: em.ledger("gpt3-175b", recompute="some"), "recompute"),
    (lambda: em.kv_growth(kv_dtype="fp7"), "dtype"),
    (lambda: em.kv_growth(batch=0), "batch"),
    (lambda: em.korthikanti_table("peak"), "what"),
    (lambda: em.measured_roof(0, 1e12), "memory_Bps"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_tile_table_compares_the_ampere_picture_with_each_architecture():
    # CUTLASS: Hopper 128x256 tiles one per SM; Blackwell 2-SM UMMA 256x256 per SM pair.
    t = em.tile_table().set_index(["GPU", "output m x n", "tiles"])
    # seed GEMM on H100: 128 tiles of 128x128 on 132 SMs (97%) vs 64 of 128x256 (48%)
    assert t.loc[("H100", "512 x 4096", "ampere 128x128"), "tile count"] == 128
    assert t.loc[("H100", "512 x 4096", "hopper 128x256"), "slots busy"] == pytest.approx(64 / 132)
    # on B200: 32 tiles of 256x256 on 74 SM pairs
    assert t.loc[("B200", "512 x 4096", "blackwell 256x256"), "slots busy"] == pytest.approx(32 / 74)
    assert ("A100", "512 x 4096", "ampere 128x128") in t.index  # one row: its own preset is Ampere's
