"""How a spec's query is released: the API call a user would make for it, in one place, so the
run makes that call and the dry run plans it (:func:`dpframe.release._pipeline.plan` and the
accuracy planner on the same arguments the call passes to the pipeline).

* Several statistics, or one in a group-by: ``frame.dp.release({name: dpf.<statistic>(...)})``
  (``frame.dp.groupby(col, keys=...).release(...)``; several columns:
  ``groupby([a, b], keys=[(x, y), ...])``), with ``ci=`` where the query asks for intervals.
* A histogram over public ``edges``: ``frame.dp.histogram(col, edges=[...])`` (grouped:
  ``groupby(...).histogram``), a group-by count over the hidden bin column.
* A query's one ungrouped statistic whose registry entry says ``alone`` (a histogram, a key
  count): its ``frame.dp`` method, ``frame.dp.histogram(col, bins=B)`` or
  ``frame.dp.value_counts(col, keys=...)``, so the log names it as the API does
  (``value_counts(<col>)``, read as a count of ``<col>``).

The filter (``filter = [...]``) is ``frame.dp.filter(...)`` of narwhals expressions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

from dpframe.frames import bins as bins_
from dpframe.frames import derivations
from dpframe.provenance import resolve
from dpframe.query import statistics as q_
from dpframe.spec._model import Condition, QuerySpec, StatisticSpec
from dpframe.spec._vocabulary import entry_of, library_query

__all__ = ["PipelineArguments", "build_queries", "compile_filter", "describe_filter",
           "filtered", "method_of", "pipeline_arguments", "release_query"]


# -- filters ----------------------------------------------------------------------------------
#: Each filter operator (:data:`dpframe.spec._filters.FILTER_OPS`) as a narwhals expression of
#: the column and the condition's value.
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda col, v: col == v,
    "!=": lambda col, v: col != v,
    "<": lambda col, v: col < v,
    "<=": lambda col, v: col <= v,
    ">": lambda col, v: col > v,
    ">=": lambda col, v: col >= v,
    "in": lambda col, v: col.is_in(list(v)),
    "not in": lambda col, v: ~col.is_in(list(v)),
    "between": lambda col, v: col.is_between(v[0], v[1], closed="both"),
    "is null": lambda col, _: col.is_null(),
    "is not null": lambda col, _: ~col.is_null(),
}


def _expr(c: Condition) -> Any:
    import narwhals as nw

    if c.any_of:
        return reduce(lambda a, b: a | b, (_expr(x) for x in c.any_of))
    assert c.column is not None
    build = _OPERATORS.get(c.op or "")
    if build is None:
        raise AssertionError(c.op)  # pragma: no cover - checked by the parser
    return build(nw.col(c.column), c.value)


def compile_filter(conditions: tuple[Condition, ...]) -> list[Any]:
    """The narwhals expressions of a filter (one per condition; all must hold)."""
    return [_expr(c) for c in conditions]


def describe_filter(conditions: tuple[Condition, ...]) -> str | None:
    """The filter as readable text, e.g. ``age >= 18 and (region == 'north' or ...)``."""
    if not conditions:
        return None

    def one(c: Condition) -> str:
        if c.any_of:
            return "(" + " or ".join(one(x) for x in c.any_of) + ")"
        return f"{c.column} {c.op}" + ("" if c.value is None else f" {c.value!r}")

    return " and ".join(one(c) for c in conditions)


def filtered(q: QuerySpec, frame: Any) -> Any:
    """The frame a query releases from: ``frame`` (the protected input with the spec's
    derived columns), filtered by ``frame.dp.filter`` if the query has a filter."""
    return frame.dp.filter(*compile_filter(q.filter)) if q.filter else frame


# -- the call ---------------------------------------------------------------------------------
def build_queries(q: QuerySpec) -> tuple[dict[str, Any], dict[str, float]]:
    """The ``{name: dpf.count()/dpf.mean(col)/dpf.histogram(col, bins=B)/...}`` of one query
    (the library's own query objects, :func:`dpframe.spec._vocabulary.library_query`; a
    histogram over edges has none: ``frame.dp.histogram`` releases it) and its weights."""
    return ({s.name: library_query(s) for s in q.statistics if s.edges is None},
            {s.name: s.weight for s in q.statistics})


def method_of(q: QuerySpec) -> str:
    """The ``frame.dp`` method that releases the query: its one statistic's own method (a
    histogram over public edges; a query's one ungrouped statistic whose registry entry says
    ``alone``), else ``"release"``."""
    first = q.statistics[0]
    entry = entry_of(first)
    if first.edges is not None or (q.single and q.group_by is None and entry.alone):
        return entry.method
    return "release"


def _method_parameters(s: StatisticSpec) -> dict[str, Any]:
    """The keyword arguments of a statistic's own ``frame.dp`` method, by the parameters its
    registry entry names: public edges or equal bins, public keys."""
    taken = entry_of(s).parameters
    out: dict[str, Any] = {}
    if "edges" in taken:
        out = {"edges": list(s.edges)} if s.edges is not None else {"bins": s.bins}
    if "keys" in taken:
        out["keys"] = None if s.keys is None else list(s.keys)
    return out


def _group_keys(q: QuerySpec) -> list[Any] | None:
    """The ``keys=`` of ``frame.dp.groupby``: a list of keys, of key tuples, or None (the
    declared keys: every combination of the columns' keys)."""
    if q.keys is None:
        return None
    return [tuple(k) if isinstance(k, tuple) else k for k in q.keys]


def _group_arg(q: QuerySpec) -> str | list[str]:
    assert q.group_by is not None
    return q.group_by if isinstance(q.group_by, str) else list(q.group_by)


def release_query(q: QuerySpec, frame: Any, *, epsilon: float, delta: float,
                  weights: Mapping[str, float], random_state: Any) -> Any:
    """Release query ``q`` from ``frame`` (its filter applied here) by the API call of
    :func:`method_of`; returns the release table (its log travels with it)."""
    derived = filtered(q, frame)
    common: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "mechanism": q.mechanism,
                              "random_state": random_state, "ci": q.ci}
    target = derived.dp if q.group_by is None else derived.dp.groupby(
        _group_arg(q), keys=_group_keys(q))
    s = q.statistics[0]
    method = method_of(q)
    if method != "release":
        return getattr(target, method)(s.column, **_method_parameters(s), **common)
    return target.release(build_queries(q)[0], weights=dict(weights), **common)


@dataclass(frozen=True)
class PipelineArguments:
    """What the query's API call passes to the release pipeline
    (:func:`dpframe.release._pipeline.run`): the frame (filtered, and binned for a histogram
    over edges), the queries by name, the group column(s) and their keys. The dry run plans
    these (:func:`dpframe.release._pipeline.plan`, the accuracy planner)."""

    frame: Any
    queries: dict[str, Any]
    group_by: str | tuple[str, ...] | None
    keys: list[Any] | None


def _binned_arguments(q: QuerySpec, s: StatisticSpec, frame: Any) -> PipelineArguments:
    """As ``frame.dp.histogram(col, edges=...)`` (or ``bins=B``: equal edges of the bounds):
    a count per bin of the hidden bin column (``histogram(<col>)`` in the log); grouped, as
    ``groupby(...).histogram``: one ``count`` per (group, bin)."""
    assert s.column is not None
    edges = bins_.histogram_edges(s.column, None if s.edges is None else list(s.edges),
                                  s.bins if s.edges is None else None, resolve(frame).bounds)
    binned = derivations.binned(frame, s.column, edges, None)
    cells = list(range(len(edges) - 1))
    if q.group_by is None:
        label = f"{entry_of(s).method}({s.column})"
        return PipelineArguments(binned, {label: q_.count()}, bins_.BIN, cells)
    groups = q.group_columns
    group_keys = _group_keys(q)
    if group_keys is None:
        declared = resolve(frame).keys
        combos = list(itertools.product(*(declared[c] for c in groups)))
    else:
        combos = [k if isinstance(k, tuple) else (k,) for k in group_keys]
    return PipelineArguments(binned, {"count": q_.count()}, (*groups, bins_.BIN),
                             [(*g, c) for g in combos for c in cells])


def pipeline_arguments(q: QuerySpec, frame: Any) -> PipelineArguments:
    """The pipeline's arguments of the query's API call (:class:`PipelineArguments`), from
    ``frame`` (the protected input with the derived columns, or its stand-in)."""
    derived = filtered(q, frame)
    s = q.statistics[0]
    method = method_of(q)
    if method == "release":
        return PipelineArguments(derived, build_queries(q)[0], q.group_by, _group_keys(q))
    if "edges" in entry_of(s).parameters:  # a count per bin of the column
        return _binned_arguments(q, s, derived)
    assert s.column is not None and q.group_by is None  # a count per key of the column
    return PipelineArguments(derived, {f"{method}({s.column})": q_.count()}, s.column,
                             _method_parameters(s).get("keys"))
