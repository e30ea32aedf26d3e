"""The command line: help, env and a clear error for an unknown benchmark."""
import json

import pytest

from companion.__main__ import main


def test_help_and_unknown(capsys):
    assert main(["--help"]) == 0 and "bench" in capsys.readouterr().out
    assert main(["bench", "nope"]) == 2 and "gemm" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2


def test_env_prints_provenance(capsys):
    assert main(["env"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["python"].startswith("3.") and "torch" in info


def test_plan_prints_layouts_and_json(capsys):
    argv = ["plan", "--model", "gpt3-175b", "--gpu", "H100", "--gpus", "256",
            "--global-batch", "2048", "--top", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "gpt3-175b on 256 x H100" in out and "step_s" in out
    assert "Step band" in out and "cross-validated" in out and "MFU (a fraction" in out
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "cross-validated" in data["band_basis"] and "peak" in data["mfu_convention"]
    # --json keeps what the table shows: the layout string, per-GPU tokens/s, the largest costs
    first = data["layouts"][0]
    assert first["layout"].startswith(f"TP{first['tp']} PP{first['pp']}")
    assert first["tokens_per_s_per_gpu"] * 256 == pytest.approx(first["tokens_per_s"])
    assert first["largest_exposed"] and data["reserve_gb"] == 0
    assert data["part_names"]["launch_s"] == "kernel gaps"
    assert len(data["layouts"]) == 2 and data["layouts"][0]["tp"] * data["layouts"][0]["pp"] \
        * data["layouts"][0]["dp"] * data["layouts"][0]["cp"] == 256
    assert main(["plan", "--model", "gpt3-175b", "--gpu", "H10", "--gpus", "8",
                 "--global-batch", "8"]) == 2
    assert "H100" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "plan" in capsys.readouterr().out


def test_plan_error_names_the_cli_flags(capsys):
    # 12 GPUs put a factor 3 in TP, PP, CP or DP: 3 divides neither llama3-70b's 64 heads, its
    # 80 layers, its 8192-token sequence nor a batch of 512, so no layout exists and the hint
    # must name flags the user can type, not search()'s keywords
    assert main(["plan", "--model", "llama3-70b", "--gpu", "H100", "--gpus", "12",
                 "--global-batch", "512"]) == 2
    err = capsys.readouterr().err
    assert "--round-batch" in err and "--uneven-stages" in err and "exact_batch" not in err


def test_plan_can_run_flash_attention_2(capsys):
    # what Transformer Engine runs when a launcher sets NVTE_FUSED_ATTN=0: slower attention,
    # so a long-sequence step is slower than with the stack's cuDNN
    argv = ["plan", "--model", "llama2-7b-s32k", "--gpu", "H100", "--gpus", "32",
            "--global-batch", "64", "--precision", "fp8", "--top", "1", "--json"]
    assert main(argv) == 0
    cudnn = json.loads(capsys.readouterr().out)
    assert main(argv + ["--attention-kernel", "flash-attn-2"]) == 0
    fa2 = json.loads(capsys.readouterr().out)
    assert cudnn["attention_kernel"] == "cudnn" and fa2["attention_kernel"] == "flash-attn-2"
    assert fa2["layouts"][0]["step_time_s"] > 1.2 * cudnn["layouts"][0]["step_time_s"]
    assert main(argv[:-1] + ["--attention-kernel", "flash-attn-2"]) == 0
    assert "flash-attn-2 attention" in capsys.readouterr().out


def _plan_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_takes_the_recipes_gradient_bucket(capsys):
    # one bucket of a whole GPU's gradients: nothing overlaps the backward pass, so the step
    # is slower than with Megatron-Core's default buckets, and the header says which ran
    argv = ["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "64",
            "--global-batch", "64", "--top", "1", "--json"]
    default = _plan_json(capsys, argv)
    one = _plan_json(capsys, argv + ["--bucket-params", "1000000000000"])
    assert default["ddp_bucket_params"] is None and one["ddp_bucket_params"] == 10**12
    assert one["layouts"][0]["step_time_s"] > default["layouts"][0]["step_time_s"]
    assert main(argv[:-1] + ["--bucket-params", "768000000"]) == 0
    assert "gradient buckets of 768,000,000 parameters" in capsys.readouterr().out


def test_check_recomputes_claims_and_checks_exercises(capsys):
    # 128 NVL72 racks hold 128 x 72 = 9216 GPUs, not the seed's 8192: the verdict is "wrong"
    assert main(["check", "8192-gpus-in-128-nvl72"]) == 0
    assert "wrong" in capsys.readouterr().out
    assert main(["check", "--json", "nvl72-is-36-gpus"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["id"] == "nvl72-is-36-gpus" and row["agree"]
    # Narayanan et al. 2021: the interleaved bubble is (p - 1)/(m v) = 7/192 for p 8, m 64, v 3
    assert main(["check", "--exercise", "par-bubble-table5", str(7 / 192)]) == 0
    assert main(["check", "--exercise", "par-bubble-table5", "0.5"]) == 1
    assert "too high" in capsys.readouterr().out
    assert main(["check", "no-such-claim"]) == 2
    assert "unknown claim_id" in capsys.readouterr().err
    # a claim with no number to recompute keeps the catalogue's verdict and is not counted
    assert main(["check", "micro-tile-scheduler"]) == 0
    out = capsys.readouterr().out
    assert "0 claims recomputed" in out and "1 not checkable" in out


# Bad input on every subcommand: exit status 2, a one-line message naming the flag, no
# traceback, nothing run (issue 15 found tracebacks for the first and the collectives ones).
BAD = [
    (["bench", "bandwidth", "--sizes", "abc"], "--sizes"),
    (["bench", "bandwidth", "--sizes", "1e400"], "--sizes"),
    (["bench", "bandwidth", "--sizes", ","], "--sizes"),
    (["bench", "bandwidth", "--sizes", "0"], "sizes must be >= 4"),
    (["bench", "bandwidth", "--out", "/proc/no-such-dir"], "--out"),
    (["bench", "gemm", "--iters", "0"], "--iters"),
    (["bench", "gemm", "--warmup", "-1"], "--warmup"),
    (["bench", "gemm", "--iters", "10000000000"], "iters must be <= 100000"),
    (["bench", "gemm", "--dtypes", "fp7"], "Did you mean"),
    (["bench", "gemm", "--shapes", "0x1x1"], "--shapes"),
    (["bench", "power", "--seconds", "nan"], "seconds must be finite"),
    (["bench", "power", "--seconds", "-1"], "--seconds"),
    (["bench", "power", "--seconds", "2", "--settle", "3"], "--settle"),
    (["bench", "power", "--shape", "8x8"], "--shape"),
    (["bench", "collectives", "--iters", "0"], "--iters"),
    (["bench", "collectives", "--min-time", "inf"], "--min-time"),
    (["bench", "collectives", "--procs", "100000"], "procs must be <= 1024"),
    (["bench", "collectives", "--sizes", "4X"], "not understood"),
    (["env", "--device", "tpu"], "--device"),
    (["plan", "--model", "llama2-7b", "--gpu", "H100", "--gpus", "8", "--global-batch", "8",
      "--attention-kernel", "fa3"], "allowed: cudnn, flash-attn-2"),
    (["plan", "--model", "llama2-7b", "--gpu", "A100", "--gpus", "8", "--global-batch", "8",
      "--attention-kernel", "flash-attn-2"], "no flash-attn-2 attention record"),
    (["check", "--exercise", "par-bubble-table5", "nan"], "finite"),
    (["plan", "--model", "llama2-7b", "--gpu", "H100", "--gpus", "8", "--global-batch", "8",
      "--bucket-params", "0"], "--bucket-params"),
    # Transformer Engine's check_mxfp8_support: "Device compute capability 10.0 or higher
    # required for MXFP8 execution"; an H100 is 9.0
    (["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--global-batch", "128",
      "--software", "megatron-bridge-mxfp8", "--precision", "fp8"], "compute capability 10.0"),
    (["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--global-batch", "128",
      "--ep-overlap"], "llama3-8b is dense"),
    (["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--global-batch", "128",
      "--precision", "fp32"], "allowed: bf16, fp16, fp8, fp4"),
    (["check", "--exercise", "par-bubble-table5", "0.0365", "nvl72-is-36-gpus"], "not both"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert message in err


def test_the_command_exits_2_from_any_directory(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-m", "companion", "bench", "collectives", "--iters",
                          "0"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        "companion bench collectives: error: argument --iters: iters must be >= 1; got 0 "
        "(--help for usage)"]


def test_bench_power_without_a_gpu_says_so(capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert main(["bench", "power", "--seconds", "1", "--settle", "0"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


def test_random_flag_values_never_print_a_traceback(capsys):
    """Whatever text a flag gets, the command exits 2 with one line: a bad value is named by
    argparse; a good one reaches the run, which refuses cuda (or nccl) on a machine without a
    GPU, so nothing is benchmarked."""
    import torch
    from hypothesis import given, settings
    from hypothesis import strategies as st
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: good values would start a benchmark")
    text = st.one_of(st.text(max_size=12), st.integers(-10 ** 30, 10 ** 30).map(str),
                     st.floats(allow_nan=True).map(str))
    commands = st.sampled_from([
        ["bench", "gemm", "--device", "cuda", "--iters"],
        ["bench", "gemm", "--device", "cuda", "--warmup"],
        ["bench", "gemm", "--device", "cuda", "--shapes"],
        ["bench", "gemm", "--device", "cuda", "--dtypes"],
        ["bench", "bandwidth", "--device", "cuda", "--sizes"],
        ["bench", "power", "--seconds"], ["bench", "power", "--settle"],
        ["bench", "power", "--dtypes"],
        ["bench", "collectives", "--backend", "nccl", "--min-time"],
        ["bench", "collectives", "--backend", "nccl", "--procs"],
        ["bench", "collectives", "--backend", "nccl", "--sizes"],
        ["check", "--exercise", "par-bubble-table5"]])

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(argv=commands, value=text)
    def run(argv, value):
        capsys.readouterr()
        code = main(argv + [value])
        err = capsys.readouterr().err
        assert "Traceback" not in err
        if argv[0] == "check" and code in (0, 1):
            return  # a number: checked as an answer, right or wrong
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, value, err)

    run()


def test_plan_prints_moe_layouts_with_moe_recompute(capsys):
    # the search tries Megatron's --recompute-modules moe for MoE models; the table must name it
    from companion.model import Layout, layout_text
    assert layout_text(Layout(tp=2, dp=4, recompute="moe", sequence_parallel=True),
                       full=True).endswith(" SP moe ZeRO0")
    assert main(["plan", "--model", "deepseek-v3", "--gpu", "GB200", "--gpus", "256",
                 "--global-batch", "1024", "--top", "3"]) == 0
    assert " moe ZeRO" in capsys.readouterr().out


def test_plan_says_what_its_columns_assume(capsys):
    # capacity, the layout legend, the band read as a measurement, the rounded batch, the
    # +EL marker, a what-if GPU in another system's rack, and the precision in any case
    argv = ["plan", "--model", "llama3-405b", "--gpu", "GB200", "--gpus", "144",
            "--global-batch", "288", "--precision", "FP8", "--top", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fit in 199.7 GB per GPU (raw HBM" in out and "layout: TP PP VPP" in out
    # GB200's FP8 dense runs measured slower than priced: the band sits above the estimate
    assert "step_s lies below its band" in out
    assert main(["plan", "--model", "gpt3-175b", "--gpu", "B200", "--system", "GB200 NVL72",
                 "--gpus", "288", "--global-batch", "1000", "--round-batch", "--top", "2"]) == 0
    cap = capsys.readouterr()
    assert "global_batch" in cap.out and "rounded down from 1000" in cap.out
    assert "is a what-if" in cap.err
    assert main(["plan", "--model", "llama3-405b", "--gpu", "H100", "--gpus", "1024",
                 "--global-batch", "512", "--embedding-loss-slots", "--top", "1"]) == 0
    assert " +EL" in capsys.readouterr().out


def test_the_2022_stack_has_no_context_parallelism(capsys):
    from companion.parallel import Layout, estimate
    assert main(["plan", "--model", "llama3-70b", "--gpu", "H100", "--gpus", "64",
                 "--global-batch", "128", "--software", "megatron-2022", "--json"]) == 0
    assert {r["cp"] for r in json.loads(capsys.readouterr().out)["layouts"]} == {1}
    with pytest.raises(ValueError, match="no context parallelism"):
        estimate("llama3-70b", Layout(tp=4, pp=4, dp=2, cp=2, global_batch=128), "H100",
                 software="megatron-2022")


def test_plan_reserves_memory_when_asked(capsys):
    # what the model does not count (CUDA context, NCCL buffers, fragmentation) held out of
    # the fit: fewer layouts fit, and each row's memory carries the reserve
    argv = ["plan", "--model", "llama3-70b", "--gpu", "H100", "--gpus", "64",
            "--global-batch", "128", "--top", "1", "--json"]
    plain = _plan_json(capsys, argv)
    kept = _plan_json(capsys, argv + ["--reserve-gb", "8"])
    assert kept["feasible"] < plain["feasible"]
    assert kept["layouts"][0]["memory_gb"] == pytest.approx(plain["layouts"][0]["memory_gb"] + 8)
    for bad in ("x", "-1", "nan"):
        assert main(argv + ["--reserve-gb", bad]) == 2
        assert "--reserve-gb" in capsys.readouterr().err
