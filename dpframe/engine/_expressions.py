"""The generic path: the per-row expressions and sums, collected, in the frame's own engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine._frame_engine import FrameEngine
from dpframe.engine._row_expressions import (
    aligned,
    is_float,
    row_expressions,
)
from dpframe.query import Agg

__all__: list[str] = []


def _expression_sums(
    native: Any,
    backend: FrameEngine,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    source: Any = None,
) -> dict[Agg, np.ndarray]:
    """The generic path: the per-row expressions and sums, collected (``source``: the frame
    whose public plan the engine may choose how to collect by, or None). Polars frames build
    them with Polars' own expressions, which have the very API the narwhals expressions mirror
    (``col``, ``when``, ``lit``, ``is_null``, ``clip``, ``cast``, ``len``), so one builder
    serves both and a query skips narwhals' per-expression translation; every other engine
    gets narwhals expressions (:meth:`FrameEngine.expressions`)."""
    ns, frame = backend.expressions(native)
    exprs = row_expressions(aggs, columns, missing, ns)
    sums = {n: e for n, e in exprs.items() if e is not None}
    distinct = {f"__dp_{i}" for i, a in enumerate(aggs) if a.kind == "units"}

    def total(col: Any, name: str) -> Any:
        return col.n_unique() if name in distinct else col.sum()
    length = "__dp_len"  # one row count serves every plain "rows" aggregate
    cols = [] if group_by is None else [group_by] if isinstance(group_by, str) else list(
        group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])]
    if cols:
        frame = _keep_declared(frame, cols, tuples, columns, ns)
        # materialise the per-row columns first: simple per-column sums group efficiently in
        # every backend (pandas cannot group arbitrary expressions)
        frame = frame.select(*(ns.col(c) for c in cols),
                             *(e.alias(n) for n, e in sums.items()))
        result = frame.group_by(*cols).agg(ns.len().alias(length),
                                           *(total(ns.col(n), n) for n in sums))
    else:
        result = frame.select(ns.len().alias(length),
                              *(total(e, n).alias(n) for n, e in sums.items()))
    if hasattr(result, "collect"):  # a narwhals or Polars LazyFrame
        result = backend.collect(result, source)
    names = [length if exprs[f"__dp_{i}"] is None else f"__dp_{i}" for i in range(len(aggs))]
    return aligned(aggs, cols, columns, tuples,
                    [result.get_column(c).to_list() for c in cols],
                    [_nulls_as_zero(result.get_column(name)) for name in names])


def _nulls_as_zero(series: Any) -> np.ndarray:
    """A collected sum column as numpy, a null (an SQL engine's sum of an empty group) as 0.
    Filled only where the column holds a null: a Polars ``Series.fill_null`` runs a query of
    its own, which costs as much as a small LazyFrame's whole aggregation."""
    if series.null_count():
        series = series.fill_null(0)
    return np.asarray(series.to_numpy())


def _group_columns(group_by: str | tuple[str, ...] | None) -> list[str]:
    return [] if group_by is None else [group_by] if isinstance(group_by, str) else list(
        group_by)


def _keep_declared(frame: Any, cols: Sequence[str], tuples: Sequence[tuple[Any, ...]],
                   columns: Mapping[str, Any], ns: Any = nw) -> Any:
    """Keep the rows whose key, in every group column, is among the declared ones."""
    for i, col in enumerate(cols):
        declared = list(dict.fromkeys(k[i] for k in tuples))
        if is_float(columns[col]):  # int keys of a float column (Polars compares dtypes)
            declared = [float(k) for k in declared]
        frame = frame.filter(ns.col(col).is_in(declared))
    return frame
