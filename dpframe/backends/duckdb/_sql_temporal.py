"""DuckDB row-wise SQL: date and time functions.

Calendar parts are missing outside the years Polars' calendar holds (-262143..262142), and
truncation to months, quarters and years outside its calendar-safe days, as in Polars.
"""

from __future__ import annotations

from typing import Any

from dpframe.backends.duckdb._sql_compiler import Handler, _Compiler
from dpframe.backends.duckdb._sql_numeric import _lit_value
from dpframe.backends.duckdb._sql_types import _duck, _kind, _micros, _RefusalError, _unit
from dpframe.rowwise.calendar import safe_days
from dpframe.rowwise.functions import FUNCTIONS
from dpframe.rowwise.nodes import Call


def _temporal_subject(c: _Compiler, node: Call, allow: tuple[str, ...]) -> tuple[str, Any]:
    dtype = c.t(node.args[0])
    kind = _kind(dtype)
    if kind not in allow:
        raise _RefusalError(f"{FUNCTIONS[node.name].api} on {dtype} values",
                            "apply it to a column of the right temporal type")
    if kind == "datetime":
        _duck(dtype)  # refuses time zones
    return c.sql(node.args[0]), dtype


def _part(fn: str, allow: tuple[str, ...] = ("date", "datetime")) -> Handler:
    """A calendar or clock part, as ``fn(value)`` on the microsecond value."""
    def handler(c: _Compiler, node: Call) -> str:
        sql, dtype = _temporal_subject(c, node, allow)
        out = _duck(c.t(node))
        return c.let(sql, lambda v: c.in_calendar(
            v, dtype, f"CAST({fn.format(_micros(v, dtype))} AS {out})"))
    return handler


def _subsecond(scale: int) -> Handler:
    """Millisecond / microsecond / nanosecond of the second (Polars: 0 up to 10^k - 1)."""
    def handler(c: _Compiler, node: Call) -> str:
        sql, dtype = _temporal_subject(c, node, ("datetime", "time"))
        out = _duck(c.t(node))

        def body(v: str) -> str:
            if _kind(dtype) == "datetime" and _unit(dtype) == "ns":
                nanos = f"((epoch_ns({v}) % 1000000000 + 1000000000) % 1000000000)"
            else:
                nanos = f"(nanosecond({_micros(v, dtype)}) % 1000000000)"
            return c.in_calendar(v, dtype, f"CAST({nanos} // {10**9 // scale} AS {out})")
        return c.let(sql, body)
    return handler


def _leap(c: _Compiler, node: Call) -> str:
    sql, dtype = _temporal_subject(c, node, ("date", "datetime"))
    return c.let(sql, lambda v: c.in_calendar(v, dtype, c.let(
        f"year({_micros(v, dtype)})", lambda y: (
            f"(({y} % 4 = 0 AND {y} % 100 <> 0) OR {y} % 400 = 0)"))))


def _date(c: _Compiler, node: Call) -> str:
    sql, dtype = _temporal_subject(c, node, ("date", "datetime"))
    return sql if _kind(dtype) == "date" else c.to_date(sql, dtype)


def _time(c: _Compiler, node: Call) -> str:
    sql, dtype = _temporal_subject(c, node, ("datetime", "time"))
    return sql if _kind(dtype) == "time" else c.time_of(sql, dtype)


#: ``dt.truncate`` intervals of one calendar or clock unit, and DuckDB's name for the unit.
_TRUNCATE_UNITS = {"1us": "microseconds", "1ms": "milliseconds", "1s": "second",
                   "1m": "minute", "1h": "hour", "1d": "day", "1w": "week", "1mo": "month",
                   "1q": "quarter", "1y": "year"}


def _truncate(c: _Compiler, node: Call) -> str:
    """``dt.truncate`` to one unit, on the reference's safe days
    (:func:`~dpframe.rowwise.calendar.safe_days`: about ±200,000 years, and 1,000 days
    inside the type's range), missing elsewhere and at DuckDB's infinities."""
    every = _lit_value(node, 1)
    sql, dtype = _temporal_subject(c, node, ("date", "datetime"))
    out = c.t(node)
    unit = _TRUNCATE_UNITS.get(str(every))
    if every != "1ns" and unit is None:
        raise _RefusalError(f"dt.truncate({every!r})", "truncate to one unit: "
                            + ", ".join(repr(k) for k in ("1ns", *_TRUNCATE_UNITS)))
    is_date = _kind(dtype) == "date"
    identity = every == "1ns" or (is_date and every in ("1us", "1ms", "1s", "1m", "1h", "1d"))
    truncated = f"TRY(CAST(date_trunc('{unit}', {{v}}) AS {_duck(out)}))"
    days = safe_days(dtype)
    assert days is not None

    def body(v: str) -> str:
        # the reference computes only the values whose day is in its safe days
        result = v if identity else truncated.format(v=_micros(v, dtype))
        day = v if is_date else f"TRY(CAST({v} AS DATE))"
        return (f"(CASE WHEN {c.finite(v, dtype, 'TRUE')} AND {day} BETWEEN "
                f"(DATE '1970-01-01' + {days[0]}) AND (DATE '1970-01-01' + {days[1]}) "
                f"THEN {result} END)")
    return c.let(sql, body)
