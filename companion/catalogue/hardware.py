"""Exercises of the chapter "The machines at a glance" (book/hardware.ipynb).

Every answer asks the hardware registry; the one published measurement used (Megatron-LM's
163 TFLOP/s per A100) is named in :data:`MEGATRON_1T_FLOPS` with its source.
"""
from .. import hardware, roofline, units
from ..exercises import Exercise, register

#: FLOP/s per A100 of the 1T-parameter GPT in Narayanan et al. 2021 (their count,
#: 96 B s l h^2 (1 + s/6h + V/16lh), includes the recomputed forward pass), "Efficient
#: Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC21), abstract and
#: Table 1 (3072 GPUs), https://arxiv.org/abs/2104.04473 . The chapter's table
#: (companion.explore.hardware.MEGATRON_1T) reads it from here, so that loading the exercises
#: never imports altair.
MEGATRON_1T_FLOPS = 163e12


def _gpu(name):
    return hardware.gpu(name)


def _smallest_compute_bound_square_gemm(gpu, dtype="bf16"):
    # Intensity of an n x n x n GEMM (A, B read once, C written once) is n / 3 FLOP/byte in
    # bf16; solve for the n where it reaches the ridge point, checking the formula on one shape.
    n = 4096
    per_n = roofline.gemm(n, n, n, dtype).intensity / n
    return _gpu(gpu).ridge_point(dtype) / per_n


register(Exercise(
    id="hw-headline-to-bf16",
    chapter="hardware",
    question="NVIDIA's headline for a Blackwell GPU is 20 PFLOP/s of FP4 (GB200's B200, 2:4 "
             "sparse). By what factor is it larger than the dense BF16 peak of a B200 in an "
             "HGX/DGX B200?",
    answer=lambda: _gpu("GB200").peak_flops("fp4", sparse=True) / _gpu("B200").peak_flops("bf16"),
    why="Four steps: GB200 (1200 W) -> HGX B200 (1000 W), sparse -> dense (x1/2), FP4 -> FP8 "
        "(x1/2), FP8 -> BF16 (x1/2).",
    rel_tol=0.02, unit="x"))

register(Exercise(
    id="hw-mfu-megatron-a100",
    chapter="hardware",
    question="Megatron-LM trained a 1T-parameter GPT at 163 TFLOP/s per A100 (Narayanan et al. "
             "2021). What fraction of the A100's peak is that, with the right denominator?",
    answer=lambda: MEGATRON_1T_FLOPS / _gpu("A100").peak_flops("fp16"),
    why="Utilisation divides by the dense fp16/bf16 peak (312 TFLOP/s), not the 624 TFLOP/s "
        "sparse headline; give a fraction (0.5 means 50%).",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="hw-ridge-h100",
    chapter="hardware",
    question="What is the ridge point of an H100 SXM for dense BF16: how many FLOPs must a "
             "kernel do per byte of HBM traffic to be compute-bound?",
    answer=lambda: _gpu("H100").ridge_point("bf16"),
    why="Ridge = dense peak FLOP/s / HBM bytes/s.",
    rel_tol=0.02, unit="FLOP/byte"))

register(Exercise(
    id="hw-square-gemm-b200",
    chapter="hardware",
    question="A square BF16 GEMM (m = n = k) reads A and B once and writes C once. From what "
             "size n is it compute-bound on an HGX B200 by the roofline?",
    answer=lambda: _smallest_compute_bound_square_gemm("B200"),
    why="Intensity = 2n^3 / (3 n^2 x 2 bytes) = n/3 FLOP/byte; set n/3 equal to the ridge point.",
    rel_tol=0.03, unit=""))

register(Exercise(
    id="hw-fp4-per-watt-b300",
    chapter="hardware",
    question="How many times more dense FP4 FLOP/s per watt of TDP does an HGX B300 deliver "
             "than an HGX B200?",
    answer=lambda: _gpu("B300").flops_per_watt("fp4") / _gpu("B200").flops_per_watt("fp4"),
    why="Divide each GPU's dense FP4 peak by its TDP, then take the ratio.",
    rel_tol=0.02, unit="x"))

register(Exercise(
    id="hw-bf16-per-watt-b300",
    chapter="hardware",
    question="And for dense BF16: the HGX B300's FLOP/s per watt as a multiple of the HGX B200's?",
    answer=lambda: _gpu("B300").flops_per_watt("bf16") / _gpu("B200").flops_per_watt("bf16"),
    why="Same BF16 peak, more watts: the ratio is the inverse ratio of the TDPs.",
    rel_tol=0.02, unit="x"))

register(Exercise(
    id="hw-hbm-sweep-h200",
    chapter="hardware",
    question="How many milliseconds does an H200 need to read its whole HBM once at peak "
             "bandwidth? (141 GB is read as 141 GiB, as the registry does.)",
    answer=lambda: _gpu("H200").hbm_bytes / _gpu("H200").hbm_Bps * 1e3,
    why="Time = capacity in bytes / bandwidth in bytes/s; 141 GiB = 141 x 2^30 bytes.",
    rel_tol=0.02, unit="ms"))

register(Exercise(
    id="hw-nvl72-fp4-dense",
    chapter="hardware",
    question="What is the dense FP4 peak of a whole GB200 NVL72 rack, in PFLOP/s?",
    answer=lambda: units.to_pflops(hardware.system("GB200 NVL72").peak_flops("fp4")),
    why="72 GPUs x GB200's dense FP4 per GPU (the sparse figure is twice that).",
    rel_tol=0.02, unit="PFLOP/s"))

register(Exercise(
    id="hw-ridge-growth",
    chapter="hardware",
    question="By what factor did the dense 16-bit ridge point grow from V100 (fp16) to an HGX "
             "B200 (bf16)?",
    answer=lambda: _gpu("B200").ridge_point("bf16") / _gpu("V100").ridge_point("fp16"),
    why="Compute grew faster than HBM bandwidth: ratio of (peak / bandwidth) of the two GPUs.",
    rel_tol=0.02, unit="x"))

register(Exercise(
    id="hw-h100-driver-reserve",
    chapter="hardware",
    question="nvidia-smi shows 81,559 MiB of memory on an H100 SXM sold as \"80 GB\". If \"80 GB\" "
             "means 80 GiB, how many MiB does the driver keep out of sight?",
    answer=lambda: units.to_mib(_gpu("H100").hbm_bytes - _gpu("H100").usable_hbm_bytes),
    why="80 GiB = 80 x 1024 MiB = 81,920 MiB; subtract the driver-visible total.",
    rel_tol=0.0, abs_tol=0.5, unit="MiB"))
