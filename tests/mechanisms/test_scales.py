"""Scales: Holohan's fixed point against an independent 60-digit computation, Cor. 4.5, the
half-line closed form, the union search, and Holohan Fig. 3."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from dpframe.mechanisms import BoundedLaplace, half_line, interval, union, worst_case_loss
from dpframe.mechanisms.scales import SCALE_MARGIN, half_line_scale, holohan_scale, union_scale

EPSILONS = [0.01, 0.05, 0.2, 1.0, 3.0, 10.0]
RATIOS = [1e-3, 0.01, 0.1, 0.5, 0.9, 1.0]  # Δ / (u - l)
DELTAS = [0.0, 1e-6, 1e-2]


def mp_fixed_point(eps: float, delta: float, sens: float, width: float) -> mp.mpf:
    """Holohan's b* solved with mpmath at 60 digits (bisection on b - f(b))."""
    with mp.workdps(60):
        eps, delta, sens, width = map(mp.mpf, (eps, delta, sens, width))
        eps_eff = eps - mp.log(1 - delta)

        def g(b: mp.mpf) -> mp.mpf:
            c_l = 1 - (1 + mp.exp(-width / b)) / 2
            c_s = 1 - (mp.exp(-sens / b) + mp.exp(-(width - sens) / b)) / 2
            return b - sens / (eps_eff - mp.log(c_s / c_l))

        lo = sens / eps_eff
        hi = lo * 4
        while g(hi) < 0:
            hi *= 2
        if g(lo) >= 0:
            return lo
        return mp.findroot(g, (lo, hi), solver="anderson", tol=mp.mpf(10) ** -50)


GRID = list(itertools.product(EPSILONS, RATIOS, DELTAS))


@pytest.mark.parametrize(("eps", "ratio", "delta"), GRID)
def test_holohan_fixed_point_matches_mpmath(eps, ratio, delta):
    width = 7.0
    sens = ratio * width
    ours = holohan_scale(eps, delta, sens, width)
    exact = mp_fixed_point(eps, delta, sens, width)
    # The bracket's upper end satisfies eq. (3.1) only as evaluated in double precision (f
    # carries rounding error: it lay up to 8.6e-13 relative *below* the exact fixed point on
    # this grid), so holohan_scale adds a 1e-11 relative margin: never below, at most 2e-11 above.
    assert float(exact) <= ours <= float(exact) * (1 + 2e-11)
    # what that means for privacy: the exact worst-case loss (Lemma 3.3's pair, 60 digits) at
    # our scale never exceeds ε - ln(1 - δ)
    with mp.workdps(60):
        b, w, s = mp.mpf(ours), mp.mpf(width), mp.mpf(sens)
        c_l = 1 - (1 + mp.exp(-w / b)) / 2
        c_s = 1 - (mp.exp(-s / b) + mp.exp(-(w - s) / b)) / 2
        loss = s / b + mp.log(c_s / c_l)
        eps_eff = mp.mpf(eps) - mp.log(1 - mp.mpf(delta))
        assert loss <= eps_eff


def test_corollary_4_5_exact_b0_when_sensitivity_spans_domain():
    for eps in EPSILONS:
        for delta in DELTAS:
            b0 = 3.0 / (eps - math.log1p(-delta))
            assert holohan_scale(eps, delta, 3.0, 3.0) == b0 * (1 + SCALE_MARGIN)
            assert holohan_scale(eps, delta, 2.999, 3.0) > 2.999 / (eps - math.log1p(-delta))


@pytest.mark.parametrize("eps", EPSILONS)
def test_half_line_closed_form_is_the_limit_of_holohan(eps):
    b_half = half_line_scale(eps, 0.0, 1.0)
    b_wide = holohan_scale(eps, 0.0, 1.0, 1e6)
    assert b_half == pytest.approx(b_wide, rel=1e-9)
    # and it is exactly tight: the certified worst-case loss equals epsilon
    loss = worst_case_loss(half_line(lower=0.0), b_half, 1.0).loss
    assert loss == pytest.approx(eps, rel=1e-9)
    assert worst_case_loss(half_line(upper=0.0), b_half, 1.0).loss == pytest.approx(eps, rel=1e-9)


def test_union_scale_is_the_smallest_certified_scale():
    dom = union([(0.0, 1.0), (2.0, 5.0), (7.0, 8.0)])
    for eps in (0.3, 1.0, 4.0):
        b = union_scale(eps, 0.0, 0.5, dom)
        assert worst_case_loss(dom, b, 0.5).loss <= eps
        assert worst_case_loss(dom, b * (1 - 1e-6), 0.5).loss > eps * (1 - 1e-5)


def test_union_of_one_interval_agrees_with_holohan():
    # the generic search on an interval reproduces the closed-form fixed point
    b_union = union_scale(1.0, 0.0, 1.0, interval(0.0, 10.0))
    assert b_union == pytest.approx(holohan_scale(1.0, 0.0, 1.0, 10.0), rel=1e-8)


def test_holohan_fig3_ratio_approaches_two():
    """ε/ε' with ε' = Δ/b*, u - l = 1, δ = 0 (Holohan Fig. 3): 2 in the limit Δ, ε → 0,
    1 when Δ = u - l, decreasing in ε and in Δ."""

    def ratio(eps: float, sens: float) -> float:
        return eps / (sens / holohan_scale(eps, 0.0, sens, 1.0))

    assert ratio(1e-3, 1e-4) == pytest.approx(2.0, abs=1e-3)
    assert ratio(1.0, 1.0) == pytest.approx(1.0, rel=2e-11)  # b0 times SCALE_MARGIN
    assert ratio(0.1, 0.01) > ratio(1.0, 0.01) > ratio(5.0, 0.01) > 1.0
    assert ratio(0.1, 0.01) > ratio(0.1, 0.5) > 1.0
    assert ratio(1.0, 1e-3) == pytest.approx(1.6126, abs=1e-4)


def test_scales_are_cached():
    holohan_scale.cache_clear()
    BoundedLaplace(0.7, 1.0, lower=0, upper=10)
    BoundedLaplace(0.7, 1.0, lower=0, upper=10)
    info = holohan_scale.cache_info()
    assert info.hits >= 1


SMALL_EPSILONS = [1e-3, 1e-5, 1e-7, 1e-9, 1e-11, 1e-13, 1e-15]


@pytest.mark.parametrize("eps", SMALL_EPSILONS)
@pytest.mark.parametrize("ratio", [1e-4, 5e-3, 0.3, 0.999])
def test_holohan_scale_never_falls_below_the_fixed_point_at_small_epsilon(eps, ratio):
    """Small ε puts b far above the width, where 1 − (e^{−Δ/b} + e^{−(w−Δ)/b})/2 computed
    directly cancels to a few digits: the scale came out up to 69% *below* b* (a privacy
    loss above ε) for ε ≲ 1e-3. Written as log1p of an exact product of expm1's it keeps full
    precision: b*(1 + SCALE_MARGIN) to within 1e-12 over fifteen orders of magnitude."""
    width = 10.0
    sens = ratio * width
    exact = mp_fixed_point(eps, 0.0, sens, width)
    got = holohan_scale(eps, 0.0, sens, width)
    rel = float((mp.mpf(got) - exact) / exact)
    assert rel >= 0.0, (eps, ratio, rel)  # never below b*: the loss never exceeds ε
    assert rel == pytest.approx(SCALE_MARGIN, abs=1e-12)
