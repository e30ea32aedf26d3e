"""The pitfalls chapter's exercises and explorer frames, against their sources."""
import math

import pytest

from companion import explore
from companion.exercises import check, exercises
from companion.explore import pitfalls as ep


def _daly_goodput(mtbf_s, delta_s, restart_s):
    """Daly 2006 (FGCS 22, 'A higher order estimate of the optimum checkpoint interval'),
    worked here independently of companion.reliability: his interval and expected time."""
    m, d, r = mtbf_s, delta_s, restart_s
    x = d / (2 * m)
    tau = math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d
    return tau / (m * math.exp(r / m) * (math.exp((tau + d) / m) - 1))


def test_every_exercise_matches_its_sources(against_sources):
    ids = [e.id for e in exercises("pitfalls")]
    assert all(i.startswith("pit-") for i in ids)
    extra = {
        # 16,384 GPUs at 50,000 h each: job MTBF 50,000 h / 16,384; 60 s checkpoint, 10 min restart
        "pit-goodput-16k": _daly_goodput(50_000 * 3600 / 16384, 60, 600),
        # Llama 3 paper: 405B parameters; 14 bytes each (BF16 2 + FP32 master 4 + Adam m, v 8)
        "pit-ckpt-405b-tb": 14 * 405e9 / 1e12,
        "pit-ckpt-405b-bw": 14 * 405e9 / 60 / 1e9,
    }
    against_sources("pitfalls", {**dict(SOURCED), **extra})


SOURCED = [
    # Llama 3 paper, Table 5: 419 unexpected interruptions in 54 days
    ("pit-llama3-mtbf", 54 * 24 / 419),
    # Young 1974: sqrt(2 x 60 s x MTBF), in minutes
    ("pit-young-llama3", math.sqrt(2 * 60 * 54 * 86400 / 419) / 60),
    # NCCL env docs: 4.096 us x 2^22
    ("pit-ib-timeout-22", 4.096e-6 * 2**22),
    # 3-bit field: 13 = 0b1101 -> 0b101
    ("pit-retry-cnt-13", 5),
    # NVIDIA Blackwell migration guide: CUDA 12.8 first supports compute capability 10.0
    ("pit-min-cuda-b200", "12.8"),
    # 6N FLOPs per token, 4 bytes per token: 100e12 / 78e9 x 4 bytes
    ("pit-seed-input-rate", 100e12 / 78e9 * 4 / 1e3),
]


@pytest.mark.parametrize("exercise_id, expected", SOURCED)
def test_answers_match_sources(exercise_id, expected):
    assert check(exercise_id, expected), check(exercise_id, expected, reveal=True)


def test_explorer_grid_is_small_and_peaks_near_young():
    grid = explore.evaluate_grid(ep.checkpoint_curves, ep.checkpoint_controls())
    assert len(grid) <= 50_000 and grid["goodput"].between(0, 1).all()
    df = ep.checkpoint_curves(16384, 50, 60, 10)
    daly = df[df["model"] == "Daly (exact)"]
    peak = daly.loc[daly["goodput"].idxmax(), "interval (min)"]
    young_min = math.sqrt(2 * 60 * 50e3 * 3600 / 16384) / 60
    assert 0.7 * young_min < peak < 1.4 * young_min


def test_scale_table_and_simulation():
    t = ep.scale_table()
    # goodput falls as the cluster grows, for every checkpoint time
    for _, g in t.groupby("checkpoint (s)"):
        assert g.sort_values("GPUs")["goodput"].is_monotonic_decreasing
    sim = ep.simulation_table(runs=300)
    assert ((sim["simulated mean wall (h)"] - sim["Daly model (h)"]).abs()
            < 4 * sim["std. error (h)"]).all()


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="gpu_mtbf_kh"):
        ep.checkpoint_curves(gpu_mtbf_kh=0)
    with pytest.raises(ValueError, match="num_components"):
        ep.checkpoint_curves(num_gpus=0)
