"""Exercises of the chapter "Power, energy and cost" (book/power.ipynb).

Every answer calls :mod:`companion.power` or the hardware registry; the published figures
used (Llama 3.1 405B's GPU-hours and per-GPU power) live in :data:`companion.power.LLAMA3_405B`
with their sources.
"""
from .. import hardware, power
from ..exercises import Exercise, register


def _seed_13b_gpu_mwh():
    run = power.training_run(13e9, 300e9, "H100", 128, mfu=0.4, precision="bf16")
    return power.to_kwh(run.gpu_energy_j) / 1e3


def _llama3_gpu_gwh():
    return power.to_kwh(power.LLAMA3_405B.gpu_energy_j) / 1e6


def _llama3_mfu():
    run = power.LLAMA3_405B
    return power.implied_mfu(run.reported_flops, run.gpu_hours, run.gpu, run.precision)


def _cap_energy():
    return power.power_cap(500, 700, floor_w=210, exponent=3, clock_bound_share=1.0).energy_fraction


register(Exercise(
    id="pw-13b-gpu-mwh",
    chapter="power",
    question="A 13B dense model is trained on 300B tokens on 128 H100s at 40% MFU in BF16 "
             "(6ND FLOPs). How many MWh do the GPUs alone draw at their 700 W TDP?",
    answer=_seed_13b_gpu_mwh,
    why="Time = 6ND / (128 x 989.4 TFLOP/s x 0.4); energy = 128 x 700 W x time.",
    rel_tol=0.02, unit="MWh"))

register(Exercise(
    id="pw-equal-throughput-saving",
    chapter="power",
    question="Dense FP8 FLOP/s per watt of TDP: an HGX B200 against an H100 SXM. If a cluster "
             "delivered the same throughput with the better ratio, what fraction of the power "
             "would it save? (0.5 means 50%.)",
    answer=lambda: power.saving_at_equal_throughput(
        hardware.gpu("B200").flops_per_watt("fp8") / hardware.gpu("H100").flops_per_watt("fp8")),
    why="Power = throughput / (throughput per watt): the saving is 1 - 1/ratio.",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="pw-time-for-41pct",
    chapter="power",
    question="A B200 draws 1000 W, an H100 700 W. With the same number of GPUs, what fraction "
             "of the H100 run's time must the B200 run take for the energy to fall by 41%?",
    answer=lambda: power.time_ratio_for_saving(0.41, hardware.gpu("B200").tdp_w
                                               / hardware.gpu("H100").tdp_w),
    why="Energy ratio = power ratio x time ratio; solve 0.59 = (1000/700) x t.",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="pw-llama3-gwh",
    chapter="power",
    question="Llama 3.1 405B's model card reports 30.84M H100 GPU-hours at 700 W per GPU. "
             "How many GWh is that?",
    answer=_llama3_gpu_gwh,
    why="GPU-hours x 0.7 kW = kWh; divide by 1e6 for GWh.",
    rel_tol=0.02, unit="GWh"))

register(Exercise(
    id="pw-llama3-mfu",
    chapter="power",
    question="Llama 3 405B took 3.8e25 FLOPs (paper) and 30.84M H100 GPU-hours (model card). "
             "What MFU against the dense BF16 peak did it average over all those GPU-hours?",
    answer=_llama3_mfu,
    why="FLOPs / (GPU-hours x 3600 x 989.4e12). Lower than the 38-43% the paper reports for "
        "steady pre-training: the GPU-hours include everything else.",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="pw-nvl72-gpu-share",
    chapter="power",
    question="What fraction of a GB200 NVL72 rack's reported 120 kW is its 72 GPUs at TDP?",
    answer=lambda: power.system_power("GB200 NVL72").gpu_share,
    why="72 x 1200 W over 120 kW.",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="pw-dgx-h100-host-per-gpu",
    chapter="power",
    question="A DGX H100 is rated at 10.2 kW. How many watts per GPU does the rest of the node "
             "(CPUs, NICs, NVSwitches, fans) account for at that maximum?",
    answer=lambda: power.system_power("DGX H100").rest_per_gpu_w,
    why="(10,200 W - 8 x 700 W) / 8.",
    rel_tol=0.02, unit="W"))

register(Exercise(
    id="pw-cap-energy",
    chapter="power",
    question="In the chapter's power-cap model (floor 210 W, exponent 3, all time clock-bound), "
             "an H100 is capped from 700 W to 500 W. What is the energy per unit of work as a "
             "fraction of the uncapped energy?",
    answer=_cap_energy,
    why="Clock c = ((500 - 210) / (700 - 210))^(1/3); energy fraction = (500/700) / c.",
    rel_tol=0.02, unit=""))
