"""The few measured constants of the step-time model, in one place, each with its source.

:mod:`companion.parallel` computes a training step from first principles (FLOPs, bytes,
alpha-beta collectives); what physics does not give is how close real kernels and real NCCL
get to the datasheet. Those fractions are below. They are properties of a kernel class or a
link, never of a particular training run: the same constants serve every model, layout and
GPU, so an error on an unseen run points at a missing mechanism, not at a knob to turn.

How the values were set. One constant, ``gemm_in_training``, is fitted: held fixed for every
row, it best reproduces the eight step times of Korthikanti et al. 2022, Table 5 (A100,
Megatron-LM, 22B to 1T), and Narayanan et al. 2021, Table 1 (ten more A100 runs) is then
predicted with it, unchanged: the check, not the fit. ``tests/test_parallel.py`` pins both.
``hbm_efficiency``, ``scaleup_efficiency`` and ``scaleout_efficiency`` each have a physical
range from measurements and were set within it when the model was first fitted to Table 5;
they have not moved since, and they are not refitted (with today's mechanisms Table 5 alone
would pick a lower ``scaleout_efficiency``: eight A100 runs are no reason to move a link
measurement). ``attention_efficiency`` is a sourced fallback that no 2021-2022 run sees. The
others below are published measurements, or set on the MoE rows each entry names.

- ``gemm_in_training`` 0.90: fraction of the best GEMM throughput a microbenchmark finds
  (:func:`gemm_peak_fraction`) that a training run's GEMMs sustain, before tile and wave
  quantization (modelled separately by :func:`companion.roofline.gemm_efficiency`). Range:
  0.85-1.0; a training step runs its GEMMs back to back with other kernels, between
  collectives that share SMs and HBM, and at the clock the whole step's power allows rather
  than the one a GEMM loop settles at. The fit gives 0.90 (0.78 of the A100's peak);
  :func:`companion.validation.fitted_gemm_in_training` refits it and a test pins the two.
- ``attention_efficiency`` 0.60: fraction of peak of fused (Flash) attention, forward and
  backward together. Dao 2023, *FlashAttention-2* (arXiv:2307.08691), abstract: "reaching
  50-73% of the theoretical maximum FLOPs/s on A100"; the backward pass sits at the low end.
  Used only with a software stack that has fused attention (not in the 2021-2022 runs).
- ``hbm_efficiency`` 0.80: fraction of the HBM datasheet bandwidth that memory-bound kernels
  (norms, dropout, softmax, the optimizer) reach. The memory clock itself allows only part of
  the datasheet figure (a B200's driver reports a 7680-bit bus at 3996 MHz, 7.67 TB/s:
  pytorch/ao PR 4002), and kernels that also reduce or gather reach less than a copy.
- ``scaleup_efficiency`` 0.65: NCCL bus bandwidth over NVLink as a fraction of the
  per-direction line rate, for the 10-100 MB messages tensor parallelism moves. Ring
  all-reduce bus bandwidth ramps with message size and tops out below line rate (nccl-tests
  doc/PERFORMANCE.md explains bus bandwidth,
  https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
- ``scaleout_efficiency`` 0.90: NCCL bus bandwidth over InfiniBand as a fraction of the NIC
  line rate (RDMA payload after headers; large messages).

- ``overlap_slowdown`` 0.189: extra compute time per second of communication hidden behind
  it. Lee et al. 2025, *Characterizing Compute-Communication Overlap in GPU-Accelerated
  Distributed Deep Learning* (arXiv:2507.03114), abstract: overlapping "can result in an
  average computational slowdown of 18.9%, with a maximum of 40.0%" (GPT and Llama on A100
  and H100). The mechanisms behind it: the collective's kernels take SMs (Transformer
  Engine's userbuffers give a pipelined TP overlap ``num_sm`` 16 of an H100's 132 by
  default, transformer_engine/pytorch/module/base.py ``initialize_ub``; NCCL runs one
  channel per SM) and the added power pulls the clock down (an H800 "from 1980MHz to
  1575 MHz" when compute and communication overlap, deepseek-ai/DeepGEMM issue 120).
  Not fitted.
- ``kernel_gap_s`` 3.0 microseconds: idle time the GPU pays per kernel of an eager PyTorch
  step, the CUDA driver's ``cuLaunchKernel`` cost (3.0 us on GB200, steady state:
  meta-pytorch/tritonbench PR 1017) on the assumption that the host otherwise keeps ahead;
  ``companion.steptime.KERNELS_PER_LAYER`` counts the kernels. With CUDA graphs
  (``Stack.cuda_graphs``) the gap is ``graph_gap_s``, 1 us, an assumption: graphs remove the
  host's part ("eliding CPU overhead is the main benefit", PyTorch blog, *Accelerating
  PyTorch with CUDA Graphs*, 2021). Megatron-Bridge runs without graphs unless a recipe
  sets ``cuda_graph_impl``.
- ``ep_overlap_hidden`` 0.81: the fraction of the expert all-to-all that Megatron-Core's
  batch-level overlap (``--overlap-moe-expert-parallel-comm``) hides, of what its partner
  sub-modules could cover. The schedule (``TransformerLayerSchedulePlan.run`` in
  ``megatron/core/models/common/model_chunk_schedule_plan.py``, NVIDIA/Megatron-LM @d428de40)
  runs one microbatch's forward beside the other's backward, layer by layer: the combine's
  backward beside attention forward, dispatch forward and backward beside the expert MLP's
  backward and forward, the combine forward beside attention backward; a transfer longer than
  its partner stays exposed. Set on the two published pairs of one layout run without and
  with the overlap (:data:`companion.validation.EP_OVERLAP_PAIRS`, four of the MoE family's
  six ``fit`` rows, the other two bound ``overlap_host_kernel_s``): the Megatron-MoE model zoo's
  Qwen3-235B-A22B on 256 H100s, TP2 EP32 with DeepEP, 19.7 s without and 17.6 s with it
  ("+1f1b overlap"), 1.12x; and Megatron-Bridge pull request 3862's Qwen3-30B-A3B on 16
  H100s, TP1 EP16 across two nodes with the NCCL all-to-all dispatcher, 41.25 s without and
  31.20 s with it (and delayed weight gradients), 1.32x. On Hopper the overlap also costs the
  TP and CP overlaps their kernel order (``companion.steptime``, ``_queue_ordered``: the
  recipes raise CUDA_DEVICE_MAX_CONNECTIONS from 1 when it is on), which the first pair pays
  at TP2 and the second, at TP1, does not. With every other constant fixed (``moe_sync_s``
  included), 0.81 comes nearest both ratios in squared log error
  (:func:`companion.validation.fitted_ep_overlap_hidden`): the model prices the pairs 1.17x
  and 1.28x apart, each within 5% of its measurement, in opposite directions; each pair
  alone would set 0.64 and 0.90 (0.47 and 0.92 before the kernel order was priced; 0.82
  before H100's causal backward attention replaced FlashAttention-3's non-causal panel). What
  makes the DeepEP pair hide less is not measured here: DeepEP's kernels take SMs from the
  compute they overlap (the model zoo's overlap run also reserves 24 SMs from the norms,
  ``NVTE_*_LAYERNORM_SM_MARGIN=24``); the host floor (``overlap_host_kernel_s``) binds on
  neither pair.
- ``moe_sync_s`` 2.5 ms: the time the GPU idles per MoE layer forward (and per recompute of
  one) because the token dispatcher blocks the host. Megatron-Core's all-to-all dispatcher
  copies the routing counts to the host and waits on them once per MoE layer forward
  (``megatron/core/transformer/moe/token_dispatcher.py``: ``d2h_event.synchronize()`` at
  ``cuda_sync_point``, ``before_ep_alltoall`` when dropless with EP > 1); DeepEP's normal
  kernels and HybridEP learn the received token count the same way (NVIDIA-NeMo/Automodel PR
  3931: HybridEP "learns the permuted row count by draining the compute stream ... on every
  MoE layer"). After the wait the GPU's queue is empty and it runs at the host's launch pace
  until the host gets ahead again; Megatron-Core's MoE guide lists the symptom ("gaps between
  GPU kernels where CPU cannot launch kernels fast enough"). Only a whole-step CUDA graph with
  fixed-capacity buffers removes it (``Stack.cuda_graphs``). Fitted on one pair, the only
  rows it was set on: Megatron-LM's Qwen3-30B-A3B recipes on 16 GB200s (TP1 EP16,
  microbatch 4, MXFP8, HybridEP) at 480.3 model TFLOP/s per GPU with the dispatcher eager
  and 598.1 with the whole step in one graph and the sync-free paged stash (Megatron-LM PR
  5728), 1.245x; 2.5 ms reproduces it (:func:`companion.validation.fitted_moe_sync_s`). The
  graphed recipe also turns on a fused grouped-MLP kernel (``NVTE_CUTEDSL_FUSED_GROUPED_MLP``)
  that the pair cannot separate, so 2.5 ms is an upper bound on the sync alone. One value
  per layer whatever the microbatch: a larger microbatch gives the GPU longer kernels to
  hide the host behind, which this does not model.
- ``overlap_host_kernel_s`` 82 us: the host's time per kernel when Megatron-Core's batch-level
  expert overlap runs eager, a floor under each layer's time. The overlap's schedule
  (``TransformerLayerSchedulePlan.run``, above) issues one microbatch's forward sub-modules
  and the other's backward ones from Python, layer by layer, and the dispatcher's host sync
  (``moe_sync_s``) drains the queue once a layer; without the overlap the backward pass runs
  from the autograd engine with no sync and the host stays ahead. So an eager overlapped
  layer takes at least the host's time to issue its kernels
  (:func:`companion.steptime.overlap_host_kernels`: ``KERNELS_PER_LAYER`` and the FP8 casts
  plus each local expert's six GEMMs, ``companion.moe.EXPERT_GEMMS``), each paying this
  constant. NVIDIA turned the overlap off where it hit this ("Disable moe_a2a_overlap due to
  CPU overhead", Megatron-Bridge PR 1760, Qwen3-235B-A22B on 64 B200s; "On B300 ...
  moe_a2a_overlap and VP degraded perf", issue 3399). Megatron-Bridge runs the overlap only
  with EP > 1, with virtual pipeline stages whenever PP > 1 and without full recomputation
  (the assertions of ``src/megatron/bridge/training/comm_overlap.py``). Set as a bound on the
  two runs of that PR with the overlap (:data:`companion.validation.OVERLAP_HOST_FITTING`,
  the constant's only fitting rows; the runs without it set nothing): a floor cannot be
  longer than the run it sits under, so the value is the smallest of what each allows, its
  measured step over the kernels the floor would make it wait for, the bubble's included
  (:func:`companion.validation.overlap_host_bounds`): MXFP8, TP1 PP8 VP2 EP8 (16 local
  experts), microbatch 1, 20.05 s (the PR says 20.1 s), 88.2 us; BF16, the same layout with
  its own kernels, 17.2 s, 82.6 us; the smaller rounded down to a whole microsecond, 82 us
  (:func:`companion.validation.fitted_overlap_host_kernel_s`). A bound, not a fit: the model
  still puts the pairs' steps 1.06x (MXFP8) and 0.96x (BF16) apart where the PR measured
  1.19x and 1.075x (:func:`companion.validation.overlap_host_pairs`). It is far above a kernel
  launch (``kernel_gap_s``): what it prices per kernel is the Python module, dispatcher and
  event work around each one. Whole-step CUDA graphs remove it (``Stack.cuda_graphs``);
  partial graphs (attention, router) would issue fewer launches, which is not counted. One
  value serves every host; hosts differ (a B300 cluster recovered a "60% performance
  regression compared to Prenyx (B200)" by binding the CPU's priority cores,
  Megatron-Bridge PR 1928).
- ``attention_efficiency`` is the fallback for GPUs without a published fused-attention
  record; :func:`attention_fraction` reads ``kind == "attention"`` rows of
  ``data/published_measurements.csv`` (cuDNN's fused attention on H100 per sequence length
  and direction, from the FlashAttention-3 paper's benchmarks, whose backward panels are
  without the causal mask: the causal backward is derived from them with the forward's
  causal / non-causal ratio at the same length; B200, GB200 and GB300 from
  NVIDIA cudnn-frontend's training SDPA benchmark, causal, 8 KV heads of 128: B200 cuDNN
  9.13.1 through PyTorch's SDPA and GB200 9.17.0 through the frontend, 128 query heads, 512
  to 131,072 tokens; GB300 9.19.1, 64 query heads, 2,048 to 32,768 tokens, from the run that
  measured GB200 with the same release, which puts GB300 1.1-1.4x ahead of GB200 where the
  older 9.13.1 PyTorch-SDPA records had it behind) and interpolates in sequence length. On
  Blackwell the backward pass reaches 0.42-0.62 of the BF16 peak from 8K tokens on (less at
  shorter sequences: 0.06 on B200 at 512), below the 0.60 fallback it had before those records
  at every length but GB300's longest. Two caveats, neither priced.
  The records mix cuDNN releases, and on B200 the release matters (9.10.2 to 9.13.1 gained
  8-15% forward at 4K-16K tokens in the same benchmark), while GB200's curve stays within 3%
  from 9.17 to 9.26; and the B200 ones go through PyTorch's SDPA, where the same release called
  through the frontend directly (Transformer Engine's path; ``artifacts/
  sdpa_fp8_benchmark_results_NVIDIA_B200.csv`` @0b1577c8, its BF16 rows) runs 18% faster forward
  at 8K and up to 3x at 512. Priced with those, the B200 dense runs, already the model's most
  optimistic family, come out about 3 points faster still; flashinfer PR 2899's FlashAttention-4
  forward on a B200 held back to back (1,450 to 1,237 TFLOP/s as the clock settles from 1,965 to
  1,580 MHz at about 1,000 W) says attention sustains less of its burst rate there than the
  GEMM-derived factor applied to it.

One table sits under the first constant: how close the best GEMM of a microbenchmark gets to
the datasheet differs by GPU and by precision, and published measurements say by how much.
:func:`gemm_peak_fraction` reads them from ``data/published_measurements.csv`` (Stas Bekman's
maximum achievable matmul FLOP/s, ``mamf-finder.py``): on an H100, BF16 reaches 0.80 of its
peak and FP8 only 0.71, so FP8 GEMMs are priced 12% slower than the 2x of the datasheet
implies. These are measurements of kernels, never of training runs, so they do not use up the
held-out rows.

A second table corrects the first for what a step sustains. MAMF is a burst: mamf-finder.py
flushes L2 between timed matmuls and keeps the best shape, so the GPU is never held at its
power limit by GEMMs back to back. Transformer Engine's GEMM profiling tutorial times a whole
layer's twelve GEMMs back to back at a model's own shapes on a B300 (``kind ==
"gemm_model_shapes"`` rows). :func:`sustained_fraction` prices those very shapes with the
burst model and divides: what is left is the sustained rate (clock under the power limit,
shapes a best-shape search avoids). The same records give FP4 its own rate: NVFP4 is priced
from the measured NVFP4 kernels, not from FP8's.

Everything else the model needs is a datasheet number (:mod:`companion.hardware`), a latency
from NCCL's own tuning model (:mod:`companion.fabric`), or arithmetic.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from companion import checks, hardware, schema
from companion.model import ATTENTION_KERNELS
from companion.roofline import gemm_time_arrays


#: Mechanisms a :class:`Calibration` can switch off (``off=``), for the chapter's table of
#: what each one does to the validation: the sustained GEMM rate, per-GPU fused attention,
#: the overlap slowdown, kernel gaps, RoPE and cross-entropy bytes, ZeRO-2/3's per-microbatch
#: reduce-scatter with the backward-only overlap window, FP32 gradient reduction, the MoE
#: dispatcher's host sync, data-parallel gradient buckets (the last one exposed, each paying
#: its latency), the host pace of an eager expert-overlap layer.
MECHANISMS = ("sustained", "attention", "overlap", "launch", "memory", "zero", "fp32_grads",
              "host", "buckets", "overlap_host")


@dataclass(frozen=True)
class Calibration:
    """Achievable fractions of datasheet peaks (see the module docstring for sources)."""

    gemm_in_training: float = 0.90
    attention_efficiency: float = 0.60
    hbm_efficiency: float = 0.80
    scaleup_efficiency: float = 0.65
    scaleout_efficiency: float = 0.90
    overlap_slowdown: float = 0.189
    kernel_gap_s: float = 3.0e-6
    graph_gap_s: float = 1.0e-6
    ep_overlap_hidden: float = 0.81
    moe_sync_s: float = 2.5e-3
    overlap_host_kernel_s: float = 82e-6
    off: frozenset = frozenset()

    def __post_init__(self):
        if not isinstance(self.off, frozenset):
            raise TypeError(f"off must be a frozenset of mechanism names; got {self.off!r}")
        for name in self.off:
            checks.choice("off", name, MECHANISMS)
        for f in fields(self):
            if f.name == "off":
                continue
            if f.name.endswith("_s"):  # per kernel or per MoE layer: microseconds to ms
                checks.number(f.name, getattr(self, f.name), nonnegative=True, maximum=1e-2)
            elif f.name == "ep_overlap_hidden":  # 0: the overlap hides nothing
                checks.number(f.name, getattr(self, f.name), nonnegative=True, maximum=1)
            else:
                checks.number(f.name, getattr(self, f.name), positive=True, maximum=1)


#: The defaults, used unless a caller passes its own :class:`Calibration`.
DEFAULT = Calibration()

MEASUREMENTS_CSV = Path(__file__).resolve().parents[1] / "data" / "published_measurements.csv"

# Precisions without a published GEMM measurement borrow one with the same tensor-core data
# path: FP16 and BF16 share peak and kernels on every GPU here; FP6/FP4 GEMMs are the FP8
# kernels' siblings (an assumption, said so in gemm_fraction_table's basis column).
_PRECISION_STAND_IN = {"fp16": "bf16", "fp6": "fp8", "fp4": "fp8"}


def _spec(gpu) -> hardware.GPU:
    # a spec is used as given: resolving it again reads the registry's tables (milliseconds)
    return gpu if isinstance(gpu, hardware.GPU) else hardware.gpu(gpu)


@functools.cache
def _measurements() -> pd.DataFrame:
    schema.check(MEASUREMENTS_CSV)
    return pd.read_csv(MEASUREMENTS_CSV)


def measurements(kind: str | None = None) -> pd.DataFrame:
    """``data/published_measurements.csv``, schema-checked and read once per process: every
    row, or those of one ``kind`` (``"gemm"``, ``"attention"``, ``"quantization"``, ...),
    indexed by ``id`` (a copy: edit freely)."""
    df = _measurements()
    if kind is not None:
        checks.choice("kind", kind, sorted(df["kind"].unique()))
        df = df[df["kind"] == kind]
    return df.set_index("id", drop=False).copy()


def mamf_records() -> pd.DataFrame:
    """Published best-shape GEMM throughputs (``kind == "gemm"`` rows of
    ``data/published_measurements.csv``) against the registry's dense peaks: one row per
    GPU and precision, with the fraction of peak and the record's id (a copy: edit freely)."""
    return _mamf_records().copy()


@functools.cache
def _mamf_records() -> pd.DataFrame:
    rows = []
    for _, r in measurements("gemm").iterrows():
        g = hardware.gpu(r["hardware"])
        precision = r["id"].rsplit("-", 1)[1]
        peak = g.peak_flops(precision)
        rows.append({"gpu": g.name, "key": g.key, "family": g.family, "precision": precision,
                     "measured_flops": float(r["value"]), "peak_flops": peak,
                     "fraction": float(r["value"]) / peak, "id": r["id"]})
    return pd.DataFrame(rows)


@functools.cache
def _lookup(g: hardware.GPU, precision: str) -> tuple[float, str]:
    # by value, not by a second registry lookup: a what-if GPU (dataclasses.replace of a
    # registry GPU under a new key) gets its family's records
    every = _mamf_records()
    # A precision's own records first: this GPU's, then its family's on GPUs that run it at
    # the same multiple of BF16 (see _sustained); only then its stand-in's kernels.
    own = every[every["precision"] == precision]
    key, name, fam = g.key, g.name, g.family
    same_path = own[[_kin(hardware.gpu(k), g, precision) for k in own["key"]]]
    for label, rows in (("measured", own[own["key"] == key]),
                        (f"{fam} family mean", same_path)):
        if len(rows):
            return float(rows["fraction"].mean()), f"{label}: {', '.join(rows['id'])}"
    p = _PRECISION_STAND_IN.get(precision, precision)
    via = "" if p == precision else f" ({p} kernels stand in for {precision})"
    rec = every[every["precision"] == p]
    # Order: this GPU at this precision, its family at this precision, this GPU or its family
    # at another precision (MI300X's BF16 efficiency says more about its FP8 than NVIDIA's
    # FP8 does), then every record of this precision.
    for label, rows in (("measured", rec[rec["key"] == key]),
                        (f"{fam} family mean", rec[rec["family"] == fam]),
                        (f"{name}'s other precisions", every[every["key"] == key]),
                        (f"{fam} family, other precisions", every[every["family"] == fam]),
                        (f"mean of all {p} records", rec),
                        ("mean of all records", every)):
        if len(rows):
            return float(rows["fraction"].mean()), f"{label}: {', '.join(rows['id'])}{via}"
    raise ValueError(f"{MEASUREMENTS_CSV} holds no GEMM records")


def gemm_peak_fraction(gpu, precision: str) -> float:
    """Fraction of the dense datasheet peak that the best GEMM of a microbenchmark reaches on
    ``gpu`` at ``precision``: the GPU's own published record; else the mean over its
    architecture family (GB300 takes the other Blackwells'); else the GPU's or its family's
    records at other precisions; else the mean over all records of that precision. FP16 uses
    BF16's record, FP6 and FP4 FP8's.
    :func:`gemm_fraction_table` shows which applies where."""
    g = _spec(gpu)
    return _lookup(g, hardware.precision_name(precision))[0]


def gemm_fraction_table(precisions=("bf16", "fp8", "fp4"),
                        calibration: Calibration | None = None) -> pd.DataFrame:
    """:func:`gemm_peak_fraction` for every GPU in the registry that has each precision, with
    the basis of each value (measured, family mean or stand-in), and the rate a training step
    sustains: ``sustained factor`` (:func:`sustained_fraction`), ``sustained fraction of
    peak`` (the two multiplied) and ``sustained basis``."""
    cal = DEFAULT if calibration is None else calibration
    rows = []
    for key in hardware.gpus()["key"]:
        g = hardware.gpu(key)
        for p in precisions:
            if p in g.precisions():
                frac, basis = _lookup(g, hardware.precision_name(p))
                sus, sus_basis = _sustained(g, hardware.precision_name(p), cal)
                rows.append({"GPU": g.name, "precision": p, "fraction of peak": frac,
                             "basis": basis, "sustained factor": sus,
                             "sustained fraction of peak": frac * sus,
                             "sustained basis": sus_basis})
    return pd.DataFrame(rows)


# -- fused attention -------------------------------------------------------------------------
#: the ``kind`` of ``data/published_measurements.csv`` rows that time each attention kernel
ATTENTION_RECORD_KINDS = dict(zip(ATTENTION_KERNELS, ("attention", "attention_fa2")))
#: the same kernels timed without a causal mask (the full score matrix): FlashAttention-3's
#: H100 backward panels are all non-causal
ATTENTION_NONCAUSAL_KINDS = dict(zip(ATTENTION_KERNELS, ("attention_noncausal",
                                                         "attention_fa2_noncausal")))
_ATTENTION_COLUMNS = ["key", "arch", "family", "direction", "seq_len", "fraction", "id"]


def _attention_rows(kind: str) -> pd.DataFrame:
    rows = []
    for _, r in measurements(kind).iterrows():
        g = hardware.gpu(r["hardware"])
        # ids end in -<direction>-<seq>: attn-cudnn-h100-sxm-fwd-8192
        direction, seq = r["id"].rsplit("-", 2)[1:]
        rows.append({"key": g.key, "arch": g.arch, "family": g.family, "direction": direction,
                     "seq_len": int(seq), "fraction": float(r["value"]) / g.peak_flops("bf16"),
                     "id": r["id"]})
    return pd.DataFrame(rows, columns=_ATTENTION_COLUMNS)


@functools.cache
def _attention_records(kernel: str = "cudnn") -> pd.DataFrame:
    """Causal records of ``kernel``, and a causal backward derived where a source times only
    the non-causal one: its non-causal backward x the same GPU's causal / non-causal forward
    at that length (the diagonal tiles a causal mask leaves half empty cost both passes alike;
    cuDNN 9.19.1 on an H200 measures the two ratios within 4% of each other, 0.73 against
    0.76 at 2,048 tokens and 0.91 against 0.93 at 8,192)."""
    causal = _attention_rows(ATTENTION_RECORD_KINDS[kernel])
    free = _attention_rows(ATTENTION_NONCAUSAL_KINDS[kernel]).set_index(
        ["key", "direction", "seq_len"])
    have = causal.set_index(["key", "direction", "seq_len"])
    derived = []
    for (key, direction, seq), r in free.iterrows():
        if direction != "bwd" or (key, "bwd", seq) in have.index:
            continue
        if (key, "fwd", seq) not in have.index or (key, "fwd", seq) not in free.index:
            continue
        fwd_c, fwd_free = have.loc[(key, "fwd", seq)], free.loc[(key, "fwd", seq)]
        derived.append({"key": key, "arch": r["arch"], "family": r["family"], "direction": "bwd",
                        "seq_len": seq,
                        "fraction": r["fraction"] * fwd_c["fraction"] / fwd_free["fraction"],
                        "id": f"{r['id']} x {fwd_c['id']} / {fwd_free['id']}"})
    return pd.concat([causal, pd.DataFrame(derived, columns=_ATTENTION_COLUMNS)],
                     ignore_index=True)


@functools.cache
def _attention(key: str, arch: str, fam: str, direction: str, seq_len: int, fallback: float,
               kernel: str = "cudnn"):
    rec = _attention_records(kernel)
    rec = rec[rec["direction"] == direction]
    # this GPU's records, else its die's (B300 in an HGX and in a GB300 are one Blackwell Ultra
    # die at two clocks: fractions of each part's own peak), else its family's
    for label, rows in (("measured", rec[rec["key"] == key]),
                        ("same die", rec[rec["arch"] == arch]),
                        (f"{fam} family", rec[rec["family"] == fam])):
        if len(rows):
            rows = rows.groupby("seq_len")["fraction"].mean().sort_index()
            frac = float(np.interp(np.log(seq_len), np.log(rows.index.to_numpy(float)),
                                   rows.to_numpy()))
            return frac, f"{label}: {len(rows)} sequence lengths, interpolated"
    if kernel != "cudnn":  # the fallback describes cuDNN-class kernels, not an older one
        have = sorted(set(_attention_records(kernel)["key"]))
        raise ValueError(f"no {kernel} attention record for the {fam} family; records exist "
                         f"for {', '.join(hardware.gpu(k).name for k in have) or 'no GPU'}")
    return fallback, "no fused-attention record: attention_efficiency"


def attention_fraction(gpu, direction: str, seq_len: int,
                       calibration: Calibration | None = None, kernel: str = "cudnn") -> float:
    """Fraction of the dense BF16 peak that fused causal attention (head dim 128) reaches on
    ``gpu`` in the ``"fwd"`` or ``"bwd"`` pass at ``seq_len`` with ``kernel`` (``"cudnn"`` or
    ``"flash-attn-2"``): published records of that kernel on this GPU, else on its die,
    else in its family, interpolated in log sequence length and held flat beyond the
    measured range; ``calibration.attention_efficiency`` where no cuDNN record exists, and a
    ValueError where no FlashAttention-2 record does."""
    g = _spec(gpu)
    cal = DEFAULT if calibration is None else calibration
    checks.choice("direction", direction, ("fwd", "bwd"))
    checks.number("seq_len", seq_len, integer=True, minimum=1)
    checks.choice("kernel", kernel, ATTENTION_KERNELS)
    if "attention" in cal.off:
        return cal.attention_efficiency
    return _attention(g.key, g.arch, g.family, direction, int(seq_len),
                      cal.attention_efficiency, kernel)[0]


# -- the rate a step sustains -------------------------------------------------------------------
def linear_times(g, cal, precision, shapes, n_rows, sustained=True):
    """Forward and backward times of linear layers y[m,n] = x[m,k] w[k,n], each shape
    (m, n, k, batch) an array over ``n_rows`` rows, priced in one numpy pass of
    :func:`companion.roofline.gemm_time_arrays` (tile and wave quantization) at
    ``gemm_in_training`` x :func:`gemm_peak_fraction` (x :func:`sustained_fraction` unless
    ``sustained=False``) of the peak. The backward pass is two GEMMs of other shapes, dgrad
    (m x k, reducing n) and wgrad (k x n, reducing m). Returns two (len(shapes), n_rows)
    arrays."""
    cols = [[], [], [], []]
    for m, n, k, batch in shapes:
        n, k = np.maximum(1, n), np.maximum(1, k)
        for row in ((m, n, k, batch), (m, k, n, batch), (k, n, m, batch)):
            for col, x in zip(cols, row):
                col.append(np.broadcast_to(x, n_rows))
    r = gemm_time_arrays(*(np.concatenate(c) for c in cols[:3]), g, dtype=precision,
                         batch=np.concatenate(cols[3]))
    spec = getattr(g, "gpu", g)
    eff = cal.gemm_in_training * gemm_peak_fraction(spec, precision)
    if sustained and "sustained" not in cal.off:
        eff = eff * sustained_fraction(spec, precision, cal)
    t = np.maximum(r.compute_s / eff, r.memory_s / cal.hbm_efficiency)
    t = t.reshape(len(shapes), 3, n_rows)
    return t[:, 0], t[:, 1] + t[:, 2]


# Transformer Engine's GEMM profiling tutorial (the ``gemm_model_shapes`` records): hidden
# 4096, MLP 16384, 15,872 tokens; QKV, attention output, MLP up, MLP down.
TE_PROFILE_SHAPES = ((15872, 12288, 4096, 1), (15872, 4096, 4096, 1),
                     (15872, 16384, 4096, 1), (15872, 4096, 16384, 1))


@functools.cache
def _sustained(g: hardware.GPU, precision: str, cal: Calibration) -> tuple[float, str]:
    recs = [(hardware.gpu(r["hardware"]), r) for _, r in measurements("gemm_model_shapes").iterrows()
            if r["id"].rsplit("-", 1)[1] == precision]
    # The factor moves within a family only between GPUs whose tensor cores run this precision
    # at the same multiple of their BF16 rate: Blackwell Ultra (B300, GB300) runs NVFP4 at 5.8-6x
    # BF16, B200 at 4x, and the B300's NVFP4 layer profile reaches 0.39 of its peak where a
    # B200's NVFP4 kernel reaches what its BF16 kernel does (pytorch/ao PR 2427, 0.61 vs 0.65
    # at 6144^3). Where none matches, the precision's stand-in (FP4: FP8, the same data path
    # at 2x) lends its factor.
    key, name, fam = g.key, g.name, g.family
    same_path = [x for x in recs if _kin(x[0], g, precision)]
    for label, pick in (("measured", [x for x in recs if x[0].key == key]),
                        (f"{fam} family", same_path)):
        if pick:
            ratios = []
            for rg, r in pick:
                f, b = linear_times(rg, cal, precision, TE_PROFILE_SHAPES, 1, sustained=False)
                burst_s = float(f.sum() + b.sum())
                measured_s = 3 * sum(2.0 * m * n * k for m, n, k, _ in TE_PROFILE_SHAPES) / r[
                    "value"]
                ratios.append(burst_s / measured_s)
            return float(np.mean(ratios)), (f"{label}: {', '.join(r['id'] for _, r in pick)} "
                                            f"(back-to-back GEMMs at a model's shapes)")
    stand_in = _PRECISION_STAND_IN.get(precision)
    if stand_in and stand_in != precision:
        factor, basis = _sustained(g, stand_in, cal)
        return factor, (f"{basis}; {stand_in} stands in: no {precision} record on a GPU that "
                        f"runs {precision} at {name}'s multiple of its BF16 rate")
    return 1.0, (f"no back-to-back GEMM record for {fam} at {precision}: the burst (MAMF) "
                 f"rate, an optimistic bound")


def _path_multiple(g: hardware.GPU, precision: str) -> float:
    # how many times its 16-bit rate a GPU's tensor cores run ``precision`` (datasheet peaks;
    # FP16 where a GPU has no BF16, as on the V100)
    return g.peak_flops(precision) / g.peak_flops("bf16" if "bf16" in g.precisions() else "fp16")


def _kin(other: hardware.GPU, g: hardware.GPU, precision: str) -> bool:
    # same family, and ``precision`` at the same multiple of BF16 within 10% (B300's and
    # GB300's datasheets put NVFP4 at 5.8x and 6.0x BF16)
    return (other.family == g.family
            and abs(_path_multiple(other, precision) / _path_multiple(g, precision) - 1) < 0.1)

def te_profile_elements() -> dict:
    """Elements Transformer Engine quantizes in one layer of its GEMM profiling tutorial
    (``TE_PROFILE_SHAPES``): the forward GEMMs' inputs, the backward GEMMs' output
    gradients, and the weights (the benchmark quantizes them on every call)."""
    tokens = TE_PROFILE_SHAPES[0][0]
    return {"activations": tokens * sum(k for _, _, k, _ in TE_PROFILE_SHAPES),
            "gradients": tokens * sum(n for _, n, _, _ in TE_PROFILE_SHAPES),
            "weights": sum(n * k for _, n, k, _ in TE_PROFILE_SHAPES)}


@functools.cache
def block_scaled_gemm_slowdown() -> float:
    """How much longer an MXFP8 GEMM takes than the same GEMM in per-tensor FP8: the
    block-scaled kernels read a scale per 32 elements of each operand. Transformer Engine's
    layer profile on a B300, pre-quantized (``te-gemm-b300-fp8`` over ``te-gemm-b300-mxfp8``:
    7.161 ms against 6.812 ms for the same twelve GEMMs)."""
    df = measurements("gemm_model_shapes")
    return float(df.loc["te-gemm-b300-fp8", "value"] / df.loc["te-gemm-b300-mxfp8", "value"])


def quantization_bytes(recipe: str, calibration: Calibration | None = None,
                       gpu="B300") -> float:
    """HBM bytes per quantized element that Transformer Engine's quantization costs, at
    ``hbm_efficiency`` of the datasheet bandwidth: the published time a layer's quantization
    takes (autocast minus pre-quantized GEMM time, ``kind == "quantization"`` records) x the
    bandwidth the model grants memory-bound kernels / the elements quantized
    (:func:`te_profile_elements`). ``recipe``: ``fp8_delayed``, ``fp8_current``, ``fp8_mxfp8``,
    ``fp4_nvfp4``. Counts every pass (amax, scale, cast, transposed copy, Hadamard), not a
    byte budget. The record is ``gpu``'s own, else its architecture family's (Hopper: the
    tutorial's H200 NVL table), else the mean over every GPU that has one (the B300's alone
    for MXFP8 and NVFP4): the same kernels move bytes differently on each generation."""
    cal = DEFAULT if calibration is None else calibration
    checks.choice("recipe", recipe, QUANT_RECIPES)
    return _quantization_bytes(recipe, cal, _spec(gpu))


@functools.cache
def _quantization_bytes(recipe: str, cal: Calibration, g: hardware.GPU) -> float:
    recs = [(hardware.gpu(r["hardware"]), float(r["value"]))
            for _, r in measurements("quantization").iterrows()
            if r["id"].rsplit("-", 1)[1] == recipe]
    n = sum(te_profile_elements().values())
    for pick in ([x for x in recs if x[0].key == g.key],
                 [x for x in recs if x[0].family == g.family], recs):
        if pick:
            return float(np.mean([s * rg.hbm_Bps * cal.hbm_efficiency / n for rg, s in pick]))
    raise ValueError(f"{MEASUREMENTS_CSV} holds no quantization record for {recipe}")


QUANT_RECIPES = ("fp8_delayed", "fp8_current", "fp8_mxfp8", "fp4_nvfp4")


def checked(calibration) -> Calibration:
    """``calibration`` if it is a :class:`Calibration`, else a TypeError saying what is wanted."""
    if not isinstance(calibration, Calibration):
        raise TypeError(f"calibration must be a companion.calibration.Calibration (e.g. "
                        f"calibration.DEFAULT); got {type(calibration).__name__}")
    return calibration


def sustained_fraction(gpu, precision: str, calibration: Calibration | None = None) -> float:
    """What a training step's GEMMs sustain relative to the burst model (``gemm_in_training``
    x :func:`gemm_peak_fraction`, with tile and wave quantization): the burst model's time
    for a model's shapes over the published back-to-back GEMM time at those shapes, for this
    GPU or its architecture family; 1.0 (and the table says so) where no
    such record exists. Below 1 where power and clocks, not the tensor cores, set the pace."""
    g = _spec(gpu)
    cal = DEFAULT if calibration is None else calibration
    return _sustained(g, hardware.precision_name(precision), cal)[0]


__all__ = ["Calibration", "DEFAULT", "checked", "gemm_peak_fraction", "gemm_fraction_table",
           "measurements", "mamf_records", "sustained_fraction", "attention_fraction", "ATTENTION_RECORD_KINDS",
           "ATTENTION_NONCAUSAL_KINDS",
           "MECHANISMS",
           "quantization_bytes", "block_scaled_gemm_slowdown", "te_profile_elements", "QUANT_RECIPES", "linear_times", "TE_PROFILE_SHAPES"]
