"""A training experiment that runs on a CPU: a small decoder-only transformer per GEMM recipe.

The question: does a low-precision recipe (FP8 with delayed, current or block scaling, MXFP8,
MXFP4, NVFP4; ``companion.formats_torch.RECIPES``) change which learning rates train a
transformer, and how well? The model is a GPT-style decoder (pre-LayerNorm blocks, causal
self-attention, GELU MLP, learned positions). Its four linear layers per block (QKV, attention
output, MLP up, MLP down) are :class:`companion.formats_torch.QLinear` layers in the chosen
recipe: all three GEMMs of each (forward, dgrad, wgrad) are emulated bit-exactly, as in
TransformerEngine, which also leaves the embedding, the LayerNorms, the attention
score/softmax/value products and the output head in higher precision (here: the head in
BF16, the rest in FP32; the ``fp32`` recipe keeps the head in FP32 too). The emulation
reproduces the numerics of the formats, not their speed.

The corpus is generated, never downloaded: a random order-2 Markov chain over a small
vocabulary (:class:`MarkovLanguage`). Each next-token distribution is drawn from a sparse
Dirichlet, so the language has structure a model must use attention to find (the two previous
tokens), and its entropy rate, the lowest loss any model can reach, is computed exactly. Every
training batch is a fresh sample (no epoch, no overfitting); the final loss is measured on
held-out sequences drawn with a different seed.

Run the recorded sweep with ``python -m companion.experiment`` (``--help`` lists the options);
records go to ``data/experiments/`` through :func:`companion.bench.record.write_record`.
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
KIND = "lr_sweep"
SWEEP_RECIPES = ("bf16", "fp8_delayed", "fp8_current", "fp8_block", "mxfp8", "mxfp4", "nvfp4")
SWEEP_LRS = (1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2, 6.4e-2)  # factor 2: resolves "2-4x"


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
    """Shape of the decoder: ``layers`` blocks of width ``d_model`` over ``context`` tokens."""

    vocab: int = 16
    context: int = 32
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    d_ff: int = 256

    def __post_init__(self):
        for name in ("vocab", "context", "d_model", "heads", "layers", "d_ff"):
            checks.number(name, getattr(self, name), integer=True, positive=True)
        checks.divides("heads", self.heads, "d_model", self.d_model)


def build_model(config: ModelConfig, recipe: str, seed: int = 0):
    """The decoder with its block linears in ``recipe``, initialized from ``seed`` (torch is
    imported here, so numpy users of this module never need it)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    from companion.formats_torch import QLinear

    head_recipe = "fp32" if recipe == "fp32" else "bf16"

    class Block(nn.Module):
        def __init__(self, layer_seed):
            super().__init__()
            d, ff = config.d_model, config.d_ff
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = QLinear(d, 3 * d, recipe=recipe, seed=layer_seed)
            self.proj = QLinear(d, d, recipe=recipe, seed=layer_seed + 1)
            self.fc1 = QLinear(d, ff, recipe=recipe, seed=layer_seed + 2)
            self.fc2 = QLinear(ff, d, recipe=recipe, seed=layer_seed + 3)

        def forward(self, x):
            b, t, d = x.shape
            h = config.heads
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(config.vocab, config.d_model)
            self.pos = nn.Embedding(config.context, config.d_model)
            self.blocks = nn.ModuleList(Block(1000 * (i + 1)) for i in range(config.layers))
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


# ----------------------------------------------------------------------------- one run
def run(recipe: str, lr: float, steps: int = 400, seed: int = 0, *,
        config: ModelConfig = ModelConfig(), language: MarkovLanguage | None = None,
        batch: int = 16, warmup: int | None = None, clip: float = 1.0,
        eval_batches: int = 8, stop_after: int | None = None, threads: int | None = 1) -> dict:
    """Train the decoder with ``recipe`` at peak learning rate ``lr``; returns a plain dict.

    AdamW (betas 0.9, 0.95, no weight decay), gradient clipping at ``clip``, the schedule of
    :func:`lr_at` (``warmup`` defaults to 10% of ``steps``). ``stop_after`` ends the run early
    on the same schedule (to replay the start of a recorded run). ``threads`` fixes torch's
    thread count during the run (results can differ in the last bits between thread counts).

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
        model = build_model(config, recipe, seed)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
        data_rng = np.random.default_rng([seed, 1])
        held_out = torch.from_numpy(language.sample(eval_batches * batch, config.context,
                                                    np.random.default_rng([seed, 2])))

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
            if (step + 1) % max(1, stop // 5) == 0 or step + 1 == stop:
                evals.append((step + 1, evaluate()))
        final = evals[-1][1] if not diverged else math.nan
        diverged = diverged or not math.isfinite(final) or final > math.log(config.vocab)
    finally:
        torch.set_num_threads(threads_before)
    return {
        "recipe": recipe, "lr": float(lr), "seed": seed, "steps": steps, "steps_run": len(losses),
        "batch": batch, "warmup": warmup, "clip": clip, "config": dataclasses.asdict(config),
        "language": dataclasses.asdict(language),
        "entropy_rate_nats": language.entropy_nats(2), "bigram_nats": language.entropy_nats(1),
        "unigram_nats": language.entropy_nats(0), "uniform_nats": math.log(config.vocab),
        "loss": [round(x, 5) if math.isfinite(x) else None for x in losses],
        "eval": [[s, round(v, 5) if math.isfinite(v) else None] for s, v in evals],
        "final_loss": final if math.isfinite(final) else None, "diverged": diverged,
        "learned": learned(final, language.entropy_nats(1), language.entropy_nats(2)),
        "wall_s": time.perf_counter() - t0, "threads": threads,
    }


# ----------------------------------------------------------------------------- the sweep
def _run_kwargs(kwargs):
    return run(**kwargs)


def sweep(recipes=SWEEP_RECIPES, lrs=SWEEP_LRS, steps: int = 400, seeds=(0,), workers: int = 1,
          progress=None, **kwargs) -> list[dict]:
    """:func:`run` for every recipe x learning rate x seed; ``workers`` processes in parallel.

    ``progress``, if given, is called with each finished run's dict. Other keyword arguments go
    to :func:`run`. Results come back in grid order whatever order they finish in.
    """
    from companion.formats_torch import RECIPES
    recipes, lrs, seeds = list(recipes), list(lrs), list(seeds)
    if not recipes or not lrs or not seeds:
        raise ValueError("recipes, lrs and seeds must each name at least one value")
    for r in recipes:
        checks.choice("recipe", r, tuple(RECIPES))
    for lr in lrs:
        checks.number("lr", lr, positive=True)
    checks.number("workers", workers, integer=True, positive=True)
    jobs = [dict(recipe=r, lr=lr, steps=steps, seed=s, **kwargs)
            for r in recipes for lr in lrs for s in seeds]
    if workers == 1:
        out = []
        for job in jobs:
            out.append(run(**job))
            if progress:
                progress(out[-1])
        return out
    import concurrent.futures as cf
    import multiprocessing
    results = [None] * len(jobs)
    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        futures = {ex.submit(_run_kwargs, job): i for i, job in enumerate(jobs)}
        for fut in cf.as_completed(futures):
            results[futures[fut]] = fut.result()
            if progress:
                progress(results[futures[fut]])
    return results


def summary(results: list[dict]):
    """One row per run: recipe, lr, seed, final loss, its gap to the entropy rate, and the
    ``diverged`` and ``learned`` flags of :func:`run` (a DataFrame)."""
    import pandas as pd
    rows = [{"recipe": r["recipe"], "lr": r["lr"], "seed": r["seed"],
             "final_loss": r["final_loss"],
             "gap_nats": (r["final_loss"] - r["entropy_rate_nats"]
                          if r["final_loss"] is not None else None),
             "diverged": r["diverged"], "learned": r["learned"]} for r in results]
    return pd.DataFrame(rows)


def best_lr(results: list[dict]) -> dict:
    """Per recipe: the learning rate with the lowest mean final loss over seeds (diverged runs
    excluded), that loss, and the largest learning rate at which every seed learned (see
    :func:`learned`); None where no rate qualifies."""
    table = summary(results)
    out = {}
    for recipe, df in table.groupby("recipe", sort=False):
        by_lr = df.groupby("lr").agg(loss=("final_loss", "mean"), diverged=("diverged", "any"),
                                     learned=("learned", "all"))
        ok = by_lr[~by_lr["diverged"]]
        learned = by_lr[by_lr["learned"]]
        out[recipe] = {"best_lr": float(ok["loss"].idxmin()) if len(ok) else None,
                       "best_loss": float(ok["loss"].min()) if len(ok) else None,
                       "max_lr_learned": float(learned.index.max()) if len(learned) else None}
    return out


def _print_run(r):
    final = "NaN" if r["final_loss"] is None else f"{r['final_loss']:.4f}"
    print(f"{r['recipe']:<12} lr={r['lr']:<8g} seed={r['seed']} final={final} "
          f"diverged={r['diverged']} ({r['wall_s']:.1f} s)", flush=True)


def _parse_list(flag, text, kind):
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated {kind.__name__} values; got {text!r}")


def main(argv: list[str] | None = None) -> int:
    """Command line: run a learning-rate sweep and record it; returns the exit status."""
    p = argparse.ArgumentParser(
        prog="python -m companion.experiment",
        description="Train a small decoder on CPU with emulated low-precision GEMMs over a grid "
                    "of recipes and learning rates; record the sweep in data/experiments/.")
    p.add_argument("--recipes", default=",".join(SWEEP_RECIPES),
                   help="comma-separated recipes (default: %(default)s)")
    p.add_argument("--lrs", default=",".join(f"{x:g}" for x in SWEEP_LRS),
                   help="comma-separated peak learning rates (default: %(default)s)")
    p.add_argument("--steps", type=int, default=400, help="optimizer steps per run")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default: %(default)s)")
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--workers", type=int, default=1, help="runs in parallel (processes)")
    p.add_argument("--quick", action="store_true", help="2 recipes x 2 rates x 10 steps")
    p.add_argument("--no-save", action="store_true", help="print only; write no record")
    p.add_argument("--out", help="directory for the record (default data/experiments/)")
    args = p.parse_args(argv)
    try:
        recipes = [r.strip() for r in args.recipes.split(",") if r.strip()]
        lrs = _parse_list("--lrs", args.lrs, float)
        seeds = _parse_list("--seeds", args.seeds, int)
        steps = args.steps
        if args.quick:
            recipes, lrs, steps = recipes[:2], lrs[:2], 10
        t0 = time.perf_counter()
        results = sweep(recipes, lrs, steps, seeds, workers=args.workers, batch=args.batch,
                        progress=_print_run)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.no_save:
        return 0
    meta = record.provenance("cpu")
    meta["command"] = " ".join(["python -m companion.experiment",
                                *(sys.argv[1:] if argv is None else argv)])
    meta.update({"experiment": "lr_sweep", "wall_s": time.perf_counter() - t0,
                 "settings": {"recipes": recipes, "lrs": lrs, "seeds": seeds, "steps": steps,
                              "batch": args.batch, "workers": args.workers,
                              "config": dataclasses.asdict(ModelConfig()),
                              "language": dataclasses.asdict(MarkovLanguage())}})
    path = record.write_record(KIND, results, meta,
                               Path(args.out) if args.out else EXPERIMENTS_DIR)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
