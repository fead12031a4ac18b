"""Spark row-wise SQL: Polars' non-strict casts.

Every cast is non-strict (``try_cast`` or an explicit range test), and where Spark's cast
reads a value differently from Polars (it trims strings, saturates ``2^63`` to the largest
long, parses ``"1d"`` as a double...), the input is first checked against exactly what Polars
accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpframe.backends.spark._sql_types import (
    _CHRONO_MICROS,
    _EPOCH_NTZ,
    _INT_TEXT,
    _MICRO_DAYS,
    _days_guard,
    _double_to_bigint,
    _fit,
    _fits,
    _Info,
    _info,
    _refuse,
    _string,
    _string_to_double,
)


def _convert(sql: str, source: Any, target: Any) -> str:
    """Polars' non-strict cast of a value of dtype ``source`` to ``target``, in Spark: a value
    that does not convert is NULL; nothing raises."""
    src, dst = _info(source), _info(target)
    if src == dst:
        return sql
    if src.kind == "null":
        return f"CAST({sql} AS {dst.sql})"
    if dst.kind in ("int", "uint"):
        return _to_integer(sql, source, src, target, dst)
    to = _CASTS_TO.get(dst.kind)
    converted = to(sql, src, dst) if to is not None else None
    if converted is not None:
        return converted
    raise _refuse(f"a cast from {source} to {target}", _CAST_ADVICE)


_CAST_ADVICE = ("cast between numbers, from integers or booleans to strings, from strings to "
                "Int/Float64, or between dates and datetimes (format floats and dates with "
                "explicit functions instead)")


def _to_integer(sql: str, source: Any, src: _Info, target: Any, dst: _Info) -> str:
    if src.kind in ("int", "uint", "bool"):
        if _fits(src, dst):
            return f"CAST({sql} AS {dst.sql})"
        return _fit(f"CAST({sql} AS BIGINT)", target)
    if src.kind == "float":
        return _fit(_double_to_bigint(f"CAST({sql} AS DOUBLE)"), target)
    if src.kind == "str" and dst.kind == "int":
        return f"(CASE WHEN {sql} RLIKE {_string(_INT_TEXT)} THEN try_cast({sql} AS {dst.sql}) END)"
    if src.kind == "date":
        return _fit(f"CAST(unix_date({sql}) AS BIGINT)", target)
    if src.kind == "datetime":
        micros = f"unix_micros({sql})" if src.tz is not None else _ntz_micros(sql)
        return _fit(micros, target)
    raise _refuse(f"a cast from {source} to {target}", _CAST_ADVICE)


def _ntz_micros(t: str) -> str:
    """Microseconds since the epoch of a TIMESTAMP_NTZ, without any time zone (exact, in
    DECIMAL so that the midnight of the first representable day does not overflow)."""
    return (f"try_cast(CAST(unix_date(CAST({t} AS DATE)) AS DECIMAL(20,0)) * 86400000000 + "
            f"(hour({t}) * 3600 + minute({t}) * 60) * CAST(1000000 AS BIGINT) + "
            f"CAST(extract(SECOND FROM {t}) * 1000000 AS BIGINT) AS BIGINT)")


def _local_ntz(sql: str, info: _Info) -> str:
    """The local wall-clock time of a datetime as TIMESTAMP_NTZ, independent of the session
    time zone (TIMESTAMP values are instants; their local time is taken in the dtype's zone)."""
    if info.tz is None:
        return sql
    micros = f"unix_micros({sql})"
    if info.tz.upper() not in ("UTC", "ETC/UTC", "Z", "+00:00"):
        micros = f"unix_micros(from_utc_timestamp({sql}, {_string(info.tz)}))"
    lo, hi = _CHRONO_MICROS
    return (f"(CASE WHEN unix_micros({sql}) >= {lo} AND unix_micros({sql}) <= {hi} "
            f"THEN timestampadd(MICROSECOND, {micros}, {_EPOCH_NTZ}) END)")


# Each cast to one destination kind: the SQL, or None if the source kind does not convert (then
# _convert refuses).

def _to_float(sql: str, src: _Info, dst: _Info) -> str | None:
    if src.kind in ("int", "uint", "bool", "float"):
        return f"CAST({sql} AS {dst.sql})"
    if src.kind == "str" and dst.bits == 64:
        return _string_to_double(sql)
    if src.kind == "decimal" and dst.bits == 64:
        return f"CAST({sql} AS DOUBLE)"
    return None


def _to_boolean(sql: str, src: _Info, dst: _Info) -> str | None:
    if src.kind in ("int", "uint", "float"):
        return f"CAST({sql} AS BOOLEAN)"
    return None


def _to_string(sql: str, src: _Info, dst: _Info) -> str | None:
    if src.kind in ("int", "uint", "bool"):
        return f"CAST({sql} AS STRING)"
    return None


def _to_date(sql: str, src: _Info, dst: _Info) -> str | None:
    if src.kind == "datetime":
        return f"CAST({_local_ntz(sql, src)} AS DATE)"
    return None


def _to_naive_datetime(sql: str, src: _Info, dst: _Info) -> str | None:
    if dst.tz is not None:
        return None
    if src.kind == "date":
        return (f"(CASE WHEN {_days_guard(sql, *_MICRO_DAYS)} "
                f"THEN CAST({sql} AS TIMESTAMP_NTZ) END)")
    if src.kind == "datetime":
        return f"timestampadd(MICROSECOND, unix_micros({sql}), {_EPOCH_NTZ})"
    return None


def _to_decimal(sql: str, src: _Info, dst: _Info) -> str | None:
    if src.kind in ("int", "uint", "bool"):
        return f"try_cast({sql} AS {dst.sql})"
    if src.kind == "decimal" and src.scale <= dst.scale and (
            src.precision - src.scale <= dst.precision - dst.scale):
        return f"CAST({sql} AS {dst.sql})"
    return None


_CASTS_TO: dict[str, Callable[[str, _Info, _Info], str | None]] = {
    "float": _to_float, "bool": _to_boolean, "str": _to_string, "date": _to_date,
    "datetime": _to_naive_datetime, "decimal": _to_decimal}
