"""companion.formats against ml_dtypes, torch's casts and references written from the specs.

Sources: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 and OCP Microscaling Formats (MX)
Specification v1.0 (formats, MX block rule); ml_dtypes 0.6 (bit-exact reference casts); torch
2.x casts; NVIDIA TransformerEngine NVFP4 docs and NVFP4QuantizerRef (nvfp4); DeepSeek-V3
arXiv:2412.19437 section 3.3 and its inference/kernel.py act_quant (deepseek_fp8).
"""
import math

import ml_dtypes
import numpy as np
import pytest

from companion import formats as F

torch = pytest.importorskip("torch")

ML = {f: getattr(ml_dtypes, F.info(f).ml_dtypes_name) for f in F.FORMATS}
NO_NAN_CODE = ("e3m2", "e2m3", "e2m1")


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def random_values(fmt, n, seed=0):
    """Values spanning the format's range, its subnormals, ties and the special values."""
    rng = np.random.default_rng(seed)
    vals = np.array(F.info(fmt).values, dtype=np.float64)
    mids = (vals[1:] + vals[:-1]) / 2  # exact ties of round-to-nearest
    lo, hi = math.log2(F.info(fmt).min_subnormal) - 3, math.log2(F.info(fmt).max) + 3
    mag = 2.0 ** rng.uniform(lo, hi, n)
    parts = [
        mag * rng.choice([-1, 1], n),
        mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), vals,
        rng.uniform(-1, 1, 20000) * F.info(fmt).min_normal,  # the subnormal range
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38],
    ]
    with np.errstate(over="ignore"):  # values beyond float32 become inf on purpose
        return np.concatenate([np.asarray(p, np.float64) for p in parts]).astype(np.float32)


# ----------------------------------------------------------------------------- scalar formats
@pytest.mark.parametrize("fmt", F.FORMATS)
def test_decode_every_code_bit_exact(fmt):
    codes = np.arange(2 ** F.info(fmt).bits, dtype=np.uint8)
    ours = F.decode(codes, fmt)
    ref = codes.view(ML[fmt]).astype(np.float32)
    assert ours.dtype == np.float32
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    finite = ~np.isnan(ref)
    assert np.array_equal(ours[finite].view(np.uint32), ref[finite].view(np.uint32))  # +-0 too


@pytest.mark.parametrize("fmt", F.FORMATS)
def test_encode_every_value_bit_exact(fmt):
    codes = np.arange(2 ** F.info(fmt).bits, dtype=np.uint8)
    vals = codes.view(ML[fmt]).astype(np.float32)
    keep = ~np.isnan(vals)
    assert np.array_equal(F.encode(vals[keep], fmt, overflow="nan"), codes[keep])  # keeps inf


@pytest.mark.parametrize("fmt", F.FORMATS)
def test_quantize_matches_ml_dtypes_nan_mode(fmt):
    x = random_values(fmt, 1_000_000)
    ours = F.quantize(x, fmt, overflow="nan")
    ref = x.astype(ML[fmt]).astype(np.float32)
    check = ~np.isnan(x) if fmt in NO_NAN_CODE else np.ones(x.shape, bool)
    assert same(ours[check], ref[check])
    assert np.array_equal(np.signbit(ours[check]), np.signbit(ref[check]))  # -0 stays -0
    enc_keep = check & ~np.isnan(ours) if fmt in NO_NAN_CODE else np.ones(x.shape, bool)
    ours_codes = F.encode(x[enc_keep], fmt, overflow="nan")
    ref_codes = x[enc_keep].astype(ML[fmt]).view(np.uint8)
    nan_ref = np.isnan(ref[enc_keep])
    assert np.array_equal(ours_codes[~nan_ref], ref_codes[~nan_ref])


@pytest.mark.parametrize("fmt", NO_NAN_CODE)
def test_nan_stays_nan_where_ml_dtypes_gives_zero(fmt):
    x = np.array([np.nan, 1.0], np.float32)
    assert np.isnan(F.quantize(x, fmt)[0]) and np.isnan(F.quantize(x, fmt, overflow="nan")[0])
    assert x.astype(ML[fmt]).astype(np.float32)[0] == 0  # the silent behaviour we avoid
    with pytest.raises(ValueError, match="NaN"):
        F.encode(x, fmt)


def test_quantize_float64_input_rounds_once():
    x = np.random.default_rng(3).standard_normal(300_000) * 10.0 ** np.random.default_rng(4) \
        .integers(-8, 8, 300_000)
    for fmt in F.FORMATS:
        assert same(F.quantize(x, fmt, overflow="nan"), x.astype(ML[fmt]).astype(np.float32))
    # Just above and below each midpoint between neighbours, by less than float32 resolves:
    # rounding to nearest picks the upper and the lower neighbour. Casting to float32 first
    # would land on the midpoint itself and round the tie to the even code instead.
    for fmt in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"):
        vals = np.array([v for v in F.info(fmt).values if v > 0])
        lo, hi = vals[:-1], vals[1:]
        mid = (lo + hi) / 2
        above, below = mid * (1 + 2.0 ** -40), mid * (1 - 2.0 ** -40)
        assert np.array_equal(np.float64(np.float32(above)), mid)  # float32 cannot tell them
        assert np.array_equal(F.quantize(above, fmt), hi.astype(np.float32)), fmt
        assert np.array_equal(F.quantize(below, fmt), lo.astype(np.float32)), fmt
        assert np.array_equal(F.quantize(-above, fmt), -hi.astype(np.float32)), fmt


def test_scalars_and_zero_dim_inputs():
    # a Python float, numpy scalars, 0-d arrays and 0-d tensors are one value each
    expect = F.quantize(np.array([3.3], np.float32), "e4m3")[0]
    for x in (3.3, np.float32(3.3), np.float64(3.3), np.array(3.3, np.float32),
              torch.tensor(3.3)):
        q = F.quantize(x, "e4m3")
        assert q.shape == () and float(q) == expect == 3.25
    assert float(F.quantize(3.0, "e4m3")) == 3.0
    assert int(F.encode(3.0, "e4m3")) == 0x44 and int(F.encode(torch.tensor(1.0), "e8m0")) == 127
    deq, scale = F.tensor_quantize(3.0)
    assert deq.shape == () and float(deq) == 3.0 and scale == pytest.approx(448 / 3)
    assert F.quant_stats(500.0, "e4m3").fraction_clipped == 1.0
    assert float(F.DelayedScaling().quantize(np.float32(3.0))[0]) == 3.0


def test_decode_range_is_checked_before_narrowing():
    # 2**32 + 0x38 must not wrap around to code 0x38 (the value 1.0) in an int32 conversion
    for codes in (np.array([2 ** 32 + 0x38]), np.array([2 ** 40], np.uint64),
                  torch.tensor([2 ** 32 + 0x38])):
        with pytest.raises(ValueError, match=r"\[0, 256\)"):
            F.decode(codes, "e4m3")
    assert float(F.decode(np.array([0x38], np.uint64), "e4m3")[0]) == 1.0


def test_e4m3_saturate_matches_torch_cast():
    # torch saturates E4M3 casts, even +-inf, to +-448 (notes/toolchain.md, checked here)
    x = random_values("e4m3", 1_000_000, seed=1)
    t = torch.from_numpy(x)
    ref = t.to(torch.float8_e4m3fn).float()
    ours = F.quantize(t, "e4m3", overflow="saturate")
    assert isinstance(ours, torch.Tensor) and ours.dtype == torch.float32
    assert same(ours.numpy(), ref.numpy())


def test_e5m2_nan_mode_matches_torch_and_saturate_clamps():
    x = random_values("e5m2", 1_000_000, seed=2)
    t = torch.from_numpy(x)
    ref = t.to(torch.float8_e5m2).float().numpy()  # torch overflows E5M2 to inf
    assert same(F.quantize(t, "e5m2", overflow="nan").numpy(), ref)
    sat = F.quantize(t, "e5m2", overflow="saturate").numpy()
    over = np.isinf(ref)
    assert same(sat[~over], ref[~over])
    assert np.array_equal(sat[over], np.sign(ref[over]) * 57344.0)  # OFP8: E5M2 max 57344


def test_e8m0_against_torch():
    x = np.abs(random_values("e8m0", 200_000, seed=3))
    x = x[~np.isnan(x)]
    t = torch.from_numpy(x)
    ref = t.to(torch.float8_e8m0fnu).float().numpy()
    pos = x > 0  # torch overflows to NaN like overflow="nan", and maps 0 to 2**-127
    assert same(F.quantize(t, "e8m0", overflow="nan").numpy()[pos], ref[pos])
    assert np.all(F.quantize(x[~pos], "e8m0", overflow="saturate") == 2.0 ** -127)
    assert np.all(ref[~pos] == 2.0 ** -127)
    assert np.isnan(F.quantize(np.float32([-1.0]), "e8m0")[0])  # unsigned: no silent abs


@pytest.fixture
def torch_ops(monkeypatch):
    """Make CPU tensors use the torch-operations backend (the one CUDA tensors use)."""
    from companion import array_ops
    monkeypatch.setattr(array_ops, "TORCH_CPU_VIA_NUMPY", False)


def test_torch_backend_agrees_with_numpy(torch_ops):
    from companion import array_ops
    x = random_values("e4m3", 100_000, seed=5)
    t = torch.from_numpy(x)
    for fmt in F.FORMATS:
        for ov in F.OVERFLOWS:
            assert same(F.quantize(x, fmt, overflow=ov), F.quantize(t, fmt, overflow=ov).numpy())
            if fmt not in NO_NAN_CODE:
                assert np.array_equal(F.encode(x, fmt, overflow=ov),
                                      F.encode(t, fmt, overflow=ov).numpy())
        codes = np.arange(2 ** F.info(fmt).bits, dtype=np.uint8)
        assert same(F.decode(codes, fmt), F.decode(torch.from_numpy(codes), fmt).numpy())
    y = outlier_tensor(rows=256, cols=256, seed=6)
    for scheme in F.SCHEMES:
        for kw in ({}, {"role": "weight"}, {"axis": 0}, {"hadamard_seed": 3}):
            d_np, s_np = F.block_quantize(y, scheme, **kw)
            d_t, s_t = F.block_quantize(torch.from_numpy(y), scheme, **kw)
            assert isinstance(d_t, torch.Tensor) and not array_ops.TORCH_CPU_VIA_NUMPY
            if "hadamard_seed" in kw:
                # the two back ends rotate with different summation orders, so a few values
                # land on the other side of a rounding boundary: one grid step apart at most
                diff = np.abs(d_t.numpy() - d_np)
                assert np.mean(diff > 1e-6) < 0.05 and diff.max() < 2e-3
                assert F.relative_error(d_np, d_t.numpy()) < 2e-3
                continue
            assert np.allclose(d_t.numpy(), d_np, rtol=0, atol=1e-6 if kw else 0)
            assert np.array_equal(s_t.numpy(), s_np)
    assert F.quant_stats(t[:4096], "mxfp4") == F.quant_stats(x[:4096], "mxfp4")


def test_torch_cpu_tensors_share_memory_and_keep_type():
    t = torch.randn(4, 64)
    q = F.quantize(t, "e4m3")
    assert isinstance(q, torch.Tensor) and q.dtype == torch.float32
    d, s = F.block_quantize(t.to(torch.bfloat16), "mxfp4")
    assert isinstance(d, torch.Tensor) and isinstance(s, torch.Tensor) and d.shape == t.shape


def test_info_matches_the_specs():
    # OCP OFP8 rev 1.0 table 1 and OCP MX v1.0 tables for FP6/FP4/E8M0
    expect = {"e4m3": (448, 2 ** -6, 2 ** -9), "e5m2": (57344, 2 ** -14, 2 ** -16),
              "e3m2": (28, 0.25, 0.0625), "e2m3": (7.5, 1.0, 0.125), "e2m1": (6, 1.0, 0.5),
              "e8m0": (2.0 ** 127, 2.0 ** -127, 2.0 ** -127)}
    for fmt, (fmax, min_normal, min_sub) in expect.items():
        i = F.info(fmt)
        assert (i.max, i.min_normal, i.min_subnormal) == (fmax, min_normal, min_sub)
        assert i.max == float(ml_dtypes.finfo(ML[fmt]).max)
    assert F.info("e2m1").values == (-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6)
    assert F.info("e4m3").epsilon == 0.125 and F.info("e5m2").epsilon == 0.25
    assert len(F.info("e4m3").values) == 253  # 256 codes - 2 NaN - one duplicate zero
    assert F.info("e4m3").has_nan and not F.info("e4m3").has_inf and F.info("e5m2").has_inf
    assert F.info("float8_e4m3fn") == F.info("e4m3")  # ml_dtypes names are accepted


def test_stochastic_rounding_is_unbiased_and_on_grid():
    x = np.full(400_000, 1.2, np.float32)  # between E2M1 values 1.0 and 1.5
    q = F.quantize(x, "e2m1", rounding="stochastic", seed=0)
    assert set(np.unique(q)) == {1.0, 1.5}
    assert abs(q.mean() - 1.2) < 0.002  # expected 1.2: P(1.5) = 0.4
    assert np.array_equal(q, F.quantize(x, "e2m1", rounding="stochastic", seed=0))
    qt = F.quantize(torch.from_numpy(x), "e2m1", rounding="stochastic", seed=1)
    assert abs(float(qt.mean()) - 1.2) < 0.002
    grid = F.quantize(np.float32([1.0, 1.5, 0.0]), "e2m1", rounding="stochastic", seed=2)
    assert np.array_equal(grid, [1.0, 1.5, 0.0])  # representable values never move


def test_scalar_errors_are_clear():
    with pytest.raises(ValueError, match="e4m3"):
        F.quantize(np.ones(3, np.float32), "e4m4")
    with pytest.raises(TypeError, match="floating"):
        F.quantize(np.arange(3), "e4m3")
    with pytest.raises(ValueError, match="overflow"):
        F.quantize(np.ones(3, np.float32), "e4m3", overflow="clip")
    with pytest.raises(ValueError, match="rounding"):
        F.quantize(np.ones(3, np.float32), "e4m3", rounding="up")
    with pytest.raises(ValueError, match=r"\[0, 16\)"):
        F.decode(np.array([16]), "e2m1")
    with pytest.raises(TypeError, match="integers"):
        F.decode(np.array([1.0]), "e2m1")
    x = np.ones(32, np.float32)
    # quant_stats with a scalar format used to pass an unknown rounding on to stochastic rounding
    for scheme in ("e4m3", "mxfp4"):
        with pytest.raises(ValueError, match="nearest, stochastic"):
            F.quant_stats(x, scheme, rounding="up")
    with pytest.raises(TypeError, match="rounding"):
        F.quant_stats(x, "e4m3", overflow="nan")
    with pytest.raises(ValueError, match="rounding"):
        F.tensor_quantize(x, rounding="up")
    with pytest.raises(ValueError, match="rounding"):
        F.DelayedScaling().quantize(x, rounding="down")
    with pytest.raises(ValueError, match="floor, up"):
        F.block_quantize(x, "mxfp8_e4m3", scale_rule="ceil")
    with pytest.raises(ValueError, match="MX schemes"):
        F.block_quantize(np.ones(16, np.float32), "nvfp4", scale_rule="up")


# ----------------------------------------------------------------------------- references
def _nearest_even(v, grid):
    """Round |v| to the nearest of ``grid`` (positive values in code order), ties to the even
    code: the code's last bit is the mantissa's, so round-half-to-even picks the even index."""
    d = np.abs(grid - abs(v))
    best = np.flatnonzero(d == d.min())
    return math.copysign(grid[best[0] if best[0] % 2 == 0 else best[-1]], v)


def _positive_grid(fmt):
    codes = np.arange(2 ** (F.info(fmt).bits - 1), dtype=np.uint8)
    g = codes.view(ML[fmt]).astype(np.float64)
    return g[np.isfinite(g)]


def mx_reference(x, elem):
    """OCP MX v1.0 section 6.3, one block of 32 at a time along the last axis."""
    grid, emax = _positive_grid(elem), F.info(elem).emax
    out, scales = np.empty_like(x, np.float64), []
    flat = x.reshape(-1, 32).astype(np.float64)
    for b, block in enumerate(flat):
        amax = np.abs(block).max()
        if amax == 0:
            shared = -127  # convention (microxcaling): smallest E8M0 scale for a zero block
        else:
            shared = max(-127, math.frexp(amax)[1] - 1 - emax)  # floor(log2 amax) - emax
        scale = 2.0 ** shared
        scales.append(scale)
        out.reshape(-1, 32)[b] = [_nearest_even(min(abs(v) / scale, grid[-1]) *
                                                math.copysign(1, v), grid) * scale for v in block]
    return out.astype(np.float32), np.array(scales).reshape(*x.shape[:-1], -1)


def outlier_tensor(rows=16, cols=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[rng.random(x.shape) < 0.01] *= 1000  # outliers
    x[0, :32] = 0  # an all-zero block
    x[1, 32:64] *= 1e-40  # a block of float32 subnormals: its scale clamps at 2**-127
    x[2, 64:96] = 3e-38
    return x


@pytest.mark.parametrize("scheme", ["mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3",
                                    "mxfp8_e5m2"])
def test_mx_matches_spec_reference(scheme):
    elem = {"mxfp4": "e2m1", "mxfp6_e2m3": "e2m3", "mxfp6_e3m2": "e3m2",
            "mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2"}[scheme]
    x = outlier_tensor()
    deq, scales = F.block_quantize(x, scheme)
    ref, ref_scales = mx_reference(x, elem)
    assert deq.shape == x.shape and scales.shape == (16, 8)
    assert np.array_equal(scales, ref_scales)
    assert np.array_equal(deq.view(np.uint32), ref.view(np.uint32))


def test_mx_axis_and_padding():
    x = outlier_tensor(rows=64, cols=40, seed=1)
    deq0, s0 = F.block_quantize(x, "mxfp4", axis=0)
    ref, ref_s = mx_reference(np.ascontiguousarray(x.T), "e2m1")
    assert np.array_equal(deq0, ref.T) and np.array_equal(s0, ref_s.T)
    with pytest.raises(ValueError, match="pad=True"):
        F.block_quantize(x, "mxfp4")  # 40 is not a multiple of 32
    deq, s = F.block_quantize(x, "mxfp4", pad=True)
    padded = np.pad(x, [(0, 0), (0, 24)])
    ref_p, ref_ps = mx_reference(padded, "e2m1")
    assert deq.shape == x.shape and np.array_equal(deq, ref_p[:, :40])
    assert np.array_equal(s, ref_ps)


def test_mx_nonfinite_block_is_nan():
    x = np.ones((2, 32), np.float32)
    x[0, 3] = np.inf
    deq, s = F.block_quantize(x, "mxfp8_e4m3")
    assert np.isnan(deq[0]).all() and np.isnan(s[0, 0]) and np.all(deq[1] == 1)


def nvfp4_reference(x, tile=(1, 16)):
    """NVFP4 from TransformerEngine's docs and reference quantizer, block by block, float32:
    s_global = 448*6/amax(x); block decode scale = E4M3(amax_b * (s_global * (1/6)));
    q = E2M1(clamp(x / (scale_b / s_global), +-6)); value = q * scale_b / s_global."""
    f32 = np.float32
    g_enc = min(f32(448.0 * 6.0) / np.abs(x).max(), f32(np.finfo(np.float32).max))
    g_dec = f32(1.0) / g_enc
    out = np.empty_like(x)
    br, bc = tile
    scales = np.empty((x.shape[0] // br, x.shape[1] // bc), np.float32)
    for i in range(0, x.shape[0], br):
        for j in range(0, x.shape[1], bc):
            blk = x[i:i + br, j:j + bc]
            dec = min(np.abs(blk).max() * (g_enc * f32(1.0 / 6.0)), f32(448.0))
            dec = f32(np.float32(dec).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
            with np.errstate(divide="ignore"):  # a flushed scale: 1/0 = inf, then capped
                enc = min(f32(1.0) / (dec * g_dec), f32(np.finfo(np.float32).max))
            q = np.clip(blk * enc, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
            out[i:i + br, j:j + bc] = q * dec * g_dec
            scales[i // br, j // bc] = dec
    return out, scales


@pytest.mark.parametrize("role,tile", [("activation", (1, 16)), ("weight", (16, 16))])
def test_nvfp4_matches_reference(role, tile):
    x = outlier_tensor(rows=32, cols=128, seed=2)
    x[5, :16] *= 1e-6  # a block far below the tensor amax: its E4M3 scale flushes
    deq, s = F.block_quantize(x, "nvfp4", role=role)
    ref, ref_s = nvfp4_reference(x, tile)
    assert np.array_equal(s, ref_s)
    assert np.array_equal(deq, ref)
    assert math.isclose(F.nvfp4_global_scale(x), 448 * 6 / np.abs(x).max(), rel_tol=1e-6)


def deepseek_reference(x, tile):
    """DeepSeek-V3 kernel.py act_quant: s = amax/448, y = e4m3(x/s) (saturating), x ~ y*s."""
    out = np.empty_like(x)
    br, bc = tile
    for i in range(0, x.shape[0], br):
        for j in range(0, x.shape[1], bc):
            blk = x[i:i + br, j:j + bc]
            s = np.float32(np.abs(blk).max()) / np.float32(448.0)
            s = s if s > 0 else np.float32(1.0)
            y = np.clip(blk / s, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
            out[i:i + br, j:j + bc] = y * s
    return out


@pytest.mark.parametrize("role,tile", [("activation", (1, 128)), ("weight", (128, 128))])
def test_deepseek_matches_reference(role, tile):
    x = outlier_tensor(rows=256, cols=256, seed=3)
    deq, s = F.block_quantize(x, "deepseek_fp8", role=role)
    assert np.array_equal(deq, deepseek_reference(x, tile))
    assert s.shape == (256 // tile[0], 256 // tile[1])


def test_per_tensor_current_and_delayed_scaling():
    x = outlier_tensor(seed=4)
    deq, scale = F.tensor_quantize(x, "e4m3")
    ref_scale = np.float32(448.0) / np.abs(x).max()  # TE: scale = fp8 max / amax
    assert scale == ref_scale
    ref = np.clip(x * ref_scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.array_equal(deq, ref * (np.float32(1.0) / ref_scale))
    assert np.array_equal(F.block_quantize(x, "fp8_e4m3_tensor")[0], deq)
    state = F.DelayedScaling("e4m3", history_len=2)
    d1, state = state.quantize(x)  # no history yet: scale 1
    assert np.array_equal(d1, F.quantize(x, "e4m3")) and state.history == (np.abs(x).max(),)
    d2, state = state.quantize(x * 2)  # scale from the previous amax: 2x values clip
    assert state.scale == 448 / (2 * np.abs(x).max())
    assert F.quant_stats(x * 2, "fp8_e4m3_tensor").fraction_clipped == 0
    assert np.abs(d2).max() == pytest.approx(np.abs(x).max(), rel=1e-6)  # saturated
    _, state = state.quantize(x)
    assert len(state.history) == 2
    assert F.DelayedScaling(algo="most_recent", history=(4.0, 1.0)).scale == 448.0


def test_delayed_scaling_defaults_are_transformer_engines():
    # transformer_engine/common/recipe/__init__.py, class DelayedScaling:
    # amax_history_len: int = 1024, amax_compute_algo = "max"
    state = F.DelayedScaling()
    assert (state.history_len, state.algo) == (1024, "max")


def mx_up_reference(x, elem):
    """TransformerEngine's MX scale: 2^ceil(log2(amax * fl32(1/max))) (ptx.cuh float_to_e8m0,
    round toward +inf), one block of 32 along the last axis, elements rounded and saturated."""
    grid, fmax = _positive_grid(elem), F.info(elem).max
    out, flat = np.empty(x.size, np.float64).reshape(-1, 32), x.reshape(-1, 32)
    for b, block in enumerate(flat.astype(np.float64)):
        r = float(np.float32(np.abs(block).max()) * np.float32(1.0 / fmax))
        e = -127 if r <= 2.0 ** -127 else min(127, max(-127, math.ceil(math.log2(r))))
        scale = 2.0 ** e
        out[b] = [_nearest_even(min(abs(v) / scale, grid[-1]) * math.copysign(1, v), grid)
                  * scale for v in block]
    return out.reshape(x.shape).astype(np.float32)


@pytest.mark.parametrize("scheme,elem", [("mxfp8_e4m3", "e4m3"), ("mxfp4", "e2m1")])
def test_mx_round_up_scale_rule(scheme, elem):
    x = outlier_tensor(seed=7)
    deq, _ = F.block_quantize(x, scheme, scale_rule="up")
    assert np.array_equal(deq, mx_up_reference(x, elem))
    assert F.quant_stats(x, scheme, scale_rule="up").fraction_clipped == 0  # never saturates


def test_mx_floor_saturates_480_and_round_up_keeps_it():
    # 480 needs exponent 8 with mantissa 1.875: beyond E4M3's 448. The OCP floor rule gives the
    # block the scale 2^(8 - 8) = 1 and clips 480 to 448; TE's rule takes 2^ceil(log2(480/448))
    # = 2 and stores 240.
    x = np.zeros(32, np.float32)
    x[:2] = 480.0, 1.0
    floor, s_floor = F.block_quantize(x, "mxfp8_e4m3", scale_rule="floor")
    up, s_up = F.block_quantize(x, "mxfp8_e4m3", scale_rule="up")
    assert (floor[0], s_floor[0]) == (448.0, 1.0) and (up[0], s_up[0]) == (480.0, 2.0)


def test_imports_run_one_way():
    # minifloat <- blockscale <- formats_torch, and formats re-exports them: no cycle
    import ast
    import pathlib
    root = pathlib.Path(F.__file__).parent

    def imported(name):
        tree = ast.parse((root / f"{name}.py").read_text())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module.split(".")[-1])
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                out.update(a.name.split(".")[-1] for a in node.names)
        return out

    lib = {"formats", "minifloat", "blockscale", "formats_torch"}
    assert imported("minifloat") & lib == set()
    assert imported("blockscale") & lib == {"minifloat"}
    assert imported("formats_torch") & lib == {"minifloat", "blockscale"}


def test_hadamard_is_orthogonal_and_helps_mxfp4_with_outliers():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = F.random_hadamard(x, seed=1)
    assert np.allclose(np.linalg.norm(y, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)
    assert np.allclose(F.random_hadamard(y, seed=1, inverse=True), x, atol=1e-5)
    # block_quantize with a Hadamard seed is rotate, quantize, rotate back
    z = rng.standard_normal((64, 256)).astype(np.float32)
    z[rng.random(z.shape) < 0.01] *= 20  # sparse outliers
    manual = F.random_hadamard(F.block_quantize(F.random_hadamard(z, 0), "mxfp4")[0], 0,
                               inverse=True)
    assert np.array_equal(F.block_quantize(z, "mxfp4", hadamard_seed=0)[0], manual)
    # spreading the outliers over 16 values helps MXFP4's power-of-two scales (measured here:
    # about +3.5 dB); it does not help NVFP4 on this data, whose E4M3 scales fit each block
    gain = F.quant_stats(z, "mxfp4", hadamard_seed=0).sqnr_db - F.quant_stats(z, "mxfp4").sqnr_db
    assert gain > 2.0


def test_error_metrics():
    assert F.sqnr_db([1.0, 1.0], [1.0, 0.9]) == pytest.approx(10 * math.log10(2 / 0.01))
    assert F.relative_error([1.0, 1.0], [1.0, 0.9]) == pytest.approx(math.sqrt(0.01 / 2))
    assert F.sqnr_db([1.0], [1.0]) == math.inf
    assert F.fraction_flushed([1.0, 2.0, 0.0, 3.0], [1.0, 0.0, 0.0, 3.0]) == pytest.approx(1 / 3)
    # E4M3 max 448; 464 is the tie between 448 and the missing 480 and rounds to even (448)
    assert F.fraction_clipped(np.float32([464.0, 1.0]), "e4m3") == 0.0
    assert F.fraction_clipped(np.float32([465.0, 1.0]), "e4m3") == 0.5
    # E2M1 max 6: 7 ties between 6 and 8 and rounds to 8's even mantissa, so it clips
    assert F.fraction_clipped(np.float32([7.0, 1.0]), "e2m1") == 0.5
    with pytest.raises(ValueError, match="finite"):
        F.sqnr_db([np.nan], [1.0])
    with pytest.raises(ValueError, match="shape"):
        F.relative_error([1.0, 2.0], [1.0])


def test_block_errors_are_clear():
    x = np.ones((4, 32), np.float32)
    with pytest.raises(ValueError, match="mxfp4"):
        F.block_quantize(x, "mxfp5")
    with pytest.raises(TypeError, match="floating"):
        F.block_quantize(np.ones((4, 32), np.int32), "mxfp4")
    with pytest.raises(ValueError, match="pad=True"):
        F.block_quantize(np.ones((4, 33), np.float32), "nvfp4")
    with pytest.raises(ValueError, match="2 dimensions"):
        F.block_quantize(np.ones(128, np.float32), "deepseek_fp8", role="weight")
    with pytest.raises(ValueError, match="role"):
        F.block_quantize(x, "nvfp4", role="gradient")
    with pytest.raises(ValueError, match="axis"):
        F.block_quantize(x, "mxfp4", axis=2)


# bad arguments: a ValueError or TypeError naming the parameter, never an OverflowError,
# numpy's own message or a silent NaN
@pytest.mark.parametrize("call,exc,match", [
    (lambda x: F.tensor_quantize(x, margin=2000), ValueError, "margin must be <= 17"),
    (lambda x: F.tensor_quantize(x, margin=-2000), ValueError, "margin must be >= -17"),
    (lambda x: F.tensor_quantize(x, "e2m1", margin=4), ValueError, "margin must be <= 3"),
    (lambda x: F.tensor_quantize(x, margin=1.5), TypeError, "margin must be an integer"),
    (lambda x: F.tensor_quantize(x, margin=True), TypeError, "margin"),
    (lambda x: F.tensor_quantize(x, amax=1e300), ValueError, "amax must be <="),
    (lambda x: F.DelayedScaling(margin=5000, history=(1.0,)).scale, ValueError, "margin"),
    (lambda x: F.DelayedScaling(margin=-5000, history=(1.0,)).scale, ValueError, "margin"),
    (lambda x: F.DelayedScaling("e5m2", margin=32), ValueError, "margin must be <= 31"),
])
def test_margin_is_bounded_by_the_formats_span(call, exc, match):
    with pytest.raises(exc, match=match):
        call(np.ones(32, np.float32))


def test_margin_inside_the_bound_works_and_a_scale_underflow_is_refused():
    x = outlier_tensor(seed=4)
    amax = float(np.abs(x).max())
    for fmt in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"):
        limit = F.margin_limit(fmt)
        assert limit == math.floor(math.log2(F.info(fmt).max / F.info(fmt).min_subnormal))
        for m in (-limit, -1, 0, 2, limit):
            deq, scale = F.tensor_quantize(x, fmt, margin=m)
            assert np.isfinite(deq).all()
            assert scale == pytest.approx(F.info(fmt).max / amax / 2.0 ** m, rel=1e-6)
    assert [F.margin_limit(f) for f in ("e4m3", "e5m2", "e2m1")] == [17, 31, 3]
    assert F.DelayedScaling(margin=2, history=(4.0,)).scale == 448 / 4 / 4
    # a huge amax with a large margin would need a scale below float32's normals: refused,
    # naming margin and the largest margin that works
    big = np.float32([3e38, 1.0])
    for call in (lambda: F.tensor_quantize(big, margin=17),
                 lambda: F.tensor_quantize(x, amax=3e38, margin=17),
                 lambda: F.DelayedScaling(margin=17, history=(3e38,)).scale,
                 lambda: F.tensor_quantize(torch.from_numpy(big), margin=17)):
        with pytest.raises(ValueError, match=r"margin=17 .*margin <= 6"):
            call()
    assert np.isfinite(F.tensor_quantize(big, margin=6)[0]).all()


@pytest.mark.parametrize("seed,exc,match", [
    (-1, ValueError, "seed must be >= 0"),
    (2.5, TypeError, "seed must be an integer"),
    ("a", TypeError, "seed must be an integer"),
    (True, TypeError, "seed must be an integer"),
    (2 ** 64, ValueError, "seed must be <="),
])
def test_stochastic_rounding_seed_is_a_nonnegative_integer(seed, exc, match):
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    calls = [
        lambda: F.quantize(x, "e2m1", rounding="stochastic", seed=seed),
        lambda: F.encode(x, "e2m1", rounding="stochastic", seed=seed),
        lambda: F.block_quantize(x, "mxfp4", rounding="stochastic", seed=seed),
        lambda: F.tensor_quantize(x, rounding="stochastic", seed=seed),
        lambda: F.DelayedScaling().quantize(x, rounding="stochastic", seed=seed),
        lambda: F.quant_stats(x, "e2m1", rounding="stochastic", seed=seed),
        lambda: F.quant_stats(x, "nvfp4", rounding="stochastic", seed=seed),
        lambda: F.block_quantize(torch.from_numpy(x), "nvfp4", rounding="stochastic",
                                 seed=seed),
    ]
    for call in calls:
        with pytest.raises(exc, match=match):
            call()


def test_valid_seeds_still_work():
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    a = F.quantize(x, "e2m1", rounding="stochastic", seed=3)
    assert np.array_equal(a, F.quantize(x, "e2m1", rounding="stochastic", seed=np.int64(3)))
    assert np.array_equal(a, F.quantize(x, "e2m1", rounding="stochastic", seed=3.0))
    assert F.quantize(x, "e2m1", rounding="stochastic", seed=F.MAX_SEED).shape == x.shape
    assert np.array_equal(F.block_quantize(x, "mxfp4", rounding="stochastic", seed=0)[0],
                          F.block_quantize(x, "mxfp4", rounding="stochastic", seed=0)[0])


def test_delayed_scaling_refuses_e8m0_and_bad_history():
    for call in (lambda: F.DelayedScaling(fmt="e8m0"),
                 lambda: F.DelayedScaling(fmt="float8_e8m0fnu"),
                 lambda: F.tensor_quantize(np.ones(4, np.float32), "e8m0")):
        with pytest.raises(ValueError, match="fmt='e8m0' is a scale format"):
            call()
    with pytest.raises(TypeError, match=r"history\[0\] must be a number; got str"):
        F.DelayedScaling(history=("a",))
    with pytest.raises(TypeError, match=r"history\[1\] must be a number; got bool"):
        F.DelayedScaling(history=(1.0, True))
    with pytest.raises(ValueError, match=r"history\[0\] must be >= 0"):
        F.DelayedScaling(history=(-1.0,))
    with pytest.raises(ValueError, match=r"history\[0\]"):
        F.DelayedScaling(history=(-math.inf,))
    with pytest.raises(TypeError, match="history must be a tuple"):
        F.DelayedScaling(history="abc")
    # inf and NaN are amaxes of non-finite tensors, recorded by quantize and skipped
    state = F.DelayedScaling(history=[np.float32(2.0), math.nan, math.inf])
    assert state.history[0] == 2.0 and isinstance(state.history, tuple)
    assert state.amax == 2.0 and state.scale == 224.0
    _, nxt = state.quantize(np.float32([1.0, np.nan]))
    assert math.isnan(nxt.history[-1]) and nxt.amax == 2.0


def test_hadamard_arguments_are_checked():
    v = np.ones(16, np.float32)
    with pytest.raises(ValueError, match="axis must be <= 0"):
        F.random_hadamard(v, 1, axis=3)
    with pytest.raises(ValueError, match="axis must be >= -1"):
        F.random_hadamard(v, 1, axis=-2)
    with pytest.raises(TypeError, match="axis must be an integer"):
        F.random_hadamard(v, 1, axis="a")
    with pytest.raises(TypeError, match="inverse must be True or False"):
        F.random_hadamard(v, 1, inverse="x")
    with pytest.raises(ValueError, match="size must be <= 4096"):
        F.random_hadamard(v, 1, size=2 ** 13)
    with pytest.raises(ValueError, match="size must be a power of two"):
        F.random_hadamard(v, 1, size=12)
    with pytest.raises(ValueError, match="at least one dimension"):
        F.random_hadamard(np.float32(1.0), 1)
    x = np.ones((4, 32), np.float32)
    assert np.allclose(F.random_hadamard(F.random_hadamard(x, 2, axis=-2, size=4), 2,
                                         axis=0, size=4, inverse=True), x, atol=1e-6)
    for pad in ("yes", 1, None):
        with pytest.raises(TypeError, match="pad must be True or False"):
            F.block_quantize(x, "mxfp4", pad=pad)
    with pytest.raises(TypeError, match="pad must be True or False"):
        F.quant_stats(x, "mxfp4", pad="no")
    with pytest.raises(ValueError, match="hadamard_size must be <= 4096"):
        F.block_quantize(x, "nvfp4", hadamard_seed=1, hadamard_size=2 ** 20, pad=True)
    with pytest.raises(ValueError, match="hadamard_size must be a power of two"):
        F.block_quantize(x, "nvfp4", hadamard_seed=1, hadamard_size=24, pad=True)
    with pytest.raises(ValueError, match=r"hadamard_size=64 must divide x.shape\[1\]=32"):
        F.block_quantize(x, "nvfp4", hadamard_seed=1, hadamard_size=64)
    with pytest.raises(ValueError, match="hadamard_seed must be >= 0"):
        F.block_quantize(x, "nvfp4", hadamard_seed=-1)
    with pytest.raises(TypeError, match="hadamard_seed must be an integer"):
        F.block_quantize(x, "nvfp4", hadamard_seed="a")
    # a padded rotation block still works and returns x's shape
    assert F.block_quantize(x, "nvfp4", hadamard_seed=1, hadamard_size=64, pad=True)[0].shape \
        == x.shape


def test_empty_input():
    # block schemes: no blocks, so empty values and scales; a per-tensor scale is undefined
    for scheme in ("mxfp4", "nvfp4", "deepseek_fp8"):
        deq, scales = F.block_quantize(np.zeros((2, 0), np.float32), scheme)
        assert deq.shape == (2, 0) and scales.size == 0
    deq, scales = F.block_quantize(np.zeros((0, 16), np.float32), "nvfp4", role="weight")
    assert deq.shape == (0, 16) and scales.size == 0
    deq, _ = F.block_quantize(torch.zeros((0, 16)), "nvfp4")
    assert tuple(deq.shape) == (0, 16)
    empty = np.zeros((2, 0), np.float32)
    for call in (lambda: F.block_quantize(empty, "fp8_e4m3_tensor"),
                 lambda: F.nvfp4_global_scale(empty),
                 lambda: F.nvfp4_global_scale(np.zeros(0, np.float32)),
                 lambda: F.tensor_quantize(empty),
                 lambda: F.tensor_quantize(empty, amax=1.0),
                 lambda: F.DelayedScaling().quantize(empty)):
        with pytest.raises(ValueError, match=r"x is empty \(shape"):
            call()


def test_quant_stats_accepts_the_format_aliases_quantize_accepts():
    x = outlier_tensor(seed=5)
    for alias, name in (("float8_e4m3fn", "e4m3"), ("fp8_e5m2", "e5m2"),
                        ("float4_e2m1fn", "e2m1")):
        assert np.array_equal(F.quantize(x, alias), F.quantize(x, name))
        assert F.quant_stats(x, alias) == F.quant_stats(x, name)
        assert F.fraction_clipped(x * 100, alias) == F.fraction_clipped(x * 100, name)
    with pytest.raises(ValueError, match="unknown scheme 'float8_e4m3'.*float8_e4m3fn"):
        F.quant_stats(x, "float8_e4m3")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu():
    x = outlier_tensor(rows=64, cols=256)
    for scheme in F.SCHEMES:
        cpu, _ = F.block_quantize(torch.from_numpy(x), scheme)
        gpu, _ = F.block_quantize(torch.from_numpy(x).cuda(), scheme)
        assert gpu.is_cuda and torch.equal(gpu.cpu(), cpu)
    v = torch.from_numpy(random_values("e4m3", 100_000)).cuda()
    assert same(F.quantize(v, "e4m3").cpu().numpy(), v.cpu().to(torch.float8_e4m3fn).float())


def test_deepseek_tile_with_subnormal_amax_flushes_instead_of_nan():
    # amax / 448 underflows to 0 for a float32 subnormal amax (3e-45 < 448 * 2**-149): the
    # tile must come back finite (values this small flush to zero in E4M3), never NaN.
    tile = np.zeros((1, 128), dtype=np.float32)
    tile[0, 0] = 3e-45
    deq, scales = F.block_quantize(tile, "deepseek_fp8")
    assert np.all(np.isfinite(deq)) and np.all(deq == 0) and np.all(np.isfinite(scales))
    t = torch.from_numpy(tile)
    deq_t, _ = F.block_quantize(t, "deepseek_fp8")
    assert not torch.isnan(deq_t).any()


def test_cache_sized_chunks_give_the_same_result(monkeypatch):
    # large inputs are quantized chunk by chunk (for speed); every block is independent, and
    # NVFP4's per-tensor scale comes from the whole tensor
    from companion import blockscale
    x = outlier_tensor(rows=1024, cols=512, seed=9)
    x[5, 7] = 3e4  # the global amax sits in one chunk only
    monkeypatch.setattr(blockscale, "_CHUNK_VALUES", 1 << 12)  # many chunks of this input
    chunked = {s: F.block_quantize(x, s) for s in ("mxfp4", "nvfp4", "mxfp8_e4m3",
                                                     "deepseek_fp8")}
    chunked["up"] = F.block_quantize(x, "mxfp8_e4m3", scale_rule="up")
    monkeypatch.setattr(blockscale, "_CHUNK_VALUES", 1 << 40)
    for s, (d, sc) in chunked.items():
        ref = F.block_quantize(x, "mxfp8_e4m3", scale_rule="up") if s == "up" else \
            F.block_quantize(x, s)
        assert np.array_equal(d, ref[0]) and np.array_equal(sc, ref[1]), s
    y = x.copy()
    y[900, 3] = np.nan
    monkeypatch.setattr(blockscale, "_CHUNK_VALUES", 1 << 12)
    assert np.isnan(F.block_quantize(y, "nvfp4")[0]).all()  # NaN anywhere: all NaN
