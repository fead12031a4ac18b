"""Temporal group keys of pandas and Dask frames matched as integer ticks.

pandas converts a datetime column to the resolution of the keys it is compared with (and a
date held in Arrow to Python objects) inside ``isin``, ``get_indexer`` and some group-bys; a
value that does not fit the other resolution (a millisecond timestamp in year 300,000 against
microsecond keys) raises there, after the data was read. dpframe therefore compares temporal
keys of pandas and Dask frames on their physical integers: each temporal group column becomes
its ticks (days since 1970 for a date, the column's unit since 1970 for a datetime; nullable
Int64, missing where the value is), and each declared key becomes the tick it stands for in
that column's unit — public arithmetic on the key alone. A key with no exact tick there (finer
than the unit, out of the int64 range, of another kind) matches no row, so its group is
empty, as it would be for a key the data does not hold. Nothing here converts a data value.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["arrow_ticks", "column_kind", "duration_tick", "key_tick", "partitions_with_ticks",
           "series_ticks", "temporal_key_fits", "with_ticks"]

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.UTC)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
#: Nanoseconds per tick of each Arrow/pandas time unit.
NS_PER_TICK = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_INT64 = (-(2**63), 2**63 - 1)


def arrow_ticks(arr: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """``(ticks, valid, kind)`` of an Arrow date or timestamp array: int64 ticks (0 where
    missing), which values are present, and the array's Arrow type. Total."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_date32(arr.type) or pa.types.is_date64(arr.type):
        raw = pc.cast(pc.cast(arr, pa.date32()), pa.int32())
        kind = pa.date32()
    elif pa.types.is_timestamp(arr.type):
        raw, kind = pc.cast(arr, pa.int64()), arr.type
    else:  # pragma: no cover - callers pass temporal columns only
        return np.zeros(len(arr), np.int64), np.zeros(len(arr), bool), arr.type
    ticks = np.asarray(pc.fill_null(raw, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return ticks, valid, kind


def series_ticks(series: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """:func:`arrow_ticks` of a pandas date or datetime Series (numpy or Arrow backed)."""
    import pyarrow as pa

    return arrow_ticks(pa.array(series, from_pandas=True))


def _int64_series(ticks: np.ndarray, valid: np.ndarray, index: Any) -> Any:
    import pandas as pd

    return pd.Series(pd.arrays.IntegerArray(ticks, ~valid), index=index)


def with_ticks(native: Any, columns: Sequence[str], keep: Any = None) -> Any:
    """A pandas ``native`` with each of ``columns`` (dates, datetimes) replaced by its ticks
    (nullable Int64). ``keep(ticks, valid, kind)``: which ticks to keep (others become
    missing); all present ones by default."""
    out = {}
    for c in columns:
        ticks, valid, kind = series_ticks(native[c])
        if keep is not None:
            valid = valid & keep(ticks, kind)
        out[c] = _int64_series(ticks, valid, native.index)
    return native.assign(**out)


def partitions_with_ticks(native: Any, columns: Sequence[str], keep: Any = None) -> Any:
    """:func:`with_ticks` on every pandas partition of a partitioned frame (Dask), lazily:
    one ``map_partitions`` over its metadata frame ``_meta``."""
    import pandas as pd

    def replace(frame: Any) -> Any:
        return with_ticks(frame, columns, keep)

    meta = native._meta.assign(**{c: pd.Series([], dtype="Int64") for c in columns})
    return native.map_partitions(replace, meta=meta)


def column_kind(native: Any, column: str) -> Any:
    """The Arrow type of a pandas date/datetime column, from its dtype alone (an empty
    slice; for Dask, pass its metadata frame)."""
    import pyarrow as pa

    return series_ticks_type(pa.array(native[column].iloc[:0], from_pandas=True))


def series_ticks_type(arr: Any) -> Any:
    import pyarrow as pa

    return pa.date32() if pa.types.is_date32(arr.type) or pa.types.is_date64(arr.type) \
        else arr.type


def key_tick(value: Any, kind: Any) -> int | None:
    """The tick a declared key stands for in a column of Arrow type ``kind`` (date32, or a
    timestamp with its unit and zone), or None if it has none (module docstring). Public
    arithmetic on the key; total."""
    import pyarrow as pa

    try:
        if isinstance(value, np.datetime64):
            import pandas as pd

            value = pd.Timestamp(value)
        if pa.types.is_date32(kind):
            if isinstance(value, dt.datetime):
                if value.tzinfo is not None or value.time() != dt.time(0):
                    return None
                value = value.date()
            if not isinstance(value, dt.date):
                return None
            return value.toordinal() - _EPOCH_ORDINAL
        if not isinstance(value, dt.date):
            return None
        nanos = int(getattr(value, "nanosecond", 0) or 0)
        if not isinstance(value, dt.datetime):
            value = dt.datetime(value.year, value.month, value.day)
        if hasattr(value, "to_pydatetime"):
            value = value.to_pydatetime(warn=False)
        zoned = kind.tz is not None
        if (value.tzinfo is not None) != zoned:
            return None
        delta = value - (_EPOCH_UTC if zoned else _EPOCH)
        total = ((delta.days * 86_400 + delta.seconds) * 1_000_000
                 + delta.microseconds) * 1_000 + nanos
        per = NS_PER_TICK[kind.unit]
        if total % per:
            return None
        tick = total // per
        return tick if _INT64[0] <= tick <= _INT64[1] else None
    except Exception:  # a key of an unusual type: it matches no row
        return None


def duration_tick(value: Any, unit: str) -> int | None:
    """The tick (``unit``s) a declared key stands for in a Duration column, or None if it is
    not a ``datetime.timedelta`` (``pandas.Timedelta`` included) or has no exact tick there.
    Public arithmetic on the key; total."""
    try:
        if not isinstance(value, dt.timedelta):
            return None
        nanos = int(getattr(value, "nanoseconds", 0) or 0)
        total = ((value.days * 86_400 + value.seconds) * 1_000_000
                 + value.microseconds) * 1_000 + nanos
        per = NS_PER_TICK[unit]
        if total % per:
            return None
        tick = total // per
        return tick if _INT64[0] <= tick <= _INT64[1] else None
    except Exception:
        return None


def temporal_key_fits(value: Any, dtype: Any) -> bool:
    """A declared key is of the kind of a temporal column of narwhals dtype ``dtype`` and the
    column can hold it exactly, from the key and the dtype alone (never the data):

    - Date: a ``datetime.date`` that is not a ``datetime.datetime``;
    - Datetime: a ``datetime.datetime`` (``pandas.Timestamp`` included), naive for a naive
      column and aware (any zone: the same instant) for a zoned one, at a whole tick of the
      column's unit and within its int64 range;
    - Duration: a ``datetime.timedelta`` (``pandas.Timedelta`` included), likewise;
    - Time: a naive ``datetime.time``.

    numpy ``datetime64``/``timedelta64`` scalars do not fit (engines convert them
    differently). Anything else does not fit."""
    import narwhals.stable.v2 as nw
    import pyarrow as pa

    if isinstance(value, np.generic):
        return False
    if dtype == nw.Date:
        return (isinstance(value, dt.date) and not isinstance(value, dt.datetime)
                and key_tick(value, pa.date32()) is not None)
    if dtype == nw.Datetime:
        if not isinstance(value, dt.datetime):
            return False
        try:
            kind = pa.timestamp(dtype.time_unit, tz=dtype.time_zone)
        except Exception:  # a zone Arrow does not know: its keys still need a zone
            kind = pa.timestamp(dtype.time_unit, tz="UTC") if dtype.time_zone else \
                pa.timestamp(dtype.time_unit)
        return key_tick(value, kind) is not None
    if dtype == nw.Duration:
        return duration_tick(value, dtype.time_unit) is not None
    if dtype == nw.Time:
        return isinstance(value, dt.time) and value.tzinfo is None
    return False
