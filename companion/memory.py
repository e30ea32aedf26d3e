"""Where every byte of a training step (and of an inference step) lives.

Model state per parameter follows Megatron-LM's accounting
(``megatron/training/theoretical_memory_usage.py``): BF16 weights (2 bytes), FP32 gradients
accumulated in a ``main_grad`` buffer (4) and Adam's FP32 master weights, first and second
moments (12): 18 bytes, or 6 + 12/DP with the distributed optimizer. ZeRO stages 1-3
(Rajbhandari et al. 2020, arXiv:1910.02054) shard optimizer state, then gradients, then
weights over the data parallel ranks. The gradient buffer holds the reduce dtype
(``grad_bytes``): Megatron-Core's DDP allocates it as ``torch.float if grad_reduce_in_fp32
else param.dtype``, so NVIDIA's performance recipes (``grad_reduce_in_fp32 = False``) keep 2.

Activations per transformer layer follow Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models" (arXiv:2205.05198), Section 4 and Table 2, in
bytes, with 16-bit activations and 1-byte dropout masks: sbh(34 + 5as/h) with no
parallelism; sbh(10 + 24/t + 5as/(ht)) with tensor parallelism; sbh(34/t + 5as/(ht)) with
sequence parallelism too; selective recomputation drops the 5as/h term; full recomputation
keeps only the layer input, 2sbh. Pipeline schedules keep several microbatches in flight on
the first stage (Section 4.2.3). In FP8 and FP4 the linear layers keep their inputs in one
byte (Transformer Engine saves the quantized copy): see :func:`activations_per_layer_bytes`.

Two accountings of model state are in use and the companion names both: Megatron's 18 bytes
per parameter (FP32 gradients; ``convention="megatron"``) and the ZeRO paper's 16 (16-bit
gradients, 2 + 2 + 12; ``convention="zero-paper"``), see :func:`bytes_per_param`.

Dropout: Korthikanti's counts include 1-byte dropout masks (two per layer in the 10 sbh that
TP leaves whole, and the attention-dropout mask and output in the 5as/h). Llama-family recipes
train without dropout (Megatron-LM's ``examples/llama/train_llama3_8b_h100_fp8.sh`` passes
``--attention-dropout 0.0 --hidden-dropout 0.0``; the presets say so in
:attr:`~companion.model.Transformer.dropout`), so for them the replicated term is 8 sbh,
the score term 2as/h (the softmax output only) and the embedding dropout mask is absent;
``dropout=None`` (the default) decides by :func:`trains_with_dropout`.

Capacity is what the driver lets a process use: :attr:`companion.hardware.GPU.usable_hbm_bytes`
(81,559 MiB on an H100 "80 GB"). Byte convention everywhere: GB = 10**9, GiB = 2**30.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from companion import checks, moe
from companion.model import (PRECISIONS, RECOMPUTE, Layout, Transformer, as_transformer,
                             check_layout, check_microbatches)
from companion.roofline import dtype_bytes, resolve_gpu

# Bytes per parameter: (weights, gradients, optimizer state) before any sharding, as
# Megatron-LM's README tabulates them for its distributed optimizer ("fp16 param, fp16 grads
# 20, 4 + 16/d; bf16 param, fp32 grads 18, 6 + 12/d; fp32 param, fp32 grads 16, 8 + 8/d").
# Mixed precision: 16-bit weights, an FP32 master copy + Adam m + v (12 bytes the optimizer
# shards), and gradients in the buffer's width: FP32 for BF16 (Megatron accumulates in FP32),
# 16-bit for FP16 (loss scaling keeps them FP16). Where the buffer is 16-bit, the optimizer
# also holds FP32 main gradients (``main_param.grad = model_param.main_grad.float()``, in the
# distributed optimizer ``shard_model_grad.float()``): 4 more sharded bytes, whether the
# weights are FP16 or BF16; FP32 gradients are used in place. FP8/FP4 GEMMs keep BF16's stored
# state: Transformer Engine casts BF16 weights per GEMM (``fp8_params=True`` models FP8 weight
# storage instead). Pure FP32: 4-byte weights and gradients, no master copy, Adam m + v.
_STATE = {"bf16": (2, 4, 12), "fp16": (2, 2, 12), "fp8": (2, 4, 12), "fp4": (2, 4, 12),
          "fp32": (4, 4, 8)}
_FP32_GRAD_COPY_BYTES = 4


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter held by one GPU for weights, gradients and optimizer state."""

    weights: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer


def state_bytes_arrays(precision: str = "bf16", dp=1, stage=0, grad_bytes: float | None = None,
                       fp8_params: bool = False, fp32_grad_copy: bool | None = None):
    """Weights, gradients and optimizer bytes per parameter (three float64 arrays) for arrays
    of ``dp`` and sharding ``stage`` (0 none, 1 optimizer state, 2 and gradients, 3 and
    weights; Megatron's distributed optimizer is stage 1). ``fp32_grad_copy`` None follows
    Megatron (the optimizer keeps FP32 main gradients where the gradient buffer is narrower
    than FP32 and the weights have a master copy); False is the ZeRO paper's K = 12, which
    counts none. The one implementation of :func:`model_state_bytes_per_param`."""
    w, g, o = _STATE[checks.choice("precision", precision, PRECISIONS)]
    if grad_bytes is not None:
        g = checks.number("grad_bytes", grad_bytes, positive=True)
    if fp32_grad_copy is None:
        fp32_grad_copy = w < 4 and g < 4
    if checks.boolean("fp32_grad_copy", fp32_grad_copy):
        o += _FP32_GRAD_COPY_BYTES
    if checks.boolean("fp8_params", fp8_params):
        w = 1
    dp, stage = np.asarray(dp, dtype=np.int64), np.asarray(stage, dtype=np.int64)
    return (np.where(stage >= 3, w / dp, float(w)), np.where(stage >= 2, g / dp, float(g)),
            np.where(stage >= 1, o / dp, float(o)))


def model_state_bytes_per_param(precision: str = "bf16", dp: int = 1, zero_stage: int = 0,
                                distributed_optimizer: bool = False,
                                grad_bytes: float | None = None,
                                fp8_params: bool = False,
                                fp32_grad_copy: bool | None = None) -> StateBytes:
    """Per-GPU bytes per parameter. Megatron BF16 + Adam: 18 without the distributed
    optimizer, 6 + 12/dp with it; 16-bit gradients (FP16's default, or ``grad_bytes=2``) add
    the optimizer's FP32 copy of them: 20, 4 + 16/dp. ``grad_bytes=2,
    fp32_grad_copy=False`` gives the ZeRO paper's 16-byte recipe (2 + 2 + 12), sharded as
    stage 1: 4 + 12/dp, stage 2: 2 + 14/dp, stage 3: 16/dp."""
    dp = checks.number("dp", dp, integer=True, positive=True)
    checks.number("zero_stage", zero_stage, integer=True, minimum=0, maximum=3)
    checks.boolean("distributed_optimizer", distributed_optimizer)
    stage = max(zero_stage, 1 if distributed_optimizer else 0)
    return StateBytes(*(float(x) for x in state_bytes_arrays(precision, dp, stage, grad_bytes,
                                                             fp8_params, fp32_grad_copy)))


def megatron_bytes_per_param(dp: int = 1, distributed_optimizer: bool = False) -> float:
    """Megatron-LM's weights-plus-optimizer figure: 18, or 6 + 12/dp distributed."""
    return model_state_bytes_per_param("bf16", dp, 0, distributed_optimizer).total


#: Gradient bytes per parameter of each model-state accounting: Megatron-LM keeps FP32
#: gradients (``main_grad``, 18 B/param with Adam); the ZeRO paper (Rajbhandari et al. 2020,
#: Section 3.1) counts 16-bit gradients and no FP32 copy of them, 2 + 2 + 12 = 16 B/param.
STATE_CONVENTIONS = {"megatron": 4.0, "zero-paper": 2.0}


def bytes_per_param(dp: int = 1, stage: int = 0, convention: str = "megatron") -> float:
    """Per-GPU model-state bytes per parameter with mixed-precision Adam, sharded to ZeRO
    ``stage`` (0-3) over ``dp`` ranks, in one of :data:`STATE_CONVENTIONS`: Megatron 18, 6 +
    12/dp, 2 + 16/dp, 18/dp; ZeRO paper 16, 4 + 12/dp, 2 + 14/dp, 16/dp."""
    g = STATE_CONVENTIONS[checks.choice("convention", convention, STATE_CONVENTIONS)]
    return model_state_bytes_per_param("bf16", dp, stage, grad_bytes=g,
                                       fp32_grad_copy=False if g < 4 else None).total


def trains_with_dropout(model) -> bool:
    """The model's :attr:`~companion.model.Transformer.dropout` (a Transformer or preset name):
    True for the GPT-3 era models of Korthikanti et al., whose Table 2 counts the masks; False
    for the presets whose recipes set dropout to zero (Llama, Nemotron, Mixtral, Qwen3,
    DeepSeek-V3), whatever their sequence length."""
    return as_transformer("model", model).dropout


def activations_per_layer_bytes(seq_len: int, microbatch: int, hidden: int, heads: int,
                                tp: int = 1, sequence_parallel: bool = False,
                                recompute: str = "none", ffn_hidden: int | None = None,
                                kv_heads: int | None = None, ffn_type: str = "gelu",
                                flash_attention: bool = False, cp: int = 1,
                                dropout: bool = True, gemm_input_bytes: float = 2.0,
                                head_dim: int | None = None) -> float:
    """Activation bytes one transformer layer keeps for the backward pass, per GPU.

    With the defaults (``ffn_hidden = 4 hidden``, MHA, GELU) this is Table 2 of Korthikanti
    et al. 2022. Of the 34 sbh: 10 stay whole on every TP rank unless sequence parallel
    (two norm inputs 4, QKV and MLP inputs 4, two dropout masks 2), 24 are split by TP
    (Q, K, V 6, projection input 2, GELU input 8, second MLP input 8). Generalizations, by the
    paper's own counting: the MLP's 16 is 4 x ffn_hidden / hidden (6x for SwiGLU, which saves
    the gate and up outputs and their product); GQA shrinks K and V by kv_heads/heads;
    ``flash_attention`` never materializes the 5as/h score tensors; with context parallelism
    each rank holds seq_len/cp queries against all seq_len keys. ``recompute="full"`` keeps the
    layer input only: 2sbh, split by t when sequence parallel (the paper's 2sbhL/t remark).
    ``dropout=False`` (Llama-style training) drops the masks: 8 sbh replicated, 2as/h scores.
    ``gemm_input_bytes`` is what each linear layer keeps of its input for the weight gradient:
    2 in 16-bit training, 1 in FP8 or FP4, where Transformer Engine keeps the quantized copy
    (``transformer_engine/pytorch/module/linear.py`` @3ec87875: ``saved_inputmat = inputmat``
    after quantizing it, column-wise usage only). Fourteen of the 34 sbh are such inputs (QKV
    and first MLP inputs 4, projection input 2, second MLP input 8 at an MLP width of 4h);
    attention's Q, K, V, the activation function's input and the norms' inputs stay 16-bit. NVFP4's 4-bit copies are counted at FP8's byte.
    ``head_dim`` (default hidden / heads) sets the attention width heads x head_dim where a
    model decouples it from the hidden size (Qwen3: 32 x 128 = 2 x 2048): Q, K, V and the
    projection input scale with it.
    """
    if not isinstance(dropout, bool):
        raise TypeError(f"dropout must be True or False; got {dropout!r}")
    s, b, h, a, t, cp = (checks.number(p, v, integer=True, positive=True) for p, v in (
        ("seq_len", seq_len), ("microbatch", microbatch), ("hidden", hidden), ("heads", heads),
        ("tp", tp), ("cp", cp)))
    checks.choice("recompute", recompute, RECOMPUTE)
    checks.choice("ffn_type", ffn_type, ("gelu", "swiglu"))
    checks.boolean("sequence_parallel", sequence_parallel)
    checks.boolean("flash_attention", flash_attention)
    checks.divides("tp", t, "heads", a)
    checks.divides("cp", cp, "seq_len", s)
    f = 4 * h if ffn_hidden is None else checks.number("ffn_hidden", ffn_hidden, integer=True,
                                                        positive=True)
    if kv_heads is not None:
        checks.number("kv_heads", kv_heads, integer=True, positive=True)
        checks.divides("kv_heads", kv_heads, "heads", a)
    q = checks.number("gemm_input_bytes", gemm_input_bytes, minimum=1.0, maximum=2.0)
    if head_dim is not None:
        checks.number("head_dim", head_dim, integer=True, positive=True)
    return float(activations_per_layer_arrays(
        s, b, h, a, t, sequence_parallel, RECOMPUTE.index(recompute), f, kv_heads, ffn_type,
        flash_attention, cp, dropout, q, head_dim))


def activations_per_layer_arrays(seq_len: int, microbatch, hidden: int, heads: int, tp=1,
                                 sequence_parallel=False, recompute=0,
                                 ffn_hidden: int | None = None, kv_heads: int | None = None,
                                 ffn_type: str = "gelu", flash_attention: bool = False, cp=1,
                                 dropout: bool = True, gemm_input_bytes: float = 2.0,
                                 head_dim: int | None = None):
    """:func:`activations_per_layer_bytes` for arrays of layouts (float64 array): the model's
    shapes are numbers; ``microbatch``, ``tp``, ``sequence_parallel``, ``recompute`` (codes:
    0 none, 1 selective, 2 full, 3 moe (selective here), the order of
    ``companion.model.RECOMPUTE``) and ``cp``
    are arrays, broadcast together. The one implementation of the formulas."""
    b, t, cp = (np.asarray(x, dtype=np.int64) for x in (microbatch, tp, cp))
    sp, rc = np.asarray(sequence_parallel, dtype=bool), np.asarray(recompute)
    if np.any(heads % t) or np.any(seq_len % cp):
        raise ValueError(f"tp must divide heads={heads} and cp seq_len={seq_len}")
    f = 4 * hidden if ffn_hidden is None else ffn_hidden
    g = 1.0 if kv_heads is None else kv_heads / heads
    w = 1.0 if head_dim is None else heads * head_dim / hidden  # attention width / hidden
    sbh = seq_len // cp * b * hidden
    # dropout masks: 1 byte each after attention and after the MLP (in the replicated 10), and
    # the attention-dropout mask plus its 2-byte output in the scores' 5 (softmax output is 2);
    # linear layers' saved inputs take gemm_input_bytes per element (QKV and MLP inputs in the
    # replicated part, projection and second MLP inputs in the split part)
    q = gemm_input_bytes / 2.0
    replicated = 4.0 + 4.0 * q + (2.0 if dropout else 0.0)
    mlp = (4.0 if ffn_type == "swiglu" else 2.0) + 2.0 * q
    split = (2.0 + 4.0 * g + 2.0 * q) * w + mlp * f / hidden
    per_score = 5.0 if dropout else 2.0
    scores = np.where((rc == 1) | (rc == 3) | flash_attention, 0.0,
                      per_score * heads * seq_len / hidden)
    per = np.where(sp, replicated / t, replicated)
    kept = sbh * (per + split / t + scores / t)
    return np.where(rc == 2, 2.0 * sbh / np.where(sp, t, 1), kept)


def pipeline_inflight_microbatches(pp: int, vpp: int = 1,
                                   num_microbatches: int | None = None) -> float:
    """Microbatches' worth of a stage's activations the first pipeline stage holds at peak.

    1F1B: pp (it must hold pp microbatches to keep the pipeline full; fewer if there are
    fewer microbatches), so L/pp layers x pp = L layers regardless of pp (Korthikanti et al.,
    Eq. 5). Interleaved with ``vpp`` virtual stages: pp x (1 + (pp-1)/(pp x vpp)).
    """
    pp = checks.number("pp", pp, integer=True, positive=True)
    vpp = checks.number("vpp", vpp, integer=True, positive=True)
    if num_microbatches is not None:
        num_microbatches = checks.number("num_microbatches", num_microbatches, integer=True,
                                         positive=True)
    check_microbatches(pp, vpp, num_microbatches)
    return float(pipeline_inflight_arrays(pp, vpp, num_microbatches))


def pipeline_inflight_arrays(pp, vpp=1, num_microbatches=None):
    """:func:`pipeline_inflight_microbatches` for arrays (float64): its one implementation."""
    pp, vpp = np.asarray(pp, dtype=np.int64), np.asarray(vpp, dtype=np.int64)
    plain = pp if num_microbatches is None else np.minimum(pp, num_microbatches)
    return np.where(vpp > 1, pp * (1 + (pp - 1) / (pp * vpp)), plain.astype(np.float64))


@dataclass(frozen=True)
class ParamSplit:
    """Parameters on the most loaded GPU (first pipeline stage)."""

    dense: float  # attention, norms, dense MLPs, shared experts, router, embeddings
    expert: float  # routed experts

    @property
    def total(self) -> float:
        return self.dense + self.expert


def params_per_gpu(model: Transformer, layout: Layout) -> ParamSplit:
    """Parameters held by a first-stage GPU: its share of the layers plus the word embeddings
    (and the output layer when untied and pp == 1), split by TP, and learned position
    embeddings whole on every TP rank; routed experts split by EP x TP (Megatron's expert
    tensor parallel size defaults to TP). ``model`` is a
    :class:`~companion.model.Transformer` or a preset name."""
    model = as_transformer("model", model)
    check_layout(model, layout)
    dense, expert = params_per_gpu_arrays(model, layout.tp, layout.pp, layout.ep)
    return ParamSplit(float(dense), float(expert))


def _layer_counts(model: Transformer, layers):
    """(layer_params, routed_expert_params, moe_layers) of ``model`` with ``layers`` layers
    (an array: uneven pipelines are priced as a model padded to pp x the fullest stage).
    All three are affine in the layer count, so two models give every count exactly."""
    base = (model.layer_params, model.routed_expert_params, model.moe_layers)
    if layers is None:
        return base
    more = replace(model, layers=model.layers + 1)
    step = (more.layer_params, more.routed_expert_params, more.moe_layers)
    extra = np.asarray(layers, dtype=np.int64) - model.layers
    return tuple(b + extra * (n - b) for b, n in zip(base, step))


def params_per_gpu_arrays(model: Transformer, tp, pp, ep=1, layers=None):
    """Dense and routed-expert parameters on a first-stage GPU (two float64 arrays) for arrays
    of ``tp``, ``pp``, ``ep`` and optionally ``layers`` (padded layer counts): the one
    implementation of :func:`params_per_gpu`."""
    tp, pp, ep = (np.asarray(x, dtype=np.int64) for x in (tp, pp, ep))
    layer_params, experts, _ = _layer_counts(model, layers)
    embed = model.vocab * model.hidden  # VocabParallelEmbedding: split over TP
    if not model.tied_embeddings:  # the output layer sits on the first stage only if pp == 1
        embed = np.where(pp == 1, embed + model.vocab * model.hidden, embed)
    # learned positions are a plain torch.nn.Embedding that every TP rank holds whole
    # (Megatron-Core's LanguageModelEmbedding: "Position embedding (serial)")
    positions = model.seq_len * model.hidden if model.learned_positions else 0
    dense = ((layer_params - experts) / pp + embed) / tp + positions
    return dense, experts / pp / (ep * tp)


@dataclass(frozen=True)
class TrainingMemory:
    """Per-GPU memory of one training step, on the most loaded GPU (first pipeline stage)."""

    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserve_bytes: float
    total_bytes: float
    capacity_bytes: float | None
    fits: bool
    reason: str


def check_offload(offload_layers, layers: int, pp: int, recompute: str) -> int:
    """``offload_layers`` as Megatron accepts it: the first that many transformer layers keep
    their activations in host memory (Transformer Engine's CPU offload: activation memory
    ``(num_layers - num_offloaded_layers) x T``), fewer than the model's layers ("CPU
    offloading can be done only for layers less than num_layers"), and neither with pipeline
    parallelism nor with recomputation, which Megatron-Core's ``TransformerConfig`` refuses.
    Returns it as an int."""
    layers = checks.number("layers", layers, integer=True, positive=True)
    n = checks.number("offload_layers", offload_layers, integer=True, minimum=0,
                      maximum=layers - 1)
    if n and pp > 1:
        raise ValueError(f"offload_layers={n} needs pp=1: Megatron-Core does not offload "
                         f"activations with pipeline parallelism (pp={pp})")
    if n and recompute != "none":
        raise ValueError(f"offload_layers={n} needs recompute='none': Megatron-Core does not "
                         f"offload activations together with recomputation ({recompute!r})")
    return int(n)


def training_memory(model: Transformer, layout: Layout, gpu=None, *,
                    capacity_bytes: float | None = None, reserve_bytes: float = 0.0,
                    num_microbatches: int | None = None, flash_attention: bool = False,
                    fp8_params: bool = False, grad_bytes: float | None = None,
                    dropout: bool | None = None, offload_layers: int = 0) -> TrainingMemory:
    """Weights, gradients, optimizer state and activations per GPU, and whether they fit.

    Capacity is ``capacity_bytes`` or the GPU's driver-visible HBM (``usable_hbm_bytes``: 81,559
    MiB on an H100 "80 GB"; ``hbm_bytes`` where none is published); ``reserve_bytes`` covers what
    the model does not count (CUDA context, NCCL buffers, allocator fragmentation: a few GB in
    practice). Activations: :func:`activations_per_layer_bytes` x layers per stage x
    :func:`pipeline_inflight_microbatches`, plus the embedding dropout and, with pp == 1, the
    output layer and FP32 logits (Korthikanti et al. Section 4.3); with full recomputation,
    one layer's activations rebuilt during its backward pass; the optimizer's FP32 copy of
    16-bit gradients counts only where it exceeds the activations, which are freed by the
    time it exists (:func:`training_memory_arrays`). MoE layers count the MLP width
    active per token, (top_k + shared_experts) x expert_ffn_hidden, plus the dispatched copies,
    router probabilities and one permutation buffer (:func:`training_memory_arrays`).
    ``offload_layers`` layers keep their activations in host memory (Megatron's
    ``cpu_offloading_num_layers``; see :func:`check_offload`). A layout Megatron cannot run raises, as in :func:`companion.model.check_layout`
    (including an interleaved schedule whose microbatches are not whole rounds of pp).
    ``model`` is a :class:`~companion.model.Transformer` or a preset name.
    """
    model = as_transformer("model", model)
    check_layout(model, layout)
    offload_layers = check_offload(offload_layers, model.layers, layout.pp, layout.recompute)
    reserve_bytes = checks.number("reserve_bytes", reserve_bytes, nonnegative=True)
    checks.boolean("flash_attention", flash_attention)
    checks.boolean("fp8_params", fp8_params)
    if gpu is not None and capacity_bytes is None:
        g = resolve_gpu(gpu)
        capacity_bytes = getattr(g, "usable_hbm_bytes", None) or g.hbm_bytes
    if capacity_bytes is not None:
        capacity_bytes = checks.number("capacity_bytes", capacity_bytes, positive=True)
    if num_microbatches is not None:
        num_microbatches = checks.number("num_microbatches", num_microbatches, integer=True,
                                         positive=True)
        if layout.num_microbatches not in (None, num_microbatches):
            raise ValueError(f"num_microbatches={num_microbatches} contradicts the layout's "
                             f"global_batch / (dp * microbatch) = {layout.num_microbatches}; "
                             f"pass one of them")
        check_microbatches(layout.pp, layout.vpp, num_microbatches)
    m = num_microbatches if num_microbatches is not None else layout.num_microbatches
    r = training_memory_arrays(
        model, tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
        vpp=layout.vpp, microbatch=layout.microbatch, num_microbatches=m,
        sequence_parallel=layout.sequence_parallel,
        recompute=RECOMPUTE.index(layout.recompute),
        stage=max(layout.zero_stage, 1 if layout.distributed_optimizer else 0),
        precision=layout.precision, flash_attention=flash_attention, fp8_params=fp8_params,
        grad_bytes=grad_bytes, reserve_bytes=reserve_bytes, dropout=dropout,
        etp=layout.expert_tp, routing_skew=layout.routing_skew, offload_layers=offload_layers)
    weights, grads, optimizer, acts, total = (float(r[k]) for k in (
        "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "total_bytes"))
    if capacity_bytes is None:
        fits, reason = True, "no GPU or capacity given: fit not checked"
    else:
        fits = total <= capacity_bytes
        reason = fit_reason(total, capacity_bytes, weights, grads, optimizer, acts,
                            float(reserve_bytes))
    return TrainingMemory(weights, grads, optimizer, acts, float(reserve_bytes), total,
                          capacity_bytes, fits, reason)


def fit_reason(total_bytes, capacity_bytes, weights_bytes, grads_bytes, optimizer_bytes,
               activations_bytes, reserve_bytes) -> str:
    """Whether ``total_bytes`` fit in ``capacity_bytes``, in words; when they do not, the largest
    of the parts (the reserve counted as what the caller set aside)."""
    if total_bytes <= capacity_bytes:
        return f"fits: {total_bytes / 1e9:.1f} GB of {capacity_bytes / 1e9:.1f} GB"
    parts = {"weights": weights_bytes, "gradients": grads_bytes,
             "optimizer state": optimizer_bytes, "activations": activations_bytes,
             "reserve": reserve_bytes}
    big = max(parts, key=parts.get)
    return (f"does not fit: needs {total_bytes / 1e9:.1f} GB > {capacity_bytes / 1e9:.1f} GB "
            f"(largest part: {big}, {parts[big] / 1e9:.1f} GB)")


def training_memory_arrays(model: Transformer, *, tp, pp, dp, cp, ep, vpp, microbatch,
                           num_microbatches, sequence_parallel, recompute, stage,
                           precision: str = "bf16", flash_attention: bool = False,
                           fp8_params: bool = False, grad_bytes: float | None = None,
                           reserve_bytes: float = 0.0, layers=None,
                           dropout: bool | None = None, etp=None,
                           routing_skew: float = 1.0, offload_layers=0) -> dict:
    """:func:`training_memory` for arrays of layouts, broadcast together; its one
    implementation. ``recompute`` holds codes (0 none, 1 selective, 2 full), ``stage`` the
    sharding stage (0-3; Megatron's distributed optimizer is 1), ``num_microbatches`` may be
    None (1F1B then holds pp microbatches), ``layers`` pads the model (uneven pipelines are
    priced on the fullest stage: pp x its layers). Returns float64 arrays ``weights_bytes``,
    ``grads_bytes``, ``optimizer_bytes``, ``activations_bytes``, ``total_bytes`` and the
    parameter split ``dense_params`` and ``expert_params``. Layouts are not checked here:
    :func:`companion.model.check_layout` does that for one layout, the search's enumeration
    for many. ``dropout`` None: :func:`trains_with_dropout` decides from the model.
    MoE terms (:mod:`companion.moe`): ``etp`` (None: ``tp``) splits the experts
    and gathers their tokens; each MoE layer also keeps its dispatched copies, router
    probabilities and indices (:func:`companion.moe.saved_bytes_per_layer`), and one layer's
    permutation buffer is alive at a time (:func:`companion.moe.transient_bytes`).
    ``optimizer_bytes`` is the state held across the step (master weights, Adam m and v); the
    optimizer's FP32 copy of 16-bit gradients (:func:`state_bytes_arrays`) lives only during
    its update, after the backward pass has freed the activations, so ``total_bytes`` holds
    the larger of the two."""
    drop = trains_with_dropout(model) if dropout is None else dropout
    if not isinstance(drop, bool):
        raise TypeError(f"dropout must be True, False or None; got {dropout!r}")
    tp, pp, dp, cp, ep, b = (np.asarray(x, dtype=np.int64)
                             for x in (tp, pp, dp, cp, ep, microbatch))
    et = tp if etp is None else np.asarray(etp, dtype=np.int64)
    rc = np.asarray(recompute)
    dense_p, expert_p = params_per_gpu_arrays(model, tp, pp, ep, layers)
    expert_p = expert_p * tp / et  # routed experts split over ep x etp
    shards = (dp * cp, tp * dp * cp // (et * ep))  # dense, expert data-parallel groups
    held = [state_bytes_arrays(precision, n, stage, grad_bytes, fp8_params, False)
            for n in shards]
    weights, grads, optimizer = (dense_p * d + expert_p * e for d, e in zip(*held))
    # the optimizer's FP32 copy of 16-bit gradients exists only during its step, when the
    # activations are gone: the peak holds the larger of the two
    copy = sum(p * (state_bytes_arrays(precision, n, stage, grad_bytes, fp8_params)[2] - h[2])
               for p, n, h in zip((dense_p, expert_p), shards, held))

    inflight = pipeline_inflight_arrays(pp, vpp, num_microbatches)
    _, _, moe_layers = _layer_counts(model, layers)
    n_layers = model.layers if layers is None else np.asarray(layers, dtype=np.int64)
    s_local, h = model.seq_len // cp, model.hidden
    moe_ffn = (model.top_k + model.shared_experts) * model.expert_ffn

    saved_input = 1.0 if precision in ("fp8", "fp4") else 2.0  # see activations_per_layer_bytes

    def per_layer(code, ffn):
        return activations_per_layer_arrays(model.seq_len, b, h, model.heads, tp,
                                            sequence_parallel, code, ffn, model.kv_heads,
                                            model.ffn_type, flash_attention, cp, drop,
                                            saved_input, model.head_dim)

    layer = per_layer(rc, model.ffn_hidden)
    if model.moe_layers:  # a dense model's share of MoE layers is exactly 0 (skip the work)
        moe_share = moe_layers / n_layers
        saved = moe.saved_bytes_per_layer(s_local * b, h, model.experts, model.top_k, tp, et,
                                          routing_skew)
        # recompute "moe" keeps an MoE layer's input and attention only (MLP width 0)
        moe_layer = np.where(rc == 3, per_layer(rc, 0),
                             per_layer(rc, moe_ffn) + np.where(rc == 2, 0.0, saved))
        layer = (1 - moe_share) * layer + moe_share * moe_layer
    acts = layer * (n_layers / pp - offload_layers) * inflight
    sp = np.where(sequence_parallel, tp, 1)
    if drop:
        acts = acts + s_local * b * h * inflight / sp  # embedding dropout mask, 1 byte
    # pp == 1: final norm and output-layer inputs, FP32 logits (vocab split by TP)
    acts = np.where(pp == 1, acts + (4 * s_local * b * h / sp + 4 * s_local * b * model.vocab
                                     / tp), acts)
    # full recomputation rebuilds one layer's activations during its backward pass
    rebuilt = per_layer(0, model.ffn_hidden)
    if moe_ffn != model.ffn_hidden:
        rebuilt = np.maximum(rebuilt, per_layer(0, moe_ffn))
    if model.moe_layers:  # a rebuilt MoE layer keeps its copies too; one buffer in flight
        rebuilt = np.maximum(rebuilt, per_layer(0, moe_ffn) + saved)
        acts = acts + moe.transient_bytes(s_local * b, h, model.top_k, tp)
    acts = np.where(rc == 2, acts + rebuilt, acts)
    return {"weights_bytes": weights, "grads_bytes": grads, "optimizer_bytes": optimizer,
            "activations_bytes": acts,
            "total_bytes": weights + grads + optimizer + np.maximum(acts, copy) + reserve_bytes,
            "dense_params": dense_p, "expert_params": expert_p}


# -- inference ------------------------------------------------------------------------------
def kv_heads_per_gpu(model: Transformer, tp: int = 1) -> int:
    """KV heads one TP rank stores: kv_heads/tp, or one (replicated) when tp > kv_heads."""
    model = as_transformer("model", model)
    tp = checks.number("tp", tp, integer=True, positive=True)
    g = model.kv_heads_used
    if tp <= g:
        checks.divides("tp", tp, "kv_heads", g)
        return g // tp
    checks.divides("kv_heads", g, "tp", tp)
    return 1


def kv_cache_bytes(model: Transformer, context_len: int, batch: int = 1, dtype: str = "bf16",
                   tp: int = 1) -> float:
    """KV cache per GPU: 2 (K and V) x batch x context x layers x kv_heads x head_dim x bytes.
    Linear in context length and batch; GQA/MQA divide it by heads/kv_heads."""
    model = as_transformer("model", model)
    s = checks.number("context_len", context_len, integer=True, positive=True)
    b = checks.number("batch", batch, integer=True, positive=True)
    return (2.0 * b * s * model.layers * kv_heads_per_gpu(model, tp) * model.head_dim
            * dtype_bytes(dtype))


@dataclass(frozen=True)
class DecodeEstimate:
    """One decode step (one new token per sequence) on one GPU of a TP group."""

    weights_bytes: float  # weights read per step, per GPU
    kv_bytes: float  # KV cache read per step, per GPU
    compute_s: float
    memory_s: float
    time_s: float
    tokens_per_s: float  # across the batch
    bound: str


def decode_step(model: Transformer, batch: int, context_len: int, gpu, tp: int = 1,
                weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                precision: str = "bf16") -> DecodeEstimate:
    """Bandwidth-bound decode: each step reads the weights it touches and the whole KV cache.

    Time = max(bytes / HBM bandwidth, FLOPs / peak), TP ranks in parallel, communication not
    counted. For MoE the step reads the experts the batch routes to, in expectation
    E (1 - (1 - k/E)^batch) per layer under uniform routing.
    """
    model = as_transformer("model", model)
    g = resolve_gpu(gpu)
    b = checks.number("batch", batch, integer=True, positive=True)
    tp = checks.number("tp", tp, integer=True, positive=True)
    context_len = checks.number("context_len", context_len, integer=True, positive=True)
    checks.divides("tp", tp, "heads", model.heads)
    # an untied input table is gathered, not read: only the batch's rows leave HBM, and the
    # lookup is no GEMM; a tied table is read whole by the output layer. Learned positions are
    # always a gather, tied or not
    lookup = model.hidden * ((0 if model.tied_embeddings else model.vocab)
                             + (model.seq_len if model.learned_positions else 0))
    weights = model.params - lookup
    if model.is_moe:
        e, k = model.experts, model.top_k
        touched = e * (1 - (1 - k / e) ** b)
        weights -= model.moe_layers * (e - touched) * model.expert_params
    w_bytes = weights * dtype_bytes(weight_dtype) / tp
    kv = kv_cache_bytes(model, context_len, b, kv_dtype, tp)
    flops = (2.0 * (model.active_params - lookup) * b
             + 4.0 * b * context_len * model.layers * model.heads * model.head_dim) / tp
    compute_s = flops / g.peak_flops(precision)
    memory_s = (w_bytes + kv) / g.hbm_Bps
    t = max(compute_s, memory_s)
    return DecodeEstimate(w_bytes, kv, compute_s, memory_s, t, b / t,
                          "memory" if memory_s >= compute_s else "compute")


__all__ = ["check_offload", "fit_reason", "StateBytes", "model_state_bytes_per_param", "megatron_bytes_per_param",
           "activations_per_layer_bytes", "pipeline_inflight_microbatches", "ParamSplit",
           "params_per_gpu", "TrainingMemory", "training_memory", "kv_heads_per_gpu",
           "kv_cache_bytes", "DecodeEstimate", "decode_step", "state_bytes_arrays",
           "activations_per_layer_arrays", "pipeline_inflight_arrays", "params_per_gpu_arrays",
           "training_memory_arrays", "STATE_CONVENTIONS", "bytes_per_param",
           "trains_with_dropout"]
