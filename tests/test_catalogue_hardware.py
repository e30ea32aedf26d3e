"""The hardware chapter's exercises and helpers: answers finite, accepted, and equal to the
figures in the cited documents."""
import math

import pytest

from companion import exercises
from companion.exercises import check
from companion.explore import hardware as hx

HW = [e for e in exercises.exercises("hardware")]


def test_at_least_five_exercises():
    assert len(HW) >= 5


# Each exercise worked from its documents (the same figures as test_answers_match_the_documents,
# plus the three it does not cover).
SOURCED = {
    "hw-headline-to-bf16": 20 / 2.25,  # GB200 NVL72 page: 20 PF FP4 sparse; HGX B200 BF16 2.25 dense
    "hw-mfu-megatron-a100": 0.52,  # Narayanan et al. 2021 abstract: "52% of theoretical peak"
    "hw-ridge-h100": 1979e12 / 2 / 3.35e12,  # H100 datasheet: 1,979 TF BF16 sparse, 3.35 TB/s
    "hw-square-gemm-b200": 3 * 2.25e15 / 7.7e12,  # n/3 FLOP/B; HGX B200 2.25 PF, 7.7 TB/s
    "hw-fp4-per-watt-b300": (105 / 8 / 1100) / (9 / 1000),  # HGX B300 105 PF/8 GPUs, 1,100 W
    # Blackwell Ultra keeps B200's dense BF16 peak; TDPs 1,100 W (B300) and 1,000 W (B200)
    "hw-bf16-per-watt-b300": 1000 / 1100,
    "hw-hbm-sweep-h200": 141 * 2 ** 30 / 4.8e12 * 1e3,  # H200 datasheet: 141 GB, 4.8 TB/s; ms
    "hw-nvl72-fp4-dense": 1440 / 2,  # GB200 NVL72 page: 1,440 PF FP4 with sparsity
    # V100 datasheet: 125 TFLOPS FP16 tensor, 900 GB/s; HGX B200: 2.25 PF BF16 dense, 7.7 TB/s
    "hw-ridge-growth": (2.25e15 / 7.7e12) / (125e12 / 900e9),
    # nvidia-smi on an H100 80GB HBM3: 81559 MiB total (NVIDIA/nccl issue 1264); 80 GiB =
    # 81,920 MiB (an exercise main added; extra entries are harmless where it is absent)
    "hw-h100-driver-reserve": 80 * 1024 - 81559,
}


def test_every_exercise_matches_its_sources(against_sources):
    assert all(isinstance(e.answer(), float) and math.isfinite(e.answer()) for e in HW)
    against_sources("hardware", SOURCED)


def test_answers_match_the_documents():
    # NVIDIA GB200 NVL72 product page, 'Individual Blackwell GPU Specifications': GB200 FP4
    # 20 PF sparse; HGX B200 BF16 4.5 PF sparse, so 2.25 PF dense.
    assert check("hw-headline-to-bf16", 20 / 2.25)
    # Narayanan et al. 2021 (arXiv:2104.04473), abstract: 163 TFLOP/s per A100 is "52% of
    # theoretical peak"; the A100 datasheet's dense BF16/FP16 peak is 312 TFLOP/s.
    assert check("hw-mfu-megatron-a100", 0.52)
    assert not check("hw-mfu-megatron-a100", 163 / 624)
    # H100 datasheet (SXM): 1,979 TFLOPS BF16 with sparsity, 3.35 TB/s.
    assert check("hw-ridge-h100", 1979e12 / 2 / 3.35e12)
    # GB200 NVL72 product page: 1,440 PFLOPS FP4 with sparsity for 72 GPUs.
    assert check("hw-nvl72-fp4-dense", 1440 / 2)
    # HGX B300 (NVIDIA HGX page): FP4 105 PF dense per 8 GPUs, 1,100 W (Verda); HGX B200
    # 9 PF dense FP4 at 1,000 W.
    assert check("hw-fp4-per-watt-b300", (105 / 8 / 1100) / (9 / 1000))
    # Square GEMM intensity n/3 (2n^3 FLOPs over 6n^2 bytes): n = 3 x 2.25e15 / 7.7e12.
    assert check("hw-square-gemm-b200", 3 * 2.25e15 / 7.7e12)
    # nvidia-smi on an H100 80GB HBM3: 81559 MiB (NVIDIA/nccl#1264) of 80 x 1024 MiB
    assert check("hw-h100-driver-reserve", 80 * 1024 - 81559)


def test_ladder_goes_from_headline_to_dense_bf16():
    steps = hx.ladder()
    assert steps["pflops"].iloc[0] == pytest.approx(20)    # GB200 FP4 sparse (NVIDIA table)
    assert steps["pflops"].iloc[-1] == pytest.approx(2.25)  # HGX B200 BF16 dense
    assert list(steps["convention"]) == ["sparse", "sparse", "dense", "dense", "dense"]


def test_mfu_denominators():
    mfu = hx.mfu_denominators().set_index("denominator")["mfu"]
    assert mfu["dense peak (right)"] == pytest.approx(163 / 312)
    assert mfu["2:4-sparse headline"] == pytest.approx(163 / 624)
    assert mfu["dense peak halved again"] > 1  # the impossible MFU OLMo-core PR 614 fixed


def test_peaks_leave_out_missing_figures_and_check_input():
    fp8 = hx.peaks("fp8", "dense", "peak TFLOP/s", "all")
    assert not fp8[hx.PEAK_GPU].str.contains("V100|A100").any()  # Volta and Ampere have no FP8
    sparse_fp4 = hx.peaks("fp4", "sparse", "peak TFLOP/s", "all")
    assert set(sparse_fp4["convention"]) == {"2:4 sparse"} and set(fp8["convention"]) == {"dense"}
    assert not sparse_fp4[hx.PEAK_GPU].str.contains("MI355X").any()
    assert (fp8[hx.PEAK_VALUE] > 0).all()
    # the Hopper variants: GH200 has no tensor peak in the registry, so no bar
    hopper = hx.peaks("bf16", "dense", "peak TFLOP/s", "Hopper: SXM, PCIe, NVL, GH200")
    assert list(hopper[hx.PEAK_GPU]) == ["2022 H100", "2022 H100 PCIe", "2023 H100 NVL", "2024 H200",
                                         "2024 H200 NVL"]
    # axis titles are words with units, not column names
    assert "TFLOP/s" in hx.PEAKS_CHART["y"] and " " in hx.PEAKS_CHART["x"]
    with pytest.raises(ValueError, match="precision"):
        hx.peaks("fp3")
    with pytest.raises(ValueError, match="sparsity"):
        hx.peaks("bf16", "half")


def test_seed_claims_verdicts_agree_with_catalogue():
    claims = hx.seed_claims("hardware")
    assert len(claims) >= 9
    assert (claims["verdict"] == claims["catalogue_verdict"]).all(), claims[
        ["id", "verdict", "catalogue_verdict"]]


def test_sources_cover_every_gpu():
    src = hx.sources()
    assert len(src) == len(hx.GPU_NAMES)
    assert src["source"].str.contains("https://").all()


def test_claims_render_as_a_wrapped_markdown_table():
    claims = hx.seed_claims("hardware")
    md = hx.claims_markdown(claims)
    lines = md.splitlines()
    assert lines[0].startswith("| claim |") and lines[1].startswith("|---")
    assert len(lines) == 2 + len(claims)
    assert all(line.count(" | ") == 5 for line in lines[2:])  # six cells, pipes escaped
    assert hx.claims_markdown(claims.assign(quote_en="a | b\nc")).count("a \\| b<br>c") == len(claims)


def test_hopper_variants_table_shows_what_was_found():
    # H100 PCIe datasheet: 114 SMs, 350 W, 2.0 TB/s; H100 NVL 835 TFLOP/s dense BF16
    # (NVIDIA's H100 and H200 pages); GH200: no tensor peak found, so blank, never zero
    t = hx.variants_table()
    assert t.loc["H100 PCIe", "SMs"] == 114 and t.loc["H100 PCIe", "TDP W"] == 350
    assert t.loc["H100 NVL", "BF16 dense TFLOP/s"] == pytest.approx(835.5)
    assert t.loc["H200 NVL", "BF16 dense TFLOP/s"] == pytest.approx(835.5)
    gh200 = t.loc["H100 in GH200 (144 GB HBM3e)", "BF16 dense TFLOP/s"]
    assert gh200 != gh200  # blank (NaN), never zero
    assert "tdp_w" in t.loc["H100 NVL", "unverified"]
    assert t.loc["H100 SXM", "HBM GiB (driver-visible)"] == pytest.approx(81559 / 1024)
