"""Spark: the exact aggregates of :mod:`dpframe.engine._aggregation` written as Spark SQL text.

The arithmetic is the narwhals path's (:func:`dpframe.engine._row_expressions.row_expressions`),
term for term: ``x`` as a double, the missing-value rule, ``(x − c)·(1/q)``, ``greatest(least(·,
k_hi),
k_lo)``, the ``(· + 1.5·2⁵²) − 1.5·2⁵²`` rounding to the nearest integer (ties to even) and
double sums of integer-valued doubles below 2⁵³ (exact in any order; ``docs/engines.md``).
Only the way the plan is *built* differs. PySpark builds every ``Column`` operation with a
round trip to the JVM; the narwhals expressions of a DP mean took about 280 of them (35 ms
measured on a 2-core machine) and a filter on 1,000 declared keys about 3,000 (more than
100 ms), per release. Here every aggregate is one SQL expression (one round trip) and the
key filter is one ``IN (...)`` expression.

Literals are written so that Spark parses them to the same double Python holds: ``repr`` of
a float is the shortest decimal that rounds back to it, and both Java and Python round a
decimal to the nearest double; the ``D`` suffix makes it a double literal (not a decimal).
Key literals are rendered only for integer keys of integer columns, numbers of float columns
and strings (without quotes or backslashes) of string columns; for any other key,
:func:`spark_sums` returns None and the narwhals path runs.

**The key filter.** Rows whose key was not declared are left out before aggregating. Spark
evaluates ``key IN (k₁, …, k₁₀₀₀)`` as a hash-set lookup per row, which measured slower than the
whole aggregation (a 1,000-key group-by at 10 M rows: 1.7–2.0× the native clamp + group sum +
count, against 1.05× without the filter). Integer keys usually are codes or years: declared
integer keys of an integer column that form at most :data:`MAX_RANGES` runs of consecutive
integers are written as ``key BETWEEN a AND b OR …`` instead — the same rows exactly (an
integer lies in ``[a, b]`` iff it is one of ``a, a+1, …, b``) — which measured 1.18×.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine import ROUNDER, aligned, is_float
from dpframe.query import ADDITIVE_KINDS, DROP, Agg, FixedPoint

__all__ = ["job_group", "spark_sums", "sql_aggregates"]

#: At most this many ``BETWEEN`` ranges replace an ``IN`` list of integer keys.
MAX_RANGES = 16

_INTEGER_TYPES = (nw.Int8, nw.Int16, nw.Int32, nw.Int64, nw.UInt8, nw.UInt16, nw.UInt32,
                  nw.UInt64)


def _double(value: float) -> str:
    """A Spark SQL double literal equal to ``value`` (finite)."""
    value = float(value)
    if not math.isfinite(value):  # pragma: no cover - bounds, centres and fills are finite
        raise ValueError(f"cannot write {value!r} as a SQL literal")
    text = repr(value).upper() + "D"
    return f"({text})" if text.startswith("-") else text


def _name(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _present(column: str, dtype: Any) -> str:
    c = _name(column)
    if is_float(dtype):
        return f"({c} IS NOT NULL AND NOT isnan({c}))"
    return f"({c} IS NOT NULL)"


def _value(column: str, dtype: Any) -> str:
    c = _name(column)
    return c if dtype == nw.Float64 else f"CAST({c} AS DOUBLE)"


def _k(column: str, dtype: Any, fp: FixedPoint, policy: Any) -> str:
    """``round(clip((x − c)/q))`` as SQL; under a fill policy missing values are filled first,
    under ``"drop"`` the caller only uses it where the value is present."""
    x = _value(column, dtype)
    if policy != DROP:
        x = f"(CASE WHEN {_present(column, dtype)} THEN {x} ELSE {_double(policy)} END)"
    inv_q = _double(1.0 / fp.q)  # exact: q is a power of two
    scaled = f"(({x} - {_double(fp.center)}) * {inv_q})" if fp.center != 0.0 else \
        f"({x} * {inv_q})"
    clipped = f"greatest(least({scaled}, {_double(fp.k_hi)}), {_double(fp.k_lo)})"
    rounder = _double(ROUNDER)
    return f"(({clipped} + {rounder}) - {rounder})"


def sql_aggregates(aggs: Sequence[Agg], columns: Mapping[str, Any],
                   missing: Mapping[str, Any]) -> list[str]:
    """One Spark SQL aggregate expression per ``Agg`` (Σ of integer-valued doubles, or a
    count)."""
    out = []
    for agg in aggs:
        if agg.kind == "rows":
            if agg.column is None or missing.get(agg.column, DROP) != DROP:
                out.append("count(1)")
            else:
                out.append(f"count_if({_present(agg.column, columns[agg.column])})")
            continue
        assert agg.column is not None and agg.fp is not None
        policy = missing.get(agg.column, DROP)
        k = _k(agg.column, columns[agg.column], agg.fp, policy)
        masks = [_present(agg.column, columns[agg.column])] if policy == DROP else []
        if agg.kind == "sum":
            term = k
        elif agg.kind == "sum_sq":
            term = f"({k} * {k})"
        else:
            assert agg.column2 is not None and agg.fp2 is not None
            policy2 = missing.get(agg.column2, DROP)
            term = f"({k} * {_k(agg.column2, columns[agg.column2], agg.fp2, policy2)})"
            if policy2 == DROP:
                masks.append(_present(agg.column2, columns[agg.column2]))
        if masks:
            term = f"(CASE WHEN {' AND '.join(masks)} THEN {term} ELSE 0.0D END)"
        out.append(f"coalesce(sum({term}), 0.0D)")
    return out


def _key_literal(key: Any, dtype: Any) -> str | None:
    """``key`` as a SQL literal comparable with a column of ``dtype``, or None."""
    if isinstance(key, bool | np.bool_):
        return None
    if dtype in _INTEGER_TYPES and isinstance(key, int | np.integer):
        return str(int(key))
    if is_float(dtype) and isinstance(key, int | float | np.integer | np.floating):
        return _double(float(key)) if math.isfinite(float(key)) else None
    if dtype == nw.String and isinstance(key, str) and "'" not in key and "\\" not in key:
        return f"'{key}'"
    return None


def _key_filter(column: str, dtype: Any, keys: Sequence[Any]) -> str | None:
    """A SQL condition true exactly for rows whose ``column`` holds one of ``keys``, or None
    when a key cannot be written as a literal. No key (a key selection that kept none): no
    row (Spark's SQL has no empty ``IN ()`` or ``()``)."""
    if not keys:
        return "false"
    literals = [_key_literal(v, dtype) for v in keys]
    if any(lit is None for lit in literals):
        return None
    name = _name(column)
    if dtype in _INTEGER_TYPES:
        runs: list[list[int]] = []
        for k in sorted({int(v) for v in keys}):
            if runs and k == runs[-1][1] + 1:
                runs[-1][1] = k
            else:
                runs.append([k, k])
        if len(runs) <= MAX_RANGES:
            return "(" + " OR ".join(f"{name} BETWEEN {a} AND {b}" if a != b else
                                     f"{name} = {a}" for a, b in runs) + ")"
    return f"{name} IN ({', '.join(map(str, literals))})"


def spark_sums(
    native: Any,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
) -> dict[Agg, np.ndarray] | None:
    """The aggregates of a PySpark DataFrame in one Spark job, or None when a declared key
    cannot be written as a literal (the narwhals path then runs)."""
    from pyspark.sql import functions as F  # noqa: N812

    if any(a.kind not in ADDITIVE_KINDS for a in aggs):  # a kind this file cannot write
        return None
    cols = [] if group_by is None else [group_by] if isinstance(group_by, str) else list(
        group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])]
    frame = native
    for i, col in enumerate(cols):  # keep rows whose key (in every column) is declared
        condition = _key_filter(col, columns[col], list(dict.fromkeys(k[i] for k in tuples)))
        if condition is None:
            return None
        frame = frame.where(F.expr(condition))
    exprs = [F.expr(text).alias(f"__dp_{i}")
             for i, text in enumerate(sql_aggregates(aggs, columns, missing))]
    if cols:
        rows = frame.groupBy(*(F.col(_name(c)) for c in cols)).agg(*exprs).collect()
    else:
        rows = frame.agg(*exprs).collect()
    width = len(cols)
    return aligned(
        aggs, cols, columns, tuples,
        [[row[i] for row in rows] for i in range(width)],
        [[row[width + i] for row in rows] for i in range(len(aggs))])


def job_group() -> tuple[Callable[[], None], Callable[[], None]] | None:
    """Hooks that make a pass cancellable (:func:`dpframe.release._pipeline.engine_pass`).
    ``enter``, run in the thread that submits the pass's jobs, copies the calling thread's local
    properties into it (as ``pyspark.InheritableThread`` does) and puts its jobs in a job group
    of their own (``setJobGroup`` with ``interruptOnCancel``: PySpark pins each Python thread
    to a JVM thread, whose local properties hold the group). ``cancel``, run by the thread
    that gave up waiting, cancels every job of that group (``cancelJobGroup``), so the
    abandoned pass stops and its result never arrives. None without a classic
    ``SparkContext`` (Spark Connect): the pass still times out, but is not cancelled."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        return None
    group = f"dpframe-release-{uuid.uuid4().hex}"
    # the caller's local properties (scheduler pool, its own description...), as
    # pyspark.InheritableThread copies them: a new thread does not inherit them
    properties = context._jsc.sc().getLocalProperties().clone()

    def enter() -> None:
        context._jsc.sc().setLocalProperties(properties)
        context.setJobGroup(group, "a dpframe release pass", interruptOnCancel=True)

    def cancel() -> None:
        context.cancelJobGroup(group)

    return enter, cancel
