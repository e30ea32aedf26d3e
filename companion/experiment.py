"""Training experiments that run on a CPU: a small decoder-only transformer per GEMM recipe.

Two questions. Does a low-precision recipe (``companion.formats_torch.RECIPES``: FP8 with
delayed, current or block scaling, MXFP8, MXFP4 with and without the NVFP4 recipe's
treatment, NVFP4) change which learning rate trains a transformer best (experiment ``"lr"``)?
And what breaks per-tensor FP8, and what repairs it (experiment ``"outliers"``: outlier channels
of controlled size, :class:`Outliers`)? The model is a GPT-style decoder (pre-LayerNorm blocks,
causal self-attention, a SwiGLU MLP, learned positions). Its four linear layers per block (QKV,
attention output, MLP up with gate and value fused, MLP down) are
:class:`companion.formats_torch.QLinear` layers in the chosen recipe: all three GEMMs of each
(forward, dgrad, wgrad) are emulated bit-exactly, as in TransformerEngine, which also leaves
the embedding, the LayerNorms, the attention score/softmax/value products and the output head
in higher precision (here: the head in BF16, the rest in FP32; the ``fp32`` recipe keeps the
head in FP32 too). The emulation reproduces the numerics of the formats, not their speed.

The corpus is generated, never downloaded: a random order-2 Markov chain over a small
vocabulary (:class:`MarkovLanguage`). Each next-token distribution is drawn from a sparse
Dirichlet, so the language has structure a model must use attention to find (the two previous
tokens), and its entropy rate, the lowest loss any model can reach, is computed exactly. Every
training batch is a fresh sample (no epoch, no overfitting); the final loss is measured on one
fixed held-out set (:func:`held_out_set`).

Run a sweep with ``python -m companion.experiment lr`` (or ``outliers``, or ``smoke`` for CI;
``--help`` lists the options): one JSON record per run in ``data/experiments/<experiment>/``
with its provenance, so a killed sweep resumes where it stopped. :mod:`companion.seedstats`
turns the records into paired multi-seed statistics.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import time
from pathlib import Path

import numpy as np

from companion import checks
from companion.bench import record

EXPERIMENTS_DIR = record.ROOT / "data" / "experiments"


# ----------------------------------------------------------------------------- the corpus
@dataclasses.dataclass(frozen=True)
class MarkovLanguage:
    """A random order-2 Markov chain: P(next | previous two) ~ Dirichlet(alpha) per context.

    Small ``alpha`` makes each context favour a few successors (low entropy, much to learn).
    """

    vocab: int = 16
    alpha: float = 0.05
    seed: int = 0

    def __post_init__(self):
        checks.number("vocab", self.vocab, integer=True, minimum=2, maximum=256)
        checks.number("alpha", self.alpha, positive=True)
        checks.number("seed", self.seed, integer=True, nonnegative=True)

    @functools.cached_property
    def table(self) -> np.ndarray:
        """P[a, b, c] = probability of token c after tokens a, b (float64)."""
        rng = np.random.default_rng([self.seed, 0x4C414E47])
        return rng.dirichlet(np.full(self.vocab, self.alpha), size=(self.vocab, self.vocab))

    @functools.cached_property
    def stationary(self) -> np.ndarray:
        """Stationary distribution of the pair (a, b), by power iteration."""
        pi = np.full((self.vocab, self.vocab), 1.0 / self.vocab ** 2)
        for _ in range(10_000):
            new = np.einsum("ab,abc->bc", pi, self.table)
            if np.abs(new - pi).sum() < 1e-13:
                break
            pi = new
        return new / new.sum()

    def entropy_nats(self, order: int = 2) -> float:
        """Conditional entropy of the next token given the previous ``order`` tokens (nats).

        ``order=2`` is the entropy rate (the best loss any model can reach), 1 what a bigram
        model can reach and 0 a unigram model (token frequencies only).
        """
        checks.number("order", order, integer=True, minimum=0, maximum=2)
        joint = self.stationary[:, :, None] * self.table  # P(a, b, c)
        marg = joint.sum(axis=tuple(range(2 - order)))  # keep the last `order` context tokens
        ctx = marg.sum(axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(marg > 0, marg * np.log(marg / ctx), 0.0)
        return float(-terms.sum())

    def sample(self, batch: int, length: int, rng: np.random.Generator,
               burn_in: int = 16) -> np.ndarray:
        """``batch`` independent sequences of ``length`` tokens (int64), started near
        stationarity by discarding ``burn_in`` tokens."""
        checks.number("batch", batch, integer=True, positive=True)
        checks.number("length", length, integer=True, minimum=2)
        cdf = np.cumsum(self.table, axis=-1)
        cdf[..., -1] = 1.0  # guard against rounding just below 1
        out = np.empty((batch, burn_in + length), dtype=np.int64)
        out[:, :2] = rng.integers(0, self.vocab, size=(batch, 2))
        draws = rng.random((batch, burn_in + length))
        rows = np.arange(batch)
        for t in range(2, burn_in + length):
            c = cdf[out[:, t - 2], out[:, t - 1]]
            out[:, t] = np.minimum((c < draws[rows, t, None]).sum(axis=1), self.vocab - 1)
        return out[:, burn_in:]


# ----------------------------------------------------------------------------- the model
@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape of the decoder: ``layers`` blocks of width ``d_model`` over ``context`` tokens,
    with a SwiGLU MLP of hidden width ``d_ff``. The defaults make every GEMM dimension that
    DeepSeek's 1x128 and 128x128 tiles run along a multiple of 128."""

    vocab: int = 16
    context: int = 16
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    d_ff: int = 256

    def __post_init__(self):
        for name in ("vocab", "context", "d_model", "heads", "layers", "d_ff"):
            checks.number(name, getattr(self, name), integer=True, positive=True)
        checks.divides("heads", self.heads, "d_model", self.d_model)


REMEDIES = ("none", "smooth", "bf16_layer")


@dataclasses.dataclass(frozen=True)
class Outliers:
    """Outlier channels injected into the input of every MLP down projection.

    ``channels`` of the SwiGLU output are multiplied by ``gain`` and the matching columns of
    the down projection's weight divided by it, so the network computes exactly the same
    function (and BF16 trains the same way): only a quantizer sees the outliers, as in the
    SwiGLU outlier channels of Fishman et al. 2024 (arXiv:2409.12517). ``remedy``:
    ``"smooth"`` divides each input channel of the down projection by its current absolute
    maximum before quantizing and folds the factor into the weight (Smooth-SwiGLU's per-channel
    scaling); ``"bf16_layer"`` runs the down projections in BF16.
    """

    gain: float = 1.0
    channels: int = 2
    remedy: str = "none"
    seed: int = 0  # which channels

    def __post_init__(self):
        checks.number("gain", self.gain, positive=True)
        checks.number("channels", self.channels, integer=True, nonnegative=True)
        checks.choice("remedy", self.remedy, REMEDIES)
        checks.number("seed", self.seed, integer=True, nonnegative=True)

    def channel_index(self, d_ff: int) -> np.ndarray:
        """The outlier channels among ``d_ff`` (sorted; drawn once from ``seed``)."""
        if self.channels > d_ff:
            raise ValueError(f"channels={self.channels} exceeds d_ff={d_ff}")
        rng = np.random.default_rng([self.seed, 0x4F55544C])
        return np.sort(rng.choice(d_ff, self.channels, replace=False))


def bf16_layer_names(config: ModelConfig, recipe_name: str) -> tuple[str, ...]:
    """The block linears a recipe keeps in BF16: its ``bf16_fraction`` of them (rounded up),
    counted from the output end, in the order the model applies them."""
    from companion.formats_torch import recipe
    order = [f"blocks.{i}.{n}" for i in range(config.layers) for n in ("qkv", "proj", "up", "down")]
    n = math.ceil(recipe(recipe_name).bf16_fraction * len(order) - 1e-9)
    return tuple(order[len(order) - n:]) if n else ()


def build_model(config: ModelConfig, recipe: str, seed: int = 0,
                outliers: Outliers | None = None):
    """The decoder with its block linears in ``recipe``, initialized from ``seed`` (torch is
    imported here, so numpy users of this module never need it). The same ``seed`` gives the
    same initial weights under every recipe."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    from companion.formats_torch import QLinear

    head_recipe = "fp32" if recipe == "fp32" else "bf16"
    keep = set(bf16_layer_names(config, recipe))
    outliers = outliers or Outliers()
    gain = torch.ones(config.d_ff)
    gain[torch.from_numpy(outliers.channel_index(config.d_ff))] = float(outliers.gain)

    def linear(name, n_in, n_out, layer_seed):
        return QLinear(n_in, n_out, recipe="bf16" if name in keep else recipe, seed=layer_seed)

    class Down(nn.Module):
        """The MLP down projection, where the outlier channels enter (see :class:`Outliers`)."""

        def __init__(self, name, layer_seed):
            super().__init__()
            if outliers.remedy == "bf16_layer":
                self.lin = QLinear(config.d_ff, config.d_model, recipe="bf16", seed=layer_seed)
            else:
                self.lin = linear(name, config.d_ff, config.d_model, layer_seed)
            self.register_buffer("gain", gain.clone())

        def forward(self, h):
            x, w = h * self.gain, self.lin.weight / self.gain
            if outliers.remedy == "smooth":
                s = x.detach().abs().amax(dim=tuple(range(x.ndim - 1))).clamp_min(1e-30)
                x, w = x / s, w * s
            return self.lin(x, weight=w)

    class Block(nn.Module):
        def __init__(self, i, layer_seed):
            super().__init__()
            d, ff = config.d_model, config.d_ff
            p = f"blocks.{i}."
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = linear(p + "qkv", d, 3 * d, layer_seed)
            self.proj = linear(p + "proj", d, d, layer_seed + 1)
            self.up = linear(p + "up", d, 2 * ff, layer_seed + 2)  # SwiGLU gate and value
            self.down = Down(p + "down", layer_seed + 3)

        def forward(self, x):
            b, t, d = x.shape
            h = config.heads
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            gate, value = self.up(self.ln2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(gate) * value)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(config.vocab, config.d_model)
            self.pos = nn.Embedding(config.context, config.d_model)
            self.blocks = nn.ModuleList(Block(i, 1000 * (i + 1)) for i in range(config.layers))
            self.ln_f = nn.LayerNorm(config.d_model)
            self.head = QLinear(config.d_model, config.vocab, recipe=head_recipe)
            for emb in (self.tok, self.pos):
                nn.init.normal_(emb.weight, std=0.02)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    torch.manual_seed(seed)
    model = Decoder()
    _seed_stochastic_rounding(model, seed)
    return model


def _seed_stochastic_rounding(model, seed):
    # one reproducible noise stream per layer, so a run repeats under its seed
    from companion.formats_torch import QLinear
    layers = [m for m in model.modules() if isinstance(m, QLinear)]
    for i, layer in enumerate(layers):
        layer.seed_rounding([seed, i])


def lr_at(step: int, lr: float, steps: int, warmup: int, final_fraction: float = 0.1) -> float:
    """Linear warm-up for ``warmup`` steps, then cosine decay to ``final_fraction`` of ``lr``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


def learned(final_loss, bigram_nats: float, entropy_rate_nats: float) -> bool:
    """Did a run learn the language? Its final loss must be below the midpoint between the
    bigram level (all a model that ignores the second context token can reach) and the entropy
    rate (the best any model can reach): it found at least half of what the context teaches."""
    return bool(final_loss is not None and math.isfinite(final_loss)
                and final_loss < (bigram_nats + entropy_rate_nats) / 2)


def held_out_set(language: MarkovLanguage, sequences: int, length: int) -> np.ndarray:
    """The evaluation sequences: drawn from the language's own seed, never the run's, so every
    seed and recipe is scored on the same tokens."""
    return language.sample(sequences, length, np.random.default_rng([language.seed, 2]))


# ----------------------------------------------------------------------------- one run
def run(recipe: str, lr: float, steps: int = 200, seed: int = 0, *,
        config: ModelConfig = ModelConfig(), language: MarkovLanguage | None = None,
        batch: int = 16, warmup: int | None = None, clip: float = 1.0,
        eval_batches: int = 8, stop_after: int | None = None, threads: int | None = 1,
        outliers: Outliers | None = None) -> dict:
    """Train the decoder with ``recipe`` at peak learning rate ``lr``; returns a plain dict.

    AdamW (betas 0.9, 0.95, no weight decay), gradient clipping at ``clip``, the schedule of
    :func:`lr_at` (``warmup`` defaults to 10% of ``steps``). ``stop_after`` ends the run early
    on the same schedule (to replay the start of a recorded run). ``threads`` fixes torch's
    thread count during the run (results can differ in the last bits between thread counts).
    ``outliers`` injects outlier channels (:class:`Outliers`). Runs are paired: a seed fixes
    the initial weights and the training batches whatever the recipe, and the held-out set
    depends on the language only, so it is the same for every seed and recipe.

    The dict holds ``loss`` (training loss per step), ``final_loss`` (held-out loss at the end,
    in nats per token), ``diverged`` (a non-finite loss, or a final loss above ln(vocab), the
    loss of uniform guessing), ``learned`` (see :func:`learned`), the language's entropies and
    the wall time.
    """
    import torch
    from torch.nn import functional as F

    from companion.formats_torch import RECIPES

    checks.choice("recipe", recipe, tuple(RECIPES))
    checks.number("lr", lr, positive=True)
    steps = checks.number("steps", steps, integer=True, positive=True)
    checks.number("seed", seed, integer=True, nonnegative=True)
    checks.number("batch", batch, integer=True, positive=True)
    checks.number("clip", clip, positive=True)
    checks.number("eval_batches", eval_batches, integer=True, positive=True)
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig; got {type(config).__name__}")
    if outliers is not None and not isinstance(outliers, Outliers):
        raise TypeError(f"outliers must be an Outliers or None; got {type(outliers).__name__}")
    language = language or MarkovLanguage(vocab=config.vocab)
    if language.vocab != config.vocab:
        raise ValueError(f"language.vocab={language.vocab} must equal config.vocab={config.vocab}")
    warmup = max(1, steps // 10) if warmup is None else checks.number(
        "warmup", warmup, integer=True, positive=True, maximum=steps)
    stop = steps if stop_after is None else checks.number(
        "stop_after", stop_after, integer=True, positive=True, maximum=steps)

    threads_before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(checks.number("threads", threads, integer=True, positive=True))
    t0 = time.perf_counter()
    try:
        model = build_model(config, recipe, seed, outliers)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
        data_rng = np.random.default_rng([seed, 1])
        held_out = torch.from_numpy(held_out_set(language, eval_batches * batch,
                                                 config.context))

        def loss_of(tokens, logits):
            # position 0 sees one token of context; score the predictions that see two or more
            return F.cross_entropy(logits[:, 1:-1].reshape(-1, config.vocab),
                                   tokens[:, 2:].reshape(-1))

        def evaluate():
            # no_grad: QLinear leaves its delayed-scaling histories where training left them
            with torch.no_grad():
                return float(loss_of(held_out, model(held_out)))

        losses, evals = [], [(0, evaluate())]
        diverged = False
        for step in range(stop):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, lr, steps, warmup)
            tokens = torch.from_numpy(language.sample(batch, config.context, data_rng))
            loss = loss_of(tokens, model(tokens))
            losses.append(float(loss.detach()))
            if not math.isfinite(losses[-1]):
                diverged = True
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            if (step + 1) % max(1, stop // 2) == 0 or step + 1 == stop:
                evals.append((step + 1, evaluate()))
        final = evals[-1][1] if not diverged else math.nan
        diverged = diverged or not math.isfinite(final) or final > math.log(config.vocab)
    finally:
        torch.set_num_threads(threads_before)
    return {
        "recipe": recipe, "lr": float(lr), "seed": seed, "steps": steps, "steps_run": len(losses),
        "batch": batch, "warmup": warmup, "clip": clip, "config": dataclasses.asdict(config),
        "language": dataclasses.asdict(language), "eval_batches": eval_batches,
        "outliers": dataclasses.asdict(outliers) if outliers else None,
        "bf16_layers": list(bf16_layer_names(config, recipe)),
        "entropy_rate_nats": language.entropy_nats(2), "bigram_nats": language.entropy_nats(1),
        "unigram_nats": language.entropy_nats(0), "uniform_nats": math.log(config.vocab),
        "loss": [round(x, 5) if math.isfinite(x) else None for x in losses],
        "eval": [[s, round(v, 5) if math.isfinite(v) else None] for s, v in evals],
        "final_loss": final if math.isfinite(final) else None, "diverged": diverged,
        "learned": learned(final, language.entropy_nats(1), language.entropy_nats(2)),
        "wall_s": time.perf_counter() - t0, "threads": threads,
    }


# ----------------------------------------------------------------------------- the sweeps
@dataclasses.dataclass(frozen=True)
class Job:
    """One training run of a sweep; ``name`` is its record's file name (without .json)."""

    recipe: str
    lr: float
    seed: int
    steps: int
    outliers: Outliers | None = None

    @property
    def name(self) -> str:
        o = self.outliers
        extra = f"-g{o.gain:g}-{o.remedy}" if o else ""
        return f"{self.recipe}{extra}-lr{self.lr:g}-s{self.seed}"

    def kwargs(self) -> dict:
        return dict(recipe=self.recipe, lr=self.lr, seed=self.seed, steps=self.steps,
                    outliers=self.outliers)


# Experiment 1: every recipe on a learning-rate grid (factor 2, around BF16's optimum).
LR_RECIPES = ("bf16", "fp8_delayed", "fp8_current", "fp8_block", "mxfp8", "mxfp4",
              "mxfp4_sr_rht", "nvfp4")
LR_GRID = (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)
SEEDS = (0, 1, 2, 3, 4)
STEPS = 150
# Experiment 2: outlier channels of growing gain; per-tensor FP8 and its remedies, against BF16.
OUTLIER_ARMS = (("bf16", "none"), ("fp8_current", "none"), ("fp8_delayed", "none"),
                ("fp8_block", "none"), ("mxfp8", "none"), ("fp8_current", "smooth"),
                ("fp8_current", "bf16_layer"))
OUTLIER_GAINS = (1e5, 1e6)  # per-tensor E4M3 spans 2^17.8 = 2.3e5 (a pilot at 1e4 showed no harm)
OUTLIER_LR = 2e-3


def sweep_jobs(experiment: str, seeds=SEEDS, steps: int = STEPS) -> list[Job]:
    """The jobs of ``experiment``: ``"lr"`` (experiment 1), ``"outliers"`` (experiment 2) or
    ``"smoke"`` (two recipes, two rates: what CI runs, with the command line's few steps; from
    Python the ``steps`` argument, ``STEPS`` by default)."""
    checks.choice("experiment", experiment, SWEEPS)
    seeds = [checks.number("seed", s, integer=True, nonnegative=True) for s in seeds]
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    checks.number("steps", steps, integer=True, positive=True)
    # seed-major order: a sweep cut short still holds complete, paired seeds
    if experiment == "lr":
        return [Job(r, lr, s, steps) for s in seeds for r in LR_RECIPES for lr in LR_GRID]
    if experiment == "outliers":
        return [Job(r, OUTLIER_LR, s, steps, Outliers(gain=g, remedy=rem))
                for s in seeds for g in OUTLIER_GAINS for r, rem in OUTLIER_ARMS]
    return [Job(r, lr, s, steps) for s in seeds for r in ("bf16", "fp8_current")
            for lr in (2e-3, 4e-3)]


SWEEPS = ("lr", "outliers", "smoke")


def _write_json(path: Path, body: dict) -> None:
    # through a temporary file: a killed run never leaves half a record
    import json
    import os
    import tempfile
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(body, indent=1, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run_sweep(experiment: str, directory: Path | str | None = None, seeds=SEEDS,
              steps: int = STEPS, progress: bool = True, limit: int | None = None) -> dict:
    """Run the jobs of :func:`sweep_jobs` that have no record yet in ``directory`` (default
    ``data/experiments/<experiment>/``), one JSON record per job with its provenance, so a
    killed sweep resumes where it stopped. ``limit`` stops after that many new jobs. Returns
    counts: ``done`` (run now), ``skipped`` (already recorded), ``total``."""
    import torch
    jobs = sweep_jobs(experiment, seeds, steps)
    directory = Path(directory) if directory is not None else EXPERIMENTS_DIR / experiment
    directory.mkdir(parents=True, exist_ok=True)
    missing = [j for j in jobs if not (directory / f"{j.name}.json").exists()]
    todo = missing
    if limit is not None:
        todo = missing[:checks.number("limit", limit, integer=True, nonnegative=True)]
    torch.set_num_threads(1)  # one core per sweep; the results then repeat bit for bit
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc=experiment, unit="run", file=sys.stderr)
    try:
        for job in todo:
            if bar is not None:
                bar.set_postfix_str(job.name)
            result = run(**job.kwargs())
            meta = record.provenance("cpu")
            meta.update({"experiment": experiment, "job": job.name,
                         "command": f"python -m companion.experiment {experiment}"})
            _write_json(directory / f"{job.name}.json",
                        {"kind": f"experiment_{experiment}", "meta": meta, "result": result})
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return {"done": len(todo), "skipped": len(jobs) - len(missing), "total": len(jobs)}


def load_sweep(experiment: str, directory: Path | str | None = None) -> list[dict]:
    """Every recorded job of ``experiment``, each its run dict plus ``meta`` (provenance)."""
    import json
    checks.choice("experiment", experiment, SWEEPS)
    directory = Path(directory) if directory is not None else EXPERIMENTS_DIR / experiment
    out = []
    for p in sorted(directory.glob("*.json")):
        rec = json.loads(p.read_text())
        out.append({**rec["result"], "meta": rec["meta"]})
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: run (or resume) a sweep and record each job; returns the exit status."""
    p = argparse.ArgumentParser(
        prog="python -m companion.experiment",
        description="Train a small decoder on CPU with emulated low-precision GEMMs; one JSON "
                    "record per run in data/experiments/<experiment>/ (existing ones are kept, "
                    "so a killed sweep resumes).")
    p.add_argument("experiment", choices=SWEEPS,
                   help="lr: every recipe on a learning-rate grid; outliers: outlier channels "
                        "and remedies; smoke: a few steps, for CI")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                   help="comma-separated seeds (default: %(default)s)")
    p.add_argument("--steps", type=int, default=None,
                   help=f"optimizer steps per run (default {STEPS}; smoke: 3)")
    p.add_argument("--out", help="directory for the records (default data/experiments/<experiment>/)")
    p.add_argument("--limit", type=int, help="run at most this many new jobs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    try:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        print(f"error: --seeds must be comma-separated integers; got {args.seeds!r}",
              file=sys.stderr)
        return 2
    steps = args.steps if args.steps is not None else (3 if args.experiment == "smoke" else STEPS)
    try:
        counts = run_sweep(args.experiment, args.out, seeds, steps, not args.no_progress,
                           args.limit)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.experiment}: {counts['done']} run, {counts['skipped']} already recorded, "
          f"{counts['total']} in the sweep")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
