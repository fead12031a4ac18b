"""Exact aggregation inside the frame's own engine: one pass per release.

A release asks for a set of :class:`Agg` — small declarative descriptions of the exact
aggregates its measurements need (row counts, fixed-point sums, sums of squares and of
products) — and :func:`aggregate` computes all of them in one pass, per declared group key
when grouping. The frame is never converted to another library: the per-row expressions are
narwhals expressions that run in pandas or Polars (a Polars ``LazyFrame`` stays lazy; only the
per-group aggregates — a handful of integers — are collected). For numeric columns of pandas
or an eager Polars frame, the same arithmetic runs as a cache-blocked numpy kernel
(:func:`_numpy_sums`): on a zero-copy view of plain arrays, and on float64 copies of one block
at a time for nullable, Arrow-backed or null-holding columns (missing values as NaN); an
ungrouped pass over plain arrays of at most one block takes the same operations in one
straight pass (:func:`~dpframe.engine._kernel.one_block_sums`: a thousand rows cost less than
the blocked pass's bookkeeping); ``method="narwhals"`` forces the generic path, and the paths
agree bit for bit (tested).

**Missing values** are handled by a policy declared at protect time, never by inspecting the
data: ``"drop"`` leaves rows whose value is null or NaN out of that column's aggregates (its
row count is then an aggregate of its own, the rows where the column is present), a number
fills them with that public value. Infinite values are values: clamping maps them to the
bounds. Nothing here raises because of a value.

**Exact sums (Casacuberta et al. 2022).** A float sum of clamped values can move by more than
the declared sensitivity when one row changes, because rounding depends on every other row.
dpframe therefore sums *integers*: each clamped value ``x ∈ [l, u]`` becomes
``k = round((x − c)/q)``, clipped to ``[k_lo, k_hi] = [⌈(l − c)/q⌉, ⌊(u − c)/q⌋]``, with a public
centre ``c`` and a power-of-two quantum ``q`` (:class:`FixedPoint`). ``c + k·q`` lies in
``[l, u]``, so the fixed-point data is a legitimate data set within the bounds and every
sensitivity of :mod:`dpframe.query.statistics` holds for it exactly. ``q`` is the smallest power of
two
with ``max|k| ≤ M``, where ``M = ⌊(2⁵³ − 1)/n⌋`` (``√`` of that when Σk² is needed) and ``n`` is
the protected data set's public size; hence ``|Σk| < 2⁵³`` and ``Σk² < 2⁵³``:

* the sums can never overflow or round (integer-valued doubles below 2⁵³, in any order);
* ``q·Σk`` is an exact float (an integer below 2⁵³ times a power of two).

No aggregation can see more than ``n`` rows: dpframe only answers verified derivations, which
keep or drop rows of the protected frame and never repeat one
(:mod:`dpframe.provenance._derivations`). The quantisation moves each value by at most ``q/2``; it
is a per-row preprocessing step, like
clamping, so it changes no sensitivity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine._bins import _bin_counts
from dpframe.engine._bounding import Bounding
from dpframe.engine._column_views import _MaskedBlocks as _MaskedBlocks
from dpframe.engine._column_views import pandas_view as pandas_view
from dpframe.engine._column_views import polars_view as polars_view
from dpframe.engine._expressions import _expression_sums as _expression_sums
from dpframe.engine._expressions import _group_columns
from dpframe.engine._frame_engine import FrameEngine as FrameEngine
from dpframe.engine._kernel import _BLOCK as _BLOCK
from dpframe.engine._kernel import POLARS_ROWS_PER_KEY as POLARS_ROWS_PER_KEY
from dpframe.engine._kernel import SMALL_RANGE_CELLS as SMALL_RANGE_CELLS
from dpframe.engine._kernel import _key_counts as _key_counts
from dpframe.engine._kernel import _numpy_sums as _numpy_sums
from dpframe.engine._kernel import _small_range_counts as _small_range_counts
from dpframe.engine._kernel import one_block_sums
from dpframe.engine._key_codes import _arrow_string_codes as _arrow_string_codes
from dpframe.engine._key_codes import _int_lookup as _int_lookup
from dpframe.engine._key_codes import _lookup_codes as _lookup_codes
from dpframe.engine._key_codes import pandas_codes as pandas_codes
from dpframe.engine._key_codes import polars_codes as polars_codes
from dpframe.engine._schema import engine_name as engine_name
from dpframe.engine._schema import frame_columns as frame_columns
from dpframe.engine._schema import validate_column as validate_column
from dpframe.engine._tick_keys import key_tick
from dpframe.errors import ParameterError
from dpframe.query import Agg, Bins, FixedPoint

__all__ = [
    "POLARS_ROWS_PER_KEY",
    "Agg",
    "Bins",
    "FixedPoint",
    "FrameEngine",
    "aggregate",
    "engine_name",
    "frame_columns",
    "validate_column",
]


def aggregate(
    native: Any,
    aggs: Sequence[Agg],
    *,
    backend: FrameEngine,
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None = None,
    keys: Sequence[Any] | None = None,
    method: str = "auto",
    bounding: Bounding | None = None,
    columns: Mapping[str, Any] | None = None,
) -> dict[Agg, np.ndarray]:
    """Every aggregate in ``aggs``, exactly, in one pass over ``native``.

    Returns ``{agg: array}``: one entry per declared key (zeros for empty groups; rows with
    other or missing keys are left out inside the engine), or one entry without a group-by.
    Values are integers held exactly in float64. ``missing``: the policy of each column read
    (``"drop"`` or a fill value). ``method``: ``"auto"`` (numpy kernel where the columns allow
    it, else narwhals), ``"numpy"`` (raise if it cannot run) or ``"narwhals"``.
    ``bounding``: the frame has a privacy unit; each unit's contribution is bounded first
    (:mod:`dpframe.engine._bounding`) and every aggregate reads the bounded rows. ``backend``: the
    frame's engine adapter, which answers everything that differs between engines
    (:class:`FrameEngine`); callers go through :meth:`dpframe.backends.Backend.aggregate`.
    """
    if method not in ("auto", "numpy", "narwhals"):
        raise ParameterError(f"method must be 'auto', 'numpy' or 'narwhals', got {method!r}")
    small = (_small_pass(native, backend, aggs, missing, group_by, keys, columns)
             if bounding is None and method != "narwhals" else None)
    if small is not None:  # (a thousand rows: the blocked pass's bookkeeping would cost more
        return small  # than its arithmetic)
    aggs = list(dict.fromkeys(aggs))
    if keys is not None and group_by is not None and backend.ticks_temporal_keys:
        ticked = _temporal_groups_as_ticks(native, backend, group_by, keys, columns)
        if ticked is not None:
            native, kept, sub_keys = ticked
            return _scattered(aggregate(native, aggs, backend=backend, missing=missing,
                                        group_by=group_by, keys=sub_keys, method=method,
                                        bounding=bounding), kept, len(keys))
    if bounding is not None:
        native, backend = backend.bound_contributions(
            native, bounding, columns=sorted({c for a in aggs for c in a.columns()}),
            group_by=group_by, keys=keys)
    binned = [a for a in aggs if a.kind == "bins"]
    keyed = [a for a in aggs if a.kind == "keys"]
    aggs = [a for a in aggs if a.kind not in ("bins", "keys")]
    if columns is None or bounding is not None:  # (bounding makes a new frame)
        columns = frame_columns(native)
    # values near ±1.8e308 overflow to ±inf when scaled by 1/q; clamping maps them to the
    # bounds, exactly as for any value outside them (a value is never an error)
    with np.errstate(over="ignore", invalid="ignore"):
        data = _additive_sums(native, backend, aggs, columns, missing, group_by, keys, method,
                              bounding)
        counted = set()  # (bins the numpy kernel counted: integers by construction)
        for agg in binned:
            data[agg], by_construction = _bin_counts(native, backend, agg, columns, missing,
                                                     group_by, keys, method)
            if by_construction:
                counted.add(agg)
    for agg in keyed:
        data[agg] = _value_key_counts(native, backend, agg, group_by, keys, method, columns)
    for agg, values in data.items():
        if agg not in counted and not _integral(values):  # pragma: no cover - invariant
            raise RuntimeError(f"internal error: aggregate {agg} is not an integer; please report")
    return data


def _small_pass(native: Any, backend: FrameEngine, aggs: Sequence[Agg],
                missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                keys: Sequence[Any] | None, columns: Mapping[str, Any] | None
                ) -> dict[Agg, np.ndarray] | None:
    """The passes :func:`aggregate` tries before its general one (no privacy unit, not forced
    to narwhals): ungrouped sums of a frame of one block (:func:`one_block_sums`), or rows
    per declared key of one column (:func:`_plain_key_counts`); None: neither applies."""
    if group_by is None:
        return one_block_sums(native, backend, aggs, missing)
    if isinstance(group_by, str):
        return _plain_key_counts(native, backend, aggs, group_by, keys, columns)
    return None


def _plain_key_counts(native: Any, backend: FrameEngine, aggs: Sequence[Agg], group_by: str,
                      keys: Sequence[Any] | None, columns: Mapping[str, Any] | None
                      ) -> dict[Agg, np.ndarray] | None:
    """Rows per declared key only (a histogram, a value count, a grouped count: every
    aggregate the row count ``Agg("rows")``) of an in-memory frame whose group column is not
    temporal (its schema in ``columns``): :func:`_small_range_counts` of the key column, as
    :func:`_numpy_sums` computes it for the same aggregates and keys, without the general
    pass's preparation (the aggregates sorted by kind, the floating-point settings, the
    temporal keys' ticks, the integrality check of counts that are integers by construction:
    about 15 µs of a warm histogram at 1,000 rows). None where this does not apply (any other
    aggregate, a lazy frame, a temporal or unknown group column, keys that are not a small
    integer range): then the general pass runs. Decided from public facts alone (the
    aggregates, the schema, the column's dtype and layout, the declared keys)."""
    if backend.lazy or columns is None or not aggs or any(
            a.kind != "rows" or a.column is not None for a in aggs):
        return None
    dtype = columns.get(group_by)
    if dtype is None or _is_temporal(dtype):
        return None
    counts = _small_range_counts(backend.numpy_column(native, group_by), keys)
    if counts is None:
        return None
    return {a: counts.copy() for a in aggs}


def _integral(values: np.ndarray) -> bool:
    """Whether every value is a finite integer (np.trunc: cheaper than np.mod); a single
    value is looked at in Python (``float.is_integer`` is False for ±inf and NaN), without
    numpy's per-call cost."""
    if values.size == 1:
        return float(values.item()).is_integer()
    if values.size <= _FEW_VALUES:  # (a histogram's cells: Python floats, no numpy calls)
        return all(v.is_integer() for v in values.ravel().tolist())
    return bool(np.isfinite(values).all() and (np.trunc(values) == values).all())


#: Up to this many values :func:`_integral` looks at them as Python floats.
_FEW_VALUES = 64


def _additive_sums(native: Any, backend: FrameEngine, aggs: Sequence[Agg],
                   columns: Mapping[str, Any], missing: Mapping[str, Any],
                   group_by: str | tuple[str, ...] | None, keys: Sequence[Any] | None,
                   method: str, bounding: Bounding | None) -> dict[Agg, np.ndarray]:
    """The additive aggregates (all but bins and key counts) of :func:`aggregate`: by the
    numpy kernel where it runs, else by the engine's own path, else by the generic
    expressions."""
    if not aggs:
        return {}
    data: dict[Agg, np.ndarray] | None = None
    if method != "narwhals":
        data = _numpy_sums(native, backend, aggs, columns, missing, group_by, keys, method)
        if data is None and method == "numpy":
            raise ParameterError("method='numpy' needs plain numeric columns of an "
                                 "in-memory frame and no products of columns")
    if data is None:
        data = backend.engine_sums(native, aggs, columns, missing, group_by, keys)
    if data is None:  # the engine may pick how to run it by the frame's plan, but not
        # by a plan of bounded contributions (with a privacy unit, its row count is private)
        data = _expression_sums(native, backend, aggs, columns, missing, group_by, keys,
                                source=native if bounding is None else None)
    return data


def _temporal_groups_as_ticks(native: Any, backend: FrameEngine,
                              group_by: str | tuple[str, ...],
                              keys: Sequence[Any], columns: Mapping[str, Any] | None
                              ) -> tuple[Any, list[int], list[Any]] | None:
    """pandas and Dask: the frame with its date/datetime group columns as integer ticks, the
    positions of the declared keys that have a tick in those columns, and those keys as
    ticks (:mod:`dpframe.engine._tick_keys`); None without temporal group columns."""

    cols = _group_columns(group_by)
    schema = frame_columns(native) if columns is None else columns
    temporal = [i for i, c in enumerate(cols) if _is_temporal(schema[c])]
    if not temporal:
        return None
    kinds = {i: backend.tick_kind(native, cols[i]) for i in temporal}
    kept: list[int] = []
    sub_keys: list[Any] = []
    for pos, key in enumerate(keys):
        parts = list(key) if len(cols) > 1 else [key]
        ticks = {i: key_tick(parts[i], kinds[i]) for i in temporal}
        if any(t is None for t in ticks.values()):
            continue  # no row holds it: an empty group
        for i, t in ticks.items():
            parts[i] = t
        kept.append(pos)
        sub_keys.append(tuple(parts) if len(cols) > 1 else parts[0])
    return backend.with_ticks(native, [cols[i] for i in temporal]), kept, sub_keys


def _is_temporal(dtype: Any) -> bool:
    """``dtype == nw.Date or dtype == nw.Datetime``, the comparison narwhals defines, made
    once per dtype class where that class compares by its type alone (the base
    ``DType.__eq__``: then the answer is the same for every instance); the others (Datetime
    itself, parametrised types) are compared each time. Public: a column's dtype."""
    kind = type(dtype)
    known = _TEMPORAL_BY_CLASS.get(kind)
    if known is not None:
        return known
    temporal = bool(dtype == nw.Date or dtype == nw.Datetime)
    if kind.__eq__ is _DTYPE_EQ:
        _TEMPORAL_BY_CLASS[kind] = temporal
    return temporal


#: :func:`_is_temporal` per narwhals dtype class that compares by its type alone.
_TEMPORAL_BY_CLASS: dict[type, bool] = {}
_DTYPE_EQ = nw.dtypes.DType.__eq__


def _scattered(data: Mapping[Agg, np.ndarray], kept: Sequence[int], n_keys: int
               ) -> dict[Agg, np.ndarray]:
    """Per-key results of the kept keys placed at their positions among all ``n_keys``
    declared keys (zeros, an empty group, for the others)."""
    out = {}
    for agg, values in data.items():
        full = np.zeros((n_keys, *np.shape(values)[1:]), dtype=np.float64)
        if kept:
            full[np.asarray(kept)] = values
        out[agg] = full
    return out


def _value_key_counts(native: Any, backend: FrameEngine, agg: Agg,
                      group_by: str | tuple[str, ...] | None, keys: Sequence[Any] | None,
                      method: str, columns: Mapping[str, Any] | None) -> np.ndarray:
    """Exact rows per public key of ``agg.column`` (``agg.keys``), per declared group: a
    ``(G, K)`` array. The group-by row count over the group columns and ``agg.column`` with
    every (group, key) combination as declared keys, through the same path as any group-by."""
    assert agg.column is not None and agg.keys is not None
    cols = _group_columns(group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])] if cols else [()]
    combos = [(*t, k) for t in tuples for k in agg.keys]
    by: str | tuple[str, ...] = (*cols, agg.column) if cols else agg.column
    rows = Agg("rows")
    counts = aggregate(native, [rows], backend=backend, missing={}, group_by=by,
                       keys=combos if cols else list(agg.keys), method=method,
                       columns=columns)[rows]
    return np.asarray(counts, dtype=np.float64).reshape(len(tuples), len(agg.keys))
