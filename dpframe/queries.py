r"""Query specifications: sensitivity, output domain and formulation of each statistic.

A query (:class:`Count`, :class:`Sum`, :class:`Mean`, :class:`Variance`, :class:`Std`) turns
the public facts about a frame (its declared bounds, whether its size is public, a public row
cap) into a :class:`Plan`: a list of :class:`Measurement`\ s, each one noisy number per group
with its own sensitivity, output domain (the mechanism's feasible set) and share of ε, plus a
post-processing step that turns the noisy measurements into the answer. Nothing here reads
data; :mod:`dpframe.engine` computes the exact aggregates the measurements need.

Notation: bounds ``[l, u]`` of the column, width ``w = u − l``; ``n`` the public row count of
the protected frame. Values outside ``[l, u]`` are clamped first (a per-row map, so neighbours
stay neighbours). Every value is then represented in fixed point, ``x = c + k·q`` with an
integer ``k ∈ [k_lo, k_hi]``, a public centre ``c`` and a power-of-two quantum ``q``
(:class:`dpframe.engine.FixedPoint`); ``k_lo, k_hi`` are chosen so that ``c + k·q`` stays in
``[l, u]``, so the fixed-point data is itself a data set in ``[l, u]`` and every bound below
holds for it exactly.

Neighbours (DESIGN §2). The privacy unit is one row of the protected frame and neighbouring
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

Sensitivities and domains (each checked by brute force in ``tests/test_sensitivity.py``):

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

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from dpframe.errors import ParameterError, UnsupportedInputError

__all__ = [
    "Aggregates",
    "Count",
    "Mean",
    "Measurement",
    "Plan",
    "PlanContext",
    "Query",
    "Std",
    "Sum",
    "Variance",
    "count",
    "mean",
    "std",
    "sum",
    "variance",
]

FP_SLACK = 2.0**-52  # two half-ulps of a correctly rounded quotient, relative to its bound


def round_up(x: Fraction | float) -> float:
    """The smallest float ≥ x (for upper ends of domains)."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < Fraction(x) else f


def round_down(x: Fraction | float) -> float:
    """The largest float ≤ x (for lower ends of domains)."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > Fraction(x) else f


@dataclass(frozen=True)
class PlanContext:
    """The public facts a plan may use. Never holds data-derived values."""

    size_public: bool
    n: int | None  # public row count of the protected frame (None when unknown)
    row_cap: int  # public cap on the rows any aggregation may see (fixed-point range)
    bounds: tuple[float, float] | None  # declared bounds of the queried column
    grouped: bool = False
    count_cap: float = math.inf  # public upper bound on any count (n on the protected frame)


class Aggregates(NamedTuple):
    """Exact integer aggregates of one group in fixed point ``x = c + k·q``.

    ``rows``: row count; ``k_sum``: Σk; ``k_sq``: Σk² (Python ints, exact). A named tuple:
    a group-by over many public keys builds one per key.
    """

    rows: int
    k_sum: int = 0
    k_sq: int = 0
    q: float = 1.0


@dataclass(frozen=True)
class Measurement:
    """One noisy number per group: ``statistic(aggregates)`` plus noise calibrated to
    ``sensitivity`` on the feasible set ``[lower, upper]`` (mechanism coordinates)."""

    name: str
    statistic: Callable[[Aggregates], float]
    sensitivity: float
    lower: float
    upper: float
    weight: float  # share of the query's ε (and δ)
    magnitude: float | None = None  # public bound on |statistic| (for unbounded domains)
    vectorised: bool = False  # statistic accepts an Aggregates of per-group arrays


def rows_statistic(a: Aggregates) -> np.ndarray:
    """Row count(s) as doubles (exact below 2⁵³); vectorised over groups."""
    return np.asarray(a.rows, dtype=np.float64)


def sum_statistic(a: Aggregates) -> np.ndarray:
    """``q·Σk``: exact (an integer below 2⁵³ times a power of two); vectorised."""
    return np.asarray(a.k_sum, dtype=np.float64) * a.q


def sum_sq_statistic(a: Aggregates) -> np.ndarray:
    """``q²·Σk²``: exact for the same reason; vectorised."""
    return np.asarray(a.k_sq, dtype=np.float64) * (a.q * a.q)


@dataclass(frozen=True)
class Plan:
    """How to answer a query: measurements and post-processing."""

    query: str
    column: str | None
    measurements: tuple[Measurement, ...]
    finalize: Callable[[dict[str, np.ndarray]], np.ndarray]
    formulation: str
    center: float = 0.0  # fixed-point centre c
    squares: bool = False  # needs Σk²
    needs_values: bool = True  # False for count
    public_size: bool = False  # the formulation reads the public row count n
    notes: dict[str, str] = field(default_factory=dict)


def _frac(x: float) -> Fraction:
    return Fraction(x)


def _width(bounds: tuple[float, float]) -> Fraction:
    return _frac(bounds[1]) - _frac(bounds[0])


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

    def __init__(self, column: str | None = None) -> None:
        if self.needs_column and (not isinstance(column, str) or not column):
            raise ParameterError(
                f"{self.kind}() needs a column name, e.g. dpf.{self.kind}('income')"
            )
        self.column = column

    def __repr__(self) -> str:
        return f"dpf.{self.kind}({self.column!r})" if self.column else f"dpf.{self.kind}()"

    @abstractmethod
    def plan(self, ctx: PlanContext) -> Plan:
        """Measurements and post-processing for this query in context ``ctx``."""


class Count(Query):
    r"""Number of rows.

    Replacing one row of a size-``n`` frame leaves the count at ``n``; on a derived
    (private-size) frame a replacement upstream adds, removes or replaces one row, moving the
    count by at most 1. So Δ = 1 in both cases. Domain ``[0, n]`` when ``n`` is public or is a
    public cap on a group's size; ``[0, ∞)`` otherwise. (On the protected frame itself the
    count is public; it is still released with noise so that every count is treated alike.)
    """

    kind = "count"
    needs_column = False

    def plan(self, ctx: PlanContext) -> Plan:
        upper = float(ctx.count_cap) if ctx.count_cap > 0 else math.inf
        m = Measurement("count", rows_statistic, 1.0, 0.0, upper, 1.0,
                        float(ctx.row_cap), vectorised=True)
        return Plan(
            "count",
            None,
            (m,),
            lambda v: np.clip(v["count"], 0.0, upper),
            "noisy count" + (" (public n)" if ctx.size_public else " (private size)"),
            needs_values=False,
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
    ``max(|l|, |u|)`` of DESIGN §4 is too small when ``l < 0 < u``: a replacement from ``l`` to
    ``u`` moves the sum by ``w``.) The row count is unknown, so the domain is ``[0, ∞)`` when
    ``l ≥ 0``, ``(−∞, 0]`` when ``u ≤ 0``, else the real line.
    """

    kind = "sum"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = _require_bounds(ctx, "sum")
        w = _width((lo, hi))
        if ctx.size_public and not ctx.grouped:
            n = ctx.n or 0
            up = round_up(n * w)
            m = Measurement(
                "sum", sum_statistic, _interval_sensitivity(w, 0.0, up), 0.0, up, 1.0,
                vectorised=True,
            )
            base_lo, base_hi = round_down(n * _frac(lo)), round_up(n * _frac(hi))
            offset = n * _frac(lo)

            def fin(v: dict[str, np.ndarray]) -> np.ndarray:
                return np.clip(float(offset) + v["sum"], base_lo, base_hi)

            return Plan("sum", self.column, (m,), fin, "shifted sum Σ(x−l) + n·l (public n)",
                        center=lo, public_size=True)
        delta = max(w, abs(_frac(lo)), abs(_frac(hi)))
        d_lo = 0.0 if lo >= 0 else -math.inf
        d_hi = 0.0 if hi <= 0 else math.inf
        mag = round_up(ctx.row_cap * max(abs(_frac(lo)), abs(_frac(hi))))
        m = Measurement("sum", sum_statistic, round_up(delta), d_lo, d_hi, 1.0, mag,
                        vectorised=True)
        return Plan("sum", self.column, (m,), lambda v: np.clip(v["sum"], d_lo, d_hi),
                    "direct sum, add/remove/replace sensitivity (private size)", center=0.0)


class Mean(Query):
    r"""Mean of a bounded column.

    *Public size.* mean = l + Σ(x − l)/n; the second term lies in ``[0, w]`` and one
    replacement moves it by at most ``w/n``. Released in these shifted coordinates with
    Δ = w/n + 2⁻⁵²·w (the rounding slack of the quotient, see module docstring), then ``l`` is
    added and the answer kept in ``[l, u]`` (post-processing).

    *Private size.* Size-free formulation: a noisy count N (Δ = 1, ε/2) and a noisy centred sum
    S = Σ(x − c), c = (l + u)/2 (ε/2). Each centred term lies in ``[−w/2, w/2]``: add/remove
    moves S by ≤ w/2, replace by ≤ w, so Δ = w; domain the real line. The answer
    c + S/max(N, 1), clamped to ``[l, u]``, is post-processing of two ε/2 releases.
    Centring makes the sum's sensitivity w instead of max(|l|, |u|), which matters for bounds
    far from zero.
    """

    kind = "mean"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = _require_bounds(ctx, "mean")
        w = _width((lo, hi))
        if ctx.size_public and not ctx.grouped:
            n = ctx.n or 1
            wf = round_up(w)
            delta = w / n + Fraction(FP_SLACK) * w

            def stat(a: Aggregates) -> float:
                return float(Fraction(a.k_sum) * Fraction(a.q) / n)

            m = Measurement("mean", stat, _interval_sensitivity(delta, 0.0, wf), 0.0, wf, 1.0)

            def fin(v: dict[str, np.ndarray]) -> np.ndarray:
                return np.clip(lo + v["mean"], lo, hi)

            return Plan("mean", self.column, (m,), fin, "shifted mean l + Σ(x−l)/n (public n)",
                        center=lo, public_size=True)
        c = _center(lo, hi)
        count_upper = float(ctx.count_cap) if ctx.count_cap > 0 else math.inf
        half = max(_frac(hi) - _frac(c), _frac(c) - _frac(lo))
        cnt = Measurement("count", rows_statistic, 1.0, 0.0, count_upper, 0.5,
                          float(ctx.row_cap), vectorised=True)
        s = Measurement("sum", sum_statistic, round_up(w), -math.inf, math.inf, 0.5,
                        round_up(ctx.row_cap * half), vectorised=True)

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            n_hat = np.maximum(v["count"], 1.0)
            return np.clip(c + v["sum"] / n_hat, lo, hi)

        return Plan("mean", self.column, (cnt, s), fin,
                    "noisy centred sum / noisy count, ε split 1/2 + 1/2 (private size)",
                    center=c)


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
            n = ctx.n or 0
            if n < 2:
                raise UnsupportedInputError(
                    f"{self.kind} with ddof=1 needs at least 2 rows; the protected frame has "
                    f"{n}. Protect a larger frame."
                )
            vmax = w * w / 4 * Fraction(n, n - 1)
            up = round_up(vmax)
            delta = w * w / n + Fraction(FP_SLACK) * vmax

            def stat(a: Aggregates) -> float:
                q2 = Fraction(a.q) ** 2
                return float(q2 * (n * a.k_sq - a.k_sum * a.k_sum) / (n * (n - 1)))

            m = Measurement("variance", stat, _interval_sensitivity(delta, 0.0, up), 0.0, up, 1.0)
            return Plan(self.kind, self.column, (m,), self._post(lambda v: np.clip(
                v["variance"], 0.0, up)), "bounded-domain variance, ddof=1 (public n)",
                center=c, squares=True, public_size=True)
        count_upper = float(ctx.count_cap) if ctx.count_cap > 0 else math.inf
        third = 1.0 / 3.0
        half = max(_frac(hi) - _frac(c), _frac(c) - _frac(lo))  # ≈ w/2; exact for float c
        cnt = Measurement("count", rows_statistic, 1.0, 0.0, count_upper, third,
                          float(ctx.row_cap), vectorised=True)
        s = Measurement("sum", sum_statistic, round_up(w), -math.inf, math.inf, third,
                        round_up(ctx.row_cap * half), vectorised=True)
        ss = Measurement("sum_sq", sum_sq_statistic, round_up(half * half), 0.0,
                         math.inf, third, round_up(ctx.row_cap * half * half), vectorised=True)
        w2 = float(w * w) / 4

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            n_hat = np.maximum(v["count"], 2.0)
            var = (v["sum_sq"] - v["sum"] ** 2 / n_hat) / (n_hat - 1)
            return np.clip(var, 0.0, w2 * n_hat / (n_hat - 1))

        return Plan(self.kind, self.column, (cnt, s, ss), self._post(fin),
                    "noisy count, centred sum and sum of squares, ε split in thirds "
                    "(private size)", center=c, squares=True)

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
