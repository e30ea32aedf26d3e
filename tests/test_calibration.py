"""companion.calibration: the published GEMM records the step-time model prices GEMMs with,
how a GPU without its own record borrows one, and the constants' guards."""
import pytest

from companion import calibration as cal
from companion import hardware
from companion.parallel import Layout, estimate


def test_mamf_records_match_the_published_table():
    rec = cal.mamf_records().set_index("id")
    # Stas Bekman, ML Engineering, "Maximum Achievable Matmul FLOPS comparison table":
    # MAMF TFLOP/s and efficiency as printed (efficiency = MAMF / theory).
    printed = {"mamf-a100-sxm-bf16": (271.2, 0.869), "mamf-h100-sxm-bf16": (794.5, 0.803),
               "mamf-b200-sxm-bf16": (1745.0, 0.776), "mamf-h100-sxm-fp8": (1402.6, 0.709),
               "mamf-b200-sxm-fp8": (3432.5, 0.763), "mamf-h200-sxm-fp8": (1453.4, 0.734),
               "mamf-gb200-bf16": (1822.0, 0.729), "mamf-gb200-fp8": (3615.6, 0.723),
               "mamf-b300-sxm-bf16": (1769.0, 0.786), "mamf-b300-sxm-fp8": (3353.3, 0.745),
               "mamf-mi325x-bf16": (784.9, 0.604)}
    for rid, (tflops, eff) in printed.items():
        assert rec.loc[rid, "measured_flops"] == pytest.approx(tflops * 1e12), rid
        assert rec.loc[rid, "fraction"] == pytest.approx(eff, abs=0.006), rid
    # MI300X: the table's theory is 1300, the registry's 1307.4; MI355X: 2300 against the
    # registry's 2516.6 (the table took MI350X's peak), so its fraction here is lower
    assert rec.loc["mamf-mi300x-bf16", "fraction"] == pytest.approx(668.4 / 1307.4)
    assert rec.loc["mamf-mi355x-bf16", "fraction"] < 0.68


def test_fallbacks_borrow_from_the_same_die_then_the_same_family():
    f = cal.gemm_peak_fraction
    # the source notes for H100 BF16: "H200 is the same"
    assert f("H200", "bf16") == f("H100", "bf16")
    assert f("H200", "fp8") == pytest.approx(1453.4 / 1978.9, rel=1e-3)  # its own record
    assert f("H100", "fp16") == f("H100", "bf16")
    # B200's own NVFP4 kernel (pytorch/ao PR 2427: 5.50e15 of 9e15 at 6144^3); GB200 runs FP4
    # at the same 4x of BF16 and borrows it; B300 (5.8x) does not, and falls back to FP8's
    assert f("B200", "fp4") == pytest.approx(5.50e15 / 9e15)
    assert f("GB200", "fp4") == f("B200", "fp4")
    assert f("B300", "fp4") == f("B300", "fp8")
    blackwell = [f(g, "fp8") for g in ("B200", "GB200", "B300")]
    assert f("GB300", "fp8") == pytest.approx(sum(blackwell) / 3)
    assert f("MI300X", "fp8") == f("MI300X", "bf16")  # AMD's own record, not NVIDIA's
    table = cal.gemm_fraction_table().set_index(["GPU", "precision"])
    assert table.loc[(hardware.gpu("GB300").name, "fp8"), "basis"].startswith("NVIDIA Blackwell")
    assert table.loc[(hardware.gpu("H100").name, "fp8"), "basis"] == "measured: mamf-h100-sxm-fp8"


def test_fp8_gemms_are_priced_slower_than_twice_bf16_on_h100():
    # Same layer, same layout: the FP8 GEMMs take 0.5 x (0.803 / 0.709) of the BF16 time
    # (tile and wave quantization are the same for both, so only the records differ).
    times = {}
    for p in ("bf16", "fp8"):
        e = estimate("gpt3-175b", Layout(tp=8, pp=8, dp=1, microbatch=1, global_batch=8,
                                         sequence_parallel=True, precision=p), "H100", 64)
        times[p] = e.breakdown()["gemm_s"]
    ratio = times["fp8"] / times["bf16"]
    # the output layer stays in BF16 under FP8 recipes, so the ratio sits a little above
    assert 0.5 * (794.5 / 989.4) / (1402.6 / 1978.9) <= ratio < 0.62


def test_output_layer_stays_16_bit_under_fp8():
    lay = dict(tp=1, pp=1, dp=8, microbatch=1, global_batch=64)
    b16 = estimate("llama3-8b", Layout(**lay, precision="bf16"), "H100", 8).breakdown()
    b8 = estimate("llama3-8b", Layout(**lay, precision="fp8"), "H100", 8).breakdown()
    assert b8["gemm_s"] > 0.5 * b16["gemm_s"]


def test_guards():
    with pytest.raises(ValueError, match="H100"):
        cal.gemm_peak_fraction("H1000", "bf16")
    with pytest.raises(ValueError, match="precision"):
        cal.gemm_peak_fraction("H100", "fp3")
    with pytest.raises(TypeError, match="precision"):
        cal.gemm_peak_fraction("H100", 8)
    with pytest.raises(ValueError, match="gemm_in_training"):
        cal.Calibration(gemm_in_training=1.2)


def test_quantization_cost_follows_transformer_engines_b300_profile():
    # NVIDIA Transformer Engine, GEMM profiling tutorial (docs/examples/gemm_profiling,
    # commit 8f2e635), B300, one layer (15,872 tokens, hidden 4096, MLP 16384): FP8 current
    # autocast 9.147 ms vs pre-quantized 6.812 ms; delayed autocast 7.802 ms; NVFP4 6.453 vs
    # 3.764 ms. Quantization time = bytes per element x elements / (0.8 x 7.7 TB/s, the HGX
    # B300's bandwidth in NVIDIA's DGX B300 reference architecture and datasheet).
    elems = cal.te_profile_elements()
    assert elems["activations"] == 15872 * (4096 * 3 + 16384)
    assert elems["gradients"] == 15872 * (12288 + 4096 + 16384 + 4096)
    assert elems["weights"] == 4096 * 49152
    n, hbm = sum(elems.values()), 0.8 * 7.7e12
    for recipe, ms in (("fp8_current", 9.147 - 6.812), ("fp8_delayed", 7.802 - 6.812),
                       ("fp4_nvfp4", 6.453 - 3.764)):
        assert cal.quantization_bytes(recipe) * n / hbm == pytest.approx(ms * 1e-3, rel=1e-3)
    # current scaling costs more than delayed (amax before every cast), and the step shows it
    lay = Layout(tp=1, pp=1, dp=8, microbatch=1, global_batch=64, precision="fp8")
    core = estimate("llama3-8b", lay, "H100", 8).breakdown()
    bridge = estimate("llama3-8b", lay, "H100", 8, software="megatron-bridge").breakdown()
    assert bridge["gemm_s"] == core["gemm_s"] and bridge["attention_s"] == core["attention_s"]
    assert bridge["elementwise_s"] > core["elementwise_s"]
    bf16 = Layout(tp=1, pp=1, dp=8, microbatch=1, global_batch=64)
    assert (estimate("llama3-8b", bf16, "H100", 8, software="megatron-bridge").step_time_s
            == estimate("llama3-8b", bf16, "H100", 8).step_time_s)
    with pytest.raises(ValueError, match="fp8_scaling"):
        from companion.machine import Stack
        Stack("x", True, True, True, True, fp8_scaling="sometimes")
    with pytest.raises(ValueError, match="recipe"):
        cal.quantization_bytes("fp8_sometimes")


def test_hopper_quantization_cost_follows_the_tutorials_h200_nvl_table():
    # The same tutorial's "Worked Example: 5B Model on H200" (NVIDIA H200 NVL, 4.8 TB/s), the
    # same layer: FP8 current autocast 20.285 ms vs pre-quantized 16.785 ms; delayed autocast
    # 18.978 ms. Every Hopper prices FP8 quantization from it; Blackwell keeps the B300's, and
    # recipes Hopper cannot run (MXFP8, NVFP4) fall back to the B300's.
    n = sum(cal.te_profile_elements().values())
    hbm = 0.8 * 4.8e12
    for gpu in ("H100 SXM", "H200", "H200 NVL"):
        for recipe, ms in (("fp8_current", 20.285 - 16.785), ("fp8_delayed", 18.978 - 16.785)):
            got = cal.quantization_bytes(recipe, gpu=gpu) * n / hbm
            assert got == pytest.approx(ms * 1e-3, rel=1e-3)
        assert cal.quantization_bytes("fp4_nvfp4", gpu=gpu) == cal.quantization_bytes("fp4_nvfp4")
    assert cal.quantization_bytes("fp8_current", gpu="GB200") == cal.quantization_bytes(
        "fp8_current", gpu="B300")
    # delayed scaling's lead over current scaling is smaller on Hopper (1.3 ms of 20 against
    # 1.3 ms of 9 on the B300), and the byte counts say so
    gap = {g: cal.quantization_bytes("fp8_current", gpu=g) - cal.quantization_bytes(
        "fp8_delayed", gpu=g) for g in ("H100 SXM", "B300")}
    assert gap["H100 SXM"] < gap["B300"]


def test_sustained_rate_reproduces_the_b300_gemm_profile():
    # the same tutorial, pre-quantized GEMMs: BF16 13.102 ms, FP8 6.812 ms, NVFP4 3.764 ms per
    # layer; the model's GEMM pricing of those shapes on a B300 matches them by construction
    from companion.calibration import DEFAULT, TE_PROFILE_SHAPES, linear_times
    g = hardware.gpu("B300")
    for p, ms in (("bf16", 13.102), ("fp8", 6.812), ("fp4", 3.764)):
        f, b = linear_times(g, DEFAULT, p, TE_PROFILE_SHAPES, 1)
        assert float(f.sum() + b.sum()) == pytest.approx(ms * 1e-3, rel=2e-3)
    # FP4 is priced from NVFP4 kernels (3.48x BF16), not as twice FP8
    assert cal.sustained_fraction("B300", "fp4") < 0.7 < cal.sustained_fraction("B300", "fp8")
    t = cal.gemm_fraction_table()
    assert {"sustained factor", "sustained fraction of peak", "sustained basis"} <= set(t.columns)
    hopper = t[(t["GPU"] == "H100 SXM")]
    assert (hopper["sustained factor"] == 1).all()
    assert hopper["sustained basis"].str.contains("optimistic").all()


def test_a_what_if_gpu_takes_its_family_records():
    from dataclasses import replace
    what_if = replace(hardware.gpu("H100"), key="h100_what_if", name="H100, what if")
    assert cal.gemm_peak_fraction(what_if, "bf16") == cal.gemm_peak_fraction("H100", "bf16")
    rec = cal.mamf_records()
    rec["fraction"] = 0.0  # a copy: the model's records are untouched
    assert (cal.mamf_records()["fraction"] > 0).all()


def test_the_b300_nvfp4_profile_does_not_set_b200s_fp4_rate():
    # The B300 layer profile runs NVFP4 at 0.39 of a peak 5.8x BF16's (TE gemm_profiling.rst);
    # a B200 runs FP4 at 4x BF16 and its kernel reaches about its BF16 fraction (pytorch/ao PR
    # 2427: 0.611 vs 0.646 at 6144^3), so it takes FP8's back-to-back factor, not B300's FP4 one
    s = cal.sustained_fraction
    assert s("B200", "fp4") == s("B200", "fp8")
    assert s("GB300", "fp4") == s("B300", "fp4") < 0.7


def test_mxfp8_gemms_pay_for_their_block_scales():
    # Transformer Engine's B300 layer profile, pre-quantized: 7.161 ms in MXFP8 against 6.812 ms
    # for the same twelve GEMMs in per-tensor FP8 (docs/examples/gemm_profiling)
    from companion import parallel
    from companion.model import Layout
    assert cal.block_scaled_gemm_slowdown() == pytest.approx(7.161 / 6.812, rel=1e-3)
    lay = Layout(tp=2, pp=4, dp=8, microbatch=1, global_batch=64, precision="fp8",
                 sequence_parallel=True)
    cs = parallel.estimate("llama3-70b", lay, "GB200", software="megatron-bridge")
    mx = parallel.estimate("llama3-70b", lay, "GB200", software="megatron-bridge-mxfp8")
    # every GEMM but the 16-bit output layer pays the factor
    assert cs.gemm_s < mx.gemm_s < cs.gemm_s * cal.block_scaled_gemm_slowdown()


def test_blackwell_attention_follows_cudnn_frontends_training_benchmark():
    # NVIDIA cudnn-frontend, benchmark/sdpa_benchmark_training/artifacts, BF16, causal, batch 1,
    # 128 query / 8 KV heads of 128: B200 (pyt_cudnn, cuDNN 9.13.1) at 32,768 tokens forward
    # 1419.000 and backward 1108.688 TFLOP/s of 2,250; GB200 (cudnn_fe, cuDNN 9.17.0) at 8,192
    # forward 1584 and backward 1211 of 2,500
    assert cal.attention_fraction("B200", "fwd", 32768) == pytest.approx(1419.0 / 2250)
    assert cal.attention_fraction("B200", "bwd", 32768) == pytest.approx(1108.688 / 2250)
    assert cal.attention_fraction("GB200", "fwd", 8192) == pytest.approx(1584 / 2500)
    assert cal.attention_fraction("GB200", "bwd", 8192) == pytest.approx(1211 / 2500)
    # held flat beyond the measured range, interpolated in log length inside it
    assert cal.attention_fraction("GB300", "bwd", 262144) == pytest.approx(1549 / 2500)
    assert cal.attention_fraction("GB300", "fwd", 1024) == pytest.approx(1266 / 2500)
    mid = cal.attention_fraction("B200", "bwd", 11585)  # ~sqrt(8192 x 16384)
    assert 942.509 / 2250 < mid < 1074.776 / 2250
    # the backward pass runs well below the 0.60 fallback the model used before these records
    assert cal.attention_fraction("B200", "bwd", 8192) < cal.DEFAULT.attention_efficiency


def test_a_gpu_without_attention_records_takes_its_dies_before_its_familys():
    # B300 in an HGX and in a GB300 are one Blackwell Ultra die (Blackwell Ultra doubles the
    # softmax SFU throughput, NVIDIA's 'Making Softmax More Efficient with NVIDIA Blackwell
    # Ultra'): B300 takes GB300's cuDNN 9.19.1 records (1887 of 2,500 forward at 8,192 tokens),
    # as a fraction of its own peak, not an average over B200-die records
    assert cal.attention_fraction("B300", "fwd", 8192) == pytest.approx(1887 / 2500)
    assert cal.attention_fraction("B300", "bwd", 8192) == pytest.approx(1385 / 2500)
    # H200 is H100's die: the FlashAttention-3 paper's H100 records, as before
    assert cal.attention_fraction("H200", "fwd", 8192) == cal.attention_fraction("H100", "fwd", 8192)


def test_gb300_attention_is_cudnn_9_19_measured_beside_gb200():
    # cudnn-frontend results/gb300_919_only_cudnn and gb200_919_only_cudnn (llama3.1 config:
    # 64 query / 8 KV heads of 128, batch 1, BF16, top_left causal, cuDNN backend 91901): GB300
    # 1887 / 1385 TFLOP/s forward / backward at 8,192 tokens, GB200 1598 / 1311 with the same
    # release. Blackwell Ultra runs attention faster than GB200 at every length measured.
    assert cal.attention_fraction("GB300", "fwd", 8192) == pytest.approx(1887 / 2500)
    assert cal.attention_fraction("GB300", "bwd", 8192) == pytest.approx(1385 / 2500)
    for seq in (2048, 4096, 8192, 16384, 32768):
        for d in ("fwd", "bwd"):
            assert cal.attention_fraction("GB300", d, seq) > cal.attention_fraction("GB200", d, seq)
    # the GB200 records' own release (9.17.0) agrees with 9.19.1 within 2% at 8,192 forward
    assert cal.attention_fraction("GB200", "fwd", 8192) == pytest.approx(1598 / 2500, rel=0.02)


def test_flash_attention_2_on_h100_follows_the_fa3_papers_own_bars():
    # Shah et al. 2024 (arXiv:2407.08608), 'Attention forward/backward speed, head dim 128
    # (H100 80GB SXM5)', FlashAttention-2 bars: 333 TFLOP/s forward causal and 370 without the
    # mask at 8,192 tokens, 318 backward without the mask (the paper times no causal backward),
    # so 318 x 333 / 370 causal; at 512: 191, 309 and 214
    fa2 = "flash-attn-2"
    assert cal.attention_fraction("H100", "fwd", 8192, kernel=fa2) == pytest.approx(333 / 989.4)
    assert cal.attention_fraction("H100", "bwd", 8192, kernel=fa2) == pytest.approx(
        318 * 333 / 370 / 989.4)
    assert cal.attention_fraction("H100", "bwd", 512, kernel=fa2) == pytest.approx(
        214 * 191 / 309 / 989.4)
    # Transformer Engine's own H100 benchmark (docs/examples/attention/attention.ipynb @0f60e59,
    # test_3: batch 2, 32 query / 4 KV heads of 128, 8,192 tokens, causal) times forward plus
    # backward at 7.4875 ms with cuDNN and 11.8879 ms with flash-attn: 1.5877x. The two record
    # sets, weighted as a step runs them (backward 2.5x the forward FLOPs), agree within 1%.
    def step(kernel):
        return (1 / cal.attention_fraction("H100", "fwd", 8192, kernel=kernel)
                + 2.5 / cal.attention_fraction("H100", "bwd", 8192, kernel=kernel))
    assert step(fa2) / step("cudnn") == pytest.approx(11.8879 / 7.4875, rel=0.01)


def test_flash_attention_2_on_blackwell_runs_far_below_cudnn():
    # cudnn-frontend's training SDPA artifacts (@bb37575) time Dao's flash-attn 2 beside
    # cuDNN: on a B200 399.925 / 318.004 TFLOP/s forward / backward at 8,192 tokens (causal,
    # 128 query / 8 KV heads) against cuDNN's 1171.278 / 942.509: FlashAttention-2 issues no
    # Blackwell tensor-core (tcgen05) instructions
    fa2 = "flash-attn-2"
    assert cal.attention_fraction("B200", "fwd", 8192, kernel=fa2) == pytest.approx(399.925 / 2250)
    assert cal.attention_fraction("B200", "bwd", 8192, kernel=fa2) == pytest.approx(318.004 / 2250)
    for gpu in ("B200", "GB200", "GB300"):
        assert (cal.attention_fraction(gpu, "fwd", 8192, kernel=fa2)
                < cal.attention_fraction(gpu, "fwd", 8192) / 2)


def test_a_kernel_without_records_fails_loudly():
    # the 0.60 fallback describes cuDNN-class kernels; no FlashAttention-2 record exists for
    # an A100 here, and borrowing the fallback would be a silent guess
    with pytest.raises(ValueError, match="no flash-attn-2 attention record.*Ampere.*H100 SXM"):
        cal.attention_fraction("A100", "fwd", 8192, kernel="flash-attn-2")
    with pytest.raises(ValueError, match="kernel"):
        cal.attention_fraction("H100", "fwd", 8192, kernel="fa2")


def test_a_stack_that_runs_flash_attention_2_prices_attention_slower():
    from dataclasses import replace
    from companion.machine import stack
    with pytest.raises(ValueError, match="attention_kernel"):
        replace(stack("megatron-core"), attention_kernel="flash-attn-3")
    lay = Layout(tp=2, pp=1, dp=8, cp=2, microbatch=1, global_batch=64, precision="fp8",
                 sequence_parallel=True)
    core = stack("megatron-core")
    fa2 = replace(core, attention_kernel="flash-attn-2")
    a = estimate("llama2-7b-s32k", lay, "H100", software=core)
    b = estimate("llama2-7b-s32k", lay, "H100", software=fa2)
    assert b.attention_s / a.attention_s == pytest.approx(1.6, rel=0.05)
    assert b.gemm_s == a.gemm_s


def test_h100_backward_attention_is_derived_causal_from_the_non_causal_panels():
    # FlashAttention-3 (arXiv:2407.08608) times the backward pass only without a causal mask
    # (Figure 6(b)); its forward panels give both: cuDNN at 4,096 tokens 518 TFLOP/s causal
    # (5(d)), 609 without the mask (5(c)), backward without the mask 499. The causal backward
    # is 499 x 518 / 609 of the BF16 peak.
    rows = cal.measurements("attention")
    assert not rows["what"].str.contains("without causal mask").any()
    free = cal.measurements("attention_noncausal")
    assert (free["hardware"] == "H100 SXM").sum() == 12  # FA3's 5(c) and 6(b) cuDNN bars
    h100 = hardware.gpu("H100")
    assert cal.attention_fraction("H100", "bwd", 4096) == pytest.approx(
        499e12 * 518 / 609 / h100.peak_flops("bf16"))
    # FlashAttention-2 likewise: 310 x 319 / 368 at 4,096 tokens
    assert cal.attention_fraction("H100", "bwd", 4096, kernel="flash-attn-2") == \
        pytest.approx(310e12 * 319 / 368 / h100.peak_flops("bf16"))


def test_a_causal_mask_costs_the_backward_what_it_costs_the_forward():
    # the mechanism behind the derivation, in one run set that times all four: NVIDIA
    # cudnn-frontend benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/
    # llama3.1_20260227_034703.csv (H200, cuDNN 9.19.1, BF16, 64 query / 8 KV heads of 128),
    # TFLOP/s (top_left causal fwd, no_mask fwd, top_left bwd, no_mask bwd) per sequence length
    h200 = {2048: (484, 633, 370, 504), 4096: (591, 671, 474, 560), 8192: (644, 691, 541, 594),
            16384: (673, 702, 579, 612), 32768: (688, 693, 581, 572)}
    for seq, (fc, fn, bc, bn) in h200.items():
        assert bc / bn == pytest.approx(fc / fn, rel=0.05), seq
