"""Exercises of the chapter "Case studies" (book/case_studies.ipynb).

Every answer asks :mod:`companion.explore.case_studies`, which prices the seeds' scenarios with
:mod:`companion.cases` (layout search, step time, energy).
"""
from ..exercises import Exercise, register


def _cs():
    # Imported on demand: the explore package loads altair, which checking an answer never needs.
    from ..explore import case_studies
    return case_studies


def _o(which, label):
    return _cs().by_label(which)[label]


def _days_13b():
    return _o("13b", "H100, FP8").days


def _speedup_175b():
    return _o("175b", "H100, FP8").days / _o("175b", "B200, FP4").days


def _saving_13b_fp4():
    return 1 - _o("13b", "B200, FP4").gpu_kwh / _o("13b", "H100, FP8").gpu_kwh


def _saving_175b_fp8():
    return 1 - _o("175b", "B200, FP8").gpu_kwh / _o("175b", "H100, FP8").gpu_kwh


def _headline_gap():
    cs = _cs()
    first = next(iter(cs.FABRICS))
    return float(cs.headline_gap().loc[cs.MODELLED + first, "factor_from_headline"])


register(Exercise(
    id="cs-13b-days",
    chapter="case_studies",
    question="The seed's 13B model trains on 300B tokens on 128 H100s in FP8, 1,024 sequences "
             "of 2,048 tokens per step. How many days does the fastest layout the search finds "
             "take, by the step-time model?",
    answer=_days_13b,
    why="Days = tokens / (sequences per step x 2,048) x step time / 86,400 s; the search "
        "picks the layout.",
    rel_tol=0.02, unit="days"))

register(Exercise(
    id="cs-175b-speedup",
    chapter="case_studies",
    question="How many times faster than 256 H100s in FP8 does the step-time model train the "
             "seed's 175B model on 256 B200s in FP4, each at its fastest layout?",
    answer=_speedup_175b,
    why="The ratio of the two runs' days (or step times: both take the same steps).",
    rel_tol=0.02))

register(Exercise(
    id="cs-13b-fp4-saving",
    chapter="case_studies",
    question="For the 13B run, what fraction of the GPUs' energy does B200 in FP4 save against "
             "H100 in FP8, both GPUs at TDP? Give a fraction (0.5 for 50%).",
    answer=_saving_13b_fp4,
    why="1 - (B200 GPU-hours x 1.0 kW) / (H100 GPU-hours x 0.7 kW): the speed-up sets it.",
    rel_tol=0.02))

register(Exercise(
    id="cs-175b-fp8-saving",
    chapter="case_studies",
    question="For the 175B run, what fraction of the GPUs' energy does B200 save against H100 "
             "when both train in FP8 (GPUs at TDP)? Give a fraction.",
    answer=_saving_175b_fp8,
    why="Energy ratio = power ratio x time ratio = (1000 / 700) x (B200 days / H100 days).",
    rel_tol=0.03))

register(Exercise(
    id="cs-headline-gap",
    chapter="case_studies",
    question="By what factor is the 20 PFLOP/s headline larger than the model TFLOP/s per GPU the "
             "step-time model gives seed 000's 13B run on 2,000 B200s in BF16 with the DGX "
             "B200's own 400 Gb/s NICs?",
    answer=_headline_gap,
    why="20 PFLOP/s (GB200, FP4, sparse) over the model FLOP/s per GPU of the searched layout.",
    rel_tol=0.03))
