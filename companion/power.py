"""Power, energy and cost: from a model size and a token count to days, megawatt-hours and money.

Everything is SI inside (FLOP, FLOP/s, seconds, watts, joules); kWh, days and GPU-hours appear
only in names that say so. Prices are per kWh or per GPU-hour in whatever currency the caller
uses. The chain, one function per link:

1. :func:`training_flops`: 6 N D (the convention of Kaplan et al. 2020, "Scaling Laws for
   Neural Language Models", arXiv:2001.08361: 2 N FLOPs per token forward, 4 N backward),
   optionally plus the attention score and value products, 12 L s h per token (the s/6h term
   of Narayanan et al. 2021, arXiv:2104.04473, without activation recomputation).
2. :func:`training_time_s`: FLOPs over (GPUs x dense peak at a precision x MFU). MFU is an
   input: it is a property of a run (software, layout, network), never of a GPU.
3. :func:`gpu_power_w`: TDP, or idle + (TDP - idle) x utilisation where the reader sets idle
   and utilisation (no vendor publishes either for a training workload).
4. :func:`system_power`: what a node or rack adds on top of its GPUs (CPUs, NICs, switches,
   fans), from the maximum power in ``data/hardware/systems.csv``; :func:`facility_w` adds
   cooling and conversion losses through the PUE.
5. :func:`electricity_cost`, :func:`training_run`: energy x price, GPU-hours x price.

:func:`power_cap` is a documented toy model of the power-cap trade-off; its constants are
assumptions the reader sets, and the chapter compares it with published measurements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from companion import hardware
from companion.checks import choice, number

JOULES_PER_KWH = 3.6e6
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
#: 1 W of electrical power leaves the room as 3.412 BTU/h of heat (1 BTU = 1055.06 J).
BTU_PER_HOUR_PER_WATT = 3600 / 1055.05585

#: Training FLOP conventions :func:`training_flops` knows.
FLOP_CONVENTIONS = ("6ND", "6ND+attention")


# -- compute -------------------------------------------------------------------------------
def training_flops(params, tokens, *, convention="6ND", layers=None, hidden=None, seq_len=None):
    """FLOPs to train a dense model of ``params`` parameters on ``tokens`` tokens.

    ``"6ND"`` counts 6 FLOPs per parameter per token (Kaplan et al. 2020). ``"6ND+attention"``
    adds 12 x layers x seq_len x hidden per token for the two attention matmuls (QK^T and
    attention x V, forward and backward, causal mask not discounted), which needs ``layers``,
    ``hidden`` and ``seq_len``. For a mixture of experts pass the active parameters.
    """
    n = number("params", params, positive=True)
    d = number("tokens", tokens, positive=True)
    choice("convention", convention, FLOP_CONVENTIONS)
    flops = 6.0 * n * d
    if convention == "6ND+attention":
        for name, v in (("layers", layers), ("hidden", hidden), ("seq_len", seq_len)):
            if v is None:
                raise ValueError(f"convention '6ND+attention' needs {name}; got None")
            number(name, v, integer=True, positive=True)
        flops += 12.0 * layers * seq_len * hidden * d
    if not math.isfinite(flops):
        raise ValueError(f"params={n:g} x tokens={d:g} is too large: the FLOP count overflows")
    return flops


def _mfu(mfu):
    return number("mfu", mfu, positive=True, maximum=1.0)


def achieved_flops(gpu, precision, mfu):
    """FLOP/s one GPU sustains: its dense peak at ``precision`` times ``mfu`` (0 < mfu <= 1)."""
    return hardware.gpu(gpu).peak_flops(precision) * _mfu(mfu)


def training_time_s(flops, num_gpus, gpu, precision, mfu):
    """Wall-clock seconds for ``flops`` on ``num_gpus`` GPUs at ``mfu`` of the dense peak."""
    f = number("flops", flops, positive=True)
    n = number("num_gpus", num_gpus, integer=True, positive=True)
    return f / (n * achieved_flops(gpu, precision, mfu))


def gpu_hours(time_s, num_gpus):
    """GPU-hours: GPUs x wall-clock hours."""
    t = number("time_s", time_s, nonnegative=True)
    return number("num_gpus", num_gpus, integer=True, positive=True) * t / SECONDS_PER_HOUR


def implied_mfu(flops, gpu_hours_total, gpu, precision):
    """The MFU a run must have averaged to do ``flops`` in ``gpu_hours_total`` GPU-hours.
    Above 1 means the claim is impossible (more than the dense peak for the whole run): it is
    returned, not refused, because showing that is what the claim checks use it for."""
    f = number("flops", flops, positive=True)
    h = number("gpu_hours_total", gpu_hours_total, positive=True)
    return f / (h * SECONDS_PER_HOUR * hardware.gpu(gpu).peak_flops(precision))


# -- power ---------------------------------------------------------------------------------
def gpu_power_w(tdp_w, utilisation=1.0, idle_w=0.0):
    """Average board power: ``idle_w + (tdp_w - idle_w) * utilisation``.

    With the defaults this is the TDP, the convention of model cards (Llama 3.1 reports
    "700 W" per H100). ``utilisation`` is the fraction of the idle-to-TDP range the workload
    uses on average (not MFU); ``idle_w`` and ``utilisation`` are assumptions the reader sets.
    """
    tdp = number("tdp_w", tdp_w, positive=True)
    u = number("utilisation", utilisation, minimum=0.0, maximum=1.0)
    idle = number("idle_w", idle_w, nonnegative=True, maximum=tdp)
    return idle + (tdp - idle) * u


@dataclass(frozen=True)
class SystemPower:
    """A node or rack's maximum power split into its GPUs' TDP and everything else."""

    name: str
    gpu_name: str
    gpu_count: int
    gpu_tdp_w: float
    max_w: float
    cooling: str
    source: str

    @property
    def gpus_w(self):
        """All GPUs at TDP."""
        return self.gpu_count * self.gpu_tdp_w

    @property
    def rest_w(self):
        """CPUs, memory, NICs, switches, fans and power-supply headroom."""
        return self.max_w - self.gpus_w

    @property
    def rest_per_gpu_w(self):
        """The non-GPU share per GPU, to add to a GPU's power in a cluster estimate."""
        return self.rest_w / self.gpu_count

    @property
    def gpu_share(self):
        """Fraction of the maximum that is GPU TDP."""
        return self.gpus_w / self.max_w


def system_power(name):
    """The power budget of a node or rack from the registry (``"DGX H100"``, ``"GB200 NVL72"``).

    Raises ValueError for a system whose maximum power is not published (GB300 NVL72).
    """
    s = hardware.system(name)
    if s.max_power_w is None:
        known = hardware.systems().dropna(subset=["max_power_w"])["name"]
        raise ValueError(f"{s.name} has no published maximum power; systems with one: "
                         f"{', '.join(known)}")
    g = s.gpu()
    return SystemPower(name=s.name, gpu_name=g.name, gpu_count=s.gpu_count, gpu_tdp_w=g.tdp_w,
                       max_w=s.max_power_w, cooling=s.cooling, source=s.source)


def facility_w(it_w, pue):
    """Power at the utility meter: IT power x PUE (power usage effectiveness, >= 1)."""
    return number("it_w", it_w, nonnegative=True) * number("pue", pue, minimum=1.0)


def heat_btu_per_h(power_w):
    """Heat to remove, in BTU/h: every watt drawn ends up as heat in the room."""
    return number("power_w", power_w, nonnegative=True) * BTU_PER_HOUR_PER_WATT


# -- energy and cost -----------------------------------------------------------------------
def energy_j(power_w, time_s):
    """Energy in joules: power x time."""
    return number("power_w", power_w, nonnegative=True) * number("time_s", time_s, nonnegative=True)


def to_kwh(joules):
    """Joules to kilowatt-hours (1 kWh = 3.6 MJ)."""
    return number("joules", joules, nonnegative=True) / JOULES_PER_KWH


def kwh(x):
    """Kilowatt-hours to joules."""
    return number("x", x, nonnegative=True) * JOULES_PER_KWH


def electricity_cost(joules, price_per_kwh):
    """Cost of ``joules`` at ``price_per_kwh`` (any currency)."""
    cost = to_kwh(joules) * number("price_per_kwh", price_per_kwh, nonnegative=True)
    if not math.isfinite(cost):
        raise ValueError(f"joules={joules:g} x price_per_kwh={price_per_kwh:g} overflows")
    return cost


def tokens_per_kwh(tokens, joules):
    """Training tokens per kWh (divide by 3.6e6 for tokens per joule)."""
    return number("tokens", tokens, nonnegative=True) / to_kwh(number("joules", joules,
                                                                     positive=True))


def saving_at_equal_throughput(efficiency_ratio):
    """Fraction of power saved at equal throughput when throughput per watt grows by a ratio.

    Power = throughput / (throughput per watt), so a 2x gain saves 1 - 1/2 = 50%, never more.
    A ratio below 1 is a loss, not a saving: the result is then negative, the extra power as a
    fraction of the old (0.5 gives -1.0, twice the power).
    """
    return 1.0 - 1.0 / number("efficiency_ratio", efficiency_ratio, positive=True)


def energy_ratio(power_ratio, time_ratio):
    """New energy over old when power changes by ``power_ratio`` and time by ``time_ratio``."""
    return (number("power_ratio", power_ratio, positive=True)
            * number("time_ratio", time_ratio, positive=True))


def time_ratio_for_saving(saving, power_ratio):
    """The time ratio that an energy ``saving`` (0.41 for 41%) needs at a given power ratio."""
    s = number("saving", saving, minimum=0.0, maximum=1.0)
    if s == 1.0:
        raise ValueError("saving must be < 1: no run uses zero energy")
    return (1.0 - s) / number("power_ratio", power_ratio, positive=True)


@dataclass(frozen=True)
class TrainingRun:
    """A training run's time, energy and cost; see :func:`training_run` for the model."""

    flops: float
    tokens: float
    num_gpus: int
    time_s: float
    gpu_power_w: float
    host_w_per_gpu: float
    pue: float
    price_per_kwh: float
    price_per_gpu_hour: float

    @property
    def days(self):
        return self.time_s / SECONDS_PER_DAY

    @property
    def gpu_hours(self):
        return gpu_hours(self.time_s, self.num_gpus)

    @property
    def it_w(self):
        """GPUs plus their share of hosts and network, before cooling."""
        return self.num_gpus * (self.gpu_power_w + self.host_w_per_gpu)

    @property
    def facility_w(self):
        return facility_w(self.it_w, self.pue)

    @property
    def gpu_energy_j(self):
        """The GPUs alone, the convention of model cards."""
        return energy_j(self.num_gpus * self.gpu_power_w, self.time_s)

    @property
    def energy_j(self):
        """At the meter (GPUs, hosts and network, times the PUE)."""
        return energy_j(self.facility_w, self.time_s)

    @property
    def mwh(self):
        return to_kwh(self.energy_j) / 1e3

    @property
    def electricity_cost(self):
        return electricity_cost(self.energy_j, self.price_per_kwh)

    @property
    def rental_cost(self):
        """GPU-hours x price per GPU-hour (a cloud price usually includes the electricity)."""
        return self.gpu_hours * self.price_per_gpu_hour

    @property
    def tokens_per_kwh(self):
        return tokens_per_kwh(self.tokens, self.energy_j)


def training_run(params, tokens, gpu, num_gpus, *, mfu, precision="bf16", utilisation=1.0,
                 idle_w=0.0, host_w_per_gpu=0.0, pue=1.0, price_per_kwh=0.0,
                 price_per_gpu_hour=0.0, convention="6ND", layers=None, hidden=None,
                 seq_len=None):
    """Time, energy and cost of training ``params`` on ``tokens`` with ``num_gpus`` GPUs.

    ``mfu`` is required: the fraction of the dense ``precision`` peak the run sustains.
    GPU power is :func:`gpu_power_w` (TDP by default); ``host_w_per_gpu`` adds each GPU's share
    of CPUs, NICs and switches (``system_power(...).rest_per_gpu_w`` for a nameplate
    maximum); ``pue`` multiplies everything at the meter.
    """
    g = hardware.gpu(gpu)
    flops = training_flops(params, tokens, convention=convention, layers=layers, hidden=hidden,
                           seq_len=seq_len)
    n = number("num_gpus", num_gpus, integer=True, positive=True)
    return TrainingRun(
        flops=flops, tokens=float(tokens), num_gpus=n,
        time_s=training_time_s(flops, n, g, precision, mfu),
        gpu_power_w=gpu_power_w(g.tdp_w, utilisation, idle_w),
        host_w_per_gpu=number("host_w_per_gpu", host_w_per_gpu, nonnegative=True),
        pue=number("pue", pue, minimum=1.0),
        price_per_kwh=number("price_per_kwh", price_per_kwh, nonnegative=True),
        price_per_gpu_hour=number("price_per_gpu_hour", price_per_gpu_hour, nonnegative=True))


# -- power capping -------------------------------------------------------------------------
@dataclass(frozen=True)
class CapPoint:
    """One power cap under :func:`power_cap`; fractions are relative to the uncapped GPU."""

    cap_w: float
    power_w: float
    clock_fraction: float
    time_fraction: float
    energy_fraction: float

    @property
    def throughput_fraction(self):
        return 1.0 / self.time_fraction


def power_cap(cap_w, max_w, *, floor_w, exponent=2.0, clock_bound_share=1.0):
    """A toy model of a power cap; every constant is an assumption the reader sets.

    Board power is ``floor_w + (max_w - floor_w) * c ** exponent`` at a clock fraction ``c``
    (``exponent`` 1: power linear in clock; 3: dynamic power C V^2 f with voltage scaled
    with frequency). A cap below ``max_w`` lowers the clock until the power fits. Of the
    uncapped time, ``clock_bound_share`` scales with 1/c; the rest (memory-bound kernels,
    communication) is assumed not to. Energy per unit of work is power x time; the GPU is
    assumed to draw the cap while it runs.
    """
    top = number("max_w", max_w, positive=True)
    floor = number("floor_w", floor_w, nonnegative=True)
    if floor >= top:
        raise ValueError(f"floor_w={floor_w} must be below max_w={max_w}")
    cap = number("cap_w", cap_w, positive=True)
    if cap <= floor:
        raise ValueError(f"cap_w={cap_w} must be above floor_w={floor_w}: below the floor "
                         "the model has no clock at which the GPU fits")
    a = number("exponent", exponent, minimum=1.0)
    share = number("clock_bound_share", clock_bound_share, minimum=0.0, maximum=1.0)
    power = min(cap, top)
    clock = ((power - floor) / (top - floor)) ** (1.0 / a)
    time = share / clock + (1.0 - share)
    return CapPoint(cap_w=cap, power_w=power, clock_fraction=clock, time_fraction=time,
                    energy_fraction=power * time / top)


# -- published measurements ----------------------------------------------------------------
@dataclass(frozen=True)
class PublishedRun:
    """A training run as its authors reported it (numbers published, not computed here)."""

    name: str
    params: float
    tokens: float
    num_gpus: int
    gpu: str
    precision: str
    gpu_hours: float
    reported_flops: float
    mfu_low: float
    mfu_high: float
    gpu_power_w: float
    source: str

    @property
    def gpu_energy_j(self):
        """GPU-hours at the reported per-GPU power, the model card's convention."""
        return energy_j(self.gpu_power_w, self.gpu_hours * SECONDS_PER_HOUR)


#: Llama 3.1 405B. GPU-hours (30.84M) and power (700 W per H100-80GB "TDP") from the model
#: card; the rest from the paper: up to 16,384 H100s, 15.6T tokens, 3.8e25 FLOPs, BF16 MFU
#: of 38-43% (Table 4).
LLAMA3_405B = PublishedRun(
    name="Llama 3.1 405B", params=405e9, tokens=15.6e12, num_gpus=16384, gpu="H100",
    precision="bf16", gpu_hours=30.84e6, reported_flops=3.8e25, mfu_low=0.38, mfu_high=0.43,
    gpu_power_w=700.0,
    source=("Llama Team, AI @ Meta 2024, 'The Llama 3 Herd of Models', arXiv:2407.21783 "
            "(Section 3.3 and Table 4) https://arxiv.org/abs/2407.21783 ; Llama 3.1 model "
            "card, 'Training Energy Use' (405B: 30.84M GPU hours, 700 W) "
            "https://github.com/meta-llama/llama-models/blob/main/models/llama3_1/MODEL_CARD.md"))

#: 8-GPU H100 node power in training as a fraction of its 10.2 kW rating, two published levels
#: from the same Brookhaven measurements. Typical: Newkirk et al. 2025 (their FLOP-calibrated
#: model), "even computationally intensive workloads operate at only 76% of the 10.2 kW TDP
#: rating". Maximum: Latif et al. 2024/2025, "the maximum observed power draw was approximately
#: 8.4 kW, 18% lower than the manufacturer-rated 10.2 kW, even with GPUs near full utilization".
H100_NODE_TYPICAL_FRACTION = 0.76
H100_NODE_TYPICAL_SOURCE = (
    "Newkirk et al. 2025, 'Empirically-Calibrated H100 Node Power Models for Reducing "
    "Uncertainty in AI Training Energy Estimation', arXiv:2506.14551 (abstract) "
    "https://arxiv.org/abs/2506.14551")
H100_NODE_MAX_MEASURED_W = 8.4e3
H100_NODE_RATED_W = 10.2e3  # the rating both papers measure against (DGX H100 nameplate)
H100_NODE_MAX_FRACTION = H100_NODE_MAX_MEASURED_W / H100_NODE_RATED_W
H100_NODE_MAX_SOURCE = (
    "Latif et al., 'Empirical Measurements of AI Training Power Demand on a GPU-Accelerated "
    "Node', arXiv:2412.08602 (abstract; IEEE Access 13, 61740-61747, 2025) "
    "https://arxiv.org/abs/2412.08602")

#: GB200 NVL72 rack power as a sourced range rather than one figure. Low end: the 120 kW
#: reported at launch (systems.csv's secondary source; trade press repeats it). High end:
#: NVIDIA's reference design has 8 power shelves of 6 PSUs at up to 5.5 kW (33 kW a shelf,
#: 264 kW in all); with the shelves N+N redundant half of it, 132 kW, can feed the rack (the
#: halving is this book's derivation; trade press quotes "132 kW total DC output" for the
#: GB300 NVL72's shelves).
GB200_NVL72_RACK_W_RANGE = (120e3, 132e3)
GB200_NVL72_SHELF_W = 6 * 5.5e3
GB200_NVL72_SHELVES = 8
GB200_NVL72_RACK_SOURCE = (
    "NVIDIA Mission Control / Base Command Manager manual, 'BCM Power Shelf Integration' ('The "
    "reference design for an NVIDIA GB200 rack has 8 power shelves, and uses 6 PSUs in each "
    "power shelf. Each PSU is rated up to 5.5kW') "
    "https://docs.nvidia.com/base-command-manager/product-manuals/nvidia-mission-control/powershelf.md ; "
    "introl.com, 'GB200 NVL72 Deployment' ('consumes 120 kilowatts', trade press) "
    "https://introl.com/blog/gb200-nvl72-deployment-72-gpu-liquid-cooled")

#: Energy saved by power capping while training a transformer language model (a "15% decrease in energy
#: usage with marginal increase in overall computation time", V100 GPUs).
CAP_ENERGY_SAVING_PUBLISHED = 0.15
CAP_SOURCE = (
    "McDonald et al. 2022, 'Great Power, Great Responsibility: Recommendations for Reducing "
    "Energy for Training Language Models', Findings of NAACL 2022, arXiv:2205.09646 (abstract) "
    "https://arxiv.org/abs/2205.09646")

#: PUE of liquid-cooled halls. Measured: NREL's liquid-cooled ESIF HPC data center reached an
#: annualized 1.036, and the same page says efficiency-focused data centers "typically achieve
#: PUE values of 1.2 or less". The 1.1-1.3 band for liquid-cooled AI halls is a typical range,
#: not a measurement (only secondary summaries state it). Uptime Institute cautions that direct
#: liquid cooling moves fan power out of the IT load, so such PUEs are not strictly comparable
#: with air-cooled ones.
PUE_LIQUID_MEASURED = 1.036
PUE_LIQUID_TYPICAL_RANGE = (1.1, 1.3)
PUE_LIQUID_SOURCE = (
    "NREL, 'High-Performance Computing Data Center Power Usage Effectiveness' (ESIF, annualized "
    "PUE 1.036; efficient centers 'typically achieve PUE values of 1.2 or less') "
    "https://www.nrel.gov/computational-science/measuring-efficiency-pue.html")

#: Industry-average PUE (total facility power over IT power) in Uptime Institute's 2023 survey;
#: it has stayed between 1.55 and 1.59 since about 2020.
PUE_INDUSTRY_AVERAGE = 1.58
PUE_SOURCE = (
    "Uptime Institute Intelligence, 'Large data centers are mostly more efficient, analysis "
    "confirms' (industry average PUE 1.58 in 2023, 1.55-1.59 since about 2020) "
    "https://intelligence.uptimeinstitute.com/resource/large-data-centers-are-mostly-more-efficient-analysis-confirms")
