"""The keys present in the data, with their exact counts, for private key selection.

Key selection (docs/privacy.md, section K) counts every key the data holds inside the engine
and brings back one row per key. Everything after that read must be total (DESIGN.md §2): a
key is handed to Python only if a Python value stands for it exactly and converting it cannot
fail. Keys that fail that test are *in no group*, like rows missing a key:

- dates outside Python's years 1 to 9999, datetimes within a day of those ends (room for a
  time zone's offset) or not at a whole microsecond (Python's resolution: two nanosecond keys
  would become one);
- strings that do not encode as UTF-8 (a pandas object column can hold lone surrogates);
- -0.0 and 0.0 are one key (0.0).

The test reads physical values (Arrow integers), never a converted value. pandas and Dask
convert temporal values to Python objects inside some group-bys (and fail there on a date past
year 9999), so for them the temporal key columns are replaced by their integer ticks before
grouping (null where no Python value stands for the key) and converted back here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.backends import backend_of
from dpframe.engine import arrow_ticks, frame_columns
from dpframe.engine import is_float as _is_float
from dpframe.engine import is_present as _present

__all__ = ["observed_keys"]

#: Days since 1970 of 0001-01-01 and 9999-12-31, the range of Python's dates.
_PYTHON_DAYS = (-719_162, 2_932_896)
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def observed_keys(native: Any, group_by: Sequence[str], distinct: str | None = None
                  ) -> tuple[list[Any], np.ndarray]:
    """Every key (a value, or a tuple for several columns) present in the data with its exact
    row count (or, with ``distinct``, its number of distinct values of that column: the
    privacy units holding the key). Rows missing a key (null, NaN in a float column) and keys
    no Python value stands for exactly (module docstring) are left out. One pass in the
    frame's engine; only per-key counts come back, and only the kept keys become Python
    values."""
    cols = list(group_by)
    backend = backend_of(native)
    columns = frame_columns(native)
    ticked = [c for c in cols if _temporal(columns[c])] if backend.ticks_temporal_keys else []
    if ticked:
        native = backend.with_ticks(native, ticked, keep=_python_exact)
    frame = backend.engine_frame(native)
    for col in cols:
        frame = frame.filter(~nw.col(col).is_null() if col in ticked
                             else _present(col, columns[col]))
    floats = [c for c in cols if _is_float(columns[c])]
    if floats:  # -0.0 + 0.0 is 0.0: one group
        frame = frame.with_columns(*((nw.col(c) + 0.0).alias(c) for c in floats))
    count = nw.len() if distinct is None else nw.col(distinct).n_unique()
    result = frame.group_by(*cols).agg(count.alias("__dp_len"))
    if isinstance(result, nw.LazyFrame):
        result = backend.collect(result)
    keep = np.ones(len(result), dtype=bool)
    for col in cols:
        if col not in ticked:
            keep &= _exact(result.get_column(col), columns[col])
    if not keep.all():
        result = result.filter(keep.tolist())
    counts = np.asarray(result.get_column("__dp_len").to_numpy(), dtype=np.float64)
    values = [_python_values(result.get_column(c), columns[c], c in ticked) for c in cols]
    keys = values[0] if len(cols) == 1 else list(zip(*values, strict=True))
    return keys, counts


def _temporal(dtype: Any) -> bool:
    return bool(dtype == nw.Date or dtype == nw.Datetime)


def _python_values(series: Any, dtype: Any, ticked: bool) -> list[Any]:
    """The kept keys as Python values: from integer ticks for pandas and Dask temporal
    columns, otherwise the engine's own conversion (safe on kept keys)."""
    if ticked:
        return [_from_ticks(int(v), dtype) for v in series.to_list()]
    if _is_float(dtype):  # 0.0 whichever zero the engine met first
        return [v + 0.0 for v in series.to_list()]
    return list(series.to_list())


def _from_ticks(ticks: int, dtype: Any) -> Any:
    """A date (days since 1970) or datetime (ticks of the dtype's unit since 1970, UTC for a
    zoned one) as a Python value; in range by construction (:func:`_python_exact`)."""
    if dtype == nw.Date:
        return dt.date.fromordinal(_EPOCH_ORDINAL + ticks)
    unit = dtype.time_unit
    micros = ticks // 1000 if unit == "ns" else ticks * (1_000_000 // (_PER_DAY[unit]
                                                                       // 86_400))
    naive = _EPOCH + dt.timedelta(microseconds=micros)
    zone = dtype.time_zone
    if not zone:
        return naive
    return naive.replace(tzinfo=dt.UTC).astimezone(_zone(zone))


def _zone(name: str) -> dt.tzinfo:
    """The time zone called ``name`` (a public dtype fact), or UTC if Python does not know
    it (the key then shows the same instant in UTC)."""
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except Exception:
        return dt.UTC


def _python_exact(ticks: np.ndarray, kind: Any) -> np.ndarray:
    """Which ticks of an Arrow date or timestamp type a Python value stands for exactly
    (module docstring)."""
    import pyarrow as pa

    if pa.types.is_date32(kind):
        return (ticks >= _PYTHON_DAYS[0]) & (ticks <= _PYTHON_DAYS[1])
    days = np.floor_divide(ticks, _PER_DAY[kind.unit])
    ok = (days > _PYTHON_DAYS[0]) & (days < _PYTHON_DAYS[1])
    if kind.unit == "ns":
        ok &= np.remainder(ticks, 1000) == 0
    return np.asarray(ok, dtype=bool)


def _exact(series: Any, dtype: Any) -> np.ndarray:
    """Which keys of the per-key result (none missing) a Python value stands for exactly."""
    if _temporal(dtype):
        ticks, valid, kind = arrow_ticks(series.to_arrow())
        return valid & _python_exact(ticks, kind)
    if dtype == nw.String or dtype == nw.Categorical or dtype == nw.Enum:
        return np.fromiter((_utf8(v) for v in series.to_list()), dtype=bool,
                           count=len(series))
    return np.ones(len(series), dtype=bool)


def _utf8(value: Any) -> bool:
    """A string encodes as UTF-8 (other values, the categories of a pandas categorical of
    numbers, pass)."""
    if not isinstance(value, str):
        return True
    try:
        value.encode("utf-8")
    except UnicodeError:
        return False
    return True
