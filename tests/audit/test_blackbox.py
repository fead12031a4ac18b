"""audit(): black-box Clopper–Pearson lower bounds on ε, every mechanism × domain × pair."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms import real_line
from dpframe.mechanisms.audit import audit, clopper_pearson, pair_loss

from ._controls import (
    DOMAINS,
    EPS,
    MECHANISMS,
    PAIRS,
    SENS,
    NaiveBounded,
    rr_sampler,
    shrunk,
    truncate_normalise_sampler,
)

N = 120_000
ALPHA = 0.01

CASES = [
    (name, domain, pair)
    for name in MECHANISMS
    for domain in DOMAINS
    for pair in PAIRS[domain]
]


def _id(case):
    name, domain, pair = case
    return f"{name}-{domain}-{pair[0]:g},{pair[1]:g}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_correct_mechanism_passes(case):
    name, domain, (q, qp) = case
    mech = MECHANISMS[name](EPS, SENS, domain=DOMAINS[domain])
    res = audit(mech, q, qp, n=N, alpha=ALPHA, random_state=zlib.crc32(_id(case).encode()))
    assert not res.violation, str(res)
    assert res.epsilon_lower_bound <= EPS


BOUNDARY = [(d, PAIRS[d][0]) for d in DOMAINS] + [("interval", (9.0, 10.0)), ("union", (9.0, 10.0))]


@pytest.mark.parametrize(("domain", "pair"), BOUNDARY)
def test_naive_bounded_scale_is_flagged(domain, pair):
    mech = NaiveBounded(EPS, SENS, domain=DOMAINS[domain])
    res = audit(mech, *pair, n=N, alpha=ALPHA, random_state=11)
    assert res.violation, str(res)
    assert res.epsilon_lower_bound > 1.2


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_scale_divided_by_1_5_is_flagged_where_it_leaks(case):
    """Every mechanism at scale/1.5. Plain and clamped Laplace then leak 1.5·ε at every pair;
    bounded Laplace leaks more than ε only near a finite end (in the middle the normaliser is
    flat and the loss is ≈ Δ/b < ε). The audit must flag exactly the pairs whose true loss
    (computed exactly by ``pair_loss``) exceeds the claim clearly, and never the others."""
    name, domain, (q, qp) = case
    mech = shrunk(MECHANISMS[name])(EPS, SENS, domain=DOMAINS[domain])
    noise_set = DOMAINS[domain] if name == "bounded" else real_line()
    x = np.linspace(-60.0, 60.0, 241)
    true_loss = pair_loss(noise_set, mech.scale, np.array([q]), np.array([qp]), x)[0]
    res = audit(mech, q, qp, n=N, alpha=ALPHA, random_state=13)
    if true_loss + mech.epsilon_overhead > 1.2 * EPS:
        assert res.violation, f"{res} (true loss {true_loss:.3f})"
    else:
        assert not res.violation, f"{res} (true loss {true_loss:.3f})"
    assert res.epsilon_lower_bound <= true_loss + mech.epsilon_overhead


@pytest.mark.parametrize("domain", ["interval", "half-line-lower", "union"])
def test_truncate_then_normalise_without_corrected_scale_is_flagged(domain):
    sampler = truncate_normalise_sampler(DOMAINS[domain], SENS / EPS)
    q, qp = PAIRS[domain][0]
    res = audit(sampler, q, qp, EPS, n=N, alpha=ALPHA, random_state=17)
    assert res.violation, str(res)
    assert res.epsilon_lower_bound > 1.2


def test_clopper_pearson_bounds():
    lo, hi = clopper_pearson(np.array([0, 5, 100]), 100, 0.025)
    assert lo[0] == 0.0 and hi[-1] == 1.0
    # agree with the two-sided 95% interval of scipy's exact binomial test
    ci = stats.binomtest(5, 100).proportion_ci(0.95, method="exact")
    assert lo[1] == pytest.approx(ci.low) and hi[1] == pytest.approx(ci.high)


def test_false_alarm_rate_is_at_most_alpha():
    """Randomised response is exactly ε-DP with a tight event: 200 audits at α = 0.1 must not
    flag more often than Binomial(200, 0.1) allows at 1e-4."""
    sampler = rr_sampler(EPS)
    alarms = sum(
        audit(sampler, 0.0, 1.0, EPS, n=4000, alpha=0.1, n_events=2, random_state=s).violation
        for s in range(200)
    )
    assert alarms <= stats.binom.ppf(1 - 1e-4, 200, 0.1)


def test_power_against_a_small_violation():
    """Randomised response at ε = 1.3 claimed as 1.0 is flagged."""
    res = audit(rr_sampler(1.3), 0.0, 1.0, 1.0, n=200_000, alpha=0.01, random_state=5)
    assert res.violation, str(res)


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_secure_source_passes(name):
    """The default (OS CSPRNG) source, as users get it. Not seeded, so this test is random,
    but a correct mechanism fails it with probability ≤ α = 1e-6 by construction."""
    mech = MECHANISMS[name](EPS, SENS, domain=DOMAINS["interval"])

    def secure(value, size, rng):
        return mech.sample(value, size=size)  # random_state=None: secure randomness

    res = audit(secure, 0.0, 1.0, EPS, n=N, alpha=1e-6, random_state=0)
    assert not res.violation, str(res)
    assert mech.random_source(None) == "secure"
