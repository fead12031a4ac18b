"""Histograms (issue 12): per-bin budget by brute-force sensitivity, noisy counts, integer and
apportioned post-processing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpframe.errors import ParameterError
from dpframe.mechanisms import apportion, noisy_histogram, nonnegative_integers
from dpframe.mechanisms.histograms import histogram_epsilon_per_bin


@pytest.mark.parametrize("neighbours", ["replace", "add/remove"])
def test_per_bin_budget_covers_brute_force_sensitivity(neighbours):
    """Over all datasets of ≤ 5 rows on 3 bins and their neighbours: the number of bins that
    change (each by exactly 1) times the per-bin ε never exceeds ε."""
    bins, max_rows, eps = 3, 5, 1.0
    per_bin = histogram_epsilon_per_bin(eps, neighbours)
    worst_bins, worst_change = 0, 0
    sizes = [max_rows] if neighbours == "replace" else range(max_rows + 1)
    for n in sizes:
        for rows in itertools.combinations_with_replacement(range(bins), n):
            c = np.bincount(rows, minlength=bins)
            if neighbours == "replace":
                others = []
                for i, v in itertools.product(range(n), range(bins)):
                    c2 = c.copy()
                    c2[rows[i]] -= 1
                    c2[v] += 1
                    others.append(c2)
            else:
                others = [c + np.eye(bins, dtype=int)[v] for v in range(bins)]
                others += [c - np.eye(bins, dtype=int)[v] for v in range(bins) if c[v] > 0]
            for c2 in others:
                diff = np.abs(c2 - c)
                worst_bins = max(worst_bins, int((diff > 0).sum()))
                worst_change = max(worst_change, int(diff.max()))
    assert worst_change == 1
    assert worst_bins == (2 if neighbours == "replace" else 1)
    assert worst_bins * per_bin <= eps


def test_release_log_and_noise_scale():
    counts = np.array([40, 0, 7, 53])
    rel = noisy_histogram(np.tile(counts, (20_000, 1)), 1.0, count_upper=100,
                          mechanism="laplace", random_state=2)
    assert rel.log["epsilon_per_bin"] == 0.5
    assert rel.log["neighbours"] == "replace"
    b = rel.log["scale"]
    assert abs(b - 2.0) < 1e-4  # Δ/ε per bin = 1/(ε/2)
    err = rel.noisy - counts
    # Laplace(0, b): mean 0, mean |err| = b
    assert abs(err.mean()) < 0.05
    assert abs(np.abs(err).mean() - b) < 0.05
    assert rel.counts.dtype == np.int64 and (rel.counts >= 0).all()
    assert rel.log["random_source"] == "seeded"
    one = noisy_histogram(counts, 1.0, neighbours="add/remove", count_upper=100)
    assert one.log["epsilon_per_bin"] == 1.0 and one.log["random_source"] == "secure"
    assert one.noisy.shape == (4,) and ((one.noisy >= 0) & (one.noisy <= 100)).all()


def test_mechanism_privacy_within_share():
    for name in ("truncated", "bounded", "laplace"):
        rel = noisy_histogram([1, 2], 0.8, mechanism=name, count_upper=10, random_state=0)
        assert rel.log["epsilon_overhead"] < 1e-3
    from dpframe.mechanisms import make_mechanism

    m = make_mechanism("truncated", epsilon=0.4, sensitivity=1.0, lower=0.0, upper=10.0)
    assert 2 * m.privacy_loss() <= 0.8 * (1 + 1e-9)


def test_total_apportioned():
    counts = np.array([[5, 0, 3, 100], [0, 0, 0, 0]])
    rel = noisy_histogram(counts, 1.0, count_upper=108, total=[108, 7], random_state=5)
    assert rel.counts.sum(axis=1).tolist() == [108, 7]
    assert (rel.counts >= 0).all()
    assert rel.log["post_processing"] == "apportion"


def test_nonnegative_integers():
    np.testing.assert_array_equal(nonnegative_integers([-3.2, -0.5, 0.49, 0.5, 2.5, 7.7]),
                                  [0, 0, 0, 1, 3, 8])
    with pytest.raises(ParameterError):
        nonnegative_integers([np.nan])


def test_apportion_examples():
    np.testing.assert_array_equal(apportion([0.4, 0.4, 0.2], 1), [1, 0, 0])
    np.testing.assert_array_equal(apportion([-1, -2], 5), [3, 2])  # all zero weights: equal
    np.testing.assert_array_equal(apportion([2.5, 2.5, 0], 5), [3, 2, 0])
    np.testing.assert_array_equal(apportion([10.0, 20.0, 70.0], 10), [1, 2, 7])
    np.testing.assert_array_equal(apportion([3.0, 1.0], -4.0), [0, 0])
    np.testing.assert_array_equal(apportion([[1.0, 3.0], [5.0, 5.0]], [4, 3]), [[1, 3], [2, 1]])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e9, allow_nan=False), min_size=1, max_size=12),
    st.integers(0, 10**9),
)
def test_apportion_properties(noisy, total):
    out = apportion(noisy, total)
    assert out.sum() == total
    assert (out >= 0).all()
    w = np.maximum(np.asarray(noisy), 0.0)
    if w.sum() == 0:
        w = np.ones_like(w)
    quota = total * w / w.sum()
    assert (np.abs(out - quota) <= 1 + 1e-6 * max(total, 1)).all()


@pytest.mark.parametrize(
    "kwargs",
    [{"epsilon": 0.0}, {"epsilon": True}, {"neighbours": "swap"}, {"count_upper": 0.5},
     {"counts": [1, -1]}, {"counts": [[]]}, {"counts": [1, 200]}, {"mechanism": "gauss"},
     {"counts": [np.nan]}],
)
def test_errors(kwargs):
    args = {"counts": [1, 2], "epsilon": 1.0, "count_upper": 100} | kwargs
    with pytest.raises(ParameterError):
        noisy_histogram(args.pop("counts"), args.pop("epsilon"), **args)
