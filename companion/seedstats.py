"""Statistics of multi-seed training sweeps: paired differences and the loss-optimal rate.

Runs of :mod:`companion.experiment` are paired: one seed gives the same initial weights and
the same batches under every recipe, so recipes are compared seed by seed and the spread of
those paired differences, not of the raw losses, sets the uncertainty. Two tools:

- :func:`paired_difference`: mean of per-seed differences with a Student-t interval.
- :func:`optimum_lr`, :func:`lr_ratio`: the loss-optimal learning rate, from a parabola in
  log2(lr) through the grid minimum of the seed-mean loss and its two neighbours, with a
  percentile bootstrap over seeds (the same resampled seeds for both recipes of a ratio).

A run that diverged, or ended above the loss of uniform guessing, counts at that uniform loss:
it learned nothing, and leaving it out would flatter the recipe.
"""
from __future__ import annotations

import math

import numpy as np

from companion import checks

# Two-sided 95% quantiles t_{0.975, df} of Student's t (NIST/SEMATECH e-Handbook of Statistical
# Methods, section 1.3.6.7.2, "Critical values of the Student's t distribution").
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131,
         16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042,
         40: 2.021, 50: 2.009, 60: 2.000, 70: 1.994, 80: 1.990, 90: 1.987, 100: 1.984}


def t975(df: int) -> float:
    """t_{0.975, df}; degrees of freedom between table rows, or beyond its last (100), use
    the next smaller row: a slightly wider, conservative interval, never the normal 1.960."""
    checks.number("df", df, integer=True, positive=True)
    return _T975[max(k for k in _T975 if k <= df)]


def final_losses(results: list[dict]):
    """One row per run: recipe, remedy, gain, lr, seed, ``final`` (held-out loss in nats,
    the uniform loss for a run that diverged) and the ``diverged``/``learned`` flags."""
    import pandas as pd
    rows = []
    for r in results:
        o = r.get("outliers") or {}
        final = r["final_loss"]
        bad = r["diverged"] or final is None or not math.isfinite(final)
        rows.append({"recipe": r["recipe"], "remedy": o.get("remedy", "none"),
                     "gain": o.get("gain", 1.0), "lr": r["lr"], "seed": r["seed"],
                     "final": r["uniform_nats"] if bad else min(final, r["uniform_nats"]),
                     "diverged": bool(r["diverged"]), "learned": bool(r["learned"])})
    return pd.DataFrame(rows)


def paired_difference(a, b) -> dict:
    """Mean of ``a - b`` over paired seeds with its 95% Student-t interval (``lo``, ``hi``);
    ``a`` and ``b`` are sequences in the same seed order."""
    if np.shape(a) != np.shape(b) or np.ndim(a) != 1 or len(a) < 2:  # no broadcasting
        raise ValueError(f"a and b must be equal-length 1-D sequences of at least 2 seeds; "
                         f"got shapes {np.shape(a)} and {np.shape(b)}")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if not np.all(np.isfinite(d)):
        raise ValueError("a and b must be finite")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    half = t975(len(d) - 1) * sd / math.sqrt(len(d))
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "sd": sd, "n": len(d)}


def _loss_matrix(frame, recipe, seeds=None):
    df = frame[frame["recipe"] == recipe]
    if df.empty:
        raise ValueError(f"no runs of recipe={recipe!r}; recipes present: "
                         f"{sorted(frame['recipe'].unique())}")
    table = df.pivot_table(index="seed", columns="lr", values="final", aggfunc="mean")
    if seeds is not None:
        table = table.loc[list(seeds)]
    if table.isna().any().any():
        raise ValueError(f"recipe={recipe!r} lacks runs for some (seed, lr) pairs")
    return np.log2(np.asarray(table.columns, dtype=float)), table.to_numpy(), list(table.index)


def _vertex(x, y):
    """log2 of the optimal rate from the mean curve ``y`` on grid ``x`` (see module doc);
    an edge minimum returns the edge, and a non-convex triple its middle point."""
    j = int(np.argmin(y))
    if j == 0 or j == len(x) - 1:
        return float(x[j])
    x0, x1, x2 = x[j - 1:j + 2]
    y0, y1, y2 = y[j - 1:j + 2]
    denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / denom
    b = (x2 ** 2 * (y0 - y1) + x1 ** 2 * (y2 - y0) + x0 ** 2 * (y1 - y2)) / denom
    if a <= 0:
        return float(x1)
    return float(min(max(-b / (2 * a), x0), x2))


def _boot_index(n_seeds, n_boot, seed):
    checks.number("n_boot", n_boot, integer=True, minimum=100)
    checks.number("seed", seed, integer=True, minimum=0)
    return np.random.default_rng([seed, 0x424F4F54]).integers(0, n_seeds, (n_boot, n_seeds))


def optimum_lr(frame, recipe: str, n_boot: int = 4000, seed: int = 0) -> dict:
    """The loss-optimal learning rate of ``recipe`` with a 95% bootstrap interval over seeds:
    ``lr``, ``lo``, ``hi``, ``at_edge`` (the seed-mean minimum sits at the end of the grid, so
    the optimum may lie beyond it) and ``loss`` (the seed-mean loss at the best grid rate)."""
    x, m, _ = _loss_matrix(frame, recipe)
    idx = _boot_index(m.shape[0], n_boot, seed)
    boot = np.array([_vertex(x, m[i].mean(axis=0)) for i in idx])
    mean = m.mean(axis=0)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    j = int(np.argmin(mean))
    return {"lr": 2.0 ** _vertex(x, mean), "lo": 2.0 ** lo, "hi": 2.0 ** hi,
            "at_edge": j in (0, len(x) - 1), "loss": float(mean[j]), "n_seeds": m.shape[0]}


def lr_ratio(frame, recipe: str, reference: str = "bf16", n_boot: int = 4000,
             seed: int = 0) -> dict:
    """How many times lower ``recipe``'s optimal rate is than ``reference``'s (above 1: the
    recipe wants a lower rate), with a paired 95% bootstrap interval (``ratio``, ``lo``,
    ``hi``) over the seeds both have."""
    xr, mr, seeds_r = _loss_matrix(frame, reference)
    xa, ma, seeds_a = _loss_matrix(frame, recipe)
    common = sorted(set(seeds_r) & set(seeds_a))
    if len(common) < 2:
        raise ValueError(f"{recipe!r} and {reference!r} share fewer than 2 seeds")
    xr, mr, _ = _loss_matrix(frame, reference, common)
    xa, ma, _ = _loss_matrix(frame, recipe, common)
    idx = _boot_index(len(common), n_boot, seed)
    boot = np.array([_vertex(xr, mr[i].mean(0)) - _vertex(xa, ma[i].mean(0)) for i in idx])
    lo, hi = np.percentile(boot, [2.5, 97.5])
    point = _vertex(xr, mr.mean(0)) - _vertex(xa, ma.mean(0))
    return {"ratio": 2.0 ** point, "lo": 2.0 ** lo, "hi": 2.0 ** hi, "n_seeds": len(common)}


def lr_verdict(ratio: dict, low: float = 2.0) -> str:
    """Judge "needs a ``low``-times lower rate" from :func:`lr_ratio`'s interval:
    ``"supported"`` if the interval lies at or above ``low``, ``"contradicted"`` if it lies
    below, ``"unresolved"`` if it straddles ``low``."""
    if ratio["lo"] >= low:
        return "supported"
    if ratio["hi"] < low:
        return "contradicted"
    return "unresolved"
