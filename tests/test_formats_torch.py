"""Emulated low-precision GEMMs: qmatmul, limited accumulation and QLinear recipes.

Sources: DeepSeek-V3 (arXiv:2412.19437, section 3.3) for limited FP8 accumulation promoted every
N_C = 128 elements and for 1x128 / 128x128 scaling; TransformerEngine's Format.HYBRID (E4M3
forward, E5M2 gradients) and NVFP4 recipe (16x16 weight tiles, stochastic rounding of
gradients, random Hadamard transform on Wgrad inputs).
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
    assert torch.equal(y.detach(), qx @ qw.t())
    gy = torch.randn(40, 32)
    y.backward(gy)
    qg, _ = F.tensor_quantize(gy, "e5m2")
    assert torch.equal(x.grad, qg @ qw)
    assert torch.equal(layer.weight.grad, qg.t() @ qx)


@pytest.mark.parametrize("recipe,bound", [("bf16", 0.01), ("fp8_current", 0.1),
                                          ("fp8_delayed", 0.1), ("fp8_block", 0.1),
                                          ("mxfp8", 0.12), ("mxfp4", 0.35), ("nvfp4", 0.3)])
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
