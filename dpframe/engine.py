"""Exact aggregation inside the frame's own engine, through narwhals.

The frame is never converted to numpy or to another library: the clamping, the fixed-point
conversion and the integer sums are narwhals expressions that run in pandas or Polars (a
Polars ``LazyFrame`` stays lazy; only the per-group aggregates — a handful of integers — are
collected).

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

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import narwhals.stable.v2 as nw

from dpframe.errors import ParameterError, UnsupportedInputError
from dpframe.queries import Aggregates

__all__ = ["FixedPoint", "aggregate", "engine_name", "frame_columns", "validate_column"]

_EXACT = 2**53 - 1


@dataclass(frozen=True)
class FixedPoint:
    """Public fixed-point grid ``x = center + k·q`` with ``k ∈ [k_lo, k_hi]``."""

    center: float
    q: float
    k_lo: int
    k_hi: int

    @classmethod
    def choose(
        cls, lower: float, upper: float, center: float, row_cap: int, squares: bool
    ) -> FixedPoint:
        """Finest power-of-two quantum keeping ``|Σk|`` (and ``Σk²``) below 2⁵³ for
        ``row_cap`` rows."""
        lo, hi, c = Fraction(lower), Fraction(upper), Fraction(center)
        half = max(abs(hi - c), abs(lo - c))
        limit = _EXACT // max(int(row_cap), 1)
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


def engine_name(native: Any) -> str:
    """``"pandas"``, ``"polars"`` or ``"polars-lazy"`` (plus version) for the log."""
    obj = nw.from_native(native)
    impl = obj.implementation
    name = str(impl.name).lower()
    if isinstance(obj, nw.LazyFrame):
        name += "-lazy"
    try:
        version = impl._backend_version()
        version = ".".join(str(v) for v in version)
    except Exception:  # pragma: no cover - narwhals internals vary
        version = ""
    return f"{name} {version}".strip()


def frame_columns(native: Any) -> dict[str, Any]:
    """Column name → narwhals dtype, from the schema only (no data is read)."""
    obj = nw.from_native(native)
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
) -> dict[Any, Aggregates]:
    """Exact per-group aggregates (``{None: agg}`` without a group-by).

    Only declared ``keys`` are aggregated (rows with other keys, or a null key, are filtered
    out in the engine) and every declared key gets an entry, zeros for an empty group.
    """
    if nulls not in ("raise", "drop"):
        raise ParameterError(f"nulls must be 'raise' or 'drop', got {nulls!r}")
    # Polars eager frames run through their lazy plan (zero-copy) so the per-row expressions
    # fuse with the sums instead of materialising intermediate columns.
    frame = nw.from_native(native.lazy() if _is_polars_eager(native) else native)
    cols: dict[str, Any] = {}  # per-row expressions, summed per group
    if column is not None:
        assert fixed_point is not None
        dtype = validate_column(native, column)
        x = nw.col(column).cast(nw.Float64)
        if _is_float(dtype):
            good = nw.col(column).is_finite().fill_null(False)
        else:
            good = ~nw.col(column).is_null()
        fp = fixed_point
        xs = nw.when(good).then(x).otherwise(nw.lit(fp.center))
        # Clamp and quantise in one clip: clipping (x − c)/q to [k_lo, k_hi] clamps x to
        # [c + k_lo·q, c + k_hi·q] ⊆ [l, u] (the declared bounds, up to less than one quantum);
        # rounding an in-range value keeps it in range.
        inv_q = 1.0 / fp.q  # exact: q is a power of two (and × is much faster than ÷ in pandas)
        k = ((xs - fp.center) * inv_q).clip(fp.k_lo, fp.k_hi).round(0).cast(nw.Int64)
        good_i = good.cast(nw.Int64)
        cols["__dp_rows"] = good_i
        cols["__dp_ksum"] = k * good_i
        cols["__dp_nbad"] = 1 - good_i
        if squares:
            cols["__dp_ksq"] = k * k * good_i
    if group_by is not None:
        validate_column(native, group_by, numeric=False)
        if column is None:
            cols["__dp_rows"] = nw.lit(1).cast(nw.Int64)
        frame = frame.filter(nw.col(group_by).is_in(list(keys or [])))
        frame = frame.select(nw.col(group_by), *(e.alias(n) for n, e in cols.items()))
        result = frame.group_by(group_by).agg(*(nw.col(n).sum() for n in cols))
    else:
        aggs = [e.sum().alias(n) for n, e in cols.items()]
        if column is None:
            aggs.append(nw.len().alias("__dp_rows"))
        result = frame.select(*aggs)
    if isinstance(result, nw.LazyFrame):
        result = result.collect()
    names = result.columns
    rows = [dict(zip(names, r, strict=True)) for r in result.rows()]
    out: dict[Any, Aggregates] = {}
    q = fixed_point.q if fixed_point is not None else 1.0
    n_bad = 0
    for r in rows:
        n_rows = int(r["__dp_rows"] or 0)
        n_bad += int(r.get("__dp_nbad") or 0)
        if n_rows > row_cap:
            raise UnsupportedInputError(
                f"an aggregation saw more rows than the public cap of {row_cap} for this "
                "dataset (a derived frame larger than the protected one, e.g. a concat or a "
                "join?). Protect the combined frame with dpf.protect(..., row_cap=...) instead."
            )
        agg = Aggregates(n_rows, int(r.get("__dp_ksum") or 0), int(r.get("__dp_ksq") or 0), q)
        key = r[group_by] if group_by is not None else None
        out[key] = agg
    if column is not None and nulls == "raise" and n_bad:
        raise UnsupportedInputError(
            f"column {column!r} contains null, NaN or infinite values; clean them, or pass "
            "nulls='drop' to drop those rows (which makes the frame's size private). "
            "Nothing was spent."
        )
    if group_by is None:
        return {None: out.get(None, Aggregates(0, 0, 0, q))}
    full: dict[Any, Aggregates] = {}
    for key in keys or []:
        full[key] = out.get(key, Aggregates(0, 0, 0, q))
    return full


def _is_polars_eager(native: Any) -> bool:
    return type(native).__module__.startswith("polars") and type(native).__name__ == "DataFrame"


def _lo_of(fp: FixedPoint) -> float:
    return fp.center + fp.k_lo * fp.q


def _hi_of(fp: FixedPoint) -> float:
    return fp.center + fp.k_hi * fp.q
