"""companion.roofline: GEMM/attention/elementwise costs, the roofline, tile and wave quantization.

GPU figures come from stub specs defined here, so these tests do not depend on the registry.
"""
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest

import companion
from companion import roofline as rl


@dataclass(frozen=True)
class StubGPU:
    name: str
    sm_count: int
    bf16_flops: float  # dense
    hbm_Bps: float
    hbm_bytes: float

    def peak_flops(self, precision, sparse=False):
        if precision not in ("bf16", "fp16"):
            raise ValueError(f"stub has no {precision} peak")
        return self.bf16_flops * (2 if sparse else 1)


# NVIDIA H100 SXM5 datasheet figures: 132 SMs, BF16 Tensor Core 1,979 TFLOPS "with sparsity"
# (989.4 dense), 3.35 TB/s HBM3, 80 GB. As reproduced at glennklockwood.com/garden/processors/h100
# and archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html (NVIDIA's table, "*Shown with
# sparsity. Specifications 1/2 lower without sparsity").
H100 = StubGPU("H100 SXM", 132, 989.4e12, 3.35e12, 80e9)
# HGX B200 at 1,000 W: BF16 2,250 TFLOPS dense, 8 TB/s (glennklockwood.com/garden/processors/B200,
# from NVIDIA's Blackwell tables); 148 SMs is the count CUDA reports (NVIDIA publishes none).
B200 = StubGPU("B200", 148, 2.25e15, 8e12, 180e9)
# A100 SXM: 108 SMs (NVIDIA's Matrix Multiplication Background guide uses it in its examples)
A100 = StubGPU("A100", 108, 312e12, 2.039e12, 80e9)


def test_gemm_flops_and_bytes_by_hand():
    c = rl.gemm(3, 5, 7)  # 2mnk FLOPs; A 3x7 + B 7x5 read, C 3x5 written, 2 bytes each
    assert c.flops == 2 * 3 * 5 * 7 == 210
    assert c.bytes_moved == (21 + 35 + 15) * 2 == 142
    assert rl.gemm(3, 5, 7, out_dtype="fp32").bytes_moved == (21 + 35) * 2 + 15 * 4
    assert rl.gemm(3, 5, 7, dtype="fp8").bytes_moved == 71
    b = rl.batched_gemm(4, 3, 5, 7)
    assert (b.flops, b.bytes_moved) == (4 * 210, 4 * 142)
    # a square bf16 GEMM's intensity is 2n^3 / (6 n^2) = n/3 FLOP per byte
    assert rl.gemm(3000, 3000, 3000).intensity == pytest.approx(1000)


def test_ridge_point_and_roofline():
    ridge = rl.ridge_point(H100)
    assert ridge == pytest.approx(989.4e12 / 3.35e12)  # about 295 FLOP/byte
    assert rl.attainable_flops(ridge, H100) == pytest.approx(989.4e12)
    assert rl.attainable_flops(10, H100) == pytest.approx(10 * 3.35e12)
    assert rl.attainable_flops(1e6, H100) == pytest.approx(989.4e12)
    arr = rl.attainable_flops(np.array([1.0, 1e4]), H100)
    np.testing.assert_allclose(arr, [3.35e12, 989.4e12])
    assert rl.ridge_point(H100, sparse=True) == pytest.approx(2 * ridge)


def test_roofline_time_picks_the_binding_roof():
    big = rl.roofline_time(rl.gemm(8192, 8192, 8192), H100)
    assert big.bound == "compute" and big.fraction_of_peak == pytest.approx(1.0)
    add = rl.roofline_time(rl.elementwise(1 << 20, reads=2, writes=1), H100)
    assert add.bound == "memory"
    assert add.time_s == pytest.approx(3 * 2 * (1 << 20) / 3.35e12)


@pytest.mark.parametrize("m, n, tile, sms, tiles, waves, efficiency", [
    # 11 x 12 = 132 tiles of 128x128: exactly one full wave on H100
    (1408, 1536, (128, 128), 132, 132, 1, 1.0),
    # 12 x 12 = 144 tiles: a second wave of 12 tiles leaves 120 of 132 SMs idle
    (1536, 1536, (128, 128), 132, 144, 2, 144 / 264),
    # NVIDIA's guide setting: A100, 256x128 tiles; 1792 x 1792 -> 7 x 14 = 98 tiles, one wave
    (1792, 1792, (256, 128), 108, 98, 1, 98 / 108),
    # one more row: 8 x 14 = 112 tiles, two waves, and the 8th row of tiles is 1/256 full
    (1793, 1792, (256, 128), 108, 112, 2, (1793 / 2048) * (112 / 216)),
])
def test_tile_and_wave_quantization_hand_worked(m, n, tile, sms, tiles, waves, efficiency):
    gpu = H100 if sms == 132 else A100
    q = rl.gemm_efficiency(m, n, gpu, tile)
    assert (q.tiles, q.waves, q.sm_count) == (tiles, waves, sms)
    assert q.efficiency == pytest.approx(efficiency)


def test_partial_last_wave_costs_time():
    full = rl.gemm_time(1408, 1536, 4096, H100)  # 132 tiles
    plus = rl.gemm_time(1536, 1536, 4096, H100)  # 144 tiles: 9% more work, 2 waves
    assert plus.timing.time_s / full.timing.time_s == pytest.approx(2.0, rel=1e-9)
    assert plus.mfu < 0.6 < full.mfu
    assert rl.gemm_efficiency(64, 64, H100).efficiency < 1  # a single tile, 1 of 132 SMs


def test_seed_ffn_gemm_on_h100_and_b200():
    """The seed's 512x4096x512 FFN GEMM: 2.1 GFLOP, 8.9 MB in bf16, 241 FLOP/byte."""
    h, b = rl.seed_ffn_gemm(H100), rl.seed_ffn_gemm(B200)
    assert h.cost.flops == 2 * 512 * 4096 * 512
    assert h.cost.bytes_moved == 2 * (512 * 512 + 512 * 4096 + 512 * 4096)
    assert h.cost.intensity == pytest.approx(240.94, abs=0.01)
    # 4 x 32 = 128 tiles: one wave, 128 of 132 SMs (H100) or 128 of 148 (B200)
    assert h.quantization.tiles == b.quantization.tiles == 128
    assert h.quantization.efficiency == pytest.approx(128 / 132)
    assert b.quantization.efficiency == pytest.approx(128 / 148)
    # below the ridge on both: HBM-bound, so the MFU ceiling is intensity / ridge
    assert h.timing.bound == "memory"
    assert h.mfu == pytest.approx(240.94 / (989.4 / 3.35), rel=1e-4)
    assert b.mfu == pytest.approx(240.94 * 8e12 / 2.25e15, rel=1e-4)
    # launch latency of a few microseconds dominates a 2-3 microsecond kernel
    slow = rl.seed_ffn_gemm(H100, overhead_s=3e-6)
    assert slow.mfu < 0.5 * h.mfu


def test_attention_costs():
    s, a, d = 4096, 32, 128
    naive = rl.attention(s, a, d, flash=False)
    flash = rl.attention(s, a, d, flash=True)
    assert naive.flops == flash.flops == 4 * a * s * s * d
    assert flash.bytes_moved == 4 * a * s * d * 2  # Q, K, V read and O written once
    assert naive.bytes_moved == flash.bytes_moved + 4 * a * s * s * 2  # S and P round trips
    assert rl.attention(s, a, d, causal=True).flops == flash.flops / 2
    gqa = rl.attention(s, a, d, kv_heads=8)
    assert gqa.bytes_moved == (2 * a + 2 * 8) * s * d * 2
    assert naive.intensity < rl.ridge_point(H100) < flash.intensity


def test_elementwise_and_norms():
    e = rl.elementwise(1000, reads=2, writes=1, flops_per_element=1)
    assert (e.flops, e.bytes_moved) == (1000, 6000)
    ln = rl.layernorm(4096, 8192)
    assert ln.bytes_moved == 2 * 4096 * 8192 * 2 and ln.intensity < 2
    assert rl.softmax(8, 8, "fp32").bytes_moved == 8 * 8 * 8


def test_gpu_by_name_uses_the_registry_lazily(monkeypatch):
    fake = types.ModuleType("companion.hardware")
    fake.gpu = lambda name: {"H100": H100}[name]
    monkeypatch.setitem(sys.modules, "companion.hardware", fake)
    monkeypatch.setattr(companion, "hardware", fake, raising=False)
    assert rl.ridge_point("H100") == rl.ridge_point(H100)
    assert rl.seed_ffn_gemm("H100").gpu == "H100 SXM"


@pytest.mark.parametrize("call, exc, match", [
    (lambda: rl.gemm(0, 5, 7), ValueError, "m must be > 0"),
    (lambda: rl.gemm(3, -5, 7), ValueError, "n must be > 0"),
    (lambda: rl.gemm(3, 5, 7.5), TypeError, "k must be an integer"),
    (lambda: rl.gemm(3, 5, 7, dtype="bf17"), ValueError, "unknown dtype 'bf17'.*bf16"),
    (lambda: rl.attention(128, 32, 64, kv_heads=5), ValueError, "kv_heads=5 must divide heads"),
    (lambda: rl.elementwise(10, reads=0, writes=0), ValueError, "reads \\+ writes"),
    (lambda: rl.attainable_flops(-1, H100), ValueError, "intensity"),
    (lambda: rl.gemm_efficiency(128, 128, H100, tile=128), TypeError, "tile"),
    (lambda: rl.ridge_point(object()), TypeError, "peak_flops"),
    (lambda: rl.gemm_efficiency(128, 128, StubGPU("GB200", None, 1.0, 1.0, 1.0)), ValueError,
     "GB200 has no SM count"),
    (lambda: rl.roofline_time(rl.gemm(2, 2, 2), H100, efficiency=1.5), ValueError, "efficiency"),
])
def test_bad_input_is_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# -- array forms: many GEMMs in one numpy pass, the same numbers as one at a time ----------------
def _random_shapes(seed, count=120):
    rng = np.random.default_rng(seed)
    # odd sizes (tile remainders), powers of two and tiny GEMMs, with and without batches
    m, n, k = (rng.integers(1, 20000, count) for _ in range(3))
    m[:10], n[10:20], k[20:30] = 1, 2 ** rng.integers(4, 15, 10), 3
    return m, n, k, rng.integers(1, 97, count)


@pytest.mark.parametrize("gpu, dtype, tile", [(H100, "bf16", (128, 128)),
                                              (A100, "fp16", (256, 128)),
                                              (B200, "bf16", (64, 128))])
def test_gemm_time_arrays_agree_with_gemm_time(gpu, dtype, tile):
    m, n, k, batch = _random_shapes(hash(tile) % 1000)
    r = rl.gemm_time_arrays(m, n, k, gpu, dtype, tile=tile, batch=batch)
    q = rl.gemm_efficiency_arrays(m, n, gpu, tile, batch)
    flops, moved = rl.gemm_arrays(m, n, k, dtype, batch=batch)
    for i in range(len(m)):
        e = rl.gemm_time(int(m[i]), int(n[i]), int(k[i]), gpu, dtype, tile=tile,
                         batch=int(batch[i]))
        assert (r.flops[i], r.bytes_moved[i]) == (e.cost.flops, e.cost.bytes_moved)
        assert (flops[i], moved[i]) == (e.cost.flops, e.cost.bytes_moved)
        assert (r.quantization.tiles[i], r.quantization.waves[i]) == (
            e.quantization.tiles, e.quantization.waves)
        assert q.efficiency[i] == r.quantization.efficiency[i] == e.quantization.efficiency
        assert (r.compute_s[i], r.memory_s[i], r.time_s[i]) == (
            e.timing.compute_s, e.timing.memory_s, e.timing.time_s)
    assert ((0 < r.quantization.efficiency) & (r.quantization.efficiency <= 1)).all()


def test_array_forms_broadcast_and_keep_the_hand_worked_values():
    # the hand-worked H100 cases above, as one call: 132 tiles (one full wave), 144 tiles
    q = rl.gemm_efficiency_arrays(np.array([1408, 1536]), 1536, H100)
    assert q.tiles.tolist() == [132, 144] and q.waves.tolist() == [1, 2]
    assert q.efficiency.tolist() == pytest.approx([1.0, 144 / 264])
    flops, moved = rl.gemm_arrays(np.array([[3], [6]]), np.array([5, 10]), 7)
    assert flops.shape == (2, 2) and flops[0, 0] == 210 and moved[0, 0] == 142
    c, mem, t = rl.roofline_time_arrays(np.array([2e15, 1e9]), np.array([1e9, 1e9]), H100)
    assert t.tolist() == pytest.approx([2e15 / 989.4e12, 1e9 / 3.35e12])


@pytest.mark.parametrize("call, match", [
    (lambda: rl.gemm_arrays(np.array([4, 0]), 5, 7), "m must hold positive integers"),
    (lambda: rl.gemm_arrays(4, np.array([2.5]), 7), "n must hold positive integers"),
    (lambda: rl.gemm_time_arrays(4, 5, np.array([-1]), H100), "k must hold positive"),
    (lambda: rl.roofline_time_arrays(1.0, 1.0, H100, efficiency=np.array([0.5, 1.5])),
     "efficiency"),
])
def test_array_forms_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- issue 14: the last-level cache level and tile presets per architecture -------------------

@dataclass(frozen=True)
class CachedStub(StubGPU):
    llc_bytes: float = 50 * 2**20  # H100 SXM: 'L2 Cache Size: 52428800 bytes' (deviceQuery)
    llc_Bps: float | None = None  # NVIDIA publishes no L2 bandwidth
    llc_name: str = "L2"
    compute_capability: str = "9.0"


H100_L2 = CachedStub("H100 SXM", 132, 989.4e12, 3.35e12, 80e9)
B200_L2 = CachedStub("B200", 148, 2.25e15, 7.7e12, 180e9, llc_bytes=126.5 * 2**20,
                     compute_capability="10.0")  # pytorch/ao#4002: 'L2 Cache Size: 126.50 MB'


def test_seed_gemm_fits_in_l2_so_it_is_not_hbm_bound_when_warm():
    # 512x4096x512 BF16: A 0.5 MiB + B 4 MiB + C 4 MiB = 8.9e6 bytes < 50 MiB (H100 L2) and
    # < 126.5 MiB (B200 L2). Flushed, it is HBM-bound (2.66 us > 2.17 us compute on H100);
    # warm, HBM drops out and only the compute roof is known (NVIDIA prints no L2 bandwidth).
    cost = rl.gemm(512, 4096, 512)
    assert cost.bytes_moved == pytest.approx(8.9e6, rel=0.01)
    for gpu, compute_us, hbm_us in ((H100_L2, 2.17, 2.66), (B200_L2, 0.954, 1.16)):
        cold = rl.cached_roofline_time(cost, gpu, warm=False)
        warm = rl.cached_roofline_time(cost, gpu, warm=True)
        assert cold.bound == "HBM" and not cold.resident
        assert cold.time_s == pytest.approx(hbm_us * 1e-6, rel=0.01)
        assert warm.resident and warm.bound == "compute" and warm.lower_bound_only
        assert warm.time_s == pytest.approx(compute_us * 1e-6, rel=0.01)


def test_the_seed_gemm_verdict_is_launch_latency_bound():
    # PyTorch issue 161104 measures a tiny CUDA add at 1.1-1.3 us end to end: a fixed cost of
    # that size already equals B200's whole roofline time, and 3 us exceeds H100's.
    cost = rl.gemm(512, 4096, 512)
    assert rl.cached_roofline_time(cost, B200_L2, overhead_s=1.1e-6).bound == "launch/latency"
    assert rl.cached_roofline_time(cost, H100_L2, overhead_s=3e-6).bound == "launch/latency"
    assert rl.cached_roofline_time(cost, H100_L2, overhead_s=1e-6).bound == "compute"


def test_cache_level_with_a_bandwidth_and_a_working_set_that_does_not_fit():
    # MI300X: 256 MB Infinity Cache at 17 TB/s (AMD slide): a 1 GB working set spills to HBM.
    mi = CachedStub("MI300X", 304, 1307.4e12, 5.3e12, 192 * 2**30, llc_bytes=256 * 2**20,
                    llc_Bps=17e12, compute_capability="gfx942")
    small = rl.elementwise(8 * 2**20, "bf16")  # 32 MiB moved, fits
    t = rl.cached_roofline_time(small, mi)
    assert t.bound == "cache" and t.cache_s == pytest.approx(small.bytes_moved / 17e12)
    big = rl.elementwise(2**29, "bf16")  # 2 GiB moved
    assert rl.cached_roofline_time(big, mi).bound == "HBM"
    with pytest.raises(ValueError, match="no last-level cache size"):
        rl.cached_roofline_time(small, H100)  # the stub without an L2 figure
    with pytest.raises(TypeError, match="warm"):
        rl.cached_roofline_time(small, mi, warm="yes")


def test_tile_presets_per_architecture():
    assert rl.tile_preset(H100_L2).tile == (128, 256)
    assert rl.tile_preset(B200_L2) is rl.TILE_PRESETS["blackwell"]
    assert rl.TILE_PRESETS["blackwell"].sms_per_tile == 2
    assert rl.tile_preset(A100).name == "ampere"  # no compute capability: Ampere's picture
    # Blackwell: 8192^2 outputs in 256x256 tiles = 1024 tiles over 74 SM pairs = 14 waves
    # (13.8 -> 14, 98.8% of pair slots busy); H100 with 128x256: 2048 tiles / 132 = 16 waves.
    b = rl.gemm_efficiency(8192, 8192, B200_L2, tile="auto")
    assert (b.tiles, b.waves) == (1024, 14)
    assert b.wave_efficiency == pytest.approx(1024 / (14 * 74))
    h = rl.gemm_efficiency(8192, 8192, H100_L2, tile="hopper")
    assert (h.tiles, h.waves) == (2048, 16)
    # The seed GEMM on B200 with 2-SM tiles: 2 x 16 = 32 tiles on 74 pairs, 43% busy.
    s = rl.gemm_efficiency(512, 4096, B200_L2, tile="blackwell")
    assert s.tiles == 32 and s.wave_efficiency == pytest.approx(32 / 74)
    with pytest.raises(ValueError, match="tile"):
        rl.gemm_efficiency(512, 512, H100_L2, tile="volta")
    assert rl.gemm_time(8192, 8192, 8192, H100_L2, tile="auto").quantization.tiles == 2048


def test_cached_roofline_checks_its_cost_and_shapes_refuse_strings():
    # as roofline_time does: NaN bytes were timed as "HBM"-bound, a string crashed with an
    # AttributeError, and gemm shapes "512" or True were converted by numpy
    with pytest.raises(ValueError, match="cost.bytes_moved"):
        rl.cached_roofline_time(rl.Cost("x", 1e9, float("nan")), "H100")
    with pytest.raises(TypeError, match="cost must be a Cost"):
        rl.cached_roofline_time("abc", "H100")
    for bad in ("512", True):
        with pytest.raises(TypeError, match="m must be a positive integer"):
            rl.gemm_arrays(bad, 4, 4)
    with pytest.raises(TypeError, match="efficiency"):
        rl.roofline_time_arrays(1e12, 1e9, "H100", efficiency="0.5")
