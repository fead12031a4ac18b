"""The checked release spec: its queries, statistics, filter conditions and input, and what one
run spends (:func:`dpframe.spec._parse.parse_spec` builds it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpframe.accounting.neighbours import Neighbours
from dpframe.errors import SpecError
from dpframe.release import MECHANISMS as RELEASE_MECHANISMS
from dpframe.spec._toml import Path_, _Locator

#: The library's mechanisms (:data:`dpframe.release._request.MECHANISMS`). A spec's δ goes to
#: the queries whose mechanism can use it: ``"bounded"``, and ``"auto"`` (the default), which
#: may choose it.
MECHANISMS = RELEASE_MECHANISMS
#: The mechanisms a query's share of δ goes to.
DELTA_MECHANISMS = ("bounded", "auto")
#: Shares of ε must add up to 1 within this (they are written as decimals).
SHARE_TOLERANCE = 1e-9
#: Default probability that a released value is within its target accuracy of the truth.
DEFAULT_LEVEL = 0.95


@dataclass(frozen=True)
class Condition:
    """One filter condition: ``column op value``, or (``any_of``) the disjunction of several
    conditions lists (``{any = [[...], [...]]}`` is not needed: each element of ``any`` is one
    condition). ``path``: where it is in the spec."""

    column: str | None
    op: str | None
    value: Any
    any_of: tuple[Condition, ...] = ()
    path: Path_ = ()


@dataclass(frozen=True)
class StatisticSpec:
    """One statistic of a query: ``kind`` (one of :data:`KINDS`) of ``column`` (or of
    ``columns``: cov, corr), with ``bins`` (histogram) or public ``keys`` (value_counts,
    proportions; None: the column's keys under ``[keys]``), with a relative ``weight`` of the
    query's ε, or (``target``) the half-width it must reach at its query's ``level``, which
    sets its ε (:mod:`dpframe.spec._plan`)."""

    name: str
    kind: str
    column: str | None
    weight: float
    path: Path_ = ()
    target: float | None = None
    bins: int | None = None
    keys: tuple[Any, ...] | None = None
    columns: tuple[str, ...] = ()
    #: quantile levels (a float, or a tuple: one answer per level), as ``dpf.quantile(q=)``
    q: float | tuple[float, ...] | None = None
    #: public histogram edges, as ``frame.dp.histogram(edges=)``
    edges: tuple[float, ...] | None = None
    #: the share of a quantile's ε that buys its value interval, as ``dpf.quantile(ci_share=)``
    ci_share: float | None = None

    def describe(self) -> str:
        """The statistic as a spec writes it, e.g. ``mean(income)``,
        ``histogram(age, bins=10)``, ``cov(age, income)``, ``quantile(age, q=[0.25, 0.75])``."""
        if self.columns:
            return f"{self.kind}({', '.join(self.columns)})"
        if self.edges is not None:
            return f"{self.kind}({self.column}, {len(self.edges) - 1} bins over public edges)"
        if self.q is not None:
            levels = ", ".join(f"{x:g}" for x in (self.q if isinstance(self.q, tuple)
                                                   else (self.q,)))
            return f"{self.kind}({self.column}, q=[{levels}])"
        if self.bins is not None:
            return f"{self.kind}({self.column}, bins={self.bins})"
        if self.keys is not None:
            return f"{self.kind}({self.column}, {len(self.keys)} keys)"
        return f"{self.kind}({self.column or ''})"

    def columns_named(self) -> tuple[str, ...]:
        """Every column the statistic names."""
        return (self.column,) if self.column is not None else self.columns


@dataclass(frozen=True)
class QuerySpec:
    """One ``[[query]]``: one release (one pass over the data), its ``share`` of the run's ε
    and δ — or, with ``share`` None, target accuracies on its statistics (each within its
    ``target`` of the truth with probability ≥ ``level``), which set its ε — and optional
    ``group_by`` (with public ``keys``) and ``filter``."""

    name: str
    share: float | None
    statistics: tuple[StatisticSpec, ...]
    #: one key column, or several (``group_by = ["region", "sex"]``: their keys' combinations)
    group_by: str | tuple[str, ...] | None
    #: public keys (several columns: key tuples; None there: the product of ``[keys]``)
    keys: tuple[Any, ...] | None
    filter: tuple[Condition, ...]
    mechanism: str
    path: Path_ = ()
    level: float = DEFAULT_LEVEL
    #: the level of the intervals released with every answer (``ci=`` of the API), or None
    ci: float | None = None
    #: a public lower bound on the rows behind a private-size mean (``min_rows=`` of the
    #: API's accuracy planner): the dry run's ± for it
    min_rows: int | None = None
    #: one statistic given in the query's own table (``kind = ...``), named like the query
    single: bool = False

    @property
    def group_columns(self) -> tuple[str, ...]:
        """The group column(s), as a tuple (empty without ``group_by``)."""
        if self.group_by is None:
            return ()
        return (self.group_by,) if isinstance(self.group_by, str) else self.group_by

    @property
    def targeted(self) -> bool:
        """The query's ε comes from target accuracies, not from a share."""
        return self.share is None

    def columns_read(self) -> tuple[str, ...]:
        """The columns the statistics name."""
        return tuple(dict.fromkeys(c for s in self.statistics for c in s.columns_named()))


@dataclass(frozen=True)
class DerivedColumn:
    """One column of ``[with_columns]``: ``frame.dp.with_columns(<expr>.alias(name),
    bounds={name: bounds}, missing={name: missing})`` on the protected input, before any
    query (``expr``: the arithmetic text, compiled by :mod:`dpframe.spec._derived`)."""

    name: str
    expr: str
    bounds: tuple[float, float] | None
    missing: str | float | None
    path: Path_ = ()


@dataclass(frozen=True)
class InputSpec:
    """Where the data is: ``path`` (a file or a glob, absolute), its ``format``, the
    ``engine`` that reads it lazily and, for CSV, the declared ``columns`` types (column ->
    one of :data:`CSV_TYPES`; undeclared columns are strings)."""

    path: str
    format: str
    engine: str
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ReleaseSpec:
    """A checked release spec. Paths are absolute (relative ones are resolved against the
    spec file's folder). ``epsilon``/``delta``: the data set's total budget (the ledger's);
    ``run_epsilon``/``run_delta``: what one run of this spec spends, split by the queries'
    shares."""

    source: str
    text: str
    input: InputSpec
    unit: str
    epsilon: float
    delta: float
    ledger: Path
    run_epsilon: float
    run_delta: float
    mechanism: str
    bounds: dict[str, tuple[float, float]]
    keys: dict[str, tuple[Any, ...]]
    #: per column, or one fill word for every bounded column (``missing = "midpoint"``)
    missing: dict[str, str | float] | str
    queries: tuple[QuerySpec, ...]
    output: Path
    overwrite: bool
    #: the derived columns of ``[with_columns]``, made before any query
    derived: tuple[DerivedColumn, ...] = ()
    #: the neighbour definition (``privacy.neighbours``, protect's ``neighbours=``); None:
    #: not given (replace-one, the library's default)
    neighbours: Neighbours | None = None
    #: a public bound on the rows (``privacy.max_rows``, protect's ``max_rows=``)
    max_rows: int | None = None
    locator: _Locator = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def line_of(self, path: Path_) -> int | None:
        """The spec line of a key path (see :class:`_Locator`)."""
        return self.locator.line_of(path) if self.locator is not None else None

    def error(self, path: Path_, message: str) -> SpecError:
        """A :class:`SpecError` about ``path``, naming its line."""
        return SpecError(message, source=self.source, line=self.line_of(path))

    def query_epsilon(self, q: QuerySpec, targeted_epsilon: float = 0.0) -> float:
        """The ε of a query with a share: its share of what the run's ε leaves after the
        ``targeted_epsilon`` the queries with target accuracies need (:mod:`dpframe.spec._plan`
        computes those; they depend on the public n)."""
        assert q.share is not None, "a query with target accuracies gets its ε from the plan"
        return (self.run_epsilon - targeted_epsilon) * q.share

    def query_delta(self, q: QuerySpec) -> float:
        """The δ of one query's release: its share of the run's δ when its mechanism is
        ``"bounded"`` or ``"auto"`` (which may choose bounded), else 0 (that part of δ is left
        unspent).
        Queries with target accuracies spend no δ (their ε is found for δ = 0)."""
        if q.share is None:
            return 0.0
        return self.run_delta * q.share if q.mechanism in DELTA_MECHANISMS else 0.0
