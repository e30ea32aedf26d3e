"""Failures, checkpoints, goodput and storage bandwidth for synchronous training runs.

A synchronous data-parallel job stops when any one of its GPUs (or hosts, links, switches)
fails, so the job's mean time between interruptions is the per-component figure divided by the
number of components. Between interruptions the job writes checkpoints; each costs a stall
``checkpoint_s`` (delta), each interruption costs a restart ``restart_s`` (R) plus the work done
since the last checkpoint.

- Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9),
  doi:10.1145/361147.361115: compute interval tau = sqrt(2 delta M).
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
  Future Generation Computer Systems 22(3), doi:10.1016/j.future.2004.11.016: with Poisson
  failures (mean M), failures possible during compute, checkpoint and restart, the expected wall
  time for work T_s is  M exp(R/M) (exp((tau + delta)/M) - 1) T_s / tau, minimised near
  tau = sqrt(2 delta M) [1 + sqrt(delta/(2M))/3 + (delta/(2M))/9] - delta  (delta < 2M).

Goodput here is useful work over wall time, T_s / T_w. Checkpoint sizes reuse
:func:`companion.memory.model_state_bytes_per_param` (a checkpoint holds weights and optimizer
state, not gradients).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from companion import checks, memory
from companion.model import Transformer, as_transformer

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class PublishedInterruptions:
    """Interruptions counted over a published training run."""
    name: str
    num_gpus: int
    duration_s: float
    unexpected: int
    planned: int
    source: str

    @property
    def job_mtbf_s(self) -> float:
        """Mean time between unexpected interruptions of the whole job."""
        return mtbf_from_count(self.unexpected, self.duration_s)

    @property
    def per_gpu_mtbf_s(self) -> float:
        """The same rate charged to each GPU (job MTBF times the GPU count)."""
        return self.job_mtbf_s * self.num_gpus


#: Llama 3 405B pre-training, a 54-day snapshot on up to 16,384 H100s.
LLAMA3_405B = PublishedInterruptions(
    "Llama 3 405B pre-training (54-day snapshot)", 16384, 54 * DAY_S, 419, 47,
    "Llama Team 2024, The Llama 3 Herd of Models, arXiv:2407.21783, Section 3.3.4 and Table 5 "
    "(466 job interruptions in a 54-day snapshot, 47 planned and 419 unexpected; 78% of the "
    "unexpected ones hardware; more than 90% effective training time) https://arxiv.org/abs/2407.21783 "
    "; as reported by DatacenterDynamics, 'Meta report details hundreds of GPU and HBM3 related "
    "interruptions to Llama 3 training run' https://www.datacenterdynamics.com/en/news/meta-report-"
    "details-hundreds-of-gpu-and-hbm3-related-interruptions-to-llama-3-training-run")

#: "More than 90% effective training time" over the same snapshot (the paper, Section 3.3.4).
LLAMA3_EFFECTIVE_TRAINING_FRACTION = 0.90

#: Meta's Tectonic storage for Llama 3: 2 TB/s sustained, 7 TB/s peak (paper, Section 3.1.2).
LLAMA3_STORAGE_SUSTAINED_BPS = 2e12
LLAMA3_STORAGE_PEAK_BPS = 7e12
LLAMA3_STORAGE_SOURCE = ("Llama Team 2024, The Llama 3 Herd of Models, arXiv:2407.21783, Section "
                         "3.1.2 (Tectonic: 240 PB on 7,500 SSD servers, 2 TB/s sustained, 7 TB/s "
                         "peak), summarized at https://ai-papers.xuzou.cn/papers/llama3_2024")


def _pos(param, x):
    return float(checks.number(param, x, positive=True))


def _nonneg(param, x):
    return float(checks.number(param, x, nonnegative=True))


def mtbf_from_count(interruptions: int, duration_s: float) -> float:
    """Mean time between interruptions: duration over count (seconds)."""
    n = checks.number("interruptions", interruptions, integer=True, positive=True)
    return _pos("duration_s", duration_s) / n


def job_mtbf_s(per_component_mtbf_s: float, num_components: int) -> float:
    """MTBF of a job that stops when any one of ``num_components`` fails (exponential
    failures: rates add, so MTBF divides)."""
    n = checks.number("num_components", num_components, integer=True, positive=True)
    return _pos("per_component_mtbf_s", per_component_mtbf_s) / n


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's optimal compute time between checkpoints, sqrt(2 delta M)."""
    return math.sqrt(2 * _pos("checkpoint_s", checkpoint_s) * _pos("mtbf_s", mtbf_s))


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum: sqrt(2dM)(1 + sqrt(d/2M)/3 + (d/2M)/9) - d for d < 2M,
    else M."""
    d, m = _pos("checkpoint_s", checkpoint_s), _pos("mtbf_s", mtbf_s)
    if d >= 2 * m:
        return m
    x = d / (2 * m)
    return math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d


def expected_wall_s(work_s: float, interval_s: float, checkpoint_s: float, restart_s: float,
                    mtbf_s: float) -> float:
    """Daly's expected wall time for ``work_s`` of computation split into ``interval_s``
    segments, each followed by a checkpoint, with Poisson failures of mean ``mtbf_s``."""
    w, tau = _pos("work_s", work_s), _pos("interval_s", interval_s)
    d, r, m = _nonneg("checkpoint_s", checkpoint_s), _nonneg("restart_s", restart_s), \
        _pos("mtbf_s", mtbf_s)
    if (tau + d + r) / m > 700:  # e**700 is near a float's limit: no job ever finishes
        raise ValueError(f"(interval_s + checkpoint_s + restart_s) / mtbf_s = "
                         f"{(tau + d + r) / m:.3g} is too large: the expected wall time "
                         f"overflows (a job that fails this often never completes a segment)")
    return checks.finite_result("work_s", m * math.exp(r / m) * math.expm1((tau + d) / m)
                                * w / tau)


def goodput(interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """Fraction of wall time spent on useful work (Daly's model): tau over the expected time
    to complete one segment of compute plus checkpoint."""
    return _pos("interval_s", interval_s) / expected_wall_s(
        interval_s, interval_s, checkpoint_s, restart_s, mtbf_s)


def goodput_first_order(interval_s: float, checkpoint_s: float, restart_s: float,
                        mtbf_s: float) -> float:
    """First-order estimate, 1 - delta/(tau + delta) - ((tau + delta)/2 + R)/M: the checkpoint
    overhead plus, per failure, half a segment of lost work and a restart. Valid for
    tau, delta, R much smaller than M; where the estimate falls below zero it is outside
    its validity and raises (use :func:`goodput`, Daly's model, there)."""
    tau, d = _pos("interval_s", interval_s), _nonneg("checkpoint_s", checkpoint_s)
    r, m = _nonneg("restart_s", restart_s), _pos("mtbf_s", mtbf_s)
    g = 1 - d / (tau + d) - ((tau + d) / 2 + r) / m
    if g < 0:
        raise ValueError(f"the first-order goodput is negative ({g:.3g}) for interval_s={tau:g}, "
                         f"checkpoint_s={d:g}, restart_s={r:g}, mtbf_s={m:g}: it needs "
                         f"interval_s, checkpoint_s and restart_s well below mtbf_s; use "
                         f"goodput() (Daly's model) instead")
    return g


@dataclass(frozen=True)
class CheckpointPlan:
    """Optimal checkpointing for one cluster: intervals (s) and the goodput each achieves."""
    mtbf_s: float
    checkpoint_s: float
    restart_s: float
    young_s: float
    daly_s: float
    goodput_young: float
    goodput_daly: float

    @property
    def failures_per_day(self) -> float:
        return DAY_S / self.mtbf_s

    @property
    def lost_fraction(self) -> float:
        """Wall time not spent on useful work at Daly's interval."""
        return 1 - self.goodput_daly


def plan(checkpoint_s: float, restart_s: float, *, mtbf_s: float | None = None,
         num_gpus: int | None = None, per_gpu_mtbf_s: float | None = None) -> CheckpointPlan:
    """Optimal interval and goodput, from a job MTBF or from a GPU count and per-GPU MTBF."""
    if mtbf_s is not None and (num_gpus is not None or per_gpu_mtbf_s is not None):
        raise ValueError("give either mtbf_s (the job's MTBF), or num_gpus and per_gpu_mtbf_s; "
                         "not both: with mtbf_s the GPU count would be ignored")
    if mtbf_s is None and (num_gpus is None or per_gpu_mtbf_s is None):
        raise ValueError("give either mtbf_s, or both num_gpus and per_gpu_mtbf_s")
    m = mtbf_s if mtbf_s is not None else job_mtbf_s(per_gpu_mtbf_s, num_gpus)
    y, d = young_interval_s(checkpoint_s, m), daly_interval_s(checkpoint_s, m)
    return CheckpointPlan(m, checkpoint_s, restart_s, y, d,
                          goodput(y, checkpoint_s, restart_s, m),
                          goodput(d, checkpoint_s, restart_s, m))


def simulate_wall_s(work_s: float, interval_s: float, checkpoint_s: float, restart_s: float,
                    mtbf_s: float, runs: int = 1000, seed: int = 0) -> np.ndarray:
    """Monte Carlo of Daly's model: wall time of ``runs`` independent jobs (seconds).

    Failures are exponential with mean ``mtbf_s`` and may strike during compute, checkpoint or
    restart; after each, the job restarts (``restart_s``) and redoes its current segment. Work
    must be a whole number of intervals. Bounded so that a call neither hangs nor exhausts
    memory: runs x segments at most :data:`companion.checks.MAX_SIM_SEGMENTS`, attempts per
    segment e^((tau + delta + R)/M) at most :data:`companion.checks.MAX_SIM_ATTEMPTS`, and the
    expected number of random draws (each segment takes e^((tau + delta)/M) attempts, each
    failure e^(R/M) restarts) at most :data:`companion.checks.MAX_SIM_DRAWS`.
    """
    w, tau = _pos("work_s", work_s), _pos("interval_s", interval_s)
    d, r, m = _nonneg("checkpoint_s", checkpoint_s), _nonneg("restart_s", restart_s), \
        _pos("mtbf_s", mtbf_s)
    runs = checks.number("runs", runs, integer=True, positive=True)
    seed = checks.number("seed", seed, integer=True, nonnegative=True)
    segments = w / tau
    if abs(segments - round(segments)) > 1e-9 * segments:
        raise ValueError(f"work_s={w} must be a whole number of interval_s={tau} segments")
    cells = runs * round(segments)
    if cells > checks.MAX_SIM_SEGMENTS:
        raise ValueError(f"runs x segments = {runs} x {round(segments)} = {cells:.3g} exceeds "
                         f"{checks.MAX_SIM_SEGMENTS:.0e}: use fewer runs or longer interval_s")
    if (tau + d + r) / m > math.log(checks.MAX_SIM_ATTEMPTS):
        raise ValueError(f"failures are too frequent to simulate: (interval_s + checkpoint_s + "
                         f"restart_s) / mtbf_s = {(tau + d + r) / m:.3g} means about "
                         f"e^{(tau + d + r) / m:.3g} attempts per segment (limit "
                         f"{checks.MAX_SIM_ATTEMPTS}, a ratio of "
                         f"{math.log(checks.MAX_SIM_ATTEMPTS):.2f}); use expected_wall_s(), or "
                         f"a shorter interval_s")
    x = (tau + d) / m
    draws = cells * (math.exp(x) + math.expm1(x) * math.exp(r / m))
    if draws > checks.MAX_SIM_DRAWS:
        raise ValueError(f"too large to simulate: {cells} segments of e^{x:.3g} attempts each "
                         f"are about {draws:.3g} random draws (limit {checks.MAX_SIM_DRAWS:.0e}); "
                         f"use fewer runs, or expected_wall_s()")
    rng = np.random.default_rng(seed)
    total = np.zeros(runs * int(round(segments)))
    pending = np.ones_like(total, dtype=bool)  # segment not yet completed
    while pending.any():
        idx = np.flatnonzero(pending)
        t = rng.exponential(m, idx.size)
        done = t >= tau + d
        total[idx[done]] += tau + d
        pending[idx[done]] = False
        failed = idx[~done]
        total[failed] += t[~done]
        # restart until one restart survives R seconds without a failure
        restarting = failed
        while restarting.size:
            t = rng.exponential(m, restarting.size)
            ok = t >= r
            total[restarting[ok]] += r
            total[restarting[~ok]] += t[~ok]
            restarting = restarting[~ok]
    return total.reshape(runs, -1).sum(axis=1)


# -- checkpoint sizes and storage --------------------------------------------------------------
def _params(model, active: bool = False) -> float:
    if isinstance(model, str):
        model = as_transformer("model", model)
    if isinstance(model, Transformer):  # stored: every parameter; computed: the routed ones
        return float(model.active_params if active else model.params)
    return _pos("model (parameter count)", model)


def checkpoint_bytes(model, precision: str = "bf16", optimizer: bool = True) -> float:
    """Bytes of one full checkpoint: weights plus (unless ``optimizer=False``) optimizer state.

    ``model`` is a :class:`companion.model.Transformer` or a parameter count. Per parameter
    this is :func:`companion.memory.model_state_bytes_per_param` without the gradients: 2 + 12
    = 14 bytes for BF16 or FP16 with Adam (FP32 master weights and two moments; the
    optimizer's FP32 copy of 16-bit gradients is not state a checkpoint saves).
    """
    checks.boolean("optimizer", optimizer)
    s = memory.model_state_bytes_per_param(precision, fp32_grad_copy=False)
    return _params(model) * (s.weights + (s.optimizer if optimizer else 0.0))


def write_time_s(nbytes: float, storage_Bps: float) -> float:
    """Seconds to write ``nbytes`` at an aggregate ``storage_Bps``."""
    return _nonneg("nbytes", nbytes) / _pos("storage_Bps", storage_Bps)


def storage_Bps_for(nbytes: float, budget_s: float) -> float:
    """Aggregate write bandwidth needed to write ``nbytes`` within ``budget_s``."""
    return _nonneg("nbytes", nbytes) / _pos("budget_s", budget_s)


def tokens_per_s(achieved_flops: float, model, flops_per_token: float | None = None) -> float:
    """Training tokens per second at ``achieved_flops``: FLOP/s over 6N FLOPs per token
    (forward 2N, backward 4N; Kaplan et al. 2020) unless ``flops_per_token`` is given. N of
    a mixture-of-experts :class:`~companion.model.Transformer` is its active parameters (the
    experts a token is routed to), as in :func:`companion.power.training_flops`; a bare count
    is taken as N."""
    f = _pos("achieved_flops", achieved_flops)
    per = 6 * _params(model, active=True) if flops_per_token is None else _pos(
        "flops_per_token", flops_per_token)
    return f / per


def input_Bps(achieved_flops: float, model, bytes_per_token: float = 4.0) -> float:
    """Bytes per second of training input: tokens/s times bytes stored per token
    (4 for int32 token ids; text runs about 4 characters per token too)."""
    return tokens_per_s(achieved_flops, model) * _pos("bytes_per_token", bytes_per_token)


__all__ = ["PublishedInterruptions", "LLAMA3_405B", "LLAMA3_EFFECTIVE_TRAINING_FRACTION", "CheckpointPlan", "mtbf_from_count",
           "job_mtbf_s", "young_interval_s", "daly_interval_s", "expected_wall_s", "goodput",
           "goodput_first_order", "plan", "simulate_wall_s", "checkpoint_bytes", "write_time_s",
           "storage_Bps_for", "tokens_per_s", "input_Bps", "HOUR_S", "DAY_S"]
