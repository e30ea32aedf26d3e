"""Exercises of the chapter "Software pitfalls, failures and checkpoints"."""
from .. import reliability, stack, units
from ..exercises import Exercise, register
from ..model import preset


def _goodput_16k():
    p = reliability.plan(60, 600, num_gpus=16384, per_gpu_mtbf_s=50e3 * reliability.HOUR_S)
    return p.goodput_daly


register(Exercise(
    id="pit-llama3-mtbf", chapter="pitfalls",
    question="Llama 3 405B pre-training saw 419 unexpected interruptions in a 54-day snapshot. "
             "What was the job's mean time between interruptions, in hours?",
    answer=lambda: reliability.LLAMA3_405B.job_mtbf_s / reliability.HOUR_S,
    why="MTBF = duration / count = 54 x 24 h / 419.", rel_tol=0.02, unit="h"))

register(Exercise(
    id="pit-young-llama3", chapter="pitfalls",
    question="With that MTBF and a checkpoint that stalls training for 60 s, what is Young's "
             "optimal compute time between checkpoints, in minutes?",
    answer=lambda: reliability.young_interval_s(60, reliability.LLAMA3_405B.job_mtbf_s) / 60,
    why="Young (1974): interval = sqrt(2 x checkpoint time x MTBF).", rel_tol=0.03, unit="min"))

register(Exercise(
    id="pit-goodput-16k", chapter="pitfalls",
    question="16,384 GPUs, each failing once per 50,000 hours on average; 60 s checkpoints; "
             "10 min restarts. What fraction of wall time is useful work at Daly's optimal "
             "interval?",
    answer=_goodput_16k,
    why="Job MTBF = 50,000 h / 16,384; goodput = tau / (M e^(R/M) (e^((tau+delta)/M) - 1)).",
    rel_tol=0.0, abs_tol=0.01))

register(Exercise(
    id="pit-ib-timeout-22", chapter="pitfalls",
    question="The seed sets NCCL_IB_TIMEOUT=22. How many seconds does each InfiniBand retry "
             "wait before it is counted as lost?",
    answer=lambda: stack.ib_timeout_s(22),
    why="The NCCL docs: timeout = 4.096 us x 2^value.", rel_tol=0.02, unit="s"))

register(Exercise(
    id="pit-retry-cnt-13", chapter="pitfalls",
    question="NCCL_IB_RETRY_CNT=13 goes into a 3-bit queue-pair field. If the driver masks the "
             "value instead of rejecting it, how many retries are left?",
    answer=lambda: stack.ib_retry_effective(13),
    why="A 3-bit field holds 0..7; 13 = 0b1101 keeps its low three bits, 0b101.",
    rel_tol=0.0, abs_tol=0.0, unit="retries"))

register(Exercise(
    id="pit-min-cuda-b200", chapter="pitfalls",
    question="What is the first CUDA toolkit version (major.minor) that builds native code for "
             "a B200? Answer as a string such as '12.4'.",
    answer=lambda: stack.min_cuda_for_gpu("B200"),
    why="B200 is compute capability 10.0 (sm_100); see data/software/gpu_arch.csv."))

register(Exercise(
    id="pit-ckpt-405b-tb", chapter="pitfalls",
    question="How large is one full checkpoint of Llama 3 405B (BF16 weights, FP32 master "
             "weights and two Adam moments, no gradients), in TB?",
    answer=lambda: reliability.checkpoint_bytes(preset("llama3-405b")) / units.TB,
    why="14 bytes per parameter: 2 (BF16 weights) + 12 (FP32 master copy, m and v).",
    rel_tol=0.02, unit="TB"))

register(Exercise(
    id="pit-ckpt-405b-bw", chapter="pitfalls",
    question="What aggregate write bandwidth, in GB/s, writes that checkpoint in 60 s?",
    answer=lambda: reliability.storage_Bps_for(
        reliability.checkpoint_bytes(preset("llama3-405b")), 60) / units.GB,
    why="bandwidth = checkpoint bytes / time budget.", rel_tol=0.02, unit="GB/s"))

register(Exercise(
    id="pit-seed-input-rate", chapter="pitfalls",
    question="At the seed's 100 TFLOP/s of effective throughput on a 13-billion-parameter model, "
             "how many kB/s of tokenized input does training read, at 4 bytes per token?",
    answer=lambda: reliability.input_Bps(100e12, 13e9, bytes_per_token=4) / units.KB,
    why="tokens/s = FLOP/s / (6 N); bytes/s = tokens/s x bytes per token.",
    rel_tol=0.02, unit="kB/s"))
