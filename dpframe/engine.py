"""Exact aggregation inside the frame's own engine: one pass per release.

A release asks for a set of :class:`Agg` — small declarative descriptions of the exact
aggregates its measurements need (row counts, fixed-point sums, sums of squares and of
products) — and :func:`aggregate` computes all of them in one pass, per declared group key
when grouping. The frame is never converted to another library: the per-row expressions are
narwhals expressions that run in pandas or Polars (a Polars ``LazyFrame`` stays lazy; only the
per-group aggregates — a handful of integers — are collected). For numeric columns that pandas
or an eager Polars frame hold as plain arrays, the same arithmetic runs as a cache-blocked numpy
kernel on a zero-copy view (:func:`_numpy_sums`); ``method="narwhals"`` forces the generic
path, and the two agree bit for bit (tested).

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
sensitivity of :mod:`dpframe.queries` holds for it exactly. ``q`` is the smallest power of two
with ``max|k| ≤ M``, where ``M = ⌊(2⁵³ − 1)/n⌋`` (``√`` of that when Σk² is needed) and ``n`` is
the protected data set's public size; hence ``|Σk| < 2⁵³`` and ``Σk² < 2⁵³``:

* the sums can never overflow or round (integer-valued doubles below 2⁵³, in any order);
* ``q·Σk`` is an exact float (an integer below 2⁵³ times a power of two).

No aggregation can see more than ``n`` rows: dpframe only answers verified derivations, which
keep or drop rows of the protected frame and never repeat one (:mod:`dpframe.derivations`).
The quantisation moves each value by at most ``q/2``; it is a per-row preprocessing step, like
clamping, so it changes no sensitivity.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.backends import (
    is_dask_frame,
    is_pandas_frame,
    is_polars_eager,
    is_polars_lazy,
    is_spark_frame,
)
from dpframe.errors import ParameterError, UnsupportedInputError

__all__ = [
    "Agg",
    "FixedPoint",
    "aggregate",
    "engine_name",
    "frame_columns",
    "validate_column",
]

_EXACT = 2**53 - 1
DROP = "drop"
#: Aggregate kinds that are sums over rows (so per-partition results add up) and that
#: :mod:`dpframe.engine_spark` writes as SQL; other kinds take the narwhals path on engines.
ADDITIVE_KINDS = ("rows", "sum", "sum_sq", "sum_prod")


@dataclass(frozen=True)
class FixedPoint:
    """Public fixed-point grid ``x = center + k·q`` with ``k ∈ [k_lo, k_hi]``."""

    center: float
    q: float
    k_lo: int
    k_hi: int

    @classmethod
    @functools.lru_cache(maxsize=256)
    def choose(
        cls, lower: float, upper: float, center: float, row_cap: int, squares: bool
    ) -> FixedPoint:
        """Finest power-of-two quantum keeping ``|Σk|`` (and ``Σk²``) below 2⁵³ for
        ``row_cap`` rows."""
        lo, hi, c = Fraction(lower), Fraction(upper), Fraction(center)
        half = max(abs(hi - c), abs(lo - c))
        # |k| ≤ 2^50 also keeps the engine's round-to-integer trick exact (see _rounded)
        limit = min(_EXACT // max(int(row_cap), 1), 2**50)
        if squares:
            limit = math.isqrt(limit)
        if limit < 2:
            raise UnsupportedInputError(
                f"cannot aggregate {row_cap} rows exactly in 53-bit fixed point; "
                "protect smaller frames or split the data"
            )
        if half == 0:
            return cls(float(center), 1.0, 0, 0)
        # smallest e with half / 2**e <= limit
        e = math.frexp(float(half / limit))[1]
        while half / Fraction(2) ** (e - 1) <= limit:
            e -= 1
        while half / Fraction(2) ** e > limit:
            e += 1
        q = Fraction(2) ** e
        k_lo = math.ceil((lo - c) / q)
        k_hi = math.floor((hi - c) / q)
        return cls(float(center), float(q), k_lo, k_hi)


@dataclass(frozen=True)
class Agg:
    """One exact aggregate a measurement needs, per group.

    ``kind``: ``"rows"`` (row count; with ``column``, the rows where that column is present
    under the ``"drop"`` policy), ``"sum"`` (Σk of ``column`` in fixed point ``fp``),
    ``"sum_sq"`` (Σk²) or ``"sum_prod"`` (Σk·k₂ of ``column`` and ``column2``).
    """

    kind: str
    column: str | None = None
    fp: FixedPoint | None = None
    column2: str | None = None
    fp2: FixedPoint | None = None

    @property
    def scale(self) -> float:
        """The factor turning the integer aggregate into the statistic (q, q² or q·q₂)."""
        if self.kind == "rows" or self.fp is None:
            return 1.0
        if self.kind == "sum":
            return self.fp.q
        if self.kind == "sum_sq":
            return self.fp.q * self.fp.q
        assert self.fp2 is not None
        return self.fp.q * self.fp2.q

    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in (self.column, self.column2) if c is not None)


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


def frame_columns(native: Any) -> dict[str, Any]:
    """Column name → narwhals dtype, from the schema only (no data is read)."""
    obj = nw.from_native(native)
    schema = obj.collect_schema() if isinstance(obj, nw.LazyFrame) else obj.schema
    return dict(schema.items())


def _is_numeric(dtype: Any) -> bool:
    return bool(dtype.is_numeric()) or dtype == nw.Boolean


def _is_float(dtype: Any) -> bool:
    return dtype in (nw.Float32, nw.Float64)


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
    if numeric and not _is_numeric(cols[column]):
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
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None = None,
    keys: Sequence[Any] | None = None,
    method: str = "auto",
) -> dict[Agg, np.ndarray]:
    """Every aggregate in ``aggs``, exactly, in one pass over ``native``.

    Returns ``{agg: array}``: one entry per declared key (zeros for empty groups; rows with
    other or missing keys are left out inside the engine), or one entry without a group-by.
    Values are integers held exactly in float64. ``missing``: the policy of each column read
    (``"drop"`` or a fill value). ``method``: ``"auto"`` (numpy kernel where the columns allow
    it, else narwhals), ``"numpy"`` (raise if it cannot run) or ``"narwhals"``.
    """
    if method not in ("auto", "numpy", "narwhals"):
        raise ParameterError(f"method must be 'auto', 'numpy' or 'narwhals', got {method!r}")
    aggs = list(dict.fromkeys(aggs))
    columns = frame_columns(native)
    data = None
    # values near ±1.8e308 overflow to ±inf when scaled by 1/q; clamping maps them to the
    # bounds, exactly as for any value outside them (a value is never an error)
    with np.errstate(over="ignore"):
        if method != "narwhals":
            data = _numpy_sums(native, aggs, columns, missing, group_by, keys)
            if data is None and method == "numpy":
                raise ParameterError("method='numpy' needs plain numeric columns of an "
                                     "in-memory frame and no products of columns")
        if data is None:
            data = _narwhals_sums(native, aggs, columns, missing, group_by, keys)
    for agg, values in data.items():
        if not np.all(np.mod(values, 1.0) == 0.0):  # pragma: no cover - engine invariant
            raise RuntimeError(f"internal error: aggregate {agg} is not an integer; please report")
    return data


#: Adding then subtracting 1.5·2^52 rounds a double of magnitude below 2^51 to the nearest
#: integer (ties to even) in IEEE arithmetic; the sums of such integers stay exact as long as
#: every partial sum is below 2^53, which :class:`FixedPoint` guarantees.
_ROUNDER = 1.5 * 2.0**52


def _rounded(expr: Any) -> Any:
    return (expr + _ROUNDER) - _ROUNDER


def _present(column: str, dtype: Any) -> Any:
    """Row-wise: the column holds a value (not null, not NaN)."""
    if _is_float(dtype):
        return ~(nw.col(column).is_null() | nw.col(column).is_nan()).fill_null(True)
    return ~nw.col(column).is_null()


def _k_expression(column: str, dtype: Any, fp: FixedPoint, policy: Any) -> tuple[Any, Any]:
    """``(k, present)``: the per-row fixed-point integer ``round(clip((x − c)/q))`` as an
    exact integer-valued double, with missing values replaced by the fill value (or by the
    centre, to be masked out, under ``"drop"``); ``present`` is None unless rows are dropped."""
    x = nw.col(column) if dtype == nw.Float64 else nw.col(column).cast(nw.Float64)
    present = None
    if policy == DROP:
        present = _present(column, dtype)
        x = nw.when(present).then(x).otherwise(nw.lit(fp.center))
    else:
        x = nw.when(_present(column, dtype)).then(x).otherwise(nw.lit(float(policy)))
    inv_q = 1.0 / fp.q  # exact: q is a power of two
    scaled = (x - fp.center) * inv_q if fp.center != 0.0 else x * inv_q
    return _rounded(scaled.clip(fp.k_lo, fp.k_hi)), present


def _drops(column: str | None, columns: Mapping[str, Any], missing: Mapping[str, Any]) -> bool:
    return column is not None and missing.get(column, DROP) == DROP


def _row_expressions(
    aggs: Sequence[Agg], columns: Mapping[str, Any], missing: Mapping[str, Any]
) -> dict[str, Any]:
    """One named per-row expression per aggregate (summed by the caller); None for a plain
    row count (the caller uses the engine's ``len``)."""
    out: dict[str, Any] = {}
    for i, agg in enumerate(aggs):
        name = f"__dp_{i}"
        if agg.kind == "rows":
            if agg.column is None or not _drops(agg.column, columns, missing):
                out[name] = None
            else:
                out[name] = _present(agg.column, columns[agg.column]).cast(nw.Float64)
            continue
        assert agg.column is not None and agg.fp is not None
        policy = missing.get(agg.column, DROP)
        k, present = _k_expression(agg.column, columns[agg.column], agg.fp, policy)
        masks = [present] if present is not None else []
        if agg.kind == "sum":
            expr = k
        elif agg.kind == "sum_sq":
            expr = k * k
        else:
            assert agg.column2 is not None and agg.fp2 is not None
            k2, present2 = _k_expression(agg.column2, columns[agg.column2], agg.fp2,
                                         missing.get(agg.column2, DROP))
            expr = k * k2
            if present2 is not None:
                masks.append(present2)
        for mask in masks:
            expr = expr * mask.cast(nw.Float64)
        out[name] = expr
    return out


def _engine_frame(native: Any) -> Any:
    """The narwhals frame aggregations run on. Polars eager frames run through their lazy
    plan (zero-copy) so the per-row expressions fuse with the sums."""
    return nw.from_native(native.lazy() if is_polars_eager(native) else native)


def _narwhals_sums(
    native: Any,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
) -> dict[Agg, np.ndarray]:
    """The aggregates inside the frame's engine. PySpark frames get the same arithmetic as
    Spark SQL text (:mod:`dpframe.engine_spark`: building narwhals expressions costs a JVM
    round trip per operation there) and Dask frames run the in-memory path partition by
    partition (:mod:`dpframe.engine_dask`); every other engine runs the narwhals
    expressions."""
    if is_spark_frame(native):
        from dpframe.engine_spark import spark_sums

        found = spark_sums(native, aggs, columns, missing, group_by, keys)
        if found is not None:
            return found
    if is_dask_frame(native) and all(a.kind in ADDITIVE_KINDS for a in aggs):
        from dpframe.engine_dask import dask_sums

        return dask_sums(native, aggs, missing, group_by, keys)
    return _expression_sums(native, aggs, columns, missing, group_by, keys)


def _expression_sums(
    native: Any,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
) -> dict[Agg, np.ndarray]:
    """The generic path: narwhals per-row expressions and sums, collected."""
    frame = _engine_frame(native)
    exprs = _row_expressions(aggs, columns, missing)
    sums = {n: e for n, e in exprs.items() if e is not None}
    length = "__dp_len"  # one row count serves every plain "rows" aggregate
    cols = [] if group_by is None else [group_by] if isinstance(group_by, str) else list(
        group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])]
    if cols:
        for i, col in enumerate(cols):  # keep rows whose key (in every column) is declared
            declared = list(dict.fromkeys(k[i] for k in tuples))
            if _is_float(columns[col]):  # int keys of a float column (Polars compares dtypes)
                declared = [float(k) for k in declared]
            frame = frame.filter(nw.col(col).is_in(declared))
        # materialise the per-row columns first: simple per-column sums group efficiently in
        # every backend (pandas cannot group arbitrary expressions)
        frame = frame.select(*(nw.col(c) for c in cols),
                             *(e.alias(n) for n, e in sums.items()))
        result = frame.group_by(*cols).agg(nw.len().alias(length),
                                           *(nw.col(n).sum() for n in sums))
    else:
        result = frame.select(nw.len().alias(length),
                              *(e.sum().alias(n) for n, e in sums.items()))
    if isinstance(result, nw.LazyFrame):
        result = _collect(result, native)
    names = [length if exprs[f"__dp_{i}"] is None else f"__dp_{i}" for i in range(len(aggs))]
    return _aligned(aggs, cols, columns, tuples,
                    list(zip(*(result.get_column(c).to_list() for c in cols), strict=True)),
                    [result.get_column(name).to_list() for name in names])


def _aligned(
    aggs: Sequence[Agg],
    cols: Sequence[str],
    columns: Mapping[str, Any],
    tuples: Sequence[tuple[Any, ...]],
    found_keys: Sequence[tuple[Any, ...]],
    values: Sequence[Sequence[Any]],
) -> dict[Agg, np.ndarray]:
    """Align the engine's groups (``found_keys``, one tuple per result row; ``values[i]``:
    aggregate ``i`` per result row) with the declared keys: a combination not present in the
    data is an empty group (zeros); present combinations that were not declared are dropped.
    Without a group-by, the one result row."""
    found: dict[Any, int] = {None: 0}
    order: list[Any] = [None]
    if cols:
        order = [tuple(_as_float_if(columns[c], v) for c, v in zip(cols, k, strict=True))
                 for k in tuples]
        found = {tuple(_as_float_if(columns[c], v) for c, v in zip(cols, row, strict=True)): i
                 for i, row in enumerate(found_keys)}
    pos = np.array([found.get(key, -1) for key in order], dtype=np.int64)
    present = pos >= 0
    out: dict[Agg, np.ndarray] = {}
    for agg, column in zip(aggs, values, strict=True):
        raw = np.asarray([0.0 if v is None else v for v in column], dtype=np.float64)
        aligned = np.zeros(len(order), dtype=np.float64)
        aligned[present] = raw[pos[present]]
        out[agg] = aligned
    return out


def _collect(result: Any, native: Any) -> Any:
    """Collect the (tiny) aggregate frame. Polars LazyFrames use Polars' streaming engine, so
    a scan larger than memory is aggregated batch by batch."""
    if is_polars_lazy(native):
        return result.collect(engine="streaming")
    return result.collect()


def _as_float_if(dtype: Any, value: Any) -> Any:
    """Keys of a float column compare as floats (an int key 1 matches a float value 1.0)."""
    return float(value) if _is_float(dtype) and value is not None else value


#: Rows per block of the numpy kernel: 64 K doubles (512 KB) stay in the CPU cache.
_BLOCK = 1 << 16


def _numpy_sums(
    native: Any,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
) -> dict[Agg, np.ndarray] | None:
    """The same aggregates from zero-copy numpy views, block by block, or None when a column
    is not held as a plain numeric array (then the narwhals path runs).

    pandas keeps such a column as one contiguous numpy array; an eager Polars column with one
    chunk and no nulls is exposed without copying. A group-by maps each row's key to its
    position among the declared keys (pandas' hash index; -1 for undeclared or missing keys,
    which are dropped) and sums per key with ``np.bincount``. Every value is an integer-valued
    double, so every partial sum, in any order, is exact: the results equal the narwhals
    path's.
    """
    in_memory = is_pandas_frame(native) or is_polars_eager(native)
    several_keys = group_by is not None and not isinstance(group_by, str)
    if not in_memory or several_keys or any(a.kind == "sum_prod" for a in aggs):
        return None
    needed = sorted({c for a in aggs for c in a.columns()})
    views = {}
    for column in needed:
        view = _numpy_view(native, column, grouped=group_by is not None)
        if view is None:
            return None
        views[column] = view
    n_rows = _row_count(native)
    codes = None
    if group_by is not None:
        assert isinstance(group_by, str)
        codes = _declared_codes(native, group_by, list(keys or []))
        if codes is None:
            return None
    n_groups = 1 if codes is None else len(keys or [])
    out = {a: np.zeros(n_groups) for a in aggs}
    all_rows = [a for a in aggs if a.kind == "rows" and not _drops(a.column, columns, missing)]
    for agg in all_rows:
        out[agg] = (np.bincount(codes[codes >= 0], minlength=n_groups).astype(np.float64)
                    if codes is not None else np.array([float(n_rows)]))
    for column, values in views.items():
        mine = [a for a in aggs if a.column == column and a not in all_rows]
        _column_kernel(values, mine, missing.get(column, DROP), codes, n_groups, out)
    return out


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
    can_miss = values.dtype.kind == "f"
    for start in range(0, values.size, _BLOCK):
        block = values[start : start + _BLOCK]
        group = None
        if codes is not None:  # keep the rows of declared keys only
            group = codes[start : start + _BLOCK]
            keep = group >= 0
            if not keep.all():
                block, group = block[keep], group[keep]
        present = None
        if can_miss:
            nan = np.isnan(block)
            if nan.any():
                present = ~nan
        if row_aggs:
            counts = _per_group(present.astype(np.float64) if present is not None else None,
                                block.size, group, n_groups)
            for a in row_aggs:
                out[a] += counts
        for fp, group_aggs in by_fp.items():
            inv_q = 1.0 / fp.q
            y = np.multiply(block, inv_q, dtype=np.float64)  # float64 copy, exact scaling
            if fp.center != 0.0:
                y -= fp.center * inv_q  # exact: scaling by a power of two
            if present is not None:
                fill = 0.0 if policy == DROP else (float(policy) - fp.center) * inv_q
                y[~present] = fill
            np.clip(y, fp.k_lo, fp.k_hi, out=y)
            y += _ROUNDER
            y -= _ROUNDER
            if present is not None and policy == DROP:
                y[~present] = 0.0
            for a in group_aggs:
                w = y if a.kind == "sum" else y * y
                out[a] += _per_group(w, w.size, group, n_groups)


def _per_group(weights: np.ndarray | None, size: int, group: np.ndarray | None,
               n_groups: int) -> np.ndarray:
    if group is None:
        return np.array([float(size) if weights is None else float(weights.sum())])
    return np.bincount(group, weights=weights, minlength=n_groups).astype(np.float64)


def _row_count(native: Any) -> int:
    return len(native) if is_pandas_frame(native) else int(native.height)


def _numpy_view(native: Any, column: str, *, grouped: bool) -> np.ndarray | None:
    """A zero-copy numpy view of a numeric column of an in-memory frame, or None.

    pandas: a column held as a plain numpy array (extension dtypes — nullable, Arrow-backed —
    return None). Polars: an eager ``DataFrame`` column with one chunk and no nulls, which
    Polars exposes without copying (``allow_copy=False``); LazyFrames stay lazy (None), and
    Polars group-bys run in Polars."""
    if is_pandas_frame(native):
        series = native[column]
        dtype = getattr(series, "dtype", None)
        if not isinstance(dtype, np.dtype) or dtype.kind not in "fiu":
            return None
        return series.to_numpy(copy=False)
    if is_polars_eager(native) and not grouped:
        series = native.get_column(column)
        if not series.dtype.is_numeric() or series.null_count() or series.n_chunks() != 1:
            return None
        try:
            values = series.to_numpy(allow_copy=False)
        except Exception:
            return None
        return values if values.dtype.kind in "fiu" else None
    return None


def _declared_codes(native: Any, group_by: str, keys: list[Any]) -> np.ndarray | None:
    """Position of each row's key among the declared keys (-1: undeclared or missing), or
    None when the keys cannot be matched this way (then the narwhals path runs)."""
    if not is_pandas_frame(native):
        return None
    import pandas as pd

    declared = pd.Index(keys)
    key_col = native[group_by]
    try:
        if isinstance(key_col.dtype, pd.CategoricalDtype):
            if len(key_col.cat.categories) == 0:
                return None
            per_category = declared.get_indexer(key_col.cat.categories)
            cat_codes = key_col.cat.codes.to_numpy()
            return np.where(cat_codes >= 0, per_category[cat_codes], -1)
        return np.asarray(declared.get_indexer(key_col), dtype=np.int64)
    except (TypeError, ValueError, IndexError):  # pragma: no cover - unusual key columns
        return None
