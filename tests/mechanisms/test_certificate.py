"""privacy_loss() certifies every mechanism over a grid; negative controls are caught."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpframe.mechanisms import (
    BoundedLaplace,
    Laplace,
    TruncatedLaplace,
    half_line,
    interval,
    union,
    worst_case_loss,
)
from dpframe.mechanisms.certificate import log_normalizer

EPSILONS = [0.01, 0.1, 1.0, 10.0]
RATIOS = [1e-3, 0.1, 0.5, 1.0]
DELTAS = [0.0, 1e-6, 1e-2]


GRID = list(itertools.product(EPSILONS, RATIOS, DELTAS))


@pytest.mark.parametrize(("eps", "ratio", "delta"), GRID)
def test_bounded_interval_certified(eps, ratio, delta):
    m = BoundedLaplace(eps, ratio * 10.0, lower=-3.0, upper=7.0, delta=delta)
    assert m.privacy_loss() <= eps * (1 + 1e-9)
    assert m.epsilon_overhead <= 1e-6 * eps * (1 + 1e-9)


@pytest.mark.parametrize(("eps", "ratio"), list(itertools.product(EPSILONS, RATIOS)))
def test_truncated_and_laplace_certified(eps, ratio):
    for cls in (TruncatedLaplace, Laplace):
        m = cls(eps, ratio * 10.0, lower=-3.0, upper=7.0)
        assert m.privacy_loss() <= eps * (1 + 1e-9)


@pytest.mark.parametrize("eps", EPSILONS)
def test_half_line_and_union_certified(eps):
    for dom in (half_line(lower=2.0), half_line(upper=-1.0), union([(0, 1), (1.5, 4), (6, 9)])):
        m = BoundedLaplace(eps, 0.8, domain=dom)
        assert m.privacy_loss() <= eps * (1 + 1e-9)


def test_naive_b0_is_caught():
    """Bounded Laplace with the standard scale Δ/ε is not ε-DP (Holohan §3): ≈ 1.49 at ε=1."""
    cert = worst_case_loss(interval(0.0, 10.0), 1.0, 1.0)
    assert cert.loss == pytest.approx(1.4898, abs=1e-4)
    assert (cert.q, cert.q_prime) == (0.0, 1.0)
    # and at the calibrated scale it is exactly the budget, attained at (l, l + Δ)
    m = BoundedLaplace(1.0, 1.0, lower=0.0, upper=10.0)
    assert m.certificate().loss == pytest.approx(1.0 - m.epsilon_overhead, rel=1e-9)


def test_scale_divided_is_caught():
    for dom in (interval(0, 10), half_line(lower=0), union([(0, 1), (2, 5)])):
        m = BoundedLaplace(1.0, 0.5, domain=dom)
        assert worst_case_loss(dom, m.scale / 1.5, 0.5).loss > 1.4


def test_certificate_matches_brute_force_pairs():
    """Independent check: maximise eq. (1) over a brute-force grid of (q, q') pairs."""
    dom = union([(0.0, 1.0), (1.7, 3.0)])
    b, sens = 0.6, 0.9
    q = np.linspace(0, 3, 1501)
    q = q[dom.contains(q)]
    qq, pp = np.meshgrid(q, q, indexing="ij")
    ok = np.abs(qq - pp) <= sens
    lc = log_normalizer(dom, q, b)
    loss = np.abs(qq - pp) / b + np.abs(lc[:, None] - lc[None, :])
    brute = loss[ok].max()
    cert = worst_case_loss(dom, b, sens).loss
    assert cert >= brute - 1e-12
    assert cert == pytest.approx(brute, rel=2e-3)


def test_log_normalizer_against_quadrature():
    from scipy.integrate import quad

    dom = union([(-2.0, 0.5), (1.0, 4.0)])
    for q in (-2.0, 0.0, 0.75, 3.9):
        exact = sum(
            quad(lambda x, q=q: math.exp(-abs(x - q) / 0.7) / 1.4, lo, hi, points=[q])[0]
            for lo, hi in dom.components
        )
        assert float(log_normalizer(dom, np.array([q]), 0.7)[0]) == pytest.approx(
            math.log(exact), rel=1e-10
        )
