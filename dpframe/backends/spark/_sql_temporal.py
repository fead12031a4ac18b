"""Spark row-wise SQL: date and time functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpframe.backends.spark._sql_casts import _local_ntz
from dpframe.backends.spark._sql_compiler import _literal_arg, _subject
from dpframe.backends.spark._sql_types import _CHRONO_DAYS, _days_guard, _Info, _info, _refuse
from dpframe.rowwise.calendar import safe_days
from dpframe.rowwise.nodes import Call

#: Temporal fields: the Spark expression of the naive local time ``{t}`` (or a date), and
#: whether it exists for dates.
_FIELDS: dict[str, tuple[str, bool]] = {
    "Year": ("year({t})", True), "Month": ("month({t})", True), "Day": ("day({t})", True),
    "Hour": ("hour({t})", False), "Minute": ("minute({t})", False),
    "Second": ("second({t})", False),
    "Millisecond": ("(CAST(extract(SECOND FROM {t}) * 1000 AS INT) % 1000)", False),
    "Microsecond": ("(CAST(extract(SECOND FROM {t}) * 1000000 AS INT) % 1000000)", False),
    "Nanosecond": ("((CAST(extract(SECOND FROM {t}) * 1000000 AS INT) % 1000000) * 1000)",
                   False),
    "Weekday": ("(weekday({t}) + 1)", True), "Week": ("weekofyear({t})", True),
    "Quarter": ("quarter({t})", True), "OrdinalDay": ("dayofyear({t})", True),
    "IsoYear": ("extract(YEAROFWEEK FROM {t})", True),
}


def _temporal_subject(node: Call) -> tuple[str, _Info, str]:
    """The subject, its type, and the guard 'inside chrono's range' (Polars gives NULL, or
    panics, outside it)."""
    x, info = _subject(node)
    if info.kind == "date":
        return x, info, _days_guard(x, *_CHRONO_DAYS)
    if info.kind == "datetime":
        if info.tz is not None:
            local = _local_ntz(x, info)  # already NULL outside the range
            return local, info, f"{local} IS NOT NULL"
        return x, info, _days_guard(f"CAST({x} AS DATE)", *_CHRONO_DAYS)
    raise _refuse(f"{node.name!r} of {node.args[0].dtype}", "use dates or datetimes")


def _field(part: str) -> Callable[[Call], str]:
    template, on_dates = _FIELDS[part]

    def build(node: Call) -> str:
        t, info, guard = _temporal_subject(node)
        if info.kind == "date" and not on_dates:
            raise _refuse(f"dt.{part.lower()}() of a Date (the reference raises)",
                          "use it on datetimes")
        value = template.format(t=t)
        return f"(CASE WHEN {guard} THEN CAST({value} AS {_info(node.dtype).sql}) END)"
    return build


def _date_part(node: Call) -> str:
    x, info = _subject(node)
    if info.kind == "date":
        return x
    if info.kind == "datetime":
        return f"CAST({_local_ntz(x, info)} AS DATE)"
    raise _refuse(f"dt.date() of {node.args[0].dtype}", "use dates or datetimes")


def _leap_year(node: Call) -> str:
    t, _, guard = _temporal_subject(node)
    y = f"year({t})"
    return (f"(CASE WHEN {guard} THEN ({y} % 4 = 0 AND {y} % 100 != 0) OR {y} % 400 = 0 "
            "END)")


#: dt.truncate intervals: Spark ``trunc`` unit for dates (None: the day itself) and how many
#: days truncation can go back (to keep away from the edge of Spark's range).
_CALENDAR_UNITS = {"1d": (None, 0), "1w": ("WEEK", 6), "1mo": ("MM", 30),
                   "1q": ("QUARTER", 91), "1y": ("YEAR", 365)}
#: sub-day intervals: microseconds to remove, from the second-of-minute ``{s}`` (µs) and ``{t}``
_CLOCK_UNITS = {
    "1h": "minute({t}) * CAST(60000000 AS BIGINT) + {s}",
    "1m": "{s}",
    "1s": "{s} % 1000000",
    "1ms": "{s} % 1000",
    "1us": None, "1ns": None,
}


def _safe_days_guard(day: str, dtype: Any) -> str:
    """The reference's safe days for truncation (:func:`dpframe.rowwise.calendar.safe_days`)."""

    days = safe_days(dtype)
    assert days is not None
    return f"unix_date({day}) BETWEEN {days[0]} AND {days[1]}"


def _truncate(node: Call) -> str:
    """``dt.truncate`` to one calendar unit (day, Monday-start week, month, quarter, year) or
    clock unit (hour, minute, second, millisecond; microsecond and nanosecond leave
    microsecond values as they are). The reference computes day, week and clock units
    arithmetically on the stored integer, for any value; so does this, except within a year of
    the bottom of Spark's range, where the result would not be representable (NULL; the
    reference wraps around there)."""
    x, info = _subject(node)
    every = _literal_arg(node, 1)
    if info.kind not in ("date", "datetime") or (info.kind == "datetime" and info.tz):
        raise _refuse(f"dt.truncate of {node.args[0].dtype}",
                      "truncate dates or datetimes without a time zone")
    if every not in _CALENDAR_UNITS and every not in _CLOCK_UNITS:
        raise _refuse(f"dt.truncate({every!r})", "truncate to one unit: '1us', '1ms', '1s', "
                      "'1m', '1h', '1d', '1w', '1mo', '1q' or '1y'")
    # the reference computes only values whose day lies in its safe days (about ±200,000
    # years: chrono's calendar fails beyond), missing elsewhere; the same days here
    if info.kind == "date":
        unit, _back = _CALENDAR_UNITS.get(every, (None, 0))
        result = x if unit is None else f"trunc({x}, '{unit}')"
        return f"(CASE WHEN {_safe_days_guard(x, node.args[0].dtype)} THEN {result} END)"
    day = f"CAST({x} AS DATE)"
    guard = _safe_days_guard(day, node.args[0].dtype)
    if every in _CALENDAR_UNITS:
        unit, _back = _CALENDAR_UNITS[every]
        start = day if unit is None else f"trunc({day}, '{unit}')"
        return f"(CASE WHEN {guard} THEN CAST({start} AS TIMESTAMP_NTZ) END)"
    template = _CLOCK_UNITS[every]
    if template is None:
        return f"(CASE WHEN {guard} THEN {x} END)"
    second = f"CAST(extract(SECOND FROM {x}) * 1000000 AS BIGINT)"
    drop = template.format(t=x, s=second)
    return f"(CASE WHEN {guard} THEN timestampadd(MICROSECOND, -({drop}), {x}) END)"
