"""Structural verification of derived frames: is every output row a function of one input row,
and is no input row used twice?

dpframe answers a query on a derived frame only when it has verified this from the
derivation's *structure* (``docs/frames.md``, "Verified derivations"); nothing here reads data.

How the structure is read
-------------------------
* **Polars LazyFrames** keep their logical plan. Polars exposes it to Python through the same
  node visitor its GPU engine uses (``LazyFrame._ldf.visit()``); we read it *unoptimised*, so
  it is the plan the user wrote. Each plan node and each expression node is checked against an
  allow-list (:data:`ROW_WISE_FUNCTIONS`); anything not on the list is refused, so a new
  Polars feature is refused until it is reviewed.
* **Expressions for pandas and eager Polars** (``frame.dp.filter(expr)``,
  ``frame.dp.with_columns(...)``): the expression — a narwhals expression, or a Polars one on
  Polars frames — is first applied to an *empty* Polars ``LazyFrame`` with the frame's schema
  and the resulting plan is checked as above. Narwhals compiles one expression to the same
  structure on every backend, so the check carries over; the empty frame holds no data.

Accepted plan nodes: ``Filter`` (row-wise predicate), ``HStack`` (``with_columns``) and
``Select`` (``select``, ``rename``, ``drop``, ``cast``) with row-wise expressions, and
``SimpleProjection``. Refused: everything else — joins, unions (concat), group-by, distinct,
sort, slice (head/tail/sample), explode/unpivot/row index (``MapFunction``), caches, python
functions. Accepted expression nodes: columns, scalar literals, arithmetic and comparison
operators, casts, when/then/otherwise, and the element-wise functions listed below. Refused:
aggregations, windows (``over``), sort/gather/filter/slice inside expressions, ``len``, Series
literals (rows from outside the data), cumulative, shifting, ranking, filling strategies,
uniqueness tests, sampling, and any function not on the list.

The protected root of a LazyFrame is found by provenance, not by the session: every LazyFrame
that :func:`dpframe.protect` or a ``.dp`` derivation returns ends in a *marker* — a filter
``lit("dpframe:<id>") == lit("dpframe:<id>")``, always true, removed by Polars' optimiser — and
the verifier walks down the plan to the nearest marker, checking every node above it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dpframe.errors import DerivationError, NoLedgerError

__all__ = [
    "MARKER_PREFIX",
    "ROW_WISE_FUNCTIONS",
    "Step",
    "add_marker",
    "new_marker",
    "plan_markers",
    "plan_signature",
    "plan_sources",
    "verify_expressions",
    "walk_lazy_plan",
]

MARKER_PREFIX = "dpframe:"

#: Element-wise functions as they appear in Polars' plan (``Function`` nodes): the plain names
#: and the namespaced enum members. Each maps one row's values to one value of that row.
ROW_WISE_FUNCTIONS = frozenset({
    # numeric
    "abs", "negate", "clip", "round", "round_sig_figs", "floor", "ceil", "sqrt", "cbrt", "exp",
    "log", "log1p", "pow", "sign", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh", "degrees", "radians",
    # missing values with a given (row-wise) value, mappings with literal tables
    "fill_null", "replace", "coalesce",
    # horizontal (across the columns of one row)
    "max_horizontal", "min_horizontal", "sum_horizontal", "mean_horizontal",
    "BooleanFunction.AllHorizontal", "BooleanFunction.AnyHorizontal",
    # predicates
    "BooleanFunction.IsNull", "BooleanFunction.IsNotNull", "BooleanFunction.IsNan",
    "BooleanFunction.IsNotNan", "BooleanFunction.IsFinite", "BooleanFunction.IsInfinite",
    "BooleanFunction.Not", "BooleanFunction.IsBetween", "BooleanFunction.IsIn",
    # strings
    "StringFunction.Uppercase", "StringFunction.Lowercase", "StringFunction.Titlecase",
    "StringFunction.Contains", "StringFunction.StartsWith", "StringFunction.EndsWith",
    "StringFunction.LenChars", "StringFunction.LenBytes", "StringFunction.Slice",
    "StringFunction.Head", "StringFunction.Tail", "StringFunction.StripChars",
    "StringFunction.StripCharsStart", "StringFunction.StripCharsEnd",
    "StringFunction.StripPrefix", "StringFunction.StripSuffix", "StringFunction.ToInteger",
    "StringFunction.Replace", "StringFunction.ConcatHorizontal",
    "StringFunction.ZFill", "StringFunction.PadStart",
    "StringFunction.PadEnd", "StringFunction.Reverse", "StringFunction.CountMatches",
    "StringFunction.Find",
    # dates and times
    "TemporalFunction.Year", "TemporalFunction.Month", "TemporalFunction.Day",
    "TemporalFunction.Hour", "TemporalFunction.Minute", "TemporalFunction.Second",
    "TemporalFunction.Millisecond", "TemporalFunction.Microsecond",
    "TemporalFunction.Nanosecond", "TemporalFunction.Weekday", "TemporalFunction.Week",
    "TemporalFunction.Quarter", "TemporalFunction.OrdinalDay", "TemporalFunction.IsoYear",
    "TemporalFunction.Truncate", "TemporalFunction.Round", "TemporalFunction.Date",
    "TemporalFunction.Time", "TemporalFunction.IsLeapYear",
    # lists held in one row
    "ListFunction.Length", "ListFunction.Sum", "ListFunction.Mean", "ListFunction.Max",
    "ListFunction.Min", "ListFunction.Contains",
})

#: Functions that can raise on some values unless told not to: accepted only in their
#: non-strict form (``function_data[1]`` is the ``strict`` flag), so that no value can turn a
#: release into an error.
_STRICT_FLAG = frozenset({"StringFunction.ToInteger"})

#: Namespaces whose functions take arguments (a regex pattern, a width, a time unit) that can
#: make them fail or allocate depending on a value when taken from a column: their arguments
#: after the first input must be literals (a bad literal pattern fails on every row, which the
#: empty-frame check and the public schema cannot see, so it is checked on a probe row).
_LITERAL_ARGUMENTS = ("StringFunction.", "TemporalFunction.")

_ALLOWED_NOTE = (
    "dpframe answers derived frames only when it can verify from their structure that every "
    "row comes from one row of the protected data: filters with row-wise predicates, "
    "row-wise new or replaced columns, select / drop / rename / cast. "
)


@dataclass(frozen=True)
class Step:
    """One verified plan step, bottom-up: ``kind`` is ``"filter"``, ``"with_columns"`` or
    ``"select"``; ``outputs`` maps each output column to the input column it copies (a bare
    column reference or a cast of one; bounds carry over) or to None (a computed value);
    ``casts``: the outputs that copy through a cast (not value for value: a privacy-unit id
    cannot follow them)."""

    kind: str
    outputs: dict[str, str | None] = field(default_factory=dict)
    casts: frozenset[str] = frozenset()


def new_marker() -> str:
    """A fresh random marker id (128 bits)."""
    return MARKER_PREFIX + secrets.token_hex(16)


def add_marker(lazy: Any, marker: str) -> Any:
    """``lazy`` with the always-true marker filter on top (Polars' optimiser drops it)."""
    import polars as pl

    return lazy.filter(pl.lit(marker) == pl.lit(marker))


def _visitor(lazy: Any) -> Any:
    import polars as pl

    try:
        ldf = lazy._ldf.with_optimizations(pl.QueryOptFlags.none()._pyoptflags)
        return ldf.visit()
    except Exception as exc:  # an unexpected Polars version: refuse rather than guess
        raise DerivationError(
            "this Polars version does not expose its query plan to dpframe "
            f"({type(exc).__name__}: {exc}); derive frames with frame.dp.filter / "
            "frame.dp.with_columns, or use a supported Polars version"
        ) from None


def _function_name(expr_node: Any) -> str:
    head = expr_node.function_data[0]
    return str(head)


def _view(nt: Any, node_id: int, where: str) -> Any:
    try:
        return nt.view_expression(node_id)
    except Exception as exc:  # e.g. python UDFs (map_batches, map_elements) have no view
        raise DerivationError(
            f"{where}: dpframe cannot read this expression ({type(exc).__name__}: {exc}); "
            "python functions (map_elements, map_batches, ...) can read other rows and are "
            "refused. " + _ALLOWED_NOTE + "Nothing was read or spent."
        ) from None


def _cast_is_safe(source: Any, target: Any) -> bool:
    """A strict cast that no value can make fail: to a float or string type from a numeric,
    boolean or string (to string only) column, or between integer types that widen."""
    import polars as pl

    if target in (pl.Float64, pl.Float32):
        return bool(source.is_numeric()) or source == pl.Boolean
    if target == pl.String:
        return bool(source.is_numeric()) or source in (pl.Boolean, pl.String)
    if source == pl.Boolean and (target.is_integer() or target == pl.Boolean):
        return True  # 0 or 1 fits every integer type
    if source.is_integer() and target.is_integer():
        src_lo, src_hi = _int_range(source)
        dst_lo, dst_hi = _int_range(target)
        return dst_lo <= src_lo and src_hi <= dst_hi
    return source == target


def _int_range(dtype: Any) -> tuple[int, int]:
    import numpy as np

    info = np.iinfo(str(dtype).lower())
    return int(info.min), int(info.max)


def _input_dtype(nt: Any, expr_id: int) -> Any:
    """The dtype of an expression evaluated on the current plan node's *input* (the visitor
    types expressions against the node it stands on, whose output may replace the column)."""
    here = nt.get_node()
    inputs = nt.get_inputs()
    if inputs:
        nt.set_node(inputs[0])
    try:
        return nt.get_dtype(expr_id)
    finally:
        nt.set_node(here)


def _check_expression(nt: Any, node_id: int, where: str) -> bool:
    """Raise :class:`DerivationError` unless the expression rooted at ``node_id`` is row-wise
    and cannot raise on any value; return whether it reads a column (an expression of
    literals only is a single row)."""
    stack = [node_id]
    reads_column = False
    while stack:
        current = stack.pop()
        e = _view(nt, current, where)
        kind = type(e).__name__
        if kind == "Column":
            reads_column = True
            continue
        if kind == "Literal":
            if type(e.value).__name__ in ("PySeries", "PyDataFrame"):
                raise DerivationError(
                    f"{where}: a Series literal brings rows from outside the protected data. "
                    + _ALLOWED_NOTE + "Nothing was read or spent."
                )
            continue
        if kind == "BinaryExpr":
            stack += [e.left, e.right]
        elif kind == "Cast":
            if e.options == 0 and not _cast_is_safe(_input_dtype(nt, e.expr), e.dtype):
                raise DerivationError(
                    f"{where}: a strict cast to {e.dtype} can fail on some values, which would "
                    "make the outcome depend on the data; cast with strict=False (values that "
                    "do not fit become missing) or to Float64/String. Nothing was read or "
                    "spent."
                )
            stack.append(e.expr)
        elif kind == "Ternary":
            stack += [e.predicate, e.truthy, e.falsy]
        elif kind == "Function":
            name = _function_name(e)
            if name in _STRICT_FLAG and e.function_data[1]:
                raise DerivationError(
                    f"{where}: {name!r} with strict=True raises on values it cannot parse, "
                    "which would make the outcome depend on the data; use strict=False "
                    "(unparseable values become missing). Nothing was read or spent."
                )
            if name.startswith(_LITERAL_ARGUMENTS) and any(
                    type(_view(nt, arg, where)).__name__ != "Literal" for arg in e.input[1:]):
                raise DerivationError(
                    f"{where}: {name!r} takes its pattern, length or unit from the data here; "
                    "such arguments can make the function fail or allocate depending on a "
                    "value, so dpframe accepts literal arguments only. Nothing was read or "
                    "spent."
                )
            _check_pattern(nt, e, name, where)
            if name not in ROW_WISE_FUNCTIONS:
                raise DerivationError(
                    f"{where}: {name!r} is not a row-wise function (it can read other rows, "
                    "or dpframe has not verified it). " + _ALLOWED_NOTE
                    + "Aggregates, windows (over), shift, cumulative, rank, fill strategies, "
                    "unique and sampling are refused. Nothing was read or spent."
                )
            stack += list(e.input)
        else:
            what = {
                "Agg": "an aggregation", "Window": "a window (over)", "Len": "len()",
                "Sort": "a sort", "SortBy": "a sort", "Gather": "a gather", "Filter":
                "a filter inside an expression", "Slice": "a slice (head/tail)",
            }.get(kind, f"a {kind} expression")
            raise DerivationError(
                f"{where}: {what} reads other rows of the data. " + _ALLOWED_NOTE
                + "Compute such values from released statistics instead. Nothing was read or "
                "spent."
            )
    return reads_column


#: Regex-taking string functions and the index of their ``literal`` flag in ``function_data``.
_REGEX_LITERAL_FLAG = {"StringFunction.Contains": 1, "StringFunction.Find": 1,
                       "StringFunction.CountMatches": 1, "StringFunction.Replace": 2}


def _check_pattern(nt: Any, e: Any, name: str, where: str) -> None:
    """A literal regex pattern that does not compile fails on every row, but not on an empty
    frame: compile it here (with Polars' own regex engine), so the refusal does not wait for
    data."""
    flag = _REGEX_LITERAL_FLAG.get(name)
    if flag is None or e.function_data[flag] or len(e.input) < 2:
        return
    pattern = _view(nt, e.input[1], where)
    if type(pattern).__name__ != "Literal" or not isinstance(pattern.value, str):
        return
    import polars as pl

    try:
        pl.Series([""], dtype=pl.String).str.contains(pattern.value)
    except Exception as exc:
        raise DerivationError(
            f"{where}: the regular expression {pattern.value!r} does not compile ({exc}); fix "
            "it or pass literal=True. Nothing was read or spent."
        ) from None


def _copied_column(nt: Any, node_id: int) -> str | None:
    """The input column an output copies (bare reference or a cast of one), else None."""
    e = _view(nt, node_id, "select")
    while type(e).__name__ == "Cast":
        e = _view(nt, e.expr, "select")
    return str(e.name) if type(e).__name__ == "Column" else None


def _is_cast(nt: Any, node_id: int) -> bool:
    return type(_view(nt, node_id, "select")).__name__ == "Cast"


def _marker_of(nt: Any, predicate_id: int) -> str | None:
    try:
        e = nt.view_expression(predicate_id)
        if type(e).__name__ != "BinaryExpr" or str(e.op) != "Operator.Eq":
            return None
        left, right = nt.view_expression(e.left), nt.view_expression(e.right)
    except Exception:  # an expression dpframe cannot read is no marker
        return None
    if type(left).__name__ != "Literal" or type(right).__name__ != "Literal":
        return None
    value = left.value
    if isinstance(value, str) and value.startswith(MARKER_PREFIX) and right.value == value:
        return value
    return None


def walk_lazy_plan(lazy: Any) -> tuple[str, list[Step], str]:
    """Walk ``lazy``'s plan down to its nearest dpframe marker.

    Returns the marker, the verified steps above it (bottom-up) and the signature of the plan
    beneath the marker (:func:`plan_signature`), which the caller compares with the one
    recorded when the marker was made — a copied marker on another plan does not vouch for it.
    Raises :class:`DerivationError` at the first node that is not row-wise, and
    :class:`NoLedgerError` when the plan reaches its source without a marker (no protected
    root). Reads the plan only.
    """
    nt = _visitor(lazy)
    steps: list[Step] = []
    while True:
        node = nt.view_current_node()
        kind = type(node).__name__
        if kind in _SOURCES:
            raise NoLedgerError(
                "this LazyFrame does not derive from a protected frame (its plan reaches its "
                "source without passing through dpf.protect); protect the data first with "
                "dpf.protect(frame, epsilon=..., bounds=...). Nothing was read or spent."
            )
        if kind == "Filter":
            marker = _marker_of(nt, node.predicate.node)
            if marker is not None:
                steps.reverse()
                nt.set_node(nt.get_inputs()[0])
                return marker, steps, _signature(nt)
            _check_expression(nt, node.predicate.node, "filter")
            steps.append(Step("filter"))
        elif kind in ("HStack", "Select"):
            verb = "with_columns" if kind == "HStack" else "select"
            outputs: dict[str, str | None] = {}
            casts = set()
            reads = False
            for expr in node.exprs if kind == "HStack" else node.expr:
                name = str(expr.output_name)
                reads = _check_expression(nt, expr.node, f"{verb}({name!r})") or reads
                outputs[name] = _copied_column(nt, expr.node)
                if outputs[name] is not None and _is_cast(nt, expr.node):
                    casts.add(name)
            if kind == "Select" and not reads:
                raise DerivationError(
                    "select(): no output reads a column, so the result is a single row made of "
                    "literals, not one row per input row. " + _ALLOWED_NOTE
                    + "Nothing was read or spent."
                )
            steps.append(Step(verb, outputs, frozenset(casts)))
        elif kind == "SimpleProjection":
            schema = nt.get_schema()
            steps.append(Step("select", {str(c): str(c) for c in schema}))
        else:
            raise DerivationError(_refused_node(kind))
        inputs = nt.get_inputs()
        if len(inputs) != 1:  # pragma: no cover - every accepted node has one input
            raise DerivationError(_refused_node(kind))
        nt.set_node(inputs[0])


_SOURCES = frozenset({"Scan", "DataFrameScan", "PythonScan"})

_NODE_NAMES = {
    "Join": "a join (it can pair one row with several)",
    "Union": "a concat (it can repeat rows)",
    "HConcat": "a horizontal concat",
    "GroupBy": "a group_by/agg (its rows mix many input rows)",
    "Distinct": "unique() (whether a row is kept depends on other rows)",
    "Sort": "a sort",
    "Slice": "a slice (head/tail/limit depends on other rows)",
    "MapFunction": "an explode/unpivot/row-index/python map",
    "Cache": "a cache",
    "ExtContext": "an extra context",
    "Sink": "a sink",
}


def _refused_node(kind: str) -> str:
    what = _NODE_NAMES.get(kind, f"a {kind} step")
    return (
        f"the derived LazyFrame contains {what}, which dpframe cannot verify to be row-wise. "
        + _ALLOWED_NOTE + "Nothing was read or spent."
    )


def verify_expressions(schema: Any, exprs: Iterable[Any], verb: str
                       ) -> tuple[list[Step], dict[str, Any]]:
    """Verify ``exprs`` (narwhals or Polars expressions) for ``verb`` (``"filter"`` or
    ``"with_columns"``) against a frame with the Polars ``schema``, without any data: the
    expressions are applied to an empty LazyFrame and its plan is walked. Returns the steps
    and the output schema (Polars dtypes): the dtypes the derived columns must have, whatever
    the values."""
    import narwhals as nw
    import polars as pl

    exprs = list(exprs)
    if not exprs:
        raise DerivationError(f"dp.{verb}() needs at least one expression")
    empty = add_marker(pl.LazyFrame(schema=schema), MARKER_PREFIX + "empty")
    try:
        if all(isinstance(e, pl.Expr) for e in exprs):
            derived = getattr(empty, verb)(*exprs)
        elif all(isinstance(e, nw.Expr) for e in exprs):
            derived = getattr(nw.from_native(empty), verb)(*exprs).to_native()
        else:
            raise DerivationError(
                f"dp.{verb}() takes narwhals expressions (import narwhals as nw; "
                "nw.col('age') >= 65) or, on Polars frames, Polars expressions; got "
                + ", ".join(type(e).__name__ for e in exprs)
            )
        out_schema = dict(derived.collect_schema().items())
    except DerivationError:
        raise
    except Exception as exc:
        raise DerivationError(
            f"dp.{verb}() refused: {exc}. " + _ALLOWED_NOTE + "Nothing was read or spent."
        ) from None
    _marker, steps, _sig = walk_lazy_plan(derived)
    return steps, out_schema


def _all_nodes(lazy: Any) -> Iterable[tuple[Any, Any]]:
    """Every node of ``lazy``'s plan (depth first) with the visitor positioned on it."""
    nt = _visitor(lazy)
    stack = [nt.get_node()]
    while stack:
        nt.set_node(stack.pop())
        node = nt.view_current_node()
        yield nt, node
        stack.extend(nt.get_inputs())


def plan_markers(lazy: Any) -> set[str]:
    """Every dpframe marker anywhere in ``lazy``'s plan (is it derived from protected data?)."""
    found = set()
    for nt, node in _all_nodes(lazy):
        if type(node).__name__ == "Filter":
            marker = _marker_of(nt, node.predicate.node)
            if marker is not None:
                found.add(marker)
    return found


def plan_sources(lazy: Any) -> tuple[list[str], bool]:
    """The file paths (or glob patterns) ``lazy`` scans, and whether it also reads a source
    that is neither a file nor an in-memory frame (e.g. a Python or pyarrow-dataset scan)."""
    paths: list[str] = []
    other = False
    for _nt, node in _all_nodes(lazy):
        kind = type(node).__name__
        if kind == "Scan":
            paths.extend(str(p) for p in (node.paths or []))
        elif kind == "PythonScan":
            other = True
    return paths, other


#: Attributes of plan and expression nodes that point at other expression nodes.
_CHILDREN = ("left", "right", "expr", "input", "predicate", "truthy", "falsy", "function",
             "partition_by", "order_by", "by", "idx", "arguments", "offset", "length")


def plan_signature(lazy: Any) -> str:
    """A canonical description of ``lazy``'s whole plan: node kinds, schemas, expressions,
    scanned paths, and for in-memory frames their shape and the address of their first numeric
    buffer (their identity while they live; Polars frames are immutable). Computed from the
    plan only; equal for two visits of one plan."""
    nt = _visitor(lazy)
    return _signature(nt)


def _signature(nt: Any) -> str:
    parts: list[str] = []
    stack = [nt.get_node()]
    while stack:
        nt.set_node(stack.pop())
        node = nt.view_current_node()
        kind = type(node).__name__
        parts.append(f"<{kind} {sorted((str(k), str(v)) for k, v in nt.get_schema().items())}")
        for attr in sorted(a for a in dir(node) if not a.startswith("_")):
            value = getattr(node, attr)
            if attr == "df":
                parts.append(f"df={_frame_identity(value)}")
            elif attr in ("input", "inputs"):
                continue
            else:
                parts.append(f"{attr}={_describe(nt, value)}")
        parts.append(">")
        stack.extend(nt.get_inputs())
    return "".join(parts)


def _frame_identity(pydf: Any) -> str:
    """The identity of an in-memory frame in a plan: its height and, for every column and
    chunk, the addresses, offset and length of its Arrow buffers (validity, data, offsets;
    categoricals through their physical codes). Read without copying; two frames share it only
    if they share every buffer, and the registry keeps the protected frames alive so their
    addresses cannot be reused by other data."""
    import polars as pl
    from polars import CompatLevel

    frame = pl.DataFrame._from_pydf(pydf)
    parts: list[str] = [str(frame.height)]
    for series in frame.iter_columns():
        if series.dtype == pl.Categorical or isinstance(series.dtype, pl.Enum):
            series = series.to_physical()
        for chunk in series.get_chunks():
            arr = chunk.to_arrow(compat_level=CompatLevel.newest())
            addresses = ",".join(str(b.address) if b is not None else "0"
                                 for b in arr.buffers())
            parts.append(f"{series.name}:{arr.offset}:{len(arr)}:{addresses}")
    return "|".join(parts)


def _describe(nt: Any, value: Any) -> str:
    """A value of a plan node: expressions (PyExprIR) are described recursively."""
    if type(value).__name__ == "PyExprIR":
        return f"{value.output_name}:{_expression(nt, value.node)}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_describe(nt, v) for v in value) + "]"
    text = str(value)
    return "?" if " at 0x" in text else text  # an opaque object: no stable description


def _expression(nt: Any, node_id: int) -> str:
    try:
        e = nt.view_expression(node_id)
    except Exception:
        return "<opaque>"
    kind = type(e).__name__
    fields = []
    for attr in sorted(a for a in dir(e) if not a.startswith("_")):
        value = getattr(e, attr)
        if attr in _CHILDREN and isinstance(value, int):
            fields.append(f"{attr}={_expression(nt, value)}")
        elif attr in _CHILDREN and isinstance(value, list):
            fields.append(f"{attr}=[{','.join(_expression(nt, v) for v in value)}]")
        elif type(value).__name__ in ("PySeries", "PyDataFrame"):
            fields.append(f"{attr}=series@{id(value)}")  # never equal twice: fail closed
        else:
            text = str(value)
            fields.append(f"{attr}={'?' if ' at 0x' in text else text}")
    return f"{kind}({';'.join(fields)})"
