"""The per-row expressions every engine path sums, and the alignment of per-group results.

Each aggregate of :mod:`dpframe.query._aggregates` becomes one per-row expression (the fixed-point
integer ``k = round(clip((x − c)/q))`` as an exact integer-valued double, its square, a
product, a presence flag) built in narwhals or, for Polars frames, in Polars itself (the same
API); the engine sums them. :func:`aligned` then puts each engine's per-group results in the
order of the declared keys. Shared by the generic path (:mod:`dpframe.engine._aggregation`) and the
engine-specific ones (:mod:`dpframe.backends.spark._sql`, :mod:`dpframe.backends.dask._partitions`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.query import DROP, Agg, FixedPoint

__all__ = ["ROUNDER", "aligned", "as_float_if", "is_float", "is_numeric", "is_present",
           "row_expressions"]


def is_numeric(dtype: Any) -> bool:
    return bool(dtype.is_numeric()) or dtype == nw.Boolean


def is_float(dtype: Any) -> bool:
    """Every float width (Float16 included): NaN is a missing value in each of them."""
    return bool(dtype.is_float())


#: Adding then subtracting 1.5·2^52 rounds a double of magnitude below 2^51 to the nearest
#: integer (ties to even) in IEEE arithmetic; the sums of such integers stay exact as long as
#: every partial sum is below 2^53, which :class:`FixedPoint` guarantees.
ROUNDER = 1.5 * 2.0**52


def rounded(expr: Any) -> Any:
    return (expr + ROUNDER) - ROUNDER


def is_present(column: str, dtype: Any, ns: Any = nw) -> Any:
    """Row-wise: the column holds a value (not null, not NaN). ``ns``: the expression
    namespace, narwhals or (for Polars frames, the same API natively) Polars."""
    if is_float(dtype):
        return ~(ns.col(column).is_null() | ns.col(column).is_nan()).fill_null(True)
    return ~ns.col(column).is_null()


def k_expression(column: str, dtype: Any, fp: FixedPoint, policy: Any, ns: Any = nw
                  ) -> tuple[Any, Any]:
    """``(k, present)``: the per-row fixed-point integer ``round(clip((x − c)/q))`` as an
    exact integer-valued double, with missing values replaced by the fill value (or by the
    centre, to be masked out, under ``"drop"``); ``present`` is None unless rows are dropped."""
    x = ns.col(column) if dtype == nw.Float64 else ns.col(column).cast(ns.Float64)
    present = None
    if policy == DROP:
        present = is_present(column, dtype, ns)
        x = ns.when(present).then(x).otherwise(ns.lit(fp.center))
    else:
        x = ns.when(is_present(column, dtype, ns)).then(x).otherwise(ns.lit(float(policy)))
    inv_q = 1.0 / fp.q  # exact: q is a power of two
    scaled = (x - fp.center) * inv_q if fp.center != 0.0 else x * inv_q
    return rounded(scaled.clip(fp.k_lo, fp.k_hi)), present


def drops(column: str | None, columns: Mapping[str, Any], missing: Mapping[str, Any]) -> bool:
    return column is not None and missing.get(column, DROP) == DROP


def row_expressions(
    aggs: Sequence[Agg], columns: Mapping[str, Any], missing: Mapping[str, Any], ns: Any = nw
) -> dict[str, Any]:
    """One named per-row expression per aggregate (summed by the caller); None for a plain
    row count (the caller uses the engine's ``len``). ``ns``: narwhals, or Polars itself for
    Polars frames (:func:`dpframe.engine._aggregation._expression_namespace`).

    The expressions are a function of public facts only (the aggregates, the dtypes and fill
    values of the columns they read) and immutable, so a repeated query reuses them: building
    them costs more than a LazyFrame query on a thousand rows."""
    read = sorted({c for a in aggs for c in a.columns()})
    try:
        return dict(_cached_expressions(
            tuple(aggs), tuple((c, columns[c], missing.get(c, DROP)) for c in read), ns))
    except TypeError:  # an unhashable dtype or fill value: build them afresh
        return _row_expressions(aggs, columns, missing, ns)


@functools.lru_cache(maxsize=256)
def _cached_expressions(aggs: tuple[Agg, ...], read: tuple[tuple[str, Any, Any], ...],
                        ns: Any) -> dict[str, Any]:
    """:func:`_row_expressions` once per aggregates, ``(column, dtype, fill)`` of the
    columns they read, and namespace."""
    return _row_expressions(aggs, {c: d for c, d, _ in read}, {c: f for c, _, f in read}, ns)


def _row_expressions(
    aggs: Sequence[Agg], columns: Mapping[str, Any], missing: Mapping[str, Any], ns: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, agg in enumerate(aggs):
        name = f"__dp_{i}"
        if agg.kind == "units":  # the id itself, counted distinct by the caller
            assert agg.column is not None
            out[name] = ns.col(agg.column)
            continue
        if agg.kind == "rows":
            if agg.column is None or not drops(agg.column, columns, missing):
                out[name] = None
            else:
                out[name] = is_present(agg.column, columns[agg.column], ns).cast(ns.Float64)
            continue
        assert agg.column is not None and agg.fp is not None
        policy = missing.get(agg.column, DROP)
        k, present = k_expression(agg.column, columns[agg.column], agg.fp, policy, ns)
        masks = [present] if present is not None else []
        if agg.kind == "sum":
            expr = k
        elif agg.kind == "sum_sq":
            expr = k * k
        else:
            assert agg.column2 is not None and agg.fp2 is not None
            k2, present2 = k_expression(agg.column2, columns[agg.column2], agg.fp2,
                                         missing.get(agg.column2, DROP), ns)
            expr = k * k2
            if present2 is not None:
                masks.append(present2)
        for mask in masks:
            expr = expr * mask.cast(ns.Float64)
        out[name] = expr
    return out


def aligned(
    aggs: Sequence[Agg],
    cols: Sequence[str],
    columns: Mapping[str, Any],
    tuples: Sequence[tuple[Any, ...]],
    found_columns: Sequence[Sequence[Any]],
    values: Sequence[Any],
) -> dict[Agg, np.ndarray]:
    """Align the engine's groups with the declared keys: ``found_columns[c]`` holds group column
    ``c`` per result row and ``values[i]`` aggregate ``i`` per result row. A combination not
    present in the data is an empty group (zeros); present combinations that were not declared
    are dropped (:func:`group_positions`). Without a group-by, the one result row."""
    n_out = len(tuples) if cols else 1
    pos = (group_positions(found_columns, cols, columns, tuples) if cols
           else np.zeros(1, np.int64))
    present = pos >= 0
    out: dict[Agg, np.ndarray] = {}
    for agg, column in zip(aggs, values, strict=True):
        # an engine may give a null sum for an empty group: 0. A NaN is not papered over
        # (missing values never reach a sum, so one would be a bug): the mechanisms refuse it
        # and the safety net fails the release closed
        raw = np.asarray([0.0 if v is None else v for v in column]
                         if isinstance(column, list) else column, dtype=np.float64)
        placed = np.zeros(n_out, dtype=np.float64)
        placed[present] = raw[pos[present]]
        out[agg] = placed
    return out


def group_positions(found_columns: Sequence[Sequence[Any]], cols: Sequence[str],
                     columns: Mapping[str, Any], tuples: Sequence[tuple[Any, ...]]
                     ) -> np.ndarray:
    """For each declared key, the row of the engine's per-group result holding it (-1: a
    combination not present in the data, an empty group); present combinations that were not
    declared are dropped. Keys of a float column compare as floats (:func:`as_float_if`).
    One column: a hash lookup of all keys at once (pandas ``Index.get_indexer`` on Python
    objects, the same equality as a dict); several: a dict of key tuples."""
    floats = [is_float(columns[c]) for c in cols]  # once per column, not per key

    def norm(values: Sequence[Any], is_float: bool) -> list[Any]:
        return [float(v) if v is not None else v for v in values] if is_float else list(values)

    found_cols = [_as_timedeltas(norm(values, f))
                  for values, f in zip(found_columns, floats, strict=True)]
    if len(cols) == 1:
        import pandas as pd

        found = pd.Index(found_cols[0], dtype=object)
        if found.is_unique:
            declared = norm([k[0] for k in tuples], floats[0])
            return np.asarray(found.get_indexer(pd.Index(declared, dtype=object)),
                              dtype=np.int64)
    lookup = {row: i for i, row in enumerate(zip(*found_cols, strict=True))}
    order = zip(*(norm([k[i] for k in tuples], f) for i, f in enumerate(floats)), strict=True)
    return np.array([lookup.get(key, -1) for key in order], dtype=np.int64)


def _as_timedeltas(values: list[Any]) -> list[Any]:
    """An engine's interval group values (Arrow ``month_day_nano_interval``, as DuckDB gives
    an INTERVAL column: ``pyarrow.MonthDayNano``) as the ``datetime.timedelta`` keys they
    equal; an interval no timedelta equals (months, or finer than a microsecond) stays as it
    is and matches no key. Total: only the type of the column's values is looked at to decide,
    and every value converts."""
    first = next((v for v in values if v is not None), None)
    if type(first).__name__ != "MonthDayNano":
        return values
    import datetime

    def one(v: Any) -> Any:
        if v is None or v.months or v.nanoseconds % 1000:
            return v
        try:
            return datetime.timedelta(days=v.days, microseconds=v.nanoseconds // 1000)
        except OverflowError:  # beyond timedelta's range: no key equals it
            return v

    return [one(v) for v in values]


def as_float_if(dtype: Any, value: Any) -> Any:
    """Keys of a float column compare as floats (an int key 1 matches a float value 1.0)."""
    return float(value) if is_float(dtype) and value is not None else value
