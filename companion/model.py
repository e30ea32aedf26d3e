"""Shared description of a transformer and of how it is laid out over GPUs.

:class:`Transformer` is the model (shapes only); :class:`Layout` is the parallel split and
training recipe. Both are frozen dataclasses checked on construction, so a bad value fails
where it is written, with the parameter named. :func:`check_layout` checks the two together
(TP must divide the heads, PP the layers, EP the experts, ...). :mod:`companion.memory` and
``companion.parallel`` take these objects; ``parallel.Transformer`` is a re-export.

Presets (:func:`preset`, :func:`presets`) are the models of the Megatron-LM papers, Llama 3,
DeepSeek-V3 and the seeds' 13B, 175B and 1.7T MoE, each with its source in
:data:`PRESET_SOURCES`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from companion import checks, moe

FFN_TYPES = ("gelu", "swiglu")
# "moe": selective recomputation plus the MoE layers (Megatron's --recompute-granularity
# selective --recompute-modules core_attn moe): dense models run it as "selective"
RECOMPUTE = ("none", "selective", "full", "moe")
PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "fp4")
#: the precisions a step time prices: FP32 sizes memory only (FP32 matmuls run on tensor
#: cores only as TF32)
STEP_PRECISIONS = ("bf16", "fp16", "fp8", "fp4")
#: fused-attention kernels a software stack can run
#: (:attr:`companion.machine.Stack.attention_kernel`)
ATTENTION_KERNELS = ("cudnn", "flash-attn-2")


#: the largest width, length or count a Transformer field may take: 2**24 keeps every product
#: the memory and FLOP models form inside int64 and float64 exactness (a 1M-token sequence is
#: 2**20)
MAX_DIM = 2 ** 24


def _store_int(obj, param, minimum=1, maximum=MAX_DIM):
    # an integral float (2.0) is stored as the int it names, so TP2.0 prints as TP2
    object.__setattr__(obj, param, checks.number(param, getattr(obj, param), integer=True,
                                                 minimum=minimum, maximum=maximum))


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer, by its shapes.

    ``ffn_hidden`` is the width of the dense MLP; for ``ffn_type="swiglu"`` it is the width of
    each of the gate and up projections (Llama's ``intermediate_size``). MoE models set
    ``experts > 1``; their MoE layers hold ``experts`` routed experts of width
    ``expert_ffn_hidden`` (default ``ffn_hidden``), ``top_k`` of them active per token, plus
    ``shared_experts`` always-active experts of the same width; the first ``dense_layers``
    layers keep a dense MLP. ``bias`` says whether linear layers and norms carry biases
    (GPT-style LayerNorm with bias) or not (Llama-style RMSNorm); ``learned_positions`` adds a
    ``seq_len x hidden`` position table (GPT) instead of rotary embeddings.
    ``attention_head_dim`` sets the head width where it is not hidden / heads (Qwen3).
    ``router_groups`` and ``router_group_topk``: group-limited routing (DeepSeek-V3's n_group
    and topk_group): each token picks its experts inside ``router_group_topk`` of
    ``router_groups`` equal groups of experts.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    kv_heads: int | None = None
    ffn_type: str = "gelu"
    experts: int = 1
    top_k: int = 1
    shared_experts: int = 0
    expert_ffn_hidden: int | None = None
    dense_layers: int = 0
    tied_embeddings: bool = True
    bias: bool = True
    learned_positions: bool = True
    attention_head_dim: int | None = None
    router_groups: int = 1
    router_group_topk: int | None = None
    #: trains with hidden and attention dropout, whose 1-byte masks Korthikanti et al.'s
    #: activation counts include: the GPT-era Megatron models; the Llama, Nemotron, Mixtral,
    #: Qwen3 and DeepSeek-V3 recipes set both dropouts to 0 (Megatron-LM's
    #: examples/llama/train_llama3_8b_h100_fp8.sh ``--attention-dropout 0.0
    #: --hidden-dropout 0.0``; NeMo's LlamaConfig, MixtralConfig and NemotronConfig
    #: ``attention_dropout: float = 0.0``, ``hidden_dropout: float = 0.0``)
    dropout: bool = True

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}")
        for p in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "experts",
                  "top_k"):
            _store_int(self, p)
        _store_int(self, "shared_experts", minimum=0)
        _store_int(self, "dense_layers", minimum=0)
        for p in ("tied_embeddings", "bias", "learned_positions", "dropout"):  # "False" is truthy
            object.__setattr__(self, p, checks.boolean(p, getattr(self, p)))
        if self.kv_heads is not None:
            _store_int(self, "kv_heads")
            checks.divides("kv_heads", self.kv_heads, "heads", self.heads)
        if self.expert_ffn_hidden is not None:
            _store_int(self, "expert_ffn_hidden")
        checks.choice("ffn_type", self.ffn_type, FFN_TYPES)
        if self.attention_head_dim is None:
            checks.divides("heads", self.heads, "hidden", self.hidden)
        else:
            _store_int(self, "attention_head_dim")
        if self.top_k > self.experts:
            raise ValueError(f"top_k={self.top_k} must be <= experts={self.experts} (a token "
                             f"cannot be routed to more experts than the layer has)")
        _store_int(self, "router_groups")
        if self.router_groups > 1:
            top = checks.number("router_group_topk", self.router_group_topk, integer=True,
                                minimum=1, maximum=self.router_groups)
            moe.check_router_groups(self.router_groups, top, self.experts, self.top_k)
        if self.dense_layers > self.layers:
            raise ValueError(f"dense_layers={self.dense_layers} must be <= layers={self.layers}")
        expert_width = self.expert_ffn_hidden not in (None, self.ffn_hidden)
        if self.experts == 1 and (self.shared_experts or self.dense_layers or expert_width):
            raise ValueError("shared_experts, dense_layers and expert_ffn_hidden apply only to "
                             f"MoE models (experts > 1); got experts={self.experts}")

    # -- shapes -------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        """Width of one attention head: ``attention_head_dim`` where the model sets it (Qwen3
        projects 2048 channels to 32 heads of 128), else hidden / heads."""
        if self.attention_head_dim is not None:
            return self.attention_head_dim
        return self.hidden // self.heads

    @property
    def kv_heads_used(self) -> int:
        """Key/value heads actually used (``heads`` unless GQA/MQA sets ``kv_heads``)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def expert_ffn(self) -> int:
        return self.ffn_hidden if self.expert_ffn_hidden is None else self.expert_ffn_hidden

    # -- parameter counts (exact for the layer structure described above) ----------------
    def _mlp_params(self, width: int) -> int:
        mats = 3 if self.ffn_type == "swiglu" else 2
        biases = (width * (mats - 1) + self.hidden) if self.bias else 0
        return mats * self.hidden * width + biases

    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and output projections (and their biases)."""
        h, d = self.hidden, self.head_dim
        q, kv = self.heads * d, self.kv_heads_used * d
        weights = h * q + 2 * h * kv + q * h
        return weights + ((q + 2 * kv + h) if self.bias else 0)

    @property
    def norm_params_per_layer(self) -> int:
        """Two norms per layer (LayerNorm has weight and bias, RMSNorm only a weight)."""
        return 2 * self.hidden * (2 if self.bias else 1)

    @property
    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.ffn_hidden)

    @property
    def expert_params(self) -> int:
        """Parameters of one expert."""
        return self._mlp_params(self.expert_ffn)

    @property
    def moe_mlp_params(self) -> int:
        """Routed experts, shared experts and the router of one MoE layer."""
        return ((self.experts + self.shared_experts) * self.expert_params
                + self.hidden * self.experts)

    @property
    def embedding_params(self) -> int:
        """Input embedding, position table if learned, and the output layer if untied."""
        n = self.vocab * self.hidden
        if self.learned_positions:
            n += self.seq_len * self.hidden
        if not self.tied_embeddings:
            n += self.vocab * self.hidden
        return n

    @property
    def layer_params(self) -> int:
        """All transformer layers (attention, MLP or MoE, norms), without embeddings."""
        per = self.attention_params_per_layer + self.norm_params_per_layer
        dense = self.layers - self.moe_layers
        return (self.layers * per + dense * self.dense_mlp_params
                + self.moe_layers * self.moe_mlp_params)

    @property
    def params(self) -> int:
        """Total parameters, including embeddings and the final norm."""
        final_norm = self.hidden * (2 if self.bias else 1)
        return self.layer_params + self.embedding_params + final_norm

    @property
    def routed_expert_params(self) -> int:
        """Parameters in routed experts (the part split by expert parallelism)."""
        return self.moe_layers * self.experts * self.expert_params

    @property
    def active_params(self) -> int:
        """Parameters touched per token (routed experts count ``top_k`` of ``experts``)."""
        if not self.is_moe:
            return self.params
        idle = self.moe_layers * (self.experts - self.top_k) * self.expert_params
        return self.params - idle


@dataclass(frozen=True)
class Layout:
    """How a model is split over GPUs and trained.

    ``tp, pp, dp, cp`` multiply to the GPU count; ``ep`` (expert parallel) is carved out of
    ``dp * cp`` as in Megatron-Core, so it must divide it. ``vpp`` is the number of virtual
    pipeline stages per GPU (interleaved 1F1B when > 1). ``zero_stage`` 1-3 shards optimizer
    state, then gradients, then weights over data parallel ranks (Rajbhandari et al. 2020);
    ``distributed_optimizer`` is Megatron's equivalent of stage 1 (optimizer state sharded).
    ``precision`` is the GEMM precision; weights keep BF16 storage and FP32 master copies.
    MoE only: ``etp`` is the expert tensor-parallel size (Megatron's
    ``--expert-tensor-parallel-size``; None: the same as ``tp``, Megatron's default), and the
    expert grid etp x ep x expert-dp fills tp x cp x dp; ``dispatch_precision`` is what the
    all-to-all dispatch carries (``bf16`` or ``fp8``; None: ``bf16``); ``routing_skew`` is the
    busiest expert's tokens over the mean (1: balanced, as Megatron-Bridge's benchmarks force).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    microbatch: int = 1
    global_batch: int | None = None
    sequence_parallel: bool = False
    recompute: str = "none"
    zero_stage: int = 0
    distributed_optimizer: bool = False
    precision: str = "bf16"
    etp: int | None = None
    dispatch_precision: str | None = None
    routing_skew: float = 1.0

    def __post_init__(self):
        for p in ("tp", "pp", "dp", "cp", "ep", "vpp", "microbatch"):
            _store_int(self, p, maximum=checks.MAX_GPUS)
        if self.etp is not None:
            _store_int(self, "etp", maximum=checks.MAX_GPUS)
        if self.dispatch_precision is not None:
            checks.choice("dispatch_precision", self.dispatch_precision, ("bf16", "fp8"))
        checks.number("routing_skew", self.routing_skew, minimum=1.0)
        checks.choice("recompute", self.recompute, RECOMPUTE)
        checks.choice("precision", self.precision, PRECISIONS)
        checks.number("zero_stage", self.zero_stage, integer=True, minimum=0, maximum=3)
        for p in ("sequence_parallel", "distributed_optimizer"):
            # strict (a string is never a boolean); a numpy bool, as pandas gives, is stored
            # as a Python one
            object.__setattr__(self, p, checks.boolean(p, getattr(self, p)))
        if self.distributed_optimizer and self.zero_stage > 1:
            raise ValueError("distributed_optimizer=True is Megatron's stage-1 sharding; "
                             f"it cannot be combined with zero_stage={self.zero_stage}")
        if self.vpp > 1 and self.pp == 1:
            raise ValueError(f"vpp={self.vpp} needs pipeline parallelism (pp > 1); got pp=1")
        if self.etp is None:
            checks.divides("ep", self.ep, "dp * cp", self.dp * self.cp)
        else:  # Megatron: etp x ep must divide tp x cp x dp (the expert grid per stage)
            checks.divides("etp * ep", self.etp * self.ep, "tp * dp * cp",
                           self.tp * self.dp * self.cp)
        if self.global_batch is not None:
            _store_int(self, "global_batch", maximum=checks.MAX_EXACT_INT)
            checks.divides("microbatch * dp", self.microbatch * self.dp,
                           "global_batch", self.global_batch)

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_microbatches(self) -> int | None:
        """Microbatches per step on each pipeline (None without ``global_batch``)."""
        if self.global_batch is None:
            return None
        return self.global_batch // (self.microbatch * self.dp)

    @property
    def optimizer_shards(self) -> int:
        """Ranks over which sharded state of dense parameters is split (DP x CP)."""
        return self.dp * self.cp

    @property
    def expert_optimizer_shards(self) -> int:
        """Ranks over which sharded state of routed experts is split (expert DP)."""
        return self.tp * self.dp * self.cp // (self.expert_tp * self.ep)

    @property
    def expert_tp(self) -> int:
        """Expert tensor-parallel size: ``etp``, or ``tp`` where unset (Megatron's default)."""
        return self.tp if self.etp is None else self.etp


def layout_text(layout: Layout, full: bool = False) -> str:
    """A layout in one line: TP/PP/DP/CP/EP, VPP, microbatch. ``full=True`` names every degree
    and the memory choices too, in the planner's order: ``TP4 PP2 VPP4 DP8 CP1 EP1 mb1 SP sel
    ZeRO1`` (SP: sequence parallel; none/sel/full/moe recomputation, moe being Megatron's
    ``--recompute-modules moe``; ZeRO1 is Megatron's distributed optimizer)."""
    if full:
        zero = 1 if layout.distributed_optimizer else layout.zero_stage
        rc = {"none": "none", "selective": "sel", "full": "full", "moe": "moe"}[layout.recompute]
        return (f"TP{layout.tp} PP{layout.pp} VPP{layout.vpp} DP{layout.dp} CP{layout.cp} "
                f"EP{layout.ep} mb{layout.microbatch}{' SP' if layout.sequence_parallel else ''}"
                f" {rc} ZeRO{zero}")
    out = f"TP{layout.tp} PP{layout.pp} DP{layout.dp}"
    out += f" CP{layout.cp}" if layout.cp > 1 else ""
    out += f" EP{layout.ep}" if layout.ep > 1 else ""
    out += f" VPP{layout.vpp}" if layout.vpp > 1 else ""
    return out + f" mb{layout.microbatch}"


def check_microbatches(pp: int, vpp: int, num_microbatches: int | None,
                       source: str = "num_microbatches") -> None:
    """Raise ValueError if an interleaved schedule (``vpp`` > 1) gets a number of microbatches
    that is not a multiple of ``pp``. Megatron-LM runs them in groups of pp (older releases
    raise "number of microbatches is not divisible by pipeline-model-parallel-size when using
    interleaved schedule"; Megatron-Core's microbatch_group_size_per_vp_stage defaults to pp,
    which gives the same rule). ``source`` names where the count came from."""
    if vpp > 1 and num_microbatches is not None and num_microbatches % pp:
        raise ValueError(f"vpp={vpp} (interleaved schedule) needs the number of microbatches, "
                         f"{source} = {num_microbatches}, to be a multiple of pp={pp}; use "
                         f"vpp=1 or change the batch")


def check_layout(model: Transformer, layout: Layout, num_gpus: int | None = None) -> None:
    """Raise ValueError if ``layout`` cannot run ``model`` (each message names the parameters).
    ``model`` is a :class:`Transformer` or a preset name."""
    model = as_transformer("model", model)
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout; got {type(layout).__name__}")
    checks.divides("tp", layout.tp, "heads", model.heads)
    checks.divides("tp", layout.tp, "kv_heads", model.kv_heads_used)
    checks.divides("tp", layout.tp, "ffn_hidden", model.ffn_hidden)
    checks.divides("pp * vpp", layout.pp * layout.vpp, "layers", model.layers)
    checks.divides("cp", layout.cp, "seq_len", model.seq_len)
    if layout.cp > 1:  # Megatron's load-balanced causal split cuts the sequence into 2*cp chunks
        checks.divides("2 * cp", 2 * layout.cp, "seq_len", model.seq_len)
    if layout.sequence_parallel:
        checks.divides("tp", layout.tp, "seq_len / cp", model.seq_len // layout.cp)
    if model.is_moe:
        moe.check_expert_layout(model, layout.ep, layout.expert_tp)
        moe.check_skew(layout.routing_skew, model.experts, model.top_k)
    elif layout.ep > 1:
        raise ValueError(f"ep={layout.ep} needs a MoE model; {model.name} has experts=1")
    else:  # settings of the expert layers: on a dense model they would silently do nothing
        for name, value, neutral in (("routing_skew", layout.routing_skew, 1.0),
                                     ("dispatch_precision", layout.dispatch_precision, None),
                                     ("etp", layout.etp, None)):
            if value != neutral and not (name == "etp" and value == layout.tp):
                raise ValueError(f"{name}={value!r} applies to MoE layers; {model.name} has "
                                 f"experts=1 (leave it at {neutral!r})")
    check_microbatches(layout.pp, layout.vpp, layout.num_microbatches,
                       "global_batch / (dp * microbatch)")
    if num_gpus is not None and layout.num_gpus != num_gpus:
        raise ValueError(f"tp*pp*dp*cp = {layout.tp}*{layout.pp}*{layout.dp}*{layout.cp} = "
                         f"{layout.num_gpus} must equal num_gpus={num_gpus}")


# -- presets --------------------------------------------------------------------------------
_KORTHIKANTI = ("Korthikanti et al. 2022, Reducing Activation Recomputation in Large "
                "Transformer Models, arXiv:2205.05198, Table 3 (s=2048, v=51200, Section 6)")
_NARAYANAN = ("Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU "
              "Clusters Using Megatron-LM, arXiv:2104.04473, Table 1 (s=2048, v=51200)")
_LLAMA3 = ("Llama Team 2024, The Llama 3 Herd of Models, arXiv:2407.21783, Table 3; "
           "vocab 128,256 and untied embeddings from the released config.json")


def _gpt(name, layers, hidden, heads, seq_len=2048, vocab=51200):
    return Transformer(name, layers, hidden, heads, 4 * hidden, vocab, seq_len)


def _llama(name, layers, hidden, heads, ffn):
    return Transformer(name, layers, hidden, heads, ffn, 128256, 8192, kv_heads=8,
                       ffn_type="swiglu", tied_embeddings=False, bias=False,
                       learned_positions=False, dropout=False)


_PRESETS: dict[str, tuple[Transformer, str]] = {}
for _m in (_gpt("korthikanti-22b", 48, 6144, 64), _gpt("korthikanti-175b", 96, 12288, 96),
           _gpt("korthikanti-530b", 105, 20480, 128), _gpt("korthikanti-1t", 128, 25600, 160)):
    _PRESETS[_m.name] = (_m, _KORTHIKANTI)
for _size, _l, _h, _a in (("1.7b", 24, 2304, 24), ("3.6b", 30, 3072, 32), ("7.5b", 36, 4096, 32),
                          ("18b", 40, 6144, 48), ("39b", 48, 8192, 64), ("76b", 60, 10240, 80),
                          ("145b", 80, 12288, 96), ("310b", 96, 16384, 128),
                          ("530b", 105, 20480, 128), ("1t", 128, 25600, 160)):
    _m = _gpt(f"narayanan-{_size}", _l, _h, _a)
    _PRESETS[_m.name] = (_m, _NARAYANAN)
_PRESETS["gpt3-175b"] = (_gpt("gpt3-175b", 96, 12288, 96), (
    "Brown et al. 2020, Language Models are Few-Shot Learners, arXiv:2005.14165, Table 2.1 "
    "(96 layers, d_model 12288, 96 heads, context 2048); vocab padded to 51200 as in the "
    "Megatron papers"))
_PRESETS["turing-530b"] = (_gpt("turing-530b", 105, 20480, 128), (
    "Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B, "
    "arXiv:2201.11990 (105 layers, hidden 20480, 128 heads, sequence 2048)"))
for _m in (_llama("llama3-8b", 32, 4096, 32, 14336), _llama("llama3-70b", 80, 8192, 64, 28672),
           _llama("llama3-405b", 126, 16384, 128, 53248)):
    _PRESETS[_m.name] = (_m, _LLAMA3)
for _k in (16, 32, 64, 128, 256, 512, 1024):  # NeMo 25.04's long-sequence table (DGX-B200)
    _m = replace(_PRESETS["llama3-8b"][0], name=f"llama3-8b-s{_k}k", seq_len=_k * 1024)
    _PRESETS[_m.name] = (_m, _LLAMA3 + f"; sequence {_k}K (NeMo 25.04 long-sequence table)")

# Dense models of the held-out published runs (data/published_runs.csv), shapes as the runs
# helper transcribed them (new_runs_notes.md): each checked against its source's reported
# TFLOP/s over tokens/s, which matches model_flops_per_token within 0.1%.
_LLAMA2 = ("Touvron et al. 2023, Llama 2: Open Foundation and Fine-Tuned Chat Models, "
           "arXiv:2307.09288 (layers, width, heads; GQA for 70B); FFN width and vocab 32000 from "
           "the released config.json; sequence 4096")
_NEMOTRON = ("NVIDIA NeMo, nemo/collections/llm/gpt/model/nemotron.py (Nemotron3Config8B, "
             "Nemotron4Config15B, Nemotron4Config340B): squared-ReLU MLP of two matrices, "
             "priced as ffn_type gelu (same FLOPs and bytes), no linear bias, RoPE, untied "
             "embeddings, vocab 256000, sequence 4096")
_NEMO_GPT = ("NVIDIA NeMo-Framework-Launcher, launcher_scripts/conf/training/gpt3/"
             "{5b,20b}_fp8_performance.yaml: GPT-3 shapes, FFN 4 x hidden, sequence 2048, "
             "GPT-2 BPE vocab padded to 50304")


def _llama2(name, layers, hidden, heads, ffn, kv=None, seq_len=4096):
    return Transformer(name, layers, hidden, heads, ffn, 32000, seq_len, kv_heads=kv,
                       ffn_type="swiglu", tied_embeddings=False, bias=False,
                       learned_positions=False, dropout=False)


def _nemotron(name, layers, hidden, heads, ffn, kv=None):
    return Transformer(name, layers, hidden, heads, ffn, 256000, 4096, kv_heads=kv,
                       tied_embeddings=False, bias=False, learned_positions=False,
                       dropout=False)


for _m in (_llama2("llama2-7b", 32, 4096, 32, 11008), _llama2("llama2-13b", 40, 5120, 40, 13824),
           _llama2("llama2-70b", 80, 8192, 64, 28672, kv=8)):
    _PRESETS[_m.name] = (_m, _LLAMA2)
for _k in (8, 16, 32, 64, 128, 256, 512, 1024):  # NeMo 24.03.01's long-sequence table
    _m = _llama2(f"llama2-7b-s{_k}k", 32, 4096, 32, 11008, seq_len=_k * 1024)
    _PRESETS[_m.name] = (_m, _LLAMA2 + f"; sequence {_k}K (NeMo 24.03.01 long-sequence table)")
for _m in (_nemotron("nemotron3-8b", 32, 4096, 32, 16384),
           _nemotron("nemotron4-15b", 32, 6144, 48, 24576, kv=8),
           _nemotron("nemotron4-340b", 96, 18432, 96, 73728, kv=8)):
    _PRESETS[_m.name] = (_m, _NEMOTRON)
for _m in (Transformer("nemo-gpt3-5b", 24, 4096, 32, 16384, 50304, 2048),
           Transformer("nemo-gpt3-20b", 44, 6144, 48, 24576, 50304, 2048)):
    _PRESETS[_m.name] = (_m, _NEMO_GPT)

_PRESETS["deepseek-v3"] = (Transformer(
    "deepseek-v3", 61, 7168, 128, 18432, 129280, 4096, ffn_type="swiglu", experts=256, top_k=8,
    shared_experts=1, expert_ffn_hidden=2048, dense_layers=3, tied_embeddings=False, bias=False,
    learned_positions=False, router_groups=8, router_group_topk=4, dropout=False), (
    "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, arXiv:2412.19437, Section 4.2 (61 layers, "
    "hidden 7168, 128 heads, first 3 layers dense, 1 shared + 256 routed experts of width 2048, "
    "8 routed per token, 671B total / 37B active, 4K pretraining sequences); dense FFN 18432, "
    "vocab 129280 and group-limited routing (n_group 8, topk_group 4: Section 2.1.2's "
    "node-limited routing, at most 4 nodes per token) from the released config.json. "
    "Multi-head latent attention is priced as MHA of the same width (128 heads x 56): 672B "
    "total, 38.7B active; MTP module not counted. The stand-in is MHA everywhere: its KV "
    "cache (2 x 128 x 56 values per token and layer, where MLA caches 512 + 64), attention "
    "core (112 channels per head where MLA's QK and AV run 192 + 128) and saved Q, K and V "
    "are not MLA's (q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128 in "
    "the report's Section 4.2)"))
_QWEN3 = ("Qwen Team 2025, Qwen3 Technical Report, arXiv:2505.09388, Table 2 (layers, heads "
          "Q/KV, 128 experts, 8 routed per token, no shared expert); hidden size, head_dim 128, "
          "moe_intermediate_size, vocab 151936 and untied embeddings from the released "
          "config.json (Qwen/{0} on Hugging Face). Sequence 4096 as Megatron-Bridge's "
          "performance recipes train it")
_PRESETS["qwen3-30b-a3b"] = (Transformer(
    "qwen3-30b-a3b", 48, 2048, 32, 6144, 151936, 4096, kv_heads=4, ffn_type="swiglu",
    experts=128, top_k=8, expert_ffn_hidden=768, tied_embeddings=False, bias=False,
    learned_positions=False, attention_head_dim=128, dropout=False), _QWEN3.format("Qwen3-30B-A3B"))
_PRESETS["qwen3-235b-a22b"] = (Transformer(
    "qwen3-235b-a22b", 94, 4096, 64, 12288, 151936, 4096, kv_heads=4, ffn_type="swiglu",
    experts=128, top_k=8, expert_ffn_hidden=1536, tied_embeddings=False, bias=False,
    learned_positions=False, attention_head_dim=128, dropout=False), _QWEN3.format("Qwen3-235B-A22B"))
_MIXTRAL = ("Jiang et al. 2024, Mixtral of Experts, arXiv:2401.04088, Table 1 (dim, n_layers, "
            "head_dim 128, hidden_dim, n_heads, n_kv_heads 8, 8 experts, top 2); vocab and "
            "untied embeddings from the released config.json (mistralai/{0}); sequence 4096 "
            "as NeMo's performance tables train it")
_PRESETS["mixtral-8x7b"] = (Transformer(
    "mixtral-8x7b", 32, 4096, 32, 14336, 32000, 4096, kv_heads=8, ffn_type="swiglu",
    experts=8, top_k=2, tied_embeddings=False, bias=False, learned_positions=False,
    dropout=False),
    _MIXTRAL.format("Mixtral-8x7B-v0.1"))
_PRESETS["mixtral-8x22b"] = (Transformer(
    "mixtral-8x22b", 56, 6144, 48, 16384, 32768, 4096, kv_heads=8, ffn_type="swiglu",
    experts=8, top_k=2, tied_embeddings=False, bias=False, learned_positions=False,
    dropout=False),
    _MIXTRAL.format("Mixtral-8x22B-v0.1") + " (8x22B is not in the paper's table: shapes from "
    "its config.json only)")
_PRESETS["mixtral-8x22b-s64k"] = (
    replace(_PRESETS["mixtral-8x22b"][0], name="mixtral-8x22b-s64k", seq_len=65536),
    _PRESETS["mixtral-8x22b"][1] + "; sequence 64K (65,536 tokens), as NeMo 25.02 and 25.04's "
    "performance tables train it with context parallelism 8")
_PRESETS["seed-13b"] = (_gpt("seed-13b", 40, 5120, 40), (
    "The seeds' 13B Megatron model with hidden size 5120 (seed 000); shapes of GPT-3 13B, "
    "Brown et al. 2020, arXiv:2005.14165, Table 2.1 (40 layers, 40 heads of 128; the table "
    "prints d_model 5140, but 40 x 128 = 5120)"))
_PRESETS["seed-175b"] = (_gpt("seed-175b", 96, 12288, 96), (
    "The seeds' 175B dense model, sequence 2048, global batch 2048 on 256 H100 (FP8) vs 256 "
    "B200 (FP4) (seed 003); GPT-3 175B shapes (Brown et al. 2020, Table 2.1)"))
_PRESETS["seed-1.7t-moe"] = (Transformer(
    "seed-1.7t-moe", 128, 16384, 128, 2048, 128256, 8192, kv_heads=8, ffn_type="swiglu",
    experts=128, top_k=24, shared_experts=1, tied_embeddings=False, bias=False,
    learned_positions=False, dropout=False), (
    "The seeds' MoE with 1.7T parameters, about 400B active, trained with TP4/PP8/EP128/VPP2/"
    "CP2 on '8192 B200 in 128 NVL72' (seed 003). The seed gives no shapes: this one is a "
    "hypothetical fit (128 layers so PP8 x VPP2 divides them, 128 experts so EP128 divides "
    "them, 128 heads so TP4 divides them, Llama-3-style attention and vocabulary, no dropout): 1.74T "
    "total, 0.40T active"))

#: Where each preset's shapes come from (paper and table).
PRESET_SOURCES = {k: src for k, (_, src) in _PRESETS.items()}


def _key(name: str) -> str:
    # Forgiving names: "GPT-3 175B", "gpt3_175b" and "gpt3-175b" are the same preset.
    return re.sub(r"[^a-z0-9.]", "", name.lower())


_BY_KEY = {_key(k): k for k in _PRESETS}


def presets() -> list[str]:
    """Names of the preset models."""
    return list(_PRESETS)


def preset(name: str, **overrides) -> Transformer:
    """A preset model by name (case, spaces, ``-`` and ``_`` ignored); ``overrides``
    replace fields, e.g. ``preset("llama3-8b", seq_len=4096)``."""
    if not isinstance(name, str):
        raise TypeError(f"model name must be a string; got {type(name).__name__}")
    canonical = _BY_KEY.get(_key(name))
    if canonical is None:
        checks.choice("model", name, presets())  # raises with close matches
    model = _PRESETS[canonical][0]
    return replace(model, **overrides) if overrides else model


def as_transformer(param: str, model) -> Transformer:
    """A :class:`Transformer`, or a preset name resolved to one (close names suggested for a
    typo): what every function that takes a model accepts."""
    if isinstance(model, str):
        return preset(model)
    if not isinstance(model, Transformer):
        raise TypeError(f"{param} must be a Transformer or a preset name "
                        f"({', '.join(presets()[:4])}, ...); got {type(model).__name__}")
    return model


__all__ = ["STEP_PRECISIONS", "as_transformer", "Transformer", "Layout", "check_layout", "check_microbatches", "layout_text", "preset", "presets", "PRESET_SOURCES",
           "FFN_TYPES", "RECOMPUTE", "PRECISIONS"]
