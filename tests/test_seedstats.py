"""Paired multi-seed statistics: Student-t intervals and the loss-optimal learning rate.

Reference values: t_{0.975, df} from the NIST/SEMATECH e-Handbook of Statistical Methods,
section 1.3.6.7.2; the vertex of a parabola y = (x - c)^2 is c; the sample standard deviation
of 1..5 is sqrt(2.5).
"""
import math

import numpy as np
import pandas as pd
import pytest

from companion import seedstats as S


def test_t_quantiles_from_the_table():
    assert S.t975(4) == 2.776 and S.t975(1) == 12.706 and S.t975(30) == 2.042
    assert S.t975(22) == S.t975(20) == 2.086  # between rows: the next smaller df (wider)
    # NIST's table to df 100 (t_{0.975,31} is 2.040, so 1.960 from df 31 on was too narrow);
    # beyond its last row the df-100 value, still conservative against the normal 1.960
    assert S.t975(31) == S.t975(39) == 2.042 and S.t975(40) == 2.021 and S.t975(100) == 1.984
    assert S.t975(1000) == 1.984
    with pytest.raises(ValueError, match="df"):
        S.t975(0)


def test_paired_difference():
    d = S.paired_difference([2, 4, 6, 8, 10], [1, 2, 3, 4, 5])  # differences 1..5
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)
    assert d["mean"] == 3 and d["lo"] == pytest.approx(3 - half) and d["hi"] == pytest.approx(3 + half)
    with pytest.raises(ValueError, match="2 seeds"):
        S.paired_difference([1.0], [2.0])
    with pytest.raises(ValueError, match="finite"):
        S.paired_difference([1.0, math.nan], [2.0, 1.0])
    with pytest.raises(ValueError, match="equal-length"):  # one value broadcast over three
        S.paired_difference([1.0, 2.0, 3.0], [0.0])


def _frame(centres, seeds=5, noise=0.05):
    """Synthetic sweep: loss = (log2 lr - log2 centre)^2 / 4 + a per-seed offset shared by
    every recipe (paired noise), on the factor-2 grid 2^-11 .. 2^-6."""
    rng = np.random.default_rng(0)
    offset = rng.normal(0, noise, seeds)
    rows = []
    for recipe, c in centres.items():
        for lr in 2.0 ** np.arange(-11, -5):
            for s in range(seeds):
                rows.append({"recipe": recipe, "lr": lr, "seed": s,
                             "final": (math.log2(lr) - math.log2(c)) ** 2 / 4 + 1 + offset[s]})
    return pd.DataFrame(rows)


def test_vertex_of_an_exact_parabola():
    x = np.arange(-2.0, 3.0)
    assert S._vertex(x, (x - 1.3) ** 2) == pytest.approx(1.3)
    assert S._vertex(x, x) == -2.0  # minimum at the edge: the edge
    assert S._vertex(x, np.array([0, 1, 0.5, 1, 0])) == -2.0


def test_optimum_and_paired_ratio():
    f = _frame({"bf16": 2.0 ** -8.3, "fp8": 2.0 ** -9.6})
    opt = S.optimum_lr(f, "bf16")
    assert opt["lr"] == pytest.approx(2.0 ** -8.3) and not opt["at_edge"]
    assert opt["lo"] <= opt["lr"] <= opt["hi"]
    r = S.lr_ratio(f, "fp8")  # the per-seed offsets are shared: the ratio is exactly 2^1.3
    assert r["ratio"] == pytest.approx(2.0 ** 1.3) and r["lo"] == pytest.approx(2.0 ** 1.3)
    assert r["hi"] == pytest.approx(2.0 ** 1.3) and r["n_seeds"] == 5
    assert S.lr_verdict(r) == "supported"
    assert S.lr_verdict({"lo": 0.5, "hi": 1.5}) == "contradicted"
    assert S.lr_verdict({"lo": 0.9, "hi": 3.0}) == "unresolved"
    with pytest.raises(ValueError, match="recipes present"):
        S.optimum_lr(f, "nvfp4")


def test_final_losses_count_divergence_as_uniform_guessing():
    base = {"recipe": "a", "lr": 1e-3, "seed": 0, "uniform_nats": math.log(16), "learned": False}
    rows = S.final_losses([{**base, "final_loss": None, "diverged": True},
                           {**base, "final_loss": 1.2, "diverged": False, "seed": 1}])
    assert rows["final"].tolist() == [math.log(16), 1.2]
    assert rows["remedy"].tolist() == ["none", "none"]


def test_bootstrap_seed_is_named_when_negative():
    with pytest.raises(ValueError, match="seed"):
        S._boot_index(5, 100, -1)
