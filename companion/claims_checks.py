"""The numeric check of each seed claim, registered in :mod:`companion.claims_core` on import
(:mod:`companion.claims` imports this module the first time it needs a check; this module
never imports :mod:`companion.claims`, so there is no cycle)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from companion import (calibration, comm, fabric, hardware, memory, model, parallel, power,
                       reliability, roofline, units)
from companion.claims_core import (B100_FP8_DENSE_FLOPS_THIRD_PARTY, DAY_S, DGX_B200_RACK_UNITS,
                                   HOUR_S, SEED_13B_B200_GPU_HOURS, SEED_13B_H100_DAYS,
                                   SEED_13B_H100_GPU_HOURS,
                                   SEED_175B_SAVING, SEED_GPU_KW, SEED_NODE_KW, SEED_YUAN_PER_KWH,
                                   SHOEYBI_GPUS_PER_SERVER, SHOEYBI_INTER_SERVER_Bps,
                                   SHOEYBI_INTRA_SERVER_Bps, TOKEN_ID_BYTES, Finding, _near, _pct,
                                   _pf)
from companion.claims_core import register_check as _check


# --- the checks, by chapter; each returns (claimed, computed, findings) ----------------------
# Checks are one blank line apart, chapters two: the module stays short enough to read whole.
def _hw():
    names = ("B200", "GB200", "H100", "B300")
    return tuple(hardware.gpu(n) for n in names)

@_check("b200-headline-20pf-fp4-192gb", "FLOP/s")
def _b200_headline():
    b200, gb200, _, _ = _hw()
    gib = units.to_gib  # vendors' "GB" of HBM is GiB (see companion.hardware)
    return 20e15, b200.peak_flops("fp4", True), [
        Finding("20 PF FP4 per DGX B200 GPU", f"{_pf(b200.peak_flops('fp4', True))} sparse, "
                f"{_pf(b200.peak_flops('fp4'))} dense; GB200's sparse FP4 is "
                f"{_pf(gb200.peak_flops('fp4', True))}", _near(20e15, b200.peak_flops("fp4", True))),
        Finding("192 GB HBM3e", f"{gib(b200.hbm_bytes):.0f} of NVIDIA's HBM 'GB' (GiB; "
                f"{b200.hbm_bytes / units.GB:.0f} GB) per GPU enabled on HGX/DGX B200, of the full "
                "stacks' 192",
                _near(192, gib(b200.hbm_bytes))),
        Finding("1.8 TB/s NVLink 5", f"{b200.scaleup_bidirectional_Bps / units.TB:.2g} TB/s "
                "bidirectional", _near(1.8e12, b200.scaleup_bidirectional_Bps))]

@_check("b200-bf16-5pf-training", "FLOP/s")
def _b200_bf16():
    b200, gb200, _, _ = _hw()
    return 5e15, b200.peak_flops("bf16"), [
        Finding("5 PF BF16 per B200", f"{_pf(b200.peak_flops('bf16'))} dense; GB200's sparse BF16 "
                f"is {_pf(gb200.peak_flops('bf16', True))}", _near(5e15, b200.peak_flops("bf16")))]

@_check("blackwell-package-with-switch", "what joins the two dies")
def _package_switch():
    hbi, dgx = hardware.link("NV-HBI"), hardware.system("DGX B200")
    return "a switch", hbi.category, [
        Finding("a switch inside the GPU package", f"dies joined by {hbi.name.split(' (')[0]} "
                f"({hbi.category}); switches are separate: {dgx.scaleup_switch}",
                hbi.category == "nvswitch")]

@_check("nvl72-is-36-gpus", "GPUs per NVL72 rack")
def _nvl72_36():
    nvl72 = hardware.system("GB200 NVL72")
    per_superchip = nvl72.gpu_count // nvl72.cpu_count  # a GB200 is 1 Grace + 2 GPUs
    return 36, nvl72.gpu_count, [
        Finding("36 GPUs in NVL72", f"{nvl72.gpu_count} GPUs, {nvl72.cpu_count} Grace CPUs",
                nvl72.gpu_count == 36),
        Finding("36 GPUs = 9 GB200", f"9 GB200 x {per_superchip} GPUs = {9 * per_superchip}",
                9 * per_superchip == 36)]

def _b_series():
    return [g for g in map(hardware.gpu, ("B200", "GB200", "B300", "GB300"))]

@_check("b100-is-hopper-table", "architecture")
def _b100_hopper():
    b200, _, h100, _ = _hw()
    nvlink5, b_series = hardware.link("NVLink 5"), _b_series()
    arch = b200.arch.split(" (")[0]
    return "Hopper", arch, [
        Finding("B100 is Hopper", f"every B-series GPU here is {arch}; {h100.arch} is H100 and "
                "H200", any(g.arch.startswith("Hopper") for g in b_series)),
        Finding("B100: 3.35 TB/s HBM", f"no Blackwell GPU has it; H100 SXM has "
                f"{h100.hbm_Bps / units.TB:.3g} TB/s", any(_near(3.35e12, g.hbm_Bps) for g in b_series)),
        Finding("B100: NVLink 5 at 900 GB/s", f"NVLink 5 is {nvlink5.bidirectional_Bps / units.TB:.2g}"
                " TB/s bidirectional per GPU (900 GB/s per direction), and the same table gives B200 "
                "the bidirectional figure: beside it, 900 GB/s is H100's NVLink 4 total",
                _near(900e9, nvlink5.bidirectional_Bps))]

@_check("b200-fp8-training-2x-b100", "x, B200 over B100, dense FP8")
def _b200_2x_b100():
    b200 = hardware.gpu("B200")
    ratio = b200.peak_flops("fp8") / B100_FP8_DENSE_FLOPS_THIRD_PARTY
    return 2.0, ratio, [
        Finding("B200 FP8 = 2x B100", f"{_pf(b200.peak_flops('fp8'))} / "
                f"{_pf(B100_FP8_DENSE_FLOPS_THIRD_PARTY)} (B100, third-party) = {ratio:.2f}x",
                _near(2.0, ratio))]

@_check("blackwell-ultra-is-b200", "product")
def _ultra_is_b200():
    b200, _, _, b300 = _hw()
    ultra = b300.name.split(" (")[0]
    return "B200", ultra, [
        Finding("Blackwell Ultra = B200", f"Blackwell Ultra is {ultra}; B200 is "
                f"{b200.arch.split(' (')[0]}", b200.arch.startswith("Blackwell Ultra"))]

@_check("b200-fp4-10pf-h100-fp8-1p98pf", "FLOP/s")
def _b200_fp4_10pf():
    b200, gb200, h100, _ = _hw()
    return 10e15, b200.peak_flops("fp4"), [
        Finding("B200 10 PF dense FP4",
                f"{_pf(b200.peak_flops('fp4'))}; GB200's is {_pf(gb200.peak_flops('fp4'))}",
                _near(10e15, b200.peak_flops("fp4"))),
        Finding("H100 1.98 PF dense FP8", _pf(h100.peak_flops("fp8")),
                _near(1.98e15, h100.peak_flops("fp8"))),
        Finding("H100 990 TF FP16", f"{units.to_tflops(h100.peak_flops('fp16')):.4g} TF dense",
                _near(990e12, h100.peak_flops("fp16")))]

@_check("nvl72-over-500pf-fp4", "FLOP/s per rack, dense FP4")
def _nvl72_500pf():
    nvl72 = hardware.system("GB200 NVL72")
    return 500e15, nvl72.peak_flops("fp4"), [
        Finding("72 GPUs + 36 Grace", f"{nvl72.gpu_count} GPUs, {nvl72.cpu_count} CPUs",
                (nvl72.gpu_count, nvl72.cpu_count) == (72, 36)),
        Finding("> 500 PF FP4", f"{_pf(nvl72.peak_flops('fp4'))} dense, "
                f"{_pf(nvl72.peak_flops('fp4', True))} sparse", nvl72.peak_flops("fp4") > 500e15)]


# memory
@_check("gemm-512x4096x512-mfu", "fraction of dense BF16 peak, roofline ceiling on B200")
def _seed_gemm():
    # a ceiling: the better of 128x128 tiles (which fill 128 of the SMs in one wave) and the
    # GPU's own preset (Blackwell's 2-SM 256x256 tiles fill only 32 pairs); a library picks
    # the tile that fills the GPU
    def best(gpu):
        preset = roofline.tile_preset(gpu)
        tiles = {"128x128": (128, 128), f"{preset.name}'s {'x'.join(map(str, preset.tile))}":
                 "auto"}
        return max(((k, roofline.seed_ffn_gemm(gpu, tile=t)) for k, t in tiles.items()),
                   key=lambda kv: kv[1].mfu)
    (h100_tile, h100), (b200_tile, b200) = best("H100"), best("B200")
    q = b200.quantization.efficiency
    # warm L2 vs flushed cache: the 8.9 MB working set fits B200's L2 (roofline's cache level);
    # warm, with the per-kernel launch cost an eager step pays, the fixed cost dominates
    cold = roofline.cached_roofline_time(b200.cost, "B200", warm=False, efficiency=q)
    warm = roofline.cached_roofline_time(b200.cost, "B200", warm=True, efficiency=q,
                                         overhead_s=calibration.DEFAULT.kernel_gap_s)
    return 0.55, b200.mfu, [
        Finding("48% on H100", f"roofline ceiling {_pct(h100.mfu)} of dense peak "
                f"({h100_tile} tiles)", 0.48 <= h100.mfu),
        Finding("55% on B200", f"roofline ceiling {_pct(b200.mfu)} of dense peak "
                f"({b200_tile} tiles)", 0.55 <= b200.mfu),
        Finding("its utilization shows the SM scheduler at work (and is an MFU)",
                f"{b200.cost.intensity:.0f} FLOP/B: {cold.bound}-bound with a flushed cache "
                f"({cold.time_s * 1e6:.2f} us); the {b200.cost.bytes_moved / 1e6:.1f} MB fit the "
                f"{warm.cache_bytes / 2**20:.1f} MiB L2, so warm its {warm.roofs_s * 1e6:.2f} us "
                f"of compute is under a {warm.overhead_s * 1e6:.0f} us kernel launch "
                f"({warm.bound}-bound); MFU is a whole-model metric",
                cold.bound == warm.bound == "compute", "framing")]

@_check("b200-hbm-5tbps", "B/s")
def _hbm_5tbps():
    h100, b200 = hardware.gpu("H100"), hardware.gpu("B200")
    return 5.0e12, b200.hbm_Bps, [
        Finding("H100 3.35 TB/s", f"{h100.hbm_Bps / units.TB:.3g} TB/s", _near(3.35e12, h100.hbm_Bps)),
        Finding("B200 5.0 TB/s", f"{b200.hbm_Bps / units.TB:.3g} TB/s", _near(5.0e12, b200.hbm_Bps))]

@_check("kv-cache-grows-exponentially", "x when the context doubles")
def _kv_exponential():
    m = model.preset("llama3-405b")
    short, long = (memory.kv_cache_bytes(m, s) for s in (8192, 16384))
    batch = memory.kv_cache_bytes(m, 8192, batch=512)
    return "exponential", long / short, [
        Finding("KV cache grows exponentially with sequence length",
                f"{m.name}: {memory.kv_cache_bytes(m, 1):,.0f} B per token; 8,192 -> 16,384 tokens "
                f"multiplies it by {long / short:g} (linear)", long / short > 2),
        Finding("batch 512 runs out of memory", f"512 x 8,192 tokens need "
                f"{batch / units.TB:.1f} TB of KV cache", True, "context")]


# low precision
def _binades(max_value, min_subnormal):
    return math.log2(max_value / min_subnormal)

@_check("fp8-dynamic-range-large", "binades of E5M2, the wider FP8")
def _fp8_range():
    import ml_dtypes

    from companion import formats
    fp8 = {f: _binades(formats.info(f).max, formats.info(f).min_subnormal) for f in ("e4m3", "e5m2")}
    wide = {n: _binades(float(fi.max), float(fi.smallest_subnormal)) for n, fi in
            (("FP16", np.finfo(np.float16)), ("BF16", ml_dtypes.finfo(ml_dtypes.bfloat16)))}
    return "larger than 16-bit", fp8["e5m2"], [
        Finding("FP8's dynamic range is large", f"E4M3 {fp8['e4m3']:.1f} and E5M2 {fp8['e5m2']:.1f} "
                f"binades; FP16 {wide['FP16']:.1f}, BF16 {wide['BF16']:.0f}",
                max(fp8.values()) >= min(wide.values()))]

@_check("fp4-halves-memory", "FP4 / FP8 bytes per element, NVFP4")
def _fp4_halves():
    from companion import blockscale, formats
    bits = formats.info("e2m1").bits
    nvfp4 = bits + formats.info("e4m3").bits / blockscale.block_shape("nvfp4")[1]
    mxfp4 = bits + formats.info("e8m0").bits / blockscale.block_shape("mxfp4")[1]
    mxfp8 = formats.info("e4m3").bits + formats.info("e8m0").bits / blockscale.block_shape("mxfp8_e4m3")[1]
    state = {p: memory.model_state_bytes_per_param(p).total for p in ("fp8", "fp4")}
    half = 0.15  # "half" read loosely: the block scales alone add 6-12%
    return 0.5, nvfp4 / 8, [
        Finding("an FP4 tensor takes half the memory of FP8", f"NVFP4 {nvfp4:g} bits vs 8: "
                f"{nvfp4 / 8:.2f}; MXFP4/MXFP8 {mxfp4:g}/{mxfp8:g} = {mxfp4 / mxfp8:.2f}",
                _near(0.5, nvfp4 / 8, half), tolerance=half),
        Finding("activations and gradients stored in FP4 too, halving what training keeps",
                f"FP4 recipes quantize GEMM inputs only; master weights, gradients and Adam "
                f"state stay 16/32-bit: {state['fp4']:g} B per parameter with FP4 GEMMs, "
                f"{state['fp8']:g} B with FP8", _near(0.5, state["fp4"] / state["fp8"], half),
                tolerance=half)]


# interconnect
@_check("megatron-v100-8gpu-nvlink", "GPUs per NVLink server")
def _megatron_v100():
    ratio = SHOEYBI_INTRA_SERVER_Bps / SHOEYBI_INTER_SERVER_Bps
    return 8, SHOEYBI_GPUS_PER_SERVER, [
        Finding("8 V100s per NVLink node", f"DGX-2H: {SHOEYBI_GPUS_PER_SERVER} V100s all-to-all "
                "through NVSwitch (Shoeybi et al. 2019)", SHOEYBI_GPUS_PER_SERVER == 8),
        Finding("keep TP inside the fast domain", f"the paper's {SHOEYBI_INTRA_SERVER_Bps / units.GB:.0f} "
                f"GB/s per GPU inside a server (both directions) against "
                f"{SHOEYBI_INTER_SERVER_Bps / units.GB:.0f} GB/s per server between servers, {ratio:.0f}x "
                "as quoted (mixed conventions; per GPU and per direction "
                f"{ratio * SHOEYBI_GPUS_PER_SERVER / 2:.0f}x)", ratio > 1),
        Finding("NVLink 2 in the registry", f"{hardware.link('NVLink 2').printed} per V100",
                True, "context")]

@_check("connectx8-builds-nvlink-domain", "GPUs per NVLink domain, DGX B200")
def _cx8_nvlink():
    cx8, dgx = hardware.link("ConnectX-8"), hardware.system("DGX B200")
    nvl72 = hardware.system("GB200 NVL72")
    return nvl72.scaleup_domain_gpus, dgx.scaleup_domain_gpus, [
        Finding("ConnectX-8 NICs build the 72-GPU NVLink domain", f"ConnectX-8 is a {cx8.category} "
                f"({cx8.printed}, scale-out); NVL72's domain is built by {nvl72.scaleup_switch}",
                cx8.category in ("nvlink", "nvswitch")),
        Finding("DGX B200 nodes can join it", f"a DGX B200's NVLink domain is "
                f"{dgx.scaleup_domain_gpus} GPUs", dgx.scaleup_domain_gpus >= 72)]

@_check("ndr-infiniband-200gbps", "bit/s per port, per direction")
def _ndr_200():
    ndr, ndr200 = hardware.link("NDR"), hardware.link("NDR200")
    bits = units.to_gbit_per_s(ndr.per_direction_Bps) * 1e9
    bits200 = units.to_gbit_per_s(ndr200.per_direction_Bps) * 1e9
    return 200e9, bits, [
        Finding("NDR is 200 Gb/s per port", f"{ndr.name}, 4 lanes: {bits / 1e9:.0f} Gb/s",
                _near(200e9, bits)),
        Finding("200 Gb/s NDR ports exist", f"{ndr200.name}, 2 lanes, as on single-port "
                f"200 Gb/s ConnectX-7 cards: {bits200 / 1e9:.0f} Gb/s", _near(200e9, bits200)),
        Finding("what the seed's DGX B200 cluster has", "eight 400 Gb/s ConnectX-7 ports per node "
                "(DGX B200 user guide): 200 Gb/s per GPU would be half of it", True, "context")]

def _seed_dp_fabric():
    # The seed's 2,000 GPUs as 250 DGX B200 nodes with one 400 Gb/s NDR NIC per GPU, priced
    # as NCCL's tuning model prices a flat all-reduce (the interconnect chapter's fabric).
    dgx = hardware.system("DGX B200")
    f = fabric.Fabric(dgx.scaleup_domain_gpus, dgx.gpu().scaleup_Bps,
                      hardware.link("NDR").per_direction_Bps, dgx.nic_count / dgx.gpu_count)
    return f, 2000 // dgx.scaleup_domain_gpus

@_check("allreduce-8-bytes-bandwidth-scaling", "share of time in the bandwidth term")
def _allreduce_8b():
    f, d = _seed_dp_fabric()
    t = fabric.flat_all_reduce_time_s(8, f, d, "ring")
    beta = fabric.flat_all_reduce_time_s(8, dataclasses.replace(
        f, scaleup_latency_s=0.0, net_latency_s=0.0), d, "ring")
    tree = fabric.flat_all_reduce_time_s(8, f, d, "tree")
    return "bandwidth-bound", beta / t, [
        Finding("an 8-byte all-reduce scales with bandwidth", f"ring over {f.gpus_per_domain * d:,} "
                f"ranks in {d} nodes (NCCL's latency model): {t * 1e3:.1f} ms, of which "
                f"{beta * 1e9:.2f} ns is bandwidth", beta / t >= 0.5),
        Finding("tree instead of ring", f"{tree * 1e6:.0f} us", True, "context")]

@_check("nvlink5-10tbps", "B/s per GPU, bidirectional")
def _nvlink5_10():
    b200, hbi = hardware.gpu("B200"), hardware.link("NV-HBI")
    bidir = b200.scaleup_bidirectional_Bps
    return 10e12, bidir, [
        Finding("NVLink 5 gives each GPU 10 TB/s", f"{bidir / units.TB:.2g} TB/s bidirectional "
                f"({b200.scaleup_Bps / units.TB:.2g} per direction); {hbi.printed} is "
                f"{hbi.name.split(' (')[0]}, between the two dies of one GPU", _near(10e12, bidir))]

@_check("h100-nvlink-cross-node-900gbs", "B/s per GPU between nodes, bidirectional")
def _h100_cross_node():
    h100, dgx = hardware.gpu("H100"), hardware.system("DGX H100")
    per_gpu = 2 * dgx.scaleout_Bps / dgx.gpu_count
    f = fabric.Fabric(dgx.scaleup_domain_gpus, h100.scaleup_Bps, dgx.nic_per_direction_Bps,
                      dgx.nic_count / dgx.gpu_count)
    return 900e9, per_gpu, [
        Finding("900 GB/s between H100 nodes", f"NVLink 4's {h100.scaleup_printed} stays inside one "
                f"node of {dgx.scaleup_domain_gpus} GPUs; between DGX H100s each GPU has one "
                f"{dgx.nic}: {per_gpu / units.GB:.0f} GB/s bidirectional", _near(900e9, per_gpu)),
        Finding("what a ring across nodes gets", f"NCCL spreads its channels over all "
                f"{dgx.nic_count} rails: {fabric.flat_Bps(f, 2) / units.GB:.0f} GB/s per GPU per "
                f"direction, against {h100.scaleup_Bps / units.GB:.0f} inside the node", True,
                "context")]

@_check("tp8-comm-under-3-percent", "share of layer time, B200 without overlap")
def _tp8_comm():
    # The interconnect chapter's layer model: a 13B model's width, one 4k sequence, TP 8,
    # GEMMs through the roofline, four ring all-reduces at full NVLink bandwidth, no overlap.
    b200, h100 = (parallel.tp_layer(g).comm_share for g in ("B200", "H100"))
    return 0.03, b200, [
        Finding("TP=8 all-reduces under 3% of the time on B200 (7% on H100)",
                f"alpha-beta all-reduces and roofline GEMMs, no overlap: {_pct(b200)} on B200, "
                f"{_pct(h100)} on H100; only overlap with GEMMs, unmentioned, could hide it",
                b200 <= 0.03, "framing")]


# parallelism
@_check("tp8-pp4-dp8-on-256", "GPUs")
def _tp8_pp4_dp8():
    layout, dgx = model.Layout(tp=8, pp=4, dp=8), hardware.system("DGX H100")
    return 256, layout.num_gpus, [
        Finding("TP 8 x PP 4 x DP 8 on 256 GPUs", f"{layout.num_gpus} GPUs", layout.num_gpus == 256),
        Finding("TP=8 inside one node", f"DGX H100 NVLink domain: {dgx.scaleup_domain_gpus} GPUs",
                layout.tp <= dgx.scaleup_domain_gpus)]

@_check("8192-gpus-in-128-nvl72", "GPUs")
def _nvl72_128():
    gpus = 128 * hardware.system("GB200 NVL72").gpu_count
    return 8192, gpus, [Finding("128 NVL72 racks = 8,192 GPUs", f"128 x 72 = {gpus:,} GPUs; "
                                f"8,192 GPUs fill {8192 / 72:.1f} racks", gpus == 8192)]

def _ep128_layout(world):
    tp, pp, cp, ep, vpp = 4, 8, 2, 128, 2
    try:
        lay = model.Layout(tp=tp, pp=pp, cp=cp, dp=world // (tp * pp * cp), ep=ep, vpp=vpp)
    except ValueError as exc:
        return False, str(exc)
    if lay.num_gpus != world:
        return False, f"tp*pp*cp = {tp * pp * cp} does not divide {world}"
    return True, f"DP {lay.dp}, expert DP {lay.expert_optimizer_shards}"

@_check("ep128-layout-divisibility", "valid world sizes")
def _ep128():
    ok_8192, why_8192 = _ep128_layout(8192)
    ok_9216, why_9216 = _ep128_layout(128 * 72)
    return "8,192 and 9,216", "8,192 only" if ok_8192 and not ok_9216 else "see detail", [
        Finding("valid on 8,192 GPUs", why_8192, ok_8192),
        Finding("valid on 128 full NVL72 racks (9,216 GPUs)", why_9216, ok_9216),
        Finding("EP group span", f"TP 4 x EP 128 = 512 GPUs, {512 / 72:.1f} NVL72 racks", True,
                "context")]

@_check("h100-same-scale-and-gpu-hours-per-day", "GPU-hours saved per day")
def _same_scale():
    h100_gpus = 256 * hardware.system("DGX H100").gpu_count
    per_day = 8192 * DAY_S / HOUR_S
    # a day of B200 training does the work of 5.1 / 2.3 days on as many H100s: the saving per
    # day of the run the seed describes. Per day of H100 time it is 1 - 2.3 / 5.1 of a day
    saved = per_day * (5.1 / 2.3 - 1)
    per_h100_day = per_day * (1 - 2.3 / 5.1)
    return 200_000, saved, [
        Finding("256 DGX H100 = the same scale as 8,192 B200", f"256 x 8 = {h100_gpus:,} GPUs",
                h100_gpus == 8192),
        Finding("several hundred thousand GPU-hours saved per day", f"{saved:,.0f} per day of "
                f"B200 training at equal GPU count (8,192 GPUs have {per_day:,.0f} GPU-hours in "
                f"a day; per day of H100 time the saving is {per_h100_day:,.0f})",
                saved >= 200_000)]

@_check("microbatch-8-to-14-gives-1p7x", "x throughput, step time at the same global batch")
def _microbatch():
    # one DGX B200 at a global batch both micro-batches divide (8 x 14 x 8 sequences), without
    # and with a pipeline: the step's FLOPs stay; kernel efficiency and the bubble move
    m = model.preset("narayanan-1.7b")
    speedup = {}
    for pp in (1, 4):
        step = {mb: parallel.estimate(m, model.Layout(
                    tp=1, pp=pp, dp=8 // pp, microbatch=mb, global_batch=896, precision="fp4"),
                    "B200").step_time_s for mb in (8, 14)}
        speedup[pp] = step[8] / step[14]
    best = max(speedup.values())
    return 1.7, best, [
        Finding("micro-batch 8 -> 14 at the same global batch gives 1.7x",
                f"FLOPs per step unchanged; {m.name} on 8 B200 in FP4 steps "
                + ", ".join(f"{s:.3f}x as fast at PP {pp}" for pp, s in speedup.items()),
                _near(1.7, best), "framing"),
        Finding("the seed's ratio", f"14 / 8 = {14 / 8}", True, "context")]

@_check("efficiency-70-to-90-percent", "fraction of dense peak")
def _efficiency_90():
    from companion.catalogue.hardware import MEGATRON_1T_FLOPS
    best = MEGATRON_1T_FLOPS / hardware.gpu("A100").peak_flops("fp16")
    return 0.90, best, [
        Finding("over 90% compute efficiency (metric unnamed)", f"one published figure at scale: "
                f"{_pct(best)} of the dense peak (Narayanan et al. 2021, dense 1T GPT, 3,072 "
                "A100s; their FLOP count includes the recomputed forward pass)", 0.90 <= best,
                "framing")]

@_check("moe-1p7t-2p3s-9p4pct-comm", "% of the step, lowest over top-k 2 / 8 / 24")
def _moe_17t():
    lay = model.Layout(tp=4, pp=8, cp=2, dp=128, ep=128, vpp=2, microbatch=1, global_batch=2048,
                       sequence_parallel=True, distributed_optimizer=True)
    rows = {}
    for k in (2, 8, 24):
        e = parallel.estimate(model.preset("seed-1.7t-moe", top_k=k), lay, "GB200",
                              system="GB200 NVL72")
        comm_s = e.tp_exposed_s + e.cp_exposed_s + e.ep_exposed_s + e.pp_p2p_s + e.dp_exposed_s
        rows[k] = (100 * comm_s / e.step_time_s, 100 * e.ep_exposed_s / e.step_time_s, e)
    low = min(r[0] for r in rows.values())
    shares = ", ".join(f"top-{k}: {r[0]:.0f}% ({r[1]:.0f}% all-to-all)" for k, r in rows.items())
    steps = ", ".join(f"top-{k}: {r[2].step_time_s:.1f} s" for k, r in rows.items())
    fits = ", ".join(f"top-{k}: {'fits' if r[2].fits else 'does not fit'}" for k, r in rows.items())
    return 9.4, low, [
        Finding("communication only 9.4% of the step", shares, _near(9.4, low, 0.5), tolerance=0.5),
        Finding("about 2.3 s per step", f"{steps} at global batch 2,048 (the seed names none)",
                _near(2.3, rows[24][2].step_time_s), "context"),
        Finding("the layout runs", f"{rows[24][2].memory_bytes / 1e9:,.0f} GB needed per GPU "
                f"at top-24 against {rows[24][2].capacity_bytes / 1e9:.0f} GB; {fits} "
                "without recomputation", True, "context")]


# power
@_check("dgx-b200-8u-liquid-cooled", "cooling")
def _dgx_b200_8u():
    dgx = hardware.system("DGX B200")
    return "liquid", dgx.cooling, [
        Finding("liquid-cooled", f"{dgx.name}: {dgx.cooling}", "liquid" in dgx.cooling),
        Finding("8U", f"{DGX_B200_RACK_UNITS}U (DGX B200 User Guide)", DGX_B200_RACK_UNITS == 8)]

@_check("b200-tdp-dgx-power-over-10kw", "W, DGX B200 maximum")
def _b200_tdp():
    b200, dgx = hardware.gpu("B200"), hardware.system("DGX B200")
    return 10e3, dgx.max_power_w, [
        Finding("B200 TDP 1,000 W", f"{b200.tdp_w:.0f} W", _near(1000, b200.tdp_w)),
        Finding("a DGX B200 peaks above 10 kW", f"{dgx.max_power_w / 1e3:.1f} kW maximum",
                dgx.max_power_w > 10e3)]

@_check("h100-server-5p6kw-full-load", "W")
def _h100_server():
    h100, dgx = hardware.gpu("H100"), hardware.system("DGX H100")
    gpus_w = dgx.gpu_count * h100.tdp_w
    return 5600, dgx.max_power_w, [
        Finding("an 8-GPU H100 server draws 5.6 kW at full load", f"DGX H100 maximum "
                f"{dgx.max_power_w / 1e3:.1f} kW", _near(5600, dgx.max_power_w)),
        Finding("where 5.6 kW comes from", f"8 x {h100.tdp_w:.0f} W = {gpus_w:.0f} W, the GPUs "
                "alone", True, "context"),
        Finding("measured in training", f"typically {power.H100_NODE_TYPICAL_FRACTION:.0%} of the "
                f"rating ({power.H100_NODE_TYPICAL_FRACTION * dgx.max_power_w / 1e3:.1f} kW, Newkirk "
                f"et al.), at most {power.H100_NODE_MAX_MEASURED_W / 1e3:.1f} kW (Latif et al.)",
                True, "context")]

@_check("perf-per-watt-fp4-vs-fp8", "x FLOP/J, B200 over H100")
def _perf_per_watt():
    h100, b200 = hardware.gpu("H100"), hardware.gpu("B200")
    fp8 = b200.flops_per_watt("fp8") / h100.flops_per_watt("fp8")
    return 10 / 2.83, fp8, [
        Finding("H100 FP8 2.83 TFLOP/s per W", f"{h100.flops_per_watt('fp8') / 1e12:.2f}",
                _near(2.83e12, h100.flops_per_watt("fp8"))),
        Finding("B200 FP4 10 TFLOP/s per W (10 PF / 1,000 W)", "the division is right; the "
                f"1,000 W B200's dense FP4 gives {b200.flops_per_watt('fp4') / 1e12:.0f}", True,
                "context"),
        Finding("so B200 is 3.5x more efficient", f"same precision (FP8 dense): {fp8:.2f}x",
                _near(10 / 2.83, fp8), "framing")]

@_check("cluster-1p93x-means-60pct-less-power", "power saving at equal throughput")
def _cluster_193():
    gain = 74.2 / 38.4
    return 0.60, 1 - 1 / gain, [
        Finding("38.4 -> 74.2 PFLOP/s", f"{gain:.2f}x", True, "context"),
        Finding("more than 60% less power", f"1 - 1/{gain:.2f} = {_pct(1 - 1 / gain)}",
                1 - 1 / gain > 0.60)]

@_check("b200-energy-54pct-from-assumed-gpu-hours", "energy saving")
def _energy_54():
    h100, b200 = hardware.gpu("H100"), hardware.gpu("B200")
    h100_kwh = SEED_13B_H100_GPU_HOURS * SEED_GPU_KW
    b200_kwh = SEED_13B_B200_GPU_HOURS * b200.tdp_w / 1e3
    speedup = SEED_13B_H100_GPU_HOURS / SEED_13B_B200_GPU_HOURS
    fp8 = b200.peak_flops("fp8") / h100.peak_flops("fp8")
    return 0.54, 1 - b200_kwh / h100_kwh, [
        Finding("3,800 GPU-hours x 0.69 kW = 2,622 kWh", f"{h100_kwh:,.0f} kWh", _near(2622, h100_kwh)),
        Finding("54% less", _pct(1 - b200_kwh / h100_kwh), _near(0.54, 1 - b200_kwh / h100_kwh)),
        Finding("1,200 GPU-hours, a 3.17x per-GPU speed-up", f"{speedup:.2f}x assumed; the "
                f"same-precision (FP8) peak ratio is {fp8:.2f}x", speedup <= fp8, "framing")]

@_check("13b-300b-tokens-3p5-days-4000-yuan", "yuan")
def _13b_cost():
    h100 = hardware.gpu("H100")
    hours = SEED_13B_H100_DAYS * DAY_S / HOUR_S
    per_gpu = 6 * 13e9 * 300e9 / (128 * SEED_13B_H100_DAYS * DAY_S)
    gpu_yuan = 128 * SEED_GPU_KW * hours * SEED_YUAN_PER_KWH
    node_yuan = 128 / 8 * SEED_NODE_KW * hours * SEED_YUAN_PER_KWH
    return 4000, gpu_yuan, [
        Finding("3.5 days", f"needs {_pct(per_gpu / h100.peak_flops('bf16'))} of dense BF16 "
                f"({_pct(per_gpu / h100.peak_flops('fp8'))} of FP8): plausible, not verified",
                True, "context"),
        Finding("4,000 yuan of electricity", f"{gpu_yuan:,.0f} yuan for the GPUs alone at the "
                f"post's 0.69 kW and 0.8 yuan/kWh; {node_yuan:,.0f} for nodes at 8.5 kW",
                _near(4000, gpu_yuan)),
        Finding("GPU-hours", f"{128 * hours:,.0f}, not the 3,800 used earlier", True, "context")]

@_check("175b-half-time-41pct-energy", "energy saving")
def _175b():
    b200_w, h100_w = hardware.gpu("B200").tdp_w, hardware.gpu("H100").tdp_w
    ratio = b200_w / h100_w * 0.5
    s = SEED_175B_SAVING
    return s, 1 - ratio, [
        Finding("time halved and 41% less electricity", f"({b200_w:,.0f} W / {h100_w:,.0f} W) x "
                f"0.5 = {ratio:.2f}: {_pct(1 - ratio)} saved", _near(s, 1 - ratio)),
        Finding("what 41% needs", f"a time ratio of {(1 - s) * h100_w / b200_w:.2f}", True,
                "context")]

@_check("nvl72-rack-60kw-reserve-80kw", "W per rack")
def _nvl72_power():
    nvl72 = hardware.system("GB200 NVL72")
    gpus_w = nvl72.gpu_count * nvl72.gpu().tdp_w
    lo, hi = power.GB200_NVL72_RACK_W_RANGE
    return 60e3, lo, [
        Finding("an NVL72 rack draws about 60 kW", f"{lo / 1e3:.0f}-{hi / 1e3:.0f} kW (reported at "
                "launch; NVIDIA's power-shelf design)", _near(60e3, lo)),
        Finding("80 kW per rack is enough", f"the 72 GPUs alone draw {gpus_w / 1e3:.1f} kW",
                80e3 >= max(gpus_w, lo))]


# pitfalls
@_check("storage-3x-gpu-flops", "B/s of training input")
def _storage():
    tokens_s = 100e12 / (6 * 13e9)
    return 200e9, tokens_s * TOKEN_ID_BYTES, [
        Finding("100 TFLOP/s needs about 200 GB/s of reads", f"{tokens_s:,.0f} tokens/s x "
                f"{TOKEN_ID_BYTES} B = {tokens_s * TOKEN_ID_BYTES / 1e3:.1f} kB/s for a 13B model",
                _near(200e9, tokens_s * TOKEN_ID_BYTES)),
        Finding("what storage is sized by", f"a 13B checkpoint of "
                f"{reliability.checkpoint_bytes(13e9) / 1e9:.0f} GB (14 B/param: BF16 weights, "
                "FP32 master weights, two Adam moments)", True, "context")]
