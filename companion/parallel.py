"""Megatron-style training step time: TP, SP, PP, DP/ZeRO, CP and EP on a real cluster.

:func:`estimate` prices one training step of a :class:`Transformer` laid out by a
:class:`Layout` on a :class:`Cluster`; :func:`search` (from :mod:`companion.search`) prices
every valid layout at once. Both run :func:`step_arrays`, written once over numpy arrays (``estimate``
passes arrays of length one), so one code path serves one layout and a million.

One step on the critical pipeline stage, per microbatch and per layer: GEMMs (the roofline
of :func:`companion.roofline.gemm_time`, with tile and wave quantization, times the
achievable fraction of :mod:`companion.calibration`), attention (fused Flash kernels or
Megatron's unfused QK^T, softmax, dropout, AV), memory-bound elementwise work, TP/SP
collectives (exposed unless the stack overlaps them with GEMMs), CP ring exchange (hidden
behind attention when it can be), and EP all-to-all. Backward GEMMs cost twice the forward;
recomputation adds a forward (``full``) or the attention core (``selective``). The pipeline
adds a bubble of (p - 1) / v microbatch-stages (Narayanan et al. 2021, Section 2.2: bubble
fraction (p - 1)/(m v)) and point-to-point sends; data parallelism adds the gradient
reduction, hidden behind the last microbatch's backward when the stack overlaps it; the
optimizer streams its state once. Collectives come from :mod:`companion.fabric`.

Every estimate carries a band (``step_time_low_s``, ``step_time_high_s``) from the
cross-validated errors of published runs of the same GPU (or, with fewer than ten, its
generation), precision and family (:mod:`companion.validation`). Software matters as much as hardware: :data:`~companion.machine.STACKS` names what each Megatron generation
did (the 2021-2022 papers ran unfused attention and exposed every collective).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from companion import checks, comm, fabric, hardware, roofline
from companion.calibration import DEFAULT, Calibration
from companion.estimator import Estimate, layout_arrays, price
from companion.machine import STACKS, Cluster, Stack, cluster, stack
from companion.model import Layout, Transformer, check_layout, preset, presets
from companion.search import search
from companion.steptime import (FLOP_CONVENTIONS, derived_arrays, memory_arrays,
                                model_flops_per_token, stage_layers, step_arrays)
from companion.validation import (PUBLISHED_RUNS, band, cross_validation, published_runs,
                                  role, run_layout, validate)


def estimate(model, layout: Layout, gpu, num_gpus: int | None = None, system=None, *,
             software="megatron-core", calibration: Calibration = DEFAULT,
             uneven_stages: bool = False, embedding_loss_slots: bool = False,
             reserve_bytes: float = 0.0, flop_convention: str = "bridge",
             offload_layers: int = 0) -> Estimate:
    """Step time, breakdown, memory and MFU of ``layout`` training ``model`` on ``gpu``, with
    the step time's uncertainty band.

    ``model`` is a :class:`Transformer` or a preset name; ``gpu`` a registry name or spec;
    ``num_gpus`` (default ``layout.num_gpus``) must equal tp x pp x dp x cp; ``system`` a
    registry system name, a :class:`Cluster`, or None for the GPU's usual node (see
    :func:`cluster`); ``software`` a :data:`~companion.machine.STACKS` name or :class:`Stack`;
    ``layout.global_batch`` must be set. A layout that does not fit in memory is still timed,
    with ``fits=False`` and the reason. ``uneven_stages`` and ``embedding_loss_slots`` split
    a pipeline whose pp x vpp does not divide the layers, and ``offload_layers`` keeps
    layers' activations in host memory (see :func:`price`). MFU counts model FLOPs in ``flop_convention``
    (default ``bridge``: causal attention as it runs, Megatron-Bridge's count) against the
    dense peak at the layout's precision (``peak_flops``); HFU counts the FLOPs executed.
    ``step_time_low_s`` and ``step_time_high_s`` bound the step from the cross-validated errors
    of published runs of the same GPU (or its generation), precision and family (:func:`band`;
    ``band_basis`` says which rows, or that there were none).
    """
    e = price(model, layout, gpu, num_gpus, system, software=software, calibration=calibration,
              uneven_stages=uneven_stages, embedding_loss_slots=embedding_loss_slots,
              reserve_bytes=reserve_bytes, offload_layers=offload_layers,
              flop_convention=flop_convention)
    moe = (preset(model) if isinstance(model, str) else model).is_moe
    low, high, basis = band(gpu, layout.precision, e.step_time_s, moe=moe)
    return replace(e, step_time_low_s=low, step_time_high_s=high, band_basis=basis)


__all__ = ["published_runs", "run_layout", "validate", "cross_validation", "band", "role",
           "PUBLISHED_RUNS", "search", "Transformer", "Layout", "check_layout", "preset",
           "presets", "Cluster", "cluster", "Stack", "STACKS", "stack", "FLOP_CONVENTIONS",
           "model_flops_per_token", "Estimate", "estimate", "price", "step_arrays",
           "memory_arrays", "layout_arrays", "derived_arrays", "stage_layers"]


# ----------------------------------------------------------------------------- one TP layer
@dataclass(frozen=True)
class TPLayer:
    """One transformer layer, forward and backward, on one of ``tp`` GPUs (seconds)."""
    gpu: str
    compute_s: float
    comm_s: float
    layer_s: float
    exposed_comm_s: float
    comm_share: float
    flops: float
    gemm_mfu: float
    all_reduce_bytes: float
    bandwidth_Bps: float

    def hidden_fraction_for(self, share: float) -> float:
        """Fraction of the TP communication that must hide behind GEMMs for an exposed share
        of ``share`` of the layer time (0 if none needs hiding)."""
        share = checks.number("share", share, minimum=0, maximum=0.999)
        if self.comm_s == 0:  # TP 1: nothing to hide
            return 0.0
        exposed = share / (1 - share) * self.compute_s
        return max(0.0, 1 - exposed / self.comm_s)


def _layer_gemms(hidden, heads, ffn_hidden, seq_len, micro_batch, tp):
    """Forward GEMMs of one Megatron TP rank, as (m, n, k, batch): QKV, scores, values,
    projection, FC1, FC2 (Shoeybi et al. 2019, column- then row-parallel)."""
    tokens, d = micro_batch * seq_len, hidden // heads
    heads_rank = heads // tp
    return [(tokens, 3 * hidden // tp, hidden, 1),
            (seq_len, seq_len, d, micro_batch * heads_rank),
            (seq_len, d, seq_len, micro_batch * heads_rank),
            (tokens, hidden, hidden // tp, 1),
            (tokens, ffn_hidden // tp, hidden, 1),
            (tokens, hidden, ffn_hidden // tp, 1)]


def tp_layer(gpu: str = "H100", hidden: int = 5120, heads: int = 40, ffn_hidden: int | None = None,
             seq_len: int = 4096, micro_batch: int = 1, tp: int = 8, algorithm: str = "ring",
             overlap: bool = False, link_efficiency: float = 1.0) -> TPLayer:
    """Share of a layer's time spent in tensor-parallel all-reduces (a GPT layer, 4h MLP).

    Compute: every forward GEMM of one rank (QKV, scores, values, projection, FC1, FC2) timed by
    :func:`companion.roofline.gemm_time` (roofline with tile and wave quantization), and the
    backward pass as two GEMMs of the same size per forward GEMM (data and weight gradients),
    so 3x the forward FLOPs (72bsh^2 + 12bs^2h in all, Narayanan et al. 2021). Elementwise
    ops, layernorm and softmax are left out. Communication: four all-reduces of the
    activations (b s h bf16 values) per layer, two forward and two backward (Megatron's f and
    g operators), over ``tp`` GPUs at the GPU's per-direction NVLink bandwidth from the
    registry times ``link_efficiency``. ``overlap=True`` assumes perfect overlap (layer time
    = max of the two); ``False`` adds them.
    """
    g = hardware.gpu(gpu)
    if g.scaleup_Bps is None:
        raise ValueError(f"tp_layer needs the GPU's scale-up (NVLink) bandwidth; the registry "
                         f"has none for {g.name}: pass a GPU with one, e.g. H100 or B200")
    for p, v in (("hidden", hidden), ("heads", heads), ("seq_len", seq_len),
                 ("micro_batch", micro_batch), ("tp", tp)):
        checks.number(p, v, integer=True, minimum=1)
    ffn = 4 * hidden if ffn_hidden is None else checks.number("ffn_hidden", ffn_hidden,
                                                              integer=True, minimum=1)
    checks.divides("heads", heads, "hidden", hidden)
    checks.divides("tp", tp, "heads", heads)
    checks.divides("tp", tp, "ffn_hidden", ffn)
    eff = checks.number("link_efficiency", link_efficiency, positive=True, maximum=1)
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap must be True or False; got {overlap!r}")
    fwd_s = bwd_s = flops = 0.0
    for m, n, k, batch in _layer_gemms(hidden, heads, ffn, seq_len, micro_batch, tp):
        est = roofline.gemm_time(m, n, k, g, batch=batch)
        fwd_s += est.timing.time_s
        bwd_s += roofline.gemm_time(m, k, n, g, batch=batch).timing.time_s  # dgrad
        bwd_s += roofline.gemm_time(k, n, m, g, batch=batch).timing.time_s  # wgrad
        flops += 3 * est.cost.flops
    compute_s = fwd_s + bwd_s
    size = micro_batch * seq_len * hidden * roofline.dtype_bytes("bf16")
    bw = g.scaleup_Bps * eff
    comm_s = 4 * comm.collective_time_s("all_reduce", size, tp, bw, fabric.NCCL_NVLINK_STEP_S,
                                        algorithm=algorithm)
    layer_s = max(compute_s, comm_s) if overlap else compute_s + comm_s
    exposed = layer_s - compute_s
    return TPLayer(g.name, compute_s, comm_s, layer_s, exposed, exposed / layer_s, flops,
                   flops / compute_s / g.peak_flops("bf16"), size, bw)
