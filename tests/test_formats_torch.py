"""Emulated low-precision GEMMs: qmatmul, limited accumulation and QLinear recipes.

Sources: DeepSeek-V3 (arXiv:2412.19437, section 3.3) for limited FP8 accumulation promoted every
N_C = 128 elements and for 1x128 / 128x128 scaling; TransformerEngine's Format.HYBRID (E4M3
forward, E5M2 gradients), DelayedScaling defaults (history 1024, "max"), MXFP8 scale rule
(ptx.cuh ``float_to_e8m0``: round toward +inf) and NVFP4 recipe (16x16 weight tiles, stochastic
rounding of gradients, random Hadamard transform on Wgrad inputs); NVIDIA's NVFP4 pretraining
paper (arXiv:2509.25149) for about 16% of the linear layers kept in BF16.
"""
import pytest

torch = pytest.importorskip("torch")

from companion import formats as F  # noqa: E402
from companion import formats_torch as FT  # noqa: E402


def test_lazy_reexport():
    assert F.qmatmul is FT.qmatmul and F.QLinear is FT.QLinear and "nvfp4" in F.RECIPES


def test_qmatmul_quantizes_along_k():
    torch.manual_seed(0)
    a, b = torch.randn(32, 256), torch.randn(256, 48)
    assert torch.equal(F.qmatmul(a, b, "fp32"), a @ b)
    for scheme in ("mxfp8_e4m3", "mxfp4", "nvfp4", "deepseek_fp8"):
        qa, _ = F.block_quantize(a, scheme, axis=-1, pad=True)
        qb, _ = F.block_quantize(b, scheme, axis=0, role="weight", pad=True)
        assert torch.equal(F.qmatmul(a, b, scheme), qa @ qb)
    err8 = F.relative_error(a @ b, F.qmatmul(a, b, "mxfp8_e4m3"))
    err4 = F.relative_error(a @ b, F.qmatmul(a, b, "mxfp4"))
    assert 0 < err8 < 0.1 < err4 < 0.3  # E4M3 keeps 3 mantissa bits, E2M1 one
    with pytest.raises(ValueError, match="K"):
        F.qmatmul(a, torch.randn(255, 4))
    with pytest.raises(ValueError, match="mxfp4"):
        F.qmatmul(a, b, "mxfp3")


def test_limited_accumulation_and_promotion():
    # DeepSeek-V3: ~14-bit accumulation loses accuracy over long K; promoting partial sums to
    # FP32 every 128 elements recovers it. All-positive operands make the error systematic.
    torch.manual_seed(0)
    a, b = torch.rand(16, 4096), torch.rand(4096, 16)
    exact = a.double() @ b.double()
    limited = FT.accumulate_matmul(a, b, "limited")
    promoted = FT.accumulate_matmul(a, b, "limited", promote_every=128)
    err_limited = F.relative_error(exact.numpy(), limited.double().numpy())
    err_promoted = F.relative_error(exact.numpy(), promoted.double().numpy())
    assert err_limited > 1e-3 and err_promoted < err_limited / 10
    with pytest.raises(ValueError, match="promote_every"):
        FT.accumulate_matmul(a, b, "limited", promote_every=100)


def test_qlinear_fp32_is_exact_linear():
    torch.manual_seed(0)
    layer = F.QLinear(64, 32, recipe="fp32")
    x = torch.randn(3, 5, 64, requires_grad=True)
    layer(x).square().sum().backward()
    x2 = x.detach().clone().requires_grad_()
    w2 = layer.weight.detach().clone().requires_grad_()
    b2 = layer.bias.detach().clone().requires_grad_()
    torch.nn.functional.linear(x2, w2, b2).square().sum().backward()
    assert torch.allclose(x.grad, x2.grad, atol=1e-5)
    assert torch.allclose(layer.weight.grad, w2.grad, atol=1e-4)
    assert torch.allclose(layer.bias.grad, b2.grad, atol=1e-4)


def test_fp8_hybrid_recipe_uses_e4m3_forward_and_e5m2_gradients():
    torch.manual_seed(1)
    layer = F.QLinear(64, 32, bias=False, recipe="fp8_current")
    x = torch.randn(40, 64, requires_grad=True)
    y = layer(x)
    qx, _ = F.tensor_quantize(x.detach(), "e4m3")
    qw, _ = F.tensor_quantize(layer.weight.detach(), "e4m3")

    def hopper(a, b):  # the recipe runs on Hopper's accumulator, promoted every 128
        return FT.accumulate_matmul(a, b, "limited", promote_every=128)
    assert torch.equal(y.detach(), hopper(qx, qw.t()))
    gy = torch.randn(40, 32)
    y.backward(gy)
    qg, _ = F.tensor_quantize(gy, "e5m2")
    assert torch.equal(x.grad, hopper(qg, qw))
    assert torch.equal(layer.weight.grad, hopper(qg.t(), qx))


@pytest.mark.parametrize("recipe,bound", [("bf16", 0.01), ("fp8_current", 0.1),
                                          ("fp8_delayed", 0.1), ("fp8_block", 0.1),
                                          ("mxfp8", 0.12), ("mxfp4", 0.35),
                                          ("mxfp4_sr_rht", 0.35), ("nvfp4", 0.3)])
def test_every_recipe_trains_a_step(recipe, bound):
    torch.manual_seed(2)
    layer = F.QLinear(64, 48, recipe=recipe)
    x = torch.randn(4, 10, 64, requires_grad=True)
    y = layer(x)
    y.square().sum().backward()
    ref = torch.nn.functional.linear(x.detach(), layer.weight.detach(), layer.bias.detach())
    assert F.relative_error(ref, y.detach()) < bound
    assert x.grad.shape == x.shape and torch.isfinite(layer.weight.grad).all()


def test_delayed_scaling_history_advances_once_per_step():
    layer = F.QLinear(32, 32, recipe="fp8_delayed")
    for step in range(3):
        layer(torch.randn(8, 32)).sum().backward()
    assert len(layer.q_x.state.history) == 3 and len(layer.q_g.state.history) == 3
    assert layer.q_g.state.fmt == "e5m2"


def test_evaluation_leaves_the_delayed_scaling_history_alone():
    layer = F.QLinear(32, 32, recipe="fp8_delayed")
    layer(torch.randn(8, 32)).sum().backward()
    before = (layer.q_x.state, layer.q_w.state)
    with torch.no_grad():  # measuring the model must not change how it trains
        layer(torch.randn(8, 32) * 100)
    layer.eval()
    layer(torch.randn(8, 32) * 100)  # eval mode, grad enabled: still inference
    assert (layer.q_x.state, layer.q_w.state) == before
    layer.train()
    layer(torch.randn(8, 32)).sum().backward()
    assert len(layer.q_x.state.history) == 2


def _nvfp4_grad(seed, rounding_seed=None):
    torch.manual_seed(0)
    layer = F.QLinear(64, 32, recipe="nvfp4", seed=seed)
    if rounding_seed is not None:
        layer.seed_rounding(rounding_seed)
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    layer(x).square().sum().backward()
    return layer.weight.grad.clone()


def test_stochastic_rounding_repeats_under_a_seed():
    # NVFP4 rounds gradients stochastically: the same seed gives the same gradient bit for bit,
    # another seed another one
    assert torch.equal(_nvfp4_grad(3), _nvfp4_grad(3))
    assert not torch.equal(_nvfp4_grad(3, [7, 0]), _nvfp4_grad(3, [8, 0]))


def test_bad_recipe_name():
    with pytest.raises(ValueError, match="nvfp4"):
        F.QLinear(8, 8, recipe="nvfp5")


def _sequential_limited(a, b, promote_every=None, chunk=32, bits=14):
    """DeepSeek-V3 section 3.3.2 as written: add each K-chunk's products into an accumulator
    truncated to ``bits`` significant bits; every ``promote_every`` elements move it into FP32."""
    total = acc = torch.zeros(a.shape[0], b.shape[1])
    for k0 in range(0, a.shape[1], chunk):
        s = acc + a[:, k0:k0 + chunk] @ b[k0:k0 + chunk]
        acc = (s.view(torch.int32) & ~((1 << (24 - bits)) - 1)).view(torch.float32)
        if promote_every and (k0 + chunk) % promote_every == 0:
            total, acc = total + acc, torch.zeros_like(acc)
    return total + acc


def test_batched_limited_accumulation_equals_the_sequential_rule():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(24, 512, generator=g), torch.randn(512, 40, generator=g)
    for promote in (None, 128):
        assert torch.equal(FT.accumulate_matmul(a, b, "limited", promote),
                           _sequential_limited(a, b, promote))
    a3 = torch.randn(2, 3, 96, generator=g)  # K not a multiple of 128, leading batch axes
    assert torch.equal(FT.accumulate_matmul(a3, b[:96], "limited")[1],
                       _sequential_limited(a3[1], b[:96]))


def test_recipes_as_production_runs_them():
    R = F.RECIPES
    for name in ("fp8_current", "fp8_delayed", "fp8_block"):  # Hopper FP8 recipes
        assert (R[name].accumulate, R[name].promote_every) == ("limited", 128)
        assert F.QLinear(8, 8, recipe=name).accumulate == "limited"
    assert (R["fp8_delayed"].history_len, R["fp8_delayed"].algo) == (1024, "max")
    assert R["mxfp8"].scale_rule == "up" and R["mxfp8"].accumulate == "fp32"
    for name in ("nvfp4", "mxfp4_sr_rht"):
        r = R[name]
        assert r.grad_rounding == "stochastic" and r.wgrad_hadamard and r.bf16_fraction == 0.16
    assert F.block_shape("nvfp4", "weight") == (16, 16)
    assert R["mxfp4"].grad_rounding == "nearest" and not R["mxfp4"].wgrad_hadamard
    # the two MXFP4 recipes differ from NVFP4 only where they should
    a, b = R["mxfp4_sr_rht"], R["nvfp4"]
    assert {k for k in a.__dataclass_fields__ if getattr(a, k) != getattr(b, k)} == \
        {"name", "x", "w", "g"}


def test_mxfp8_recipe_keeps_a_block_maximum_of_480():
    # TE rounds the E8M0 scale up: 480 is stored as 240 x 2. The OCP floor rule would give the
    # block scale 1 and saturate 480 to 448.
    layer = F.QLinear(32, 1, bias=False, recipe="mxfp8")
    with torch.no_grad():
        layer.weight.zero_()
        layer.weight[0, 0] = 1.0
    x = torch.zeros(2, 32)
    x[:, 0], x[:, 1] = 480.0, 1.0
    assert layer(x)[:, 0].tolist() == [480.0, 480.0]
    floor = FT.quantize_operand(x, "mxfp8_e4m3", scale_rule="floor")
    assert floor[0, 0].item() == 448.0


def test_hadamard_signs_persist_across_steps():
    layer = F.QLinear(32, 16, recipe="nvfp4", seed=5)
    for _ in range(3):
        layer(torch.randn(16, 32)).square().sum().backward()
    assert layer.hadamard_seed == 5  # one sign vector for the layer's life (TE, torchao)


def test_recipe_errors_are_clear():
    with pytest.raises(ValueError, match="nvfp4"):
        FT.recipe("nvfp5")
    with pytest.raises(ValueError, match="x"):
        FT.Recipe("bad", "mxfp9", "bf16", "bf16")
    with pytest.raises(ValueError, match="scale_rule"):
        FT.Recipe("bad", "mxfp4", "mxfp4", "mxfp4", scale_rule="ceil")
    with pytest.raises(ValueError, match="grad_rounding"):
        FT.Recipe("bad", "mxfp4", "mxfp4", "mxfp4", grad_rounding="up")
    with pytest.raises(ValueError, match="bf16_fraction"):
        FT.Recipe("bad", "bf16", "bf16", "bf16", bf16_fraction=1.5)
