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
``lit(True) | (lit("dpframe:<id>") == lit(<anchor>))``, always true, removed by Polars'
optimiser — and the verifier walks down the plan to the nearest marker, checking every node
above it. The anchor is a one-value Series literal holding the marker, whose memory keeps
dpframe's record of the marker alive (:func:`backends.polars._memory.anchored_series`): the record
lives exactly as long as some plan that carries the marker, and nothing of it outlives the last such
plan.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dpframe._util.forking import check_polars_usable
from dpframe._util.polars_plan import all_nodes, visitor
from dpframe.backends import apply_step, arrow_chunks
from dpframe.errors import DerivationError, NoLedgerError
from dpframe.rowwise.functions import FUNCTIONS
from dpframe.rowwise.nodes import Cast, Col, RowExpr, walk
from dpframe.rowwise.reading import ALLOWED_NOTE, PolarsDtype, read_expression, sample_value

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "MARKER_PREFIX",
    "ROW_WISE_FUNCTIONS",
    "Step",
    "add_marker",
    "new_marker",
    "plan_markers",
    "plan_signature",
    "verify_expressions",
    "walk_lazy_plan",
]

MARKER_PREFIX = "dpframe:"

#: Element-wise functions as they appear in Polars' plan (``Function`` nodes): the plain names
#: and the namespaced enum members. Each maps one row's values to one value of that row; what
#: each computes, in every engine, is in :mod:`dpframe.rowwise.functions`.
ROW_WISE_FUNCTIONS = frozenset(FUNCTIONS)

_ALLOWED_NOTE = ALLOWED_NOTE


@dataclass(frozen=True)
class Step:
    """One verified plan step, bottom-up: ``kind`` is ``"filter"``, ``"with_columns"`` or
    ``"select"``; ``outputs`` maps each output column to the input column it copies (a bare
    column reference or a cast of one; bounds carry over) or to None (a computed value);
    ``casts``: the outputs that copy through a cast (not value for value: a privacy-unit id
    cannot follow them). ``predicate`` (filters) and ``columns`` (the other kinds: each output
    name with its expression, in order) are the verified trees dpframe compiles for the
    frame's engine: what runs on the data is built from them, never the user's objects."""

    kind: str
    outputs: dict[str, str | None] = field(default_factory=dict)
    casts: frozenset[str] = frozenset()
    predicate: RowExpr | None = field(default=None, compare=False)
    columns: tuple[tuple[str, RowExpr], ...] = field(default=(), compare=False)

    @classmethod
    def copying(cls, outputs: dict[str, str], schema: Mapping[str, PolarsDtype]) -> Step:
        """A ``select`` of existing columns, renamed as ``outputs`` says (new -> old)."""
        return cls("select", dict(outputs), columns=tuple(
            (new, Col(schema[old], old)) for new, old in outputs.items()))


def new_marker() -> str:
    """A fresh random marker id (128 bits)."""
    return MARKER_PREFIX + secrets.token_hex(16)


def add_marker(lazy: pl.LazyFrame, marker: str, anchor: pl.Series | None = None
               ) -> pl.LazyFrame:
    """``lazy`` with the always-true marker filter on top. ``anchor``: a one-value String Series
    holding ``marker`` to use as the right-hand side (the plan then holds it, and what its
    memory keeps alive); without it, a plain literal (Polars' optimiser drops that filter)."""
    import polars as pl

    if anchor is None:
        return lazy.filter(pl.lit(marker) == pl.lit(marker))
    # ``True | ...``: still always true, and Polars' optimiser still drops the whole filter
    return lazy.filter(pl.lit(True) | (pl.lit(marker) == pl.lit(anchor)))


def _copied_column(expr: RowExpr) -> str | None:
    """The input column an output copies (bare reference or a cast of one), else None."""
    while isinstance(expr, Cast):
        expr = expr.expr
    return expr.name if isinstance(expr, Col) else None


def _reads_column(expr: RowExpr) -> bool:
    return any(isinstance(node, Col) for node in walk(expr))


def _marker_of(nt: Any, predicate_id: int) -> str | None:
    """The marker a filter predicate is: ``lit(m) == lit(m)``, or (anchored)
    ``lit(True) | (lit(m) == lit(Series([m])))``; else None."""
    try:
        e = nt.view_expression(predicate_id)
        if type(e).__name__ == "BinaryExpr" and str(e.op) in ("Operator.Or", "Operator.LogicalOr"):
            first = nt.view_expression(e.left)
            if type(first).__name__ != "Literal" or first.value is not True:
                return None
            e = nt.view_expression(e.right)
        if type(e).__name__ != "BinaryExpr" or str(e.op) != "Operator.Eq":
            return None
        left, right = nt.view_expression(e.left), nt.view_expression(e.right)
    except Exception:  # an expression dpframe cannot read is no marker
        return None
    if type(left).__name__ != "Literal" or type(right).__name__ != "Literal":
        return None
    value = left.value
    if isinstance(value, str) and value.startswith(MARKER_PREFIX) and _literal_text(
            right.value) == value:
        return value
    return None


#: a frame without columns is refused (from its schema, a public fact): Polars gives such a
#: frame no rows, so its count would silently be 0
NO_COLUMNS = ("this frame has no columns left; Polars (and so dpframe) cannot keep a row count "
              "without a column, so a count of it would be wrong. Keep at least one column. "
              "Nothing was read or spent.")

def _literal_text(value: Any) -> Any:
    """A literal's value; for a one-value String Series literal (an anchored marker), its text."""
    if type(value).__name__ != "PySeries":
        return value
    import polars as pl

    series = pl.Series._from_pyseries(value)
    if len(series) != 1 or series.dtype != pl.String:
        return None
    return series.item()


def walk_lazy_plan(lazy: pl.LazyFrame, origin: str = "polars") -> tuple[str, list[Step], str]:
    """Walk ``lazy``'s plan down to its nearest dpframe marker.

    Returns the marker, the verified steps above it (bottom-up) and the signature of the plan
    beneath the marker (:func:`plan_signature`), which the caller compares with the one
    recorded when the marker was made — a copied marker on another plan does not vouch for it.
    Raises :class:`DerivationError` at the first node that is not row-wise, and
    :class:`NoLedgerError` when the plan reaches its source without a marker (no protected
    root). Reads the plan only.
    """
    nt = visitor(lazy)
    if not nt.get_schema():
        raise DerivationError(NO_COLUMNS)
    steps: list[Step] = []
    while True:
        node = nt.view_current_node()
        kind = type(node).__name__
        if kind == "Filter":
            marker = _marker_of(nt, node.predicate.node)
            if marker is not None:
                return _at_marker(nt, marker, steps)
        steps.append(_step_of(nt, node, kind, origin))
        inputs = nt.get_inputs()
        if len(inputs) != 1:  # pragma: no cover - every accepted node has one input
            raise DerivationError(_refused_node(kind))
        nt.set_node(inputs[0])


def _at_marker(nt: Any, marker: str, steps: list[Step]) -> tuple[str, list[Step], str]:
    """The walk's end at a marker's filter: the steps above it bottom-up (probed on the schema
    beneath the marker) and the signature of the plan beneath it."""
    steps.reverse()
    nt.set_node(nt.get_inputs()[0])
    if steps:
        probe_steps(dict(nt.get_schema()), steps)
    return marker, steps, _signature(nt)


def _step_of(nt: Any, node: Any, kind: str, origin: str) -> Step:
    """The verified step of one plan node (not a marker's filter), by its kind
    (:data:`_NODE_STEPS`); a source without a marker, or a node that is not row-wise, is
    refused."""
    read = _NODE_STEPS.get(kind)
    if read is not None:
        return read(nt, node, origin)
    if kind in _SOURCES:
        raise NoLedgerError(
            "this LazyFrame does not derive from a protected frame: its plan reaches its "
            "source without passing through a frame returned by dpf.protect, so it has no "
            "privacy budget. Build derived LazyFrames from the protected LazyFrame itself "
            "(lf.filter(...), lf.with_columns(...), lf.dp.filter(...)). Nothing was read or "
            "spent."
        )
    raise DerivationError(_refused_node(kind))


def _filter_step(nt: Any, node: Any, origin: str) -> Step:
    predicate = read_expression(nt, node.predicate.node, "filter", origin=origin)
    return Step("filter", predicate=predicate)


def _projection_step(nt: Any, node: Any, origin: str) -> Step:
    """``with_columns`` (an ``HStack`` node) or ``select`` (a ``Select`` node): each output's
    verified tree, which outputs copy a column (and which of those copies are casts); a select
    none of whose outputs reads a column (one row of literals) is refused."""
    stacked = type(node).__name__ == "HStack"
    verb = "with_columns" if stacked else "select"
    outputs: dict[str, str | None] = {}
    casts = set()
    columns: list[tuple[str, RowExpr]] = []
    for expr in node.exprs if stacked else node.expr:
        name = str(expr.output_name)
        tree = read_expression(nt, expr.node, f"{verb}({name!r})", origin=origin)
        columns.append((name, tree))
        outputs[name] = _copied_column(tree)
        if outputs[name] is not None and isinstance(tree, Cast):
            casts.add(name)
    if not stacked and not any(_reads_column(t) for _, t in columns):
        raise DerivationError(
            "select(): no output reads a column, so the result is a single row made of "
            "literals, not one row per input row. " + _ALLOWED_NOTE
            + "Nothing was read or spent."
        )
    return Step(verb, outputs, frozenset(casts), columns=tuple(columns))


def _projection_copy(nt: Any, node: Any, origin: str) -> Step:
    """A ``SimpleProjection``: the columns kept, each a copy of itself."""
    schema = nt.get_schema()
    return Step.copying({str(c): str(c) for c in schema}, dict(schema))


#: How each row-wise node kind of a Polars plan becomes a step.
_NODE_STEPS: dict[str, Callable[[Any, Any, str], Step]] = {
    "Filter": _filter_step,
    "HStack": _projection_step,
    "Select": _projection_step,
    "SimpleProjection": _projection_copy,
}


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


def verify_expressions(schema: Mapping[str, PolarsDtype], exprs: Iterable[object],
                       verb: str) -> tuple[list[Step], dict[str, pl.DataType]]:
    """Verify ``exprs`` (narwhals or Polars expressions; anything else is refused) for ``verb``
    (``"filter"`` or ``"with_columns"``) against a frame with the Polars ``schema``, without any
    data: the expressions are applied to an empty LazyFrame and its plan is walked. Returns the
    steps and the output schema (Polars dtypes): the dtypes the derived columns must have,
    whatever the values."""
    import narwhals as nw
    import polars as pl

    check_polars_usable()  # verification runs on Polars (a fork child of one that ran it hangs)
    exprs = list(exprs)
    if not exprs:
        raise DerivationError(f"dp.{verb}() needs at least one expression")
    empty = add_marker(pl.LazyFrame(schema=schema), MARKER_PREFIX + "empty")
    origin = "polars"
    try:
        if all(isinstance(e, pl.Expr) for e in exprs):
            derived = getattr(empty, verb)(*exprs)
        elif all(isinstance(e, nw.Expr) for e in exprs):
            origin = "narwhals"
            derived = getattr(nw.from_native(empty), verb)(*exprs).to_native()
        else:
            raise DerivationError(
                f"dp.{verb}() takes narwhals expressions (import narwhals as nw; "
                "nw.col('age') >= 65) or, on Polars frames, Polars expressions; got "
                + ", ".join(type(e).__name__ for e in exprs)
            )
        derived.collect_schema()  # a type error surfaces here, from the schema alone
    except DerivationError:
        raise
    except Exception as exc:
        raise DerivationError(
            f"dp.{verb}() refused: {exc}. " + _ALLOWED_NOTE + "Nothing was read or spent."
        ) from None
    _marker, steps, _sig = walk_lazy_plan(derived, origin)
    return steps, compiled_schema(schema, steps)


#: One public value per kind of dtype for :func:`probe_steps` (next to a missing value).
_PROBED: dict[str, bool] = {}
_PROBED_LOCK = threading.Lock()


def probe_steps(schema: Mapping[str, PolarsDtype], steps: Sequence[Step]) -> None:
    """Run dpframe's compilation of ``steps`` on two public rows (one typical value of each
    column's dtype, and missing values): an operation Polars supports for no value of a type
    (``dt.hour()`` of a Date, a String cast to Boolean) fails here, before any data is read,
    instead of on the first real row. Value-dependent failures are the compilers' business
    (they cannot happen); this catches the type-level ones. Cached per plan."""
    import polars as pl


    key = repr((sorted((str(k), str(v)) for k, v in dict(schema).items()),
                [(s.kind, s.predicate, s.columns) for s in steps]))
    with _PROBED_LOCK:
        if key in _PROBED:
            return
    frame = pl.DataFrame({name: pl.Series(name, [sample_value(dtype), None], dtype=dtype,
                                          strict=False)
                          for name, dtype in dict(schema).items()})
    try:
        for step in steps:
            frame = apply_step(frame, step.kind, step.predicate, step.columns)
    except BaseException as exc:
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise DerivationError(
            f"this derivation fails in Polars on any value of its columns' types "
            f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}); "
            + _ALLOWED_NOTE + "Nothing was read or spent."
        ) from None
    with _PROBED_LOCK:
        if len(_PROBED) > 4096:
            _PROBED.clear()
        _PROBED[key] = True


def compiled_schema(schema: Mapping[str, PolarsDtype], steps: Iterable[Step]
                    ) -> dict[str, pl.DataType]:
    """The Polars schema of ``steps`` as dpframe compiles them, applied to a frame with
    ``schema`` (no data): the dtypes derived columns have whatever the values (``**`` is
    Float64 even on integers, for example)."""
    import polars as pl


    frame = pl.LazyFrame(schema=schema)
    for step in steps:
        frame = apply_step(frame, step.kind, step.predicate, step.columns)
    return dict(frame.collect_schema().items())


def plan_markers(lazy: pl.LazyFrame) -> set[str]:
    """Every dpframe marker anywhere in ``lazy``'s plan (is it derived from protected data?)."""
    found = set()
    for nt, node in all_nodes(lazy):
        if type(node).__name__ == "Filter":
            marker = _marker_of(nt, node.predicate.node)
            if marker is not None:
                found.add(marker)
    return found


#: Attributes of plan and expression nodes that point at other expression nodes.
_CHILDREN = ("left", "right", "expr", "input", "predicate", "truthy", "falsy", "function",
             "partition_by", "order_by", "by", "idx", "arguments", "offset", "length")


def plan_signature(lazy: pl.LazyFrame) -> str:
    """A canonical description of ``lazy``'s whole plan: node kinds, schemas, expressions,
    scanned paths, and for in-memory frames their shape and the address of their first numeric
    buffer (their identity while they live; Polars frames are immutable). Computed from the
    plan only; equal for two visits of one plan."""
    nt = visitor(lazy)
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

    frame = pl.DataFrame._from_pydf(pydf)
    parts: list[str] = [str(frame.height)]
    for series, arr in arrow_chunks(frame):
        addresses = ",".join(str(b.address) if b is not None else "0" for b in arr.buffers())
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
