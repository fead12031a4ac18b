"""Calendar facts every engine's row-wise compiler shares: the days on which truncating or
rounding a date or a timestamp cannot fail in any engine.

Truncating or rounding to months, quarters or years calls the engine's calendar, which panics
(Polars, through chrono) or overflows (DuckDB, Spark) far from 1970; each compiler makes a value
outside :func:`safe_days` missing, so every engine computes the same total function
(``docs/frames.md``, "What each function computes").
"""

from __future__ import annotations

from typing import Any

__all__ = ["CALENDAR_DAYS", "PER_DAY", "safe_days"]

#: Days since 1970 inside which calendar arithmetic (truncating or rounding to months,
#: quarters, years) cannot leave chrono's ±262,143 years: [-73,000,000, 73,000,000) — about
#: ±200,000 years. A value outside is missing (Polars panics on some of them). Day-aligned, so
#: every engine can apply the same bound to a date or a timestamp's day.
CALENDAR_DAYS = 73_000_000
PER_DAY = {"date": 1, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def safe_days(dtype: Any) -> tuple[int, int] | None:
    """The days since 1970 (inclusive bounds) whose dates or datetimes of ``dtype`` every
    engine can truncate or round to any accepted interval (at most a year): within the
    calendar-safe days (:data:`CALENDAR_DAYS`: chrono's calendar panics beyond) and at least
    1,000 days inside the type's own range (so that no result wraps around or leaves it).
    None for a dtype that is neither."""
    import polars as pl

    unit = "date" if dtype == pl.Date else getattr(dtype, "time_unit", None)
    per_day = PER_DAY.get(str(unit))
    if per_day is None:
        return None
    bits = 32 if unit == "date" else 64
    first, last = -(2 ** (bits - 1)) // per_day, (2 ** (bits - 1) - 1) // per_day
    return max(-CALENDAR_DAYS, first + 1000), min(CALENDAR_DAYS - 1, last - 1000)
