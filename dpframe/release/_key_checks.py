"""Group keys against the key column's dtype (from the schema, before any read): key values
must be of the group column's kind, and keys are selected from the data only from columns whose
values every engine counts and hands back the same way (docs/architecture.md, "Module by
module", step 5; docs/privacy.md, section K.2).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine import temporal_key_fits
from dpframe.errors import (
    ParameterError,
)
from dpframe.provenance import check_key_list
from dpframe.query import Keys, checked_keys, key_kinds


def declared_keys(column: str, keys: Sequence[Any]) -> Keys:
    """``keys`` checked (:func:`dpframe.provenance._protect.check_key_list`) as a :class:`Keys`; one
    that dpframe itself checked (:func:`dpframe.query._keys.checked_keys`) comes back as it is."""
    if isinstance(keys, Keys) and keys.checked:
        return keys
    return checked_keys(check_key_list(column, keys))


def _check_keys_match(dtype: Any, column: str, keys: Sequence[Any]) -> None:
    """Key values must be of the group column's kind (from the schema, before any read).
    A :class:`Keys` remembers the dtypes it passed (the check reads only keys and dtype)."""
    seen = keys.matched_dtypes if isinstance(keys, Keys) else None
    if seen is not None and (column, repr(dtype)) in seen:
        return
    _check_key_kinds(dtype, column, keys)
    if seen is not None:
        seen.add((column, repr(dtype)))


def _check_key_kinds(dtype: Any, column: str, keys: Sequence[Any]) -> None:
    kinds = key_kinds(keys)  # one pass in C: the common cases need no per-key Python
    hint = "keys of the column's type (and, for an Enum, among its categories)"
    special = _bad_special_keys(dtype, keys)
    if special is not None:
        bad, hint = special
    elif dtype.is_integer():
        # an integer column holds only integers of its width: a float or out-of-range key can
        # never match (and Polars refuses to compare them, after the reservation)
        try:
            info: Any = np.iinfo(str(dtype).lower())
        except (TypeError, ValueError):  # e.g. Int128: no numpy twin, no range check
            info = None
        if kinds == {int}:
            bad = [] if info is None or (info.min <= min(keys) and max(keys) <= info.max) else [
                k for k in keys if not info.min <= k <= info.max]
        else:
            lo, hi = (int(info.min), int(info.max)) if info is not None else (None, None)
            bad = [k for k in keys if isinstance(k, bool | np.bool_)
                   or not isinstance(k, int | np.integer)
                   or (lo is not None and hi is not None and not lo <= int(k) <= hi)]
    elif dtype.is_numeric():
        # (integers a double holds exactly: a wider one would match another value, or
        # overflow in the engine)
        bad = [] if kinds == {float} or (kinds == {int} and min(keys) >= -2**53
                                         and max(keys) <= 2**53) else [
            k for k in keys if isinstance(k, bool | np.bool_)
            or not isinstance(k, int | float | np.number)
            or (isinstance(k, int | np.integer) and not _float_exact(k))]
    elif dtype in (nw.String, nw.Categorical) or isinstance(dtype, nw.Enum):
        bad = [] if kinds == {str} else [k for k in keys if not isinstance(k, str)]
        if isinstance(dtype, nw.Enum) and not bad:
            cats = set(dtype.categories)
            bad = [k for k in keys if k not in cats]
    elif dtype == nw.Boolean:
        bad = [k for k in keys if not isinstance(k, bool | np.bool_)]
    else:
        bad = []
    if not bad:
        bad = _wider_than_64_bits(keys, kinds)
        if bad:
            hint = ("integer keys within 64 bits (int64, or uint64 when none is negative): "
                    "the result table holds the keys as a column")
    if bad:
        raise ParameterError(
            f"group keys {bad[:5]!r}{' (and more)' if len(bad) > 5 else ''} do not match "
            f"column {column!r} of dtype {dtype}; declare {hint}"
        )


def _bad_special_keys(dtype: Any, keys: Sequence[Any]) -> tuple[list[Any], str] | None:
    """For a temporal, Decimal, Binary, nested or untyped column: the keys it refuses and
    the hint; None for the other dtypes."""
    if dtype.is_temporal():
        # a key of another kind (naive against zoned, a datetime for a date, a string) or one
        # the column cannot hold (finer than its unit, out of its range): engines differ
        # (no match, a cast, an error after the reservation), so it is refused here
        bad = _bad_temporal_keys(dtype, keys)
        if not bad and dtype == nw.Datetime and dtype.time_zone and len(
                {_zone_id(k.tzinfo) for k in keys}) > 1:
            bad = list(keys)  # Polars cannot build one key list of several zones
        hint = ("keys of the column's kind that it can hold: dates (datetime.date) for a "
                "Date column; datetime.datetime or pandas.Timestamp for a Datetime column, "
                "naive for a naive column and with a time zone for a zoned one (one zone for "
                "all the keys of a column), at the column's resolution (e.g. "
                "list(pd.DatetimeIndex(keys)) for numpy datetime64 values); "
                "datetime.timedelta for a Duration column; datetime.time for a Time column")
        return bad, hint
    if dtype == nw.Decimal:
        # integers the decimal's precision can hold (Polars refuses floats and wider ints)
        digits = getattr(dtype, "precision", None), getattr(dtype, "scale", None)
        limit = (10 ** (digits[0] - digits[1]) if isinstance(digits[0], int)
                 and isinstance(digits[1], int) else None)
        bad = [k for k in keys if isinstance(k, bool | np.bool_)
               or not isinstance(k, int | np.integer)
               or (limit is not None and not -limit < int(k) < limit)]
        hint = "integer keys within the decimal's precision (cast the column to a float to use " \
            "fractional keys)"
        return bad, hint
    if dtype == nw.Binary:
        return [k for k in keys if not isinstance(k, bytes)], "bytes keys for a Binary column"
    if dtype.is_nested():  # engines cannot compare a list or struct with a key
        return list(keys), ("keys of a column of scalars: a List, Array or Struct column "
                            "cannot be grouped by declared keys (group by a scalar column "
                            "derived from it)")
    if dtype == nw.Unknown:  # a type dpframe cannot match keys against (DuckDB TIME_NS)
        return list(keys), ("keys of a column whose type dpframe knows: cast the column "
                            "first (e.g. DuckDB TIME_NS to TIME)")
    return None


def _bad_temporal_keys(dtype: Any, keys: Sequence[Any]) -> list[Any]:
    """:func:`~dpframe.engine._tick_keys.temporal_key_fits` over the keys, with fast paths for the
    common lists (every Python date fits a Date column, every Python datetime of the right
    zone-ness a microsecond Datetime column: one cheap pass instead of the tick arithmetic)."""
    kinds = key_kinds(keys)
    if dtype == nw.Date and kinds == {_dt.date}:
        return []
    if dtype == nw.Datetime and kinds == {_dt.datetime} and dtype.time_unit == "us":
        if dtype.time_zone:  # aware (a tzinfo whose offset is None is not)
            return [k for k in keys if k.utcoffset() is None]
        return [k for k in keys if k.tzinfo is not None]
    return [k for k in keys if not temporal_key_fits(k, dtype)]


def _wider_than_64_bits(keys: Sequence[Any], kinds: frozenset[type]) -> list[Any]:
    """Integer keys that no 64-bit integer column holds together (Arrow, pandas and Polars
    build the result's key column from them: a wider key failed after the read)."""
    if not any(issubclass(k, int | np.integer) and not issubclass(k, bool | np.bool_)
               for k in kinds):
        return []
    ints = keys if kinds == {int} else [k for k in keys if isinstance(k, int | np.integer)
                                        and not isinstance(k, bool | np.bool_)]
    low, high = int(min(ints)), int(max(ints))
    if (low >= -(2**63) and high < 2**63) or (low >= 0 and high < 2**64):
        return []
    return [k for k in ints if not -(2**63) <= int(k) < 2**63] if low < 0 else [
        k for k in ints if not 0 <= int(k) < 2**64]


def _zone_id(zone: Any) -> str:
    """Which time zone a key's ``tzinfo`` names (its IANA name where it has one)."""
    name = getattr(zone, "key", None) or getattr(zone, "zone", None)
    return str(name) if name else repr(zone)


def _float_exact(key: Any) -> bool:
    """An integer key of a float column is a double exactly."""
    try:
        return float(key) == int(key)
    except OverflowError:
        return False


def selectable(dtype: Any) -> bool:
    """Key columns dpframe selects keys from: values of one type, so a group has one canonical
    key, that every engine counts and hands back as Python values the same way (integers of
    at most 64 bits, Float32/Float64, booleans, strings, categoricals, dates and datetimes,
    decimals, bytes). Nested values, durations, times, 128-bit integers and Float16 are not
    (engines disagree on them, or hand them back with an error or at a coarser resolution)."""
    if dtype.is_integer():
        return dtype not in (nw.Int128, nw.UInt128)
    if dtype.is_float():
        return dtype != nw.Float16
    return dtype in (nw.Boolean, nw.String, nw.Categorical, nw.Date, nw.Binary) or any(
        dtype == kind for kind in (nw.Enum, nw.Datetime, nw.Decimal))
