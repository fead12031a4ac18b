"""Accuracy before spending (dpframe.mechanisms.accuracy): half-widths against independent
numeric integration and against the empirical error of real releases, the inverse ε search,
the split of a total ε, and the data-independent mechanism choice against independently
integrated worst-case MSEs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize

from dpframe.errors import ParameterError
from dpframe.mechanisms import make_mechanism
from dpframe.mechanisms.accuracy import (
    EPS_MIN,
    TIE_RTOL,
    AccuracyTarget,
    choose_mechanism,
    epsilon_for_half_width,
    half_width,
    mean_half_width,
    miss_probability,
    split_epsilon,
    worst_case_mse,
)
from dpframe.mechanisms.intervals import _snap_radius


def _radius(m: object) -> float:
    r, dt = _snap_radius(m)
    return r + dt


# -- independent numerics (scipy quadrature, no dpframe closed forms) ----------------------------
def _lap(y: float, x: float, b: float) -> float:
    return math.exp(-abs(y - x) / b) / (2 * b)


def _quad(f: object, a: float, c: float, x: float) -> float:
    if c <= a:
        return 0.0
    if a < x < c:  # the kink of the Laplace density
        return _quad(f, a, x, x) + _quad(f, x, c, x)
    return integrate.quad(f, a, c, epsabs=0, epsrel=1e-10, limit=200)[0]  # type: ignore[arg-type]


def _indep_miss(name: str, b: float, lo: float, hi: float, x: float, h: float) -> float:
    """P(|Z − x| > h) by quadrature (bounded, finite interval) or by the clamped law."""
    if name == "bounded":
        dens = lambda y: _lap(y, x, b)  # noqa: E731
        tot = _quad(dens, lo, hi, x)
        out = _quad(dens, lo, min(x - h, hi), x) + _quad(dens, max(x + h, lo), hi, x)
        return out / tot
    above = 0.5 * math.exp(-h / b) if x + h < hi else 0.0
    below = 0.5 * math.exp(-h / b) if x - h > lo else 0.0
    return above + below


def _indep_mse(name: str, b: float, lo: float, hi: float, x: float) -> float:
    sq = lambda y: (y - x) ** 2 * _lap(y, x, b)  # noqa: E731
    inside = _quad(sq, lo, hi, x)
    if name == "bounded":
        return inside / _quad(lambda y: _lap(y, x, b), lo, hi, x)
    ends = 0.0
    if math.isfinite(lo):
        ends += (x - lo) ** 2 * 0.5 * math.exp(-(x - lo) / b)
    if math.isfinite(hi):
        ends += (hi - x) ** 2 * 0.5 * math.exp(-(hi - x) / b)
    return inside + ends


def _indep_sup(f: object, lo: float, hi: float, n: int = 161) -> float:
    """Grid maximum refined by a bounded scalar search around the best grid point."""
    xs = np.linspace(lo, hi, n)
    vals = np.array([f(x) for x in xs])  # type: ignore[operator]
    i = int(vals.argmax())
    a, c = xs[max(i - 1, 0)], xs[min(i + 1, n - 1)]
    res = optimize.minimize_scalar(lambda x: -f(x), bounds=(a, c), method="bounded",  # type: ignore[operator]
                                   options={"xatol": 1e-10 * (hi - lo)})
    return max(float(vals.max()), -float(res.fun))


# -- half-widths ----------------------------------------------------------------------------
def test_half_width_closed_forms() -> None:
    ln20 = math.log(20)
    m = make_mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    assert half_width(m) == pytest.approx(m.scale * ln20 + _radius(m), rel=1e-12)
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0)
    assert half_width(m) == pytest.approx(m.scale * ln20 + _radius(m), rel=1e-12)
    for upper, expect in [(10.0, ln20), (4.0, math.log(10)), (2.0, 2.0)]:
        m = make_mechanism("truncated", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=upper)
        # scale is 1/(1 - overhead): compare in units of b, except the width cap
        if expect == upper:  # capped at the width
            assert half_width(m) == upper
        else:
            assert half_width(m) - _radius(m) == pytest.approx(expect * m.scale, rel=1e-9)
    with pytest.raises(ParameterError):
        half_width(m, 1.5)


@pytest.mark.parametrize("eps,upper", [(1.0, 10.0), (1.0, 2.0), (0.3, 5.0), (3.0, 1.0),
                                       (0.05, 100.0)])
def test_bounded_half_width_matches_quadrature(eps: float, upper: float) -> None:
    """sup_x P(|Z − x| > h) = α at the computed h (independent quadrature over a grid of true
    values refined at its maximum), and h is the smallest such: at 0.999 h the sup exceeds α."""
    m = make_mechanism("bounded", epsilon=eps, sensitivity=1.0, lower=0.0, upper=upper)
    for alpha in (0.05, 0.2):
        h = half_width(m, alpha) - _radius(m)
        sup = _indep_sup(lambda x, h=h: _indep_miss("bounded", m.scale, 0.0, upper, x, h),
                         0.0, upper)
        assert sup <= alpha * (1 + 1e-7)
        assert sup >= alpha * (1 - 1e-5)
        sup_less = _indep_sup(lambda x, h=h: _indep_miss("bounded", m.scale, 0.0, upper, x,
                                                          0.999 * h), 0.0, upper)
        assert sup_less > alpha
        # the dpframe miss function agrees with quadrature
        xs = np.linspace(0.0, upper, 7)
        ours = miss_probability(m, xs, h)
        ref = [_indep_miss("bounded", m.scale, 0.0, upper, x, h) for x in xs]
        assert np.allclose(ours, ref, rtol=1e-9, atol=1e-14)


CASES = [
    ("bounded", dict(lower=0.0, upper=10.0)),
    ("bounded", dict(lower=0.0, upper=2.0)),
    ("bounded", dict(lower=0.0)),
    ("truncated", dict(lower=0.0, upper=10.0)),
    ("truncated", dict(lower=0.0, upper=4.0)),
    ("laplace", dict(lower=0.0, upper=10.0)),
]


@pytest.mark.parametrize("name,kw", CASES)
def test_half_width_agrees_with_the_empirical_error_of_releases(name: str, kw: dict) -> None:
    """For real (snapped) releases: P(|Y − x| ≤ h) ≥ 1 − α at every true value, and = 1 − α
    (within Monte Carlo error) at the worst one; the empirical 95% quantile of |Y − x| at the
    worst true value matches h."""
    alpha, n = 0.05, 40_000
    m = make_mechanism(name, epsilon=1.0, sensitivity=1.0, **kw)
    h = half_width(m, alpha)
    lo = kw["lower"]
    hi = kw.get("upper", lo + 30.0)
    xs = np.linspace(lo, hi, 9)
    miss = [float(miss_probability(m, np.array([x]), h - _radius(m))[0]) for x in xs]
    worst = float(xs[int(np.argmax(miss))])
    sd = math.sqrt(alpha * (1 - alpha) / n)
    for i, x in enumerate(xs):
        y = m.sample(np.full(n, x), random_state=100 + i)
        p = float(np.mean(np.abs(y - x) <= h))
        assert p >= 1 - alpha - 4 * sd, (x, p)
        if x == worst:
            assert p <= 1 - alpha + 4 * sd, (x, p)
            q = float(np.quantile(np.abs(y - x), 1 - alpha))
            # the quantile's MC error: ± 4 sd of the coverage divided by the density of |Y − x|
            # at h, which is at least e^{-h/b}/b for these laws
            dens = math.exp(-h / m.scale) / m.scale
            assert abs(q - h) <= 4 * sd / dens, (q, h)


# -- the inverse and the split ----------------------------------------------------------------
@pytest.mark.parametrize("name,kw,target", [
    ("bounded", dict(lower=0.0, upper=10.0), 2.0),
    ("bounded", dict(lower=0.0, upper=10.0), 0.05),
    ("bounded", dict(lower=0.0), 1.0),
    ("truncated", dict(lower=0.0, upper=10.0), 3.0),
    ("laplace", dict(), 0.5),
])
def test_epsilon_for_half_width_is_the_smallest_that_meets_the_target(name: str, kw: dict,
                                                                      target: float) -> None:
    eps = epsilon_for_half_width(name, target, sensitivity=1.0, **kw)
    assert half_width(make_mechanism(name, epsilon=eps, sensitivity=1.0, **kw)) <= target
    below = eps * (1 - 1e-5)
    assert half_width(make_mechanism(name, epsilon=below, sensitivity=1.0, **kw)) > target


def test_half_width_is_non_increasing_in_epsilon() -> None:
    for name, kw in CASES:
        hs = [half_width(make_mechanism(name, epsilon=e, sensitivity=1.0, **kw))
              for e in np.geomspace(0.05, 20, 40)]
        assert all(b <= a * (1 + 1e-6) for a, b in itertools.pairwise(hs)), name


def test_epsilon_for_half_width_edges() -> None:
    # a clamped release is never farther than the width from the truth
    assert epsilon_for_half_width("truncated", 10.0, sensitivity=1.0, lower=0.0,
                                  upper=10.0) == EPS_MIN
    with pytest.raises(ParameterError):
        epsilon_for_half_width("laplace", 0.0, sensitivity=1.0)
    with pytest.raises(ParameterError):
        epsilon_for_half_width("laplace", 1e-12, sensitivity=1.0)


def test_split_equalises_ratios_and_is_minimax() -> None:
    reqs = [
        AccuracyTarget("truncated", 1.0, 5.0, lower=0.0, upper=1000.0),
        AccuracyTarget("bounded", 0.1, 0.3, lower=0.0, upper=10.0),
        AccuracyTarget("laplace", 2.0, 10.0, alpha=0.1),
    ]
    split = split_epsilon(reqs, 2.0)
    assert sum(split.epsilons) == pytest.approx(2.0, rel=1e-12)
    assert max(split.ratios) / min(split.ratios) < 1 + 1e-3
    # moving 2% of any share to another makes the worst ratio larger
    for i in range(3):
        for j in range(3):
            if i == j:
                continue
            eps = list(split.epsilons)
            d = 0.02 * eps[i]
            eps[i] -= d
            eps[j] += d
            worst = max(r.half_width_at(e) / r.target for r, e in zip(reqs, eps, strict=True))
            assert worst > split.ratio


def test_split_of_plain_laplace_is_proportional() -> None:
    """With plain noise h_i ∝ Δ_i ln(1/α_i)/ε_i, so the rule gives ε_i ∝ Δ_i ln(1/α_i)/t_i."""
    reqs = [AccuracyTarget("laplace", d, t, lower=0.0, upper=10.0, alpha=a)
            for d, t, a in [(1.0, 1.0, 0.05), (3.0, 2.0, 0.05), (1.0, 0.5, 0.01)]]
    split = split_epsilon(reqs, 5.0, rtol=1e-6)
    w = np.array([r.sensitivity * math.log(1 / r.alpha) / r.target for r in reqs])
    assert np.allclose(np.array(split.epsilons), 5.0 * w / w.sum(), rtol=1e-4)
    assert split.ratio == pytest.approx(w.sum() / 5.0, rel=1e-4)


# -- worst-case MSE and the choice ------------------------------------------------------------
CHOICE_GRID = [(eps, width, delta) for eps in (0.1, 1.0, 4.0) for width in (0.5, 1.5, 4.0, 30.0)
               for delta in (0.0, 1e-3)]


def _indep_worst(name: str, m: object, lo: float, hi: float) -> float:
    b = m.scale  # type: ignore[attr-defined]
    if name == "laplace":
        return 2 * b * b
    top = hi if math.isfinite(hi) else lo + 60 * b
    return _indep_sup(lambda x: _indep_mse(name, b, lo, hi, x), lo, top)


@pytest.mark.parametrize("eps,width,delta", CHOICE_GRID)
def test_choose_mechanism_never_picks_the_larger_worst_case_mse(eps: float, width: float,
                                                                delta: float) -> None:
    choice = choose_mechanism(eps, 1.0, 0.0, width, delta)
    worst = {}
    for name in ("bounded", "truncated"):
        if name not in choice.worst_case_mse:
            assert name == "bounded" and width < 1.0  # Δ > width: the bounded one refuses
            continue
        d = delta if name == "bounded" else 0.0
        m = make_mechanism(name, epsilon=eps, sensitivity=1.0, lower=0.0, upper=width, delta=d)
        worst[name] = _indep_worst(name, m, 0.0, width)
        br = choice.worst_case_mse[name]
        assert br.lower <= worst[name] * (1 + 1e-7)
        assert worst[name] <= br.upper * (1 + 1e-9)
    other = "truncated" if choice.name == "bounded" else "bounded"
    if other in worst and choice.name in worst:
        assert worst[choice.name] <= worst[other] * (1 + TIE_RTOL + 1e-7), choice.reason
    assert choice.name in choice.reason


def test_choose_mechanism_regions() -> None:
    """Holohan Fig. 3: the bounded scale b* → 2Δ/ε when Δ ≪ width, so the clamped mechanism
    wins on wide domains; at Δ = width the bounded one wins. Half-lines: the clamped one (it is
    pointwise no worse than the plain one and b* of a half-line exceeds Δ/ε). The real line:
    all coincide at δ = 0, and the plain name is used."""
    assert choose_mechanism(1.0, 1.0, 0.0, 100.0).name == "truncated"
    assert choose_mechanism(1.0, 1.0, 0.0, 1.0).name == "bounded"
    assert choose_mechanism(1.0, 1.0, 0.0).name == "truncated"
    assert choose_mechanism(1.0, 1.0, None, 5.0).name == "truncated"
    real = choose_mechanism(1.0, 1.0)
    assert real.name == "laplace" and "tie" in real.reason


def test_worst_case_mse_brackets_are_tight_and_cover_the_far_region() -> None:
    for name in ("bounded", "truncated"):
        for kw in (dict(lower=0.0, upper=3.0), dict(lower=0.0, upper=500.0), dict(lower=0.0),
                   dict(upper=0.0)):
            m = make_mechanism(name, epsilon=1.0, sensitivity=1.0, **kw)
            br = worst_case_mse(m)
            if "lower" not in kw:  # mirror image of the half-line
                assert br == worst_case_mse(make_mechanism(name, epsilon=1.0, sensitivity=1.0,
                                                           lower=0.0))._replace(
                    argmax=br.argmax)
                continue
            assert br.lower <= br.upper <= br.lower * (1 + 1e-8) + 1e-300
            hi = kw.get("upper", math.inf)
            assert br.lower == pytest.approx(_indep_worst(name, m, 0.0, hi), rel=1e-6)


def test_mse_in_units_is_the_mechanisms_closed_form() -> None:
    from dpframe.mechanisms.accuracy import _mse_in_units

    for name in ("bounded", "truncated"):
        for kw in (dict(lower=-1.0, upper=2.0), dict(lower=0.0, upper=80.0), dict(lower=3.0)):
            m = make_mechanism(name, epsilon=0.7, sensitivity=1.0, **kw)
            x = np.linspace(kw["lower"], kw.get("upper", 40.0), 101)
            a1 = (x - kw["lower"]) / m.scale
            a2 = (kw.get("upper", math.inf) - x) / m.scale
            ours = _mse_in_units(name, a1, a2) * m.scale**2
            assert np.allclose(ours, m.mse(x), rtol=1e-11, atol=0)


@pytest.mark.parametrize("kind", ["bounded", "truncated"])
def test_mean_half_width_holds_for_groups_of_at_least_n(kind: str) -> None:
    """The private-size mean clip(c + Ŝ/max(N̂, 1), l, u) is within mean_half_width of the
    true mean with probability ≥ 1 − α, for groups of exactly n rows (the worst size the bound
    allows) at the bounds and inside, and for larger groups."""
    lo, hi, c = 0.0, 10.0, 5.0
    cnt = make_mechanism(kind, epsilon=0.5, sensitivity=1.0, lower=0.0, upper=1000.0)
    sm = make_mechanism(kind, epsilon=0.5, sensitivity=10.0)
    alpha, runs = 0.1, 20_000
    rng = np.random.default_rng(41)
    for n in (5, 30, 200):
        h = mean_half_width(cnt, sm, n, alpha, lower=lo, upper=hi)
        assert 0 < h <= hi - lo
        for size, mean in ((n, lo), (n, hi), (n, 3.7), (3 * n, lo)):
            s_true = size * (mean - c)
            n_hat = cnt.sample(np.full(runs, float(size)), random_state=rng)
            s_hat = sm.sample(np.full(runs, s_true), random_state=rng)
            released = np.clip(c + s_hat / np.maximum(n_hat, 1.0), lo, hi)
            ok = float(np.mean(np.abs(released - mean) <= h))
            assert ok >= 1 - alpha - 4 * math.sqrt(alpha * (1 - alpha) / runs), (n, size, ok)
    # more rows, smaller half-width
    assert mean_half_width(cnt, sm, 400, alpha, lower=lo, upper=hi) < mean_half_width(
        cnt, sm, 200, alpha, lower=lo, upper=hi)
