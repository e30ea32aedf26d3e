"""Emulated low-precision GEMMs in torch: ``qmatmul`` and a quantized ``Linear`` layer.

Operands are quantized and dequantized with :mod:`companion.formats` (exact formats, the
recipes' block scaling), then multiplied in float32. This reproduces the numerics of an FP8 or
FP4 GEMM, not its speed. Optionally the accumulation is limited as on Hopper's FP8 tensor
cores: DeepSeek-V3 (arXiv:2412.19437, section 3.3) reports that the accumulator keeps about 14
bits and promotes partial sums to FP32 CUDA-core registers every N_C = 128 elements of K.
Imported lazily by ``companion.formats`` (``formats.qmatmul``), so numpy users never need torch.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from companion import blockscale, checks
from companion import minifloat as _f

PLAIN = ("fp32", "bf16")
ACCUMULATE = ("fp32", "limited")


def quantize_operand(t, scheme: str, axis: int = -1, role: str = "activation",
                     rounding: str = "nearest", hadamard_seed: int | None = None,
                     seed: int | None = None, scale_rule: str = "floor"):
    """Quantize-dequantize a GEMM operand along its reduction ``axis`` (float32 result).
    ``seed`` seeds stochastic rounding's noise (None: fresh entropy, not reproducible);
    ``scale_rule`` is the MX scale rule (ignored by other schemes)."""
    checks.choice("scheme", scheme, PLAIN + blockscale.SCHEMES)
    if scheme == "fp32":
        return t.float()
    if scheme == "bf16":
        return t.to(torch.bfloat16).float()
    deq, _ = blockscale.block_quantize(
        t, scheme, axis=axis, pad=True, role=role, rounding=rounding, seed=seed,
        hadamard_seed=hadamard_seed,
        scale_rule=scale_rule if scheme in blockscale.MX_SCHEMES else "floor")
    return deq


def _truncate(t, bits):
    """Keep ``bits`` significant bits (implicit one included), rounding toward zero."""
    return (t.view(torch.int32) & ~((1 << (24 - bits)) - 1)).view(torch.float32)


def accumulate_matmul(a, b, accumulate: str = "fp32", promote_every: int | None = None,
                      chunk: int = 32, accumulator_bits: int = 14):
    """a @ b of float32 operands with FP32 or limited-precision accumulation.

    ``accumulate="limited"`` adds the products of each ``chunk`` of K (one tensor-core
    instruction's depth) into an accumulator truncated to ``accumulator_bits`` significant bits;
    with ``promote_every`` (a multiple of ``chunk``) the accumulator is added into an FP32 sum
    and cleared at that interval, DeepSeek-V3's fix.
    """
    checks.choice("accumulate", accumulate, ACCUMULATE)
    if accumulate == "fp32":
        return a @ b
    checks.number("chunk", chunk, positive=True, integer=True)
    checks.number("accumulator_bits", accumulator_bits, integer=True, minimum=2, maximum=24)
    if promote_every is not None:
        checks.number("promote_every", promote_every, positive=True, integer=True)
        checks.divides("chunk", chunk, "promote_every", promote_every)
    k = a.shape[-1]
    pad = (-k) % chunk
    if pad:  # zero products change no sum
        a = torch.nn.functional.pad(a, (0, pad))
        b = torch.nn.functional.pad(b, (0, 0, 0, pad))
    n_chunks = (k + pad) // chunk
    # every chunk's partial product in one batched matmul; only the running sum is sequential
    bb = b.reshape(n_chunks, *([1] * (a.ndim - 2)), chunk, b.shape[-1])
    parts = torch.matmul(a.reshape(*a.shape[:-1], n_chunks, chunk).movedim(-2, 0), bb)
    mask = ~((1 << (24 - accumulator_bits)) - 1)  # _truncate, in place on the running sum
    total, acc = None, torch.zeros_like(parts[0])
    for i in range(n_chunks):
        acc.add_(parts[i]).view(torch.int32).bitwise_and_(mask)
        if promote_every and ((i + 1) * chunk) % promote_every == 0:
            total = acc.clone() if total is None else total.add_(acc)
            acc.zero_()
    return acc if total is None else total.add_(acc)


def qmatmul(a, b, scheme: str = "mxfp8_e4m3", accumulate: str = "fp32",
            promote_every: int | None = None, b_scheme: str | None = None, **kwargs):
    """Emulated low-precision ``a @ b`` for a (..., M, K) and b (K, N).

    ``a`` is quantized as an activation along K, ``b`` as a weight along K (``b_scheme``
    defaults to ``scheme``); ``scheme`` is a block scheme of :mod:`companion.formats`, ``"bf16"``
    or ``"fp32"``. Accumulation options as in :func:`accumulate_matmul`.
    """
    if b.ndim != 2 or a.shape[-1] != b.shape[0]:
        raise ValueError(f"need a (..., M, K) and b (K, N); got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    qa = quantize_operand(a, scheme, axis=-1, role="activation")
    qb = quantize_operand(b, b_scheme or scheme, axis=0, role="weight")
    return accumulate_matmul(qa, qb, accumulate, promote_every, **kwargs)


HOPPER = dict(accumulate="limited", promote_every=128)  # DeepSeek-V3 section 3.3.2


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a Linear layer quantizes activations (x), weights (w) and output gradients (g).

    ``scale_rule``: the E8M0 scale rule of MX schemes (see :mod:`companion.blockscale`).
    ``wgrad_hadamard``: a random Hadamard transform on the Wgrad GEMM's inputs, with one sign
    vector per layer kept for the whole run (as TransformerEngine and torchao do).
    ``delayed``: per-tensor scales from an amax history of ``history_len`` steps reduced by
    ``algo``. ``accumulate``/``promote_every``: the GEMM accumulation of
    :func:`accumulate_matmul`. ``bf16_fraction``: the share of a model's block linears, counted
    from the output end, that stay in BF16 (the model builder applies it).
    """

    name: str
    x: str
    w: str
    g: str
    grad_rounding: str = "nearest"
    wgrad_hadamard: bool = False
    delayed: bool = False
    history_len: int = 1024  # TransformerEngine DelayedScaling defaults
    algo: str = "max"
    scale_rule: str = "floor"
    accumulate: str = "fp32"
    promote_every: int | None = None
    bf16_fraction: float = 0.0

    def __post_init__(self):
        for role in ("x", "w", "g"):
            checks.choice(role, getattr(self, role), PLAIN + blockscale.SCHEMES)
        checks.choice("grad_rounding", self.grad_rounding, _f.ROUNDINGS)
        checks.choice("scale_rule", self.scale_rule, blockscale.SCALE_RULES)
        checks.choice("accumulate", self.accumulate, ACCUMULATE)
        checks.choice("algo", self.algo, ("max", "most_recent"))
        checks.number("history_len", self.history_len, integer=True, positive=True)
        checks.number("bf16_fraction", self.bf16_fraction, minimum=0.0, maximum=1.0)


# NVFP4 pretraining (arXiv:2509.25149): E2M1 with 16x16 weight tiles, stochastic rounding on
# gradients, a 16-point random Hadamard transform on the Wgrad inputs, and about 16% of the
# linear layers (the last ones) kept in BF16.
_FP4_RECIPE = dict(grad_rounding="stochastic", wgrad_hadamard=True, bf16_fraction=0.16)

RECIPES = {r.name: r for r in (
    Recipe("fp32", "fp32", "fp32", "fp32"),
    Recipe("bf16", "bf16", "bf16", "bf16"),
    # TransformerEngine Format.HYBRID (E4M3 forward, E5M2 gradients), on Hopper's accumulator
    Recipe("fp8_current", "fp8_e4m3_tensor", "fp8_e4m3_tensor", "fp8_e5m2_tensor", **HOPPER),
    Recipe("fp8_delayed", "fp8_e4m3_tensor", "fp8_e4m3_tensor", "fp8_e5m2_tensor", delayed=True,
           **HOPPER),
    # DeepSeek-V3: E4M3 everywhere, 1x128 activation/gradient tiles, 128x128 weight blocks
    Recipe("fp8_block", "deepseek_fp8", "deepseek_fp8", "deepseek_fp8", **HOPPER),
    # TransformerEngine MXFP8BlockScaling: E4M3 for all tensors, scales rounded up (Blackwell)
    Recipe("mxfp8", "mxfp8_e4m3", "mxfp8_e4m3", "mxfp8_e4m3", scale_rule="up"),
    # OCP MXFP4 as the spec defines it, and with the NVFP4 recipe's treatment, so that the
    # format's effect (mxfp4_sr_rht vs nvfp4) separates from the recipe's (mxfp4 vs mxfp4_sr_rht)
    Recipe("mxfp4", "mxfp4", "mxfp4", "mxfp4"),
    Recipe("mxfp4_sr_rht", "mxfp4", "mxfp4", "mxfp4", **_FP4_RECIPE),
    Recipe("nvfp4", "nvfp4", "nvfp4", "nvfp4", **_FP4_RECIPE),
)}


def recipe(name: str) -> Recipe:
    """The named recipe of ``RECIPES`` (unknown names raise, suggesting close ones)."""
    return RECIPES[checks.choice("recipe", name, tuple(RECIPES))]


class _Quantizer:
    """Quantizes one tensor role of one layer; holds the delayed-scaling state if any, and
    the generator that seeds each stochastic rounding (so runs repeat under a fixed seed)."""

    def __init__(self, scheme, recipe, rounding_seed):
        self.scheme, self.scale_rule = scheme, recipe.scale_rule
        fmt = "e5m2" if scheme == "fp8_e5m2_tensor" else "e4m3"
        self.state = (blockscale.DelayedScaling(fmt=fmt, history_len=recipe.history_len,
                                                algo=recipe.algo) if recipe.delayed else None)
        self.rng = np.random.default_rng(rounding_seed)

    def __call__(self, t, axis, role, rounding="nearest", hadamard_seed=None, advance=True):
        seed = int(self.rng.integers(2**31)) if rounding == "stochastic" else None
        if self.state is not None:
            deq, nxt = self.state.quantize(t, rounding=rounding, seed=seed)
            if advance:  # inference must not move the amax history training scales from
                self.state = nxt
            return deq
        return quantize_operand(t, self.scheme, axis, role, rounding, hadamard_seed, seed,
                                self.scale_rule)


def _axis_free(scheme):
    return scheme in PLAIN or scheme in ("fp8_e4m3_tensor", "fp8_e5m2_tensor")


class QuantizedLinearFunction(torch.autograd.Function):
    """y = x W^T + b with all three GEMMs (forward, dgrad, wgrad) quantized by a recipe.

    Block-scaled operands are quantized again along the backward GEMMs' reduction axes (as the
    hardware recipes do); per-tensor scaled ones are quantized once and reused, so a delayed
    scaling history advances once per step.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        x2 = x.reshape(-1, x.shape[-1]).float()
        w = weight.float()
        qx = layer.q_x(x2, axis=-1, role="activation", advance=layer._advance)
        qw = layer.q_w(w, axis=-1, role="weight", advance=layer._advance)
        y = accumulate_matmul(qx, qw.t(), layer.accumulate, layer.promote_every)
        if bias is not None:
            y = y + bias.float()
        ctx.save_for_backward(x2, w, qx, qw)
        ctx.layer, ctx.has_bias, ctx.x_shape = layer, bias is not None, x.shape
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        x2, w, qx, qw = ctx.saved_tensors
        layer, r = ctx.layer, ctx.layer.recipe
        g2 = gy.reshape(-1, w.shape[0]).float()
        # dgrad reduces over output features, wgrad over tokens: quantize along those axes
        gq = layer.q_g(g2, axis=-1, role="activation", rounding=r.grad_rounding)
        qw_b = qw if _axis_free(r.w) else layer.q_w(w, axis=0, role="weight")
        dx = accumulate_matmul(gq, qw_b, layer.accumulate, layer.promote_every)
        seed = layer.hadamard_seed if r.wgrad_hadamard else None
        if _axis_free(r.g) and seed is None:
            gq_t = gq
        else:
            gq_t = layer.q_g(g2, axis=0, role="activation", rounding=r.grad_rounding,
                             hadamard_seed=seed)
        if _axis_free(r.x) and seed is None:
            xq_t = qx
        else:
            xq_t = layer.q_x(x2, axis=0, role="activation", hadamard_seed=seed)
        dw = accumulate_matmul(gq_t.t(), xq_t, layer.accumulate, layer.promote_every)
        db = g2.sum(0) if ctx.has_bias else None
        return dx.reshape(ctx.x_shape), dw, db, None


class QLinear(torch.nn.Module):
    """A Linear layer whose GEMMs are emulated in a low-precision recipe (see ``RECIPES``).

    Parameters stay float32 (master weights); outputs are float32. ``accumulate`` and
    ``promote_every`` select the accumulation emulation of :func:`accumulate_matmul`. ``seed``
    seeds the Wgrad Hadamard signs (one sign vector for the layer's life) and the stochastic
    rounding of each tensor role (:meth:`seed_rounding` reseeds the latter). ``accumulate``
    defaults to the recipe's own (limited, promoted every 128, for the Hopper FP8 recipes). Delayed-scaling histories advance only in a
    training forward pass with gradients enabled, so evaluating the model does not change how
    it trains.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 recipe: str = "bf16", accumulate: str | None = None,
                 promote_every: int | None = None, seed: int = 0):
        super().__init__()
        checks.number("in_features", in_features, positive=True, integer=True)
        checks.number("out_features", out_features, positive=True, integer=True)
        self.recipe = r = RECIPES[checks.choice("recipe", recipe, tuple(RECIPES))]
        if accumulate is None:  # the recipe's own accumulation
            accumulate, promote_every = r.accumulate, r.promote_every
        checks.choice("accumulate", accumulate, ACCUMULATE)
        self.accumulate, self.promote_every = accumulate, promote_every
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = torch.nn.Parameter(torch.empty(out_features)) if bias else None
        bound = 1 / math.sqrt(in_features)  # torch.nn.Linear's default initialization
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)
        self.q_x = _Quantizer(r.x, r, [seed, 0])
        self.q_w = _Quantizer(r.w, r, [seed, 1])
        self.q_g = _Quantizer(r.g, r, [seed, 2])
        self.hadamard_seed = checks.number("seed", seed, integer=True, nonnegative=True)
        self._advance = True

    def seed_rounding(self, seed) -> None:
        """Reseed the stochastic rounding of every tensor role (``seed``: anything
        ``numpy.random.default_rng`` takes, e.g. ``[run_seed, layer_index]``)."""
        for q in (self.q_x, self.q_w, self.q_g):
            q.rng = np.random.default_rng(seed)

    def forward(self, x, weight=None):
        """y = x W^T + b, with the recipe's quantized GEMMs. ``weight`` replaces the layer's
        own for this call (a function of it, such as a per-channel rescaling, so gradients
        still reach the parameter)."""
        # grad mode is off inside autograd.Function.forward: decide here
        self._advance = self.training and torch.is_grad_enabled()
        weight = self.weight if weight is None else weight
        return QuantizedLinearFunction.apply(x, weight, self.bias, self)

    def extra_repr(self) -> str:
        return (f"in_features={self.weight.shape[1]}, out_features={self.weight.shape[0]}, "
                f"recipe={self.recipe.name!r}, accumulate={self.accumulate!r}")
