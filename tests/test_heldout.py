"""Held-out published runs (H100, B200, GB200, GB300; FP8; Megatron-Core / Megatron-Bridge): rows parse,
their own numbers are consistent, and the model prices them. The errors are printed, not
bounded: these rows never set a calibration constant, and the gap is a finding, not a test."""
import numpy as np
import pytest

from companion.parallel import model_flops_per_token, preset, published_runs, validate


@pytest.fixture(scope="module")
def heldout():
    return validate(held_out=True)


def test_heldout_rows_parse_and_stay_out_of_the_calibration_set():
    held, base = published_runs(held_out=True), published_runs()
    assert len(held) >= 15 + 25 and len(base) == 18
    assert not set(held["run_id"]) & set(base["run_id"]) and held["run_id"].is_unique
    assert held["held_out"].all() and not base["held_out"].any()
    # every row names a public source: NVIDIA's benchmark tables and DGX Cloud recipes, and
    # MLCommons' MLPerf Training results
    assert held["source"].str.contains("https://").all()
    assert held["source"].str.contains("NVIDIA|MLCommons|MLPerf").all()
    assert (held["tp"] * held["pp"] * held["dp"] * held["cp"] == held["num_gpus"]).all()
    assert {"H100 SXM", "B200", "GB200", "GB300"} <= set(held["gpu"])
    assert {"bf16", "fp8", "fp4"} <= set(held["precision"])
    # FSDP rows are priced as ZeRO-3; the others use Megatron's distributed optimizer
    fsdp = held["zero_stage"] == 3
    assert {"bridge2511_h100_llama3_8b", "bridge2511_gb200_llama3_70b",
            "bridge2511_gb300_llama3_70b"} <= set(held.loc[fsdp, "run_id"])
    assert (held["distributed_optimizer"] == ~fsdp).all()
    assert not base["distributed_optimizer"].any() and (base["zero_stage"] == 0).all()


def test_heldout_source_numbers():
    runs = published_runs(held_out=True).set_index("run_id")
    # NVIDIA/NeMo docs/source/performance/performance_summary.md @070a0bb (NeMo 24.07,
    # DGX-H100, FP8): GPT3-175B on 128 GPUs, 726 tokens/s/GPU, 782 model TFLOP/s/GPU
    r = runs.loc["nemo2407_h100_gpt3_175b_128"]
    assert (r["measured_tokens_per_s_per_gpu"], r["measured_tflops_per_gpu"]) == (726, 782)
    # NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md @00b7660 (25.11, DGX-H100,
    # FP8-CS): Llama 3.1 405B on 1024 GPUs, TP8 PP8 CP2 VP8, GBS 512: 292 tokens/s/GPU, 737
    r = runs.loc["bridge2511_h100_llama31_405b"]
    assert (r["tp"], r["pp"], r["cp"], r["vpp"], r["global_batch"]) == (8, 8, 2, 8, 512)
    assert (r["measured_tokens_per_s_per_gpu"], r["measured_tflops_per_gpu"]) == (292, 737)
    # step time from tokens: 512 sequences x 8192 tokens / (292 tokens/s/GPU x 1024 GPUs)
    assert r["measured_step_time_s"] == pytest.approx(512 * 8192 / (292 * 1024))
    # same page, DGX-GB300: Llama 3.1 405B on 256 GPUs, TP2 PP8 CP2 VP4, GBS 1536: 999
    # tokens/s/GPU, 2522 model TFLOP/s/GPU; Llama 3 8B on 8 GPUs at H100: 14451 and 744
    r = runs.loc["bridge2511_gb300_llama31_405b"]
    assert (r["tp"], r["pp"], r["cp"], r["vpp"], r["global_batch"]) == (2, 8, 2, 4, 1536)
    assert (r["measured_tokens_per_s_per_gpu"], r["measured_tflops_per_gpu"]) == (999, 2522)
    r = runs.loc["bridge2511_h100_llama3_8b"]
    assert (r["measured_tokens_per_s_per_gpu"], r["measured_tflops_per_gpu"]) == (14451, 744)


def test_reported_tflops_follow_the_named_flop_convention():
    # Each table's TFLOP/s divided by its tokens/s is its FLOPs per token: NeMo 24.07 counts
    # full attention ("megatron"), Megatron-Bridge 25.11 causal attention ("bridge").
    runs = published_runs(held_out=True)
    both = runs["measured_tflops_per_gpu"].notna() & runs["measured_tokens_per_s_per_gpu"].notna()
    assert both.sum() >= 40
    for _, r in runs[both].iterrows():
        conv = r["flop_convention"].split(":")[0]
        per_token = r["measured_tflops_per_gpu"] * 1e12 / r["measured_tokens_per_s_per_gpu"]
        # tables print tokens/s to three or four figures (625 for 405B on B200): 2%
        assert per_token == pytest.approx(model_flops_per_token(preset(r["model"]), conv),
                                          rel=2e-2), r["run_id"]


def test_heldout_predictions_are_finite_and_printed(heldout):
    for col in ("measured_step_time_s", "predicted_step_time_s", "predicted_tflops_per_gpu"):
        assert np.isfinite(heldout[col]).all() and (heldout[col] > 0).all(), col
    assert np.isfinite(heldout["error_pct"]).all()
    assert ((heldout["predicted_mfu"] > 0) & (heldout["predicted_mfu"] < 1)).all()
    cols = ["run_id", "measured_step_time_s", "predicted_step_time_s", "error_pct",
            "measured_tflops_per_gpu", "predicted_tflops_per_gpu"]
    print("\n" + heldout[cols].round(2).to_string(index=False))
    print(f"mean error {heldout['error_pct'].mean():+.1f}%, "
          f"mean |error| {heldout['error_pct'].abs().mean():.1f}%")
