"""The few measured constants of the step-time model, in one place, each with its source.

:mod:`companion.parallel` computes a training step from first principles (FLOPs, bytes,
alpha-beta collectives); what physics does not give is how close real kernels and real NCCL
get to the datasheet. Those fractions are below. They are properties of a kernel class or a
link, never of a particular training run: the same five numbers serve every model, layout and
GPU, so an error on an unseen run points at a missing mechanism, not at a knob to turn.

How the values were set. Each has a physical range from measurements; within that range
the single value was chosen that, held fixed for every row, best reproduces the eight step
times of Korthikanti et al. 2022, Table 5 (A100, Megatron-LM, 22B to 1T). Narayanan et al.
2021, Table 1 (ten more A100 runs) is then predicted with the same values, unchanged: it is
the check, not the fit. ``tests/test_parallel.py`` pins both.

- ``gemm_efficiency`` 0.78: fraction of the dense tensor-core peak cuBLAS sustains on a
  large GEMM, before tile and wave quantization (modelled separately by
  :func:`companion.roofline.gemm_efficiency`). Range: about 0.80 measured on this project's
  GPU machine (an 8192^3 BF16 matmul at about 790 TFLOP/s on an H200, datasheet 989.4,
  recorded in the project's toolchain notes); lower on a power-capped A100 whose sustained
  tensor clock sits below the boost clock the peak assumes.
- ``attention_efficiency`` 0.60: fraction of peak of fused (Flash) attention, forward and
  backward together. Dao 2023, *FlashAttention-2* (arXiv:2307.08691), abstract: "reaching
  50-73% of the theoretical maximum FLOPs/s on A100"; the backward pass sits at the low end.
  Used only with a software stack that has fused attention (not in the 2021-2022 runs).
- ``hbm_efficiency`` 0.80: fraction of the HBM datasheet bandwidth that memory-bound kernels
  (norms, dropout, softmax, the optimizer) reach. A pure device-to-device copy reaches about
  0.90 (4.3 of 4.8 TB/s measured on this project's H200); kernels that also reduce or
  gather reach less.
- ``scaleup_efficiency`` 0.65: NCCL bus bandwidth over NVLink as a fraction of the
  per-direction line rate, for the 10-100 MB messages tensor parallelism moves. Ring
  all-reduce bus bandwidth ramps with message size and tops out below line rate (nccl-tests
  doc/PERFORMANCE.md explains bus bandwidth,
  https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
- ``scaleout_efficiency`` 0.90: NCCL bus bandwidth over InfiniBand as a fraction of the NIC
  line rate (RDMA payload after headers; large messages).

Everything else the model needs is a datasheet number (:mod:`companion.hardware`), a latency
from NCCL's own tuning model (:mod:`companion.fabric`), or arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from companion import checks


@dataclass(frozen=True)
class Calibration:
    """Achievable fractions of datasheet peaks (see the module docstring for sources)."""

    gemm_efficiency: float = 0.78
    attention_efficiency: float = 0.60
    hbm_efficiency: float = 0.80
    scaleup_efficiency: float = 0.65
    scaleout_efficiency: float = 0.90

    def __post_init__(self):
        for f in fields(self):
            checks.number(f.name, getattr(self, f.name), positive=True, maximum=1)


#: The defaults, used unless a caller passes its own :class:`Calibration`.
DEFAULT = Calibration()

__all__ = ["Calibration", "DEFAULT"]
