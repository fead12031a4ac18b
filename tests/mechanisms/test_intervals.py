"""Confidence intervals (dpframe.mechanisms.intervals): coverage by simulation at the bounds and
inside, for every mechanism and domain kind and for the composed statistics; negative controls.

Coverage checks are one-sided binomial tests: the observed coverage must not fall below the
level by more than 4 standard errors (a false alarm has probability ~3e-5 per check; seeds are
fixed, so the suite is deterministic).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.errors import ParameterError
from dpframe.mechanisms import BoundedLaplace, make_mechanism, union
from dpframe.mechanisms.intervals import (
    component_level,
    composed_interval,
    confidence_interval,
    interval_from_components,
    output_cell,
)

R = 12_000  # draws per coverage check


def _floor(level: float, n: int = R) -> float:
    return level - 4.0 * math.sqrt(level * (1 - level) / n)


def _coverage(m: object, x: float, level: float, seed: int, n: int = R) -> tuple[float, ...]:
    y = m.sample(np.full(n, x), random_state=seed)  # type: ignore[attr-defined]
    lo, hi = confidence_interval(m, y, level)
    return float(np.mean((lo <= x) & (x <= hi))), float(np.mean(hi < x)), float(np.mean(lo > x))


DOMAINS = {
    "interval": dict(lower=0.0, upper=10.0),
    "narrow": dict(lower=0.0, upper=2.0),
    "half-line": dict(lower=0.0),
    "half-line-up": dict(upper=0.0),
    "real-line": dict(),
}


def _positions(dom: dict, b: float) -> list[float]:
    lo = dom.get("lower", -50.0)
    hi = dom.get("upper", 50.0)
    pts = {lo, hi, lo + 0.3 * b, hi - 0.3 * b, lo + (hi - lo) / 2}
    return sorted(p for p in pts if lo <= p <= hi)


@pytest.mark.parametrize("name", ["bounded", "truncated", "laplace"])
@pytest.mark.parametrize("dom", list(DOMAINS))
def test_coverage_every_mechanism_at_bounds_and_inside(name: str, dom: str) -> None:
    kw = DOMAINS[dom]
    m = make_mechanism(name, epsilon=1.0, sensitivity=1.0, **kw)
    for i, x in enumerate(_positions(kw, m.scale)):
        for level in (0.9, 0.95):
            cov, miss_hi, miss_lo = _coverage(m, x, level, seed=1000 * i + int(100 * level))
            assert cov >= _floor(level), (name, dom, x, level, cov)
            # each tail is at most α/2 (equal-tailed construction)
            half = (1 - level) / 2
            assert miss_hi <= half + 4 * math.sqrt(half / R), (name, dom, x, miss_hi)
            assert miss_lo <= half + 4 * math.sqrt(half / R), (name, dom, x, miss_lo)


def test_plain_laplace_interval_is_exact_inside() -> None:
    """Away from the bounds the interval of the plain mechanism is the exact Laplace one:
    coverage equals the level (not merely exceeds it) and the width is 2(b ln(1/α) + r)."""
    m = make_mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    cov, _, _ = _coverage(m, 3.0, 0.9, seed=7, n=40_000)
    sd = math.sqrt(0.09 / 40_000)
    assert abs(cov - 0.9) < 4 * sd
    lo, hi = confidence_interval(m, 3.0, 0.9)
    r = m.grid / 2 + m.plan.delta_t
    assert hi - lo == pytest.approx(2 * (m.scale * math.log(10) + r), rel=1e-9)


def test_bounded_interval_is_tight_inside_a_wide_domain() -> None:
    """Far from the ends the conditioned law is Laplace: coverage ≈ level, not above."""
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=200.0)
    cov, _, _ = _coverage(m, 100.0, 0.9, seed=8, n=40_000)
    assert abs(cov - 0.9) < 4 * math.sqrt(0.09 / 40_000)


def test_coverage_with_a_coarse_snapping_grid() -> None:
    """A domain so wide that the grid is comparable to the scale: the cell widening keeps
    coverage at the ends and inside."""
    for name in ("bounded", "truncated", "laplace"):
        m = make_mechanism(name, epsilon=1.0, sensitivity=1.0, lower=0.0, upper=2.0**40)
        assert m.grid >= m.scale / 8, (name, m.grid, m.scale)
        for x in (0.0, 0.7, 2.0**39):
            cov, _, _ = _coverage(m, x, 0.9, seed=int(x) % 1000 + 3)
            assert cov >= _floor(0.9), (name, x, cov)


def test_coverage_without_snapping_and_on_a_union() -> None:
    for name in ("bounded", "truncated", "laplace"):
        m = make_mechanism(name, epsilon=0.5, sensitivity=1.0, lower=-3.0, upper=4.0,
                           snapping=False)
        assert m.grid == 0.0
        for x in (-3.0, 0.0, 4.0):
            assert _coverage(m, x, 0.95, seed=11)[0] >= _floor(0.95)
    dom = union([(0.0, 2.0), (5.0, 6.0), (9.0, 12.0)])
    m = BoundedLaplace(1.0, 1.0, domain=dom)
    for x in (0.0, 2.0, 5.5, 6.0, 9.0, 12.0):
        assert _coverage(m, x, 0.9, seed=12)[0] >= _floor(0.9), x


def test_intervals_stay_in_the_domain_and_are_ordered() -> None:
    rng = np.random.default_rng(5)
    for name in ("bounded", "truncated", "laplace"):
        for kw in DOMAINS.values():
            m = make_mechanism(name, epsilon=0.3, sensitivity=2.0, **kw)
            x = np.clip(rng.normal(0, 20, 500), kw.get("lower", -1e3), kw.get("upper", 1e3))
            y = m.sample(x, random_state=rng)
            lo, hi = confidence_interval(m, y, 0.95)
            assert (lo <= hi).all()
            assert (lo >= kw.get("lower", -math.inf)).all()
            assert (hi <= kw.get("upper", math.inf)).all()
            # monotone in the release
            order = np.argsort(y)
            assert (np.diff(lo[order]) >= -1e-9 * (1 + np.abs(lo[order][1:]))).all()
            assert (np.diff(hi[order]) >= -1e-9 * (1 + np.abs(hi[order][1:]))).all()


def test_scalar_and_array_forms_agree_and_levels_nest() -> None:
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=10.0)
    ys = m.sample(np.array([0.0, 3.0, 10.0]), random_state=1)
    lo, hi = confidence_interval(m, ys, 0.9)
    for i, y in enumerate(ys):
        a, b = confidence_interval(m, float(y), 0.9)
        assert isinstance(a, float) and (a, b) == (lo[i], hi[i])
    lo99, hi99 = confidence_interval(m, ys, 0.99)
    assert (lo99 <= lo).all() and (hi99 >= hi).all()
    with pytest.raises(ParameterError):
        confidence_interval(m, ys, 1.0)
    with pytest.raises(ParameterError):
        confidence_interval(m, [float("nan")], 0.9)


def test_output_cell_contains_the_pre_rounding_value() -> None:
    """s(Y) ≤ X ≤ t(Y) for the exact draw X, checked through the snapping code itself: snap
    random exact points and look up the released value's cell."""
    from dpframe.mechanisms.snapping import snap_to_cells

    rng = np.random.default_rng(3)
    for name, kw in [("bounded", dict(lower=0.3, upper=7.9)), ("truncated", dict(lower=0.3,
                     upper=7.9)), ("laplace", dict(lower=0.3, upper=7.9)),
                     ("bounded", dict(lower=-1.0))]:
        m = make_mechanism(name, epsilon=1.0, sensitivity=1.0, **kw)
        lam = m.grid
        lo_d = m.domain.lower
        hi_d = min(m.domain.upper, 20.0)
        # points concentrated near the ends, where the end cells are
        x = np.concatenate([lo_d + rng.uniform(0, 4 * lam, 5000), hi_d - rng.uniform(0, 4 * lam,
                            5000), rng.uniform(lo_d - 1, hi_d + 1, 5000)])
        if name == "bounded":
            x = np.clip(x, lo_d, hi_d)
            comp_lo, comp_hi = np.full(x.shape, m.domain.lower), np.full(x.shape, m.domain.upper)
        else:
            comp_lo, comp_hi = np.full(x.shape, -np.inf), np.full(x.shape, np.inf)
        y = snap_to_cells(np.zeros_like(x), x, lam, comp_lo, comp_hi, m.plan.window)
        if name == "truncated":
            y = m.domain.project(y)
        s, t = output_cell(m, y)
        assert (s <= x).all() and (x <= t).all(), name


def test_negative_control_nominal_scale_interval_fails_inside() -> None:
    """Ignoring that conditioning needs the larger scale b* (using Δ/ε as if the noise were
    plain Laplace) loses coverage inside the domain; the exact interval keeps it."""
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=100.0)
    x = 50.0
    y = m.sample(np.full(R, x), random_state=21)
    h = (m.sensitivity / m.epsilon) * math.log(1 / 0.05)
    naive = float(np.mean((y - h <= x) & (x <= y + h)))
    assert naive < 0.9  # ≈ 0.84
    assert _coverage(m, x, 0.95, seed=21)[0] >= _floor(0.95)


def test_negative_control_unconditioned_tails_fail_at_the_bound() -> None:
    """The equal-tailed Laplace interval at the mechanism's own scale, ignoring conditioning:
    at the upper bound the conditioned law is pushed inward, so its upper end misses about
    twice as often as α/2 (a one-sided 97.5% bound covers ≈ 95%). Ours stays within α/2."""
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=100.0)
    x = 100.0
    y = m.sample(np.full(R, x), random_state=22)
    naive_hi = y + m.scale * math.log(1 / 0.05)
    miss_naive = float(np.mean(naive_hi < x))
    assert miss_naive > 0.025 + 4 * math.sqrt(0.025 / R)  # ≈ 0.05
    _, miss_hi, _ = _coverage(m, x, 0.95, seed=22)
    assert miss_hi <= 0.025 + 4 * math.sqrt(0.025 / R)


def test_count_intervals_with_integer_rounding_slack() -> None:
    m = make_mechanism("truncated", epsilon=0.5, sensitivity=1.0, lower=0.0, upper=500.0)
    for n_true in (0, 3, 250, 500):
        y = m.sample(np.full(R, float(n_true)), random_state=n_true + 1)
        z = np.round(y)  # the release a user sees
        lo, hi = confidence_interval(m, z, 0.95, slack=0.5, integer=True)
        assert (lo == np.round(lo)).all() and (hi == np.round(hi)).all()
        assert np.mean((lo <= n_true) & (n_true <= hi)) >= _floor(0.95), n_true


# -- composed statistics ------------------------------------------------------------------
def test_component_levels() -> None:
    assert component_level(0.95, 1) == pytest.approx(0.95)
    assert component_level(0.95, 2) ** 2 == pytest.approx(0.95)
    assert component_level(0.95, 4, "bonferroni") == pytest.approx(1 - 0.05 / 4)
    with pytest.raises(ParameterError):
        component_level(0.95, 0)


def _random_box(rng: np.random.Generator, lo: float, hi: float) -> tuple[float, float]:
    a, b = sorted(rng.uniform(lo, hi, 2))
    return float(a), float(b)


def test_composed_maps_contain_the_image_of_the_box() -> None:
    """Soundness of the interval arithmetic: the statistic of any point of the box (with an
    integer count) lies in the returned interval."""
    rng = np.random.default_rng(17)
    lo, hi, c = -2.0, 6.0, 2.0
    w = hi - lo
    for _ in range(300):
        n_box = _random_box(rng, -3, 40)
        s_box = _random_box(rng, -80, 80)
        q_box = _random_box(rng, -10, 400)
        m_lo, m_hi = interval_from_components("mean", {"count": n_box, "sum": s_box},
                                              center=c, lower=lo, upper=hi)
        v_lo, v_hi = interval_from_components(
            "variance", {"count": n_box, "sum": s_box, "sum_sq": q_box}, lower=lo, upper=hi)
        ns = np.arange(max(math.ceil(n_box[0]), 1), math.floor(n_box[1]) + 1)
        for n in ns:
            for s in np.linspace(*s_box, 7):
                mean = c + s / n
                if abs(s) <= n * w / 2:  # a data set can have it
                    assert m_lo - 1e-12 <= mean <= m_hi + 1e-12
                if n < 2:
                    continue
                for q in np.linspace(*q_box, 7):
                    if q < 0 or s * s > n * q or q > n * w * w / 4:
                        continue  # no data set in [lo, hi] has these moments
                    var = (q - s * s / n) / (n - 1)
                    assert v_lo - 1e-9 <= var <= v_hi + 1e-9, (n, s, q, v_lo, v_hi)
        if len(ns) == 0:
            assert (float(m_lo), float(m_hi)) == (lo, hi)


def test_proportion_and_correlation_maps() -> None:
    rng = np.random.default_rng(19)
    for _ in range(200):
        k = int(rng.integers(2, 6))
        a = rng.uniform(-2, 30, k)
        b = a + rng.uniform(0, 10, k)
        p_lo, p_hi = interval_from_components("proportions", {"count": (a, b)})
        for _ in range(20):
            pt = rng.uniform(np.maximum(a, 0), np.maximum(b, 0))
            if pt.sum() <= 0:
                continue
            p = pt / pt.sum()
            assert (p_lo - 1e-12 <= p).all() and (p <= p_hi + 1e-12).all()
        cov = _random_box(rng, -5, 5)
        vx = _random_box(rng, 0, 6)
        vy = _random_box(rng, 0, 6)
        r_lo, r_hi = interval_from_components("correlation",
                                              {"cov": cov, "var_x": vx, "var_y": vy})
        for cv in np.linspace(*cov, 5):
            for x in np.linspace(*vx, 5):
                for y in np.linspace(*vy, 5):
                    if x > 0 and y > 0 and cv * cv <= x * y:
                        assert r_lo - 1e-12 <= cv / math.sqrt(x * y) <= r_hi + 1e-12


MEAN_CASES = [  # (true values in [0, 10])
    [0.0],
    [0.0, 0.0, 0.0],
    [10.0] * 40,
    [0.0, 10.0, 0.0, 10.0, 5.0],
    list(np.linspace(2.0, 9.0, 25)),
]


def _mean_mechanisms(kind: str, parts: int) -> dict[str, object]:
    eps = 1.0 / parts
    mech = {
        "count": make_mechanism(kind, epsilon=eps, sensitivity=1.0, lower=0.0, upper=1000.0),
        "sum": make_mechanism(kind, epsilon=eps, sensitivity=10.0),
    }
    if parts == 3:
        mech["sum_sq"] = make_mechanism(kind, epsilon=eps, sensitivity=25.0, lower=0.0)
    return mech


@pytest.mark.parametrize("kind", ["bounded", "truncated"])
def test_composed_mean_variance_std_coverage(kind: str) -> None:
    """Private-size mean c + S/max(N, 1) clamped to [l, u], variance and std from (N, S, SS):
    coverage at the bounds of the statistic (all values at one end, variance 0) and inside."""
    rng = np.random.default_rng(23)
    c, lo, hi = 5.0, 0.0, 10.0
    n_sim = 3000
    for vals in MEAN_CASES:
        v = np.asarray(vals)
        truth = {"count": float(v.size), "sum": float(np.sum(v - c)),
                 "sum_sq": float(np.sum((v - c) ** 2))}
        mech = _mean_mechanisms(kind, 2)
        rel = {k: m.sample(np.full(n_sim, truth[k]), random_state=rng) for k, m in mech.items()}
        m_lo, m_hi = composed_interval("mean", mech, rel, 0.9, center=c, lower=lo, upper=hi)
        assert np.mean((m_lo <= v.mean()) & (v.mean() <= m_hi)) >= _floor(0.9, n_sim)
        if v.size < 2:
            continue
        mech = _mean_mechanisms(kind, 3)
        rel = {k: m.sample(np.full(n_sim, truth[k]), random_state=rng) for k, m in mech.items()}
        var = float(np.var(v, ddof=1))
        v_lo, v_hi = composed_interval("variance", mech, rel, 0.9, lower=lo, upper=hi)
        assert np.mean((v_lo <= var) & (var <= v_hi)) >= _floor(0.9, n_sim)
        s_lo, s_hi = composed_interval("std", mech, rel, 0.9, lower=lo, upper=hi)
        assert np.allclose(s_lo**2, v_lo) and np.allclose(s_hi**2, v_hi)


def test_composed_proportions_coverage() -> None:
    rng = np.random.default_rng(29)
    counts = np.array([0.0, 3.0, 40.0, 157.0])
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=200.0)
    n_sim = 6000
    y = m.sample(np.broadcast_to(counts, (n_sim, 4)), random_state=rng)
    p_lo, p_hi = composed_interval("proportions", {"count": m}, {"count": y}, 0.9)
    p = counts / counts.sum()
    inside = ((p_lo <= p) & (p <= p_hi)).all(axis=1)  # simultaneous coverage
    assert np.mean(inside) >= _floor(0.9, n_sim)


def test_negative_control_plug_in_mean_ignores_the_count_noise() -> None:
    """Dividing the sum's interval by the noisy count (as if N were exact) undercovers for
    small groups; the composed interval does not."""
    rng = np.random.default_rng(31)
    c, lo, hi = 5.0, 0.0, 10.0
    mech = _mean_mechanisms("bounded", 2)
    n_sim = 20_000
    truth = {"count": 1.0, "sum": -5.0}  # one value, at the lower bound
    rel = {k: m.sample(np.full(n_sim, truth[k]), random_state=rng) for k, m in mech.items()}
    s_lo, s_hi = confidence_interval(mech["sum"], rel["sum"], 0.95)
    n_hat = np.maximum(rel["count"], 1.0)
    naive_lo = np.clip(c + s_lo / n_hat, lo, hi)
    naive_hi = np.clip(c + s_hi / n_hat, lo, hi)
    assert np.mean((naive_lo <= 0.0) & (naive_hi >= 0.0)) < _floor(0.95, n_sim)  # ≈ 0.92
    m_lo, m_hi = composed_interval("mean", mech, rel, 0.95, center=c, lower=lo, upper=hi)
    assert np.mean((m_lo <= 0.0) & (m_hi >= 0.0)) >= _floor(0.95, n_sim)


def test_composed_errors() -> None:
    with pytest.raises(ParameterError):
        interval_from_components("median", {})
    with pytest.raises(ParameterError):
        interval_from_components("mean", {"count": (1, 2)}, center=0, lower=0, upper=1)
    with pytest.raises(ParameterError):
        interval_from_components("mean", {"count": (1, 2), "sum": (0, 1)}, lower=0, upper=1)


def _independent_ends(m: object, lo: float, hi: float, s: float, t: float,
                      alpha: float) -> tuple[float | None, float | None]:
    """(U, L) by scipy quadrature and brentq; None where the set is empty or everything."""
    from scipy import integrate, optimize

    b = m.scale  # type: ignore[attr-defined]
    top = min(hi, lo + 60 * b)

    def mass(x: float, a: float, c: float) -> float:
        f = lambda v: math.exp(-abs(v - x) / b) / (2 * b)  # noqa: E731
        parts = [(a, min(c, x)), (max(a, x), c)]
        return sum(integrate.quad(f, p, q, epsabs=0, epsrel=1e-12)[0]
                   for p, q in parts if q > p)

    def g_up(x: float) -> float:
        return mass(x, lo, t) / mass(x, lo, hi) - alpha / 2

    def g_lo(x: float) -> float:
        return mass(x, s, hi) / mass(x, lo, hi) - alpha / 2

    u = None if g_up(top) > 0 or g_up(lo) <= 0 else optimize.brentq(g_up, lo, top, xtol=1e-13)
    low = None if g_lo(lo) > 0 else optimize.brentq(g_lo, lo, top, xtol=1e-13)
    return u, low


def test_bounded_ends_match_an_independent_inversion() -> None:
    """The interval ends solve F_x(t(y)) = α/2 and 1 − F_x(s(y)) = α/2, computed here
    independently with scipy quadrature and a root finder (not dpframe's masses)."""
    alpha = 0.1
    n_checked = 0
    for kw, eps in [(dict(lower=0.0, upper=5.0), 3.0), (dict(lower=-2.0, upper=30.0), 1.3),
                    (dict(lower=1.0), 0.4)]:
        m = make_mechanism("bounded", epsilon=eps, sensitivity=1.0, delta=1e-4, **kw)
        b = m.scale
        lo, hi = kw["lower"], kw.get("upper", math.inf)
        ys = m.sample(np.array([lo, lo + 0.5, lo + 2.0, lo + 4.0, min(hi, lo + 9.0)]),
                      random_state=4)
        l_ours, u_ours = confidence_interval(m, ys, 1 - alpha)
        s, t = output_cell(m, ys)
        for i in range(ys.size):
            u_ref, l_ref = _independent_ends(m, lo, hi, s[i], t[i], alpha)
            n_checked += (u_ref is not None) + (l_ref is not None)
            if u_ref is not None:
                assert u_ref - 1e-12 <= u_ours[i] <= u_ref + 5e-9 * b, (i, u_ref, u_ours[i])
            if l_ref is not None:
                assert l_ref - 5e-9 * b <= l_ours[i] <= l_ref + 1e-12, (i, l_ref, l_ours[i])
            else:
                assert l_ours[i] == lo
    assert n_checked >= 15


@pytest.mark.slow
@pytest.mark.parametrize("eps,delta", [(0.1, 0.0), (0.5, 1e-3), (3.0, 0.0)])
def test_coverage_many_draws(eps: float, delta: float) -> None:
    """Heavier: 10⁵ releases per true value at level 0.95 on [0, 20] and [0, ∞), each tail
    ≤ α/2 + 4 s.e.; ε from 0.1 to 3, δ > 0 for the bounded mechanism."""
    n = 100_000
    half = 0.025
    for name in ("bounded", "truncated"):
        for kw in (dict(lower=0.0, upper=20.0), dict(lower=0.0)):
            d = delta if name == "bounded" else 0.0
            m = make_mechanism(name, epsilon=eps, sensitivity=1.0, delta=d, **kw)
            for x in (0.0, 1.0, 10.0, kw.get("upper", 40.0)):
                cov, miss_hi, miss_lo = _coverage(m, x, 0.95, seed=int(x) + 77, n=n)
                assert cov >= _floor(0.95, n), (name, kw, x, cov)
                assert max(miss_hi, miss_lo) <= half + 4 * math.sqrt(half / n)
