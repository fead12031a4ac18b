"""The registry of statistics: one entry per statistic a user can name.

Each statistic is one module of :mod:`dpframe.query` (its query class, its plan with the
sensitivity derivation, its builder ``dpf.<name>``) plus one :class:`StatisticEntry` here,
which says everything the other layers need to know about it by name:

* ``parameters`` — what a release spec gives it (:mod:`dpframe.spec._parse` takes its
  vocabulary from :func:`spec_statistics`), and ``build`` — the query from those parameters,
  as the builder builds it;
* ``accuracy`` — how its answer's half-width follows from its mechanisms before spending
  (:mod:`dpframe.query._accuracy`; the accuracy planner asks :func:`accuracy_of`);
* ``method``/``grouped`` — the ``frame.dp`` method that releases it (and whether
  ``frame.dp.groupby(...)`` has it too); a test checks every entry has them.

Nothing outside :mod:`dpframe.query` branches on a statistic's name
(``tests/query/test_registry.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpframe.errors import ParameterError
from dpframe.query._accuracy import (
    NO_HALF_WIDTH,
    AnswerAccuracy,
    MeanAccuracy,
    OneMeasurement,
    RankAccuracy,
    RoundedCount,
    SquareRoot,
)
from dpframe.query._count import Count
from dpframe.query._covariance import corr, cov
from dpframe.query._histogram import histogram
from dpframe.query._mean import Mean
from dpframe.query._plans import Query
from dpframe.query._quantile import median, quantile
from dpframe.query._sum import Sum
from dpframe.query._value_counts import proportions, value_counts
from dpframe.query._variance import Std, Variance

__all__ = [
    "STATISTICS",
    "StatisticArguments",
    "StatisticEntry",
    "accuracy_of",
    "spec_statistics",
]


@dataclass(frozen=True)
class StatisticArguments:
    """A statistic's parameters as a release spec gives them (only those its entry's
    ``parameters`` name are set)."""

    column: str | None = None
    columns: tuple[str, ...] = ()
    bins: int | None = None
    keys: Sequence[Any] | None = None
    q: float | Sequence[float] | None = None  # a quantile's level(s); None: 0.5
    ci_share: float | None = None  # a quantile's interval share; None: the builder's 0.5

    def one_column(self) -> str:
        """The statistic's column (a spec checks it is given before building)."""
        if self.column is None:
            raise ParameterError("this statistic needs a column")
        return self.column

    def bin_count(self) -> int:
        """The histogram's bins (a spec checks they are given before building)."""
        if self.bins is None:
            raise ParameterError("this statistic needs bins")
        return self.bins


@dataclass(frozen=True)
class StatisticEntry:
    """One statistic (module docstring). ``query_type``: its query class where one class is
    the statistic of one column or of the rows (a spec builds it as ``cls(column)``);
    ``build`` None: built only by its ``frame.dp`` method (no spec word). ``optional``: the
    parameters a spec may leave out (the builder's defaults). ``alone``: as a query's one
    ungrouped statistic, a spec releases it by its ``frame.dp`` method (whose log names it
    ``<method>(<column>)``); a histogram's ``edges`` (public bin edges) exist only there."""

    name: str
    parameters: tuple[str, ...]
    accuracy: AnswerAccuracy
    build: Callable[[StatisticArguments], Query] | None
    method: str
    grouped: bool = True
    query_type: type[Query] | None = None
    optional: tuple[str, ...] = ()
    alone: bool = False

    @property
    def in_spec(self) -> bool:
        """A release spec can name it."""
        return self.build is not None


def _share(a: StatisticArguments) -> float:
    return 0.5 if a.ci_share is None else a.ci_share


def _entries() -> tuple[StatisticEntry, ...]:
    one = ("column",)
    cells = RoundedCount(cells=True)
    return (
        StatisticEntry("count", (), RoundedCount(), lambda a: Count(), "count",
                       query_type=Count),
        StatisticEntry("sum", one, OneMeasurement(), lambda a: Sum(a.column), "sum",
                       query_type=Sum),
        StatisticEntry("mean", one, MeanAccuracy(), lambda a: Mean(a.column), "mean",
                       query_type=Mean),
        StatisticEntry("variance", one, OneMeasurement(), lambda a: Variance(a.column),
                       "variance", query_type=Variance),
        StatisticEntry("std", one, SquareRoot(), lambda a: Std(a.column), "std",
                       query_type=Std),
        StatisticEntry("histogram", ("column", "bins", "edges"), cells,
                       lambda a: histogram(a.one_column(), bins=a.bin_count()), "histogram",
                       optional=("edges",), alone=True),
        StatisticEntry("value_counts", ("column", "keys"), cells,
                       lambda a: value_counts(a.one_column(), keys=a.keys), "value_counts",
                       optional=("keys",), alone=True),
        StatisticEntry("proportions", ("column", "keys"), NO_HALF_WIDTH,
                       lambda a: proportions(a.one_column(), keys=a.keys), "proportions",
                       optional=("keys",)),
        StatisticEntry("cov", ("columns",), NO_HALF_WIDTH, lambda a: cov(list(a.columns)),
                       "cov", grouped=False),
        StatisticEntry("corr", ("columns",), NO_HALF_WIDTH, lambda a: corr(list(a.columns)),
                       "corr", grouped=False),
        StatisticEntry("quantile", ("column", "q", "bins", "ci_share"), RankAccuracy(),
                       lambda a: quantile(a.one_column(), 0.5 if a.q is None else a.q,
                                          bins=a.bins, ci_share=_share(a)), "quantile",
                       optional=("q", "bins", "ci_share")),
        StatisticEntry("median", ("column", "bins", "ci_share"), RankAccuracy(),
                       lambda a: median(a.one_column(), bins=a.bins, ci_share=_share(a)),
                       "median", optional=("bins", "ci_share")),
        # not a word of a release spec (its unit is one row): built by its frame.dp method;
        # its query class lives with the privacy unit it counts
        # (:class:`dpframe.provenance._units.CountUnits`, a layer above)
        StatisticEntry("count_units", (), RoundedCount(), None, "count_units"),
    )


#: Every statistic, by name, in the order a spec lists its vocabulary. (A median plans as
#: ``"quantile"``: the plan's name finds the same accuracy rule.)
STATISTICS: Mapping[str, StatisticEntry] = {e.name: e for e in _entries()}


def accuracy_of(name: str) -> AnswerAccuracy:
    """The accuracy rule of the statistic (or plan) ``name``; a plan of no registered
    statistic has no half-width before spending."""
    entry = STATISTICS.get(name)
    return NO_HALF_WIDTH if entry is None else entry.accuracy


def spec_statistics() -> tuple[StatisticEntry, ...]:
    """The statistics a release spec names, in the registry's order."""
    return tuple(e for e in STATISTICS.values() if e.in_spec)
