"""Exact aggregation inside the frame's own engine, through narwhals.

The frame is never converted to numpy or to another library: the clamping, the fixed-point
conversion and the integer sums are narwhals expressions that run in pandas or Polars (a
Polars ``LazyFrame`` stays lazy; only the per-group aggregates — a handful of integers — are
collected). For a numeric column that pandas (or an eager Polars frame) holds as one plain
array, the same expressions run as a cache-blocked numpy kernel on a zero-copy view of that
column (:func:`_numpy_column_sums`); the results are bit-identical (tested).

**Exact sums (Casacuberta et al. 2022).** A float sum of clamped values can move by more than
the declared sensitivity when one row changes, because rounding depends on every other row.
dpframe therefore sums *integers*: each clamped value ``x ∈ [l, u]`` becomes
``k = round((x − c)/q)``, clipped to ``[k_lo, k_hi] = [⌈(l − c)/q⌉, ⌊(u − c)/q⌋]``, with a public
centre ``c`` and a power-of-two quantum ``q`` (:class:`FixedPoint`). ``c + k·q`` lies in
``[l, u]``, so the fixed-point data is a legitimate data set within the bounds and every
sensitivity of :mod:`dpframe.queries` holds for it exactly. ``q`` is the smallest power of two
with ``max|k| ≤ M``, where ``M = ⌊(2⁵³ − 1)/R⌋`` (``√`` of that when Σk² is needed) and ``R``
is a public cap on the rows of one aggregation; hence ``|Σk| < 2⁵³`` and ``Σk² < 2⁵³``:

* the int64 sums can never overflow (2⁵³ ≪ 2⁶³) — integer columns never wrap, whatever
  their own dtype (a Polars ``Int32`` is cast to ``Float64`` before clamping, ``k`` is ``Int64``);
* ``q·Σk`` is an exact float (an integer below 2⁵³ times a power of two).

The engine checks that an aggregation saw at most ``R`` rows and refuses otherwise (that can
only happen on a derived frame with more rows than allowed, e.g. a large concat). The
quantisation moves each value by at most ``q/2``: for sums and means about ``w·2⁻⁵³·R``
(2⁻³² of the width for R = 4·10⁶ rows), for variances, whose squares must fit too, about
``w·2^-(53 − log₂R)/2`` (2⁻¹⁶ of the half-width for the same R). It is a per-row
preprocessing step, like clamping: it changes no sensitivity.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.errors import ParameterError, UnsupportedInputError
from dpframe.queries import Aggregates

__all__ = [
    "AggregateTable",
    "FixedPoint",
    "aggregate",
    "engine_name",
    "frame_columns",
    "validate_column",
]

_EXACT = 2**53 - 1


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


def _wrap(native: Any) -> Any:
    """``nw.from_native`` with a small cache: wrapping is pure (no data is read) but costs
    about 0.2 ms in narwhals, which matters for many small queries. Entries hold a strong
    reference to the native object, so an id is never reused while cached."""
    key = id(native)
    hit = _WRAPPED.get(key)
    if hit is not None and hit[0] is native:
        return hit[1]
    wrapped = nw.from_native(native)
    if len(_WRAPPED) >= 8:
        _WRAPPED.pop(next(iter(_WRAPPED)))
    _WRAPPED[key] = (native, wrapped)
    return wrapped


_WRAPPED: dict[int, tuple[Any, Any]] = {}


def engine_name(native: Any) -> str:
    """``"pandas"``, ``"polars"`` or ``"polars-lazy"`` (plus version) for the log; computed
    once per frame type."""
    cached = _ENGINE_NAMES.get(type(native))
    if cached is not None:
        return cached
    obj = _wrap(native)
    impl = obj.implementation
    name = str(impl.name).lower()
    if isinstance(obj, nw.LazyFrame):
        name += "-lazy"
    try:
        version = impl._backend_version()
        version = ".".join(str(v) for v in version)
    except Exception:  # pragma: no cover - narwhals internals vary
        version = ""
    _ENGINE_NAMES[type(native)] = name = f"{name} {version}".strip()
    return name


_ENGINE_NAMES: dict[type, str] = {}


def frame_columns(native: Any) -> dict[str, Any]:
    """Column name → narwhals dtype, from the schema only (no data is read)."""
    obj = _wrap(native)
    schema = obj.collect_schema() if isinstance(obj, nw.LazyFrame) else obj.schema
    return dict(schema.items())


def _is_numeric(dtype: Any) -> bool:
    return bool(dtype.is_numeric()) or dtype == nw.Boolean


def _is_float(dtype: Any) -> bool:
    return dtype in (nw.Float32, nw.Float64)


def validate_column(native: Any, column: str, *, numeric: bool = True) -> Any:
    """Raise :class:`UnsupportedInputError` unless ``column`` exists (and is numeric)."""
    cols = frame_columns(native)
    if column not in cols:
        shown = ", ".join(map(repr, list(cols)[:20]))
        raise UnsupportedInputError(
            f"column {column!r} is not in the frame; available columns: {shown}"
        )
    if numeric and not _is_numeric(cols[column]):
        raise UnsupportedInputError(
            f"column {column!r} has dtype {cols[column]}, not a numeric type; cast it to a "
            "number (e.g. .astype(float) / pl.col(...).cast(pl.Float64)) and declare its bounds"
        )
    return cols[column]


def aggregate(
    native: Any,
    *,
    column: str | None,
    fixed_point: FixedPoint | None,
    squares: bool,
    row_cap: int,
    bounds: tuple[float, float] | None = None,
    nulls: str = "raise",
    group_by: str | None = None,
    keys: list[Any] | None = None,
    column_dtype: Any = None,
) -> AggregateTable:
    """Exact per-group aggregates (``table[None]`` without a group-by).

    ``column_dtype``: the narwhals dtype the caller already got from :func:`validate_column`
    (skips a second schema read).

    Only declared ``keys`` are aggregated (rows with other keys, or a null key, are filtered
    out in the engine) and every declared key gets an entry, zeros for an empty group.
    """
    if nulls not in ("raise", "drop"):
        raise ParameterError(f"nulls must be 'raise' or 'drop', got {nulls!r}")
    if column is None:
        return _aggregates(_sums(native, {}, group_by, keys), None, row_cap, group_by, keys)
    assert fixed_point is not None
    dtype = column_dtype if column_dtype is not None else validate_column(native, column)
    # Fast path: quantise every row without masking, and check for bad values with two cheap
    # reductions (a raw float sum is non-finite iff a NaN or ±inf is present, barring overflow;
    # nulls are counted). Only if bad values exist do we run the masked path, which needs
    # nulls="drop".
    fast = _row_expressions(column, dtype, fixed_point, squares, masked=False)
    if _is_float(dtype):
        fast["__dp_raw"] = nw.col(column)
    totals = {}
    if group_by is None:  # a whole-column null count is metadata in Polars: no pass
        totals["__dp_nulls"] = nw.col(column).null_count()
    else:
        fast["__dp_nulls"] = nw.col(column).is_null().cast(nw.Int64)
    data = _numpy_column_sums(native, column, fixed_point, squares, group_by, keys)
    if data is None:
        data = _sums(native, fast, group_by, keys, totals)
    raw = _total(data.get("__dp_raw", []))
    n_nulls = _total(data["__dp_nulls"])
    if n_nulls == 0 and math.isfinite(raw):
        return _aggregates(data, fixed_point, row_cap, group_by, keys)
    if nulls == "raise" and (n_nulls or math.isnan(raw) or _has_bad(native, column)):
        raise UnsupportedInputError(
            f"column {column!r} contains null, NaN or infinite values; clean them, or pass "
            "nulls='drop' to drop those rows (which makes the frame's size private). "
            "Nothing was spent."
        )
    if nulls == "raise":  # overflow of the raw sum only: the values are all finite
        return _aggregates(data, fixed_point, row_cap, group_by, keys)
    masked = _row_expressions(column, dtype, fixed_point, squares, masked=True)
    data = _sums(native, masked, group_by, keys)
    return _aggregates(data, fixed_point, row_cap, group_by, keys)


#: Adding then subtracting 1.5·2^52 rounds a double of magnitude below 2^51 to the nearest
#: integer (ties to even) in IEEE arithmetic; the sums of such integers stay exact as long as
#: every partial sum is below 2^53, which :class:`FixedPoint` guarantees.
_ROUNDER = 1.5 * 2.0**52


def _rounded(expr: Any) -> Any:
    return (expr + _ROUNDER) - _ROUNDER


def _row_expressions(
    column: str, dtype: Any, fp: FixedPoint, squares: bool, *, masked: bool
) -> dict[str, Any]:
    """Per-row fixed-point expressions ``k = round(clip((x − c)/q, k_lo, k_hi))`` (as exact
    integer-valued doubles) and, on the masked path, the good-row indicator."""
    # every quantisation runs in float64 (a Float32 column would lose bits in k)
    x = nw.col(column) if dtype == nw.Float64 else nw.col(column).cast(nw.Float64)
    if masked:
        if _is_float(dtype):
            good = nw.col(column).is_finite().fill_null(False)
        else:
            good = ~nw.col(column).is_null()
        x = nw.when(good).then(x).otherwise(nw.lit(fp.center))
    # Clamp and quantise in one clip: clipping (x − c)/q to [k_lo, k_hi] clamps x to
    # [c + k_lo·q, c + k_hi·q] ⊆ [l, u] (the declared bounds, up to less than one quantum);
    # rounding an in-range value keeps it in range.
    inv_q = 1.0 / fp.q  # exact: q is a power of two (and × is much faster than ÷ in pandas)
    scaled = (x - fp.center) * inv_q if fp.center != 0.0 else x * inv_q
    k = _rounded(scaled.clip(fp.k_lo, fp.k_hi))
    cols: dict[str, Any] = {}
    if masked:
        good_f = good.cast(nw.Float64)
        cols["__dp_rows"] = good_f
        cols["__dp_ksum"] = k * good_f
        if squares:
            cols["__dp_ksq"] = k * k * good_f
    else:
        cols["__dp_ksum"] = k
        if squares:
            cols["__dp_ksq"] = k * k
    return cols


def _has_bad(native: Any, column: str) -> bool:
    """Exact check for NaN/±inf/null (only run when the cheap reductions flag a problem)."""
    frame = _engine_frame(native)
    dtype = frame_columns(native)[column]
    if not _is_float(dtype):
        bad = nw.col(column).is_null()
    else:
        bad = ~(nw.col(column).is_finite().fill_null(False))
    res = frame.select(bad.cast(nw.Int64).sum().alias("bad"))
    if isinstance(res, nw.LazyFrame):
        res = res.collect()
    return bool(res.item(0, "bad"))


def _engine_frame(native: Any) -> Any:
    """The narwhals frame aggregations run on. Polars eager frames run through their lazy
    plan (zero-copy) so the per-row expressions fuse with the sums instead of materialising
    intermediate columns."""
    return nw.from_native(native.lazy() if _is_polars_eager(native) else native)


def _sums(
    native: Any,
    cols: dict[str, Any],
    group_by: str | None,
    keys: list[Any] | None,
    totals: dict[str, Any] | None = None,
) -> dict[str, list[Any]]:
    """Sum the per-row expressions, per declared key when grouping: ``{name: [per group]}``.
    Rows whose key is not declared are filtered out inside the engine. ``totals`` are
    ready-made whole-frame aggregate expressions (ungrouped only)."""
    frame = _engine_frame(native)
    count = [] if "__dp_rows" in cols else [nw.len().alias("__dp_rows")]
    if group_by is not None:
        validate_column(native, group_by, numeric=False)
        frame = frame.filter(nw.col(group_by).is_in(list(keys or [])))
        # materialise the per-row columns first: simple per-column sums group efficiently in
        # every backend (pandas cannot group arbitrary expressions)
        frame = frame.select(nw.col(group_by), *(e.alias(n) for n, e in cols.items()))
        result = frame.group_by(group_by).agg(*(nw.col(n).sum() for n in cols), *count)
    else:
        extra = [e.alias(n) for n, e in (totals or {}).items()]
        result = frame.select(*(e.sum().alias(n) for n, e in cols.items()), *count, *extra)
    if isinstance(result, nw.LazyFrame):
        result = result.collect()
    return {name: result.get_column(name).to_list() for name in result.columns}


#: Rows per block of the numpy kernel: 64 K doubles (512 KB) stay in the CPU cache.
_BLOCK = 1 << 16


def _numpy_column_sums(
    native: Any,
    column: str,
    fp: FixedPoint,
    squares: bool,
    group_by: str | None = None,
    keys: list[Any] | None = None,
) -> dict[str, list[Any]] | None:
    """The fast path's sums (per declared key when grouping) for a pandas column stored as a
    plain numpy array, or None.

    pandas keeps such a column as one contiguous numpy array; we read it through a zero-copy
    view (nothing is converted or copied) and run the same fixed-point expressions as the
    narwhals path, block by block so every intermediate stays in the CPU cache. A group-by
    maps each row's key to its position among the declared keys (pandas' hash index; -1 for
    undeclared or missing keys, which are dropped) and sums per key with ``np.bincount``. The
    results are identical to the narwhals path (tested): every value is an integer-valued
    double, so every partial sum, in any order, is exact.
    """
    values = _numpy_view(native, column, grouped=group_by is not None)
    if values is None:
        return None
    dtype = values.dtype
    codes = None if group_by is None else _declared_codes(native, group_by, keys or [])
    if group_by is not None and codes is None:
        return None
    n_groups = 1 if codes is None else len(keys or [])
    k_sums = np.zeros(n_groups)
    k_sqs = np.zeros(n_groups)
    rows = np.zeros(n_groups)
    inv_q = 1.0 / fp.q
    shift = fp.center * inv_q  # exact: scaling by a power of two
    raw = 0.0
    for start in range(0, values.size, _BLOCK):
        block = values[start : start + _BLOCK]
        group = None
        if codes is not None:  # keep the rows of declared keys only
            group = codes[start : start + _BLOCK]
            keep = group >= 0
            if not keep.all():
                block, group = block[keep], group[keep]
        y = np.multiply(block, inv_q, dtype=np.float64)  # float64 copy, exact scaling
        if dtype.kind == "f":
            raw += float(block.sum())
        if shift != 0.0:
            y -= shift
        np.clip(y, fp.k_lo, fp.k_hi, out=y)
        y += _ROUNDER
        y -= _ROUNDER
        if group is None:
            rows[0] += y.size
            k_sums[0] += float(y.sum())
            if squares:
                k_sqs[0] += float(np.dot(y, y))
        else:  # per-bin sums of integer-valued doubles: exact, like the totals
            rows += np.bincount(group, minlength=n_groups)
            k_sums += np.bincount(group, weights=y, minlength=n_groups)
            if squares:
                k_sqs += np.bincount(group, weights=y * y, minlength=n_groups)
    data: dict[str, list[Any]] = {
        "__dp_rows": rows.tolist(),
        "__dp_ksum": k_sums.tolist(),
        "__dp_nulls": [0],
        "__dp_raw": [raw],
    }
    if squares:
        data["__dp_ksq"] = k_sqs.tolist()
    if group_by is not None:
        data[group_by] = list(keys or [])
    return data


def _numpy_view(native: Any, column: str, *, grouped: bool) -> np.ndarray | None:
    """A zero-copy numpy view of a numeric column of an in-memory frame, or None.

    pandas: a column held as a plain numpy array (extension dtypes — nullable, Arrow-backed —
    return None). Polars: an eager ``DataFrame`` column with one chunk and no nulls, which
    Polars exposes without copying (``allow_copy=False``); LazyFrames stay lazy (None), and
    Polars group-bys run in Polars."""
    module = type(native).__module__.split(".")[0]
    if module == "pandas" and hasattr(native, "columns"):
        series = native[column]
        dtype = getattr(series, "dtype", None)
        if not isinstance(dtype, np.dtype) or dtype.kind not in "fiu":
            return None
        return series.to_numpy(copy=False)
    if module == "polars" and _is_polars_eager(native) and not grouped:
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
    import pandas as pd

    declared = pd.Index(keys)
    if not declared.is_unique:
        return None
    key_col = native[group_by]
    try:
        if isinstance(key_col.dtype, pd.CategoricalDtype):
            per_category = declared.get_indexer(key_col.cat.categories)
            cat_codes = key_col.cat.codes.to_numpy()
            return np.where(cat_codes >= 0, per_category[cat_codes], -1)
        return np.asarray(declared.get_indexer(key_col), dtype=np.int64)
    except (TypeError, ValueError, IndexError):  # pragma: no cover - unusual key columns
        return None


def _total(values: list[Any]) -> float:
    total = 0.0
    for v in values:
        if v is not None:
            total += v
    return total


def _aggregates(
    data: dict[str, list[Any]],
    fixed_point: FixedPoint | None,
    row_cap: int,
    group_by: str | None,
    keys: list[Any] | None,
) -> AggregateTable:
    """Exact aggregates per declared key (zeros for declared keys with no rows)."""
    q = fixed_point.q if fixed_point is not None else 1.0
    columns = {}
    for name in ("__dp_rows", "__dp_ksum", "__dp_ksq"):
        vals = np.asarray([0 if v is None else v for v in data.get(name, [])], dtype=np.float64)
        if not np.all(np.mod(vals, 1.0) == 0.0):
            raise RuntimeError(  # pragma: no cover - would mean the engine skipped the rounding
                f"internal error: fixed-point aggregate {name} is not an integer; please report"
            )
        columns[name] = vals if name in data else np.zeros(len(data["__dp_rows"]))
    if columns["__dp_rows"].size and columns["__dp_rows"].max() > row_cap:
        raise UnsupportedInputError(
            f"an aggregation saw more rows than the public cap of {row_cap} for this "
            "dataset (a derived frame larger than the protected one, e.g. a concat or a "
            "join?). Protect the combined frame with dpf.protect(..., row_cap=...) instead."
        )
    if group_by is None:
        order = [None]
        found = {None: 0} if columns["__dp_rows"].size else {}
    else:
        order = list(keys or [])
        found = {key: i for i, key in enumerate(data[group_by])}
    pos = np.array([found.get(key, -1) for key in order], dtype=np.int64)
    present = pos >= 0

    def aligned(v: np.ndarray) -> np.ndarray:
        out = np.zeros(len(order), dtype=np.float64)
        out[present] = v[pos[present]]
        return out

    return AggregateTable(
        order,
        aligned(columns["__dp_rows"]),
        aligned(columns["__dp_ksum"]),
        aligned(columns["__dp_ksq"]),
        q,
    )


class AggregateTable:
    """Exact aggregates per declared key, as arrays aligned with ``keys`` (one entry, key
    None, without a group-by). Values are integers held exactly in float64 (below 2⁵³)."""

    def __init__(
        self, keys: list[Any], rows: np.ndarray, k_sum: np.ndarray, k_sq: np.ndarray, q: float
    ) -> None:
        self.keys = keys
        self.vector = Aggregates(rows, k_sum, k_sq, q)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, key: Any) -> Aggregates:
        i = self.keys.index(key)
        v = self.vector
        return Aggregates(int(v.rows[i]), int(v.k_sum[i]), int(v.k_sq[i]), v.q)

    def values(self) -> list[Aggregates]:
        """One :class:`Aggregates` (Python ints) per key, in key order."""
        v = self.vector
        rows, k_sum, k_sq = (a.astype(np.int64).tolist() for a in (v.rows, v.k_sum, v.k_sq))
        return [Aggregates(*t, v.q) for t in zip(rows, k_sum, k_sq, strict=True)]


def _exact_int(value: Any) -> int:
    """An aggregate that must be an exact integer (a count, or a sum of integer-valued
    doubles whose partial sums stay below 2^53)."""
    if value is None:
        return 0
    f = float(value)
    if not f.is_integer():  # pragma: no cover - would mean the engine skipped the rounding
        raise RuntimeError(
            f"internal error: fixed-point aggregate {value!r} is not an integer; please report"
        )
    return int(f)


def _is_polars_eager(native: Any) -> bool:
    return type(native).__module__.startswith("polars") and type(native).__name__ == "DataFrame"
