"""Array back ends of the formats library: one set of element-wise passes over numpy or torch.

Numpy arrays use numpy; torch tensors on CUDA use torch operations on their own device; torch
CPU tensors are computed by numpy on the same memory (no copy). :mod:`companion.formats` and
:mod:`companion.blockscale` call :func:`backend` and never branch on the array type themselves.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from companion import checks

# ----------------------------------------------------------------------------- backends
class _NumpyOps:
    """The few array operations the quantizers need, for numpy (in-place where it pays).

    ``amax`` takes non-negative input (magnitudes).
    """

    is_torch = False

    @staticmethod
    def work(x):
        x = np.asarray(x)
        return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)

    abs = staticmethod(np.abs)
    isfinite = staticmethod(np.isfinite)
    isnan = staticmethod(np.isnan)
    where = staticmethod(np.where)
    any = staticmethod(lambda m: bool(np.any(m)))

    @staticmethod
    def int_view(a):
        return a.view(np.int32 if a.dtype == np.float32 else np.int64)

    @staticmethod
    def float_view(i):
        return i.view(np.float32 if i.dtype == np.int32 else np.float64)

    @staticmethod
    def div(a, b):
        return np.divide(a, b)

    @staticmethod
    def min_(a, c):
        return np.minimum(a, c, out=a)

    @staticmethod
    def max_(a, c):
        return np.maximum(a, c, out=a)

    @staticmethod
    def copysign_(a, s):
        return np.copysign(a, s, out=a)

    @staticmethod
    def floor_(a):
        return np.floor(a, out=a)

    @staticmethod
    def amax(a, axes):
        # Non-negative floats order like their bit patterns (NaN above inf), and numpy's integer
        # max is faster than its float max. Over short contiguous blocks, numpy's per-row
        # reduction overhead dominates: folding pairs with long strided loops is 2-3x faster.
        n = a.shape[-1] if a.ndim else 0
        if a.dtype == np.float32:
            ai = a.view(np.int32)
            if axes == (-1,) and 2 <= n <= 32 and not n & (n - 1) and a.flags.c_contiguous:
                flat = ai.reshape(-1)
                m = np.maximum(flat[0::2], flat[1::2])
                while n > 2:
                    half = m.size // 2
                    np.maximum(m[0::2], m[1::2], out=m[:half])
                    m, n = m[:half], n // 2
                return m.view(np.float32).reshape(*a.shape[:-1], 1)
            return np.max(ai, axis=axes, keepdims=True).view(np.float32)
        return np.max(a, axis=axes, keepdims=True)

    @staticmethod
    def f32(a):
        return a.astype(np.float32, copy=False)

    @staticmethod
    def to_int32(c):
        return np.asarray(c).astype(np.int32)

    @staticmethod
    def uint8(c):
        return c.astype(np.uint8)

    @staticmethod
    def full_like(a, v):
        return np.full_like(a, v)

    @staticmethod
    def uniform(like, seed):
        return np.random.default_rng(seed).random(like.shape, dtype=like.dtype)

    @staticmethod
    def const(values, like):
        return np.asarray(values, dtype=like.dtype)

    moveaxis = staticmethod(np.moveaxis)

    @staticmethod
    def pad_last(a, n):
        return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, n)])

    @staticmethod
    def f64_sum(a):
        return float(np.sum(np.asarray(a, dtype=np.float64)))


class _TorchOps:
    """The same operations in torch, on the tensor's own device."""

    is_torch = True

    def __init__(self):
        import torch
        self.t = torch

    def work(self, x):
        return x if x.dtype in (self.t.float32, self.t.float64) else x.to(self.t.float32)

    def abs(self, a):
        return a.abs()

    def isfinite(self, a):
        return self.t.isfinite(a)

    def isnan(self, a):
        return self.t.isnan(a)

    def where(self, m, a, b):
        return self.t.where(m, a, b)

    def any(self, m):
        return bool(m.any())

    def int_view(self, a):
        return a.view(self.t.int32 if a.dtype == self.t.float32 else self.t.int64)

    def float_view(self, i):
        return i.view(self.t.float32 if i.dtype == self.t.int32 else self.t.float64)

    def div(self, a, b):
        # torch turns scalar / tensor into reciprocal-times-scalar (two roundings) and, on
        # CUDA, tensor / scalar into a multiply by the reciprocal: divide tensors instead
        like = b if isinstance(b, self.t.Tensor) else a
        a = a if isinstance(a, self.t.Tensor) else self.t.full_like(like, a)
        b = b if isinstance(b, self.t.Tensor) else self.t.full_like(like, b)
        return self.t.div(a, b)

    def min_(self, a, c):
        return a.clamp_(max=c)

    def max_(self, a, c):
        return a.clamp_(min=c)

    def copysign_(self, a, s):
        return a.copysign_(s)

    def floor_(self, a):
        return a.floor_()

    def amax(self, a, axes):
        if a.dtype == self.t.float32:  # as for numpy: integer max is faster on CPU
            return self.t.amax(a.view(self.t.int32), dim=axes, keepdim=True).view(self.t.float32)
        return self.t.amax(a, dim=axes, keepdim=True)

    def f32(self, a):
        return a.to(self.t.float32)

    def to_int32(self, c):
        return c.to(self.t.int32)

    def uint8(self, c):
        return c.to(self.t.uint8)

    def full_like(self, a, v):
        return self.t.full_like(a, v)

    def uniform(self, like, seed):
        gen = None
        if seed is not None:  # otherwise torch's global generator: torch.manual_seed applies
            gen = self.t.Generator(device=like.device)
            gen.manual_seed(seed)
        return self.t.rand(like.shape, generator=gen, device=like.device, dtype=like.dtype)

    def const(self, values, like):
        return self.t.as_tensor(np.asarray(values), dtype=like.dtype, device=like.device)

    def moveaxis(self, a, src, dst):
        return self.t.movedim(a, src, dst)

    def pad_last(self, a, n):
        return self.t.nn.functional.pad(a, (0, n))

    def f64_sum(self, a):
        return float(a.to(self.t.float64).sum())


_NUMPY = _NumpyOps()


def backend(x) -> Any:
    """The operations object for ``x``: torch's for torch tensors, numpy's otherwise."""
    if type(x).__module__.split(".")[0] == "torch":
        return _TorchOps()
    return _NUMPY


# Torch CPU tensors are computed by numpy on the same memory (``Tensor.numpy()`` and
# ``torch.from_numpy`` share it, no copy): numpy's in-place kernels run about 3x faster than
# torch's CPU ones on these element-wise passes. CUDA tensors use torch operations.
TORCH_CPU_VIA_NUMPY = True


def _is_cpu_tensor(a) -> bool:
    return type(a).__module__.split(".")[0] == "torch" and getattr(a, "is_cuda", True) is False


def _to_numpy(t):
    import torch
    t = t.detach()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.float()  # numpy has no bfloat16; the widening is exact
    return t.resolve_conj().resolve_neg().numpy()


def _to_torch(out):
    import torch
    if isinstance(out, np.ndarray):
        return torch.from_numpy(out)
    if isinstance(out, tuple):
        return tuple(_to_torch(o) for o in out)
    return out


def via_numpy(fn):
    """Run ``fn`` on numpy views of CPU tensor arguments and return tensors (no copies)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not (TORCH_CPU_VIA_NUMPY and any(_is_cpu_tensor(a) for a in args)):
            return fn(*args, **kwargs)
        return _to_torch(fn(*[_to_numpy(a) if _is_cpu_tensor(a) else a for a in args],
                            **kwargs))
    return wrapper


def _checked(param, x):
    """Validate a floating input and return (ops, working array in float32 or float64)."""
    ops = backend(x)
    if not ops.is_torch:
        x = np.asarray(x)
    checks.floating_array(param, x)
    return ops, ops.work(x)


def _layout_consts(a):
    """(mantissa bits, exponent mask, exponent bias) of the working float type."""
    if a.dtype.itemsize == 4:
        return 23, 0x7F800000, 127
    return 52, 0x7FF0000000000000, 1023
