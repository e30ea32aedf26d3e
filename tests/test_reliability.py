"""companion.reliability against papers and hand-worked cases."""
import math

import numpy as np
import pytest

from companion import reliability as rel
from companion.model import preset


def test_young_hand_worked():
    # sqrt(2 x 5 min x 1440 min) = 120 min exactly
    assert rel.young_interval_s(300, 24 * 3600) == pytest.approx(120 * 60)
    assert rel.young_interval_s(50, 3600) == pytest.approx(600)  # sqrt(2*50*3600)


# Daly 2006, Figures 3-5: R = 10 min, delta = 5 min; M = 24 h, 6 h, 15 min ->
# tau_opt = 117, 57 and 9.1 min
@pytest.mark.parametrize("mtbf_min, tau_min", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_matches_paper(mtbf_min, tau_min):
    assert rel.daly_interval_s(300, mtbf_min * 60) / 60 == pytest.approx(tau_min, abs=0.5)


def test_daly_beyond_range_is_mtbf():
    assert rel.daly_interval_s(7200, 3600) == 3600  # delta >= 2M: Daly sets tau = M


def test_llama3_interruptions():
    # Llama 3 paper (arXiv:2407.21783) Table 5: 419 unexpected in 54 days on 16,384 H100s;
    # press: "an average of one failure every three hours"
    assert rel.LLAMA3_405B.job_mtbf_s / 3600 == pytest.approx(54 * 24 / 419)
    assert rel.LLAMA3_405B.job_mtbf_s / 3600 == pytest.approx(3, rel=0.05)
    assert rel.LLAMA3_405B.per_gpu_mtbf_s == pytest.approx(16384 * 54 * 86400 / 419)


def test_goodput_limits():
    # no failures (M -> inf): only the checkpoint stall is lost, tau / (tau + delta)
    assert rel.goodput(3600, 60, 600, 1e15) == pytest.approx(3600 / 3660, rel=1e-6)
    # first order agrees with Daly when everything is small against M
    g = rel.goodput(600, 10, 60, 1e6)
    assert rel.goodput_first_order(600, 10, 60, 1e6) == pytest.approx(g, abs=1e-4)
    # Daly's interval is at least as good as Young's and the optimum of a fine scan
    m, d, r = 3 * 3600, 120, 600
    taus = np.geomspace(60, 20000, 2000)
    best = max(rel.goodput(t, d, r, m) for t in taus)
    assert rel.goodput(rel.daly_interval_s(d, m), d, r, m) == pytest.approx(best, abs=1e-4)


def test_expected_wall_hand_worked():
    # delta = R = 0: E = M (e^(tau/M) - 1) T/tau; tau = M: (e - 1) M per segment
    assert rel.expected_wall_s(7200, 3600, 0, 0, 3600) == pytest.approx(2 * 3600 * (math.e - 1))


def test_monte_carlo_matches_daly():
    w, tau, d, r, m = 50 * 3600, 3600, 120, 600, 4 * 3600
    sim = rel.simulate_wall_s(w, tau, d, r, m, runs=2000, seed=3)
    se = sim.std(ddof=1) / math.sqrt(sim.size)
    assert abs(sim.mean() - rel.expected_wall_s(w, tau, d, r, m)) < 4 * se
    assert np.array_equal(sim, rel.simulate_wall_s(w, tau, d, r, m, runs=2000, seed=3))


def test_checkpoint_sizes():
    # BigScience BLOOM (176,247M parameters): "only the bf16 weights are 329GB, the full
    # checkpoint with optimizer states is 2.3TB" (the GB and TB there are binary units)
    n = 176_247e6
    assert rel.checkpoint_bytes(n, optimizer=False) / 2**30 == pytest.approx(329, rel=0.01)
    assert rel.checkpoint_bytes(n) / 2**40 == pytest.approx(2.3, rel=0.03)
    # ZeRO paper: mixed-precision Adam keeps 2 (fp16 weights) + 12 (K) bytes outside gradients
    m = preset("gpt3-175b")
    assert rel.checkpoint_bytes(m) == pytest.approx(14 * m.params)
    # FP16 weights: the same 14; the optimizer's FP32 copy of 16-bit gradients is not saved
    assert rel.checkpoint_bytes(m, precision="fp16") == pytest.approx(14 * m.params)


def test_storage_and_input_rates():
    assert rel.storage_Bps_for(6e12, 60) == pytest.approx(1e11)
    assert rel.write_time_s(6e12, 2e12) == pytest.approx(3)
    # 6N FLOPs per token: 100 TFLOP/s on 13B parameters -> 1282 tokens/s
    assert rel.tokens_per_s(100e12, 13e9) == pytest.approx(100e12 / 78e9)
    assert rel.input_Bps(100e12, 13e9, bytes_per_token=4) == pytest.approx(4 * 100e12 / 78e9)


def test_plan_from_gpu_count():
    p = rel.plan(60, 600, num_gpus=16384, per_gpu_mtbf_s=rel.LLAMA3_405B.per_gpu_mtbf_s)
    assert p.mtbf_s == pytest.approx(rel.LLAMA3_405B.job_mtbf_s)
    assert p.young_s == pytest.approx(math.sqrt(2 * 60 * p.mtbf_s))
    assert 0 < p.goodput_daly < 1 and p.goodput_daly >= p.goodput_young - 1e-9


@pytest.mark.parametrize("call, exc, match", [
    (lambda: rel.young_interval_s(0, 3600), ValueError, "checkpoint_s"),
    (lambda: rel.daly_interval_s(60, -1), ValueError, "mtbf_s"),
    (lambda: rel.goodput(3600, 60, -5, 3600), ValueError, "restart_s"),
    (lambda: rel.job_mtbf_s(1e8, 0), ValueError, "num_components"),
    (lambda: rel.mtbf_from_count(2.5, 100), TypeError, "interruptions"),
    (lambda: rel.plan(60, 600), ValueError, "mtbf_s"),
    (lambda: rel.simulate_wall_s(5000, 3600, 60, 600, 3600), ValueError, "whole number"),
    (lambda: rel.checkpoint_bytes(1e9, precision="fp7"), ValueError, "precision"),
    (lambda: rel.checkpoint_bytes("gpt3"), ValueError, "Did you mean .gpt3-175b."),  # a preset name
    (lambda: rel.checkpoint_bytes([1e9]), TypeError, "model"),
    (lambda: rel.input_Bps(1e15, 1e9, bytes_per_token=0), ValueError, "bytes_per_token"),
])
def test_bad_input_is_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_plan_refuses_a_job_mtbf_together_with_a_gpu_count():
    # with mtbf_s given, a GPU count would be silently ignored: a per-GPU MTBF mistaken for
    # the job's would be off by the GPU count
    with pytest.raises(ValueError, match="not both"):
        rel.plan(60, 600, mtbf_s=3600, num_gpus=100)
    with pytest.raises(ValueError, match="not both"):
        rel.plan(60, 600, mtbf_s=3600, per_gpu_mtbf_s=1e6)


def test_tokens_per_s_of_a_moe_counts_its_active_parameters():
    # 6N FLOPs a token with N the parameters a token meets: DeepSeek-V3's 37B of 671B
    # (its report's Table 1), as power.training_flops and the step model count them
    m = preset("deepseek-v3")
    assert rel.tokens_per_s(1e15, m) == pytest.approx(1e15 / (6 * m.active_params))
    assert m.active_params == pytest.approx(37e9, rel=0.05)
    dense = preset("llama3-8b")
    assert rel.tokens_per_s(1e15, dense) == pytest.approx(1e15 / (6 * dense.params))
