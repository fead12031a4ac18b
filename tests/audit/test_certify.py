"""certify(): the analytic worst-case loss and its independent brute-force check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.mechanisms import BoundedLaplace, interval, union, worst_case_loss
from dpframe.mechanisms.audit import brute_force_loss, certify

from ._controls import DOMAINS, EPS, MECHANISMS, SENS, NaiveBounded, shrunk


@pytest.mark.parametrize("domain", list(DOMAINS))
@pytest.mark.parametrize("name", list(MECHANISMS))
def test_correct_mechanisms_certify(name, domain):
    mech = MECHANISMS[name](EPS, SENS, domain=DOMAINS[domain])
    cert = certify(mech)
    assert cert.consistent, cert.notes
    assert cert.passed, str(cert)
    assert cert.ratio <= 1 + 1e-9
    # the continuous loss uses the budget left after snapping, and nothing more
    assert cert.loss + cert.epsilon_overhead == pytest.approx(EPS, rel=1e-6)


@pytest.mark.parametrize("delta", [1e-6, 1e-2])
@pytest.mark.parametrize("domain", ["interval", "half-line-lower", "union"])
def test_bounded_with_delta_certifies(domain, delta):
    cert = certify(BoundedLaplace(0.5, 0.7, domain=DOMAINS[domain], delta=delta))
    assert cert.passed, str(cert)
    # δ buys a larger pure loss: ε − ln(1 − δ) before folding
    assert cert.loss > 0.5 - cert.epsilon_overhead


def test_worst_pair_is_at_the_boundary_for_an_interval():
    cert = certify(BoundedLaplace(EPS, SENS, lower=0.0, upper=10.0))
    assert (cert.q, cert.q_prime) in {(0.0, 1.0), (10.0, 9.0), (9.0, 10.0), (1.0, 0.0)}
    assert {round(cert.brute_force_q, 6), round(cert.brute_force_q_prime, 6)} in (
        {0.0, 1.0},
        {9.0, 10.0},
    )


@pytest.mark.parametrize("domain", ["interval", "half-line-lower", "half-line-upper", "union"])
def test_naive_bounded_scale_is_caught(domain):
    """Bounded Laplace at the plain scale b0 = Δ/ε: ≈ 1.49·ε (Holohan §3)."""
    cert = certify(NaiveBounded(EPS, SENS, domain=DOMAINS[domain]))
    assert cert.consistent
    assert not cert.passed
    assert cert.ratio == pytest.approx(1.49, abs=0.01)


def test_naive_bounded_reference_value():
    """ε(0, 1) at b = 1 on [0, 10]: 1 + ln(C(1)/C(0)) computed by hand."""
    c0 = 1 - 0.5 * (1 + math.exp(-10))
    c1 = 1 - 0.5 * (math.exp(-1) + math.exp(-9))
    expected = 1 + math.log(c1 / c0)
    loss, q, qp = brute_force_loss(interval(0.0, 10.0), 1.0, 1.0)
    assert {q, qp} == {0.0, 1.0} or {q, qp} == {9.0, 10.0}
    assert loss == pytest.approx(expected, rel=1e-9)
    assert worst_case_loss(interval(0.0, 10.0), 1.0, 1.0).loss == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(1.4898, abs=1e-4)


@pytest.mark.parametrize("domain", list(DOMAINS))
@pytest.mark.parametrize("name", list(MECHANISMS))
def test_scale_divided_by_1_5_is_caught(name, domain):
    mech = shrunk(MECHANISMS[name])(EPS, SENS, domain=DOMAINS[domain])
    cert = certify(mech)
    assert cert.consistent
    assert not cert.passed
    assert cert.ratio > 1.4


def test_a_bug_in_the_analytic_certificate_is_caught(monkeypatch):
    """If the analytic maximisation forgot the normaliser (a plausible bug), the independent
    brute force finds the worse boundary pair and the certificate is not consistent."""
    import dpframe.mechanisms.audit as audit_module
    from dpframe.mechanisms import LossCertificate

    def forgot_normaliser(domain, b, sensitivity):
        return LossCertificate(sensitivity / b, 5.0, 5.0 + sensitivity)

    monkeypatch.setattr(audit_module, "worst_case_loss", forgot_normaliser)
    cert = certify(NaiveBounded(EPS, SENS, lower=0.0, upper=10.0))
    assert not cert.consistent
    assert not cert.passed
    assert cert.brute_force_loss == pytest.approx(1.4898, abs=1e-4)
    assert "worse pair" in " ".join(cert.notes)


def test_normaliser_matches_scipy_and_survives_far_components():
    """The brute force's own ln C agrees with scipy.stats where scipy is finite, and stays
    finite where scipy's tails underflow (components ~900 scales away)."""
    from scipy import stats

    from dpframe.mechanisms import union
    from dpframe.mechanisms.audit import _log_c

    dom = union([(0.0, 1.0), (1.5, 4.0), (6.0, 9.0)])
    q = np.linspace(0.0, 9.0, 37)
    lap = stats.laplace(loc=q, scale=0.7)
    mass = sum(lap.cdf(hi) - lap.cdf(lo) for lo, hi in dom.components)
    assert np.allclose(_log_c(dom, q, 0.7), np.log(mass), rtol=1e-12, atol=1e-13)
    far = union([(0.0, 1.0), (100.0, 101.0)])
    assert np.isfinite(_log_c(far, np.array([0.0, 0.5, 100.5]), 0.1)).all()


def test_far_apart_union_certifies():
    """A union whose components are hundreds of scales apart (ln C needs care there)."""
    cert = certify(BoundedLaplace(5.0, 0.05, domain=union([(0.0, 1.0), (100.0, 101.0)])))
    assert cert.passed, str(cert)


AWKWARD = {
    "offset-interval": interval(1e9, 1e9 + 10.0),
    "narrow-union": union([(0.0, 0.1), (0.2, 0.3), (5.0, 10.0)]),
    "far-union": union([(0.0, 1.0), (100.0, 101.0)]),
}


@pytest.mark.parametrize("domain", list(AWKWARD))
@pytest.mark.parametrize("eps", [0.01, 5.0])
@pytest.mark.parametrize("ratio", [0.05, 1.0])
@pytest.mark.parametrize("name", list(MECHANISMS))
def test_awkward_domains_certify(name, eps, ratio, domain):
    """Offsets far from zero, narrow components, components far apart; tiny and large ε."""
    dom = AWKWARD[domain]
    sens = ratio * min(dom.upper - dom.lower, 10.0)
    cert = certify(MECHANISMS[name](eps, sens, domain=dom))
    assert cert.passed, str(cert)
