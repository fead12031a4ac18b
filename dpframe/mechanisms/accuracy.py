"""Accuracy before spending, and a data-independent choice of mechanism. Public facts only.

* :func:`half_width` — the smallest ``h`` with ``P(|release − x| ≤ h) ≥ 1 − α`` for *every* true
  value ``x`` in the domain (worst case over ``x``), from the mechanism's exact output
  distribution plus the snapping radius.
* :func:`epsilon_for_half_width` — the inverse: the smallest ε whose half-width meets a target
  (bisection; the half-width is non-increasing in ε, see ``docs/privacy.md``).
* :func:`split_epsilon` — one total ε over several measurements with target half-widths: the
  split that minimises the worst ratio achieved/target (it equalises the ratios).
* :func:`worst_case_mse` and :func:`choose_mechanism` — certified brackets of
  ``sup_x MSE(x)`` from the closed forms, and the mechanism with the smaller one.

Derivations: ``docs/privacy.md``, section "Confidence intervals, accuracy and the mechanism
choice".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.domains import resolve_domain
from dpframe.mechanisms.intervals import (
    _conditioned_above,
    _conditioned_below,
    _snap_radius,
    _x_range,
)
from dpframe.mechanisms.laplace import make_mechanism

__all__ = [
    "DELTA_MIN_GAIN",
    "ROUNDED",
    "AccuracyTarget",
    "EpsilonSplit",
    "MechanismChoice",
    "choose_mechanism",
    "epsilon_for_half_width",
    "half_width",
    "mean_half_width",
    "miss_probability",
    "raw_target",
    "rounded_half_width",
    "split_epsilon",
    "worst_case_mse",
]

#: Search range of :func:`epsilon_for_half_width`.
EPS_MIN = 1e-6
EPS_MAX = 1e6
#: Brackets of worst-case MSEs are refined to this relative width (or the cell budget).
MSE_RTOL = 1e-9
_MAX_CELLS = 1 << 18
_MAX_ROUNDS = 60


def _alpha(alpha: float) -> float:
    a = float(alpha)
    if not (0.0 < a < 1.0) or math.isnan(a):
        raise ParameterError(f"alpha must lie strictly between 0 and 1 (e.g. 0.05), got {alpha!r}")
    return a


def _single_component(mech: Any, what: str) -> tuple[float, float]:
    comps = mech.domain.components
    if len(comps) != 1:
        raise ParameterError(
            f"{what} supports intervals, half-lines and the real line, not unions of intervals"
        )
    return comps[0]


# -- half-widths ----------------------------------------------------------------------------
def _bounded_interval_miss(x: np.ndarray, h: float, b: float, lo: float, hi: float) -> tuple:
    """``(N_below, N_above, C)`` for Laplace(x, b) conditioned on ``[lo, hi]``:
    ``P(X < x − h)·C``, ``P(X > x + h)·C`` and the normaliser ``C(x)``."""
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore", under="ignore"):
        eh = math.exp(-h / b)
        d_lo = x - lo
        d_hi = hi - x
        n_below = np.where(d_lo > h, 0.5 * (eh - np.exp(-d_lo / b)), 0.0)
        n_above = np.where(d_hi > h, 0.5 * (eh - np.exp(-d_hi / b)), 0.0)
        c = 1.0 - 0.5 * np.exp(-d_lo / b) - 0.5 * np.exp(-d_hi / b)
    return n_below, n_above, c


def miss_probability(mechanism: Any, x: Any, h: float) -> np.ndarray:
    """``P_x(|Z − x| > h)`` for the *continuous* output ``Z`` (before snapping): the
    conditioned draw (``"bounded"``), the clamped draw (``"truncated"``) or the plain draw.
    Vectorised in ``x``; single-component domains."""
    lo, hi = _single_component(mechanism, "miss_probability")
    b = float(mechanism.scale)
    x = np.asarray(x, dtype=float)
    h = float(h)
    eh = math.exp(-h / b)
    if mechanism.name == "bounded":
        if math.isfinite(lo) and math.isfinite(hi):
            n_below, n_above, c = _bounded_interval_miss(x, h, b, lo, hi)
            return (n_below + n_above) / c

        comps = mechanism.domain.components
        return (_conditioned_below(comps, b, x, x - h)
                + _conditioned_above(comps, b, x, x + h))
    if mechanism.name == "truncated":
        return 0.5 * eh * ((x + h < hi).astype(float) + (x - h > lo).astype(float))
    return np.full(x.shape, eh)


def _sup_bounded_miss_below(h: float, b: float, lo: float, hi: float, alpha: float) -> bool:
    """Certified answer to ``sup_x P_x(|X − x| > h) ≤ α`` for the conditioned mechanism on
    ``[lo, hi]`` (False when it cannot be certified within the budget: conservative).

    On a cell ``[x1, x2]``: ``N_below`` is non-decreasing and ``N_above`` non-increasing in ``x``
    and ``C`` is concave, so ``miss ≤ (N_below(x2) + N_above(x1)) / min(C(x1), C(x2))``.
    The law is symmetric about the centre, so half the interval suffices.
    """
    mid = lo + (hi - lo) / 2
    edges = np.linspace(lo, mid, 257)
    x1, x2 = edges[:-1], edges[1:]
    for _ in range(_MAX_ROUNDS):
        nb1, na1, c1 = _bounded_interval_miss(x1, h, b, lo, hi)
        nb2, na2, c2 = _bounded_interval_miss(x2, h, b, lo, hi)
        if ((nb1 + na1) / c1 > alpha).any() or ((nb2 + na2) / c2 > alpha).any():
            return False
        bad = (nb2 + na1) / np.minimum(c1, c2) > alpha
        if not bad.any():
            return True
        x1, x2 = x1[bad], x2[bad]
        if x1.size * 8 > _MAX_CELLS or not (x2 - x1 > 16 * np.spacing(np.abs(x2) + 1)).all():
            return False
        # split each doubtful cell in 8
        cuts = x1[:, None] + (x2 - x1)[:, None] * np.linspace(0.0, 1.0, 9)
        x1, x2 = cuts[:, :-1].ravel(), cuts[:, 1:].ravel()
    return False


def _continuous_half_width(mech: Any, alpha: float) -> float:
    """Smallest ``h`` with ``sup_x P_x(|Z − x| > h) ≤ α`` for the continuous output ``Z``."""
    lo, hi = _single_component(mech, "half_width")
    b = float(mech.scale)
    plain = b * math.log(1.0 / alpha)
    bounded = math.isfinite(lo) and math.isfinite(hi)
    if mech.name == "laplace" or not bounded:
        # plain noise; half-lines: the conditioned law misses by e^{-h/b} exactly at x = l and
        # less elsewhere, the clamped law misses by e^{-h/b} far from the end (docs)
        return plain
    w = hi - lo
    if mech.name == "truncated":
        if plain < w / 2:
            return plain
        h2 = max(w / 2, b * math.log(1.0 / (2 * alpha)))
        return h2 if h2 < w else w
    # bounded on an interval: bisection on h with the certified test; h = w never misses
    h_lo, h_hi = 0.0, w
    for _ in range(200):
        if h_hi - h_lo <= 1e-12 * h_hi:
            break
        h = 0.5 * (h_lo + h_hi)
        if _sup_bounded_miss_below(h, b, lo, hi, alpha):
            h_hi = h
        else:
            h_lo = h
    return h_hi


def half_width(mechanism: Any, alpha: float = 0.05) -> float:
    """Smallest ``h`` such that ``P(|release − x| ≤ h) ≥ 1 − α`` for every true value ``x`` in
    the mechanism's domain, the release included snapping (worst case over ``x``).

    Exact for the continuous output (closed form for plain and clamped noise and for
    half-lines; a certified search over ``x`` and bisection on ``h`` for the conditioned
    mechanism on an interval), plus the snapping radius (``≤ 3Λ/4`` and the proven
    pre-rounding error), which only widens it. Nothing reads data; nothing is spent.
    """
    a = _alpha(alpha)
    r, dt = _snap_radius(mechanism)
    h = _continuous_half_width(mechanism, a) + r + dt
    dom = mechanism.domain
    if mechanism.name != "laplace" and dom.is_bounded:
        # releases and true values both lie in [l, u]: no error exceeds the width
        h = min(h, dom.upper - dom.lower)
    return h


def _mechanism_at(kind: str, epsilon: float, sensitivity: float, lower: float | None,
                  upper: float | None, delta: float, options: Mapping[str, Any]) -> Any:

    return make_mechanism(kind, epsilon=epsilon, sensitivity=sensitivity, lower=lower,
                          upper=upper, delta=delta, **options)


def epsilon_for_half_width(
    kind: str,
    target: float,
    *,
    sensitivity: float,
    lower: float | None = None,
    upper: float | None = None,
    delta: float = 0.0,
    alpha: float = 0.05,
    rtol: float = 1e-7,
    **options: Any,
) -> float:
    """Smallest ε (to relative precision ``rtol``, rounded up) at which ``kind`` with these
    public parameters has ``half_width(·, alpha) ≤ target``.

    Returns ``EPS_MIN`` when even that ε meets the target (a clamped or bounded release
    cannot be farther from the truth than the domain is wide); raises ``ParameterError`` when
    ``EPS_MAX`` does not. The answer always satisfies the target (it is the upper end of the
    bisection bracket, checked with the real mechanism).
    """
    a = _alpha(alpha)
    tgt = float(target)
    if not (tgt > 0) or math.isinf(tgt):
        raise ParameterError(f"target must be a finite half-width > 0, got {target!r}")

    def meets(eps: float) -> bool:
        try:
            m = _mechanism_at(kind, eps, sensitivity, lower, upper, delta, options)
        except ParameterError:
            return False
        return half_width(m, a) <= tgt

    # bracket around the plain-Laplace answer Δ·ln(1/α)/target
    guess = float(sensitivity) * math.log(1.0 / a) / tgt
    hi = min(max(guess, EPS_MIN), EPS_MAX)
    while not meets(hi):
        if hi >= EPS_MAX:
            raise ParameterError(
                f"no ε ≤ {EPS_MAX:g} reaches half-width {tgt:g} at α={a:g}; the snapping grid or"
                " the sensitivity is too coarse for this target"
            )
        hi = min(hi * 4.0, EPS_MAX)
    lo = hi / 4.0
    while lo > EPS_MIN and meets(lo):
        hi, lo = lo, max(lo / 4.0, EPS_MIN)
    if lo <= EPS_MIN and meets(EPS_MIN):
        return EPS_MIN
    while hi - lo > rtol * hi:
        mid = math.sqrt(lo * hi)
        if mid <= lo or mid >= hi:
            break
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def mean_half_width(
    count_mechanism: Any,
    sum_mechanism: Any,
    n: float,
    alpha: float = 0.05,
    *,
    lower: float,
    upper: float,
    center: float | None = None,
    count_slack: float = 0.0,
) -> float:
    """Half-width, holding with probability ``≥ 1 − α``, of the private-size mean
    ``clip(c + Ŝ/max(N̂, 1), l, u)`` for any group of ``N ≥ n`` rows (``Ŝ`` the released centred
    sum, ``N̂`` the released count, ``c`` the centre, default the midpoint):

        min(u − l, (h_S + m·h_N) / max(n − h_N, 1)),     m = max(u − c, c − l),

    with ``h_N``, ``h_S`` the :func:`half_width` of the two releases at ``α' = 1 − √(1 − α)``
    each (independent noises). ``count_slack``: the count was moved by at most this much
    (e.g. ½ when rounded) before the division. Public facts only; see ``docs/privacy.md``.
    """
    a = _alpha(alpha)
    lo, hi = float(lower), float(upper)
    if not lo < hi:
        raise ParameterError(f"lower={lo:g} must be below upper={hi:g}")
    c = lo + (hi - lo) / 2 if center is None else float(center)
    a_each = -math.expm1(0.5 * math.log1p(-a))  # 1 − √(1 − α)
    h_n = half_width(count_mechanism, a_each) + float(count_slack)
    h_s = half_width(sum_mechanism, a_each)
    m = max(hi - c, c - lo)
    return min(hi - lo, (h_s + m * h_n) / max(float(n) - h_n, 1.0))


#: statistics released as integers (the noisy value rounded, then kept in its domain)
ROUNDED = ("count", "count_units")


def rounded_half_width(h: float) -> float:
    """The half-width of a count released as ``rint`` of a noisy count ``x`` whose error is
    at most ``h``: ``n`` is an integer, so ``rint(x) − n = rint(x − n)``, an integer of
    magnitude at most ``|x − n| + ½``; hence ``|rint(x) − n| ≤ ⌊h + ½⌋`` whenever
    ``|x − n| ≤ h`` (clamping to the domain, which holds ``n``, only moves it closer)."""
    return float(math.floor(h + 0.5)) if math.isfinite(h) else h


def raw_target(kind: str, target: float) -> float:
    """The noisy value's half-width that meets ``target`` for the released value: for a count
    (:func:`rounded_half_width`) ``⌊h + ½⌋ ≤ T ⟺ h < ⌊T⌋ + ½``."""
    if kind not in ROUNDED or not math.isfinite(target):
        return target
    return math.nextafter(math.floor(target) + 0.5, 0.0)


@dataclass(frozen=True)
class AccuracyTarget:
    """One measurement of a release plan: mechanism name, public parameters and the wanted
    half-width at level ``1 − alpha``."""

    kind: str
    sensitivity: float
    target: float
    lower: float | None = None
    upper: float | None = None
    delta: float = 0.0
    alpha: float = 0.05
    options: Mapping[str, Any] = field(default_factory=dict)

    def epsilon_for(self, half: float) -> float:
        return epsilon_for_half_width(
            self.kind, half, sensitivity=self.sensitivity, lower=self.lower, upper=self.upper,
            delta=self.delta, alpha=self.alpha, rtol=1e-6, **dict(self.options),
        )

    def half_width_at(self, epsilon: float) -> float:
        m = _mechanism_at(self.kind, epsilon, self.sensitivity, self.lower, self.upper,
                          self.delta, self.options)
        return half_width(m, self.alpha)


@dataclass(frozen=True)
class EpsilonSplit:
    """A suggested split: ``epsilons[i]`` for request ``i`` (they sum to the total),
    ``half_widths[i]`` what that ε achieves, ``ratio`` the common achieved/target ratio the
    split equalises (≤ 1: every target met)."""

    epsilons: tuple[float, ...]
    half_widths: tuple[float, ...]
    ratios: tuple[float, ...]
    ratio: float
    rule: str


def split_epsilon(requests: Sequence[AccuracyTarget], total_epsilon: float,
                  *, rtol: float = 1e-4) -> EpsilonSplit:
    """Split ``total_epsilon`` over measurements so that the worst ratio achieved/target
    half-width is as small as possible.

    Each ``ε_i(h)`` (:func:`epsilon_for_half_width`) is non-increasing in ``h``, so
    ``Σ ε_i(ρ·target_i)`` is non-increasing in ``ρ``; bisection finds the smallest common ratio
    ``ρ`` the total affords. Any other split gives some measurement less ε than
    ``ε_i(ρ·target_i)``, hence a ratio above ``ρ``: the equalising split is the minimax one.
    Unspent budget (from rounding) is handed out in proportion to the ε's.
    """
    total = float(total_epsilon)
    if not (total > 0) or math.isinf(total):
        raise ParameterError(f"total_epsilon must be a finite number > 0, got {total_epsilon!r}")
    reqs = list(requests)
    if not reqs:
        raise ParameterError("split_epsilon needs at least one AccuracyTarget")

    def need(rho: float) -> list[float]:
        return [r.epsilon_for(rho * r.target) for r in reqs]

    r_hi = 1.0
    while sum(need(r_hi)) > total:
        r_hi *= 2.0
        if r_hi > 1e12:
            raise ParameterError("the total ε is too small for any useful split")
    r_lo = r_hi / 2.0
    while sum(need(r_lo)) <= total and r_lo > 1e-12:
        r_hi, r_lo = r_lo, r_lo / 2.0
    while r_hi - r_lo > rtol * r_hi:
        mid = math.sqrt(r_lo * r_hi)
        if sum(need(mid)) <= total:
            r_hi = mid
        else:
            r_lo = mid
    eps = need(r_hi)
    scale = total / sum(eps)
    eps = [e * scale for e in eps]
    hws = [r.half_width_at(e) for r, e in zip(reqs, eps, strict=True)]
    ratios = [h / r.target for h, r in zip(hws, reqs, strict=True)]
    return EpsilonSplit(tuple(eps), tuple(hws), tuple(ratios), max(ratios),
                        "minimax: equalise achieved/target half-width, then share the rest"
                        " in proportion")


# -- worst-case MSE and the mechanism choice ------------------------------------------------
def _mse_in_units(name: str, a1: np.ndarray, a2: np.ndarray) -> np.ndarray:
    """``mse / b²`` with ``a1, a2`` the distances (in units of b) from the true value to the
    lower and upper end (``inf`` for an infinite end), via regularised incomplete gamma
    functions ``P_k(a) = P(Gamma(k) ≤ a)``:

    * one side of the Laplace law up to distance ``a``: mass ``½P_1(a)``, second moment
      ``P_3(a)`` (``∫_0^a t² e^{-t}/2 dt``);
    * conditioned: ``mse/b² = 2(P_3(a1) + P_3(a2)) / (P_1(a1) + P_1(a2))``;
    * clamped: the mass beyond an end sits at distance ``a`` and adds ``a²·½e^{-a}``, so each
      side contributes ``P_3(a) + ½a²e^{-a} = 1 − e^{-a}(1 + a) = P_2(a)``: ``mse/b² = P_2(a1)
      + P_2(a2)``.

    The same closed forms as :meth:`mse` (Liu Prop. 2), written so that every term is
    increasing in ``a1`` and in ``a2`` — which gives the cell bounds of :func:`_cell_upper`.
    """
    from scipy.special import gammainc

    if name == "bounded":
        return 2.0 * (gammainc(3, a1) + gammainc(3, a2)) / (gammainc(1, a1) + gammainc(1, a2))
    return gammainc(2, a1) + gammainc(2, a2)


def _cell_upper(name: str, a_lo: np.ndarray, a_hi: np.ndarray, omega: float) -> np.ndarray:
    """Upper bound of ``mse/b²`` for ``a1 ∈ [a_lo, a_hi]``, ``a2 = ω − a1`` (ω = width/b,
    ``inf`` for a half-line): numerators at their largest ``a``, denominators at their
    smallest (every ``P_k`` is increasing)."""
    from scipy.special import gammainc

    with np.errstate(invalid="ignore"):
        a2_hi = omega - a_lo
        a2_lo = omega - a_hi
    if name == "bounded":
        num = 2.0 * (gammainc(3, a_hi) + gammainc(3, a2_hi))
        return num / (gammainc(1, a_lo) + gammainc(1, a2_lo))
    return gammainc(2, a_hi) + gammainc(2, a2_hi)


class WorstCaseMSE(NamedTuple):
    lower: float
    upper: float
    argmax: float  # a true value where the lower bound is attained


def worst_case_mse(mechanism: Any, rtol: float = MSE_RTOL) -> WorstCaseMSE:
    """Certified bracket ``lower ≤ sup_x mse(x) ≤ upper`` over the true values ``x`` the
    mechanism accepts (within ``±magnitude`` on unbounded domains), from the closed-form MSE
    (snapping excluded, as in ``mechanism.mse``).

    Branch and bound over cells of true values: a cell's upper bound takes every increasing
    term of :func:`_mse_in_units` at its worst end, point values give the lower bound; cells
    whose upper bound is within ``rtol`` of the best point are dropped. Intervals, half-lines
    and the real line.
    """
    lo, hi = _single_component(mechanism, "worst_case_mse")
    b = float(mechanism.scale)
    if mechanism.name == "laplace" or not (math.isfinite(lo) or math.isfinite(hi)):
        v = 2.0 * b * b  # no finite end: Laplace at scale b wherever the true value is
        return WorstCaseMSE(v, v, 0.0)
    name = mechanism.name
    x_lo, x_hi = _x_range(mechanism)
    if math.isfinite(lo):
        omega = (hi - lo) / b if math.isfinite(hi) else math.inf
        top = (x_hi - lo) / b
        if math.isfinite(hi):
            top = omega / 2  # the law is symmetric about the centre

        def to_x(a: float) -> float:
            return lo + a * b
    else:  # (-inf, u]: mirror image of a half-line
        omega = math.inf
        top = (hi - x_lo) / b

        def to_x(a: float) -> float:
            return hi - a * b

    edges = np.linspace(0.0, top, 1025)
    vals = _mse_in_units(name, edges, omega - edges)
    best = float(vals.max())
    arg = float(edges[int(vals.argmax())])
    a1, a2 = edges[:-1], edges[1:]
    upper = best * (1 + rtol)
    for _ in range(_MAX_ROUNDS):
        ub = _cell_upper(name, a1, a2, omega)
        keep = ub > best * (1 + rtol)
        if not keep.any():
            break
        a1, a2 = a1[keep], a2[keep]
        if a1.size > _MAX_CELLS or not (a2 - a1 > 4 * np.spacing(a2 + 1)).all():
            upper = max(upper, float(ub[keep].max()))
            break
        am = a1 + (a2 - a1) / 2
        vm = _mse_in_units(name, am, omega - am)
        if vm.max() > best:
            best = float(vm.max())
            arg = float(am[int(vm.argmax())])
        a1, a2 = np.concatenate([a1, am]), np.concatenate([am, a2])
    else:
        upper = max(upper, float(_cell_upper(name, a1, a2, omega).max()))
    upper = max(upper, best * (1 + rtol))
    return WorstCaseMSE(best * b * b, upper * b * b, to_x(arg))


class MechanismChoice(NamedTuple):
    """The choice of :func:`choose_mechanism`: ``name``, a ``reason`` for the log, the
    certified worst-case MSE bracket of every candidate (``"bounded"`` at the δ asked for, and
    ``"bounded at δ=0"`` when that δ is positive), and ``delta``, the δ the chosen mechanism
    uses (and its release is charged): positive only for ``"bounded"`` when δ buys at least
    :data:`DELTA_MIN_GAIN` of worst-case RMSE."""

    name: str
    reason: str
    worst_case_mse: dict[str, WorstCaseMSE]
    delta: float = 0.0


#: Worst-case MSEs closer than this (relative) are a tie: the snapping overhead (≤ 1e-6 ε of
#: scale) and the snapping grid move errors by about that much, which the closed forms exclude.
TIE_RTOL = 1e-5

#: ``"auto"`` spends δ only when the bounded mechanism at δ has a certified worst-case RMSE at
#: least this much (relative) below the best pure ε-DP candidate's (docs/privacy.md, I.5): δ
#: enters the bounded scale only as ``ε − ln(1 − δ)``, a gain of about δ/ε, so at the usual
#: δ ≪ 1/n it buys nothing visible, while it is the only currency of key selection.
DELTA_MIN_GAIN = 0.01

_PURE_BOUNDED = "bounded at δ=0"


def choose_mechanism(
    epsilon: float,
    sensitivity: float,
    lower: float | None = None,
    upper: float | None = None,
    delta: float = 0.0,
    **options: Any,
) -> MechanismChoice:
    """Data-independent choice between ``"bounded"`` and ``"truncated"`` (and ``"laplace"``
    where the domain is unbounded), from certified brackets of the closed-form worst-case MSEs
    (:func:`worst_case_mse`), in two steps:

    1. among the pure ε-DP candidates (the truncated and plain mechanisms, and the bounded one
       at δ = 0), the one whose worst-case MSE is smaller (ties: :data:`TIE_RTOL`);
    2. with ``delta > 0``, the bounded mechanism at ``delta`` replaces it only if its worst-case
       RMSE is certainly at least :data:`DELTA_MIN_GAIN` below the step-1 winner's (upper
       bracket against lower bracket); else no δ is used, and none is charged.
    """

    dom = resolve_domain(lower, upper, None)
    names = ["bounded", "truncated"] + ([] if dom.is_bounded else ["laplace"])
    brackets: dict[str, WorstCaseMSE] = {}
    refused: list[str] = []
    for name in names:
        try:
            m = _mechanism_at(name, epsilon, sensitivity, lower, upper, 0.0, options)
        except ParameterError as exc:  # e.g. the bounded mechanism when Δ exceeds the width
            refused.append(f"{name} not applicable ({exc})")
            continue
        brackets[name] = worst_case_mse(m)
    if not brackets:
        raise ParameterError("no mechanism accepts these parameters: " + "; ".join(refused))
    winner, verdict = _pure_winner(brackets, dom.kind == "real-line")
    used = 0.0
    if delta > 0 and "bounded" in brackets:
        spent = worst_case_mse(_mechanism_at("bounded", epsilon, sensitivity, lower, upper,
                                             delta, options))
        gain = 1.0 - math.sqrt(spent.upper / brackets[winner].lower)
        brackets = {(_PURE_BOUNDED if n == "bounded" else n): b for n, b in brackets.items()}
        brackets["bounded"] = spent
        if gain >= DELTA_MIN_GAIN:
            winner, used = "bounded", delta
            verdict = (f"bounded at δ={delta:g}: its worst-case RMSE is {gain:.3g} (relative) "
                       f"below the best pure ε-DP one's, ≥ {DELTA_MIN_GAIN:g}: δ spent")
        else:
            by = f"{gain:.3g} (relative) lower, < {DELTA_MIN_GAIN:g}" if gain > 0 else "no lower"
            verdict += (f"; δ not spent: at δ={delta:g} the bounded worst-case RMSE would be "
                        + by)
    parts = [f"{n if n != 'bounded' or delta == 0 else f'bounded at δ={delta:g}'}: worst-case"
             f" RMSE {math.sqrt(b.upper):.6g} (at true value {b.argmax:.6g})"
             for n, b in brackets.items()]
    reason = (f"auto mechanism on {dom} with ε={epsilon:g}, Δ={sensitivity:g}, δ={delta:g}: "
              + "; ".join(parts + refused) + f" → {verdict}")
    return MechanismChoice(winner, reason, brackets, used)


def _pure_winner(brackets: Mapping[str, WorstCaseMSE], real_line: bool) -> tuple[str, str]:
    """The candidate (all at δ = 0) with the smaller worst-case MSE, and why. On a tie
    (:data:`TIE_RTOL`): the clamped mechanism is pointwise no worse than the plain one
    (clamping towards a convex set that holds the true value never moves away from it); on
    the real line the laws coincide and the plain name is used."""
    best_upper = min(b.upper for b in brackets.values())
    tied = [n for n, b in brackets.items() if b.lower * (1.0 - TIE_RTOL) <= best_upper]
    order = (("laplace", "truncated", "bounded") if real_line
             else ("truncated", "laplace", "bounded"))
    winner = next(n for n in order if n in tied)
    if len(tied) > 1:
        return winner, f"tie within {TIE_RTOL:g} (relative) between {', '.join(tied)}: {winner}"
    return winner, f"{winner} has the smaller worst-case MSE"
