"""One layout priced: :func:`price` runs :func:`companion.steptime.step_arrays` on arrays of
length one and returns an :class:`Estimate`. :func:`companion.parallel.estimate` adds the
uncertainty band from :mod:`companion.validation`, which itself prices the published runs
with :func:`price`; keeping the two apart keeps the imports a tree."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from companion import checks, moe
from companion.calibration import DEFAULT, Calibration, checked
from companion.machine import Stack, check_fp8_recipe, resolve, stack
from companion.memory import check_offload, fit_reason
from companion.model import (STEP_PRECISIONS, Layout, Transformer, as_transformer, check_layout,
                             preset, presets)
from companion.steptime import (RECOMPUTE_CODE, check_split, derived_arrays, memory_arrays,
                                stage_layers, step_arrays)


def layout_arrays(model: Transformer, layout: Layout, st: Stack, uneven: bool = False,
                  embedding_loss: bool = False) -> dict:
    """One :class:`~companion.model.Layout` as the length-1 arrays :func:`~companion.steptime.step_arrays` takes.
    ``st`` is a :class:`~companion.machine.Stack` or a stack name."""
    model = as_transformer("model", model)
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a companion.model.Layout; got {type(layout).__name__}")
    if layout.global_batch is None:
        raise ValueError("layout.global_batch is needed: the step's microbatch count comes "
                         "from it")
    st = stack(st) if isinstance(st, str) else st
    if not isinstance(st, Stack):
        raise TypeError(f"st must be a companion.machine.Stack or a stack name; got "
                        f"{type(st).__name__}")
    zero = 1 if layout.distributed_optimizer else layout.zero_stage
    vals = dict(tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
                vpp=layout.vpp, mb=layout.microbatch, m=layout.num_microbatches,
                sp=int(layout.sequence_parallel), rc=RECOMPUTE_CODE[layout.recompute],
                zero=zero, grad_bytes=st.grad_reduce_bytes,
                stage_layers=int(stage_layers(model.layers, layout.pp, layout.vpp, uneven,
                                              embedding_loss)),
                embed_loss=int(embedding_loss and layout.pp > 1))
    return {**{k: np.array([v], dtype=np.int64) for k, v in vals.items()},
            **moe.layout_arrays(layout)}


@dataclass(frozen=True)
class Estimate:
    """One training step of one layout: time, its breakdown, memory and utilization.

    Times are seconds per step on the critical pipeline stage. ``*_comm_s`` is the time a
    collective takes, ``*_exposed_s`` the part not hidden behind compute; the step time is
    the sum of gemm, attention, elementwise, recompute, kernel launch gaps (``launch_s``), the
    GPU's idle time at the MoE dispatcher's host syncs (``moe_sync_s``) and while the host
    issues an eager expert-overlap layer (``overlap_host_s``),
    the slowdown overlapped collectives cause (``overlap_slowdown_s``), the exposed parts, the
    pipeline point-to-point sends and bubble, and the optimizer. MFU counts model FLOPs in the
    convention ``flop_convention`` against ``peak_flops``, the dense peak at the layout's
    precision; HFU counts the FLOPs executed (attention as the kernels run it, plus
    recomputation). ``step_time_low_s`` and ``step_time_high_s`` are the band
    :func:`companion.parallel.estimate` adds (NaN from :func:`price`), ``band_basis`` where it
    comes from. ``capacity_bytes`` is the memory a layout must fit in: the GPU's
    driver-visible HBM where the registry has it (``GPU.usable_hbm_bytes``: 81,559 MiB on an
    H100 "80 GB"), else the datasheet figure, as :func:`companion.memory.training_memory` fits.
    """

    model: str
    gpu: str
    cluster: str
    stack: str
    layout: Layout
    num_gpus: int
    step_time_s: float
    gemm_s: float
    attention_s: float
    elementwise_s: float
    recompute_s: float
    tp_comm_s: float
    tp_exposed_s: float
    cp_comm_s: float
    cp_exposed_s: float
    ep_comm_s: float
    ep_exposed_s: float
    pp_p2p_s: float
    bubble_s: float
    dp_comm_s: float
    dp_exposed_s: float
    optimizer_s: float
    memory_bytes: float
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float
    fits: bool
    reason: str
    mfu: float
    hfu: float
    model_tflops_per_gpu: float
    tokens_per_s: float
    flop_convention: str
    launch_s: float = 0.0
    overlap_slowdown_s: float = 0.0
    moe_sync_s: float = 0.0
    overlap_host_s: float = 0.0
    step_time_low_s: float = float("nan")
    step_time_high_s: float = float("nan")
    band_basis: str = "no band computed"
    peak_flops: float = float("nan")

    def breakdown(self) -> dict:
        """The parts that add up to the step time (seconds)."""
        keys = ("gemm_s", "attention_s", "elementwise_s", "recompute_s", "launch_s",
                "moe_sync_s", "overlap_host_s", "overlap_slowdown_s", "tp_exposed_s", "cp_exposed_s", "ep_exposed_s",
                "pp_p2p_s", "bubble_s", "dp_exposed_s", "optimizer_s")
        return {k: getattr(self, k) for k in keys}


def price(model, layout: Layout, gpu, num_gpus: int | None = None, system=None, *,
             software="megatron-core", calibration: Calibration = DEFAULT,
             uneven_stages: bool = False, embedding_loss_slots: bool = False,
             reserve_bytes: float = 0.0, flop_convention: str = "bridge",
             offload_layers: int = 0) -> Estimate:
    """Step time, breakdown, memory and MFU of ``layout`` training ``model`` on ``gpu``.

    ``model`` is a :class:`~companion.model.Transformer` or a preset name; ``gpu`` a registry name or spec;
    ``num_gpus`` (default ``layout.num_gpus``) must equal tp x pp x dp x cp; ``system`` a
    registry system name, a :class:`~companion.machine.Cluster`, or None for the GPU's usual node (see
    :func:`~companion.machine.cluster`); ``software`` a :data:`~companion.machine.STACKS` name or :class:`~companion.machine.Stack`;
    ``layout.global_batch`` must be set. A layout that does not fit in memory is still timed,
    with ``fits=False`` and the reason. A pipeline whose pp x vpp does not divide the layers
    needs ``uneven_stages`` (the fullest stage takes ceil(layers / (pp vpp)) per chunk) or
    ``embedding_loss_slots`` (Megatron's ``account_for_embedding_in_pipeline_split`` and
    ``account_for_loss_in_pipeline_split``: the embedding and the loss each take a layer's
    slot, so pp x vpp must divide layers + 2 and the first and last stages hold one layer
    fewer). ``offload_layers`` keeps that many layers' activations in host memory (Megatron's
    ``cpu_offloading_num_layers``, :func:`companion.memory.check_offload`); the copies
    overlap compute on their own stream and are not priced in the step time.
    """
    model = preset(model) if isinstance(model, str) else model
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer or one of {presets()}; got "
                        f"{type(model).__name__}")
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout; got {type(layout).__name__}")
    if layout.global_batch is None:
        raise ValueError("layout.global_batch must be set to time a step (it fixes the "
                         "number of microbatches)")
    if layout.precision == "fp32":  # a Layout may say fp32 for memory; no step model prices it
        raise ValueError(f"layout.precision='fp32' sizes memory only; a step time needs GEMMs "
                         f"in {', '.join(STEP_PRECISIONS)} (FP32 matmuls run on tensor cores "
                         f"only as TF32)")
    reserve_bytes = checks.number("reserve_bytes", reserve_bytes, nonnegative=True)
    checked(calibration)
    check_split(uneven_stages, embedding_loss_slots)
    slots = embedding_loss_slots and layout.pp > 1
    if slots and (model.layers + 2) % (layout.pp * layout.vpp):
        raise ValueError(f"embedding_loss_slots needs pp x vpp = {layout.pp * layout.vpp} to "
                         f"divide layers + 2 = {model.layers + 2} ({model.name})")
    g, st, cl = resolve(gpu, system, software)
    check_fp8_recipe(g, st, layout.precision)
    if layout.cp > 1 and not st.context_parallel:
        raise ValueError(f"layout.cp={layout.cp}: software={st.name!r} has no context "
                         f"parallelism (it came with Megatron-Core in 2024); use cp=1 or "
                         f"'megatron-core'")
    num_gpus = layout.num_gpus if num_gpus is None else num_gpus
    checks.gpu_count("num_gpus", num_gpus)
    lst = int(stage_layers(model.layers, layout.pp, layout.vpp, uneven_stages, slots))
    padded = replace(model, layers=lst * layout.pp) if uneven_stages or slots else model
    check_layout(padded, layout, num_gpus)
    if uneven_stages and lst * (layout.pp - 1) >= model.layers:
        raise ValueError(f"pp={layout.pp} leaves the last stage empty for {model.layers} layers")
    offload = check_offload(offload_layers, model.layers, layout.pp, layout.recompute)
    X = layout_arrays(model, layout, st, uneven_stages, slots)
    if offload:
        X["offload"] = np.array([offload], dtype=np.int64)
    mem = memory_arrays(model, g, st, X, reserve_bytes, layout.precision)
    X.update(dense_params=mem["dense_params"], expert_params=mem["expert_params"])
    bd = step_arrays(model, g, cl, calibration, st, layout.precision, X)
    der = derived_arrays(model, g, X, bd, mem, st, layout.precision, flop_convention)
    one = {k: float(v[0]) for k, v in {**bd, **der}.items() if k != "global_batch"}
    memf = {k: float(mem[k][0]) for k in ("memory_bytes", "weights_bytes", "grads_bytes",
                                           "optimizer_bytes", "activations_bytes")}
    fits = bool(mem["fits"][0])
    return Estimate(model.name, g.name, cl.name, st.name, layout, num_gpus, **one, **memf,
                    capacity_bytes=g.usable_hbm_bytes, fits=fits,
                    reason=fit_reason(memf["memory_bytes"], g.usable_hbm_bytes,
                                      *(memf[k + "_bytes"] for k in
                                        ("weights", "grads", "optimizer", "activations")),
                                      reserve_bytes),
                    flop_convention=flop_convention,
                    peak_flops=g.peak_flops(layout.precision))




__all__ = ["Estimate", "price", "layout_arrays"]
