"""The machine and the software a training step runs on: :class:`Cluster` (scale-up domains
joined by a scale-out network, from the hardware registry) and :class:`Stack` (what a Megatron
generation fuses and overlaps). :mod:`companion.parallel` and :mod:`companion.search` both
price layouts on them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from companion import checks, hardware
from companion.model import ATTENTION_KERNELS


@dataclass(frozen=True)
class Cluster:
    """The machine a job runs on: scale-up domains joined by a scale-out network.

    Bandwidths are bytes/s per GPU per direction (``scaleout_Bps`` sums a GPU's NICs).
    """

    name: str
    gpus_per_domain: int
    scaleup_Bps: float
    scaleout_Bps: float
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"name must be a non-empty string (the system's name); got "
                            f"{self.name!r}")
        checks.number("gpus_per_domain", self.gpus_per_domain, integer=True, minimum=1)
        checks.number("scaleup_Bps", self.scaleup_Bps, positive=True)
        checks.number("scaleout_Bps", self.scaleout_Bps, positive=True)


# Narayanan et al. 2021 (arXiv:2104.04473), Section 5: Selene's DGX A100 nodes hold 8 A100
# 80GB joined by NVLink/NVSwitch and 8 Mellanox 200 Gb/s HDR InfiniBand HCAs.
_DGX_A100 = ("DGX A100 (8 GPUs, NVSwitch, 8 x HDR 200 Gb/s)", "Narayanan et al. 2021, "
             "arXiv:2104.04473, Section 5 (Selene: 8 A100 per node, 8 HDR HCAs per node)")


def cluster(gpu, system: str | Cluster | None = None) -> Cluster:
    """The :class:`Cluster` for ``gpu`` in ``system`` (a name in the hardware registry, a
    Cluster, or None for the GPU's usual node: DGX A100 for A100, otherwise the registry's
    system built around that GPU, e.g. DGX H100 or GB200 NVL72)."""
    g = hardware.gpu(gpu)
    if isinstance(system, Cluster):
        return system
    if system is None:
        table = hardware.systems()
        rows = table[table["gpu"] == g.key]
        if len(rows):
            system = rows.iloc[0]["name"]
        elif g.key.startswith("a100"):
            nic = hardware.link("HDR").per_direction_Bps
            return Cluster(_DGX_A100[0], 8, g.scaleup_Bps, nic, _DGX_A100[1])
        else:
            raise ValueError(f"no system in the registry holds {g.name}; pass system= "
                             f"(a registry name or a Cluster)")
    s = hardware.system(system)
    if s.gpu().family != g.family:  # an H100 in a GB200 rack: links and power would be wrong
        raise ValueError(f"system={s.name!r} holds {s.gpu().name} ({s.gpu().family}), not "
                         f"{g.name} ({g.family}); pick a system of the GPU's family or pass "
                         f"a Cluster")
    if "PCIe" in (g.form_factor or "") and "PCIe" not in (s.gpu().form_factor or ""):
        # a PCIe card has no socket on an SXM baseboard or superchip: no NVSwitch domain
        raise ValueError(f"system={s.name!r} holds {s.gpu().form_factor} GPUs; {g.name} is a "
                         f"{g.form_factor}: pass a Cluster describing its server")
    scaleup = g.scaleup_Bps if g.scaleup_Bps is not None else s.gpu().scaleup_Bps
    return Cluster(s.name, s.scaleup_domain_gpus, scaleup, s.scaleout_Bps / s.gpu_count,
                   s.source)


@dataclass(frozen=True)
class Stack:
    """What the training software does: fused attention, and which collectives it overlaps."""

    name: str
    flash_attention: bool
    overlap_tp: bool
    overlap_grad_reduce: bool
    overlap_p2p: bool
    overlap_ep: bool = False
    causal: bool = True
    grad_reduce_bytes: int = 2
    fp8_scaling: str = "delayed"
    fused_cross_entropy: bool = True
    #: the whole step captured in CUDA graphs: kernel gaps at ``Calibration.graph_gap_s``, and
    #: for MoE layers the sync-free dispatch such graphs need, so no host sync
    #: (``Calibration.moe_sync_s``) and no host floor under the expert overlap
    #: (``Calibration.overlap_host_kernel_s``)
    cuda_graphs: bool = False
    #: the MoE token dispatcher (``alltoall`` or ``deepep``); None: the stack's own
    #: (:data:`companion.moe.STACK_DISPATCHER`)
    moe_dispatcher: str | None = None
    #: the fused-attention kernel: ``cudnn`` (Transformer Engine's choice on Hopper and
    #: Blackwell since TE 1.2) or ``flash-attn-2`` (what TE runs when ``NVTE_FUSED_ATTN=0``
    #: switches cuDNN off, as NeMo-Framework-Launcher's configuration for the 24.03.01
    #: container did), each priced from its own published records
    attention_kernel: str = "cudnn"
    #: parameters per data-parallel gradient bucket; None: Megatron-Core's default,
    #: ``max(40000000, 1000000 x data-parallel size with CP)``
    ddp_bucket_params: int | None = None
    #: whether the stack can split the sequence over GPUs (context parallelism, Megatron-Core
    #: from 2024 on); the 2022 Megatron of Narayanan and Korthikanti had no such option
    context_parallel: bool = True

    def __post_init__(self):
        # a string "False" is truthy: every switch must be a real bool
        for name in ("flash_attention", "overlap_tp", "overlap_grad_reduce", "overlap_p2p",
                     "overlap_ep", "causal", "fused_cross_entropy", "cuda_graphs",
                     "context_parallel"):
            object.__setattr__(self, name, checks.boolean(name, getattr(self, name)))
        gb = checks.number("grad_reduce_bytes", self.grad_reduce_bytes, integer=True)
        if gb not in (2, 4):  # BF16/FP16 or FP32 gradients
            raise ValueError(f"grad_reduce_bytes must be 2 (16-bit) or 4 (FP32); got {gb}")
        object.__setattr__(self, "grad_reduce_bytes", gb)
        checks.choice("fp8_scaling", self.fp8_scaling, ("delayed", "current", "mxfp8"))
        checks.choice("attention_kernel", self.attention_kernel, ATTENTION_KERNELS)
        if self.moe_dispatcher is not None:
            checks.choice("moe_dispatcher", self.moe_dispatcher, ("alltoall", "deepep"))
        if self.ddp_bucket_params is not None:
            object.__setattr__(self, "ddp_bucket_params", checks.number(
                "ddp_bucket_params", self.ddp_bucket_params, integer=True, minimum=1))


#: ``megatron-2022``: Megatron-LM as run in Narayanan et al. 2021 and Korthikanti et al.
#: 2022: unfused (fused-softmax) attention computing the whole score matrix, every TP
#: collective and pipeline send on the critical path, gradients all-reduced after the
#: backward pass. ``megatron-core``: Megatron-Core with Transformer Engine (2024-2025):
#: FlashAttention-style fused kernels skipping masked blocks, TP communication overlapped
#: with GEMMs (``--tp-comm-overlap``), gradient reduce-scatter overlapped with the backward
#: pass (``--overlap-grad-reduce``), overlapped pipeline sends (``--overlap-p2p-comm``), FP8
#: with Transformer Engine's default delayed scaling. ``megatron-bridge``: the same with FP8
#: current scaling, the recipe Megatron-Bridge 25.11's performance table reports ("FP8-CS");
#: ``megatron-bridge-mxfp8`` with MXFP8 (32-element block scaling, "FP8-MX"). Megatron-Core
#: and -Bridge reduce gradients in FP32 (``grad_reduce_bytes`` 4): Megatron-LM's
#: megatron/training/arguments.py sets ``accumulate_allreduce_grads_in_fp32`` for BF16
#: parameters unless ``--grad-reduce-in-bf16`` is given. The 2021-22 runs were FP16, 2 bytes.
#: NVIDIA's performance configurations reduce in BF16 and some run CUDA graphs: a published run
#: says so in its own columns (:func:`companion.validation.run_stack`).
STACKS = {
    "megatron-2022": Stack("megatron-2022", flash_attention=False, overlap_tp=False,
                           overlap_grad_reduce=False, overlap_p2p=False,
                           fused_cross_entropy=False, context_parallel=False),
    "megatron-core": Stack("megatron-core", flash_attention=True, overlap_tp=True,
                           overlap_grad_reduce=True, overlap_p2p=True, grad_reduce_bytes=4),
    "megatron-bridge": Stack("megatron-bridge", flash_attention=True, overlap_tp=True,
                             overlap_grad_reduce=True, overlap_p2p=True, fp8_scaling="current",
                             grad_reduce_bytes=4),
    "megatron-bridge-mxfp8": Stack("megatron-bridge-mxfp8", flash_attention=True,
                                   overlap_tp=True, overlap_grad_reduce=True, overlap_p2p=True,
                                   fp8_scaling="mxfp8", grad_reduce_bytes=4),
}


def stack(name: str | Stack) -> Stack:
    """A :class:`Stack` by name (see :data:`~companion.machine.STACKS`), or the object itself."""
    return name if isinstance(name, Stack) else STACKS[checks.choice("stack", name, STACKS)]


@dataclass(frozen=True)
class DomainFill:
    """Whether a GPU count fills whole scale-up domains (NVLink nodes or racks) of a cluster."""

    num_gpus: int
    gpus_per_domain: int
    domains: int
    idle_gpus: int

    @property
    def whole(self) -> bool:
        return self.idle_gpus == 0

    @property
    def message(self) -> str:
        gpus = f"{self.num_gpus} GPU" + ("s" if self.num_gpus > 1 else "")
        if self.whole:
            return (f"{gpus} {'fill' if self.num_gpus > 1 else 'fills'} {self.domains} whole "
                    f"scale-up domain(s) of "
                    f"{self.gpus_per_domain}")
        if self.domains == 1:  # every group stays on the scale-up fabric
            return (f"{gpus} {'sit' if self.num_gpus > 1 else 'sits'} in one scale-up domain of "
                    f"{self.gpus_per_domain}, leaving "
                    f"{self.idle_gpus} of its GPUs idle")
        return (f"{gpus} do not fill whole scale-up domains of "
                f"{self.gpus_per_domain}: the last of {self.domains} holds "
                f"{self.gpus_per_domain - self.idle_gpus} and leaves {self.idle_gpus} idle, and "
                f"groups the model assumes inside one domain may cross the slower network")


def domain_fill(cl: Cluster, num_gpus: int) -> DomainFill:
    """How ``num_gpus`` sit on ``cl``'s scale-up domains (8-GPU DGX/HGX nodes, 72-GPU NVL72
    racks): the domains used and the GPUs left idle in the last one."""
    if not isinstance(cl, Cluster):
        raise TypeError(f"cl must be a Cluster; got {type(cl).__name__}")
    checks.number("num_gpus", num_gpus, integer=True, minimum=1)
    per = cl.gpus_per_domain
    domains = -(-num_gpus // per)
    return DomainFill(num_gpus, per, domains, domains * per - num_gpus)


@dataclass(frozen=True)
class CrossDomainRing:
    """One ring all-reduce over ``gpus`` GPUs that spans ``domains`` scale-up domains, at line
    rate (see :func:`cross_domain_ring`)."""

    gpus: int
    domains: int
    hops_off_scaleup: int
    scaleup_Bps: float
    ring_Bps: float
    bandwidth_ratio: float
    slowdown: float


def cross_domain_ring(cl: Cluster, gpus: int, size_bytes: float) -> CrossDomainRing:
    """A TP-style ring of ``gpus`` GPUs across whole domains of ``cl``, as NCCL runs it
    (:func:`companion.fabric.flat_all_reduce_time_s`): the ring leaves the scale-up fabric on
    one hop per domain, and NCCL spreads its channels over every rail, so each GPU's share
    crosses at the domain's total NIC bandwidth, ``g x`` a GPU's NICs (8 x 50 GB/s = 400 GB/s
    per GPU on DGX B200), not one NIC's. ``slowdown`` is a ratio: this ring's all-reduce time
    of ``size_bytes`` over the same ring's time inside one domain that holds all ``gpus``,
    latency (NCCL's tuning model) included in both."""
    from companion import fabric  # fabric is a leaf module; imported here to keep machine light

    if not isinstance(cl, Cluster):
        raise TypeError(f"cl must be a Cluster; got {type(cl).__name__}")
    f = fabric.Fabric(cl.gpus_per_domain, cl.scaleup_Bps, cl.scaleout_Bps, name=cl.name)
    d = checks.number("gpus", gpus, integer=True, minimum=2) // cl.gpus_per_domain
    slowdown = fabric.cross_domain_ring_slowdown(f, size_bytes, gpus)
    ring = fabric.flat_Bps(f, d)
    return CrossDomainRing(gpus, d, d if d > 1 else 0, cl.scaleup_Bps, ring,
                           cl.scaleup_Bps / ring, float(slowdown))


def _resolve(gpu, system, software):
    g, st = hardware.gpu(gpu), stack(software)
    return g, st, cluster(g, system)


def check_fp8_recipe(g, st: Stack, precision: str) -> None:
    """Refuse a stack's FP8 recipe on a GPU that cannot run it, where the step runs FP8 GEMMs
    (a BF16 step on the same stack never scales anything to FP8)."""
    if precision == "fp8" and st.fp8_scaling == "mxfp8" and not hardware.runs_mx(g):
        raise ValueError(f"software={st.name!r} runs MXFP8 block scaling, which needs compute "
                         f"capability 10.0 or higher (Blackwell); {g.name} is "
                         f"{g.compute_capability or 'not an NVIDIA GPU'}: use 'megatron-bridge' "
                         f"(FP8 current scaling) or 'megatron-core' (delayed scaling)")


_resolve_cached = functools.lru_cache(maxsize=256)(_resolve)


def resolve(gpu, system=None, software="megatron-core"):
    """GPU spec, software :class:`Stack` and :class:`Cluster` for the names given. Resolving
    names reads the hardware registry's tables with pandas (milliseconds), so resolved names
    are kept: the registry does not change while a process runs."""
    try:
        return _resolve_cached(gpu, system, software)
    except TypeError:  # an unhashable spec: resolve it every time
        return _resolve(gpu, system, software)


__all__ = ["Cluster", "cluster", "Stack", "STACKS", "stack", "resolve", "check_fp8_recipe",
           "DomainFill", "domain_fill", "CrossDomainRing", "cross_domain_ring"]
