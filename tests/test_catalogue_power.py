"""The power chapter's exercises and explorer functions: answers finite, accepted, and equal
to figures worked from the cited documents."""
import pytest

from companion import exercises
from companion.exercises import check
from companion.explore import power as px

PW = exercises.exercises("power")


def test_at_least_five_exercises():
    assert len(PW) >= 5


# The figures of test_answers_match_the_documents, and the power-cap exercise worked by hand.
_T13B_S = 6 * 13e9 * 300e9 / (128 * 989.4e12 * 0.4)
SOURCED = {
    "pw-llama3-gwh": 30.84e6 * 0.7 / 1e6,  # Llama 3.1 model card: 30.84M GPU-hours, 700 W
    "pw-llama3-mfu": 3.8e25 / (30.84e6 * 3600 * 1979e12 / 2),  # paper 3.8e25 FLOPs; datasheet
    "pw-dgx-h100-host-per-gpu": (10200 - 5600) / 8,  # DGX H100 10.2 kW, 8 x 700 W
    "pw-nvl72-gpu-share": 72 * 1.2 / 120,  # GB200 NVL72: 72 x 1,200 W of 120 kW
    "pw-equal-throughput-saving": 1 - (3.958 / 700) / (9 / 1000),  # HGX B200 vs H100 FP8 sparse
    "pw-13b-gpu-mwh": 128 * 700 * _T13B_S / 3.6e9,
    "pw-time-for-41pct": 0.59 * 700 / 1000,
    # the chapter's cap model: clock ((500 - 210)/(700 - 210))^(1/3), energy (500/700)/clock
    "pw-cap-energy": (500 / 700) / ((500 - 210) / (700 - 210)) ** (1 / 3),
}


def test_every_exercise_matches_its_sources(against_sources):
    assert all(isinstance(e.answer(), float) and e.answer() > 0 for e in PW)
    against_sources("power", SOURCED)


def test_answers_match_the_documents():
    # Llama 3.1 model card: 30.84M GPU-hours x 700 W.
    assert check("pw-llama3-gwh", 30.84e6 * 0.7 / 1e6)
    # Llama 3 paper: 3.8e25 FLOPs; H100 datasheet: 1,979 TFLOPS BF16 with sparsity.
    assert check("pw-llama3-mfu", 3.8e25 / (30.84e6 * 3600 * 1979e12 / 2))
    # DGX H100 10.2 kW, 8 x 700 W.
    assert check("pw-dgx-h100-host-per-gpu", (10200 - 5600) / 8)
    # GB200 NVL72: 72 x 1,200 W of a reported 120 kW.
    assert check("pw-nvl72-gpu-share", 72 * 1.2 / 120)
    # HGX B200 FP8 9 PF sparse at 1,000 W vs H100 3,958 TF sparse at 700 W.
    assert check("pw-equal-throughput-saving", 1 - (3.958 / 700) / (9 / 1000))
    # 13B, 300B tokens, 128 H100 at 40% of 989.4 TFLOP/s, 700 W each.
    t = 6 * 13e9 * 300e9 / (128 * 989.4e12 * 0.4)
    assert check("pw-13b-gpu-mwh", 128 * 700 * t / 3.6e9)
    assert check("pw-time-for-41pct", 0.59 * 700 / 1000)


def test_seed_claims_verdicts_agree_with_catalogue():
    claims = px.seed_claims()
    assert len(claims) == 9
    assert (claims["verdict"] == claims["catalogue_verdict"]).all(), claims[
        ["id", "verdict", "catalogue_verdict"]]


def test_run_frame_leaves_out_missing_precisions_and_checks_input():
    fp4 = px.run_frame(precision="fp4")
    assert not fp4["gpu"].str.contains("H100|H200").any()  # Hopper has no FP4
    bf16 = px.run_frame()
    assert len(bf16) == len(px.GPU_SYSTEMS)
    assert (bf16["mwh"] > 0).all() and (bf16["days"] > 0).all()
    with pytest.raises(ValueError, match="model"):
        px.run_frame(model="7B")


def test_run_frame_energy_independent_of_gpu_count():
    # Energy = FLOPs / (FLOP per joule): more GPUs finish sooner for the same MWh.
    a, b = px.run_frame(num_gpus=128), px.run_frame(num_gpus=16384)
    assert list(a["mwh"]) == pytest.approx(list(b["mwh"]), rel=1e-3)
    assert list(a["days"]) == pytest.approx(list(b["days"] * 128), rel=2e-3)


def test_cap_frame_ends_at_uncapped():
    f = px.cap_frame()
    top = f[f["cap_w"] == f["cap_w"].max()]
    assert list(top["fraction"]) == pytest.approx([1.0, 1.0])


def test_tables():
    eff = px.efficiency_table()
    assert not ((eff["gpu"].str.contains("H100")) & (eff["precision"] == "fp4")).any()
    racks = px.rack_table()
    assert racks.set_index("system").loc["DGX H100", "max_kw"] == pytest.approx(10.2)
