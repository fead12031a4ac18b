"""Confidence intervals for released values: exact for one mechanism output, conservative for
statistics composed of several outputs. Pure post-processing: no ε, no data.

**One output** (:func:`confidence_interval`). Every mechanism releases ``Y`` computed from an
exact continuous draw ``X`` (Laplace(x, b) conditioned on the feasible set for ``"bounded"``,
Laplace(x, b) on the real line for ``"truncated"`` and ``"laplace"``). Snapping and clamping
move ``Y`` away from ``X`` in a way we bound from public facts only: there are public,
non-decreasing ``s(y) ≤ t(y)`` with ``s(Y) ≤ X ≤ t(Y)`` always (:func:`output_cell`). With
``F_x`` the exact CDF of ``X`` the interval is

    U(y) = sup{x ∈ D : F_x(t(y)) > α/2},      L(y) = inf{x ∈ D : 1 − F_x(s(y)) > α/2},

test inversion of an equal-tailed acceptance region. ``F_x(t(Y)) ≥ F_x(X) ~ Uniform(0, 1)``
gives ``P_x(x > U(Y)) ≤ α/2`` for every ``x``, likewise below: coverage ``≥ 1 − α`` at every true
value, bounds included. ``F_x(c)`` is non-increasing in ``x`` (the family has a monotone
likelihood ratio, kept by conditioning on a fixed set), so each set is a half-line of ``D`` and
``U``, ``L`` come in closed form (plain Laplace noise) or by bisection (conditioned noise).
Derivation: ``docs/privacy.md``, section "Confidence intervals, accuracy and the mechanism
choice".

**Composed statistics** (:func:`interval_from_components`, :func:`composed_interval`). The
components' noises are independent, so intervals at levels ``level^(w_i/Σw)`` each (Šidák with
weights, :func:`component_levels`; or ``1 − α/k``, Bonferroni) hold *simultaneously* with
probability ``≥ level``; on that event the true statistic lies in the image of the box under
the post-processing map, which we bound by monotonicity in each argument and intersect with
the statistic's domain.

**Ratios with a pivot** (the private-size mean ``c + S/N``). When both draws are plain Laplace
on the real line (the plain and clamped mechanisms, and the bounded one on an unbounded set)
the box is replaced by Fieller's construction (:mod:`dpframe.mechanisms.pivots`):
``X_S − θ X_N`` has a law that depends on ``θ = S/N`` only, so one test at the full level
``1 − α`` is inverted instead of two at ``1 − α/2`` — the interval's width is that of the
exact law of the ratio's noise, up to the discreteness of the hull search.
Derivations: ``docs/privacy.md``, section I.7 "Composed intervals".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.pivots import correlation_hull, ratio_hull, variance_hull

__all__ = [
    "COMPOSED_KINDS",
    "CORRELATION_ALPHA_SHARES",
    "VARIANCE_ALPHA_SHARES",
    "component_level",
    "component_levels",
    "composed_interval",
    "confidence_interval",
    "correlation_by_pivot",
    "interval_from_components",
    "output_cell",
    "pivot_cell",
]

#: Relative slack on the tail threshold α/2 that absorbs the floating-point error of the
#: computed CDF (relative error ≈ 1e-15); it only ever widens the interval.
CDF_RTOL = 1e-9
#: Relative and scale-relative padding of closed-form endpoints (float rounding), outward.
_PAD = 1e-12
_MAX_BISECTIONS = 400

COMPOSED_KINDS = ("mean", "variance", "std", "proportions", "correlation", "sqrt", "affine")
#: A private-size variance's α by pivot (docs I.7): ``(variance test, mean)`` — the exact
#: quantile of ``|e_Q − 2m·e_S + (m² − v)e_N|``, and the Fieller interval of the centred mean
#: ``m``, which enters through ``(m − m̂)²`` and the noise scale 2|m|·b_S (union bound);
#: 0.8 : 0.2 measured narrower than 0.9 : 0.1 and 0.95 : 0.05 from 50 to 400 rows (docs I.7).
VARIANCE_ALPHA_SHARES = (0.8, 0.2)
#: A correlation's α (docs I.7, Theorem 5): ``(pivot test, covariance box, var_x box, var_y
#: box)``. The variance boxes enter the pivot only through the bound on ``λ = √(V_y/V_x)`` and
#: the tangent remainder; the covariance box is used instead of the pivot when those boxes
#: reach 0 or the covariance's noise depends on the released variances (union bound).
CORRELATION_ALPHA_SHARES = (0.75, 0.05, 0.1, 0.1)


# -- small helpers ------------------------------------------------------------------------------
def _alpha(level: float) -> float:
    lv = float(level)
    if not (0.0 < lv < 1.0) or math.isnan(lv):
        raise ParameterError(f"level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    return 1.0 - lv


def _out(lo: np.ndarray, hi: np.ndarray, scalar: bool) -> tuple[Any, Any]:
    if scalar:
        return float(lo.reshape(-1)[0]), float(hi.reshape(-1)[0])
    return lo, hi


def _x_range(mech: Any) -> tuple[float, float]:
    """Hull of the true values the mechanism accepts: its domain within ``±magnitude``."""
    mag = float(mech.magnitude)
    return max(mech.domain.lower, -mag), min(mech.domain.upper, mag)


def _snap_radius(mech: Any) -> tuple[float, float]:
    """``(r, δ_t)``: a released value is within ``r`` of the pre-rounding value ``x̃`` (unless
    it is a window end or a clamped end), and ``|x̃ − X| ≤ δ_t`` (``docs/privacy.md`` §4.3)."""
    plan = getattr(mech, "plan", None)
    if plan is None or not mech.grid:
        return 0.0, 0.0
    lam = float(mech.grid)
    # end cells (bounded mechanism next to a finite end) have length ≤ 3Λ/2, released at
    # their midpoint; rounding cells have length Λ, released at their centre
    ends = mech.name == "bounded" and bool(mech.domain.finite_endpoints)
    return (0.75 if ends else 0.5) * lam, float(plan.delta_t)


def output_cell(mechanism: Any, released: Any, slack: float = 0.0) -> tuple[np.ndarray, ...]:
    """Public ``(s, t)`` with ``s(Y) ≤ X ≤ t(Y)`` for the exact continuous draw ``X`` behind a
    release ``Y`` (vectorised; ``±inf`` where the release is a clamped or window end).

    ``slack``: the caller moved the released value by at most this much (e.g. ``0.5`` for a
    count rounded to an integer) before passing it here.
    """
    y = np.asarray(released, dtype=float)
    if np.isnan(y).any():
        raise ParameterError("a released value is NaN")
    slack = float(slack)
    if not slack >= 0 or math.isinf(slack):
        raise ParameterError(f"slack must be a finite number ≥ 0, got {slack!r}")
    r, dt = _snap_radius(mechanism)
    reach = r + dt + slack
    s = y - reach
    t = y + reach
    plan = getattr(mechanism, "plan", None)
    if plan is not None:
        w_lo, w_hi = plan.window
        s = np.where(y - slack <= w_lo, -np.inf, s)  # the window's end cell reaches to -inf
        t = np.where(y + slack >= w_hi, np.inf, t)
    if mechanism.name == "truncated":
        # clamping sends everything beyond a finite end (up to the middle of the gap to the
        # next component, or to infinity) onto that end
        comps = mechanism.domain.components
        for i, (lo, hi) in enumerate(comps):
            if math.isfinite(lo):
                below = -math.inf if i == 0 else comps[i - 1][1] + (lo - comps[i - 1][1]) / 2
                hit = (y - slack <= lo) & (lo <= y + slack)
                s = np.where(hit, np.minimum(s, below - r - dt), s)
            if math.isfinite(hi):
                above = math.inf if i == len(comps) - 1 else hi + (comps[i + 1][0] - hi) / 2
                hit = (y - slack <= hi) & (hi <= y + slack)
                t = np.where(hit, np.maximum(t, above + r + dt), t)
    return s, t


def _laplace_mass(x: np.ndarray, a: np.ndarray | float, c: np.ndarray | float,
                  b: float) -> np.ndarray:
    """``P(Laplace(x, b) ∈ [a, c])`` (0 when ``c ≤ a``), each side a product of accurately
    computed factors (no cancellation, no overflow)."""
    x = np.asarray(x, dtype=float)
    a = np.broadcast_to(np.asarray(a, dtype=float), x.shape)
    c = np.broadcast_to(np.asarray(c, dtype=float), x.shape)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        a_up = np.maximum(a, x)  # the part above x: [max(a, x), c]
        up = 0.5 * np.exp(-(a_up - x) / b) * -np.expm1(-(c - a_up) / b)
        up = np.where(c > a_up, up, 0.0)
        c_dn = np.minimum(c, x)  # the part below x: [a, min(c, x)]
        dn = 0.5 * np.exp(-(x - c_dn) / b) * -np.expm1(-(c_dn - a) / b)
        dn = np.where(c_dn > a, dn, 0.0)
    return up + dn


def _conditioned_below(comps: tuple, b: float, x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``P(X ≤ c)`` for Laplace(x, b) conditioned on the components."""
    num = np.zeros(np.shape(x))
    den = np.zeros(np.shape(x))
    for lo, hi in comps:
        den = den + _laplace_mass(x, lo, hi, b)
        num = num + _laplace_mass(x, lo, np.minimum(hi, c), b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def _conditioned_above(comps: tuple, b: float, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``P(X ≥ s)`` for Laplace(x, b) conditioned on the components."""
    num = np.zeros(np.shape(x))
    den = np.zeros(np.shape(x))
    for lo, hi in comps:
        den = den + _laplace_mass(x, lo, hi, b)
        num = num + _laplace_mass(x, np.maximum(lo, s), hi, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def _bisect_edge(pred: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray,
                 want_sup: bool, tol: np.ndarray | float = 0.0,
                 guess: np.ndarray | None = None) -> np.ndarray:
    """Edge of ``{x : pred(x)}`` on ``[lo, hi]``, returned on the conservative side.

    ``want_sup``: ``pred`` holds on a lower part of the bracket (true, then false) and the
    supremum is wanted, returned as an upper bound. Otherwise ``pred`` holds on an upper part
    and the infimum is wanted, returned as a lower bound. An empty set returns the end of the
    bracket where the set would start (a conservative convention: see the docs). ``guess``:
    an approximate edge; where ``guess ∓ tol`` brackets the edge (checked with ``pred``) only
    that small bracket is bisected. Bisection stops at width ``tol``.
    """
    lo = np.asarray(lo, dtype=float).copy()
    hi = np.asarray(hi, dtype=float).copy()
    tol = np.broadcast_to(np.asarray(tol, dtype=float), lo.shape)
    at_far = pred(hi) if want_sup else pred(lo)  # the set covers the whole bracket
    at_near = pred(lo) if want_sup else pred(hi)  # the set is non-empty
    result = np.where(at_far, hi if want_sup else lo, lo if want_sup else hi)
    live = at_near & ~at_far
    if guess is not None and live.any():
        g = np.clip(np.asarray(guess, dtype=float), lo, hi)
        g_lo = np.clip(g - tol, lo, hi)
        g_hi = np.clip(g + tol, lo, hi)
        p_lo, p_hi = pred(g_lo), pred(g_hi)
        good = live & np.isfinite(g) & (p_lo != p_hi) & (p_lo if want_sup else p_hi)
        lo = np.where(good, g_lo, lo)
        hi = np.where(good, g_hi, hi)
    for _ in range(_MAX_BISECTIONS):
        mid = lo + (hi - lo) / 2
        live &= (mid > lo) & (mid < hi) & (hi - lo > tol)
        if not live.any():
            break
        p = pred(mid)
        if want_sup:
            lo = np.where(live & p, mid, lo)
            hi = np.where(live & ~p, mid, hi)
        else:
            hi = np.where(live & p, mid, hi)
            lo = np.where(live & ~p, mid, lo)
    edge = hi if want_sup else lo
    return np.where(at_near & ~at_far, edge, result)


def _interval_guess(lo: float, hi: float, b: float, t: np.ndarray, theta: float) -> np.ndarray:
    """Approximate ``sup{x ≥ t : F_x(t) > θ}`` for Laplace(x, b) conditioned on ``[lo, hi]``.

    With ``z = e^{-(x-t)/b}``, ``e1 = e^{-(t-lo)/b}``, ``e2 = e^{-(hi-t)/b}``:
    ``F_x(t) > θ  ⟺  (1 − e1 + θ e1) z² − 2θ z + θ e2 > 0``; the edge is the larger root.
    Only a starting point: the caller checks it with the exact predicate.
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        e1 = np.exp(-(t - lo) / b)
        a1 = -np.expm1(-(t - lo) / b)
        e2 = np.exp(-(hi - t) / b)
        lead = a1 + theta * e1
        disc = theta * theta - theta * e2 * lead
        z = (theta + np.sqrt(np.maximum(disc, 0.0))) / lead
        return np.where((z > 0) & (z <= 1) & (disc >= 0), t - b * np.log(z), np.nan)


# -- one mechanism ------------------------------------------------------------------------------
def confidence_interval(
    mechanism: Any,
    released: Any,
    level: float = 0.95,
    *,
    slack: float = 0.0,
    integer: bool = False,
) -> tuple[Any, Any]:
    """Interval ``(lower, upper)`` of true values for release(s) ``released`` of ``mechanism``
    with coverage ``≥ level`` at every true value in the mechanism's domain (vectorised).

    Exact test inversion of the mechanism's own output distribution (conditioned or plain
    Laplace at its calibrated scale), widened only by the snapping cell (at most ``3Λ/4``)
    and the proven pre-rounding error. ``slack``: the caller moved the release by at most this
    much (e.g. ``0.5`` after rounding a count to an integer). ``integer=True``: the true value
    is known to be an integer (a count), so the ends are rounded inward to integers.
    Scalars in, floats out; arrays in, arrays out.
    """
    alpha = _alpha(level)
    scalar = np.ndim(released) == 0
    y = np.atleast_1d(np.asarray(released, dtype=float))
    s, t = output_cell(mechanism, y, slack)
    x_lo, x_hi = _x_range(mechanism)
    b = float(mechanism.scale)
    thr = 0.5 * alpha * (1.0 - CDF_RTOL)
    if mechanism.name == "bounded":
        comps = mechanism.domain.components
        lo_b = np.full(y.shape, x_lo)
        hi_b = np.full(y.shape, x_hi)
        ends = np.maximum(np.abs(s), np.abs(t))
        tol = 1e-9 * b + 4 * np.spacing(np.where(np.isfinite(ends), ends, 0.0))
        g_up = g_lo = None
        if len(comps) == 1:  # closed-form starting points (mirror image for the lower end)
            d_lo, d_hi = comps[0]
            g_up = _interval_guess(d_lo, d_hi, b, t, thr)
            g_lo = -_interval_guess(-d_hi, -d_lo, b, -s, thr)
        upper = _bisect_edge(lambda x: _conditioned_below(comps, b, x, t) > thr,
                             lo_b, hi_b, want_sup=True, tol=tol, guess=g_up)
        lower = _bisect_edge(lambda x: _conditioned_above(comps, b, x, s) > thr,
                             lo_b, hi_b, want_sup=False, tol=tol, guess=g_lo)
    else:
        # X ~ Laplace(x, b) on the real line: F_x(t) > α/2  ⟺  x < t + b·ln(1/α)
        reach = b * math.log(1.0 / alpha)
        with np.errstate(invalid="ignore"):
            upper = t + reach
            lower = s - reach
            upper = upper + _PAD * (np.abs(upper) + b)
            lower = lower - _PAD * (np.abs(lower) + b)
        upper = np.clip(upper, x_lo, x_hi)
        lower = np.clip(lower, x_lo, x_hi)
    if integer:
        lower, upper = _integer_ends(lower, upper)
    return _out(lower, upper, scalar)


def _integer_ends(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Round inward to integers; if no integer is inside, keep a superset ``[⌊U⌋, ⌈L⌉]``."""
    lo_i = np.ceil(lower)
    hi_i = np.floor(upper)
    empty = lo_i > hi_i
    return np.where(empty, hi_i, lo_i), np.where(empty, lo_i, hi_i)


# -- composed statistics ------------------------------------------------------------------------
def component_level(level: float, k: int, method: str = "sidak") -> float:
    """Level of each of ``k`` component intervals so that all hold at once with probability
    ``≥ level``: ``level^(1/k)`` (``"sidak"``: the components' noises are independent) or
    ``1 − (1 − level)/k`` (``"bonferroni"``: valid without independence)."""
    _alpha(level)
    if int(k) != k or k < 1:
        raise ParameterError(f"k must be a positive integer, got {k!r}")
    if method == "sidak":
        return float(math.exp(math.log(level) / k))
    if method == "bonferroni":
        return 1.0 - (1.0 - level) / k
    raise ParameterError(f"method must be 'sidak' or 'bonferroni', got {method!r}")


def component_levels(level: float, weights: Mapping[str, float]) -> dict[str, float]:
    """Levels ``level^(w_i/Σw)`` for components with weights ``w_i > 0``: their product is
    ``level``, so intervals that hold with these probabilities, on independent noises, hold
    all at once with probability ``level`` (weighted Šidák). A component that moves the
    statistic more gets the larger share of ``α``: minimising ``Σ c_i ln(1/α_i)`` (the plain
    Laplace half-widths, weighted by their effect ``c_i``) under ``Σ α_i = α`` gives
    ``α_i ∝ c_i``, and ``1 − level^(w_i/Σw) ≈ α·w_i/Σw`` for small ``α``."""
    _alpha(level)
    total = float(sum(weights.values()))
    if not weights or not all(float(w) > 0 for w in weights.values()) or not total < math.inf:
        raise ParameterError("component weights must be finite numbers > 0")
    return {k: float(math.exp(math.log(level) * float(w) / total)) for k, w in weights.items()}


def _pair(components: Mapping[str, Any], name: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        lo, hi = components[name]
    except KeyError:
        raise ParameterError(f"{kind} needs a {name!r} component interval") from None
    except (TypeError, ValueError):
        raise ParameterError(f"component {name!r} must be a (lower, upper) pair") from None
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise ParameterError(f"component {name!r} has a NaN end")
    return lo, hi


def _param(params: Mapping[str, Any], name: str, kind: str) -> float:
    if name not in params:
        raise ParameterError(f"{kind} needs the public parameter {name}=")
    v = float(params[name])
    if math.isnan(v):
        raise ParameterError(f"{name} is NaN")
    return v


def _quotient_range(s_lo: np.ndarray, s_hi: np.ndarray, n_lo: np.ndarray,
                    n_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Range of ``S/N`` over ``S ∈ [s_lo, s_hi]``, ``N ∈ [n_lo, n_hi]``, ``0 < n_lo ≤ n_hi``:
    increasing in ``S``; in ``N`` decreasing for ``S ≥ 0`` and increasing for ``S < 0``."""
    q_lo = np.where(s_lo >= 0, s_lo / n_hi, s_lo / n_lo)
    q_hi = np.where(s_hi >= 0, s_hi / n_lo, s_hi / n_hi)
    return q_lo, q_hi


def _count_range(lo: np.ndarray, hi: np.ndarray, least: int) -> tuple[np.ndarray, ...]:
    """Integer counts ``N ≥ least`` inside ``[lo, hi]``: ``(n_lo, n_hi, none)``."""
    n_lo = np.maximum(np.ceil(lo), float(least))
    n_hi = np.floor(hi)
    none = n_hi < n_lo
    return n_lo, np.maximum(n_hi, n_lo), none


def _variance_extreme(a: np.ndarray, bq: np.ndarray, n_lo: np.ndarray, n_hi: np.ndarray,
                      upper: bool) -> np.ndarray:
    """max (``upper``) or min over real ``N ∈ [n_lo, n_hi]`` (``n_lo ≥ 2``) of
    ``g(N) = (a − bq/N)/(N − 1)``: endpoints and the roots of ``g'`` (``aN² − 2bqN + bq = 0``)."""
    def g(n: np.ndarray) -> np.ndarray:
        return (a - bq / n) / (n - 1.0)

    cands = [g(n_lo), g(n_hi)]
    with np.errstate(invalid="ignore", divide="ignore"):
        disc = bq * (bq - a)
        root = np.sqrt(np.where(disc >= 0, disc, np.nan))
        for sign in (1.0, -1.0):
            n_c = (bq + sign * root) / a
            ok = np.isfinite(n_c) & (n_c > n_lo) & (n_c < n_hi)
            v = g(np.where(ok, n_c, n_lo))
            cands.append(np.where(ok, v, cands[0]))
    stack = np.stack(cands)
    return stack.max(axis=0) if upper else stack.min(axis=0)


def interval_from_components(
    kind: str, components: Mapping[str, Any], **params: Any
) -> tuple[Any, Any]:
    """Interval for a statistic computed from component values that lie (simultaneously) in the
    given component intervals: the exact range of the post-processing map over that box,
    intersected with the statistic's domain. Vectorised over groups.

    kinds and their components / public parameters:

    * ``"mean"``: ``count`` (N), ``sum`` (S = Σ(x − center)); ``center``, ``lower``, ``upper``.
      Statistic ``center + S/N`` for ``N ≥ 1``, in ``[lower, upper]``.
    * ``"variance"``: ``count``, ``sum``, ``sum_sq`` (Σ(x − center)²); ``lower``, ``upper``.
      Statistic ``(SS − S²/N)/(N − 1)`` for ``N ≥ 2`` (ddof = 1), in ``[0, w²/4·N/(N−1)]``.
    * ``"std"``: as ``"variance"``, square roots of the ends.
    * ``"proportions"``: ``count`` with the cells on the last axis; statistic ``c_j / Σ c``
      (each cell's interval, all holding at once).
    * ``"correlation"``: ``cov``, ``var_x``, ``var_y``; statistic ``cov/√(var_x var_y)``.
    * ``"sqrt"``: ``value`` ≥ 0; ``"affine"``: ``value``, statistic ``offset + scale·value``.

    Scalar components give floats, arrays give arrays.
    """
    lo, hi = _range_of(kind, components, params)
    if np.ndim(lo) == 0 and np.ndim(hi) == 0:
        return float(lo), float(hi)
    return lo, hi


def _range_of(kind: str, components: Mapping[str, Any],
              params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    if kind == "mean":
        n_lo, n_hi, none = _count_range(*_pair(components, "count", kind), least=1)
        s_lo, s_hi = _pair(components, "sum", kind)
        c = _param(params, "center", kind)
        lo, hi = _param(params, "lower", kind), _param(params, "upper", kind)
        q_lo, q_hi = _quotient_range(s_lo, s_hi, n_lo, n_hi)
        out_lo = np.clip(c + q_lo, lo, hi)
        out_hi = np.clip(c + q_hi, lo, hi)
        return np.where(none, lo, out_lo), np.where(none, hi, out_hi)
    if kind in ("variance", "std"):
        v_lo, v_hi = _variance_range(components, params, kind)
        if kind == "std":
            return np.sqrt(v_lo), np.sqrt(v_hi)
        return v_lo, v_hi
    if kind == "proportions":
        c_lo, c_hi = _pair(components, "count", kind)
        c_lo = np.maximum(c_lo, 0.0)
        c_hi = np.maximum(c_hi, c_lo)
        tot_lo = c_lo.sum(axis=-1, keepdims=True)
        tot_hi = c_hi.sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            p_lo = c_lo / (c_lo + (tot_hi - c_hi))
            p_hi = c_hi / (c_hi + (tot_lo - c_lo))
        return (np.clip(np.nan_to_num(p_lo, nan=0.0), 0.0, 1.0),
                np.clip(np.nan_to_num(p_hi, nan=1.0), 0.0, 1.0))
    if kind == "correlation":
        cv_lo, cv_hi = _pair(components, "cov", kind)
        vx_lo, vx_hi = (np.maximum(v, 0.0) for v in _pair(components, "var_x", kind))
        vy_lo, vy_hi = (np.maximum(v, 0.0) for v in _pair(components, "var_y", kind))
        d_lo = np.sqrt(vx_lo * vy_lo)
        d_hi = np.sqrt(vx_hi * vy_hi)
        with np.errstate(invalid="ignore", divide="ignore"):
            r_lo = np.where(cv_lo >= 0, cv_lo / d_hi, cv_lo / d_lo)
            r_hi = np.where(cv_hi >= 0, cv_hi / d_lo, cv_hi / d_hi)
        return (np.clip(np.nan_to_num(r_lo, nan=-1.0, neginf=-1.0, posinf=1.0), -1.0, 1.0),
                np.clip(np.nan_to_num(r_hi, nan=1.0, neginf=-1.0, posinf=1.0), -1.0, 1.0))
    if kind == "sqrt":
        v_lo, v_hi = _pair(components, "value", kind)
        return np.sqrt(np.maximum(v_lo, 0.0)), np.sqrt(np.maximum(v_hi, 0.0))
    if kind == "affine":
        v_lo, v_hi = _pair(components, "value", kind)
        off = float(params.get("offset", 0.0))
        sc = float(params.get("scale", 1.0))
        a, b = off + sc * v_lo, off + sc * v_hi
        return np.minimum(a, b), np.maximum(a, b)
    raise ParameterError(f"unknown composed statistic {kind!r}; one of {', '.join(COMPOSED_KINDS)}")


def _variance_range(components: Mapping[str, Any], params: Mapping[str, Any],
                    kind: str) -> tuple[np.ndarray, np.ndarray]:
    n_lo, n_hi, none = _count_range(*_pair(components, "count", kind), least=2)
    s_lo, s_hi = _pair(components, "sum", kind)
    q_lo, q_hi = _pair(components, "sum_sq", kind)
    lo, hi = _param(params, "lower", kind), _param(params, "upper", kind)
    w2 = (hi - lo) ** 2 / 4.0
    # facts every data set in [lo, hi] satisfies (centred values in [-w/2, w/2]):
    # |S| ≤ N·w/2 and 0 ≤ SS ≤ N·w²/4
    s_cap = n_hi * math.sqrt(w2)
    s_lo = np.maximum(s_lo, -s_cap)
    s_hi = np.minimum(s_hi, s_cap)
    q_lo = np.maximum(q_lo, 0.0)
    q_hi = np.minimum(q_hi, n_hi * w2)
    sq_min = np.where((s_lo <= 0) & (s_hi >= 0), 0.0, np.minimum(s_lo**2, s_hi**2))
    sq_max = np.maximum(s_lo**2, s_hi**2)
    v_hi = _variance_extreme(q_hi, sq_min, n_lo, n_hi, upper=True)
    v_lo = _variance_extreme(q_lo, sq_max, n_lo, n_hi, upper=False)
    cap = w2 * n_lo / (n_lo - 1.0)  # Popoviciu with ddof = 1, largest at the smallest N
    full = w2 * 2.0
    bad = none | (s_lo > s_hi) | (q_lo > q_hi)  # no data set is consistent with the box
    v_lo = np.where(bad, 0.0, np.clip(v_lo, 0.0, cap))
    v_hi = np.where(bad, full, np.clip(v_hi, 0.0, cap))
    return v_lo, np.maximum(v_hi, v_lo)


def composed_interval(
    kind: str,
    mechanisms: Mapping[str, Any],
    released: Mapping[str, Any],
    level: float = 0.95,
    *,
    method: str = "sidak",
    slacks: Mapping[str, float] | None = None,
    **params: Any,
) -> tuple[Any, Any]:
    """Interval for a composed statistic from its measurements: each component's exact
    interval (:func:`confidence_interval`) at :func:`component_level`, then
    :func:`interval_from_components`. A private-size mean whose sum is drawn from plain
    Laplace noise (on the real line) uses Fieller's pivot instead (:func:`ratio_hull`;
    ``method`` does not apply).
    ``mechanisms`` and ``released`` are keyed by component name (``count``, ``sum``,
    ``sum_sq``, ...); counts are intervals of integers. For
    ``"proportions"`` the cells of ``released["count"]`` (last axis) are the components.
    """
    if kind not in COMPOSED_KINDS:
        raise ParameterError(
            f"unknown composed statistic {kind!r}; one of {', '.join(COMPOSED_KINDS)}")
    names = list(mechanisms)
    missing = [n for n in names if n not in released]
    if missing:
        raise ParameterError(f"no released values for component(s) {missing}")
    slacks = dict(slacks or {})
    if kind == "mean" and _pivot_ready(mechanisms.get("sum"), mechanisms.get("count")):
        return _mean_by_pivot(mechanisms, released, level, slacks, params)
    if kind in ("variance", "std") and _plain_draw(mechanisms.get("sum_sq")) and _pivot_ready(
            mechanisms.get("sum"), mechanisms.get("count")):
        lo, hi = _variance_by_pivot(mechanisms, released, level, slacks, params)
        return (np.sqrt(lo), np.sqrt(hi)) if kind == "std" else (lo, hi)
    k = len(names)
    if kind == "proportions":
        k = int(np.shape(released["count"])[-1])
    comp_level = component_level(level, k, method)
    boxes = {}
    for name in names:
        boxes[name] = confidence_interval(
            mechanisms[name], np.asarray(released[name], dtype=float), comp_level,
            slack=slacks.get(name, 0.0), integer=name == "count",
        )
    return interval_from_components(kind, boxes, **params)


def _plain_draw(mechanism: Any) -> bool:
    """The exact draw behind the release is plain Laplace on the real line: the plain and the
    clamped mechanism (whose :func:`output_cell` holds the draw before clamping), and the
    conditioned one on a set without finite ends."""
    if mechanism is None or not float(getattr(mechanism, "scale", 0.0)) > 0:
        return False
    if mechanism.name in ("laplace", "truncated"):
        return True
    return mechanism.name == "bounded" and not mechanism.domain.finite_endpoints


def _pivot_ready(numerator: Any, denominator: Any) -> bool:
    """Fieller's pivot applies (docs I.7): a plain numerator draw, and a denominator that is
    plain, or clamped or conditioned on one interval (its noise is then stochastically
    smaller in size than plain noise, which keeps the test's level)."""
    if not _plain_draw(numerator) or denominator is None:
        return False
    if not float(getattr(denominator, "scale", 0.0)) > 0:
        return False
    return denominator.name in ("laplace", "truncated", "bounded") and len(
        denominator.domain.components) == 1


def _cell(mechanism: Any, released: Any, slack: float) -> tuple[np.ndarray, np.ndarray]:
    s, t = output_cell(mechanism, released, slack)
    return s, t


def pivot_cell(mechanism: Any, released: Any,
               slack: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Public ``(s, t)`` holding the denominator's draw as the pivot uses it: the exact draw
    ``X`` for the plain mechanism (:func:`output_cell`); for the clamped mechanism the clamped
    draw ``clamp_D(X)`` and for the conditioned one ``X ∈ D`` — both in ``D`` — so the cell
    is :func:`output_cell` intersected with ``D`` (clamping is monotone: an end cell that
    reaches to infinity holds ``X``, hence ``clamp_D(X)`` at that end)."""
    s, t = _cell(mechanism, released, slack)
    if mechanism.name == "laplace":
        return s, t
    lo, hi = mechanism.domain.lower, mechanism.domain.upper
    return np.clip(s, lo, hi), np.clip(t, lo, hi)


def _mean_by_pivot(mechanisms: Mapping[str, Any], released: Mapping[str, Any], level: float,
                   slacks: Mapping[str, float], params: Mapping[str, Any]) -> tuple[Any, Any]:
    """The private-size mean ``c + S/N`` by Fieller's pivot (docs I.7): the hull of the
    centred means ``θ ∈ [l − c, u − c]`` that the test at level ``1 − α`` accepts, shifted by
    ``c``; ``[l, u]`` when it accepts none (the truth was rejected: a miss, already counted)."""
    alpha = _alpha(level)
    c = _param(params, "center", "mean")
    lo, hi = _param(params, "lower", "mean"), _param(params, "upper", "mean")
    count, total = mechanisms["count"], mechanisms["sum"]
    y_n = np.asarray(released["count"], dtype=float)
    y_s = np.asarray(released["sum"], dtype=float)
    scalar = np.ndim(y_n) == 0 and np.ndim(y_s) == 0
    den = pivot_cell(count, np.atleast_1d(y_n), slacks.get("count", 0.0))
    num = _cell(total, np.atleast_1d(y_s), slacks.get("sum", 0.0))
    t_lo, t_hi, empty = ratio_hull(num, den, float(total.scale), float(count.scale), alpha,
                                   lo - c, hi - c)
    pad = 4.0 * np.spacing(abs(c) + np.maximum(np.abs(t_lo), np.abs(t_hi)))
    out_lo = np.where(empty, lo, np.clip(c + t_lo - pad, lo, hi))
    out_hi = np.where(empty, hi, np.clip(c + t_hi + pad, lo, hi))
    return _out(out_lo, out_hi, scalar)


def _variance_by_pivot(mechanisms: Mapping[str, Any], released: Mapping[str, Any],
                       level: float, slacks: Mapping[str, float], params: Mapping[str, Any]
                       ) -> tuple[Any, Any]:
    """The private-size variance (ddof=1) by the pivot of :func:`~dpframe.mechanisms.pivots.
    variance_hull` (docs I.7), ``α`` shared as :data:`VARIANCE_ALPHA_SHARES` (union bound):
    the centred mean's Fieller interval at ``α_mean``, then the variances ``v ∈ [0, w²/2]``
    (``N ≥ 2``) the test accepts with some mean of that interval, clipped to
    ``[0, w²/4 · N/(N − 1)] ⊂ [0, w²/2]``. ``[0, w²/2]`` when a test accepts nothing."""
    alpha = _alpha(level)
    lo, hi = _param(params, "lower", "variance"), _param(params, "upper", "variance")
    c = lo + (hi - lo) / 2
    full = (hi - lo) ** 2 / 2.0
    count, total, squares = mechanisms["count"], mechanisms["sum"], mechanisms["sum_sq"]
    ys = [np.asarray(released[n], dtype=float) for n in ("count", "sum", "sum_sq")]
    scalar = all(np.ndim(y) == 0 for y in ys)
    den = pivot_cell(count, np.atleast_1d(ys[0]), slacks.get("count", 0.0))
    num = _cell(total, np.atleast_1d(ys[1]), slacks.get("sum", 0.0))
    sq = _cell(squares, np.atleast_1d(ys[2]), slacks.get("sum_sq", 0.0))
    a_test, a_mean = (alpha * share for share in VARIANCE_ALPHA_SHARES)
    m_lo, m_hi, no_mean = ratio_hull(num, den, float(total.scale), float(count.scale),
                                     a_mean, lo - c, hi - c)
    v_lo, v_hi, none = variance_hull(sq, num, den, (float(squares.scale), float(total.scale),
                                                    float(count.scale)),
                                     (m_lo, m_hi), a_test, full)
    bad = none | no_mean
    out_lo = np.where(bad, 0.0, np.clip(v_lo * (1 - 1e-12), 0.0, full))
    out_hi = np.where(bad, full, np.clip(v_hi * (1 + 1e-12) + 1e-300, 0.0, full))
    return _out(out_lo, out_hi, scalar)


def correlation_by_pivot(mechanisms: Mapping[str, Any], released: Mapping[str, float],
                         level: float) -> tuple[float, float] | None:
    """Interval of a correlation ``C/√(V_x V_y)`` (public size; ``mechanisms`` and ``released``
    keyed ``cov``, ``var_x``, ``var_y``) by the tangent-plane pivot of
    :func:`~dpframe.mechanisms.pivots.correlation_hull` (docs I.7, Theorem 5), ``α`` shared as
    :data:`CORRELATION_ALPHA_SHARES`.

    ``None`` when the variances are not plain draws (a fact of the plan, known before any
    release: the caller uses its box). The covariance's box (its exact interval at
    ``1 − α_C``, with the same variance boxes, I.3) replaces the pivot when a variance box
    reaches 0 or spans more than a factor 4, or the covariance was not released with plain
    noise at its uncapped scale (no noise, a conditioned draw, a sensitivity capped at a
    narrow domain's width): these events depend on the released variances only, and given
    those the covariance's interval holds with probability ``1 − α_C``, so the union bound
    keeps the level.
    """
    alpha = _alpha(level)
    var_x, var_y, cov = (mechanisms.get(n) for n in ("var_x", "var_y", "cov"))
    if var_x is None or var_y is None or not (_plain_draw(var_x) and _plain_draw(var_y)):
        return None
    a_test, a_cov, a_x, a_y = (alpha * share for share in CORRELATION_ALPHA_SHARES)
    boxes = []
    for mech, name, a in ((var_x, "var_x", a_x), (var_y, "var_y", a_y)):
        lo, hi = confidence_interval(mech, float(released[name]), 1.0 - a)
        boxes.append((max(float(lo), 0.0), float(hi)))
    out = None
    if cov is not None and _plain_draw(cov) and cov.sensitivity < (
            cov.domain.upper - cov.domain.lower):
        cells = (_cell(var_x, float(released["var_x"]), 0.0),
                 _cell(var_y, float(released["var_y"]), 0.0))
        s_c, t_c = _cell(cov, float(released["cov"]), 0.0)
        out = correlation_hull((float(s_c.reshape(-1)[0]), float(t_c.reshape(-1)[0])), cells,
                               (boxes[0], boxes[1]),
                               (float(cov.scale), float(var_x.scale), float(var_y.scale)),
                               float(cov.domain.upper), a_test)
    if out is None:
        c_box: tuple[float, float] = (float(released["cov"]), float(released["cov"]))
        if cov is not None:
            c_lo, c_hi = confidence_interval(cov, float(released["cov"]), 1.0 - a_cov)
            c_box = (max(float(c_lo), cov.domain.lower), min(float(c_hi), cov.domain.upper))
        r_lo, r_hi = interval_from_components("correlation", {
            "cov": c_box, "var_x": boxes[0], "var_y": boxes[1]})
        out = (float(r_lo), float(r_hi))
    return out
