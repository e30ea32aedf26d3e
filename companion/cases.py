"""The seeds' scenarios priced end to end: layout search, step time, days, energy and cost.

Chapter "Case studies". A :class:`Scenario` names a model, a token budget, a machine, a
precision and a global batch. :func:`price` asks :func:`companion.search.search` for the
fastest layout Megatron can run, turns its step time into days for the token budget, and
prices the run with :mod:`companion.power`: every GPU at its TDP (or a measured draw), each
GPU's share of its node's or rack's nameplate power for CPUs, NICs and fans, and a PUE at the
meter. Every figure therefore inherits the step-time model's validation: each outcome carries
the step-time band of :func:`companion.validation.band` (the cross-validated spread of
published runs of the same GPU or generation and precision), and the days carry it
(``days_low``, ``days_high``); GPU-hours and energy scale the same way but are given at the
model's step only.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import pandas as pd

from companion import checks, hardware, power
from companion.machine import Cluster, cluster
from companion.model import PRECISIONS, Layout, layout_text, preset
from companion.search import layout_of, search
from companion.steptime import model_flops_per_token


@dataclass(frozen=True)
class Scenario:
    """One training job: ``model`` (a preset name) on ``num_gpus`` ``gpu`` s for ``tokens``
    tokens, ``global_batch`` sequences per step, GEMMs in ``precision``, on ``system`` (a
    registry name; None: the GPU's usual node) or an explicit :class:`~companion.machine.Cluster`."""

    name: str
    model: str
    gpu: str
    num_gpus: int
    tokens: float
    global_batch: int
    precision: str = "bf16"
    system: str | Cluster | None = None

    def __post_init__(self):
        preset(self.model)  # raises with close matches for an unknown name
        hardware.gpu(self.gpu)
        checks.gpu_count("num_gpus", self.num_gpus)
        checks.number("tokens", self.tokens, positive=True)
        checks.number("global_batch", self.global_batch, integer=True, minimum=1)
        checks.choice("precision", self.precision, PRECISIONS)


@dataclass(frozen=True)
class Outcome:
    """A :class:`Scenario` at its fastest layout: the step, the whole run, and its energy."""

    scenario: Scenario
    layout: Layout
    cluster: str
    step_time_s: float
    sequences_per_step: int
    mfu: float
    model_tflops_per_gpu: float
    breakdown: dict
    run: power.TrainingRun
    step_time_low_s: float = float("nan")
    step_time_high_s: float = float("nan")
    band_basis: str = ""

    @property
    def days_low(self) -> float:
        """Days at the low end of the step-time band."""
        return self.days * self.step_time_low_s / self.step_time_s

    @property
    def days_high(self) -> float:
        """Days at the high end of the step-time band."""
        return self.days * self.step_time_high_s / self.step_time_s

    @property
    def steps(self) -> float:
        return self.run.tokens / (self.sequences_per_step * preset(self.scenario.model).seq_len)

    @property
    def days(self) -> float:
        return self.run.days

    @property
    def gpu_hours(self) -> float:
        return self.run.gpu_hours

    @property
    def gpu_kwh(self) -> float:
        """The GPUs alone, at the power the scenario was priced with."""
        return power.to_kwh(self.run.gpu_energy_j)

    @property
    def facility_kwh(self) -> float:
        """Energy at the meter in kWh (GPUs and their share of hosts and network, times the PUE)."""
        return power.to_kwh(self.run.energy_j)

    @property
    def electricity_cost(self) -> float:
        return self.run.electricity_cost


class NoLayoutFits(ValueError):
    """No layout of the scenario fits in GPU memory."""


@functools.cache
def _fastest(model, gpu, num_gpus, global_batch, precision, system):
    frame = search(model, gpu, num_gpus, global_batch, system=system, precision=precision,
                   top=1)
    if frame.empty:
        raise NoLayoutFits(f"no layout of {model} on {num_gpus} x {gpu} at a global batch of "
                           f"{global_batch} fits in memory ({precision})")
    return frame.iloc[0].copy(), frame.attrs["cluster"], frame.attrs["band_basis"]


def price(scenario: Scenario, *, gpu_w: float | None = None, host: bool = True,
          host_w: float | None = None, pue: float = 1.0, price_per_kwh: float = 0.0) -> Outcome:
    """The fastest feasible layout of ``scenario`` and the run it implies.

    GPUs draw ``gpu_w`` each (default: TDP, an upper bound for a training run); ``host=True``
    adds each GPU's share of the non-GPU nameplate power of the scenario's node or rack
    (:func:`companion.power.system_power`; a custom Cluster named like a registry system uses
    that system's), an upper bound since a nameplate includes power-supply headroom; ``host_w``
    replaces that share with a measured one (watts per GPU, e.g. a node's measured draw minus
    its GPUs', over the GPU count); ``pue`` multiplies everything at the meter;
    ``price_per_kwh`` in any currency.
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario; got {type(scenario).__name__}")
    checks.boolean("host", host)
    s = scenario
    row, cluster_name, basis = _fastest(s.model, s.gpu, s.num_gpus, s.global_batch,
                                        s.precision, s.system)
    row = row.copy()  # the cache's copy stays as it was
    g = hardware.gpu(s.gpu)
    watts = g.tdp_w if gpu_w is None else checks.number("gpu_w", gpu_w, positive=True)
    if host_w is not None:
        host_w = checks.number("host_w", host_w, nonnegative=True)
    else:
        host_w = power.system_power(_system_name(s)).rest_per_gpu_w if host else 0.0
    seq = preset(s.model).seq_len
    steps = s.tokens / (int(row["global_batch"]) * seq)
    run = power.TrainingRun(
        flops=model_flops_per_token(preset(s.model)) * s.tokens,
        tokens=float(s.tokens), num_gpus=s.num_gpus, time_s=steps * float(row["step_time_s"]),
        gpu_power_w=watts, host_w_per_gpu=host_w, pue=checks.number("pue", pue, minimum=1.0),
        price_per_kwh=checks.number("price_per_kwh", price_per_kwh, nonnegative=True),
        price_per_gpu_hour=0.0)
    parts = {k: float(row[k]) for k in row.index if k.endswith("_s") and not k.startswith(
        "step_time")}
    return Outcome(s, layout_of(row, s.precision), cluster_name, float(row["step_time_s"]),
                   int(row["global_batch"]), float(row["mfu"]),
                   float(row["model_tflops_per_gpu"]), parts, run,
                   float(row["step_time_low_s"]), float(row["step_time_high_s"]), basis)


def _system_name(s: Scenario) -> str:
    if not isinstance(s.system, Cluster):
        name = s.system or cluster(s.gpu).name
        if name not in set(hardware.systems()["name"]):
            raise ValueError(f"{name!r} has no power budget in the registry, so the hosts' share "
                             f"is unknown: pass host=False, or a Scenario with system= one of "
                             f"{', '.join(hardware.systems()['name'])}")
        return name
    names = [n for n in hardware.systems()["name"] if s.system.name.startswith(n)]
    if not names:
        raise ValueError(f"cluster {s.system.name!r} does not start with a registry system's "
                         f"name, so its power budget is unknown; pass host=False or build it "
                         f"with with_scaleout()")
    return max(names, key=len)


def with_scaleout(base: str, scaleout_Bps: float, name: str) -> Cluster:
    """The registry system ``base`` with another scale-out bandwidth per GPU (bytes/s per
    direction), e.g. a DGX B200 cabled with NDR200 instead of NDR400. ``name`` must start with
    ``base`` so that :func:`price` still finds the node's nameplate power."""
    for param, value in (("base", base), ("name", name)):
        if not isinstance(value, str):
            raise TypeError(f"{param} must be a string; got {type(value).__name__} {value!r}")
    if not name.startswith(base):
        raise ValueError(f"name must start with the base system {base!r} (its power budget is "
                         f"looked up by that name); got {name!r}")
    return replace(cluster(hardware.system(base).gpu().key, base), name=name,
                   scaleout_Bps=checks.number("scaleout_Bps", scaleout_Bps, positive=True))


def table(outcomes) -> pd.DataFrame:
    """One row per :class:`Outcome`: layout, step, MFU, days, GPU-hours and energy."""
    rows = []
    for o in outcomes:
        rows.append({
            "scenario": o.scenario.name, "gpu": hardware.gpu(o.scenario.gpu).name,
            "precision": o.scenario.precision, "gpus": o.scenario.num_gpus,
            "layout": layout_text(o.layout),
            "step_s": o.step_time_s, "step_low_s": o.step_time_low_s,
            "step_high_s": o.step_time_high_s, "mfu": o.mfu,
            "tflops_per_gpu": o.model_tflops_per_gpu, "days": o.days,
            "days_low": o.days_low, "days_high": o.days_high, "gpu_hours": o.gpu_hours, "gpu_mwh": o.gpu_kwh / 1e3,
            "facility_mwh": o.facility_kwh / 1e3, "electricity_cost": o.electricity_cost})
    return pd.DataFrame(rows)


__all__ = ["Scenario", "Outcome", "NoLayoutFits", "price", "with_scaleout", "table"]
