"""The low-precision chapter's exercises, speedup model and explorer frames, against sources.

Sources: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 (E4M3: max 448, smallest
subnormal 2^-9); OCP Microscaling Formats (MX) Specification v1.0 (E2M1 values; the shared scale
2^(floor(log2 amax) - emax_elem), emax_elem = 2 for E2M1); NVIDIA TransformerEngine NVFP4 docs
(E2M1 with one E4M3 scale per 16 values); NVIDIA H100 datasheet (1,979 / 989.4 TFLOPS FP8 /
BF16 dense, 3.35 TB/s); Amdahl 1967 (speedup = 1 / ((1 - f) + f / s)).
"""
import math

import numpy as np
import pytest

from companion import speedup
from companion.exercises import check, exercises, get

pytest.importorskip("torch")


def test_every_exercise_matches_its_sources(against_sources):
    ids = [e.id for e in exercises("low_precision")]
    assert all(i.startswith("lp-") for i in ids)
    against_sources("low_precision", dict(SOURCED))


SOURCED = [
    # OCP MX v1.0 Table: E2M1 values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; +0 = -0
    ("lp-e2m1-values", 15),
    # OFP8: E4M3 max 448, smallest subnormal 2^-9
    ("lp-e4m3-binades", math.log2(448 / 2 ** -9)),
    # OCP MX v1.0 section 6.3: 2^(floor(log2 20) - 2) = 2^(4 - 2)
    ("lp-mxfp4-scale", 4.0),
    # TransformerEngine NVFP4: 4-bit elements + an 8-bit scale per 16
    ("lp-nvfp4-bits", 4.5),
    # Amdahl with s = 1979 / 989.4 (H100 datasheet, dense)
    ("lp-amdahl-h100", 1 / (0.3 + 0.7 / (1978.9 / 989.4))),
    # OFP8 / PyTorch float8_e4m3fn casts saturate to the max finite value, 448
    ("lp-torch-saturates", 448.0),
]


@pytest.mark.parametrize("exercise_id,expected", SOURCED)
def test_answers_match_sources(exercise_id, expected):
    assert math.isclose(get(exercise_id).answer(), expected, rel_tol=1e-3)


def test_wrong_answers_are_rejected():
    assert not check("lp-e2m1-values", 16)
    assert not check("lp-amdahl-h100", 2.0)


def test_amdahl():
    # Amdahl 1967: f = 0 gives 1, f = 1 gives s, and overhead adds to the denominator
    assert speedup.amdahl_speedup(0.0, 10) == 1.0
    assert speedup.amdahl_speedup(1.0, 4) == 4.0
    assert math.isclose(speedup.amdahl_speedup(0.5, 2, 0.25), 1 / (0.5 + 0.25 + 0.25))
    with pytest.raises(ValueError, match="gemm_fraction"):
        speedup.amdahl_speedup(1.5, 2)
    with pytest.raises(ValueError, match="gemm_speedup"):
        speedup.amdahl_speedup(0.5, 0)


def test_linear_layer_step_on_h100():
    # H100 SXM datasheet: 989.4 TFLOP/s BF16 and 1978.9 FP8 dense, 3.35 TB/s HBM3
    m = k = 4096
    n = 4 * k
    step = speedup.linear_layer_step(m, k, n, "H100", "fp8_tensor")
    flops = 3 * 2 * m * n * k
    assert math.isclose(step.gemm_bf16_s, flops / 989.4e12, rel_tol=1e-3)
    assert math.isclose(step.gemm_speedup, 1978.9 / 989.4, rel_tol=1e-3)
    # each of x, w, g: 2 bytes read, 2 x 1 byte written, 2 bytes read again for the amax
    quant_bytes = (m * k + k * n + m * n) * (2 + 2 + 2)
    assert math.isclose(step.quantize_s, quant_bytes / 3.35e12, rel_tol=1e-2)
    assert step.speedup < step.gemm_speedup
    fused = speedup.linear_layer_step(m, k, n, "H100", "fp8_tensor", fused=True)
    assert fused.quantize_s == 0 and math.isclose(fused.speedup, fused.gemm_speedup)
    with pytest.raises(ValueError, match="fp4"):
        speedup.linear_layer_step(m, k, n, "H100", "nvfp4")  # Hopper has no FP4 peak
    with pytest.raises(ValueError, match="scheme"):
        speedup.linear_layer_step(m, k, n, "H100", "fp8")
    assert speedup.linear_layer_step(m, k, n, "H100", "fp8_tensor", fused=np.bool_(True)) \
        .quantize_s == 0  # numpy booleans are booleans


def test_few_tokens_make_the_gemms_memory_bound():
    # one token: each GEMM reads two of x, w, g and writes the third (the model's byte count,
    # BF16 outputs: an assumption, not a cited figure) at H100's 3.35 TB/s (datasheet); the
    # FLOPs alone (2 x 4096 x 16384 per GEMM at 989.4 TFLOP/s) would take 1,000x less
    k, n = 4096, 4 * 4096
    elements = k + k * n + n
    step = speedup.linear_layer_step(1, k, n, "H100", "fp8_tensor")
    assert math.isclose(step.gemm_bf16_s, elements * (2 * 2 + 2) / 3.35e12, rel_tol=1e-2)
    assert math.isclose(step.gemm_lowp_s, elements * (2 * 1 + 2) / 3.35e12, rel_tol=1e-2)
    assert math.isclose(step.gemm_speedup, 6 / 4, rel_tol=1e-9)  # bytes, not FLOPs, set it


def test_nvfp4_pays_an_amax_pass_for_its_tensor_scale():
    # NVFP4 scales twice: E4M3 per 16 values and one FP32 per tensor, amax / (6 x 448)
    # (Transformer Engine's NVFP4 recipe), so each operand is read once more for its amax:
    # 2 read + 2 x 4.5/8 written + 2 amax bytes per element; MXFP4's block scales need none
    m, k, n = 4096, 8192, 4 * 8192
    elements = m * k + k * n + m * n
    b200 = speedup.roofline.resolve_gpu("B200")
    nv = speedup.linear_layer_step(m, k, n, "B200", "nvfp4")
    mx = speedup.linear_layer_step(m, k, n, "B200", "mxfp4")
    assert math.isclose(nv.quantize_s, elements * (2 + 2 * 4.5 / 8 + 2) / b200.hbm_Bps)
    assert math.isclose(mx.quantize_s, elements * (2 + 2 * 4.25 / 8) / b200.hbm_Bps)


def test_step_speedup_is_amdahl_of_the_layer():
    s = speedup.step_speedup(0.6, 4096, 8192, "B200", "nvfp4")
    layer = speedup.linear_layer_step(4096, 8192, 4 * 8192, "B200", "nvfp4")
    assert math.isclose(s, speedup.amdahl_speedup(0.6, layer.gemm_speedup,
                                                  0.6 * layer.overhead_ratio))
    assert 1 < s < 1 / 0.4  # bounded by Amdahl's limit 1 / (1 - f)


def test_explorer_frames():
    from companion.explore import low_precision as lp
    t = lp.e2m1_table()
    # OCP MX v1.0: the positive E2M1 values
    assert sorted(set(t["value"].abs())) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    ft = lp.format_table()
    assert ft.loc["e4m3", "max"] == 448 and ft.loc["e5m2", "max"] == 57344  # OFP8
    assert ft.loc["fp16", "max"] == 65504  # IEEE 754 binary16
    o = lp.outlier_sqnr("normal", 3.0)
    by = o.set_index("scheme")["SQNR (dB)"]
    # one scale for the tensor: the ordinary FP4 values all flush to zero next to the outlier
    assert by["fp4_e2m1_tensor"] < 1 and by["nvfp4"] > 10 and by["mxfp8_e4m3"] > 25
    a = lp.amdahl(13, 1.0, "no")
    assert set(a["config"]) == {f"{g} {s}" for g, s in lp.AMDAHL_CONFIGS}
    assert (a[a["GEMM share of BF16 step"] == 0]["step speedup"] == 1).all()
    with pytest.raises(ValueError, match="distribution"):
        lp.outlier_sqnr("cauchy", 1.0)
    pitfalls = lp.cast_pitfalls()
    assert pitfalls.loc[1000.0, "torch .to(float8_e4m3fn)"] == 448
    assert np.isnan(pitfalls.loc[1000.0, "ml_dtypes astype(float8_e4m3fn)"])


def _run(recipe, lr, seed, final, remedy=None, gain=1.0):
    return {"recipe": recipe, "lr": lr, "seed": seed, "final_loss": final, "diverged": False,
            "learned": True, "uniform_nats": math.log(16),
            "outliers": {"gain": gain, "remedy": remedy, "channels": 2} if remedy else None,
            "loss": [2.0, 1.5, final]}


def test_sweep_tables_pair_seeds():
    from companion.explore import low_precision as lp
    lrs = (1e-3, 2e-3, 4e-3)
    runs = []
    for s, offset in enumerate((0.0, 0.1, -0.05)):  # per-seed noise shared by both recipes
        for lr, base in zip(lrs, (1.2, 1.0, 1.2)):
            runs.append(_run("bf16", lr, s, base + offset))
            runs.append(_run("fp8", lr, s, base + offset + 0.01))
    runs.append(_run("fp8", 1e-3, 3, 1.0))  # an incomplete seed: left out
    frame = lp.complete_seeds(lp.sweep_frame(runs))
    assert sorted(frame["seed"].unique()) == [0, 1, 2]
    gaps = lp.gap_table(frame, 2e-3)
    # the paired differences are all 0.01: no spread, a zero-width interval
    assert gaps.loc["fp8", "gap (nats)"] == pytest.approx(0.01)
    assert gaps.loc["fp8", "gap lo"] == pytest.approx(0.01)
    opt = lp.optimum_table(frame)
    assert opt.loc["bf16", "optimal lr"] == pytest.approx(2e-3)  # a symmetric parabola
    assert opt.loc["fp8", "2x lower?"] == "contradicted"
    curves = lp.loss_curves(runs, 2e-3, seed=1, every=1)
    assert set(curves["recipe"]) == {"bf16", "fp8"} and len(curves) == 6


def test_outlier_table_gaps_against_bf16():
    from companion.explore import low_precision as lp
    runs = []
    for s in range(3):
        runs.append(_run("bf16", 2e-3, s, 1.0 + 0.1 * s, "none", 1e5))
        runs.append(_run("fp8_current", 2e-3, s, 1.3 + 0.1 * s, "none", 1e5))
        runs.append(_run("fp8_current", 2e-3, s, 1.02 + 0.1 * s, "bf16_layer", 1e5))
    t = lp.outlier_table(lp.sweep_frame(runs)).loc[1e5]
    assert t.loc["fp8_current", "gap to bf16"] == pytest.approx(0.3)
    assert t.loc["fp8_current + bf16_layer", "gap to bf16"] == pytest.approx(0.02)


def test_mx_rule_table():
    from companion.explore import low_precision as lp
    t = lp.mx_rule_table(1 << 14)
    # the OCP floor rule saturates block maxima in (448, 512); TE's round-up rule never does
    assert t.loc["MXFP8, TE round-up", "saturated"] == 0 < t.loc["MXFP8, OCP floor", "saturated"]
    assert t.loc["MXFP8, TE round-up", "SQNR (dB)"] > t.loc["MXFP8, OCP floor", "SQNR (dB)"]
