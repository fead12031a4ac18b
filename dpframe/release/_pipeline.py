"""The one release pipeline. Every statistic — count, sum, mean, variance, std, proportions,
cov/corr, describe, group-by, batch release — goes through :func:`run`:

1. **provenance** (:func:`dpframe.provenance._protect.resolve`): the verified facts of the frame
   and the
   ledger its rows came from; unverifiable derivations and frames with no protected root are
   refused here;
2. **arguments** (:func:`check_request`): ε, δ, mechanism, weights, random state, group keys;
3. **plan**: each query's measurements from public facts only (bounds, missing-value policy,
   the public size, dtypes), and every mechanism built — bad parameters fail here;
4. **source**: the files under a lazy plan have not changed (file metadata; in-memory data
   needs no check: releases read dpframe's private snapshot, never the user's object);
5. **reserve** ε and δ in the ledger;
6. **aggregate**: one pass over the data for all queries
   (:func:`dpframe.engine._aggregation.aggregate`);
7. **noise, post-processing and log entries**;
8. **commit** (the ledger assigns the release id).

Steps 1–5 read public facts only, and an error there spends nothing. After step 5 nothing a
caller sees depends on the data except through the mechanisms' noise: derived columns are
computed by dpframe's total compilation of the verified expressions (:mod:`dpframe.rowwise`),
the engine never refuses a value (missing values follow the declared policy, infinite ones are
clamped), no row count is checked, and the shapes of the results are fixed by the declared
keys. Should anything still fail in steps 6–7, the safety net (:mod:`dpframe.release._safety_net`)
spends the reservation, logs the failure and raises one fixed error with no data in it.
On Dask and Spark, whose workers can all die while the engine waits for them for ever, the
engine's passes (the re-count in step 4, step 6's key selection and aggregation) run under
the engine timeout (:func:`engine_pass`, ``DPFRAME_ENGINE_TIMEOUT``).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import functools
import itertools
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpframe._util.identity import IdentityMap
from dpframe._validation import check_ci, check_delta, check_epsilon, check_number, check_seed
from dpframe.accounting._log_schema import LogRecord
from dpframe.backends import Backend, backend_of
from dpframe.engine import _aggregation as engine
from dpframe.engine._bounding import Bounding, release_seed
from dpframe.engine._tick_keys import temporal_key_fits
from dpframe.errors import (
    BoundsError,
    EngineTimeoutError,
    ParameterError,
    PrivateSizeError,
    SelectionWarning,
    warn_user,
)
from dpframe.mechanisms import choose_mechanism, make_mechanism
from dpframe.mechanisms.protocol import Mechanism
from dpframe.provenance import _units as units
from dpframe.provenance._protect import DROP, FrameFacts, Session, check_key_list, resolve
from dpframe.query._keys import Keys, checked_keys, key_kinds, keys_reference
from dpframe.query._measurement_kinds import LaplaceFactory
from dpframe.query.statistics import Measurement, Plan, PlanContext, Query
from dpframe.release._key_observation import observed_keys
from dpframe.release._safety_net import failure_entry, failure_error, quiet
from dpframe.rowwise.engines import apply_steps

__all__ = ["ENGINE_TIMEOUT", "MECHANISMS", "Outcome", "Planned", "Request", "check_request",
           "engine_pass", "engine_timeout", "evaluate_derivation", "plan", "run"]

MECHANISMS = ("bounded", "truncated", "laplace", "auto")

#: A group-by: one column, or several (their keys are tuples).
GroupBy = str | tuple[str, ...]


@dataclass
class Outcome:
    """Answers of one release: ``values[name]`` is an array over ``keys`` (one entry when
    ungrouped; a matrix for cov/corr), plus the committed log entries and the log document as
    of this release."""

    values: dict[str, np.ndarray]
    keys: Sequence[Any] | None  # (a Keys: the request's checked key tuple)
    group_by: GroupBy | None
    entries: list[dict[str, Any]]
    document: dict[str, Any]
    release_id: int
    backend: Backend
    intervals: dict[str, tuple[np.ndarray, np.ndarray]]
    level: float | None
    #: keys selected from the data: the group columns' dtypes (public schema), so a table
    #: with no kept key still has typed key columns
    key_dtypes: dict[str, Any] | None = None


@dataclass(frozen=True)
class Request:
    """The checked arguments of one release."""

    epsilon: float
    delta: float
    mechanism: str
    shares: tuple[float, ...]
    rng: np.random.Generator | None
    random_source: str
    group_by: GroupBy | None
    keys: tuple[Any, ...] | None
    ci: float | None = None
    #: keys selected from the data (none declared, δ > 0): the share of ε spent selecting
    #: them; all of δ goes to the selection, none to the queries
    selection: float | None = None
    keys_from_data: bool = False  # the keys were selected from the group column itself
    selected: Selected | None = None  # (set by the selection: its public facts)


_number = check_number


def _check_epsilon(epsilon: Any) -> float:
    return check_epsilon(epsilon, allow_zero=True)


def _check_delta(delta: Any, mechanism: str) -> float:
    d = check_delta(delta)
    if d > 0 and mechanism not in ("bounded", "auto"):
        raise ParameterError(
            f"mechanism={mechanism!r} does not use delta; pass delta=0 (or use "
            "mechanism='bounded', the only one that takes a delta)"
        )
    return d


def _check_mechanism(mechanism: Any) -> str:
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise ParameterError(
            f"unknown mechanism {mechanism!r}; choose one of 'auto' (default: the smaller "
            "worst-case error, chosen from public facts), 'bounded', 'truncated', 'laplace'"
        )
    return mechanism


_check_ci = check_ci


def _check_weights(names: list[str], weights: Any) -> tuple[float, ...]:
    if weights is None:
        return (1.0 / len(names),) * len(names)
    if isinstance(weights, Mapping):
        missing = [n for n in names if n not in weights]
        extra = [k for k in weights if k not in names]
        if missing or extra:
            raise ParameterError(
                f"weights must name exactly the queries {names}; missing {missing}, "
                f"unknown {extra}"
            )
        raw = [weights[n] for n in names]
    else:
        try:
            raw = list(weights)
        except TypeError:
            raise ParameterError(f"weights must be a list or a dict, got {weights!r}") from None
        if len(raw) != len(names):
            raise ParameterError(f"weights has {len(raw)} entries for {len(names)} queries")
    vals = [_number("weights", w) for w in raw]
    if any(not math.isfinite(w) or w <= 0 for w in vals):
        raise ParameterError(f"weights must be finite and > 0, got {raw!r}")
    total = sum(vals)
    if not math.isfinite(total):  # e.g. [1e308, 1e308]: the same shares, scaled down first
        top = max(vals)
        vals = [w / top for w in vals]
        total = sum(vals)
    shares = tuple(w / total for w in vals)
    zero = [n for n, share in zip(names, shares, strict=True) if not share > 0.0]
    if zero:
        raise ParameterError(
            f"weights {raw!r} give {zero} a share of epsilon that is 0 in floating point; "
            "use weights within a factor of about 1e300 of each other")
    return shares


def _check_random_state(random_state: Any) -> tuple[np.random.Generator | None, str]:
    """One generator for the whole release (seeded runs never reuse a stream)."""
    if random_state is None:
        return None, "secure"
    if isinstance(random_state, np.random.Generator):
        return random_state, "seeded"
    if isinstance(random_state, int | np.integer) and not isinstance(random_state, bool):
        return np.random.default_rng(check_seed("random_state", random_state)), "seeded"
    raise ParameterError(
        "random_state must be None (secure, the default), an int seed or a numpy Generator "
        f"(seeded randomness is for tests and simulations); got {type(random_state).__name__}"
    )


def check_request(
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any,
    weights: Any,
    mechanism: Any,
    random_state: Any,
    group_by: GroupBy | None,
    keys: Sequence[Any] | None,
    facts: FrameFacts,
    ci: Any = None,
    selection_share: Any = 0.5,
) -> Request:
    """Check every argument of a release; reads no data and spends nothing."""
    if not isinstance(queries, Mapping) or not queries:
        raise ParameterError(
            "release() takes a non-empty dict name -> query, e.g. {'n': dpf.count()}"
        )
    names = []
    for name, q in queries.items():
        if not isinstance(name, str) or not name:
            raise ParameterError(f"query names must be non-empty strings, got {name!r}")
        if not isinstance(q, Query):
            raise ParameterError(
                f"query {name!r} must be built with dpf.count(), dpf.mean(col), ...; got {q!r}"
            )
        names.append(name)
    mech = _check_mechanism(mechanism)
    eps = _check_epsilon(epsilon)
    dlt_raw = _number("delta", delta)
    selecting = group_by is not None and keys is None and any(
        c not in facts.keys for c in _columns_of(group_by))
    dlt = _check_delta(delta, "bounded" if selecting else mech)
    shares = _check_weights(names, weights)
    rng, source = _check_random_state(random_state)
    level = _check_ci(ci)
    key_tuple = None
    selection = None
    if selecting:
        if not dlt_raw > 0:
            raise ParameterError(_NO_KEYS.format(col=next(
                c for c in _columns_of(group_by) if c not in facts.keys)) + _NO_DELTA)
        selection = _number("selection_share", selection_share)
        if not 0.0 < selection < 1.0:
            raise ParameterError(f"selection_share must be in (0, 1) (the share of ε spent "
                                 f"selecting keys), got {selection_share!r}")
        group_by = _check_group_columns(group_by, names)
        group_by = group_by[0] if len(group_by) == 1 else group_by
    elif group_by is not None:
        group_by, key_tuple = _group_request(group_by, keys, names, facts)
    return Request(eps, dlt, mech, shares, rng, source, group_by, key_tuple, level, selection)


def _columns_of(group_by: Any) -> list[Any]:
    return [group_by] if isinstance(group_by, str) else list(group_by) if isinstance(
        group_by, Sequence) else [group_by]


def _check_group_columns(group_by: Any, names: list[str]) -> tuple[str, ...]:
    cols = _columns_of(group_by)
    if not cols or not all(isinstance(c, str) for c in cols) or len(set(cols)) != len(cols):
        raise ParameterError(f"group-by must be a column name or a list of distinct column "
                             f"names, got {group_by!r}")
    clash = [c for c in cols if c in names]
    if clash:
        raise ParameterError(f"query names {clash} collide with the group-by columns")
    return tuple(cols)


def _group_request(group_by: Any, keys: Any, names: list[str], facts: FrameFacts
                   ) -> tuple[GroupBy, tuple[Any, ...]]:
    """The group-by column(s) and their public keys: one column with its keys, or several with
    key tuples (the product of each column's declared keys unless given explicitly)."""
    cols = list(_check_group_columns(group_by, names))
    if len(cols) == 1:
        declared = facts.keys.get(cols[0]) if keys is None else keys
        if declared is None:
            raise ParameterError(_NO_KEYS.format(col=cols[0]))
        return cols[0], declared_keys(cols[0], declared)
    if keys is None:
        missing = [c for c in cols if c not in facts.keys]
        if missing:
            raise ParameterError(_NO_KEYS.format(col=missing[0]))
        combos: tuple[Any, ...] = tuple(itertools.product(*(facts.keys[c] for c in cols)))
    else:
        combos = tuple(tuple(k) if isinstance(k, Sequence) and not isinstance(k, str) else
                       (k,) for k in check_key_list(tuple(cols), keys))
        if any(len(k) != len(cols) for k in combos):
            raise ParameterError(f"keys for a group-by on {cols} must be tuples of "
                                 f"{len(cols)} values, e.g. keys=[{tuple('…' for _ in cols)}]")
        for i, c in enumerate(cols):
            check_key_list(c, sorted({k[i] for k in combos}, key=repr))
    return tuple(cols), checked_keys(combos)


_NO_KEYS = (
    "group key column {col!r} has no declared keys: pass them, frame.dp.groupby({col!r}, "
    "keys=[...]), or declare them at protect time with keys={{{col!r}: [...]}}. Keys must be "
    "public; dpframe never reads them from the data"
)
_NO_DELTA = (
    " without selecting them privately: a release with delta > 0 (e.g. delta=1e-6, from a "
    "budget protected with a delta) selects the keys from the data with noisy counts and a "
    "threshold, publishing a key only one person holds with probability at most delta"
)


def group_columns(group_by: GroupBy | None) -> tuple[str, ...]:
    """The group-by columns as a tuple (empty without a group-by)."""
    if group_by is None:
        return ()
    return (group_by,) if isinstance(group_by, str) else tuple(group_by)


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
    import narwhals.stable.v2 as nw

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
    import narwhals.stable.v2 as nw

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
    import narwhals.stable.v2 as nw

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


@dataclass
class Planned:
    """One query of a planned release: its plan, its share of ε and its mechanisms (built
    before anything is read; None where a domain depends on earlier noisy values)."""

    name: str
    query: Query
    plan: Plan
    share: float
    mechanisms: list[Mechanism | None]  # one per measurement (None: built after earlier ones)
    choices: dict[str, str]  # measurement name -> why "auto" picked its mechanism
    epsilon: float = 0.0  # what this query costs
    bounds: tuple[float, float] | None = None  # of its column, if it has one
    #: measurements whose mechanism is pure ε-DP (auto picked truncated or plain Laplace):
    #: charged no δ (:func:`_mark_pure`)
    pure: frozenset[str] = frozenset()


def _immutable(facts: FrameFacts) -> bool:
    """The frame a release reads cannot change its schema: dpframe's private snapshot of an
    in-memory frame, or an immutable plan (Polars LazyFrame, DuckDB relation, Spark
    DataFrame; a Dask DataFrame can be assigned to in place)."""
    return facts.data is not None or facts.dataset.backend.fixed_schema


def _selectable(dtype: Any) -> bool:
    """Key columns dpframe selects keys from: values of one type, so a group has one canonical
    key, that every engine counts and hands back as Python values the same way (integers of
    at most 64 bits, Float32/Float64, booleans, strings, categoricals, dates and datetimes,
    decimals, bytes). Nested values, durations, times, 128-bit integers and Float16 are not
    (engines disagree on them, or hand them back with an error or at a coarser resolution)."""
    import narwhals.stable.v2 as nw

    if dtype.is_integer():
        return dtype not in (nw.Int128, nw.UInt128)
    if dtype.is_float():
        return dtype != nw.Float16
    return dtype in (nw.Boolean, nw.String, nw.Categorical, nw.Date, nw.Binary) or any(
        dtype == kind for kind in (nw.Enum, nw.Datetime, nw.Decimal))


def _queries_part(request: Request) -> Request:
    """What the queries of a release that selects its keys get: ε − ε_sel and no δ."""
    from dataclasses import replace

    assert request.selection is not None
    return replace(request, epsilon=request.epsilon - request.epsilon * request.selection,
                   delta=0.0)


def _selection_rule(facts: FrameFacts, request: Request) -> Any:
    """The key selection's calibration (public facts only): ``m`` keys and a count of at most
    1 per unit, replacement neighbours, counts at most the public n (or U)."""
    from dpframe.mechanisms.selection import selection_rule

    assert request.selection is not None
    unit = facts.unit
    return selection_rule(request.epsilon * request.selection, request.delta,
                          1 if unit is None else unit.max_rows, neighbours="replace",
                          count_upper=float(max(facts.dataset.n if unit is None
                                                else unit.n_units, 1)))


def _plan_all(frame: Any, facts: FrameFacts, request: Request, queries: Mapping[str, Query]
              ) -> list[Planned]:
    """Plan every query of a release from public facts: check the columns it reads, build its
    plan (sensitivities, measurements), share ε among the queries that need noise and build
    every mechanism the release can use — all before anything is read."""
    columns = engine.frame_columns(frame, immutable=_immutable(facts))
    if request.group_by is not None:
        _check_group_dtypes(frame, request, columns)
    native: dict[str, Any] = {}
    out = [_plan_query(frame, facts, request, name, q, share, columns, native)
           for (name, q), share in zip(queries.items(), request.shares, strict=True)]
    _check_output_names(out)
    _share_budget(out, request)
    return out


def _check_group_dtypes(frame: Any, request: Request, columns: dict[str, Any]) -> None:
    """The group-by columns exist, keys can be selected from them (if asked) and declared keys
    match their dtypes."""
    assert request.group_by is not None
    cols = group_columns(request.group_by)
    for i, col in enumerate(cols):
        engine.validate_column(frame, col, numeric=False, columns=columns)
        if request.selection is not None and not _selectable(columns[col]):
            raise ParameterError(
                f"keys cannot be selected from column {col!r} of dtype {columns[col]}: "
                "dpframe selects keys from integers, Float32/Float64, booleans, strings, "
                "categoricals, dates, datetimes, decimals and bytes (an object column's "
                "values of mixed Python types (1, True, 1.0, '1') may stand for one "
                "group); cast it to one of those first, or declare its keys")
        if request.keys is not None and not request.keys_from_data:
            # (keys selected from this column are of its type by construction)
            values = request.keys if len(cols) == 1 else [k[i] for k in request.keys]
            _check_keys_match(columns[col], col, values)


def _check_read_columns(frame: Any, facts: FrameFacts, read: Sequence[str],
                        columns: dict[str, Any]) -> None:
    """Each column a query reads exists, is numeric and has declared bounds."""
    for col in read:
        engine.validate_column(frame, col, columns=columns)
        if col not in facts.bounds:
            raise BoundsError(
                f"no bounds declared for column {col!r}. Bounds are public and never "
                "computed from the data; declare them on the with_columns that makes the "
                f"column: frame.dp.with_columns(<its expression>.alias({col!r}), "
                f"bounds={{{col!r}: (lower, upper)}}, missing='lower'), or on a step that "
                f"keeps it as it is: frame.dp.with_columns(nw.col({col!r}), "
                f"bounds={{{col!r}: (lower, upper)}}, missing='lower') (row-wise: the size "
                "stays public, nothing is spent)"
            )


def _plan_context(facts: FrameFacts, request: Request, q: Query, read: Sequence[str],
                  drops: Sequence[str]) -> PlanContext:
    """The public facts a query plans from. With a privacy unit the row count is private and
    k·U (public) caps the bounded rows; keys still to be selected plan for two groups, the
    case where a proportion's per-cell share is smallest, so every mechanism the release can
    need is checked before the read."""
    unit = facts.unit
    n = facts.dataset.n if unit is None else unit.row_cap
    n_groups = len(request.keys) if request.keys is not None else (
        2 if request.selection is not None else 1)
    return PlanContext(
        size_public=facts.size_public and not drops and unit is None, n=n,
        bounds=facts.bounds.get(q.column) if q.column is not None else None,
        grouped=request.group_by is not None, count_cap=float(n), column=q.column,
        drops=bool(drops), n_groups=n_groups, all_bounds={c: facts.bounds[c] for c in read},
        unit=unit,
        units_public=unit is not None and facts.size_public, epsilon=request.epsilon,
        keys=facts.keys, ci=request.ci,
    )


def _require_public_size(q: Query, ctx: PlanContext, facts: FrameFacts,
                         drops: Sequence[str]) -> None:
    """Refuse a query that needs the public row count where it is private."""
    if not q.needs_public_size or ctx.size_public:
        return
    if facts.unit is not None:
        raise PrivateSizeError(
            f"dp.{q.kind} needs the public row count, which a privacy unit makes "
            f"private (one person can own several rows); it is not available on frames "
            f"protected with privacy_unit={facts.unit.column!r}"
        )
    if not facts.size_public:
        raise PrivateSizeError(
            f"dp.{q.kind} needs the public row count, and this frame's is private because "
            "it was filtered; no missing-value rule changes that. Run it on the protected "
            "frame or on a derivation that keeps every row (with_columns, select, rename, drop)"
        )
    cols = ", ".join(f"nw.col({c!r})" for c in drops)
    bounds = ", ".join(f"{c!r}: ({facts.bounds[c][0]!r}, {facts.bounds[c][1]!r})"
                       for c in drops)
    raise PrivateSizeError(
        f"dp.{q.kind} needs the public row count, and {', '.join(map(repr, drops))} drop "
        "missing values (missing='drop'), which makes it private for them. Declare a public "
        f"fill where the columns are bounded, e.g. frame.dp.with_columns({cols}, "
        f"bounds={{{bounds}}}, missing='lower'): the same columns, their public bounds, and a "
        "fill read from them ('lower', 'upper', 'midpoint' or a number within them); the size "
        "stays public and nothing is spent"
    )


def _plan_query(frame: Any, facts: FrameFacts, request: Request, name: str, q: Query,
                share: float, columns: dict[str, Any], native: dict[str, Any]) -> Planned:
    """One query's plan (``native``: the dtypes of the columns read so far, shared)."""
    backend = facts.dataset.backend
    read = q.columns_read()
    _check_read_columns(frame, facts, read, columns)
    for c in read:
        if c not in native:
            native[c] = backend.column_dtype(frame, c)
    drops = [c for c in read
             if facts.missing.get(c, DROP) == DROP and backend.can_hold_missing(native[c])]
    ctx = _plan_context(facts, request, q, read, drops)
    _require_public_size(q, ctx, facts, drops)
    try:
        plan_q = q.plan(ctx)
    except OverflowError:  # n·w or w² beyond the largest double: a public fact
        raise ParameterError(
            f"the bounds of {', '.join(read) or 'this query'} are too wide for {q.kind} on "
            f"{ctx.n} rows (the statistic's range overflows a double); declare narrower bounds"
        ) from None
    for agg in plan_q.aggregates:  # counts per public key of a column: keys of its dtype
        if agg.kind == "keys" and agg.column is not None and agg.keys is not None:
            if agg.column in group_columns(request.group_by):
                raise ParameterError(f"{q!r} counts the keys of a group-by column; count "
                                     "the groups with dpf.count()")
            engine.validate_column(frame, agg.column, numeric=False, columns=columns)
            _check_keys_match(columns[agg.column], agg.column, agg.keys)
    # sensitivities × k, group shares / min(g, k) (dpframe.provenance._units)
    if facts.unit is not None:
        plan_q = units.bound_plan(plan_q, q, facts.unit, ctx.grouped)
    return Planned(name, q, plan_q, share, [], {}, 0.0, ctx.bounds)


def _check_output_names(out: Sequence[Planned]) -> None:
    outputs = [f"{p.name}[{label}]" for p in out for label in p.plan.labels or ()] + [
        p.name for p in out if p.plan.labels is None]
    clash = sorted({o for o in outputs if outputs.count(o) > 1})
    if clash:
        raise ParameterError(f"the release would have several outputs named {clash}: rename "
                             "the queries (several quantile levels are named <name>[<q>])")


def _share_budget(out: Sequence[Planned], request: Request) -> None:
    """Split ε and δ: a query answered from public facts alone (the count of a frame whose
    size is public) costs nothing and its share goes to the queries that need noise; within a
    query each measurement gets its weight (times the per-group share when grouped)."""
    noisy = [p for p in out if p.plan.measurements]
    total = sum(p.share for p in noisy)
    if noisy and request.epsilon <= 0:
        raise ParameterError(
            "epsilon must be a finite number > 0 for a noisy release, e.g. epsilon=0.1; only "
            "a count of a frame whose size is public (released exactly, at no cost) can be "
            "asked with epsilon=0"
        )
    for p in out:
        p.share = p.share / total if p.plan.measurements else 0.0
        p.epsilon = request.epsilon * p.share
        _build_mechanisms(p, request)
        _mark_pure(p)


def _mark_pure(p: Planned) -> None:
    """Note the measurements whose mechanism, built before the read, uses no δ (a
    Laplace-family member other than bounded, which "auto" may pick): a pure ε-DP release
    composes with δ = 0, so its share of δ is not charged. A mechanism built after earlier
    measurements (None here) or of another family keeps its share: charged, conservatively."""
    p.pure = frozenset(m.name for m, mech in zip(p.plan.measurements, p.mechanisms,
                                                 strict=True)
                       if getattr(mech, "name", None) in ("truncated", "laplace"))


def release_delta(planned: Sequence[Planned], request: Request) -> float:
    """The δ a release charges: :func:`charged_delta`, or all of the request's δ when keys
    are selected (the selection uses it)."""
    if request.selection is not None:
        return request.delta
    return charged_delta(planned, request.delta)


def charged_delta(planned: Sequence[Planned], delta: float) -> float:
    """The δ a release of ``planned`` asking for ``delta`` charges: ``delta`` less the shares
    of its pure ε-DP measurements (:func:`_mark_pure`); all of it when none is pure."""
    if not any(p.pure for p in planned):
        return delta
    used = math.fsum(delta * p.share * m.weight for p in planned for m in p.plan.measurements
                     if m.name not in p.pure)
    return min(used, delta)


def _build_mechanisms(p: Planned, request: Request) -> None:
    """The mechanism of each of ``p``'s measurements: its own (quantiles: the exponential
    mechanism over bins), None when its domain depends on earlier noisy values (built after
    them), else the Laplace family member ``request.mechanism`` names."""
    p.mechanisms = []
    for m in p.plan.measurements:
        eps, dlt = _charged(p, m, request, grouped=True)
        p.mechanisms.append(m.kind.build(m, eps, dlt, _laplace(request, m, eps, dlt, p.choices)))
        if m.make is not None:
            p.choices[m.name] = "the exponential mechanism (used for every quantile)"


def _charged(p: Planned, m: Measurement, request: Request, *, grouped: bool
             ) -> tuple[float, float]:
    """The ε and δ of measurement ``m``: its share of the release; ``grouped``: the share a
    mechanism of one group is calibrated to (each row is in one group, but a changed row can
    move between two: ``group_share``, default ½; ungrouped, a plan of several disjoint cells
    gives each its ``cell_share``: :meth:`~dpframe.query.statistics.Plan.epsilon_factor`)."""
    factor = p.plan.epsilon_factor(request.group_by is not None) if grouped else 1.0
    delta = 0.0 if m.name in p.pure else request.delta * p.share * m.weight * factor
    return request.epsilon * p.share * m.weight * factor, delta


def _laplace(request: Request, m: Measurement, epsilon: float, delta: float,
             choices: dict[str, str]) -> LaplaceFactory:
    """The request's Laplace-family member for ``m`` at ``(epsilon, delta)``, on the given
    feasible set and sensitivity (``None``: the measurement's own)."""
    return lambda lower, upper, sensitivity: _mechanism(request, m, epsilon, delta, lower,
                                                        upper, sensitivity, choices=choices)


def _mechanism(request: Request, m: Measurement, epsilon: float, delta: float,
               lower: float | None = None, upper: float | None = None,
               sensitivity: float | None = None, *, choices: dict[str, str]) -> Mechanism:
    lo = m.lower if lower is None else lower
    hi = m.upper if upper is None else upper
    sens = m.sensitivity if sensitivity is None else sensitivity
    magnitude = None if math.isfinite(lo) and math.isfinite(hi) else m.magnitude
    name = request.mechanism
    if name == "auto":
        name, choices[m.name] = _auto(epsilon, sens, lo, hi, delta)
    return make_mechanism(name, epsilon=epsilon, sensitivity=sens, lower=lo, upper=hi,
                          delta=delta if name == "bounded" else 0.0, magnitude=magnitude)


@functools.lru_cache(maxsize=1024)
def _auto(epsilon: float, sensitivity: float, lower: float, upper: float, delta: float
          ) -> tuple[str, str]:
    """``mechanism="auto"``: the mechanism with the smaller certified worst-case MSE over the
    output domain, from public facts only (:func:`dpframe.mechanisms.choose_mechanism`)."""
    choice = choose_mechanism(epsilon, sensitivity,
                              lower if math.isfinite(lower) else None,
                              upper if math.isfinite(upper) else None, delta)
    return choice.name, choice.reason


def plan(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "auto",
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
) -> list[Planned]:
    """Steps 1–3 of :func:`run` only — provenance, arguments, plans and mechanisms — for the
    accuracy planner (:mod:`dpframe.release._accuracy_planner`): reads no data, spends and logs
    nothing."""
    return plan_release(frame, queries, epsilon=epsilon, delta=delta, weights=weights,
                        mechanism=mechanism, group_by=group_by, keys=keys,
                        session=session)[0]


def plan_release(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "auto",
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
    selection_share: Any = 0.5,
) -> tuple[list[Planned], Any]:
    """:func:`plan` and, for a group-by whose keys are selected from the data, the selection's
    calibration (a :class:`~dpframe.mechanisms.selection.SelectionRule`; None otherwise):
    public facts only, nothing read, spent or logged."""
    facts, _, request, planned = _prepare(
        frame, queries, session=session, epsilon=epsilon, delta=delta, weights=weights,
        mechanism=mechanism, random_state=None, group_by=group_by, keys=keys, ci=None,
        selection_share=selection_share)
    rule = None if request.selection is None else _selection_rule(facts, request)
    return planned, rule


def _prepare(frame: Any, queries: Mapping[str, Query], *, session: Session | str | None,
             **arguments: Any) -> tuple[FrameFacts, Any, Request, list[Planned]]:
    """Steps 1–3, shared by :func:`run`, :func:`plan` and :func:`exact_measurements`: the
    frame's verified facts, the data releases read (its private snapshot, if any), the checked
    request and the plans with their mechanisms."""
    facts = resolve(frame, session)
    data = facts.data  # dpframe's private object: never the one the user holds
    request = check_request(queries, facts=facts, **arguments)
    if request.selection is not None:  # keys from the data: check the selection's
        _selection_rule(facts, request)  # calibration and the queries' rest of ε now
        return facts, data, request, _plan_all(data, facts, _queries_part(request), queries)
    return facts, data, request, _plan_repeated(data, facts, request, queries)


#: Plans already made, per frame (its :class:`FrameFacts`, by identity) and request
#: (:func:`_plan_key`); an entry leaves with its frame's facts.
_PLANS: IdentityMap[dict[Any, list[Planned]]] = IdentityMap()
_PLANS_PER_FRAME = 64


def _plan_repeated(frame: Any, facts: FrameFacts, request: Request,
                   queries: Mapping[str, Query]) -> list[Planned]:
    """:func:`_plan_all`, made once per frame and request: a plan is a function of public
    facts alone (the frame's facts, which never change, and the checked arguments), so a
    repeated query -- a notebook asking ``df.dp.mean`` again -- reuses its plan and
    mechanisms instead of re-deriving them (a third of a scalar query's fixed cost). Each
    caller gets its own copies of the plans' mutable parts."""
    key = _plan_key(facts, request, queries)
    if key is None:
        return _plan_all(frame, facts, request, queries)
    per_frame = _PLANS.get(facts)
    if per_frame is None:
        per_frame = {}
        _PLANS.set(facts, per_frame)
    known = per_frame.get(key)
    if known is not None:
        return [_copied(p) for p in known]
    planned = _plan_all(frame, facts, request, queries)
    if len(per_frame) < _PLANS_PER_FRAME:
        per_frame[key] = [_copied(p) for p in planned]
    return planned


def _copied(p: Planned) -> Planned:
    """``p`` with its own lists of mechanisms and choices (a draw may add to them)."""
    return replace(p, mechanisms=list(p.mechanisms), choices=dict(p.choices))


def _plan_key(facts: FrameFacts, request: Request, queries: Mapping[str, Query]) -> Any:
    """Everything a plan depends on besides the frame's facts, as a hashable value with the
    type of every value in it (``1`` and ``True`` are different keys); None where something
    is not hashable or the frame's schema could change (then nothing is reused)."""
    if not _immutable(facts):
        return None
    try:
        key = (tuple((name, type(q), _typed(vars(q))) for name, q in queries.items()),
               _typed((request.epsilon, request.delta, request.mechanism, request.shares,
                       request.group_by, request.keys, request.ci, request.keys_from_data)))
        hash(key)
    except TypeError:
        return None
    return key


def _typed(value: Any) -> Any:
    """A hashable, typed image of ``value``: containers element by element, every leaf with
    its type; raises ``TypeError`` for anything it cannot represent faithfully."""
    if isinstance(value, str | int | float | bool | type(None)):
        return (type(value), value)
    if isinstance(value, Keys) and value.fingerprint is not None:
        return value.fingerprint  # built once per key list: no per-key work per query
    if isinstance(value, dict):
        return ("dict", tuple((_typed(k), _typed(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_typed(v) for v in value))
    raise TypeError("not a plain value")


def run(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "auto",
    random_state: Any = None,
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
    ci: float | None = None,
    selection_share: float = 0.5,
    document: bool = True,
) -> Outcome:
    """Answer ``queries`` on ``frame`` as one release costing ``epsilon`` (and ``delta``);
    with ``ci`` (a level such as 0.95), also a confidence interval for every answer. A
    group-by without declared keys and with ``delta > 0`` first selects its keys from the
    data with ``selection_share`` of ε and all of δ (:func:`_select_keys`). ``document``:
    include the ledger's log document as of this release (a table carries it; a single
    number does not, and copying the log costs O(entries))."""
    facts, frame, request, planned = _prepare(
        frame, queries, session=session, epsilon=epsilon, delta=delta, weights=weights,
        mechanism=mechanism, random_state=random_state, group_by=group_by, keys=keys, ci=ci,
        selection_share=selection_share)
    dataset = facts.dataset
    cluster = backend_of(frame).pass_hooks()  # Dask, Spark: each pass under the engine timeout
    timeout = engine_timeout() if cluster is not None else None
    engine_pass(cluster, timeout, dataset.check_unchanged, spent=None)
    ledger = dataset.ledger
    spends = any(p.plan.measurements for p in planned)
    epsilon, delta = (request.epsilon, release_delta(planned, request)) if spends else (0.0, 0.0)
    reservation = ledger.reserve(epsilon, delta)
    # --- data is read from here on: nothing below may depend on it except through noise ---
    failure: str | None = None
    try:
        with quiet():  # an engine's warning (a reader's, a numeric one) depends on values
            request, planned, selected, aggs = engine_pass(
                cluster, timeout, functools.partial(_read, frame, facts, request, planned,
                                                    queries), spent=(epsilon, delta))
        values, intervals, entries = _measure(frame, facts, request, planned, aggs)
    except EngineTimeoutError:  # a function of elapsed time (which the caller sees anyway)
        failure = "timeout"
    except BaseException as exc:  # the safety net (dpframe.release._safety_net): never the text
        failure = type(exc).__name__
    if failure is not None:
        _charge_failure(frame, facts, request, list(queries), failure, reservation, delta,
                        timeout)
    try:
        release_id = ledger.commit(reservation, selected + entries,
                                   keys=None if request.keys is None else dict(
                                       [keys_reference(request.keys)]))
    except BaseException:
        ledger.cancel(reservation)  # no-op once committed
        raise
    key_dtypes = _released_selection(request, facts)  # warns if no key was kept
    return Outcome(values, request.keys, request.group_by, entries,
                   ledger.snapshot_document() if document else {}, release_id,
                   backend_of(frame), intervals, request.ci, key_dtypes)


def _read(frame: Any, facts: FrameFacts, request: Request, planned: list[Planned],
          queries: Mapping[str, Query]
          ) -> tuple[Request, list[Planned], list[dict[str, Any]], Mapping[Any, np.ndarray]]:
    """Every engine pass of a release after the reservation: the key selection, if any, then
    the aggregation (one :func:`engine_pass`: returned whole, or not at all)."""
    selected: list[dict[str, Any]] = []
    if request.selection is not None:
        request, planned, selected = _select_keys(frame, facts, request, queries)
    return request, planned, selected, _aggregate(frame, facts, request, planned)


def _aggregate(frame: Any, facts: FrameFacts, request: Request, planned: list[Planned]
               ) -> Mapping[Any, np.ndarray]:
    """Every exact aggregate the planned queries need, in one pass of the frame's engine (the
    read: the caller runs it under the safety net)."""
    return backend_of(frame).aggregate(
        frame, [a for p in planned for a in p.plan.aggregates],
        missing={c: facts.missing.get(c, DROP) for p in planned for c in p.query.columns_read()},
        group_by=request.group_by, keys=request.keys,
        columns=engine.frame_columns(frame, immutable=_immutable(facts)),
        bounding=None if facts.unit is None else Bounding(facts.unit, release_seed(request.rng)),
    )


@dataclass(frozen=True)
class Selected:
    """Public facts of a key selection, for after the release: the group columns' dtypes
    (schema), its calibration and its share of ε."""

    key_dtypes: dict[str, Any]
    rule: Any
    share: float


def _released_selection(request: Request, facts: FrameFacts) -> dict[str, Any] | None:
    """After the commit, for keys selected from the data: warn if none was kept (a function
    of the released keys alone: post-processing) and give the key columns' dtypes."""
    chosen = request.selected
    if chosen is None:
        return None
    if not request.keys:
        _warn_empty_selection(chosen.rule, chosen.share,
                              "rows" if facts.unit is None else "persons")
    return chosen.key_dtypes


def _warn_empty_selection(rule: Any, share: float, counted: str) -> None:
    """The released key set is empty: say so, with the public threshold and the ways to get
    groups. Issued on the released keys alone (post-processing); quotes no data."""
    half = rule.smallest_kept(0.5)
    warn_user(SelectionWarning(
        f"no group passed the key selection, so the table has no rows: a group is kept when "
        f"its noisy count exceeds the threshold {rule.threshold:.4g} (a group of {half} "
        f"{counted} is kept half the time), set by ε = {rule.epsilon:.4g} for the selection "
        f"(selection_share={share:g} of this release's ε) and δ = "
        f"{rule.delta:.3g}. To get groups: declare the keys (keys=[...]: no selection, no "
        f"threshold), give the release more epsilon, or give the selection a larger "
        f"selection_share; frame.dp.groupby(...).accuracy(...) shows the threshold before "
        f"spending"))


#: The environment variable that sets the engine timeout, in seconds.
ENGINE_TIMEOUT = "DPFRAME_ENGINE_TIMEOUT"
_DEFAULT_TIMEOUT = 600.0
_TIMEOUT_FIX = (f"Check the cluster's workers; for jobs that need more time set the "
                f"environment variable {ENGINE_TIMEOUT} to a number of seconds (default "
                f"{_DEFAULT_TIMEOUT:g}; docs/engines.md, 'When the cluster dies')")


def engine_timeout() -> float:
    """The engine timeout in seconds: ``DPFRAME_ENGINE_TIMEOUT`` (a positive number), read at
    each release, else 600 (docs/engines.md, "When the cluster dies": ten minutes is far
    beyond a healthy release's pass on the clusters tested, and a false alarm spends ε)."""
    text = os.environ.get(ENGINE_TIMEOUT, "").strip()
    if not text:
        return _DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(
            f"the environment variable {ENGINE_TIMEOUT} must be a positive number of seconds "
            f"(default {_DEFAULT_TIMEOUT:g}), got {text!r}. Nothing was read or spent.")
    return value


def _timeout_text(timeout: float | None, engine_name: str) -> str:
    return (f"the {engine_name} engine did not finish this release's pass within "
            f"{timeout:g} s ({ENGINE_TIMEOUT})")


def engine_pass(hooks: tuple[Callable[[], None] | None, Callable[[], None] | None] | None,
                timeout: float | None, work: Callable[[], Any], *,
                spent: tuple[float, float] | None) -> Any:
    """``work()``, for a cluster engine (``hooks`` not None) in a thread of its own that the
    caller waits for at most ``timeout`` seconds. ``enter`` runs first in that thread (Spark:
    the pass's job group); on expiry ``cancel`` runs (Spark: cancel that group), the thread is
    abandoned (a daemon; whatever it computes later is dropped, never read) and
    :class:`EngineTimeoutError` is raised. ``spent``: None before the reservation (the error
    then says nothing was spent); after it, :func:`run` charges the reservation."""
    if hooks is None or timeout is None:
        return work()
    enter, cancel = hooks
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            if enter is not None:
                enter()
            box["value"] = work()
        except BaseException as exc:  # handed to the waiting thread (or dropped if late)
            box["error"] = exc

    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                              name="dpframe-engine-pass", daemon=True)
    thread.start()
    try:
        thread.join(timeout)
    finally:
        if thread.is_alive() and cancel is not None:  # expired or interrupted (Ctrl-C)
            with contextlib.suppress(Exception):
                cancel()
    if thread.is_alive():
        if spent is not None:
            raise EngineTimeoutError("timeout")  # run() charges, logs and re-raises
        raise EngineTimeoutError(
            f"the engine did not finish the check of this frame's source (a re-count of its "
            f"rows) within {timeout:g} s ({ENGINE_TIMEOUT}): every worker may have died. "
            f"Nothing was spent. {_TIMEOUT_FIX}")
    if "error" in box:
        raise box.pop("error")
    return box["value"]


def _charge_failure(frame: Any, facts: FrameFacts, request: Request, names: list[str],
                    failure: str, reservation: Any, delta: float,
                    timeout: float | None = None) -> None:
    """A release failed after the read: spend its reservation, log the failure, and raise
    the one fixed error (outside the ``except`` block, so nothing chains to the original).
    ``failure == "timeout"``: the engine timeout expired (:func:`engine_pass`); the entry says
    so and does not lock the ledger (a timeout is a function of the elapsed time, which the
    caller sees anyway: docs/audit.md leaves timing out of scope), the error names the
    setting."""
    context = _LogContext.of(frame, facts, request)
    entry = failure_entry(
        what="release", names=names, epsilon=request.epsilon,
        delta=delta, engine=context.engine, random_source=context.random_source,
        derivation=context.derivation,
        group_by=None if context.group_by is None else str(context.group_by),
        keys_ref=context.keys_ref,
        unit_fields=units.describe(facts.unit, context.group_by is not None))
    if failure == "timeout":
        entry = {**entry, "query": "timed-out release",
                 "mechanism": "none (timed out: nothing was released)",
                 "formulation": _timeout_text(timeout, context.engine) + (
                     "; the aggregation had been submitted, so the reserved budget is spent; "
                     "its late result, if any, was discarded")}
    facts.dataset.ledger.commit(reservation, [entry])
    if failure == "timeout":
        raise EngineTimeoutError(
            f"{_timeout_text(timeout, context.engine)}: every worker may have died, or the "
            f"job needs longer. The aggregation had been submitted, so this release's reserved "
            f"budget (epsilon={request.epsilon:.6g}, delta={delta:.3g}) is spent and the log "
            f"records a timed-out release; its late result, if any, is discarded. "
            f"{_TIMEOUT_FIX}")
    if failure in ("KeyboardInterrupt", "SystemExit"):
        raise KeyboardInterrupt if failure == "KeyboardInterrupt" else SystemExit(1)
    raise failure_error("release", names, request.epsilon, delta)


def evaluate_derivation(facts: FrameFacts, steps: Sequence[Any], schema: Mapping[str, Any]
                        ) -> Any:
    """Compute a verified derivation of an in-memory frame (pandas, Polars) on its private
    data, in dpframe's total compilation (:mod:`dpframe.rowwise`). Under the safety net: a
    failure is logged (ε = 0: no budget was reserved) and raises the one fixed error."""
    backend = facts.dataset.backend
    ledger = facts.dataset.ledger
    ledger.cancel(ledger.reserve(0.0, 0.0))  # a locked ledger (an earlier failure) refuses
    try:
        with quiet():
            return apply_steps(facts.data, steps, backend.rowwise, schema)
    except BaseException:  # the safety net: nothing of the exception is kept
        pass
    entry = failure_entry(
        what="derivation", names=[s.kind for s in steps], epsilon=0.0,
        delta=0.0, engine=engine.engine_name(facts.data), random_source="none",
        derivation=" > ".join(facts.derivation),
        unit_fields=units.describe(facts.unit, False))
    ledger.commit(ledger.reserve(0.0, 0.0), [entry])
    raise failure_error("derivation", [s.kind for s in steps], 0.0, 0.0)


def _select_keys(frame: Any, facts: FrameFacts, request: Request,
                 queries: Mapping[str, Query]
                 ) -> tuple[Request, list[Planned], list[dict[str, Any]]]:
    """Keys from the data (docs/privacy.md, section K): the exact row count of every observed
    key (rows with a missing key are in no group), one snapped Laplace count per key at
    ``ε_sel/2`` (a replaced row moves one count down and another up; each row holds one key,
    so ``m = 1`` key per unit and ``c = 1`` row per key), and only the keys whose noisy count
    clears the threshold τ (:func:`dpframe.mechanisms.selection.selection_rule`) are kept, in
    sorted order. A key one row holds passes with probability at most δ. The queries then run
    on the kept keys as public keys with the rest of ε (and no δ): sequential composition."""
    from dataclasses import replace

    from dpframe.mechanisms.selection import select_keys

    assert request.selection is not None and request.group_by is not None
    cols = group_columns(request.group_by)
    per_unit, unit_column, upper, counted = 1, None, facts.dataset.n, frame
    if facts.unit is not None:
        # several rows per person: keep k rows per unit (so a unit reaches at most k keys) and
        # count each key's distinct units (a unit adds at most 1 to a key's count)
        counted, _ = backend_of(frame).bound_contributions(
            frame, Bounding(facts.unit, release_seed(request.rng)), columns=list(cols))
        per_unit, unit_column = facts.unit.max_rows, facts.unit.column
        upper = facts.unit.n_units
    observed, counts = observed_keys(counted, cols, distinct=unit_column)
    rule = _selection_rule(facts, request)  # the one checked before the read
    chosen = select_keys((observed, counts.tolist()), rule.epsilon, rule.delta, per_unit,
                         neighbours="replace", count_upper=float(max(upper, 1)),
                         random_state=request.rng)
    columns = engine.frame_columns(frame, immutable=_immutable(facts))  # the schema
    rest = replace(_queries_part(request), keys=tuple(chosen.keys), selection=None,
                   keys_from_data=True, selected=Selected(
                       {c: columns[c] for c in cols}, rule, request.selection))
    planned = _plan_all(frame, facts, rest, queries)
    context = _LogContext.of(frame, facts, rest)
    return rest, planned, [context.selection_entry(chosen.log, cols)]


def exact_measurements(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    bounding_seed: int = 0,
) -> dict[tuple[str, str], tuple[np.ndarray, float]]:
    """For audits and tests only: the *exact* value of every measurement a release of
    ``queries`` would noise, with the sensitivity its log entry would record, as
    ``{(query name, part): (values per group, sensitivity)}``. Runs the same plan and
    aggregation pass as :func:`run` but adds no noise, spends nothing and logs nothing — the
    neighbour-pair tests compare these across neighbouring data sets. Measurements whose
    domain depends on earlier noisy values (covariances) are left out. ``bounding_seed``: the
    seed of the contribution bounding on a frame with a privacy unit (a release draws a secret
    one; the bound holds for every seed)."""
    facts, frame, request, planned = _prepare(
        frame, queries, session=None, epsilon=1.0, delta=0.0, weights=None,
        mechanism="bounded", random_state=None, group_by=group_by, keys=keys, ci=None)
    aggs = backend_of(frame).aggregate(
        frame, [a for p in planned for a in p.plan.aggregates],
        missing={c: facts.missing.get(c, DROP) for p in planned for c in p.query.columns_read()},
        group_by=request.group_by, keys=request.keys,
        bounding=None if facts.unit is None else Bounding(facts.unit, bounding_seed),
    )
    return {
        (p.name, m.name): (np.asarray(m.statistic(aggs), dtype=float), float(mech.sensitivity))
        for p in planned for m, mech in zip(p.plan.measurements, p.mechanisms, strict=True)
        if mech is not None
    }


def _measure(frame: Any, facts: FrameFacts, request: Request, planned: list[Planned],
             aggs: Mapping[Any, np.ndarray]
             ) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]],
                        list[dict[str, Any]]]:
    """Noise every measurement, post-process every query (and its interval), and build the
    log entries."""
    context = _LogContext.of(frame, facts, request)
    values: dict[str, np.ndarray] = {}
    intervals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    entries: list[dict[str, Any]] = []
    for p in planned:
        noisy, used = _draw_all(p, request, aggs, context, entries)
        _answer(p, request, noisy, used, values, intervals)
    return values, intervals, entries


def _draw_all(p: Planned, request: Request, aggs: Mapping[Any, np.ndarray],
              context: _LogContext, entries: list[dict[str, Any]]
              ) -> tuple[dict[str, np.ndarray], dict[str, Mechanism | None]]:
    """Every measurement of ``p`` released the one way its kind says
    (:mod:`dpframe.query._measurement_kinds`), in plan order (a later measurement's domain may
    read the earlier noisy values); one log entry each."""
    noisy: dict[str, np.ndarray] = {}
    used: dict[str, Mechanism | None] = {}
    for m, mech in zip(p.plan.measurements, p.mechanisms, strict=True):
        eps, dlt = _charged(p, m, request, grouped=False)
        laplace = _laplace(request, m, *_charged(p, m, request, grouped=True), p.choices)
        drawn = m.kind.draw(m, mech, np.asarray(m.statistic(aggs), dtype=float), noisy,
                            laplace, request.rng)
        noisy[m.name], used[m.name] = drawn.value, drawn.mechanism
        entries.append(context.entry(p, m, drawn.mechanism, eps, dlt, drawn.point))
    if not p.plan.measurements:  # answered from public facts: logged, not noised
        entries.append(context.entry(p, None, None, 0.0, 0.0, None))
    return noisy, used


def _answer(p: Planned, request: Request, noisy: dict[str, np.ndarray],
            used: Mapping[str, Mechanism | None], values: dict[str, np.ndarray],
            intervals: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """``p``'s post-processed answer (one column, or one per label) and its interval."""
    answer = np.asarray(p.plan.finalize(noisy), dtype=float)
    bounds = None
    if request.ci is not None and p.plan.interval is not None:
        bounds = [np.asarray(b, dtype=float) for b in p.plan.interval(used, noisy, request.ci)]
    if p.plan.labels is not None:  # several answers per group: one output each (histogram
        width = len(p.plan.labels)  # bins and matrix entries with their value intervals)
        for i, label in enumerate(p.plan.labels):
            values[f"{p.name}[{label}]"] = answer.reshape(-1, width)[:, i]
            if bounds is not None:
                intervals[f"{p.name}[{label}]"] = (bounds[0].reshape(-1, width)[:, i],
                                                   bounds[1].reshape(-1, width)[:, i])
    else:
        values[p.name] = answer
        if bounds is not None:
            intervals[p.name] = (bounds[0], bounds[1])
    values.update(_ci_columns(p, used, answer, request.ci))


def _ci_columns(p: Planned, used: Mapping[str, Mechanism | None], answer: np.ndarray,
                level: float | None) -> dict[str, np.ndarray]:
    """A plan's non-value interval columns (quantiles: the rank interval), computed from the
    level and public parameters only; one value per group."""
    if level is None or p.plan.ci_columns is None:
        return {}
    groups = answer.reshape(-1, len(p.plan.labels or (None,))).shape[0]
    return {f"{p.name}_{suffix}": np.full(groups, float(v))
            for suffix, v in p.plan.ci_columns(used, level).items()}


def _interval_text(level: float | None, p: Planned) -> str | None:
    """The log's ``interval`` field: what ``ci=`` released for this query, truthfully."""
    if level is None:
        return None
    if p.plan.interval_note:  # the plan says what it released (quantiles: brackets, ranks)
        return f"{level:g} {p.plan.interval_note.replace('<name>', p.name)}"
    if p.plan.interval is not None:
        return f"{level:g} confidence interval released (post-processing, no ε)"
    return "none: this statistic has no interval (ci= ignored for it)"


@dataclass(frozen=True)
class _LogContext:
    """The fields every entry of one release shares."""

    time: str
    engine: str
    random_source: str
    group_by: GroupBy | None
    keys_ref: str | None  # the ledger's reference to the key list (keys_reference)
    n_keys: int
    derivation: str
    facts: FrameFacts
    level: float | None

    @classmethod
    def of(cls, frame: Any, facts: FrameFacts, request: Request) -> _LogContext:
        return cls(
            time=_dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds"),
            engine=engine.engine_name(frame),
            random_source=request.random_source,
            group_by=None if request.group_by is None else ",".join(
                group_columns(request.group_by)),
            keys_ref=None if request.keys is None else keys_reference(request.keys)[0],
            n_keys=len(request.keys or ()),
            derivation=" > ".join(facts.derivation),
            facts=facts,
            level=request.ci,
        )

    def entry(self, p: Planned, m: Measurement | None, mech: Mechanism | None, epsilon: float,
              delta: float, point: tuple[float, float] | None) -> dict[str, Any]:
        cols = p.query.columns_read()
        facts = self.facts
        clamping = "; ".join(
            f"{c} clamped to [{facts.bounds[c][0]:g}, {facts.bounds[c][1]:g}]" for c in cols
        ) or "none (row count)"
        missing = "; ".join(f"{c}: {_policy_text(facts.missing.get(c, DROP))}" for c in cols)
        grouped = self.group_by is not None
        if m is None:  # answered exactly from public facts (a public size)
            value = float(p.plan.finalize({})[0])
            point = (value, value)
        lower, upper = (point if point is not None else (m.lower, m.upper))  # type: ignore[union-attr]
        if mech is not None:
            lower, upper = mech.domain.lower, mech.domain.upper
        quanta = sorted({a.fp.q for a in (m.needs if m is not None else ()) if a.fp is not None})
        return LogRecord.from_dict({
            "time": self.time,
            "name": p.name,
            "query": p.plan.query,
            "part": m.name if m is not None else p.plan.query,
            "columns": ",".join(cols),
            "group_by": self.group_by,
            "group_keys": self.keys_ref,
            "epsilon": float(epsilon),
            "delta": float(delta),
            "mechanism_epsilon": float(mech.epsilon) if mech is not None else 0.0,
            "epsilon_overhead": float(getattr(mech, "epsilon_overhead", 0.0)),
            "sensitivity": float(mech.sensitivity if mech is not None else (
                m.sensitivity if m is not None else 0.0)),
            "mechanism": str(mech.name) if mech is not None else (
                "none (single-point domain)" if m is not None else "none (public size)"),
            "scale": float(mech.scale) if mech is not None else 0.0,
            "grid": _json_num(getattr(mech, "grid", 0.0) or 0.0),
            "domain_lower": _json_num(lower),
            "domain_upper": _json_num(upper),
            "clamping": clamping + (" in the engine; how many were clamped is not released"
                                    if cols else ""),
            "missing": missing or "n/a (row count)",
            "random_source": self.random_source,
            "engine": self.engine,
            "size": "public" if p.plan.public_size else "private",
            "formulation": p.plan.formulation,
            "composition": (
                f"parallel over {self.n_keys} declared groups (ε share "
                f"{(p.plan.group_share or 0.5):g} per group: " + (
                    "a replaced row can move between two groups)" if facts.unit is None else
                    f"a replaced unit can reach {2 * facts.unit.touched_groups} groups)")
                if grouped else "sequential"
            ),
            "fixed_point_quantum": float(quanta[0]) if len(quanta) == 1 else (
                None if not quanta else ",".join(f"{q:g}" for q in quanta)),
            "derivation": self.derivation,
            "verification": "verified from the plan structure",
            "mechanism_choice": p.choices.get(m.name, "requested") if m is not None else
            "none needed: the value is public",
            "interval": _interval_text(self.level, p),
            **units.describe(facts.unit, grouped),
        }).to_dict()


    def selection_entry(self, log: Mapping[str, Any], columns: Sequence[str]
                        ) -> dict[str, Any]:
        """The log entry of a key selection (its released keys are the ``group_keys``)."""
        return LogRecord.from_dict({
            "time": self.time, "name": "keys", "query": "key selection",
            "part": "keys", "columns": ",".join(columns), "group_by": self.group_by,
            "group_keys": self.keys_ref, "epsilon": float(log["epsilon"]),
            "delta": float(log["delta"]),
            "mechanism_epsilon": float(log["epsilon_per_key"]),
            "epsilon_overhead": float(log["epsilon_overhead"]),
            "sensitivity": float(log["max_count_per_key"]), "mechanism": "laplace",
            "scale": float(log["scale"]), "grid": float(log["grid"]),
            "domain_lower": 0.0, "domain_upper": None,
            "clamping": "none (row counts per key)",
            "missing": "rows with a missing key are in no group",
            "random_source": self.random_source, "engine": self.engine, "size": "private",
            "formulation": (
                f"private key selection: a noisy count per observed key (ε/(2m) each, m = "
                f"{int(log['max_keys_per_unit'])} keys per unit: a replaced unit changes at "
                f"most 2m keys' counts by 1), kept if above the threshold "
                f"{float(log['threshold']):.6g}; a key one unit holds is released with "
                f"probability ≤ {float(log['pass_probability']):.3g} ≤ δ; "
                f"{int(log['released_keys'])} keys kept, sorted; counts not released"),
            "composition": "sequential (before the queries on the kept keys)",
            "derivation": self.derivation,
            "verification": "verified from the plan structure",
            "mechanism_choice": "the Laplace mechanism (used for every key selection)",
            "fixed_point_quantum": None, "interval": None,
            **units.describe(self.facts.unit, False),
        }).to_dict()


def _policy_text(policy: Any) -> str:
    return "rows missing it are dropped (size private)" if policy == DROP else \
        f"missing values filled with the public value {float(policy):g}"


def _json_num(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None
