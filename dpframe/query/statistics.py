r"""Query specifications: sensitivity, output domain and formulation of each statistic.

A query (:class:`Count`, :class:`Sum`, :class:`Mean`, :class:`Variance`, :class:`Std`) turns
the public facts about a frame (its declared bounds, whether its size is public, a public row
cap) into a :class:`Plan`: a list of :class:`Measurement`\ s, each one noisy number per group
with its own sensitivity, output domain (the mechanism's feasible set) and share of ε, plus a
post-processing step that turns the noisy measurements into the answer. Nothing here reads
data; :mod:`dpframe.engine._aggregation` computes the exact aggregates the measurements need.

Notation: bounds ``[l, u]`` of the column, width ``w = u − l``; ``n`` the public row count of
the protected frame. Values outside ``[l, u]`` are clamped first (a per-row map, so neighbours
stay neighbours). Every value is then represented in fixed point, ``x = c + k·q`` with an
integer ``k ∈ [k_lo, k_hi]``, a public centre ``c`` and a power-of-two quantum ``q``
(:class:`dpframe.query._aggregates.FixedPoint`); ``k_lo, k_hi`` are chosen so that ``c + k·q`` stays
in ``[l, u]``, so the fixed-point data is itself a data set in ``[l, u]`` and every bound below
holds for it exactly.

Neighbours (docs/audit.md). The privacy unit is one row of the protected frame and neighbouring
data sets differ by *replacing* one row. On the protected frame itself ``n`` is public.

* **Public size** (the frame returned by :func:`dpframe.protect`): replacement neighbours of
  size ``n``.
* **Private size** (any frame derived from it: filter, dropna, head, sample, join, concat,
  even ``copy()``): replacing one row of the protected frame changes a row-wise derived frame
  by *adding*, *removing* or *replacing* one row (a row can pass the filter before and fail it
  after, or the reverse, or pass both times with a new value). Every private-size sensitivity
  below is therefore the maximum over all three changes. (Operations that copy one protected
  row into several derived rows — a self-concat, a one-to-many join — multiply a row's
  influence and are outside this model; see ``docs/frames.md``.)
* **Group-by with public keys**: a replaced row may leave one group and join another, so one
  replacement can change two groups, each by an add/remove. Each group's release therefore
  gets ε/2 (and δ/2); the whole group-by costs ε once (parallel composition over disjoint
  groups, McSherry 2009, applied to the two groups a replacement touches). Group sizes are
  never public, so group-by queries always use the private-size formulations.

Sensitivities and domains (each checked by brute force in ``tests/query/test_statistics.py``):

============ ===================================== ====================================
query        public size ``n``                     private size (and per group)
============ ===================================== ====================================
count        Δ = 1 on [0, n]                        Δ = 1 on [0, ∞) ([0, n] when rows of
                                                    the protected frame are counted, e.g.
                                                    its groups or with nulls="drop")
sum          Σ(x − l): Δ = w on [0, n·w], then +n·l Σx: Δ = max(w, |l|, |u|) on
                                                    [min(l,0)·∞, max(u,0)·∞]
mean         Σ(x − l)/n: Δ = w/n on [0, w], then +l noisy count (ε/2) and noisy
                                                    Σ(x − c), c = (l+u)/2 (ε/2, Δ = w),
                                                    mean = c + S/max(N,1) in [l, u]
variance     Δ = w²/n on [0, w²/4 · n/(n−1)]        noisy N, S = Σ(x−c), SS = Σ(x−c)²
(ddof=1)                                            (ε/3 each; Δ = 1, w, w²/4),
                                                    var = (SS − S²/N)/(N − 1) in
                                                    [0, w²/4 · N/(N−1)], N ≥ 2
std          sqrt of the released variance          sqrt of the released variance
============ ===================================== ====================================

Derivations are in each class's docstring. Where the exact aggregate is divided (mean,
variance) the correctly rounded float differs from the exact rational by at most half an ulp,
``2⁻⁵³·M`` for a statistic bounded by ``M``; two neighbours can therefore differ by
``Δ + 2⁻⁵²·M`` in floating point, and that proven bound is what the declared sensitivity is
(Casacuberta et al. 2022, §4: account for the arithmetic error). Sums are exact, no slack.
"""

from __future__ import annotations

import functools
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe._validation import check_names, check_number, is_real_number
from dpframe.errors import ParameterError, PrivateSizeError, UnsupportedInputError
from dpframe.mechanisms.intervals import (
    component_level,
    composed_interval,
    confidence_interval,
    interval_from_components,
)
from dpframe.query._aggregates import Agg, Bins, FixedPoint, UnitBound
from dpframe.query._measurement_kinds import (
    ADAPTIVE_DOMAIN,
    ADDED_NOISE,
    SELECTION,
    MeasurementKind,
)

__all__ = [
    "SCALAR_STATISTICS",
    "Count",
    "Covariance",
    "CovarianceEntries",
    "Histogram",
    "KeyProportions",
    "Mean",
    "Measurement",
    "Plan",
    "PlanContext",
    "Proportions",
    "Quantile",
    "Query",
    "Std",
    "Sum",
    "ValueCounts",
    "Variance",
    "corr",
    "count",
    "cov",
    "histogram",
    "mean",
    "median",
    "proportions",
    "quantile",
    "std",
    "sum",
    "value_counts",
    "variance",
]

FP_SLACK = 2.0**-52  # two half-ulps of a correctly rounded quotient, relative to its bound

# The exact (Fraction) helpers below are pure functions of public numbers, and planning calls
# them with the same few bounds on every query of a frame: each is cached, which takes the
# rational arithmetic off a repeated query's fixed cost.


@functools.lru_cache(maxsize=4096)
def round_up(x: Fraction | float) -> float:
    """The smallest float ≥ x (for upper ends of domains)."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < Fraction(x) else f


@functools.lru_cache(maxsize=4096)
def round_down(x: Fraction | float) -> float:
    """The largest float ≤ x (for lower ends of domains)."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > Fraction(x) else f


@dataclass(frozen=True)
class PlanContext:
    """The public facts a plan may use. Never holds data-derived values.

    ``size_public``: the frame's rows are exactly the protected frame's ``n`` rows *and* the
    queried column has no rows to drop (its missing-value policy is a fill value, or its dtype
    cannot hold a missing value). ``n``: the protected data set's public size, also the most
    rows any verified derivation can have (it sizes the fixed-point grids). ``missing``: the
    queried column's policy; ``drops``: rows missing the column are left out.

    ``unit``: the privacy unit when one person can own several rows
    (:mod:`dpframe.provenance._units`): then ``size_public`` is False, ``n`` is the public row cap
    ``k·U`` of the bounded frame, and
    ``units_public`` says the frame holds every unit of the protected frame (the number of
    units ``U`` is then public). Plans are written for one row per unit; the release scales
    them (:func:`dpframe.provenance._units.bound_plan`): ``rows_per_unit`` is the factor ``k`` for
    queries that need it themselves.
    """

    size_public: bool
    n: int
    bounds: tuple[float, float] | None
    grouped: bool = False
    count_cap: float = math.inf  # public upper bound on any count (n on the protected frame)
    column: str | None = None
    drops: bool = False
    n_groups: int = 1
    all_bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    unit: UnitBound | None = None
    units_public: bool = False
    #: the release's total ε (public; None where unknown): an upper bound on any query's share,
    #: used only to size public grids (quantile bins, :func:`dpframe.mechanisms.default_bins`)
    epsilon: float | None = None
    #: the keys declared at protect, per column (public; a value-count query's default keys)
    keys: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    #: the release's ``ci=`` level (None: no interval): quantiles plan their bracketing releases
    ci: float | None = None

    @property
    def rows_per_unit(self) -> int:
        """``k``: the most rows one privacy unit contributes after bounding (1 without units)."""
        return 1 if self.unit is None else self.unit.max_rows

    def rows(self) -> Agg:
        """The row count this query's statistics are over (rows where the column is present
        when it drops missing values)."""
        return Agg("rows", self.column if self.drops else None)

    def fixed_point(self, center: float, squares: bool) -> FixedPoint:
        lo, hi = _require_bounds(self, "query")
        return FixedPoint.choose(lo, hi, center, max(self.n, 1), squares)


Statistic = Callable[[Mapping[Agg, np.ndarray]], np.ndarray]
#: ``interval(mechanisms, noisy, level) -> (lower, upper)``: a confidence interval for the
#: query's answer from its measurements' mechanisms and raw (pre-post-processing) outputs,
#: keyed by measurement name. Post-processing: no privacy cost.
Interval = Callable[[Mapping[str, Any], Mapping[str, np.ndarray], float],
                    tuple[np.ndarray, np.ndarray]]


def single_interval(name: str, lower: float, upper: float, *, offset: float = 0.0,
                    integer: bool = False, sqrt: bool = False) -> Interval:
    """Interval of an answer that is one measurement, shifted by a public ``offset`` (and its
    square root for a std), kept in ``[lower, upper]``: exact test inversion of that
    measurement's mechanism (``docs/privacy.md``, intervals I.2)."""

    def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                 ) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = confidence_interval(mechs[name], noisy[name], level, integer=integer)
        lo, hi = np.asarray(lo, dtype=float) + offset, np.asarray(hi, dtype=float) + offset
        if sqrt:
            lo, hi = np.sqrt(np.maximum(lo, 0.0)), np.sqrt(np.maximum(hi, 0.0))
        return np.clip(lo, lower, upper), np.clip(hi, lower, upper)

    return interval


def composed(kind: str, **params: Any) -> Interval:
    """Interval of an answer composed from several measurements (a noisy sum over a noisy
    count, a variance from moments, rescaled proportions): every component's interval at the
    Šidák level, then the exact range of the post-processing over that box (intervals I.3)."""

    def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                 ) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = composed_interval(kind, dict(mechs), dict(noisy), level, **params)
        return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)

    return interval


@dataclass(frozen=True)
class Measurement:
    """One noisy number per group: ``statistic(aggregates)`` plus noise calibrated to
    ``sensitivity`` on the feasible set ``[lower, upper]`` (mechanism coordinates).

    ``needs``: the exact aggregates the statistic reads. ``domain_after``: for a measurement
    whose domain is a function of measurements released before it in the same plan (Liu's
    covariance on ±√(S*jj S*kk)); it gets the noisy values so far and returns ``(lower,
    upper)``, and ``sensitivity_after`` its sensitivity there.
    """

    name: str
    statistic: Statistic
    sensitivity: float
    lower: float
    upper: float
    weight: float  # share of the query's ε (and δ)
    needs: tuple[Agg, ...] = ()
    magnitude: float | None = None  # public bound on |statistic| (for unbounded domains)
    domain_after: Callable[[Mapping[str, np.ndarray]], tuple[float, float]] | None = None
    sensitivity_after: Callable[[float, float], float] | None = None
    #: For a measurement that is not additive noise on a number (quantiles: the exponential
    #: mechanism over bin counts): ``make(epsilon, delta)`` builds its mechanism, whose
    #: ``sample(exact, random_state)`` releases the answer from the exact statistic.
    make: Callable[[float, float], Any] | None = None

    @property
    def kind(self) -> MeasurementKind:
        """How the pipeline releases it (:mod:`dpframe.query._measurement_kinds`)."""
        if self.make is not None:
            return SELECTION
        return ADAPTIVE_DOMAIN if self.domain_after is not None else ADDED_NOISE


def rows_of(agg: Agg) -> Statistic:
    """Row count(s) as doubles (exact below 2⁵³)."""
    return lambda a: np.asarray(a[agg], dtype=np.float64)


def scaled(agg: Agg) -> Statistic:
    """``scale·Σ``: exact (an integer below 2⁵³ times a power of two)."""
    return lambda a: np.asarray(a[agg], dtype=np.float64) * agg.scale


@dataclass(frozen=True)
class Plan:
    """How to answer a query: measurements and post-processing."""

    query: str
    column: str | None
    measurements: tuple[Measurement, ...]
    finalize: Callable[[dict[str, np.ndarray]], np.ndarray]
    formulation: str
    public_size: bool = False  # the formulation reads the public row count n
    group_share: float | None = None  # ε share per group when grouped (default 1/2)
    columns: tuple[str, ...] = ()  # every column read (cov reads several)
    interval: Interval | None = None  # confidence interval from the mechanisms' raw outputs
    #: several answers per group (quantile levels): ``finalize`` returns ``(groups, len)``
    #: and the release names them ``<name>[<label>]``
    labels: tuple[str, ...] | None = None
    #: an interval that is not a value interval (quantiles: a rank interval): with ``ci=`` the
    #: release adds the columns ``<name>_<suffix>`` it returns, computed from the level and
    #: public facts only (one value per group), and logs ``interval_note``
    ci_columns: Callable[[Mapping[str, Any], float], dict[str, float]] | None = None
    interval_note: str | None = None
    #: ungrouped, the ε share of each of several disjoint cells one measurement releases
    #: (histogram bins: a replaced row moves between two, so ½ each; parallel composition);
    #: None: one cell, the whole share
    cell_share: float | None = None

    def epsilon_factor(self, grouped: bool) -> float:
        """The factor of the query's ε (and δ) each measured cell gets: per group in a
        group-by (``group_share``, default ½), per cell ungrouped (``cell_share``, default 1)."""
        if grouped:
            return self.group_share or 0.5
        return self.cell_share or 1.0

    @property
    def aggregates(self) -> tuple[Agg, ...]:
        return tuple(dict.fromkeys(a for m in self.measurements for a in m.needs))


@functools.lru_cache(maxsize=4096)
def _frac(x: float) -> Fraction:
    return Fraction(x)


@functools.lru_cache(maxsize=4096)
def _width(bounds: tuple[float, float]) -> Fraction:
    return _frac(bounds[1]) - _frac(bounds[0])


@functools.lru_cache(maxsize=4096)
def _quotient_sensitivity(w: Fraction, n: int) -> float:
    """Δ of a shifted mean ``Σ(x − l)/n`` of values in a width-``w`` range: ``w/n`` plus the
    quotient's rounding slack ``2⁻⁵²·w``, rounded up and capped at ``w``."""
    return _interval_sensitivity(w / n + Fraction(FP_SLACK) * w, 0.0, round_up(w))


@functools.lru_cache(maxsize=4096)
def _interval_sensitivity(delta: Fraction | float, lower: float, upper: float) -> float:
    """Round Δ up to a float and cap it at the domain's width (no two outputs differ more)."""
    s = round_up(delta)
    if math.isfinite(lower) and math.isfinite(upper):
        s = min(s, upper - lower)
    return s


class Query(ABC):
    """A statistic of one column (or of the rows, for count)."""

    kind: str = "query"
    needs_column: bool = True
    needs_public_size: bool = False

    def __init__(self, column: str | None = None) -> None:
        if self.needs_column and (not isinstance(column, str) or not column):
            raise ParameterError(
                f"{self.kind}() needs a column name, e.g. dpf.{self.kind}('income')"
            )
        self.column = column

    def __repr__(self) -> str:
        return f"dpf.{self.kind}({self.column!r})" if self.column else f"dpf.{self.kind}()"

    def columns_read(self) -> tuple[str, ...]:
        """Every column whose values this query reads."""
        return (self.column,) if self.column is not None else ()

    @abstractmethod
    def plan(self, ctx: PlanContext) -> Plan:
        """Measurements and post-processing for this query in context ``ctx``."""


class Count(Query):
    r"""Number of rows.

    On a frame whose size is public (the protected frame, or a derivation that keeps every row)
    the count *is* ``n``, a public fact: whatever ε is asked (0 included) it is released
    exactly, costs nothing, and the log says so (``size`` "public", ``mechanism`` "none (public
    size)"); in a release with other queries its share of ε goes to them. Noising a public
    value would only add error (``frame.dp.size`` also gives ``n``). On a derived
    (private-size) frame a replacement upstream adds, removes or replaces one row, moving the
    count by at most 1: Δ = 1, domain ``[0, n]`` (no verified derivation has more rows than the
    protected frame), released as an integer (post-processing). Per group the count is always
    private.
    """

    kind = "count"
    needs_column = False

    def plan(self, ctx: PlanContext) -> Plan:
        upper = float(ctx.count_cap)
        if ctx.size_public and not ctx.grouped:
            n = float(ctx.n)  # public: released exactly, no noise, no ε (logged as public)

            def exact(_: Mapping[str, np.ndarray]) -> np.ndarray:
                return np.array([n])

            return Plan("count", None, (), exact, "public size n, released exactly (no noise, "
                        "no ε)", public_size=True,
                        interval=lambda _m, _v, _l: (np.array([n]), np.array([n])))
        rows = Agg("rows")
        m = Measurement("count", rows_of(rows), 1.0, 0.0, upper, 1.0, (rows,), float(ctx.n))
        return Plan(
            "count", None, (m,), lambda v: np.clip(np.rint(v["count"]), 0.0, upper),
            "noisy count, rounded to an integer" + (
                " (public n)" if ctx.size_public else " (private size)"),
            public_size=ctx.size_public and not ctx.grouped,  # the log's size field
            interval=single_interval("count", 0.0, upper, integer=True),
        )


def _require_bounds(ctx: PlanContext, kind: str) -> tuple[float, float]:
    if ctx.bounds is None:  # pragma: no cover - checked by the caller with a better message
        raise ParameterError(f"{kind} needs declared bounds for its column")
    return ctx.bounds


class Sum(Query):
    r"""Sum of a bounded column.

    *Public size.* Write Σx = n·l + Σ(x − l). ``n·l`` is public, and ``Σ(x − l)`` lies in
    ``[0, n·w]``; replacing one row changes one term ``x − l ∈ [0, w]`` by at most ``w``, so
    Δ = w = u − l. The sum is released in these shifted coordinates (exact in floating point:
    a fixed-point integer times a power of two below 2⁵³) and ``n·l`` is added afterwards, which
    is post-processing. Domain of the answer ``[n·l, n·u]``.

    *Private size.* An add or remove changes Σx by one value, at most ``max(|l|, |u|)``; a
    replace by at most ``w``. Δ = max(w, |l|, |u|). (The add/remove-only figure
    ``max(|l|, |u|)`` is too small when ``l < 0 < u``: a replacement from ``l`` to ``u`` moves
    the sum by ``w``.) Domain ``[0, ∞)`` when ``l ≥ 0``, ``(−∞, 0]`` when ``u ≤ 0``, else the
    real line.
    """

    kind = "sum"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = _require_bounds(ctx, "sum")
        w = _width((lo, hi))
        n = ctx.n
        if ctx.size_public and not ctx.grouped:
            up = round_up(n * w)
            agg = Agg("sum", self.column, ctx.fixed_point(lo, False))
            m = Measurement("sum", scaled(agg), _interval_sensitivity(w, 0.0, up), 0.0, up,
                            1.0, (agg,))
            base_lo, base_hi = round_down(n * _frac(lo)), round_up(n * _frac(hi))
            offset = n * _frac(lo)

            def fin(v: dict[str, np.ndarray]) -> np.ndarray:
                return np.clip(float(offset) + v["sum"], base_lo, base_hi)

            return Plan("sum", self.column, (m,), fin, "shifted sum Σ(x−l) + n·l (public n)",
                        public_size=True,
                        interval=single_interval("sum", base_lo, base_hi, offset=float(offset)))
        delta = max(w, abs(_frac(lo)), abs(_frac(hi)))
        d_lo = 0.0 if lo >= 0 else -math.inf
        d_hi = 0.0 if hi <= 0 else math.inf
        mag = round_up(n * max(abs(_frac(lo)), abs(_frac(hi))))
        agg = Agg("sum", self.column, ctx.fixed_point(0.0, False))
        m = Measurement("sum", scaled(agg), round_up(delta), d_lo, d_hi, 1.0, (agg,), mag)
        return Plan("sum", self.column, (m,), lambda v: np.clip(v["sum"], d_lo, d_hi),
                    "direct sum, add/remove/replace sensitivity (private size)",
                    interval=single_interval("sum", d_lo, d_hi))


class Mean(Query):
    r"""Mean of a bounded column.

    *Public size.* mean = l + Σ(x − l)/n; the second term lies in ``[0, w]`` and one
    replacement moves it by at most ``w/n``. Released in these shifted coordinates with
    Δ = w/n + 2⁻⁵²·w (the rounding slack of the quotient, see module docstring), then ``l`` is
    added and the answer kept in ``[l, u]`` (post-processing).

    *Private size.* Size-free formulation: a noisy count N (Δ = 1, ε/2) and a noisy centred sum
    S = Σ(x − c), c = (l + u)/2 (ε/2). Each centred term lies in ``[−w/2, w/2]``: add/remove
    moves S by ≤ w/2, replace by ≤ w, so Δ = w; domain the real line (a bounded domain as wide
    as ``n·w`` would double the bounded mechanism's scale, Holohan Fig. 3). The answer
    c + S/max(N, 1), clamped to ``[l, u]``, is post-processing of two ε/2 releases.
    Centring makes the sum's sensitivity w instead of max(|l|, |u|), which matters for bounds
    far from zero.
    """

    kind = "mean"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = _require_bounds(ctx, "mean")
        w = _width((lo, hi))
        if ctx.size_public and not ctx.grouped:
            n = ctx.n
            wf = round_up(w)
            agg = Agg("sum", self.column, ctx.fixed_point(lo, False))
            q_num, q_den = agg.scale.as_integer_ratio()

            def stat(a: Mapping[Agg, np.ndarray]) -> np.ndarray:
                # k·q/n correctly rounded: Python's int / int rounds correctly (as
                # float(Fraction) does, by the same division)
                return np.array([int(k) * q_num / (q_den * n) for k in a[agg]])

            m = Measurement("mean", stat, _quotient_sensitivity(w, n), 0.0, wf, 1.0, (agg,))

            def shifted(v: dict[str, np.ndarray]) -> np.ndarray:
                return np.clip(lo + v["mean"], lo, hi)

            return Plan("mean", self.column, (m,), shifted, "shifted mean l + Σ(x−l)/n (public n)",
                        public_size=True, interval=single_interval("mean", lo, hi, offset=lo))
        c = _center(lo, hi)
        count_upper = float(ctx.count_cap)
        half = max(_frac(hi) - _frac(c), _frac(c) - _frac(lo))
        rows = ctx.rows()
        agg = Agg("sum", self.column, ctx.fixed_point(c, False))
        cnt = Measurement("count", rows_of(rows), 1.0, 0.0, count_upper, 0.5, (rows,))
        s = Measurement("sum", scaled(agg), round_up(w), -math.inf, math.inf, 0.5, (agg,),
                        round_up(ctx.n * half))

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            n_hat = np.maximum(v["count"], 1.0)
            return np.clip(c + v["sum"] / n_hat, lo, hi)

        return Plan("mean", self.column, (cnt, s), fin,
                    "noisy centred sum / noisy count, ε split 1/2 + 1/2 (private size)",
                    interval=composed("mean", center=c, lower=lo, upper=hi))


def _center(lo: float, hi: float) -> float:
    c = lo / 2 + hi / 2
    return min(max(c, lo), hi)


class Variance(Query):
    r"""Sample variance with ``ddof=1`` (pandas' default).

    *Public size, sensitivity.* Let ``m`` be the mean of the ``n − 1`` rows that stay and
    ``a`` the replaced value. The sum of squared deviations splits as
    ``SS = Σ_stay (x − m)² + (n−1)/n · (a − m)²`` (add one point to a set of ``n−1`` points with
    mean ``m``), so ``V = SS/(n−1) = Σ_stay(x − m)²/(n−1) + (a − m)²/n``. Replacing ``a`` by
    ``b`` changes only the last term: ``|V' − V| = |(b − m)² − (a − m)²|/n ≤ w²/n`` because
    ``a, b, m ∈ [l, u]``; equality at ``m = a = l``, ``b = u`` (all other rows at ``l``). So
    Δ = w²/n, confirming Liu's Table 1 for ddof = 1 (verified by brute force in the tests).

    *Domain.* ``SS ≤ n·w²/4`` (Popoviciu: the population variance of values in ``[l, u]`` is at
    most w²/4), so ``V ∈ [0, w²/4 · n/(n − 1)]``, Liu's bound. Needs ``n ≥ 2``.

    *Private size (and per group).* Size-free: noisy N (Δ = 1), S = Σ(x − c) (Δ = w, as for the
    mean), SS = Σ(x − c)² with ``(x − c)² ∈ [0, w²/4]`` (add/remove/replace all move it by at
    most w²/4; domain ``[0, ∞)``), ε/3 each. Post-processing: ``N' = max(N, 2)``,
    ``var = (SS − S²/N')/(N' − 1)`` clamped to ``[0, w²/4 · N'/(N' − 1)]``.
    """

    kind = "variance"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = _require_bounds(ctx, self.kind)
        w = _width((lo, hi))
        c = _center(lo, hi)
        if ctx.size_public and not ctx.grouped:
            n = ctx.n
            if n < 2:
                raise UnsupportedInputError(
                    f"{self.kind} with ddof=1 needs at least 2 rows; the protected frame has "
                    f"{n}. Protect a larger frame."
                )
            vmax = w * w / 4 * Fraction(n, n - 1)
            up = round_up(vmax)
            delta = w * w / n + Fraction(FP_SLACK) * vmax
            fp = ctx.fixed_point(c, True)
            k_sum, k_sq = Agg("sum", self.column, fp), Agg("sum_sq", self.column, fp)
            q2 = Fraction(fp.q) ** 2

            def stat(a: Mapping[Agg, np.ndarray]) -> np.ndarray:
                return np.array([
                    float(q2 * (n * int(ss) - int(s) * int(s)) / (n * (n - 1)))
                    for s, ss in zip(a[k_sum], a[k_sq], strict=True)
                ])

            m = Measurement("variance", stat, _interval_sensitivity(delta, 0.0, up), 0.0, up,
                            1.0, (k_sum, k_sq))
            return Plan(self.kind, self.column, (m,), self._post(lambda v: np.clip(
                v["variance"], 0.0, up)), "bounded-domain variance, ddof=1 (public n)",
                public_size=True,
                interval=single_interval("variance", 0.0, up, sqrt=self.kind == "std"))
        count_upper = float(ctx.count_cap)
        third = 1.0 / 3.0
        half = max(_frac(hi) - _frac(c), _frac(c) - _frac(lo))  # ≈ w/2; exact for float c
        rows = ctx.rows()
        fp = ctx.fixed_point(c, True)
        k_sum, k_sq = Agg("sum", self.column, fp), Agg("sum_sq", self.column, fp)
        cnt = Measurement("count", rows_of(rows), 1.0, 0.0, count_upper, third, (rows,))
        s = Measurement("sum", scaled(k_sum), round_up(w), -math.inf, math.inf, third, (k_sum,),
                        round_up(ctx.n * half))
        ss = Measurement("sum_sq", scaled(k_sq), round_up(half * half), 0.0, math.inf, third,
                         (k_sq,), round_up(ctx.n * half * half))
        w2 = float(w * w) / 4

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            n_hat = np.maximum(v["count"], 2.0)
            var = (v["sum_sq"] - v["sum"] ** 2 / n_hat) / (n_hat - 1)
            return np.clip(var, 0.0, w2 * n_hat / (n_hat - 1))

        return Plan(self.kind, self.column, (cnt, s, ss), self._post(fin),
                    "noisy count, centred sum and sum of squares, ε split in thirds "
                    "(private size)", interval=composed(self.kind, lower=lo, upper=hi))

    def _post(self, f: Callable[[dict[str, np.ndarray]], np.ndarray]) -> Callable[
            [dict[str, np.ndarray]], np.ndarray]:
        return f


class Std(Variance):
    """Sample standard deviation (ddof=1): the square root of the released variance
    (post-processing, no extra budget). Same measurements as :class:`Variance`."""

    kind = "std"

    def _post(self, f: Callable[[dict[str, np.ndarray]], np.ndarray]) -> Callable[
            [dict[str, np.ndarray]], np.ndarray]:
        return lambda v: np.sqrt(np.maximum(f(v), 0.0))


class Proportions(Query):
    r"""Proportions of the declared keys of the group-by column (Liu §4.2).

    *Public size.* Per cell ``c_j/n`` on ``[0, 1]``, ``Δ = 1/n`` (plus ``2⁻⁵²`` float slack).
    One replacement moves one row between two cells, changing two proportions by ``1/n``
    each; each released cell is charged ε/2, or the whole ε when only one cell is released
    (``all_but_one`` with two keys). *Private size.* Per cell the count ``c_j`` on ``[0, n]``,
    ``Δ = 1``. Post-processing: :func:`dpframe.mechanisms.matrices.sum_to_one` (``"rescale"``
    divides by the sum; ``"all_but_one"`` discards the remainder cell's noisy value and sets it to
    one
    minus the others, so that cell is never released).
    """

    kind = "proportions"
    needs_column = False

    def __init__(self, method: str = "rescale", remainder: int = -1) -> None:
        super().__init__(None)
        if not isinstance(method, str) or method not in ("rescale", "all_but_one"):
            raise ParameterError(f"method must be 'rescale' or 'all_but_one', got {method!r}")
        self.method = method
        self.remainder = int(remainder)

    def plan(self, ctx: PlanContext) -> Plan:
        from dpframe.mechanisms import matrices as analyses

        method, rem = self.method, self.remainder
        released = ctx.n_groups - (1 if method == "all_but_one" else 0)
        share = analyses.proportion_epsilon_share(max(released, 1))
        rows = Agg("rows")
        if ctx.size_public:
            n = ctx.n
            sens = round_up(Fraction(1, n) + Fraction(FP_SLACK))
            # rows/n in IEEE division is the correctly rounded exact quotient (both < 2^53)
            m = Measurement("proportion", lambda a: np.asarray(a[rows], np.float64) / n, sens,
                            0.0, 1.0, 1.0, (rows,))
            return Plan("proportions", None, (m,),
                        lambda v: analyses.sum_to_one(v["proportion"], method, rem),  # type: ignore[arg-type]
                        f"per-cell proportion c/n on [0, 1] (public n), then {method}",
                        public_size=True, group_share=share,
                        interval=_proportion_cells(method, rem))
        if method == "all_but_one":
            raise PrivateSizeError(
                "method='all_but_one' needs the public row count of the protected frame; on a "
                "derived frame use method='rescale' (noisy counts, normalised)"
            )
        upper = float(ctx.count_cap)
        m = Measurement("count", rows_of(rows), 1.0, 0.0, upper, 1.0, (rows,))
        return Plan("proportions", None, (m,),
                    lambda v: analyses.sum_to_one(v["count"], "rescale"),
                    "per-cell noisy count (private size), then rescale", group_share=share,
                    interval=composed("proportions"))


def _proportion_cells(method: str, remainder: int) -> Interval:
    """Per-cell intervals of public-size proportions c_j/n, from each cell's own release.
    ``all_but_one``: the remainder cell is 1 − Σ others, so its interval needs every released
    cell's interval at once (Šidák level over the K − 1 cells)."""

    def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                 ) -> tuple[np.ndarray, np.ndarray]:
        mech, cells = mechs["proportion"], np.asarray(noisy["proportion"], dtype=float)
        lo, hi = (np.asarray(v, dtype=float) for v in confidence_interval(mech, cells, level))
        if method == "all_but_one" and cells.size > 1:
            rem = remainder % cells.size
            others = np.arange(cells.size) != rem
            j_lo, j_hi = (np.asarray(v, dtype=float) for v in confidence_interval(
                mech, cells[others], component_level(level, int(others.sum()))))
            lo[rem] = max(0.0, 1.0 - float(j_hi.sum()))
            hi[rem] = min(1.0, 1.0 - float(j_lo.sum()))
        return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)

    return interval


class Covariance(Query):
    r"""Covariance (``kind="cov"``) or correlation (``"corr"``) matrix, ddof=1 (Liu §4.1).

    Needs the public ``n`` (Liu's variance and covariance bounds). For ``p`` columns the
    ``m = p(p+1)/2`` elements share ε equally. Variances on ``[0, n w_j²/(4(n−1))]`` with
    ``Δ = w_j²/n``; each covariance then on ``[−√(S*jj S*kk), √(S*jj S*kk)]`` built from the
    *released* variances (public), with ``Δ = w_j w_k/n`` — the derivation is in
    :mod:`dpframe.mechanisms.matrices`. The exact statistics come from integer sums in fixed point
    (``Σk_j``, ``Σk_j²``, ``Σk_j k_k``), so the sensitivities hold exactly (plus the ``2⁻⁵²``
    slack of one division). Post-processing: the nearest PSD matrix with the released variances
    on its diagonal, and correlations from it.
    """

    kind = "cov"
    needs_column = False
    needs_public_size = True

    def __init__(self, columns: Sequence[str], kind: str = "cov") -> None:
        super().__init__(None)
        cols = check_names("columns", columns)
        if len(cols) < 2 or len(set(cols)) != len(cols) or not all(
                isinstance(c, str) for c in cols):
            raise ParameterError(f"{kind} needs at least two distinct column names, got {cols!r}")
        if kind not in ("cov", "corr"):
            raise ParameterError(f"kind must be 'cov' or 'corr', got {kind!r}")
        self.columns = cols
        self.kind = kind

    def __repr__(self) -> str:
        return f"dpf.{self.kind}({self.columns!r})"

    def columns_read(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def plan(self, ctx: PlanContext) -> Plan:
        from dpframe.mechanisms import matrices as analyses

        n, bounds = ctx.n, ctx.all_bounds
        if ctx.grouped:
            raise ParameterError(f"{self.kind} is not available per group; run it ungrouped")
        if n < 2:
            raise UnsupportedInputError(f"{self.kind} needs at least 2 rows")
        cols = self.columns
        p = len(cols)
        m_total = p * (p + 1) // 2
        weight = 1.0 / m_total
        fps = {c: FixedPoint.choose(bounds[c][0], bounds[c][1], _center(*bounds[c]), n, True)
               for c in cols}
        widths = {c: _width(bounds[c]) for c in cols}
        sums = {c: Agg("sum", c, fps[c]) for c in cols}
        measurements: list[Measurement] = []
        for c in cols:
            vmax = widths[c] ** 2 / 4 * Fraction(n, n - 1)
            up = round_up(vmax)
            sens = _interval_sensitivity(widths[c] ** 2 / n + Fraction(FP_SLACK) * vmax, 0.0, up)
            sq = Agg("sum_sq", c, fps[c])
            measurements.append(Measurement(
                f"variance[{c}]", _covariance_statistic(sums[c], sums[c], sq, n), sens, 0.0, up,
                weight, (sums[c], sq)))
        for j in range(p):
            for k in range(j + 1, p):
                a, b = cols[j], cols[k]
                prod = Agg("sum_prod", a, fps[a], b, fps[b])
                base = widths[a] * widths[b] / n

                def domain(v: Mapping[str, np.ndarray], a: str = a, b: str = b
                           ) -> tuple[float, float]:
                    c = math.sqrt(max(float(v[f"variance[{a}]"][0]), 0.0)
                                  * max(float(v[f"variance[{b}]"][0]), 0.0))
                    return -c, c

                def sens_after(lo: float, hi: float, base: Fraction = base) -> float:
                    return _interval_sensitivity(base + Fraction(FP_SLACK) * Fraction(hi), lo, hi)

                measurements.append(Measurement(
                    f"covariance[{a},{b}]", _covariance_statistic(sums[a], sums[b], prod, n),
                    float(base), -math.inf, math.inf, weight, (sums[a], sums[b], prod),
                    domain_after=domain, sensitivity_after=sens_after))
        kind = self.kind

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            mat = np.zeros((p, p))
            for j in range(p):
                mat[j, j] = float(v[f"variance[{cols[j]}]"][0])
                for k in range(j + 1, p):
                    mat[j, k] = mat[k, j] = float(v[f"covariance[{cols[j]},{cols[k]}]"][0])
            cov = analyses.nearest_psd(mat, diagonal=np.diag(mat))
            return cov if kind == "cov" else analyses.correlation_from_covariance(cov)

        def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                     ) -> tuple[np.ndarray, np.ndarray]:
            # element-wise intervals of the (clamped, fixed-point) variances and covariances;
            # a correlation needs its covariance and both variances at once (Šidák, 3 parts)
            each = level if kind == "cov" else component_level(level, 3)
            box: dict[str, tuple[float, float]] = {}
            for name, mech in mechs.items():
                value = float(np.asarray(noisy[name])[0])
                if mech is None:  # a single-point domain: released exactly
                    box[name] = (value, value)
                    continue
                lo_, hi_ = confidence_interval(mech, value, each)
                box[name] = (max(float(lo_), mech.domain.lower), min(float(hi_),
                                                                     mech.domain.upper))
            lo_m, hi_m = np.zeros((p, p)), np.zeros((p, p))
            for j in range(p):
                vj = box[f"variance[{cols[j]}]"]
                lo_m[j, j], hi_m[j, j] = (vj if kind == "cov" else (1.0, 1.0))
                for k in range(j + 1, p):
                    cv = box[f"covariance[{cols[j]},{cols[k]}]"]
                    if kind == "corr":
                        r = interval_from_components("correlation", {
                            "cov": cv, "var_x": vj, "var_y": box[f"variance[{cols[k]}]"]})
                        cv = (float(r[0]), float(r[1]))
                    lo_m[j, k] = lo_m[k, j] = cv[0]
                    hi_m[j, k] = hi_m[k, j] = cv[1]
            return lo_m, hi_m

        return Plan(kind, None, tuple(measurements), fin,
                    "Liu §4.1 element-wise: variances, then covariances on ±√(S*jj S*kk); "
                    "nearest PSD (Higham) post-processing", public_size=True,
                    columns=tuple(cols), interval=interval)


def _covariance_statistic(sum_a: Agg, sum_b: Agg, prod: Agg, n: int) -> Statistic:
    """Exact ddof=1 (co)variance from integer sums, correctly rounded once."""
    assert sum_a.fp is not None and sum_b.fp is not None
    qq = Fraction(sum_a.fp.q) * Fraction(sum_b.fp.q)

    def stat(a: Mapping[Agg, np.ndarray]) -> np.ndarray:
        s_a, s_b, p_ab = int(a[sum_a][0]), int(a[sum_b][0]), int(a[prod][0])
        return np.array([float(qq * (n * p_ab - s_a * s_b) / (n * (n - 1)))])

    return stat



class CovarianceEntries(Covariance):
    """:class:`Covariance` as a statistic of a release (``dpf.cov(cols)``, ``dpf.corr(cols)``):
    the same measurements, ε split and post-processing, its matrix released as entries named
    ``<name>[<a>,<b>]`` (the upper triangle; a covariance's diagonal holds the variances, a
    correlation's is 1 and is left out), with value intervals under ``ci=``."""

    def __init__(self, columns: Sequence[str], kind: str = "cov") -> None:
        super().__init__(columns, kind)
        p = len(self.columns)
        first = 0 if kind == "cov" else 1
        self.entries = tuple((j, k) for j in range(p) for k in range(j + first, p))

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(f"{self.columns[j]},{self.columns[k]}" for j, k in self.entries)

    def plan(self, ctx: PlanContext) -> Plan:
        from dataclasses import replace

        whole = super().plan(ctx)
        rows = np.array([j for j, _ in self.entries])
        cols = np.array([k for _, k in self.entries])
        matrix_interval = whole.interval
        assert matrix_interval is not None

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            return np.asarray(whole.finalize(v))[rows, cols][None, :]

        def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                     ) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = matrix_interval(mechs, noisy, level)
            return lo[rows, cols][None, :], hi[rows, cols][None, :]

        return replace(whole, finalize=fin, interval=interval, labels=self.labels)


class Histogram(Query):
    r"""Counts of a bounded numeric column over ``B`` equal public bins of its declared bounds
    ``[l, u]`` (``dpf.histogram(col, bins=B)``, a statistic of a release; the frame method
    ``frame.dp.histogram`` also takes arbitrary public edges).

    The engine counts rows per bin (:class:`dpframe.query._aggregates.Bins`, the quantiles' bins:
    the bin of a value ``x`` clamped to ``[l, u]`` is ``⌊t·B⌋`` limited to ``B − 1`` with
    ``t = (x/2 − l/2)/(u/2 − l/2)``, so bin ``j`` is ``[l + (u − l)·j/B, l + (u − l)·(j+1)/B)``
    up to the rounding of ``t``, the last bin closed, values outside the bounds in the end
    bins); missing values follow the column's rule (dropped: in no bin).

    *Sensitivity.* The bins are disjoint cells: replacing a row moves it between at most two
    cells, each count changing by 1 (in a group-by, two (group, bin) cells in all). Each cell
    is a count with Δ = 1 on ``[0, n]`` released at ε/2 (ungrouped: ``cell_share`` ½;
    grouped: the group share ½), so the whole histogram costs ε once (parallel composition,
    as for ``frame.dp.histogram``, a group-by count over the bins). Counts are rounded to
    non-negative integers (post-processing). A frame with a privacy unit is refused: one
    person's ``k`` rows can reach ``k`` bins of a group, which the group bound ``g`` does not
    limit (``frame.dp.histogram`` and ``groupby(...).histogram`` bound the bins per person).
    """

    kind = "histogram"

    def __init__(self, column: str, bins: int) -> None:
        from dpframe.mechanisms.quantiles import DEFAULT_MAX_CELLS

        super().__init__(column)
        if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or not (
                1 <= int(bins) <= DEFAULT_MAX_CELLS):
            raise ParameterError(f"dpf.histogram takes bins=<int> from 1 to "
                                 f"{DEFAULT_MAX_CELLS:,} (equal bins of the declared bounds; "
                                 f"arbitrary public edges: frame.dp.histogram(col, "
                                 f"edges=[...])), got {bins!r}")
        self.bins = int(bins)

    def __repr__(self) -> str:
        return f"dpf.histogram({self.column!r}, bins={self.bins})"

    def plan(self, ctx: PlanContext) -> Plan:
        _refuse_units(ctx, "histogram")
        lo, hi = _require_bounds(ctx, self.kind)
        count = self.bins
        bins = Bins(float(lo), float(hi), count)
        if not (hi > lo and math.isfinite(lo) and math.isfinite(hi) and bins.half_width > 0):
            raise ParameterError(f"a histogram of {self.column!r} needs finite bounds lower < "
                                 f"upper with upper/2 − lower/2 > 0; got [{lo:g}, {hi:g}]")
        return _cell_counts(self.kind, self.column, Agg("bins", self.column, bins=bins),
                            _bin_labels(lo, hi, count), ctx,
                            f"{count} equal public bins of [{lo:g}, {hi:g}]")


def _refuse_units(ctx: PlanContext, what: str) -> None:
    """Per-cell counts in a release are calibrated for one row per person: refused on a frame
    with a privacy unit (a person's rows can reach several cells of a group)."""
    if ctx.unit is not None:
        raise UnsupportedInputError(
            f"dpf.{what} in a release is not available on a frame protected with "
            f"privacy_unit={ctx.unit.column!r} (one person's rows can fall in several cells); "
            f"use frame.dp.{what}(...) or frame.dp.groupby(...).{what}(...), which bound the "
            "cells each person reaches")


def _cell_counts(kind: str, column: str | None, agg: Agg, labels: tuple[str, ...],
                 ctx: PlanContext, cells: str) -> Plan:
    """One noisy count per cell of ``agg`` (a ``(groups, cells)`` aggregate): Δ = 1 on
    ``[0, n]``, ε/2 per cell (ungrouped ``cell_share`` ½; grouped the group share ½: a replaced
    row changes at most two cells), rounded to non-negative integers."""
    from dpframe.mechanisms.quantiles import DEFAULT_MAX_CELLS

    if max(ctx.n_groups, 1) * len(labels) > DEFAULT_MAX_CELLS:
        raise ParameterError(f"{ctx.n_groups:,} groups × {len(labels):,} cells exceed "
                             f"{DEFAULT_MAX_CELLS:,}; use fewer cells or groups")
    upper = float(ctx.count_cap)
    m = Measurement(kind, lambda a: np.asarray(a[agg], dtype=np.float64), 1.0, 0.0, upper,
                    1.0, (agg,), float(ctx.n))
    return Plan(
        kind, column, (m,), lambda v: np.clip(np.rint(v[kind]), 0.0, upper),
        f"noisy count per cell of {cells}, ε/2 per cell (parallel composition: a replaced "
        "row moves between two cells), rounded to integers", labels=labels,
        cell_share=None if ctx.grouped else 0.5,
        interval=single_interval(kind, 0.0, upper, integer=True))


class ValueCounts(Query):
    r"""Counts of a column's public keys (``dpf.value_counts(col, keys=None)``, a statistic
    of a release): the keys given, else those declared at protect; rows with another or a
    missing value are in no cell. Named ``<name>[<key>]``.

    *Sensitivity.* As :class:`Histogram`: the keys are disjoint cells, a replaced row changes
    at most two (in a group-by, two (group, key) cells in all), each a count with Δ = 1 on
    ``[0, n]`` at ε/2, so the query costs ε once. Keys are never read from the data here
    (``frame.dp.groupby(col)`` with δ selects them privately); a frame with a privacy unit is
    refused (``frame.dp.value_counts`` bounds the keys per person).
    """

    kind = "value_counts"

    def __init__(self, column: str, keys: Sequence[Any] | None = None) -> None:
        super().__init__(column)
        self.keys = None if keys is None else tuple(_public_keys(column, keys))

    def __repr__(self) -> str:
        return f"dpf.value_counts({self.column!r})"

    def columns_read(self) -> tuple[str, ...]:
        return ()  # a key column: no bounds, no values summed (the keys are its cells)

    def plan(self, ctx: PlanContext) -> Plan:
        assert self.column is not None
        _refuse_units(ctx, self.kind)
        keys = self.keys
        if keys is None:
            declared = ctx.keys.get(self.column)
            if declared is None:
                raise ParameterError(
                    f"dpf.{self.kind}({self.column!r}) needs public keys: pass them, "
                    f"dpf.{self.kind}({self.column!r}, keys=[...]), or declare them at "
                    f"protect time with keys={{{self.column!r}: [...]}}; to select keys from "
                    f"the data privately, use frame.dp.groupby({self.column!r}) with delta > 0")
            keys = tuple(declared)
        agg = Agg("keys", self.column, keys=keys)
        return _cell_counts(self.kind, self.column, agg, _key_labels(keys), ctx,
                            f"{len(keys)} public keys of {self.column!r}")


class KeyProportions(ValueCounts):
    r"""Proportions of a column's public keys (``dpf.proportions(col, keys=None)``, a
    statistic of a release; per group in a group-by): the noisy counts of
    :class:`ValueCounts` (same cells, Δ = 1, ε/2 each, ε once), rescaled to sum to 1 within
    each group (:func:`dpframe.mechanisms.matrices.sum_to_one`, ``"rescale"``: post-processing, as
    the private-size :class:`Proportions`). Named ``<name>[<key>]``; with ``ci=``, each cell's
    interval from every cell's interval at the Šidák level (intervals I.3)."""

    kind = "proportions"

    def __repr__(self) -> str:
        return f"dpf.proportions({self.column!r})"

    def plan(self, ctx: PlanContext) -> Plan:
        from dataclasses import replace

        from dpframe.mechanisms import matrices as analyses

        counts = super().plan(ctx)
        name = counts.measurements[0].name

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            return analyses.sum_to_one(np.atleast_2d(v[name]), "rescale")

        def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                     ) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = composed_interval("proportions", {"count": mechs[name]},
                                       {"count": np.atleast_2d(noisy[name])}, level)
            return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)

        return replace(counts, query=self.kind, finalize=fin, interval=interval,
                       formulation=counts.formulation.replace(
                           "rounded to integers", "rescaled to sum to 1 in each group"))


def _public_keys(column: str, keys: Sequence[Any]) -> list[Any]:
    """Distinct, non-missing, hashable keys (the same rule as ``groupby(keys=...)``)."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence | set | frozenset):
        raise ParameterError(f"keys for {column!r} must be a list of public values, e.g. "
                             "keys=['north', 'south']")
    out = list(keys)
    if not out:
        raise ParameterError(f"keys for {column!r} is empty; declare at least one public key")
    if any(k is None or (isinstance(k, float) and k != k) for k in out):
        raise ParameterError(f"keys for {column!r} must not contain None/NaN")
    try:
        distinct = len(set(out)) == len(out)
    except TypeError:
        raise ParameterError(f"keys for {column!r} must be hashable values") from None
    if not distinct:
        raise ParameterError(f"keys for {column!r} contain duplicates")
    return out


def _key_labels(keys: Sequence[Any]) -> tuple[str, ...]:
    """Output labels of keys: ``str`` where distinct, else ``repr``."""
    for show in (str, repr):
        labels = tuple(show(k) for k in keys)
        if len(set(labels)) == len(labels):
            return labels
    return tuple(str(j) for j in range(len(keys)))  # pragma: no cover - repr is distinct


def _bin_labels(lower: float, upper: float, count: int) -> tuple[str, ...]:
    """Output labels of equal bins: ``<lower edge>,<upper edge>`` (``g`` format where that
    keeps them distinct, else each edge's full ``repr``); refused when two edges round to
    the same double (bins narrower than the doubles there)."""
    lo, width = Fraction(lower), Fraction(upper) - Fraction(lower)
    edges = [float(lo + width * j / count) + 0.0 for j in range(count + 1)]
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise ParameterError(f"bins={count}: equal bins of [{lower!r}, {upper!r}] would be "
                             "narrower than the spacing of floating-point numbers there; use "
                             "fewer bins")
    for fmt in ("{:g}", "{!r}"):
        labels = tuple(f"{fmt.format(a)},{fmt.format(b)}"
                       for a, b in itertools.pairwise(edges))
        if len(set(labels)) == len(labels):
            return labels
    return tuple(str(j) for j in range(count))  # pragma: no cover - repr is distinct

class Quantile(Query):
    r"""Quantiles of a bounded column: the exponential mechanism over public bins
    (``docs/privacy.md``, section Q; :mod:`dpframe.mechanisms.quantiles`).

    The column is clamped to ``[l, u]`` and its rows counted per bin of ``B`` equal public
    bins (:class:`dpframe.query._aggregates.Bins`: one exact integer aggregate per bin and group,
    computed in the frame's engine). For each level ``q`` the mechanism picks bin ``j`` with
    probability
    ``∝ exp(−λ·min(d_j, C/λ))``, ``d_j`` the distance from the target rank ``q·N`` to the ranks
    the bin holds, and releases the bin's midpoint, always inside ``[l, u]``. Several levels
    share the query's ε equally (sequential composition) and are sorted (post-processing).

    *Sensitivity of d.* Replacing a row moves each cumulative count ``L_j`` by at most 1 with
    ``N`` fixed: ``Δ = 1``. A verified derivation (a private size) changes by one added,
    removed or replaced row: ``Δ ≤ max(q, 1 − q, 1) = 1``. One group of a group-by changes by an
    added or removed row, ``Δ = max(q, 1 − q)``, and each group is charged ε/2 (a replaced row
    touches two groups), as for every grouped statistic. ``λ = (ε_q − 4η)/(2Δ)`` with the
    finite-precision overhead ``4η`` of the race sampler reserved first (about 1e-11).
    The rank ``N`` is never released; missing values follow the column's policy.
    """

    kind = "quantile"

    def __init__(self, column: str, q: float | Sequence[float] = 0.5,
                 bins: int | None = None, ci_share: float = 0.5) -> None:
        from dpframe.mechanisms.quantile_intervals import check_ci_share
        from dpframe.mechanisms.quantiles import MAX_QUANTILE_BINS

        super().__init__(column)
        levels = [q] if np.ndim(q) == 0 else list(np.asarray(q, dtype=object).ravel())
        checked = []
        for v in levels:
            if not is_real_number(v):
                raise ParameterError(f"quantile levels must be numbers in [0, 1], got {v!r}")
            level = check_number("quantile level", v)
            if not 0.0 <= level <= 1.0:
                raise ParameterError(f"quantile levels must lie in [0, 1], got {v!r} (use "
                                     "0.5 for the median, not 50)")
            checked.append(level)
        if not checked or len(set(checked)) != len(checked):
            raise ParameterError(f"q must be a level or a list of distinct levels, got {q!r}")
        if bins is not None and (isinstance(bins, bool) or not isinstance(bins, int | np.integer)
                                 or not 2 <= int(bins) <= MAX_QUANTILE_BINS):
            raise ParameterError(f"bins must be an int in [2, {MAX_QUANTILE_BINS}] (equal "
                                 f"public bins of the bounds), got {bins!r}")
        self.levels = tuple(checked)
        self.scalar = np.ndim(q) == 0
        self.bins = None if bins is None else int(bins)
        self.ci_share = check_ci_share(ci_share)

    def __repr__(self) -> str:
        q = self.levels[0] if self.scalar else list(self.levels)
        return f"dpf.quantile({self.column!r}, {q!r})"

    @property
    def labels(self) -> tuple[str, ...] | None:
        """How the answers of several levels are named: ``<name>[<label>]``."""
        return None if self.scalar else _level_labels(self.levels)

    def plan(self, ctx: PlanContext) -> Plan:
        from dpframe.mechanisms.quantiles import (
            DEFAULT_MAX_CELLS,
            QuantileMechanism,
            default_bins,
        )

        lo, hi = _require_bounds(ctx, self.kind)
        groups = max(ctx.n_groups, 1)
        # the default grid follows the public size (the protected n, also where the size is
        # private) and the release's ε per row of a unit: docs/frames.md "Quantile resolution"
        eps_rule = None if ctx.epsilon is None else ctx.epsilon / ctx.rows_per_unit
        count = self.bins if self.bins is not None else default_bins(ctx.n, eps_rule, groups)
        if self.bins is None and groups * count > DEFAULT_MAX_CELLS:
            # very many groups (e.g. keys selected from the data): fewer bins, so the counts
            # (groups × bins doubles) stay within the public memory budget
            count = max(2, DEFAULT_MAX_CELLS // groups)
        bins = Bins(float(lo), float(hi), count)
        if not (hi > lo and math.isfinite(lo) and math.isfinite(hi) and bins.half_width > 0):
            # binning divides by u/2 − l/2 (engine.Bins): a public fact, checked here, so
            # binning can never fail on a value
            raise ParameterError(
                f"quantiles of {self.column!r} need finite bounds lower < upper with "
                f"upper/2 − lower/2 > 0; got [{lo:g}, {hi:g}]")
        agg = Agg("bins", self.column, bins=bins)
        # several rows per unit (k): a replaced unit is k single-row changes, each moving every
        # rank distance by at most 1 (Lemma Q1), in the groups it touches: calibrated for
        # replacement at ε/k (group privacy; per group the release's group share applies)
        k = ctx.rows_per_unit
        neighbours = "add/remove" if ctx.grouped and k == 1 else "replace"
        levels = self.levels

        def make(epsilon: float, delta: float) -> _QuantileRelease:
            return _QuantileRelease(QuantileMechanism(
                epsilon / k, lo, hi, list(levels), bins=count, neighbours=neighbours), k)

        make(1.0, 0.0)  # parameters checked before anything is read
        m = Measurement("quantile", lambda a: np.asarray(a[agg], dtype=np.float64), 1.0, lo, hi,
                        1.0, (agg,), make=make)
        formulation = (
            f"exponential mechanism on the rank distance over {count} equal public bins of "
            f"[{lo:g}, {hi:g}] (levels {', '.join(f'{v:g}' for v in levels)}, ε split evenly, "
            f"{neighbours} neighbours); the chosen bin's midpoint, sorted over levels")
        # with ci=: a value interval from two bracketing releases at ci_share of the ε, and
        # the point's rank interval (docs/privacy.md Q.6, dpframe.mechanisms.quantile_intervals)
        from dpframe.query._quantile_plan import quantile_plan_fields

        return Plan(self.kind, self.column, **quantile_plan_fields(
            self, m, formulation, ctx, k, neighbours, count,
            lambda mech: _QuantileRelease(mech, k)))


def _level_labels(levels: Sequence[float]) -> tuple[str, ...]:
    """Output labels of several levels: ``0.25`` style where that is exact and distinct, the
    full ``repr`` otherwise (distinct levels never share a label)."""
    short = tuple(f"{v:g}" for v in levels)
    if len(set(short)) == len(short) and all(float(t) == v for t, v in zip(short, levels,
                                                                            strict=True)):
        return short
    return tuple(repr(float(v)) for v in levels)


class _QuantileRelease:
    """The quantile mechanism in the form the release pipeline logs: one log entry for all
    levels (ε is the total; the sensitivity and coefficient are the largest over levels)."""

    def __init__(self, mechanism: Any, rows_per_unit: int = 1) -> None:
        from dpframe.mechanisms.domains import interval

        k = rows_per_unit
        self.mechanism = mechanism
        self.name = "exponential-quantile"
        self.epsilon = mechanism.epsilon * k  # the share charged (calibrated at ε/k per row)
        self.epsilon_overhead = math.fsum(mechanism.epsilon_overheads) * k
        self.sensitivity = float(max(mechanism.sensitivities)) * k  # rank change per unit
        self.scale = float(1.0 / min(mechanism.coefficients))  # rank units per e-fold
        self.grid = (mechanism.upper - mechanism.lower) / mechanism.bins
        self.domain = interval(mechanism.lower, mechanism.upper)

    def sample(self, counts: np.ndarray, random_state: Any = None) -> np.ndarray:
        exact = np.rint(np.atleast_2d(counts)).astype(np.int64)
        return np.asarray(self.mechanism.sample(exact, random_state=random_state).values,
                          dtype=float)


def quantile(column: str, q: float | Sequence[float] = 0.5, *, bins: int | None = None,
             ci_share: float = 0.5) -> Quantile:
    """Query builder: quantile(s) of ``column`` at level(s) ``q`` in [0, 1] (a list of levels
    gives one answer per level, named ``<name>[<q>]``); ``bins``: public equal bins of the
    bounds (default from public facts: ``2^⌈log₂(8·ε·n)⌉`` within ``[2^16, 2^22]``, ``n`` the
    protected size and ``ε`` the release's, fewer for many groups; docs/frames.md "Quantile
    resolution"). In ``release(..., ci=level)`` it adds the rank interval's columns
    ``<name>_rank_error`` (and ``<name>_q_lower``/``<name>_q_upper`` where ``n`` is public):
    docs/privacy.md Q.6; and ``ci_share`` of its ε (default 0.5) buys the value interval
    ``<name>_lower``/``<name>_upper``."""
    return Quantile(column, q, bins, ci_share)


def median(column: str, *, bins: int | None = None, ci_share: float = 0.5) -> Quantile:
    """Query builder: median of ``column`` (the 0.5 quantile)."""
    return Quantile(column, 0.5, bins, ci_share)


# -- builders (``dpf.count()``, ``dpf.mean("age")``, ...) -----------------------------------
def count() -> Count:
    """Query builder: number of rows."""
    return Count()


def sum(column: str) -> Sum:
    """Query builder: sum of ``column``."""
    return Sum(column)


def mean(column: str) -> Mean:
    """Query builder: mean of ``column``."""
    return Mean(column)


def variance(column: str) -> Variance:
    """Query builder: sample variance (ddof=1) of ``column``."""
    return Variance(column)


def std(column: str) -> Std:
    """Query builder: sample standard deviation (ddof=1) of ``column``."""
    return Std(column)


def histogram(column: str, *, bins: int) -> Histogram:
    """Query builder: counts of ``column`` over ``bins`` equal public bins of its declared
    bounds (:class:`Histogram`), named ``<name>[<lower>,<upper>]`` in a release (and
    ``<name>[<lower>,<upper>]_lower``/``_upper`` with ``ci=``). Public edges of any spacing:
    ``frame.dp.histogram(col, edges=[...])``."""
    return Histogram(column, bins)


def value_counts(column: str, *, keys: Sequence[Any] | None = None) -> ValueCounts:
    """Query builder: counts of ``column``'s public keys (``keys``, else those declared at
    protect), named ``<name>[<key>]`` in a release (:class:`ValueCounts`)."""
    return ValueCounts(column, keys)


def proportions(column: str, *, keys: Sequence[Any] | None = None) -> KeyProportions:
    """Query builder: proportions of ``column``'s public keys (``keys``, else those declared
    at protect), summing to 1 (in each group of a group-by), named ``<name>[<key>]``
    (:class:`KeyProportions`)."""
    return KeyProportions(column, keys)


def cov(columns: Sequence[str]) -> CovarianceEntries:
    """Query builder: covariance matrix (ddof=1) of two or more bounded columns, released as
    its upper triangle ``<name>[<a>,<b>]`` (diagonal: variances). Needs the public size and
    no group-by, as ``frame.dp.cov``."""
    return CovarianceEntries(columns, "cov")


def corr(columns: Sequence[str]) -> CovarianceEntries:
    """Query builder: correlations of two or more bounded columns, released as the entries
    above the diagonal ``<name>[<a>,<b>]``. Needs the public size and no group-by, as
    ``frame.dp.corr``."""
    return CovarianceEntries(columns, "corr")


#: The statistics of one column (or of the rows: ``count``) released as noisy numbers by the
#: Laplace family, by name; ``cls.needs_column`` says whether one takes a column
#: (``cls(column)``, as ``dpf.mean(column)`` builds it). The release spec
# (:mod:`dpframe.spec._parse`)
#: names its statistics from this table, so a statistic added here is available there too.
SCALAR_STATISTICS: dict[str, type[Query]] = {
    q.kind: q for q in (Count, Sum, Mean, Variance, Std)}
