"""Quantile mechanism (issue 12): exact output law, sensitivity and privacy loss by brute force,
finite-precision bounds, outputs inside the bounds, errors."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpframe.errors import ParameterError
from dpframe.mechanisms import (
    QuantileMechanism,
    bin_counts,
    bin_edges,
    bin_index,
    choose_bins,
    release_quantiles,
)
from dpframe.mechanisms.quantile_certificate import quantile_privacy_loss
from dpframe.mechanisms.quantiles import (
    LOG_E_MAX,
    LOG_RTOL,
    SCORE_CAP,
    log_exponential,
    race_error,
    rank_distances,
)

P_MIN = 1e-6  # significance of the goodness-of-fit tests


def exact_law(counts, q, lam):
    """Output law computed independently: ranks from the expanded rows, exact rationals,
    probabilities with mpmath at 50 digits."""
    rows = np.repeat(np.arange(len(counts)), counts)
    t = Fraction(q) * len(rows)
    ws = []
    for j in range(len(counts)):
        below = int((rows < j).sum())
        upto = int((rows <= j).sum())
        d = max(below - t, t - upto, Fraction(0))
        ws.append(mpmath.exp(-min(mpmath.mpf(lam) * mpmath.mpf(d.numerator) / d.denominator,
                                  SCORE_CAP)))
    z = mpmath.fsum(ws)
    return np.array([float(w / z) for w in ws])


def chi2_pvalue(observed, expected_p):
    n = observed.sum()
    exp = expected_p * n
    keep = exp >= 5  # pool the sparse cells
    obs = np.append(observed[keep], observed[~keep].sum())
    ex = np.append(exp[keep], exp[~keep].sum())
    if ex[-1] == 0:
        obs, ex = obs[:-1], ex[:-1]
    return stats.chisquare(obs, ex).pvalue


COUNTS = np.array([0, 3, 0, 0, 5, 1, 0, 2, 0, 0, 0, 4, 0, 1, 0, 2], dtype=np.int64)


@pytest.mark.parametrize("q", [0.5, 0.1, 0.9, 0.0, 1.0])
@pytest.mark.parametrize("neighbours", ["replace", "add/remove"])
def test_sampling_matches_exact_law(q, neighbours):
    mech = QuantileMechanism(2.0, 0.0, 16.0, q, bins=16, neighbours=neighbours)
    expected = exact_law(COUNTS, q, mech.coefficients[0])
    np.testing.assert_allclose(mech.probabilities(COUNTS), expected, rtol=1e-12, atol=1e-300)
    draws = 40_000
    rel = mech.sample(np.tile(COUNTS, (draws, 1)), random_state=12345)
    observed = np.bincount(rel.bins[:, 0], minlength=16)
    assert chi2_pvalue(observed, expected) > P_MIN
    # midpoints of the chosen bins
    np.testing.assert_array_equal(rel.values[:, 0], rel.bins[:, 0] + 0.5)


def test_sampling_sharp_and_flat_laws():
    counts = np.zeros(64, dtype=np.int64)
    counts[[3, 40]] = [50, 50]
    for eps in (0.05, 8.0):
        mech = QuantileMechanism(eps, -1.0, 1.0, 0.5, bins=64)
        expected = exact_law(counts, 0.5, mech.coefficients[0])
        rel = mech.sample(np.tile(counts, (30_000, 1)), random_state=7)
        assert chi2_pvalue(np.bincount(rel.bins[:, 0], minlength=64), expected) > P_MIN
    # empty data: uniform over the bins
    mech = QuantileMechanism(1.0, 0.0, 1.0, 0.5, bins=8)
    rel = mech.sample(np.zeros((16_000, 8), dtype=np.int64), random_state=1)
    assert chi2_pvalue(np.bincount(rel.bins[:, 0], minlength=8), np.full(8, 1 / 8)) > P_MIN


def test_uniform_output_fits_mixture_cdf():
    mech = QuantileMechanism(1.0, 10.0, 26.0, 0.3, bins=16, output="uniform")
    p = exact_law(COUNTS, 0.3, mech.coefficients[0])
    edges = bin_edges(10.0, 26.0, 16)
    rel = mech.sample(np.tile(COUNTS, (20_000, 1)), random_state=3)
    x = rel.values[:, 0]
    assert ((x >= 10.0) & (x <= 26.0)).all()
    assert ((x >= edges[rel.bins[:, 0]]) & (x <= edges[rel.bins[:, 0] + 1])).all()

    def cdf(v):
        v = np.asarray(v, dtype=float)[..., None]
        return (p * np.clip((v - edges[:-1]) / 1.0, 0, 1)).sum(axis=-1)

    assert stats.kstest(x, cdf).pvalue > P_MIN


@pytest.mark.parametrize("neighbours", ["replace", "add/remove"])
def test_sensitivity_by_brute_force(neighbours):
    """Largest change of any rank distance over all neighbouring datasets with ≤ 6 rows on 4
    bins: exactly the declared Δ (attained)."""
    bins, max_rows = 4, 6
    for q in (0.5, 0.25, 0.8, 0.0, 1.0):
        mech = QuantileMechanism(1.0, 0, 1, q, bins=bins, neighbours=neighbours)
        declared = mech.sensitivity(q)
        worst = 0.0
        sizes = [max_rows] if neighbours == "replace" else range(max_rows + 1)
        for n in sizes:
            for rows in itertools.combinations_with_replacement(range(bins), n):
                c = np.bincount(rows, minlength=bins)
                d = rank_distances(c, q)
                others = []
                if neighbours == "replace":
                    for i, v in itertools.product(range(n), range(bins)):
                        c2 = c.copy()
                        c2[rows[i]] -= 1
                        c2[v] += 1
                        others.append(c2)
                else:
                    for v in range(bins):
                        if n < max_rows:
                            c2 = c.copy()
                            c2[v] += 1
                            others.append(c2)
                        if c[v] > 0:
                            c2 = c.copy()
                            c2[v] -= 1
                            others.append(c2)
                for c2 in others:
                    worst = max(worst, float(np.abs(rank_distances(c2, q) - d).max()))
        assert worst <= declared + 1e-12
        assert worst >= declared - 1e-12  # the bound is attained


@pytest.mark.parametrize("neighbours", ["replace", "add/remove"])
@pytest.mark.parametrize("q", [0.5, 0.3, 0.95])
def test_privacy_loss_by_brute_force(neighbours, q):
    eps = 1.0
    mech = QuantileMechanism(eps, 0, 1, q, bins=4, neighbours=neighbours)
    loss, _ = quantile_privacy_loss(mech, 5)
    assert loss + sum(mech.epsilon_overheads) <= eps
    assert mech.privacy_loss() <= eps * (1 + 1e-12)
    # negative control: without the factor 2 (coefficient ε/Δ) the loss exceeds ε
    control = QuantileMechanism(eps, 0, 1, q, bins=4, neighbours=neighbours)
    control.coefficients = [2 * c for c in control.coefficients]
    bad, _ = quantile_privacy_loss(control, 5)
    if q != 0.95:
        assert bad > eps


def test_privacy_loss_several_levels_and_approach_to_epsilon():
    mech = QuantileMechanism(0.9, 0, 1, [0.25, 0.75], bins=3)
    loss, _ = quantile_privacy_loss(mech, 5)
    assert loss + sum(mech.epsilon_overheads) <= 0.9
    # with more bins the worst case approaches the proven bound from below
    losses = [quantile_privacy_loss(QuantileMechanism(1.0, 0, 1, 0.5, bins=b), r)[0]
              for b, r in ((2, 8), (4, 5), (6, 4))]
    assert losses[0] < losses[1] < losses[2] <= 1.0


@pytest.mark.parametrize("q", [0.5, 0.1, 0.3, 1 / 3, 0.999])
def test_rank_distances_error_bound(q):
    rng = np.random.default_rng(5)
    for scale in (10, 10**6, 2**40):
        c = rng.integers(0, scale, size=(20, 32))
        c[:, rng.integers(0, 32, 10)] = 0
        d = rank_distances(c, q)
        qf = Fraction(q)
        for g in range(c.shape[0]):
            n = int(c[g].sum())
            t = qf * n
            cum = np.concatenate([[0], np.cumsum(c[g])])
            for j in range(32):
                exact = max(int(cum[j]) - t, t - int(cum[j + 1]), Fraction(0))
                err = abs(Fraction(d[g, j]) - exact)
                assert err <= Fraction(2) ** -53 * (exact + 1)


def test_log_exponential_accuracy():
    """ln E against 60-digit arithmetic from the same uniform, across both tails."""
    mpmath.mp.dps = 60
    rng = np.random.default_rng(0)
    u = np.concatenate([
        rng.random(2000),
        np.ldexp(1.0 + rng.random(500), -rng.integers(1, 1074, 500)),
        1.0 - np.ldexp(rng.integers(1, 2**20, 500).astype(float), -53),
        [2.0**-1022, 1.0 - 2.0**-53, 0.5, 2.0**-52],
    ])
    u = u[(u > 0) & (u < 1)]
    log_u = np.log(u)
    worst, worst_rel = 0.0, 0.0
    for coin in (True, False):
        got = log_exponential(u, log_u, np.full(u.size, coin))
        for ui, gi in zip(u, got, strict=True):
            x = mpmath.mpf(float(ui))
            e = -mpmath.log(x / 2) if coin else -mpmath.log1p(-x / 2)
            exact = mpmath.log(e)
            err = float(abs(mpmath.mpf(float(gi)) - exact))
            worst = max(worst, err)
            # in units of the bound's shape 2^-52 (3 + |ln E|)
            worst_rel = max(worst_rel, err / (2.0**-52 * (3 + abs(float(exact)))))
    mpmath.mp.dps = 15
    # the bound used in race_error (computation part only; the discretisation of U adds ≤ 2^-51)
    assert worst <= 3 * 2.0**-52 + 2 * LOG_RTOL * LOG_E_MAX
    assert worst_rel <= 1.0


def test_race_error_and_overhead_are_tiny():
    assert race_error(0.5) < 1e-11
    for eps in (0.01, 1.0, 50.0):
        mech = QuantileMechanism(eps, 0, 1, [0.1, 0.5], bins=16)
        assert mech.privacy_loss() <= eps * (1 + 1e-12)
        assert sum(mech.epsilon_overheads) < 1e-10
        assert mech.describe()["epsilon_overhead"] == sum(mech.epsilon_overheads)


def test_outputs_inside_bounds_and_shapes():
    mech = QuantileMechanism(1.0, -3.0, 5.0, [0.9, 0.1, 0.5], bins=1, output="uniform")
    rel = mech.sample([7])
    assert rel.values.shape == (3,)
    assert ((rel.values >= -3) & (rel.values <= 5)).all()
    assert rel.log["random_source"] == "secure"
    counts = bin_counts(np.random.default_rng(1).normal(size=500), -3, 3, 256)
    for output in ("midpoint", "uniform"):
        rel = release_quantiles(np.tile(counts, (5, 1)), [0.9, 0.1, 0.5], 0.5, -3, 3,
                                output=output, random_state=4)
        assert rel.values.shape == (5, 3)
        assert ((rel.values >= -3) & (rel.values <= 3)).all()
        # sorted in q: 0.1 ≤ 0.5 ≤ 0.9
        assert (rel.values[:, 1] <= rel.values[:, 2]).all()
        assert (rel.values[:, 2] <= rel.values[:, 0]).all()
    # reproducible when seeded
    a = release_quantiles(counts, 0.5, 1.0, -3, 3, random_state=9).values
    b = release_quantiles(counts, 0.5, 1.0, -3, 3, random_state=9).values
    assert a == b and np.ndim(a) == 1


def test_binning_rule():
    x = np.array([-5.0, 0.0, 0.2499, 0.25, 0.9999, 1.0, 7.0])
    c = bin_counts(x, 0.0, 1.0, 4)
    np.testing.assert_array_equal(c, [3, 1, 0, 3])
    e = bin_edges(0.0, 1.0, 4)
    assert e[0] == 0.0 and e[-1] == 1.0 and len(e) == 5


def test_median_accuracy_sanity():
    x = np.random.default_rng(2).normal(50, 10, 2000)
    counts = bin_counts(x, 0, 100)  # the default 2^16 bins
    assert counts.size == 2**16
    vals = np.array([release_quantiles(counts, 0.5, 1.0, 0, 100, random_state=s).values[0]
                     for s in range(100)])
    vals = vals[:, None]
    assert np.median(np.abs(vals[:, 0] - np.median(x))) < 0.5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0}, {"epsilon": -1.0}, {"epsilon": math.nan}, {"epsilon": True},
        {"lower": 1.0, "upper": 1.0}, {"upper": math.inf}, {"q": 50}, {"q": -0.1},
        {"q": []}, {"bins": 0}, {"bins": 2.5}, {"neighbours": "swap"}, {"output": "mean"},
    ],
)
def test_parameter_errors(kwargs):
    args = {"epsilon": 1.0, "lower": 0.0, "upper": 1.0, "q": 0.5, "bins": 8} | kwargs
    with pytest.raises(ParameterError):
        QuantileMechanism(args.pop("epsilon"), args.pop("lower"), args.pop("upper"),
                          args.pop("q"), **args)


@pytest.mark.parametrize("counts", [[1, 2, 3], [1, -1, 0, 0, 0, 0, 0, 0], [0.5] * 8,
                                    [[1] * 8, [1] * 7 + [math.nan]], ["a"] * 8])
def test_count_errors(counts):
    mech = QuantileMechanism(1.0, 0, 1, 0.5, bins=8)
    with pytest.raises(ParameterError):
        mech.sample(counts)


def test_choose_bins():
    assert choose_bins() == 2**16
    assert choose_bins(1000) == 4096
    assert choose_bins(10**7) == 1024
    assert choose_bins(64) == 2**16 and choose_bins(65) == 2**15
    with pytest.raises(ParameterError):
        choose_bins(0)


@pytest.mark.parametrize(("lower", "upper"), [
    (-1e308, 1e308), (-1.7976931348623157e308, 1.7976931348623157e308), (0.0, 1e308),
    (-1e308, -1e307), (0.0, 1.0), (-3.5, 1e-300), (1e-300, 2e-300)])
def test_bin_index_equals_the_engines_binning_at_extreme_bounds(lower, upper):
    """mechanisms.bin_index put every value in bin 0 for bounds ±1e308 (u − l overflowed); it
    now computes on halves like the engines: bit for bit with aggregates.Bins' numpy kernel
    (the in-memory path), within one bin of the narwhals expression run by Polars."""
    import narwhals as nw
    import polars as pl

    from dpframe.query._aggregates import Bins

    rng = np.random.default_rng(0)
    b = 64
    values = np.concatenate([
        rng.uniform(-1.0, 1.0, 200) * max(abs(lower), abs(upper)),
        bin_edges(lower, upper, b), [lower, upper, -np.inf, np.inf, 0.0, -0.0,
                                     np.nextafter(upper, -np.inf), np.nextafter(lower, np.inf)]])
    ours = bin_index(values, lower, upper, b)
    bins = Bins(lower, upper, b)
    engine = nw.from_native(pl.DataFrame({"x": values})).select(
        bins.expression(nw.col("x")).alias("j")).to_native()["j"].to_numpy()
    assert np.array_equal(ours, bins.index(values))
    # Polars divides a column by a scalar as a product with its reciprocal, so its expression
    # path can be one bin off where the quotient is not exact (extreme bounds only): a known
    # difference of the engine paths (aggregates.Bins), not of bin_index
    assert np.abs(ours - engine).max() <= 1
    assert ours.min() >= 0 and ours.max() <= b - 1
    if lower < 0 < upper:
        assert len(np.unique(ours)) > b // 2  # spread over the bins, not all in bin 0
    assert np.all(np.isfinite(bin_edges(lower, upper, b)))
