"""The core of the step-time model, written once over numpy arrays of layouts.

:func:`companion.parallel.estimate` calls these with arrays of length one and
:func:`companion.search.search` with every candidate layout at once. What a layout costs is
described in :mod:`companion.parallel`; the kernels, collectives and memory here delegate to
the array forms of the library's formulas: :func:`companion.roofline.gemm_time_arrays` (every
GEMM of every distinct (tp, microbatch, cp, ep) shape in one numpy pass),
:func:`companion.roofline.attention`, :func:`companion.comm.collective_time_s`,
:func:`companion.moe.copies_per_token` (the MoE all-to-all) and
:func:`companion.memory.training_memory_arrays`. No Python loop runs per layout.

Beyond FLOPs and bytes, a step pays for what the issue-11 mechanisms name, each sourced where
its constant lives (:mod:`companion.calibration`): GEMMs at the rate a step sustains
(:func:`~companion.calibration.sustained_fraction`, FP4 from NVFP4 kernels), fused attention at
its published rate per GPU and sequence length, RoPE, cross-entropy and quantization at their
real byte counts (:func:`~companion.calibration.quantization_bytes`), overlapped collectives
slowing the compute they hide behind, a launch gap per kernel, ZeRO-2/3's reduce-scatter after
every microbatch and a gradient all-reduce that hides only behind the backward pass, whose last
bucket leaves only when that pass ends.
``Calibration(off=...)`` switches any of them off.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from companion import checks, hardware, moe
from companion.calibration import (attention_fraction, block_scaled_gemm_slowdown,
                                   linear_times, quantization_bytes, sustained_fraction)
from companion.comm import collective_time_s
from companion.fabric import (NCCL_NET_STEP_S, NCCL_NVLINK_STEP_S, Fabric, _bucketed_exposed_s,
                             megatron_bucket_count, megatron_default_bucket_params)
from companion.memory import training_memory_arrays
from companion.model import Transformer, as_transformer
from companion.roofline import attention

RECOMPUTE_CODE = {"none": 0, "selective": 1, "full": 2, "moe": 3}
ACT_BYTES = 2  # BF16/FP16 activations, as Megatron keeps them (FP8 only inside GEMMs)

# -- FLOPs conventions ------------------------------------------------------------------------
FLOP_CONVENTIONS = ("megatron", "bridge", "6n")


def _matmul_params_per_token(model: Transformer) -> float:
    """Weights each token multiplies: attention projections, active MLP, output layer."""
    h, d = model.hidden, model.head_dim
    attn = h * (model.heads + 2 * model.kv_heads_used) * d + model.heads * d * h
    mats = 3 if model.ffn_type == "swiglu" else 2
    dense_mlp = mats * h * model.ffn_hidden
    moe_mlp = mats * h * model.expert_ffn * (model.top_k + model.shared_experts)
    mlp = (model.layers - model.moe_layers) * dense_mlp + model.moe_layers * moe_mlp
    return model.layers * attn + mlp + model.vocab * h


def model_flops_per_token(model: Transformer, convention: str = "megatron") -> float:
    """Training FLOPs per token (forward and backward, no recomputation).

    ``megatron``: 6 x the weights a token multiplies (output layer included) + 12 s a d per
    layer for attention counted over the full s x s score matrix: Narayanan et al. 2021,
    Appendix (72 B s l h^2 (1 + s/6h + V/12lh) per step for GPT), earlier versions of
    Megatron-LM's ``num_floating_point_operations`` and NeMo's ``flops_formulas`` report this.
    ``bridge``: the same with causal attention (half the score matrix), as Megatron-Bridge's
    ``flop_utils`` counts it and Megatron-LM's current ``num_floating_point_operations`` does
    ("causal mask (only half of the mask is non-zero)"). ``6n``: 6 x active parameters, no
    attention (Kaplan et al. 2020).
    """
    model = as_transformer("model", model)
    checks.choice("convention", convention, FLOP_CONVENTIONS)
    if convention == "6n":
        return 6.0 * model.active_params
    attn = 12.0 * model.seq_len * model.heads * model.head_dim * model.layers
    return 6.0 * _matmul_params_per_token(model) + attn * (0.5 if convention == "bridge" else 1)


# -- kernels per (tp, microbatch tokens, ep) group ---------------------------------------------
@dataclass(frozen=True)
class _NoWaves:
    """A GPU spec without a published SM count: wave quantization is not applied."""

    gpu: object
    sm_count: int = 1

    @property
    def name(self):
        return self.gpu.name

    @property
    def hbm_Bps(self):
        return self.gpu.hbm_Bps

    def peak_flops(self, precision, sparse=False):
        return self.gpu.peak_flops(precision, sparse)


def _linear_times(g, cal, precision, shapes, n_rows):
    return linear_times(g, cal, precision, shapes, n_rows)


def _kernels(model, g, cal, st, precision, t, mb, cp, ep, et=None, skew=1.0):
    """Forward and backward times (s) of one layer's kernels, one microbatch, one GPU, for
    arrays of (tp, microbatch, cp, ep, etp): dense layer, MoE layer and output layer (forward,
    backward), attention core (forward, backward) and the bytes of a materialized score
    matrix. The MoE layer's grouped GEMMs run on the busiest rank (``skew`` times the mean
    tokens per expert, :func:`companion.moe.rows_per_expert`), its router and permutation at
    their HBM bytes."""
    s, h, a, kv, d = model.seq_len, model.hidden, model.heads, model.kv_heads_used, model.head_dim
    sl = s // cp
    m = mb * sl
    up = 2 if model.ffn_type == "swiglu" else 1
    # FP8/FP4 recipes (Transformer Engine's defaults, NeMo's and Megatron-Bridge's FP8 runs)
    # quantize the transformer layers' linear layers only. The attention core and the output
    # layer stay in 16-bit: Megatron-Core builds the output layer from its own
    # tensor_parallel.ColumnParallelLinear, not from a Transformer Engine module.
    p16 = "fp16" if precision == "fp16" else "bf16"
    shapes = [(m, (a + 2 * kv) * d // t, h, 1), (m, h, a * d // t, 1),
              (m, up * model.ffn_hidden // t, h, 1), (m, h, model.ffn_hidden // t, 1)]
    if model.is_moe:
        et = t if et is None else et
        fe, local = model.expert_ffn, model.experts // ep
        rows = moe.rows_per_expert(m, model.top_k, model.experts, ep, et, t, skew)
        shapes += [(-(-m // t), model.experts, h, 1), (rows, up * fe // et, h, local),
                   (rows, h, fe // et, local)]
        if model.shared_experts:
            fs = model.shared_experts * fe
            shapes += [(m, up * fs // t, h, 1), (m, h, fs // t, 1)]
    fwd, bwd = _linear_times(g, cal, precision, shapes, len(t))
    if precision == "fp8" and st.fp8_scaling == "mxfp8":  # block-scaled kernels
        fwd, bwd = fwd * block_scaled_gemm_slowdown(), bwd * block_scaled_gemm_slowdown()
    if model.is_moe:  # the expert loop's cost per local expert GEMM
        loop = moe.expert_loop_s(model.experts // ep) if "launch" not in cal.off else (0.0, 0.0)
    lf, lb = _linear_times(g, cal, p16, [(m, -(-model.vocab // t), h, 1)], len(t))
    zero = np.zeros(len(t))
    out = {"logits": lf[0], "logits_b": lb[0]}
    for key, x in (("", fwd), ("_b", bwd)):
        attn_proj = x[0] + x[1]
        out["dense" + key] = attn_proj + x[2] + x[3]
        moe_s = zero
        if model.is_moe:
            moe_s = attn_proj + x[4] + x[5] + x[6] + (
                moe.permute_bytes(m, h, model.top_k, t)
                + moe.router_bytes(m, model.experts, model.top_k, t)) / (
                g.hbm_Bps * cal.hbm_efficiency)
            if model.shared_experts:
                moe_s = moe_s + x[7] + x[8]
            moe_s = moe_s + loop[key == "_b"]
        out["moe" + key] = moe_s
        out["moe_mlp" + key] = moe_s - attn_proj if model.is_moe else zero
    if st.flash_attention:
        flops = attention(s, a, d, kv_heads=kv, causal=st.causal, flash=True).flops * mb / (t * cp)
        spec = getattr(g, "gpu", g)
        rate = g.peak_flops(p16) * sustained_fraction(spec, p16, cal)
        kernel = st.attention_kernel
        core = flops / (rate * _attention_fractions(spec, "fwd", sl, cal, kernel))
        core_b = 2.5 * flops / (rate * _attention_fractions(spec, "bwd", sl, cal, kernel))
        out.update(core=core, core_b=core_b, score_bytes=zero)
    else:  # Megatron's unfused path: two batched GEMMs and a materialized score matrix
        heads = mb * a // t
        f, b = _linear_times(g, cal, p16, [(sl, s, d, heads), (sl, d, s, heads)], len(t))
        out.update(core=f[0] + f[1], core_b=b[0] + b[1], score_bytes=heads * sl * s * ACT_BYTES)
    return out


def _attention_fractions(spec, direction, seq, cal, kernel="cudnn"):
    """:func:`companion.calibration.attention_fraction` over an array of sequence lengths."""
    seq = np.asarray(seq)
    vals = {int(x): attention_fraction(spec, direction, int(x), cal, kernel)
            for x in np.unique(seq)}
    return np.vectorize(vals.__getitem__, otypes=[float])(seq) if seq.ndim else vals[int(seq)]


def _codes(k):
    """Each value of a nonnegative integer array replaced by its rank among the distinct
    values, and the number of distinct values; linear time for small values."""
    top = int(k.max()) + 1
    if top > 4 * len(k) + 4096:
        values, inv = np.unique(k, return_inverse=True)
        return inv.ravel(), len(values)
    seen = np.zeros(top, dtype=bool)
    seen[k] = True
    rank = np.cumsum(seen) - 1
    return rank[k], int(rank[-1]) + 1


def _groups(keys):
    """Distinct rows of nonnegative integer key columns: (one representative row index per
    group, each row's group). Layouts share kernels: many rows, few distinct shapes."""
    code, size = np.zeros(len(keys[0]), dtype=np.int64), 1
    for k in keys:
        c, r = _codes(np.asarray(k, dtype=np.int64))
        code, size = code * r + c, size * r
    inv, n_groups = _codes(code) if size < 2 ** 62 else _codes_wide(keys)
    first = np.empty(n_groups, dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv) - 1, -1, -1)
    return first, inv


def _codes_wide(keys):
    _, inv = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    return inv.ravel(), int(inv.max()) + 1


# -- collectives -------------------------------------------------------------------------------
def _span(n, stride, cl):
    """Members per scale-up domain and domains spanned by a group of ``n`` ranks whose
    neighbours are ``stride`` ranks apart (Megatron orders ranks tp, cp, dp, pp)."""
    per = np.where(stride >= cl.gpus_per_domain, 1,
                   np.minimum(n, np.maximum(1, cl.gpus_per_domain // np.maximum(stride, 1))))
    return per, np.ceil(n / per).astype(np.int64)


def _fabric(cl, cal, per):
    return Fabric(int(per), cl.scaleup_Bps * cal.scaleup_efficiency,
                  cl.scaleout_Bps * cal.scaleout_efficiency)


def _all_reduce_s(size, n, stride, cl, cal):
    """Ring all-reduce of ``size`` bytes per GPU over a group: reduce-scatter and all-gather
    inside each domain, all-reduce of the shard across domains. This is
    :func:`companion.fabric.hierarchical_all_reduce_time_s` (ring) with the domain size an
    array, built from the same :func:`companion.comm.collective_time_s` calls."""
    per, dom = _span(n, stride, cl)
    intra = 2 * collective_time_s("all_gather", size, per, cl.scaleup_Bps * cal.scaleup_efficiency,
                                  NCCL_NVLINK_STEP_S)
    inter = collective_time_s("all_reduce", size / per, dom,
                              cl.scaleout_Bps * cal.scaleout_efficiency, NCCL_NET_STEP_S)
    return np.where(n > 1, intra + inter, 0.0)


def _all_to_all_s(tokens, n, stride, world, model, gpu, cl, cal, st, fp8, skew, rc):
    """All-to-all seconds of one MoE layer per microbatch (forward, backward, recomputed
    forward) for arrays of expert-parallel groups of ``n`` ranks ``stride`` (= ETP) apart in a
    job of ``world`` ranks: copies per token over NVLink and the network from
    :func:`companion.moe.copies_per_token` (exact fractional domains, the stack's
    dispatcher), achieved bandwidths from :func:`companion.moe.achieved_Bps`."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in (tokens, n, stride, world, fp8, rc)))
    tokens, n, stride, world, fp8, rc = (np.broadcast_to(x, shape).ravel()
                                         for x in (tokens, n, stride, world, fp8, rc))
    nvl, net = np.zeros(len(n)), np.zeros(len(n))
    first, inv = _groups([n, stride, world])
    how = moe.dispatcher_for(st)
    for j, (e, s, w) in enumerate(zip(*(x[first].tolist() for x in (n, stride, world)))):
        nvl[inv == j], net[inv == j] = moe.copies_per_token(
            how, e, s, cl.gpus_per_domain, model.experts, model.top_k, w,
            groups=model.router_groups, group_topk=model.router_group_topk)
    up_Bps, out_Bps = moe.achieved_Bps(gpu, cl.scaleup_Bps, cl.scaleout_Bps,
                                       cal.scaleup_efficiency)
    kw = dict(nvlink_copies=nvl, network_copies=net, nvlink_Bps=up_Bps, network_Bps=out_Bps,
              routing_skew=skew, recompute_forward=_reruns_moe(rc),
              nvlink_latency_s=NCCL_NVLINK_STEP_S,
              network_latency_s=NCCL_NET_STEP_S)
    out = np.where(fp8 == 1, moe.layer_all_to_all_s(tokens, model.hidden, "fp8", **kw),
                   moe.layer_all_to_all_s(tokens, model.hidden, "bf16", **kw))
    return np.where(n > 1, out, 0.0).reshape(shape)


def _queue_ordered(gpu, st, model) -> bool:
    """Whether the GPU runs kernels in the order the host queued them, which Hopper's TP and
    CP overlaps need: Megatron-Bridge runs Hopper with CUDA_DEVICE_MAX_CONNECTIONS=1 "to
    enforce kernel queuing order ... Otherwise, communication kernel will be pushed to the
    end of the GEMM kernel, failing to overlap the kernels", except when the expert overlap
    is on (``scripts/performance/perf_plugins.py``, ``_set_num_cuda_device_max_connections``:
    8, or 32 with DeepEP or HybridEP; the Megatron MoE model zoo's ``sbatch_benchmarking.sh``
    sets 32 with ``A2A_OVERLAP=1`` and 1 without). Blackwell (compute capability 10 and up)
    runs 32 connections either way and overlaps TP regardless."""
    if not (st.overlap_ep and model.is_moe):
        return True
    major = hardware.compute_major(gpu)
    return major == 0 or major >= 10


def _reruns_moe(rc):
    # full recompute and MoE recompute run an MoE layer's forward (dispatch included) twice
    return (rc == RECOMPUTE_CODE["full"]) | (rc == RECOMPUTE_CODE["moe"])


def _send_s(size, stride, cl, cal):
    cross = stride >= cl.gpus_per_domain
    up = collective_time_s("send_recv", size, 2, cl.scaleup_Bps * cal.scaleup_efficiency,
                           NCCL_NVLINK_STEP_S)
    out = collective_time_s("send_recv", size, 2, cl.scaleout_Bps * cal.scaleout_efficiency,
                            NCCL_NET_STEP_S)
    return np.where(cross, out, up)


# -- memory -------------------------------------------------------------------------------------
def memory_arrays(model, gpu, st, X, reserve_bytes=0.0, precision="bf16"):
    """Per-GPU memory for arrays of layouts: :func:`companion.memory.training_memory_arrays`
    (the code behind :func:`companion.memory.training_memory`) over every row. Uneven
    pipelines are priced on their fullest stage: a model padded to ``pp x stage_layers``
    layers. A layout fits if it needs no more than the driver-visible HBM
    (``GPU.usable_hbm_bytes``). The gradient buffer holds the stack's reduce dtype:
    Megatron-Core's DDP allocates it as ``torch.float if grad_reduce_in_fp32 else
    param.dtype`` (``megatron/core/distributed/distributed_data_parallel.py``)."""
    k = X
    r = training_memory_arrays(
        model, tp=k["tp"], pp=k["pp"], dp=k["dp"], cp=k["cp"], ep=k["ep"], vpp=k["vpp"],
        microbatch=k["mb"], num_microbatches=k["m"], sequence_parallel=k["sp"].astype(bool),
        recompute=k["rc"], stage=k["zero"], precision=precision,
        flash_attention=st.flash_attention, reserve_bytes=reserve_bytes,
        grad_bytes=st.grad_reduce_bytes,
        layers=k["pp"] * k["stage_layers"], etp=k.get("etp"), routing_skew=_one_skew(k),
        offload_layers=k.get("offload", 0))
    total = r.pop("total_bytes")
    return {**r, "memory_bytes": total, "fits": total <= gpu.usable_hbm_bytes}


# -- the step ----------------------------------------------------------------------------------
REPLICATED_BYTES = 22  # per token-channel, fwd: 2 norms (4+4), 2 bias-dropout-adds (7+7)
# HBM bytes per parameter of a mixed-precision Adam step as Megatron runs it: unscale and
# inf-check the FP32 gradient (read 4, write 4), clip by global norm (read 4), fused Adam
# (read param, grad, m, v: 16; write param, m, v: 12), copy FP32 params to 16-bit (read 4,
# write 2), zero the gradient buffer (write 4).
OPTIMIZER_BYTES = 50
# Low-precision GEMMs: Transformer Engine reads each 16-bit GEMM input and writes an 8-bit
# copy (3 bytes per element) in the forward pass; the backward pass casts the output gradient
# and writes the transposed 8-bit copies Hopper's FP8 tensor cores need (TN layout only), about
# 5 bytes per element (NVIDIA Transformer Engine documentation, "Using FP8 with Transformer
# Engine": per-tensor scaling with amax history, casts fused with the transpose).
FP8_CAST_BYTES, FP8_CAST_BWD_BYTES = 3, 5
# Current (per-step) scaling needs each tensor's amax before it can cast: one more read of the
# 16-bit tensor, 2 bytes per element, in each direction (the delayed recipe takes its scale from
# the amax history instead). companion.speedup counts the same extra read.
AMAX_READ_BYTES = 2
# Rotary embeddings (Llama-style models): read and write every query and key element once in
# each direction (2 + 2 bytes, the fused RoPE kernel of Transformer Engine / Apex).
ROPE_BYTES = 4
# Cross-entropy over the vocabulary, bytes per logit for forward and backward together. Fused
# (Megatron-Core's cross_entropy_loss_fusion): one read of the 16-bit logits for max and sum,
# one read and one 16-bit write of their gradient: 6. Unfused (Megatron-LM 2021-22,
# vocab_parallel_cross_entropy on logits.float()): upcast (read 2, write 4), max (read 4),
# subtract, exp and divide in place (read 4, write 4 each), sum (read 4); backward scale in
# place (read 4, write 4) and cast back (read 4, write 2): 52.
CE_BYTES = {True: 6, False: 52}
# Kernels per layer and microbatch of a Megatron-Core layer with Transformer Engine, forward:
# two norms, four GEMMs, RoPE, attention, SwiGLU/GeLU, two bias-dropout-adds, one spare for
# the TP collectives' launches. Backward, twice that, an approximate count: eight GEMMs (dgrad
# and wgrad per linear layer), two kernels per norm (input gradient, weight-gradient
# reduction), three for fused attention (the dO.O pre-pass, the main kernel, the dQ
# conversion), two for RoPE (Q and K), one each for SwiGLU and the two bias-dropout-adds, two
# residual-gradient adds and two spares for the collectives. FP8/FP4 add a cast per GEMM input (forward) and a cast and
# transpose per gradient (backward); current scaling an amax reduction before each cast.
KERNELS_PER_LAYER = (12, 24)
CAST_KERNELS_PER_LAYER = (4, 8)
AMAX_KERNELS_PER_LAYER = (4, 4)


def layer_kernels(precision: str, st) -> tuple[int, int]:
    """Kernels one layer launches per microbatch, (forward, backward): ``KERNELS_PER_LAYER``,
    plus the casts of FP8/FP4 GEMM inputs and, with current scaling, their amax reductions."""
    kf, kb = KERNELS_PER_LAYER
    if precision in ("fp8", "fp4"):
        kf, kb = kf + CAST_KERNELS_PER_LAYER[0], kb + CAST_KERNELS_PER_LAYER[1]
        if st.fp8_scaling == "current":
            kf, kb = kf + AMAX_KERNELS_PER_LAYER[0], kb + AMAX_KERNELS_PER_LAYER[1]
    return kf, kb


def overlap_host_kernels(model, precision: str, st, ep, recompute=0):
    """Kernels the host issues for one layer and microbatch under the batch-level expert
    overlap: the layer's (:func:`layer_kernels`; its forward again under full recomputation)
    and, for the MoE share of the layers, each local expert's GEMMs
    (``companion.moe.EXPERT_GEMMS``: two forward, again when the MoE layer is recomputed,
    and four backward). ``ep`` and ``recompute`` (codes of ``RECOMPUTE_CODE``) numbers or
    arrays."""
    kf, kb = layer_kernels(precision, st)
    rc = np.asarray(recompute)
    fm = model.moe_layers / model.layers
    gf, gb = moe.EXPERT_GEMMS
    return (kf * (1 + (rc == RECOMPUTE_CODE["full"])) + kb
            + fm * (model.experts // np.asarray(ep)) * (gf * (1 + _reruns_moe(rc)) + gb))


def _one_skew(X) -> float:
    # Routing skew sets GEMM shapes, which are priced once per distinct shape: one value a call
    skew = np.unique(np.asarray(X.get("skew", 1.0), dtype=np.float64))
    if len(skew) != 1:
        raise ValueError(f"routing_skew must be one value per call; got {skew.tolist()}")
    return float(skew[0])


def step_arrays(model, gpu, cl, cal, st, precision, X):
    """Step-time breakdown (seconds, arrays) for arrays of layouts ``X`` (keys tp, pp, dp,
    cp, ep, vpp, mb, m, sp, rc, zero, stage_layers, grad_bytes, and dense_params and
    expert_params from the memory model; optional etp, skew, fp8_dispatch, embed_loss). See
    the module docstring."""
    g = gpu if gpu.sm_count is not None else _NoWaves(gpu)
    t, p, d, c, e, v, mb, m = (X[k] for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "mb", "m"))
    sp, rc, lst = X["sp"].astype(bool), X["rc"], X["stage_layers"]
    # kernels depend on (tp, microbatch, cp, ep, etp) only: priced once per distinct shape
    et, skew = X.get("etp", t), _one_skew(X)
    shape = np.broadcast_shapes(t.shape, mb.shape, c.shape, e.shape, et.shape)
    keys = [np.broadcast_to(k, shape).ravel() for k in (t, mb, c, e, et)]
    first, inv = _groups(keys)
    kern = {key: val[inv].reshape(shape) for key, val in _kernels(
        model, g, cal, st, precision, *(k[first] for k in keys), skew=skew).items()}
    dense, dense_b, moe, moe_b, logits, logits_b, core, core_bwd, score_b = (kern[k] for k in (
        "dense", "dense_b", "moe", "moe_b", "logits", "logits_b", "core", "core_b",
        "score_bytes"))
    fm = model.moe_layers / model.layers
    memory = "memory" not in cal.off
    gemm = (1 - fm) * dense + fm * moe
    gemm_b = (1 - fm) * dense_b + fm * moe_b
    hbm = g.hbm_Bps * cal.hbm_efficiency
    tokens = mb * (model.seq_len // c)
    up = 6 if model.ffn_type == "swiglu" else 4
    ffn = (1 - fm) * model.ffn_hidden + fm * (model.top_k + model.shared_experts) * model.expert_ffn
    rope = 0 if model.learned_positions or not memory else ROPE_BYTES * (
        model.heads + model.kv_heads_used) * model.head_dim / t
    elem = (REPLICATED_BYTES * tokens * model.hidden / np.where(sp, t, 1)
            + (up * ffn / t + rope) * tokens) / hbm
    score_f, score_b = 4.5 * score_b / hbm, 5.5 * score_b / hbm  # 9 and 11 bytes per score
    cast, cast_b = 0.0, 0.0
    if precision in ("fp8", "fp4"):  # Transformer Engine quantizes every GEMM input
        # an MoE layer quantizes each dispatched copy: its experts' FC1 reads top_k copies of
        # the hidden vector (and a shared expert one more) where a dense MLP reads one, and
        # their FC2 output gradients come back as as many copies; an FP8 dispatch quantizes
        # each token once, before it leaves (fm = 0: a dense model has no copies)
        copies = fm * (model.top_k + (1 if model.shared_experts else 0) - 1) * model.hidden
        copies_f = copies - fm * (model.top_k - 1) * model.hidden * X.get("fp8_dispatch", 0)
        gemm_in = tokens * (2 * model.hidden + copies_f
                            + (model.heads * model.head_dim + ffn) / t)
        amax = AMAX_READ_BYTES if st.fp8_scaling == "current" else 0
        if memory:
            # forward inputs, backward output gradients at the published cost per element;
            # weights once per step (Megatron-Core passes is_first_microbatch, so Transformer
            # Engine caches their quantized copies across microbatches)
            q = quantization_bytes("fp4_nvfp4" if precision == "fp4"
                                   else f"fp8_{st.fp8_scaling}", cal, gpu)
            grads = tokens * (((model.heads + 2 * model.kv_heads_used) * model.head_dim
                               + (up // 2) * ffn) / t + 2 * model.hidden + copies)
            weights = (X["dense_params"] + X["expert_params"]) / lst / m
            cast, cast_b = q * (gemm_in + weights) / hbm, q * grads / hbm
        else:  # a byte budget: 3 bytes forward, 5 backward, per forward input
            cast = (FP8_CAST_BYTES + amax) * gemm_in / hbm
            cast_b = (FP8_CAST_BWD_BYTES + amax) * gemm_in / hbm
    kf, kb = layer_kernels(precision, st)
    gap = 0.0 if "launch" in cal.off else cal.graph_gap_s if st.cuda_graphs else cal.kernel_gap_s
    fwd = gemm + core + elem + score_f + cast
    bwd = gemm_b + core_bwd + 2 * elem + score_b + cast_b
    rec = np.select([rc == 2, rc == 1, rc == 3],
                    [fwd, core + score_f, core + score_f + fm * kern["moe_mlp"]], 0.0)
    launch = (kf * (1 + (rc == 2)) + kb) * gap
    ce = tokens * -(-model.vocab // t) * CE_BYTES[st.fused_cross_entropy] / hbm * memory

    # overlapped collectives slow the compute they hide behind (SMs taken, power-capped clock)
    slow = 0.0 if "overlap" in cal.off else cal.overlap_slowdown
    act = tokens * model.hidden * ACT_BYTES
    n_ar = 4 + 2 * (rc == 2) + (sp & (rc != 2))  # SP re-gathers its input in backward
    tp_comm = n_ar * _all_reduce_s(act, t, 1, cl, cal)
    ordered = _queue_ordered(gpu, st, model)
    tp_x = np.maximum(0.0, tp_comm - gemm - gemm_b) if st.overlap_tp and ordered else tp_comm
    kv = 2 * act * model.kv_heads_used / model.heads / t
    # Ring attention as Transformer Engine runs it (AttnFuncWithCPAndKVP2P): c steps, each a
    # fused-attention call on one KV block while the next block is in flight; c - 1 sends
    # forward (K and V), twice that backward (K, V and their gradients travel on). A send
    # hides only behind its own step's kernel, not behind the whole pass.
    send = _send_s(kv, t, cl, cal) * (c > 1)
    steps = np.maximum(c, 1)
    cp_comm = (c - 1) * (3 + (rc == 2)) * send
    cp_x = (c - 1) * (np.maximum(0.0, send - core / steps) * (1 + (rc == 2))
                      + np.maximum(0.0, 2 * send - core_bwd / steps)) if ordered else cp_comm
    ep_comm = np.zeros_like(gemm)
    if model.is_moe:
        ep_comm = fm * _all_to_all_s(tokens / t, e, et, t * c * d * p, model, gpu, cl, cal, st,
                                     X.get("fp8_dispatch", 0), skew, rc)
    # Batch-level overlap (Megatron-Core's combined 1F1B, TransformerLayerSchedulePlan.run)
    # pairs each all-to-all of one microbatch with a sub-module of the other: the combine's
    # backward with attention forward, dispatch forward and backward with the expert MLP's
    # backward and forward, the combine forward with attention backward. A transfer longer
    # than its partner stays exposed; of what the partners could cover, a fraction is hidden.
    ep_x = ep_comm
    if st.overlap_ep and model.is_moe:
        mlp_f, mlp_b = kern["moe_mlp"], kern["moe_mlp_b"]
        quarter = ep_comm / 4
        cover = (np.minimum(quarter, fm * (moe - mlp_f + core))
                 + np.minimum(2 * quarter, fm * (mlp_f + mlp_b))
                 + np.minimum(quarter, fm * (moe_b - mlp_b + core_bwd)))
        ep_x = ep_comm - cal.ep_overlap_hidden * cover
    overlap = slow * (tp_comm - tp_x + cp_comm - cp_x + ep_comm - ep_x)
    # Megatron-Core's token dispatchers (all-to-all, DeepEP, HybridEP) block the host once per
    # MoE layer forward on a device-to-host copy of the routing counts; the GPU then idles
    # while the host launches the rest of the layer. Recomputing the layer blocks again. Only
    # whole-step CUDA graphs with a sync-free MoE path (fixed-capacity buffers) avoid it.
    sync = 0.0 if st.cuda_graphs or "host" in cal.off else (
        fm * cal.moe_sync_s * (1 + _reruns_moe(rc)))
    per_layer = fwd + bwd + rec + tp_x + cp_x + ep_x + launch + overlap + sync
    # The batch-level overlap issues one microbatch's forward sub-modules and the other's
    # backward ones from Python, layer by layer, and the dispatcher's host sync drains the
    # queue every layer: eager, the host cannot run ahead, so a layer takes at least the
    # host's time to issue its kernels (each local expert's GEMMs among them). Megatron-Bridge
    # runs the overlap only with EP > 1 (comm_overlap.py asserts expert_model_parallel_size > 1).
    host_x = 0.0
    if st.overlap_ep and model.is_moe and not st.cuda_graphs and "overlap_host" not in cal.off:
        kernels = overlap_host_kernels(model, precision, st, e, rc)
        host_x = np.maximum(0.0, kernels * cal.overlap_host_kernel_s - per_layer) * (e > 1)
        per_layer = per_layer + host_x
    # The last stage runs the output layer and the loss. Where the split gives the loss a
    # layer's slot (Megatron's account_for_loss_in_pipeline_split) it holds one layer fewer,
    # and the slowest stage is whichever of it and a full middle stage takes longer.
    head = logits + logits_b + ce
    crit, out, t_mb = lst, 1.0, lst * per_layer + head
    if "embed_loss" in X:
        fewer = X["embed_loss"] * (p > 1)
        last = (lst - fewer) * per_layer + head
        out = last >= lst * per_layer  # the critical stage is the last one
        crit = np.where(out, lst - fewer, lst)
        t_mb = np.maximum(last, lst * per_layer)
    bubble = (p - 1) / v * t_mb

    # Megatron overlaps pipeline sends only in the interleaved schedule; overlapped sends still
    # sit on the fill and drain: the first microbatch crosses all p v - 1 chunk boundaries
    # forward and the last one backward, with nothing to hide behind
    sends = 2 * np.where(st.overlap_p2p & (v > 1), p * v - 1, m * v) * (p > 1)
    p2p = sends * _send_s(act / t, t * c * d, cl, cal)
    dp_comm, dp_x = _data_parallel(X, cl, cal, st, m, crit * fwd, crit * (bwd + rec))
    dp_overlap = slow * (dp_comm - dp_x)
    local = X["dense_params"] + X["expert_params"]
    shards = np.where(X["zero"] >= 1, d * c, 1)  # expert state shards fewer ways; first order
    optimizer = OPTIMIZER_BYTES * local / shards / hbm

    steady = m * t_mb
    total = steady + bubble + p2p + dp_x + dp_overlap + optimizer
    n_layers = m * crit
    return {
        "step_time_s": total,
        "gemm_s": n_layers * (gemm + gemm_b) + m * out * (logits + logits_b),
        "attention_s": n_layers * (core + core_bwd),
        "elementwise_s": n_layers * (3 * elem + score_f + score_b
                                     + cast + cast_b) + m * out * ce,
        "recompute_s": n_layers * rec,
        "launch_s": n_layers * launch, "moe_sync_s": n_layers * sync,
        "overlap_host_s": n_layers * host_x,
        "overlap_slowdown_s": n_layers * overlap + dp_overlap,
        "tp_comm_s": n_layers * tp_comm, "tp_exposed_s": n_layers * tp_x,
        "cp_comm_s": n_layers * cp_comm, "cp_exposed_s": n_layers * cp_x,
        "ep_comm_s": n_layers * ep_comm, "ep_exposed_s": n_layers * ep_x,
        "pp_p2p_s": p2p, "bubble_s": bubble,
        "dp_comm_s": dp_comm, "dp_exposed_s": dp_x, "optimizer_s": optimizer,
    }


def _data_parallel(X, cl, cal, st, m, fwd_window, bwd_window):
    """Gradient and parameter collectives of data parallelism per step, and their exposed
    part. ZeRO stage 0 all-reduces the gradients once, during the last microbatch's backward
    pass (the only time they are ready); the distributed optimizer (stage 1) reduce-scatters
    them then and all-gathers the 16-bit parameters during the next forward pass
    (``--overlap-param-gather``). Stages 2 and 3 keep only a shard of the gradients, so they
    reduce-scatter after every microbatch's backward pass (DeepSpeed issue 2252), and stage 3
    also gathers the parameters in every forward and backward pass. With the overlap on, each
    goes out in buckets (:func:`_buckets`), every bucket a collective with its own latency,
    and what the window cannot hide is :func:`companion.fabric.bucketed_exposed_s`."""
    t, d, c, e = X["tp"], X["dp"], X["cp"], X["ep"]
    gb, z = X["grad_bytes"], X["zero"]
    if "fp32_grads" in cal.off:
        gb = np.minimum(gb, 2)
    if "zero" in cal.off:  # the former model: one reduce-scatter, a whole-step window
        bwd_window = fwd_window + bwd_window
    dense_dp = _all_reduce_s(X["dense_params"] * gb, d * c, t, cl, cal)
    et = X.get("etp", t)  # expert weights are replicated over the expert-DP group
    expert_dp = _all_reduce_s(X["expert_params"] * gb, t * d * c // (et * e), et * e, cl, cal)
    grads = dense_dp + expert_dp
    rs, ag = 0.5 * grads, 0.5 * grads * 2 / gb  # reduce-scatter gb-byte grads, gather 2-byte
    per_rs = np.where((z >= 2) & ("zero" not in cal.off), m, 1)
    per_ag = np.where(z == 3, 2 * m, 1)
    # without the overlap Megatron-Core makes one bucket of everything (bucket_size = None)
    buckets = "buckets" not in cal.off and st.overlap_grad_reduce
    if buckets:
        v, k = _buckets(X, st, d * c)
        # every bucket is its own collective and pays its latency: half an all-reduce's for
        # a reduce-scatter or a gather
        lat = 0.5 * _all_reduce_s(0.0 * grads, d * c, t, cl, cal)
        calls = v - 1 + k
        extra = (calls - 1) * lat
        rs, ag, grads = rs + extra, ag + extra, grads + 2 * extra
    comm = np.where(z >= 1, per_rs * rs + per_ag * ag, grads)
    if not st.overlap_grad_reduce:
        return comm, comm
    if not buckets:  # one collective each, hidden up to its window (mechanism switched off)
        return comm, np.where(z >= 1, np.maximum(0.0, per_rs * (rs - bwd_window))
                              + np.maximum(0.0, per_ag * ag - np.where(
                                  z == 3, m * (fwd_window + bwd_window), fwd_window)),
                              np.maximum(0.0, grads - bwd_window))

    def exposed(pass_s, call_lat, window_s, passes):
        # ZeRO-2/3 send every microbatch's gradients (and gather the parameters twice), each
        # time in the same buckets; only the step's last bucket has nothing to hide behind
        data = np.maximum(0.0, pass_s - calls * call_lat) / v  # one model chunk's bytes
        return _bucketed_exposed_s(data / k + call_lat, window_s / passes, k, chunks=v,
                                  chunk_s=data + call_lat, passes=passes)

    # the gradient stream: a reduce-scatter per pass (ZeRO 1-3) or one all-reduce (ZeRO 0)
    sharded = z >= 1
    grad_x = exposed(np.where(sharded, rs, grads), np.where(sharded, lat, 2 * lat),
                     per_rs * bwd_window, per_rs)
    ag_x = exposed(ag, lat, np.where(z == 3, m * (fwd_window + bwd_window), fwd_window), per_ag)
    return comm, grad_x + np.where(sharded, ag_x, 0.0)


def _buckets(X, st, dp_cp):
    """Model chunks and buckets of the critical stage's gradients, ``(vpp, k)``. Megatron-Core's
    DDP (ZeRO 0 and 1) fills buckets of ``bucket_size`` parameters (the stack's
    ``ddp_bucket_params``, else :func:`~companion.fabric.megatron_default_bucket_params`) in
    backward order, closing one at the first parameter past the size (so ceil(P / size) of
    them: the remainder is a bucket of its own), and sends each when it is full: the last
    leaves only when the backward pass ends. It buckets only the first pipeline stage's first
    model chunk (``distributed_data_parallel.py``: later stages and chunks are "not on the
    critical path"); each later chunk is one piece. Megatron-FSDP (ZeRO 2 and 3) communicates per
    unit module, ``[TransformerLayer]`` by default: one bucket per layer of the stage."""
    size = st.ddp_bucket_params or megatron_default_bucket_params(dp_cp)
    fsdp = X["zero"] >= 2
    v = np.where(fsdp, 1, np.maximum(X["vpp"], 1))
    local = X["dense_params"] + X["expert_params"]
    k = np.where(fsdp, X["stage_layers"], megatron_bucket_count(local / v, size))
    return v, k


# -- one layout --------------------------------------------------------------------------------
def check_split(uneven_stages, embedding_loss_slots) -> None:
    """The two ways to split a pipeline whose pp x vpp does not divide the layers, each a
    bool, and at most one of them."""
    checks.boolean("uneven_stages", uneven_stages)
    checks.boolean("embedding_loss_slots", embedding_loss_slots)
    if uneven_stages and embedding_loss_slots:
        raise ValueError("uneven_stages and embedding_loss_slots are two ways to split a "
                         "pipeline; pass at most one")


def needs_slots(layers: int, pp, vpp):
    """Where pp x vpp divides layers + 2 but not the layers (arrays broadcast): the splits
    that run only with the embedding and the loss in a layer's slot each."""
    pv = np.asarray(pp) * np.asarray(vpp)
    return (np.asarray(pp) > 1) & (layers % pv != 0) & ((layers + 2) % pv == 0)


def stage_layers(layers: int, pp, vpp, uneven: bool = False, embedding_loss: bool = False):
    """Layers on the fullest pipeline stage: layers/pp, or with ``uneven`` stages
    ceil(layers / (pp vpp)) vpp (the last stage takes what is left), or with
    ``embedding_loss`` slots (layers + 2)/pp: the embedding and the loss each fill one layer's
    slot, so the first and last stages hold one layer fewer. Arrays of pp and vpp are the
    search's, already valid; a single layout is checked here."""
    if np.ndim(pp) == 0 and np.ndim(vpp) == 0:
        return _stage_layers_one(layers, pp, vpp, uneven, embedding_loss)
    if embedding_loss:
        return np.where(pp > 1, (layers + 2) // pp, layers)
    if uneven:
        return -(-layers // (pp * vpp)) * vpp
    return layers // pp


def _stage_layers_one(layers, pp, vpp, uneven, embedding_loss) -> int:
    layers = checks.number("layers", layers, integer=True, positive=True)
    pp = checks.number("pp", pp, integer=True, positive=True)
    vpp = checks.number("vpp", vpp, integer=True, positive=True)
    if embedding_loss and pp > 1:
        checks.divides("pp * vpp", pp * vpp, "layers + 2 (the embedding and loss slots)",
                       layers + 2)
        return (layers + 2) // pp
    if uneven:  # some virtual stages may be left empty (Megatron's pipeline layouts allow it)
        return -(-layers // (pp * vpp)) * vpp
    checks.divides("pp * vpp", pp * vpp, "layers", layers)
    return layers // pp


def derived_arrays(model, gpu, X, bd, mem, st, precision, convention):
    """MFU, HFU, model TFLOP/s per GPU and tokens/s from a breakdown (arrays).

    MFU counts model FLOPs in ``convention``; HFU counts the FLOPs the GPUs execute whatever
    the convention: attention as the kernels run it (causal blocks skipped by fused kernels,
    the whole score matrix by Megatron's unfused path) plus recomputation. With the default
    causal convention HFU >= MFU always; the ``megatron`` convention counts attention FLOPs a
    fused causal kernel never runs, so its MFU can exceed the HFU."""
    n = X["tp"] * X["pp"] * X["dp"] * X["cp"]
    tokens = X["m"] * X["mb"] * X["dp"] * model.seq_len
    model_flops = model_flops_per_token(model, convention) * tokens
    skipped = st.flash_attention and st.causal
    executed = model_flops_per_token(model, "bridge" if skipped else "megatron") * tokens
    extra = 4.0 * model.seq_len * model.heads * model.head_dim * model.layers * (
        0.5 if skipped else 1.0)
    full = 2.0 * (_matmul_params_per_token(model) - model.vocab * model.hidden) + extra
    mats = 3 if model.ffn_type == "swiglu" else 2  # recompute "moe" reruns the MoE MLPs too
    moe_mlp = 2.0 * model.moe_layers * mats * model.hidden * model.expert_ffn * (
        model.top_k + model.shared_experts)
    hw_flops = executed + tokens * np.select(
        [X["rc"] == 2, X["rc"] == 1, X["rc"] == 3], [full, extra, extra + moe_mlp], 0)
    peak = gpu.peak_flops(precision) * n * bd["step_time_s"]
    return {"mfu": model_flops / peak, "hfu": hw_flops / peak,
            "model_tflops_per_gpu": model_flops / n / bd["step_time_s"] / 1e12,
            "tokens_per_s": tokens / bd["step_time_s"], "global_batch": X["m"] * X["mb"] * X["dp"]}
