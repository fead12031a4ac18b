"""Quantile intervals in values (issue 33): two bracketing releases at a declared share of ε.

* the exact output law of each bracket puts at most α/2 on a bin whose edge would miss the
  sample quantile, on random data (hypothesis) — the coverage proof's claim;
* coverage in simulation over n, ε and data shapes, for every usual definition of the sample
  quantile (numpy's methods), at or above the level;
* privacy: brute force over every data set and replacement on a small grid, the bracket's
  output law moves by at most its ε; through the pipeline on every engine, neighbours give
  the same outcome class and the padded rank distances move by at most the logged Δ;
* the point's rank interval is within 1.5× of the worst case over data of the same public n.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers.neighbours import NEIGHBOURS, base_data, protect, with_row
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe.mechanisms.quantile_intervals import BracketMechanism, value_interval
from dpframe.mechanisms.quantiles import QuantileMechanism, bin_counts, bin_edges, rank_distances
from dpframe.release._pipeline import exact_measurements

METHODS = ("linear", "inverted_cdf", "lower", "higher", "nearest", "midpoint", "hazen",
           "weibull", "median_unbiased", "closest_observation")


def _bad_bins(counts: np.ndarray, q: float, side: str, bins: int) -> np.ndarray:
    """Bins whose released edge would miss an order statistic x_(k), ⌊t⌋ ≤ k ≤ ⌈t⌉ + 1."""
    cum = np.concatenate([[0], np.cumsum(counts)])
    n, t = int(cum[-1]), q * int(cum[-1])
    if side == "lower":  # e_j > x_(k) for k = max(⌊t⌋, 1): at least k rows below e_j
        k = max(math.floor(t), 1)
        return np.array([j > 0 and cum[j] >= k for j in range(bins)])
    m = min(math.ceil(t) + 1, n)  # e_{j+1} < x_(m): fewer than m rows up to bin j
    return np.array([j < bins - 1 and cum[j + 1] < m for j in range(bins)])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=0, max_size=30), st.sampled_from([0.0, 0.1, 0.5, 1.0]),
       st.sampled_from([0.3, 1.0, 4.0]), st.sampled_from([0.5, 0.9]),
       st.sampled_from(["lower", "upper"]), st.sampled_from(["replace", "add/remove"]))
def test_exact_law_puts_at_most_alpha_half_on_bins_that_miss(rows, q, eps, level, side, nb):
    counts = np.bincount(np.asarray(rows, dtype=np.int64), minlength=16)
    alpha_side = (1 - level) / 2
    mech = BracketMechanism(eps, 0.0, 16.0, q, side=side, alpha_side=alpha_side, bins=16,
                            neighbours=nb)
    p = mech.probabilities(counts)
    assert p[_bad_bins(counts, q, side, 16)].sum() <= alpha_side * (1 + 1e-9)


SHAPES = {
    "normal": lambda rng, n: rng.normal(50, 15, n),
    "point mass": lambda rng, n: np.full(n, 37.0),
    "two points": lambda rng, n: rng.choice([10.0, 90.0], n),
    "at the bounds": lambda rng, n: rng.choice([-5.0, 0.0, 100.0, 140.0], n),
    "gap at the median": lambda rng, n: np.concatenate([rng.uniform(0, 20, n // 2),
                                                         rng.uniform(80, 100, n - n // 2)]),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_coverage_in_simulation_over_n_eps_and_shapes(shape):
    """200 draws of both brackets per (n, ε, q); every definition of the sample quantile of
    the clamped data inside [lower, upper] in at least level − 3 binomial s.d. of the draws."""
    rng = np.random.default_rng(33)
    bins, draws, level = 128, 200, 0.9
    misses, total = 0, 0
    for n, eps, q in itertools.product((1, 20, 500), (0.2, 2.0), (0.1, 0.5, 0.95)):
        x = np.clip(SHAPES[shape](rng, n), 0.0, 100.0)
        counts = np.tile(bin_counts(x, 0.0, 100.0, bins), (draws, 1))  # one group per draw
        ends = [BracketMechanism(eps, 0.0, 100.0, q, side=side, alpha_side=(1 - level) / 2,
                                 bins=bins).sample(counts, random_state=rng).values[:, 0]
                for side in ("lower", "upper")]
        lo, hi = value_interval(*ends)
        truths = np.array([np.quantile(x, q, method=m) for m in METHODS])
        misses += int(((truths[None, :] < lo[:, None]) | (truths[None, :] > hi[:, None]))
                      .any(axis=1).sum())
        total += draws
    alpha = 1 - level
    assert misses / total <= alpha + 3 * math.sqrt(alpha * level / total)


def test_brute_force_privacy_of_the_brackets():
    """Every data set of 3 rows on 4 bins and every replacement of one row (and every
    addition/removal under add/remove): the log-probability of every output moves by at
    most the bracket's ε (the exact law, before the sampler's 1e-11 overhead)."""
    for nb, side, q in itertools.product(["replace", "add/remove"], ["lower", "upper"],
                                         [0.0, 0.3, 0.5, 1.0]):
        mech = BracketMechanism(1.0, 0.0, 4.0, q, side=side, alpha_side=0.05, bins=4,
                                neighbours=nb)
        sizes = [3] if nb == "replace" else [0, 1, 2, 3]
        sets = [np.bincount(np.asarray(r, dtype=np.int64), minlength=4)
                for n in sizes for r in itertools.combinations_with_replacement(range(4), n)]
        logs = [np.log(mech.probabilities(c)) for c in sets]
        for (a, la), (b, lb) in itertools.combinations(zip(sets, logs, strict=True), 2):
            diff = np.abs(a - b).sum()
            near = diff == 2 if nb == "replace" else diff == 1
            if near:
                assert np.max(np.abs(la - lb)) <= mech.epsilon * (1 + 1e-9), (nb, side, q)


def test_released_ends_are_outer_bin_edges_inside_the_bounds():
    mech = BracketMechanism(1.0, -3.0, 5.0, [0.2, 0.8], side="lower", alpha_side=0.05, bins=8)
    counts = bin_counts(np.linspace(-3, 5, 50), -3.0, 5.0, 8)
    out = mech.sample(counts, random_state=1)
    edges = bin_edges(-3.0, 5.0, 8)
    assert np.all(out.values <= edges[out.bins]) and np.all(out.values >= -3.0)
    assert np.all(np.diff(out.values) >= 0)  # sorted over levels
    up = BracketMechanism(1.0, -3.0, 5.0, 0.5, side="upper", alpha_side=0.05, bins=8)
    o = up.sample(counts, random_state=1)
    assert o.values[0] >= edges[o.bins[0] + 1] and o.values[0] <= 5.0
    with pytest.raises(dpf.ParameterError, match="side"):
        BracketMechanism(1.0, 0.0, 1.0, 0.5, side="middle", alpha_side=0.05)


# -- through the pipeline ------------------------------------------------------------------
def _entries(frame: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in ("time", "ledger_id", "release_id")}
            for e in frame.dp.session.ledger.snapshot_document()["entries"]]


@pytest.mark.parametrize("grouped, pair", [(False, "extreme finite"), (True, "changes group")])
@pytest.mark.backends("pandas", "polars", "polars-lazy", "duckdb")
def test_neighbours_same_outcome_class_and_bracket_distances_within_sensitivity(
        constructor, grouped, pair):
    levels = [0.25, 0.5]
    queries = {"q": dpf.quantile("age", levels, bins=32), "m": dpf.median("age", bins=32)}
    outcomes, frames = [], []
    for row in NEIGHBOURS[pair]:
        frame = protect(constructor, with_row(base_data(), **row),
                        missing={"age": 50.0, "income": 0.0})
        target = frame.dp.groupby("g") if grouped else frame.dp
        table = target.release(queries, epsilon=1.0, ci=0.9, random_state=3)
        cols = list(table.columns)
        assert {"m_lower", "m_upper", "q[0.25]_lower", "q[0.5]_upper"} <= set(cols)
        lo, hi = np.asarray(table["m_lower"]), np.asarray(table["m_upper"])
        assert np.all((lo >= 0) & (lo <= hi) & (hi <= 100)), (lo, hi)
        outcomes.append((table.shape, cols, _entries(frame)))
        frames.append(frame)
    assert outcomes[0] == outcomes[1]
    group = {"group_by": "g"} if grouped else {}
    exact = [exact_measurements(f, queries, **group)["q", "quantile"][0] for f in frames]
    nb = "add/remove" if grouped else "replace"
    for side, q in itertools.product(["lower", "upper"], levels):
        mech = BracketMechanism(1.0, 0.0, 100.0, q, side=side, alpha_side=0.05, bins=32,
                                neighbours=nb)
        d = [rank_distances(mech.padded(c), q, mech.target_offset(0)) for c in exact]
        gap = np.max(np.abs(d[0] - d[1]), axis=-1)
        units = gap.max() if not grouped else gap.sum() / (2 * max(q, 1 - q))
        assert units <= 1.0 + 1e-12


def test_bad_ci_share_refused_before_anything_is_read_or_spent():
    pf = dpf.protect(pd.DataFrame({"x": np.arange(300.0)}), epsilon=10, bounds={"x": (0, 300)})
    for bad in (-0.1, 1.0, "0.5", True, math.nan, 10**400):
        with pytest.raises(dpf.ParameterError, match="ci_share"):
            pf.dp.median("x", epsilon=1.0, ci=0.9, ci_share=bad)
        with pytest.raises(dpf.ParameterError, match="ci_share"):
            dpf.quantile("x", 0.5, ci_share=bad)
    assert pf.dp.budget.epsilon_spent == 0


# -- the point's rank interval -------------------------------------------------------------
def _worst_quantile_of_d(mech: QuantileMechanism, n: int, alpha: float) -> float:
    """A lower bound on the worst (1 − α)-quantile of the chosen bin's rank distance over
    data of n rows: the largest over adversarial layouts (everything in one end bin; the
    target rank's rows at the bottom, r rows next, the rest at the top, for many r)."""
    b, q = mech.bins, mech.levels[0]
    first, last = np.zeros(b, dtype=np.int64), np.zeros(b, dtype=np.int64)
    first[0], last[-1] = n, n
    layouts = [first, last]
    t = math.ceil(q * n)
    reach = min(n - t, 2 * mech.rank_error(alpha) + 2)
    for r in np.unique(np.linspace(0, reach, 60).astype(int)):
        c = np.zeros(b, dtype=np.int64)
        c[0], c[1], c[-1] = t, r, n - t - r
        layouts.append(c)
    worst = 0.0
    for c in layouts:
        p = mech.probabilities(c)
        d = rank_distances(c, q)
        order = np.argsort(d)
        cdf = np.cumsum(p[order])
        worst = max(worst, float(d[order][np.searchsorted(cdf, 1 - alpha)]))
    return worst


@pytest.mark.parametrize("n, eps, bins", [(50, 0.1, 1024), (600, 0.1, 1024), (6000, 1.0, 4096),
                                          (200, 1.0, 256), (2000, 0.3, 256)])
def test_rank_error_within_1_5x_of_the_worst_case(n, eps, bins):
    mech = QuantileMechanism(eps, 0.0, 1.0, 0.5, bins=bins)
    r = mech.rank_error(0.05, max_rows=n)
    worst = _worst_quantile_of_d(mech, n, 0.05)
    assert worst <= r <= 1.5 * max(worst, 1.0)
    assert r <= n / 2  # clipped to the largest distance of n rows
