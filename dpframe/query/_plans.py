r"""The plan of a statistic: what a query asks for, reading no data.

A query (:class:`Query`) turns the public facts about a frame (:class:`PlanContext`: declared
bounds, whether its size is public, a public row cap) into a :class:`Plan`: a list of
:class:`Measurement`\ s, each one noisy number per group with its own sensitivity, output
domain (the mechanism's feasible set), share of ε and *kind* (how it is released:
:mod:`dpframe.query._measurement_kinds`), plus a post-processing step that turns the noisy
measurements into the answer and, where one exists, a confidence interval computed from the
mechanisms and their raw outputs (``docs/privacy.md``, intervals I.2, I.3).
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpframe.errors import ParameterError, PrivateSizeError
from dpframe.mechanisms.intervals import (
    composed_interval,
    confidence_interval,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query._aggregates import Agg, FixedPoint, UnitBound
from dpframe.query._measurement_kinds import ADDED_NOISE, MeasurementKind

__all__ = [
    "CiColumns",
    "Interval",
    "Measurement",
    "Plan",
    "PlanContext",
    "Query",
    "Statistic",
    "clip_one",
    "composed",
    "require_bounds",
    "rows_of",
    "scaled",
    "single_interval",
]


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
    #: the data set's neighbour definition (:mod:`dpframe.accounting.neighbours`): under
    #: ``"add_remove"`` ``size_public`` is False, a row touches one cell and one group, and
    #: ``n``/``count_cap`` are the declared ``max_rows`` (``cap_declared``), never the data's
    #: row count; without ``max_rows`` ``count_cap`` is 2³¹ and a fixed-point grid is refused
    neighbours: str = "replace"
    cap_declared: bool = True
    #: the query's kind, for messages
    kind_name: str | None = None

    @property
    def add_remove(self) -> bool:
        """One row added or removed (the row count private), not one row replaced."""
        return self.neighbours == "add_remove"

    @property
    def rows_per_unit(self) -> int:
        """``k``: the most rows one privacy unit contributes after bounding (1 without units)."""
        return 1 if self.unit is None else self.unit.max_rows

    def rows(self) -> Agg:
        """The row count this query's statistics are over (rows where the column is present
        when it drops missing values)."""
        return Agg("rows", self.column if self.drops else None)

    def require_row_cap(self, what: str) -> None:
        """Refuse (before anything is read) a statistic that needs a public bound on the row
        count of an add/remove data set protected without ``max_rows=``."""
        if not self.cap_declared:
            raise PrivateSizeError(
                f"{what} needs a public bound on the number of rows (it sizes the exact "
                "fixed-point sum or the public grid), and under neighbours='add_remove' the "
                "row count is private: declare one from outside the data at protect, e.g. "
                "dpf.protect(..., neighbours='add_remove', max_rows=1_000_000). Counts and "
                "histograms need none. Nothing was read or spent."
            )

    def fixed_point(self, center: float, squares: bool) -> FixedPoint:
        lo, hi = require_bounds(self, "query")
        self.require_row_cap(f"dp.{self.kind_name}" if self.kind_name else "this statistic")
        return FixedPoint.choose(lo, hi, center, max(self.n, 1), squares)


Statistic = Callable[[Mapping[Agg, np.ndarray]], np.ndarray]
#: ``interval(mechanisms, noisy, level) -> (lower, upper)``: a confidence interval for the
#: query's answer from its measurements' mechanisms and raw (pre-post-processing) outputs,
#: keyed by measurement name (``None``: a single-point domain, released without noise).
#: Post-processing: no privacy cost.
Interval = Callable[[Mapping[str, "Mechanism | None"], Mapping[str, np.ndarray], float],
                    tuple[np.ndarray, np.ndarray]]
#: ``ci_columns(mechanisms, level) -> {suffix: value}``: a non-value interval's columns
#: (quantiles: the rank interval), from the level and public parameters only.
CiColumns = Callable[[Mapping[str, "Mechanism | None"], float], dict[str, float]]


def single_interval(name: str, lower: float, upper: float, *, offset: float = 0.0,
                    integer: bool = False, sqrt: bool = False) -> Interval:
    """Interval of an answer that is one measurement, shifted by a public ``offset`` (and its
    square root for a std), kept in ``[lower, upper]``: exact test inversion of that
    measurement's mechanism (``docs/privacy.md``, intervals I.2)."""

    def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                 level: float) -> tuple[np.ndarray, np.ndarray]:
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

    def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                 level: float) -> tuple[np.ndarray, np.ndarray]:
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

    ``kind``: how the release draws it, named by the query that plans it
    (:mod:`dpframe.query._measurement_kinds`): added noise (the default), a selection
    (``make`` builds its mechanism) or an adaptive domain (``domain_after`` and
    ``sensitivity_after`` set). A measurement whose fields do not fit its kind is refused at
    construction (a programming error, found before anything is read).
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
    make: Callable[[float, float], Mechanism] | None = None
    kind: MeasurementKind = field(default=ADDED_NOISE, kw_only=True)

    def __post_init__(self) -> None:
        self.kind.check(self)


def clip_one(x: float, lower: float, upper: float) -> float:
    """``np.clip`` of one double between two bounds that are not NaN, bit for bit (a NaN stays
    NaN, ties between the signed zeros keep ``x``'s sign, as numpy's loop does), without the
    arrays: Python's ``max`` and ``min`` keep their first argument on a tie."""
    return min(max(x, lower), upper)


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
    ci_columns: CiColumns | None = None
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

    @functools.cached_property
    def aggregates(self) -> tuple[Agg, ...]:
        """Every aggregate the measurements need, once each, in order (computed once: a
        plan is immutable, and a repeated query reuses its plan)."""
        return tuple(dict.fromkeys(a for m in self.measurements for a in m.needs))


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

    def columns_logged(self) -> tuple[str, ...]:
        """The columns its log entries name (``columns``): those it reads, by default."""
        return self.columns_read()

    @abstractmethod
    def plan(self, ctx: PlanContext) -> Plan:
        """Measurements and post-processing for this query in context ``ctx``."""


def require_bounds(ctx: PlanContext, kind: str) -> tuple[float, float]:
    if ctx.bounds is None:  # pragma: no cover - checked by the caller with a better message
        raise ParameterError(f"{kind} needs declared bounds for its column")
    return ctx.bounds
