"""Exact aggregation inside the frame's own engine: one pass per release.

A release asks for a set of :class:`Agg` — small declarative descriptions of the exact
aggregates its measurements need (row counts, fixed-point sums, sums of squares and of
products) — and :func:`aggregate` computes all of them in one pass, per declared group key
when grouping. The frame is never converted to another library: the per-row expressions are
narwhals expressions that run in pandas or Polars (a Polars ``LazyFrame`` stays lazy; only the
per-group aggregates — a handful of integers — are collected). For numeric columns of pandas
or an eager Polars frame, the same arithmetic runs as a cache-blocked numpy kernel
(:func:`_numpy_sums`): on a zero-copy view of plain arrays, and on float64 copies of one block
at a time for nullable, Arrow-backed or null-holding columns (missing values as NaN);
``method="narwhals"`` forces the generic path, and the two agree bit for bit (tested).

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

import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import narwhals.stable.v2 as nw
import numpy as np

from dpframe._util.identity import IdentityMap
from dpframe.engine._bounding import Bounding
from dpframe.engine._row_expressions import (
    aligned,
    as_float_if,
    drops,
    is_float,
    is_numeric,
    is_present,
    row_expressions,
)
from dpframe.errors import ParameterError, UnsupportedInputError
from dpframe.query._aggregates import DROP, Agg, Bins, FixedPoint
from dpframe.query._keys import Keys, key_kinds

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

class FrameEngine(Protocol):
    """What the aggregation asks the frame's engine adapter (:class:`dpframe.backends.Backend`
    implements it; this module never tells engines apart itself). Every answer comes from the
    kind of frame and its schema, never from its values."""

    @property
    def lazy(self) -> bool:
        """The frame is a plan, not data in memory (then the numpy kernel never runs)."""
        ...

    @property
    def ticks_temporal_keys(self) -> bool:
        """Date/datetime group columns are matched as integer ticks
        (:mod:`dpframe.engine._tick_keys`) because the engine converts them to Python objects inside
        a group-by."""
        ...

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int: ...

    def numpy_column(self, frame: Any, column: str) -> Any:
        """A numeric column as the numpy kernels read it (an array or a block reader), or
        None (the engine's own expressions run instead)."""
        ...

    def key_codes(self, frame: Any, column: str, keys: Sequence[Any]) -> np.ndarray | None:
        """Each row's position among the declared ``keys`` (-1: undeclared or missing), or
        None when the numpy kernel cannot match keys on this engine or column."""
        ...

    def leaves_group_by(self, n_keys: int, n_rows: int) -> bool:
        """With ``method="auto"``, leave a group-by of ``n_keys`` keys over ``n_rows`` rows to
        the engine's own group-by (faster there) instead of the numpy kernel."""
        ...

    def expressions(self, frame: Any) -> tuple[Any, Any]:
        """``(namespace, frame)`` the per-row expressions are built in and run on."""
        ...

    def engine_frame(self, frame: Any) -> Any:
        """The narwhals frame bin counts and key observations run on."""
        ...

    def collect(self, result: Any, source: Any = None) -> Any:
        """Collect a (tiny) aggregate result the engine computed lazily; ``source``: the
        native frame it was computed from, if the engine may pick how to run it by it."""
        ...

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """The additive aggregates by an engine-specific path (Spark SQL text, Dask per
        partition), or None for the generic expression path."""
        ...

    def bound_contributions(self, frame: Any, bounding: Bounding, *, columns: Sequence[str],
                            group_by: str | tuple[str, ...] | None,
                            keys: Sequence[Any] | None) -> tuple[Any, FrameEngine]:
        """The frame with each privacy unit's contribution bounded
        (:mod:`dpframe.engine._bounding`), and the adapter of that frame."""
        ...

    def with_ticks(self, frame: Any, columns: Sequence[str], keep: Any = None) -> Any:
        """The frame with the date/datetime ``columns`` as integer ticks."""
        ...

    def tick_kind(self, frame: Any, column: str) -> Any:
        """The Arrow type of a date/datetime column, from its dtype alone."""
        ...


_NAMES_LOCK = threading.Lock()
_ENGINE_NAMES: dict[type, str] = {}


def engine_name(native: Any) -> str:
    """The engine and its version for the log (``"pandas 3.1.1"``, ``"polars-lazy 2.1.0"``);
    computed once per frame type."""
    with _NAMES_LOCK:
        cached = _ENGINE_NAMES.get(type(native))
    if cached is not None:
        return cached
    obj = nw.from_native(native)
    impl = obj.implementation
    name = str(impl.name).lower()
    if isinstance(obj, nw.LazyFrame):
        name += "-lazy"
    try:
        version = ".".join(str(v) for v in impl._backend_version())
    except Exception:  # pragma: no cover - narwhals internals vary
        version = ""
    name = f"{name} {version}".strip()
    with _NAMES_LOCK:
        _ENGINE_NAMES[type(native)] = name
    return name


#: Schemas of frames whose schema cannot change (private snapshots, immutable plans), so a
#: release does not convert a wide frame's schema again on every query.
_SCHEMAS: IdentityMap[dict[str, Any]] = IdentityMap()


def frame_columns(native: Any, *, immutable: bool = False) -> dict[str, Any]:
    """Column name → narwhals dtype, from the schema only (no data is read). ``immutable``:
    the caller knows ``native``'s schema can never change (dpframe's private snapshot of an
    in-memory frame, a lazy plan); it is then converted once and remembered."""
    if immutable:
        known = _SCHEMAS.get(native)
        if known is not None:
            return known
    obj = nw.from_native(native)
    schema = obj.collect_schema() if isinstance(obj, nw.LazyFrame) else obj.schema
    out = dict(schema.items())
    if immutable:
        _SCHEMAS.set(native, out)
    return out


def validate_column(native: Any, column: str, *, numeric: bool = True,
                    columns: Mapping[str, Any] | None = None) -> Any:
    """Raise :class:`UnsupportedInputError` unless ``column`` exists (and is numeric); return
    its narwhals dtype. ``columns``: the schema if the caller already read it."""
    cols = frame_columns(native) if columns is None else columns
    if column not in cols:
        shown = ", ".join(map(repr, list(cols)[:20]))
        raise UnsupportedInputError(
            f"column {column!r} is not in the frame; available columns: {shown}"
        )
    if numeric and not is_numeric(cols[column]):
        raise UnsupportedInputError(
            f"column {column!r} has dtype {cols[column]}, not a numeric type; cast it to a "
            "number (e.g. frame.dp.with_columns(nw.col(...).cast(nw.Float64))) and declare "
            "its bounds"
        )
    return cols[column]


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
    data: dict[Agg, np.ndarray] | None = None
    # values near ±1.8e308 overflow to ±inf when scaled by 1/q; clamping maps them to the
    # bounds, exactly as for any value outside them (a value is never an error)
    with np.errstate(over="ignore", invalid="ignore"):
        if not aggs:
            data = {}
        if data is None and method != "narwhals":
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
        for agg in binned:
            data[agg] = _bin_counts(native, backend, agg, columns, missing, group_by, keys,
                                    method)
    for agg in keyed:
        data[agg] = _value_key_counts(native, backend, agg, group_by, keys, method, columns)
    for agg, values in data.items():  # finite integers (np.trunc: cheaper than np.mod)
        integral = np.isfinite(values).all() and (np.trunc(values) == values).all()
        if not integral:  # pragma: no cover - engine invariant
            raise RuntimeError(f"internal error: aggregate {agg} is not an integer; please report")
    return data


def _temporal_groups_as_ticks(native: Any, backend: FrameEngine,
                              group_by: str | tuple[str, ...],
                              keys: Sequence[Any], columns: Mapping[str, Any] | None
                              ) -> tuple[Any, list[int], list[Any]] | None:
    """pandas and Dask: the frame with its date/datetime group columns as integer ticks, the
    positions of the declared keys that have a tick in those columns, and those keys as
    ticks (:mod:`dpframe.engine._tick_keys`); None without temporal group columns."""
    from dpframe.engine._tick_keys import key_tick

    cols = _group_columns(group_by)
    schema = frame_columns(native) if columns is None else columns
    temporal = [i for i, c in enumerate(cols)
                if schema[c] == nw.Date or schema[c] == nw.Datetime]
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


#: Rows per block of the numpy kernel: 64 K doubles (512 KB) stay in the CPU cache.
_BLOCK = 1 << 16

#: An eager Polars group-by runs the numpy kernel only with at least one declared key per this
#: many rows. Measured on 2 cores: per row, Polars' parallel group-by costs ~6 ns and the
#: kernel ~10 ns; per key, aligning Polars' groups with the declared keys costs ~0.7 µs and
#: the kernel ~0.1 µs, so the kernel wins when keys > rows·4 ns/0.6 µs ≈ rows/160 (1 M rows:
#: 12.6 vs 12.9 ms at 1,000 keys, 18 vs 78 ms at 100,000; 10 M rows: 96 vs 59 ms at 1,000).
POLARS_ROWS_PER_KEY = 160


def _numpy_sums(
    native: Any,
    backend: FrameEngine,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    method: str = "auto",
) -> dict[Agg, np.ndarray] | None:
    """The same aggregates from zero-copy numpy views, block by block, or None when a column
    is not held as a plain numeric array (then the narwhals path runs). ``method="auto"``
    leaves an eager Polars group-by with few keys per row to Polars
    (:data:`POLARS_ROWS_PER_KEY`, :meth:`FrameEngine.leaves_group_by`); ``"numpy"`` takes the
    kernel whenever it can run.

    pandas keeps such a column as one contiguous numpy array; an eager Polars column with one
    chunk and no nulls is exposed without copying; other numeric columns are read in float64
    blocks (:class:`_FloatBlocks`). A group-by maps each row's key to its position among the
    declared keys (pandas' hash index, or Arrow's ``index_in`` for Arrow-backed strings; -1
    for undeclared or missing keys, which are dropped) and sums per key with
    ``np.bincount``. Every value is an integer-valued double, so every partial sum, in any
    order, is exact: the results equal the narwhals path's.
    """
    in_memory = not backend.lazy
    several_keys = group_by is not None and not isinstance(group_by, str)
    if not in_memory or several_keys or any(a.kind in ("sum_prod", "units") for a in aggs):
        return None
    needed = sorted({c for a in aggs for c in a.columns()})
    views = {}
    for column in needed:
        view = backend.numpy_column(native, column)
        if view is None:
            return None
        views[column] = view
    n_rows = backend.count_rows(native)
    codes = None
    if group_by is not None:
        assert isinstance(group_by, str)
        if method != "numpy" and backend.leaves_group_by(len(keys or ()), n_rows):
            return None  # few keys for many rows: e.g. Polars' parallel group-by is faster
        if all(a.kind == "rows" and not drops(a.column, columns, missing) for a in aggs):
            counts = _small_range_counts(backend.numpy_column(native, group_by), keys)
            if counts is not None:  # rows per key only (a value count, a grouped count)
                return {a: counts.copy() for a in aggs}
        codes = backend.key_codes(native, group_by, keys or ())
        if codes is None:
            return None
    n_groups = 1 if codes is None else len(keys or [])
    out = {a: np.zeros(n_groups) for a in aggs}
    all_rows = [a for a in aggs if a.kind == "rows" and not drops(a.column, columns, missing)]
    if all_rows:
        counts = np.array([float(n_rows)]) if codes is None else _key_counts(codes, n_groups)
        for agg in all_rows:
            out[agg] = counts.copy()
    for column, values in views.items():
        mine = [a for a in aggs if a.column == column and a not in all_rows]
        _column_kernel(values, mine, missing.get(column, DROP), codes, n_groups, out)
    return out


#: The widest integer key range (cells of :attr:`Keys.int_lookup`'s table) counted directly by
#: :func:`_small_range_counts`: a per-block ``bincount`` of that many cells stays in cache.
SMALL_RANGE_CELLS = 4096


def _small_range_counts(values: Any, keys: Sequence[Any] | None) -> np.ndarray | None:
    """Rows per declared key of a plain numpy integer key column whose keys span at most
    :data:`SMALL_RANGE_CELLS` integers, without a code per row: each block's offsets from the
    lowest key (as unsigned integers, a value below it wrapping to above the range), capped
    at the table's last cell (every value outside the range, as in :func:`_lookup_codes`),
    are counted with one ``bincount`` per block, and each declared key takes its cell's
    count. The same counts as looking every row up and counting the codes (one pass instead
    of three, and no int64 code array the size of the column). None where this does not
    apply (then the codes are looked up)."""
    if not (isinstance(values, np.ndarray) and isinstance(keys, Keys) and values.ndim == 1):
        return None
    lookup = _int_lookup(keys, values.dtype)
    if lookup is None or lookup[1].size > SMALL_RANGE_CELLS:
        return None
    low, table = lookup
    last = np.uint64(table.size - 1)
    shift = np.uint64(low % (1 << 64))
    cells = np.zeros(table.size, dtype=np.int64)
    for start in range(0, values.size, _BLOCK):
        block = values[start : start + _BLOCK].astype(np.int64, copy=False)
        offset = block.view(np.uint64) - shift
        np.minimum(offset, last, out=offset)
        cells += np.bincount(offset.view(np.int64), minlength=table.size)
    counts = np.zeros(len(keys), dtype=np.float64)
    declared = table >= 0
    counts[table[declared]] = cells[declared]
    return counts


def _key_counts(codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Rows per declared key (codes ≥ 0), counted 1 M rows at a time (a whole-column count
    would widen every code to int64 at once: the column's size again in memory)."""
    counts = np.zeros(n_groups, dtype=np.float64)
    for start in range(0, codes.size, 1 << 20):
        block = codes[start : start + (1 << 20)]
        if block.size and block.min() < 0:  # (the minimum: no mask when every key is declared)
            block = block[block >= 0]
        counts += np.bincount(block, minlength=n_groups)
    return counts


def _column_kernel(
    values: np.ndarray,
    aggs: Sequence[Agg],
    policy: Any,
    codes: np.ndarray | None,
    n_groups: int,
    out: dict[Agg, np.ndarray],
) -> None:
    """Blocked pass over one column computing its ``aggs`` (rows present, Σk, Σk²)."""
    by_fp: dict[FixedPoint, list[Agg]] = {}
    row_aggs = [a for a in aggs if a.kind == "rows"]
    for a in aggs:
        if a.fp is not None:
            by_fp.setdefault(a.fp, []).append(a)
    # a per-group sum costs O(rows + groups) per block: with many groups, longer blocks keep
    # the per-group part (allocating and adding G cells) below a quarter of the work
    step = _BLOCK if codes is None else max(_BLOCK, 4 * n_groups)
    speculate = True  # until a block turns out to hold NaN
    scratch = np.empty(min(step, values.size), dtype=np.float64)
    scratch2 = np.empty(scratch.size if any(a.kind == "sum_sq" for a in aggs) else 0)
    for start in range(0, values.size, step):
        block, missing = _read_block(values, start, start + step)
        if missing is _UNCHECKED and not speculate:
            missing = np.isnan(block)
        group = None
        if codes is not None:  # keep the rows of declared keys only
            group = codes[start : start + step]
            if group.size and group.min() < 0:
                keep = group >= 0
                block, group = block[keep], group[keep]
                if missing is not None and missing is not _UNCHECKED:
                    missing = missing[keep]
        if missing is _UNCHECKED:
            # a float column read without a mask: NaN, if any, reaches every sum (NaN stays
            # NaN through scaling, clip and rounding), so sum first and look for NaN only then
            sums = (_block_sums(block, group, by_fp, None, policy, n_groups, scratch, scratch2)
                    if by_fp else None)
            if sums is not None and not any(np.isnan(v).any() for v in sums.values()):
                for a, v in sums.items():
                    out[a] += v
                _add_rows(row_aggs, block.size, group, n_groups, out)
                continue
            missing = np.isnan(block)
            speculate = False
        assert missing is not _UNCHECKED
        if missing is not None and not missing.any():
            missing = None
        if missing is not None and policy == DROP:  # rows missing the value leave the pass
            present = ~missing
            block, missing = block[present], None
            group = None if group is None else group[present]
        _add_rows(row_aggs, block.size, group, n_groups, out)
        for a, v in _block_sums(block, group, by_fp, missing, policy, n_groups, scratch,
                                scratch2).items():
            out[a] += v


#: :func:`_read_block`'s mark for a float block whose missing values were not looked for.
_UNCHECKED: Any = np.empty(0, dtype=bool)


def _add_rows(row_aggs: Sequence[Agg], size: int, group: np.ndarray | None, n_groups: int,
              out: dict[Agg, np.ndarray]) -> None:
    """Row counts of a block whose rows all hold a value (only under "drop": with a fill
    value the row count is the public size)."""
    if row_aggs:
        counts = _per_group(None, size, group, n_groups)
        for a in row_aggs:
            out[a] += counts


def _block_sums(block: np.ndarray, group: np.ndarray | None,
                by_fp: Mapping[FixedPoint, Sequence[Agg]], missing: np.ndarray | None,
                policy: Any, n_groups: int, scratch: np.ndarray, scratch2: np.ndarray
                ) -> dict[Agg, np.ndarray]:
    """Σk and Σk² (per group) of one block: ``k = round(clip((x − c)/q))`` as exact
    integer-valued doubles, rows in ``missing`` taking the public fill value. ``scratch``,
    ``scratch2``: float64 buffers of at least the block's length, reused block after block
    (a fresh half-megabyte array per block costs more than the arithmetic)."""
    sums: dict[Agg, np.ndarray] = {}
    for fp, group_aggs in by_fp.items():
        inv_q = 1.0 / fp.q
        y = np.multiply(block, inv_q, out=scratch[: block.size], dtype=np.float64)  # exact
        if fp.center != 0.0:
            y -= fp.center * inv_q  # exact: scaling by a power of two
        if missing is not None:  # the public fill value (policy is not "drop" here)
            y[missing] = (float(policy) - fp.center) * inv_q
        np.clip(y, fp.k_lo, fp.k_hi, out=y)
        # round half to even: what adding and subtracting 1.5·2^52 (the engines' form) gives
        # for |y| < 2^51, and |y| <= 2^50 after the clip (FixedPoint's limit)
        np.rint(y, out=y)
        for a in group_aggs:
            w = y if a.kind == "sum" else np.multiply(y, y, out=scratch2[: y.size])
            sums[a] = _per_group(w, w.size, group, n_groups)
    return sums


def _read_block(values: Any, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows ``start:stop`` of a column the kernel reads, and which of them miss a value (null
    or NaN; None when the column cannot miss one; :data:`_UNCHECKED` for a float block not
    yet looked at)."""
    if isinstance(values, _MaskedBlocks):
        return values.read(start, stop)
    block = values[start:stop]
    return block, _UNCHECKED if block.dtype.kind == "f" else None


def _per_group(weights: np.ndarray | None, size: int, group: np.ndarray | None,
               n_groups: int) -> np.ndarray:
    if group is None:
        return np.array([float(size) if weights is None else float(weights.sum())])
    return np.bincount(group, weights=weights, minlength=n_groups).astype(np.float64, copy=False)


class _FloatBlocks:
    """A numeric column the numpy kernels read block by block as float64 copies, missing
    values as NaN: pandas extension arrays (nullable ``Float64``/``Int64``/``boolean``,
    Arrow-backed numbers) and Polars columns with nulls or several chunks.

    Only one block (64 K values) is copied at a time, so memory stays flat. A missing value
    (``pd.NA``, a Polars null) becomes NaN, which the kernels treat exactly as the narwhals
    path treats "null or NaN" (dropped, or filled with the public value); integers become the
    float64 the narwhals path casts them to (round to nearest), so both paths agree bit for
    bit."""

    dtype = np.dtype(np.float64)

    def __init__(self, column: Any, size: int, polars: bool) -> None:
        self._column = column
        self.size = size
        self._polars = polars

    def __getitem__(self, part: slice) -> np.ndarray:
        start, stop, _ = part.indices(self.size)
        if self._polars:
            block = self._column.slice(start, stop - start).cast(_polars_float64())
            return np.asarray(block.to_numpy(), dtype=np.float64)
        return np.asarray(self._column[start:stop].to_numpy(dtype=np.float64,
                                                             na_value=np.nan))


class _MaskedBlocks:
    """A numeric column in Arrow's layout -- a values buffer and a validity bitmap, as an
    eager Polars column with nulls holds it -- read block by block (:meth:`read`) as the
    stored values plus a mask of the rows missing a value. Both buffers are read in place, and
    a null's (arbitrary) stored value is never used."""

    def __init__(self, values: np.ndarray, validity: np.ndarray | None, offset: int) -> None:
        self._values = values  # the column's values, already sliced to its length
        self._validity = validity  # bitmap bytes (LSB first) from bit 0 of the buffer
        self._offset = offset  # the column's first bit in the bitmap
        self.size = values.size

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows ``start:stop`` as stored (a view, no copy) and which of them miss a value:
        null in the validity bitmap, or NaN."""
        stop = min(stop, self.size)
        block = self._values[start:stop]
        missing = np.isnan(block) if block.dtype.kind == "f" else None
        if self._validity is not None and stop > start:
            lo, hi = start + self._offset, stop + self._offset
            bits = np.unpackbits(self._validity[lo // 8 : (hi + 7) // 8], bitorder="little")
            null = bits[lo % 8 : lo % 8 + (stop - start)] == 0
            missing = null if missing is None else missing | null
        return block, missing

    @staticmethod
    def of(series: Any) -> _MaskedBlocks | None:
        """The blocks of a one-chunk Polars column of a numpy-representable number type
        (8- to 64-bit integers, Float32, Float64), decided from the dtype alone; None for
        every other dtype or layout (read through Polars instead). Nothing here may fail
        for some values and not others: a data-dependent error would be an outcome the
        noise does not cover."""
        import pyarrow as pa

        if series.dtype not in _polars_numpy_numbers():
            return None
        try:
            arr = series.to_arrow()
            validity, values = arr.buffers()[:2]
            kind = arr.type
            np_dtype = np.dtype(kind.to_pandas_dtype())
        except Exception:  # pragma: no cover - an unexpected export: read through Polars
            return None
        if not isinstance(arr, pa.Array) or values is None or np_dtype.kind not in "iuf":
            return None
        data = np.frombuffer(values, dtype=np_dtype)[arr.offset : arr.offset + len(arr)]
        bitmap = None if validity is None else np.frombuffer(validity, dtype=np.uint8)
        return _MaskedBlocks(data, bitmap, arr.offset)


@functools.cache
def _polars_numpy_numbers() -> frozenset[Any]:
    """Polars number dtypes numpy holds as they are (no Int128/UInt128, Float16, Decimal)."""
    import polars as pl

    return frozenset({pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32,
                      pl.UInt64, pl.Float32, pl.Float64})


@functools.cache
def _polars_float64() -> Any:
    import polars as pl

    return pl.Float64


def pandas_view(native: Any, column: str) -> Any:
    """A numeric column of a pandas frame as the numpy kernels read it, or None: a column
    held as a plain numpy array is a zero-copy view; nullable and Arrow-backed numbers
    (extension dtypes of kind f, i, u or b) are read in float64 blocks
    (:class:`_FloatBlocks`)."""
    series = native[column]
    dtype = getattr(series, "dtype", None)
    if isinstance(dtype, np.dtype):
        return series.to_numpy(copy=False) if dtype.kind in "fiu" else None
    if getattr(dtype, "kind", None) in ("f", "i", "u", "b"):
        return _FloatBlocks(series.array, len(series), polars=False)
    return None


def polars_view(native: Any, column: str) -> Any:
    """A numeric column of an eager Polars frame as the numpy kernels read it, or None: one
    chunk and no nulls is exposed without copying (``allow_copy=False``); with nulls, its
    values buffer and validity bitmap in place (:class:`_MaskedBlocks`); with several chunks,
    in blocks."""
    series = native.get_column(column)
    if not (series.dtype.is_numeric() or series.dtype == _polars_boolean()):
        return None
    if series.null_count() and series.n_chunks() == 1 and series.dtype.is_numeric():
        masked = _MaskedBlocks.of(series)
        if masked is not None:
            return masked
    if series.null_count() or series.n_chunks() != 1 or not series.dtype.is_numeric():
        return _FloatBlocks(series, len(series), polars=True)
    try:
        values = series.to_numpy(allow_copy=False)
    except Exception:
        return _FloatBlocks(series, len(series), polars=True)
    return values if values.dtype.kind in "fiu" else None


@functools.cache
def _polars_boolean() -> Any:
    import polars as pl

    return pl.Boolean


def pandas_codes(native: Any, group_by: str, keys: Sequence[Any]) -> np.ndarray | None:
    """Position of each row's key (a pandas frame's ``group_by`` column) among the declared
    keys (-1: undeclared or missing), or None when the keys cannot be matched this way (then
    the narwhals path runs)."""
    import pandas as pd

    declared = keys.pandas_index if isinstance(keys, Keys) else pd.Index(list(keys))
    key_col = native[group_by]
    try:
        if isinstance(key_col.dtype, pd.CategoricalDtype):
            if len(key_col.cat.categories) == 0:
                return None
            per_category = declared.get_indexer(key_col.cat.categories)
            cat_codes = key_col.cat.codes.to_numpy()
            return np.where(cat_codes >= 0, per_category[cat_codes], -1)
        codes = _arrow_string_codes(key_col, keys)
        if codes is not None:
            return codes
        if isinstance(key_col.array, pd.arrays.IntegerArray):
            return _masked_int_codes(key_col.array, keys)
        if not isinstance(key_col.dtype, np.dtype):
            # an extension column (Arrow dates, decimals, ...) would be converted value by
            # value to Python objects here, which fails on some values (a date past year
            # 9999): matched inside the engine instead, decided from the dtype alone
            return None
        lookup = _int_lookup(keys, key_col.dtype)
        if lookup is not None:
            return _lookup_codes(key_col.to_numpy(), lookup)
        return np.asarray(declared.get_indexer(key_col), dtype=np.int64)
    except (TypeError, ValueError, IndexError):  # pragma: no cover - unusual key columns
        return None


def _masked_int_codes(array: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Codes of a pandas nullable integer column (``Int64`` and the like: a numpy array of
    values and a mask of missing ones, as a histogram's bin column holds its dropped rows):
    looked up as :func:`_lookup_codes` or in the keys' hash index, -1 where a value is
    missing. None for keys that are not all ``int`` (then the engine matches them)."""
    if key_kinds(keys) != {int}:
        return None
    import pandas as pd

    if array.dtype.numpy_dtype == np.uint64:
        return None
    # the values and missing-value mask the array holds (no copy; a missing slot's value is
    # arbitrary and overwritten below), or pandas' own conversion where they are not exposed
    values, missing = getattr(array, "_data", None), getattr(array, "_mask", None)
    if not (isinstance(values, np.ndarray) and isinstance(missing, np.ndarray)):
        missing = np.asarray(array.isna(), dtype=bool)
        values = np.asarray(array.to_numpy(dtype=np.int64, na_value=0))
    lookup = _int_lookup(keys, values.dtype)
    if lookup is not None:
        codes = _lookup_codes(values, lookup)
    else:
        declared = keys.pandas_index if isinstance(keys, Keys) else pd.Index(list(keys))
        codes = np.asarray(declared.get_indexer(values), dtype=np.int64)
    if missing.any():
        codes[missing] = -1
    return codes


def polars_codes(key_col: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Codes of an eager Polars key column: integer columns without nulls are read as numpy
    (zero-copy for one chunk) and looked up in pandas' hash index of the keys; String
    columns are matched in Arrow (:func:`_arrow_codes`). None for other dtypes (Polars
    groups them itself)."""
    import pandas as pd

    dtype = key_col.dtype  # (decided from the dtype and the keys alone, never the values)
    if (dtype.is_integer() and dtype in _polars_numpy_numbers() and not key_col.null_count()
            and key_kinds(keys) == {int}):
        values = key_col.to_numpy()
        lookup = _int_lookup(keys, values.dtype)
        if lookup is not None:
            return _lookup_codes(values, lookup)
        declared = keys.pandas_index if isinstance(keys, Keys) else pd.Index(list(keys))
        return np.asarray(declared.get_indexer(values), dtype=np.int64)
    if dtype == _polars_string() and key_kinds(keys) == {str}:
        return _arrow_codes(key_col.to_arrow(), keys)
    return None


def _int_lookup(keys: Sequence[Any], dtype: np.dtype) -> tuple[int, np.ndarray] | None:
    """The keys' lookup table (:attr:`Keys.int_lookup`) when the column's numpy dtype holds
    every value exactly as an int64 (signed integers, unsigned up to 32 bits); else None."""
    if not isinstance(keys, Keys) or not (
            dtype.kind == "i" or (dtype.kind == "u" and dtype.itemsize <= 4)):
        return None
    return keys.int_lookup


def _lookup_codes(values: np.ndarray, lookup: tuple[int, np.ndarray]) -> np.ndarray:
    """Each value's key position by table lookup (``lookup = (low, table)``,
    :attr:`Keys.int_lookup`): the value's offset from the lowest key as an unsigned 64-bit
    integer (a value below it wraps around to above the range), capped at the table's last
    cell (-1), read from the table in place. The same codes as the hash lookup."""
    low, table = lookup
    offset = values.astype(np.int64, copy=False).view(np.uint64) - np.uint64(low % (1 << 64))
    np.minimum(offset, np.uint64(table.size - 1), out=offset)
    codes = offset.view(np.int64)  # (every offset is now < 2^63)
    return np.take(table, codes, out=codes, mode="clip")


@functools.cache
def _polars_string() -> Any:
    import polars as pl

    return pl.String


def _arrow_codes(column: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Position of each value of an Arrow string array among string ``keys``
    (``pyarrow.compute.index_in`` on the array's buffers; a null matches nothing: -1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    is_view = getattr(pa.types, "is_string_view", None)  # (pyarrow >= 16)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or (is_view is not None and is_view(kind))):
        return None
    found = pc.fill_null(pc.index_in(column, value_set=pa.array(list(keys), type=column.type)),
                         -1)
    # int32, as Arrow gives them: half the memory of int64 codes for a 10 M-row column (the
    # kernels read them block by block, where numpy widens each small block as needed)
    return np.asarray(found.to_numpy(), dtype=np.int32)


def _arrow_string_codes(key_col: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Codes of an Arrow-backed pandas string column (pandas 3's default ``str``), matched in
    Arrow (``pyarrow.compute.index_in`` on the column's own buffers: no Python string per
    row); None for other columns or non-string keys. A missing key (null) matches nothing."""
    dtype = key_col.dtype
    if getattr(dtype, "storage", None) != "pyarrow" and "pyarrow" not in str(dtype):
        return None
    if key_kinds(keys) != {str}:
        return None
    try:
        column = key_col.array.__arrow_array__()
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - not Arrow-backed
        return None
    return _arrow_codes(column, keys)


#: Rows per block of the bin-count kernel (its per-block cost includes the G·B count cells).
_BIN_BLOCK = 1 << 20


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


def _bin_counts(
    native: Any,
    backend: FrameEngine,
    agg: Agg,
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    method: str,
) -> np.ndarray:
    """Exact rows per bin of ``agg.column`` (:class:`Bins`), per declared key: a ``(G, B)``
    array of integer-valued doubles (``G = 1`` without a group-by). Rows with undeclared keys
    are left out; missing values follow the column's policy (dropped, or binned at the public
    fill value)."""
    assert agg.column is not None and agg.bins is not None
    cols = _group_columns(group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])]
    n_groups = len(tuples) if cols else 1
    if method != "narwhals":
        counts = _numpy_bin_counts(native, backend, agg, missing.get(agg.column, DROP),
                                   group_by, list(keys or []), n_groups)
        if counts is not None:
            return counts
    bins, column = agg.bins, agg.column
    frame = backend.engine_frame(native)
    x = nw.col(column) if columns[column] == nw.Float64 else nw.col(column).cast(nw.Float64)
    present = is_present(column, columns[column])
    policy = missing.get(column, DROP)
    if policy == DROP:
        frame = frame.filter(present)
    else:
        x = nw.when(present).then(x).otherwise(nw.lit(float(policy)))
    frame = _keep_declared(frame, cols, tuples, columns)
    label = "__dp_bin"
    frame = frame.select(*(nw.col(c) for c in cols), bins.expression(x).alias(label))
    result = frame.group_by(*cols, label).agg(nw.len().alias("__dp_len"))
    if isinstance(result, nw.LazyFrame):
        result = backend.collect(result)
    j = np.asarray(result.get_column(label).to_numpy(), dtype=np.int64)
    n = np.asarray(result.get_column("__dp_len").to_numpy(), dtype=np.float64)
    group = np.zeros(j.size, dtype=np.int64)
    if cols:
        import pandas as pd

        found = [[as_float_if(columns[c], v) for v in result.get_column(c).to_list()]
                 for c in cols]
        declared_keys = [[as_float_if(columns[c], k[i]) for k in tuples]
                         for i, c in enumerate(cols)]
        if len(cols) == 1:
            group = pd.Index(declared_keys[0], dtype=object).get_indexer(
                pd.Index(found[0], dtype=object))
        else:
            group = pd.MultiIndex.from_arrays(declared_keys).get_indexer(
                pd.MultiIndex.from_arrays(found))
    out = np.zeros(n_groups * bins.count, dtype=np.float64)
    keep = group >= 0
    np.add.at(out, group[keep] * bins.count + j[keep], n[keep])
    return out.reshape(n_groups, bins.count)


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


def _numpy_bin_counts(native: Any, backend: FrameEngine, agg: Agg, policy: Any,
                      group_by: str | tuple[str, ...] | None, keys: list[Any], n_groups: int
                      ) -> np.ndarray | None:
    """The bin counts from a zero-copy numpy view (see :func:`_numpy_sums`), or None."""
    assert agg.column is not None and agg.bins is not None
    if backend.lazy or (
            group_by is not None and not isinstance(group_by, str)):
        return None
    values = backend.numpy_column(native, agg.column)
    if values is None:
        return None
    codes = None
    if group_by is not None:
        assert isinstance(group_by, str)
        codes = backend.key_codes(native, group_by, keys)
        if codes is None:
            return None
    bins = agg.bins
    cells = n_groups * bins.count
    out = np.zeros(cells, dtype=np.float64)
    for start in range(0, values.size, _BIN_BLOCK):
        block, missing = _read_block(values, start, start + _BIN_BLOCK)
        block = block.astype(np.float64, copy=False)  # (as the narwhals path casts integers)
        if missing is _UNCHECKED:
            missing = np.isnan(block)
        keep = None if codes is None else codes[start : start + _BIN_BLOCK] >= 0
        if missing is not None and missing.any():
            if policy == DROP:
                keep = ~missing if keep is None else keep & ~missing
            else:
                block = np.where(missing, float(policy), block)
        j = bins.index(block)
        if codes is not None:
            j += codes[start : start + _BIN_BLOCK].astype(np.int64) * bins.count
        if keep is not None:
            j = j[keep]
        out += np.bincount(j, minlength=cells)
    return out.reshape(n_groups, bins.count)
