"""What the claim checks share: :class:`Finding`, the registry of checks, and the seeds' inputs.

``companion.claims_checks`` registers its checks here and :mod:`companion.claims` reads
them; claims_checks never imports claims, so the two form no import cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from companion import checks, units

ROLES = ("figure", "framing", "context")

#: Relative tolerance within which a seed's figure agrees (datasheets round to 2-3 digits).
TOLERANCE = 0.03

#: B100 is not in the registry (no NVIDIA document was found); its dense FP8 peak comes from a
#: third-party table cited in data/claims.yaml: hmc-tech (unofficial spec database), "NVIDIA
#: B200 vs NVIDIA B100" (B100 700 W: 3.5 PFLOP/s dense FP8),
#: https://hmc-tech.com/gpus/nvidia-b200-vs-nvidia-b100
B100_FP8_DENSE_FLOPS_THIRD_PARTY = 3.5e15

#: Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language Models Using
#: Model Parallelism", Section 5, https://arxiv.org/abs/1909.08053 : DGX-2H servers of 16
#: V100s, "300 GB/sec bandwidth between GPUs inside a server via NVSwitch and 100 GB/sec of
#: interconnect bandwidth between servers using 8 InfiniBand adapters per server".
SHOEYBI_GPUS_PER_SERVER = 16
SHOEYBI_INTRA_SERVER_Bps = 300e9
SHOEYBI_INTER_SERVER_Bps = 100e9

#: NVIDIA DGX B200 User Guide, "Introduction to NVIDIA DGX B200 Systems" (10U rackmount),
#: https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html
DGX_B200_RACK_UNITS = 10

#: Bytes per token id in Megatron-Core's indexed datasets: uint16 below a vocabulary of
#: 65,500, else int32 (DType.optimal_dtype in megatron/core/datasets/indexed_dataset.py,
#: https://github.com/NVIDIA/Megatron-LM); 4 bytes bounds the input stream of a text model.
TOKEN_ID_BYTES = 4

# The third seed's own inputs (003_2bd5c6d5d3a69ced): 0.69 kW per H100 under load, 8.5 kW per
# 8-GPU node, industrial electricity at 0.8 yuan/kWh.
SEED_GPU_KW = 0.69
SEED_NODE_KW = 8.5
SEED_YUAN_PER_KWH = 0.8
# The same seed's 13B run: "3,800 GPU-hours" on 128 H100 in FP8 against an assumed "1,200"
# on B200 (the 54% argument), "3.5 days" for 300B tokens on the same 128 H100 and "1.5 days"
# on B200 (its advice section).
SEED_13B_H100_GPU_HOURS, SEED_13B_B200_GPU_HOURS = 3800, 1200
SEED_13B_H100_DAYS, SEED_13B_B200_DAYS = 3.5, 1.5
# Its two savings: "54%" of the 13B run's electricity (FP4 on B200 against FP8 on H100) and
# "41%" for the 175B run on Blackwell Ultra with "time almost halved".
SEED_13B_SAVING, SEED_175B_SAVING = 0.54, 0.41

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class Finding:
    """One comparison: what the seed says, what the companion finds, and whether they agree."""

    said: str
    found: str
    agrees: bool
    role: str = "figure"
    #: the relative tolerance ``agrees`` was judged with, where it is not ``TOLERANCE``
    tolerance: float | None = None

    def __post_init__(self):
        checks.choice("role", self.role, ROLES)
        if self.tolerance is not None:
            checks.number("tolerance", self.tolerance, positive=True)
        if not isinstance(self.agrees, (bool, np.bool_)):
            raise TypeError(f"agrees must be a bool; got {self.agrees!r}")
        object.__setattr__(self, "agrees", bool(self.agrees))  # numpy bools compare oddly



#: claim id -> (check function, unit); filled by :func:`register_check`.
CHECKS: dict = {}


def register_check(claim_id, unit):
    """Register ``fn() -> (claimed, computed, findings)`` as the check of ``claim_id``."""
    def register(fn):
        if claim_id in CHECKS:
            raise ValueError(f"claim {claim_id!r} has two checks")
        CHECKS[claim_id] = (fn, unit)
        return fn
    return register


def _near(a, b, tol=TOLERANCE):
    return bool(abs(a - b) <= tol * abs(b))


def _pf(x):
    return f"{units.to_pflops(x):.4g} PF"


def _pct(x):
    return f"{100 * x:.0f}%"
