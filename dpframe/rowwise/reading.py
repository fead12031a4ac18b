"""Reading one expression of a Polars plan into a verified :class:`~dpframe.rowwise.nodes.RowExpr`.

The expression is read node by node through Polars' plan visitor; every node must be on the
row-wise allow-list (:data:`dpframe.rowwise.functions.FUNCTIONS`, :data:`OPERATORS`) and take
its arguments in a form that no value can make fail (literal patterns that compile, literal
widths under the public cap, no arithmetic Polars cannot check row by row). Anything else is a
:class:`~dpframe.errors.DerivationError`, raised before any data is read. Reading is the same
for every engine; which functions an engine can run is checked when the tree is compiled for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from dpframe.errors import DerivationError
from dpframe.rowwise.functions import FUNCTIONS, MAX_WIDTH, OPERATORS
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When

if TYPE_CHECKING:
    import polars as pl
    from polars.datatypes import DataTypeClass

__all__ = ["ALLOWED_NOTE", "PolarsDtype", "read_expression", "sample_value"]

#: A Polars dtype as schemas hold it: an instance (``pl.Datetime("us")``) or a class
#: (``pl.Int64``, whose type is Polars' ``DataTypeClass``).
PolarsDtype: TypeAlias = "pl.DataType | DataTypeClass"

ALLOWED_NOTE = (
    "dpframe answers derived frames only when it can verify from their structure that every "
    "row comes from one row of the protected data: filters with row-wise predicates, "
    "row-wise new or replaced columns, select / drop / rename / cast. "
)
_NOTHING = "Nothing was read or spent."

#: Functions taking a width that is capped, and the index of the width among their inputs.
_WIDTHS = {"StringFunction.ZFill": 1, "StringFunction.PadStart": 1,
           "StringFunction.PadEnd": 1}
#: Regex-taking string functions and the index of their ``literal`` flag in ``function_data``.
_REGEX_LITERAL_FLAG = {"StringFunction.Contains": 1, "StringFunction.Find": 1,
                       "StringFunction.CountMatches": 1, "StringFunction.Replace": 2}
#: Functions with a ``strict`` flag (``function_data[1]``) that raise when it is set.
_STRICT_FLAG = frozenset({"StringFunction.ToInteger"})
#: Arithmetic operators: checked on integers, refused on operands no engine can check.
ARITHMETIC = frozenset({"Plus", "Minus", "Multiply", "TrueDivide", "FloorDivide", "Modulus"})
_ROUND_SIG_MAX = 300
_FLOAT16 = "Float16"
#: Functions exact on Float16 values (tests of the value; no arithmetic).
_FLOAT16_SAFE = frozenset({"BooleanFunction.IsNull", "BooleanFunction.IsNotNull",
                           "BooleanFunction.IsNan", "BooleanFunction.IsNotNan",
                           "BooleanFunction.IsFinite", "BooleanFunction.IsInfinite",
                           "fill_null", "coalesce"})
_FLOAT16_NOTE = ("arithmetic and functions on Float16 values are not exact in every engine "
                 "(Polars rounds some results wrongly); cast the column to Float32 or Float64 "
                 "first. Comparisons, casts and null tests of Float16 values are accepted.")


def read_expression(nt: Any, node_id: int, where: str, *, origin: str = "polars") -> RowExpr:
    """The verified tree of the expression ``node_id`` of the visitor's current plan node.

    ``origin``: ``"polars"`` for Polars expressions and native plans (a strict cast that can
    fail is refused: the user asked for an error on some values), ``"narwhals"`` for narwhals
    expressions (narwhals casts have no strictness; dpframe compiles them non-strict). Types are
    read against the node's *input* schema, where the expression is evaluated."""
    here = nt.get_node()
    inputs = nt.get_inputs()
    if inputs:
        nt.set_node(inputs[0])
    try:
        return _Reader(nt, where, origin).read(node_id)
    finally:
        nt.set_node(here)


class _Reader:
    def __init__(self, nt: Any, where: str, origin: str) -> None:
        self.nt = nt
        self.where = where
        self.origin = origin

    def refuse(self, what: str) -> DerivationError:
        return DerivationError(f"{self.where}: {what} {_NOTHING}")

    def view(self, node_id: int) -> Any:
        try:
            return self.nt.view_expression(node_id)
        except Exception as exc:  # e.g. python UDFs (map_elements, map_batches) have no view
            raise DerivationError(
                f"{self.where}: dpframe cannot read this expression ({type(exc).__name__}); "
                "python functions (map_elements, map_batches, ...) can read other rows and are "
                "refused. " + ALLOWED_NOTE + _NOTHING
            ) from None

    def dtype(self, node_id: int) -> Any:
        return self.nt.get_dtype(node_id)

    def read(self, node_id: int) -> RowExpr:
        e = self.view(node_id)
        kind = type(e).__name__
        dtype = self.dtype(node_id)
        if kind == "Column":
            import polars as pl

            if dtype in (pl.Unknown, pl.Object):
                raise self.refuse(f"column {str(e.name)!r} has a dtype dpframe cannot read in "
                                  "derivations (it maps to no Polars type); cast or convert it "
                                  "before protecting.")
            return Col(dtype, str(e.name))
        if kind == "Literal":
            if type(e.value).__name__ in ("PySeries", "PyDataFrame"):
                raise self.refuse("a Series literal brings rows from outside the protected "
                                  "data. " + ALLOWED_NOTE)
            return Lit(dtype, e.value)
        if kind == "BinaryExpr":
            return self.binary(e, dtype)
        if kind == "Cast":
            _check_cast_exists(self.dtype(e.expr), e.dtype, self)
            if self.origin == "polars" and e.options == 0 and not _cast_is_safe(
                    self.dtype(e.expr), e.dtype):
                raise self.refuse(
                    f"a strict cast to {e.dtype} can fail on some values, which would make the "
                    "outcome depend on the data; cast with strict=False (values that do not "
                    "fit become missing) or to Float64/String."
                )
            return Cast(dtype, self.read(e.expr))
        if kind == "Ternary":
            return When(dtype, self.read(e.predicate), self.read(e.truthy),
                        self.read(e.falsy))
        if kind == "Function":
            return self.function(e, dtype)
        what = {
            "Agg": "an aggregation", "Window": "a window (over)", "Len": "len()",
            "Sort": "a sort", "SortBy": "a sort", "Gather": "a gather",
            "Filter": "a filter inside an expression", "Slice": "a slice (head/tail)",
        }.get(kind, f"a {kind} expression")
        raise self.refuse(f"{what} reads other rows of the data. " + ALLOWED_NOTE
                          + "Compute such values from released statistics instead.")

    def binary(self, e: Any, dtype: Any) -> RowExpr:
        op = str(e.op).rsplit(".", 1)[-1]
        if op not in OPERATORS:
            raise self.refuse(f"the operator {op!r} is not on dpframe's row-wise list.")
        left, right = self.read(e.left), self.read(e.right)
        if op in ARITHMETIC and _FLOAT16 in (str(left.dtype), str(right.dtype), str(dtype)):
            raise self.refuse(_FLOAT16_NOTE)
        if op in ARITHMETIC:
            _check_arithmetic(op, left, right, dtype, self)
        return Binary(dtype, op, left, right)

    def function(self, e: Any, dtype: Any) -> RowExpr:
        data = tuple(e.function_data)
        name = str(data[0])
        if name not in FUNCTIONS:
            raise self.refuse(
                f"{name!r} is not a row-wise function (it can read other rows, or dpframe has "
                "not verified it). " + ALLOWED_NOTE + "Aggregates, windows (over), shift, "
                "cumulative, rank, fill strategies, unique and sampling are refused."
            )
        spec = FUNCTIONS[name]
        if name in _STRICT_FLAG and data[1]:
            raise self.refuse(
                f"{name!r} with strict=True raises on values it cannot parse, which would make "
                "the outcome depend on the data; use strict=False (unparseable values become "
                "missing)."
            )
        args = tuple(self.read(i) for i in e.input)
        if name not in _FLOAT16_SAFE and _FLOAT16 in {str(a.dtype) for a in args} | {
                str(dtype)}:
            raise self.refuse(_FLOAT16_NOTE)
        if spec.literal_args and any(not isinstance(a, Lit) for a in args[1:]):
            raise self.refuse(
                f"{name!r} takes its pattern, length, table or unit from the data here; such "
                "arguments can make the function fail or allocate depending on a value, so "
                "dpframe accepts literal arguments only."
            )
        self.check_arguments(name, args, data)
        return Call(dtype, name, args, data[1:])

    def check_arguments(self, name: str, args: tuple[RowExpr, ...], data: tuple[Any, ...]
                        ) -> None:
        """Literal arguments whose value alone would make the function fail on some rows: the
        function's own check (:data:`_ARGUMENT_CHECKS`), then its regex pattern's, if any."""
        check = _ARGUMENT_CHECKS.get(name)
        if check is not None:
            check(self, name, args, data)
        flag = _REGEX_LITERAL_FLAG.get(name)
        if flag is not None and not data[flag]:
            pattern = args[1]
            assert isinstance(pattern, Lit)
            _check_pattern(pattern.value, self)


def _check_width(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                 data: tuple[Any, ...]) -> None:
    width = args[_WIDTHS[name]]
    assert isinstance(width, Lit)
    if not isinstance(width.value, int) or not 0 <= width.value <= MAX_WIDTH:
        raise reader.refuse(f"{name!r} pads to a width of at most {MAX_WIDTH} "
                            f"characters (a public cap); got {width.value!r}.")


def _check_sig_figs(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                    data: tuple[Any, ...]) -> None:
    digits = data[1]
    if not isinstance(digits, int) or not 1 <= digits <= _ROUND_SIG_MAX:
        raise reader.refuse(f"round_sig_figs takes 1 to {_ROUND_SIG_MAX} significant "
                            f"digits; got {digits!r}.")


def _check_clip(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                data: tuple[Any, ...]) -> None:
    _check_clip_bounds(args, reader)


def _check_horizontal(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                      data: tuple[Any, ...]) -> None:
    for a in args:
        _check_plain_number(FUNCTIONS[name].api, value_dtype(a), reader)
        _check_number(name, value_dtype(a), reader)


def _check_list_sum(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                    data: tuple[Any, ...]) -> None:
    inner = getattr(args[0].dtype, "inner", None)
    _check_plain_number(FUNCTIONS[name].api, inner, reader, " elements")
    _check_number(name, inner, reader)


def _check_list_extreme(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                        data: tuple[Any, ...]) -> None:
    inner = getattr(args[0].dtype, "inner", None)
    if inner is None or inner.is_nested():
        raise reader.refuse(f"{FUNCTIONS[name].api} of {inner} elements fails in Polars "
                            "on every non-empty list; compare flat values only.")


def _check_truncation(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                      data: tuple[Any, ...]) -> None:
    if getattr(args[0].dtype, "time_zone", None):
        raise reader.refuse(
            f"{FUNCTIONS[name].api} of a datetime with a time zone can land on a local "
            "time that does not exist (a daylight-saving gap) and fail there; truncate "
            "datetimes without a time zone.")
    _check_every(args, name, reader)


def _check_decimal_rounding(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                            data: tuple[Any, ...]) -> None:
    if str(args[0].dtype).startswith("Decimal"):
        raise reader.refuse(f"{FUNCTIONS[name].api} of a Decimal can overflow its precision "
                            "on some values; cast to Float64 first.")


def _check_base(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                data: tuple[Any, ...]) -> None:
    base = args[1]
    assert isinstance(base, Lit)
    if not isinstance(base.value, int) or not 2 <= base.value <= 36:
        raise reader.refuse(f"str.to_integer takes a base from 2 to 36; got {base.value!r}.")


def _check_slice_length(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                        data: tuple[Any, ...]) -> None:
    for arg in args[2:] if name.endswith("Slice") else ():
        assert isinstance(arg, Lit)
        if arg.value is not None and (not isinstance(arg.value, int) or arg.value < 0):
            raise reader.refuse(f"str.slice takes a length of 0 or more; got {arg.value!r}.")


def _check_replace(reader: _Reader, name: str, args: tuple[RowExpr, ...],
                   data: tuple[Any, ...]) -> None:
    _check_table(args, reader)


_ArgumentCheck = Callable[["_Reader", str, tuple[RowExpr, ...], tuple[Any, ...]], None]

#: The check of each function whose literal arguments (or argument types) alone can make it
#: fail on some rows; one per function (a padding function's width check comes first).
_ARGUMENT_CHECKS: dict[str, _ArgumentCheck] = {
    # round_sig_figs: its digits only (as before the table: the Decimal check of round and ceil
    # was never reached for it)
    "round_sig_figs": _check_sig_figs,
    "clip": _check_clip,
    "sum_horizontal": _check_horizontal,
    "mean_horizontal": _check_horizontal,
    "ListFunction.Sum": _check_list_sum,
    "ListFunction.Mean": _check_list_sum,
    "ListFunction.Max": _check_list_extreme,
    "ListFunction.Min": _check_list_extreme,
    "TemporalFunction.Truncate": _check_truncation,
    "TemporalFunction.Round": _check_truncation,
    "round": _check_decimal_rounding,
    "ceil": _check_decimal_rounding,
    "StringFunction.ToInteger": _check_base,
    "StringFunction.Slice": _check_slice_length,
    "StringFunction.Head": _check_slice_length,
    "StringFunction.Tail": _check_slice_length,
    "replace": _check_replace,
    **{name: _check_width for name in _WIDTHS},
}


def _cast_is_safe(source: Any, target: Any) -> bool:
    """A strict Polars cast that no value can make fail: to a float or string type from a
    numeric, boolean or string/categorical (to string only) column, or between integer types
    that widen."""
    import polars as pl

    if target in (pl.Float64, pl.Float32):
        return bool(source.is_numeric()) or source == pl.Boolean
    if target == pl.String:
        return bool(source.is_numeric()) or source in (pl.Boolean, pl.String) or isinstance(
            source, pl.Categorical | pl.Enum)
    if source == pl.Boolean and (target.is_integer() or target == pl.Boolean):
        return True  # 0 or 1 fits every integer type
    if source.is_integer() and target.is_integer():
        src_lo, src_hi = int_range(source)
        dst_lo, dst_hi = int_range(target)
        return dst_lo <= src_lo and src_hi <= dst_hi
    return bool(source == target)


def int_range(dtype: PolarsDtype) -> tuple[int, int]:
    """The smallest and largest value of a Polars integer dtype (128-bit ones included)."""
    name = str(dtype)
    bits = int(name.lstrip("UInt").lstrip("Int") or 64)
    if name.startswith("U"):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def value_dtype(expr: RowExpr) -> Any:
    """The narrowest dtype that holds every value ``expr`` can take: its own, or, through
    widening integer casts (which Polars inserts to bring operands to a common type), the
    dtype of what was cast."""
    while isinstance(expr, Cast) and _widens(expr.expr.dtype, expr.dtype):
        expr = expr.expr
    return expr.dtype


def _widens(source: Any, target: Any) -> bool:
    if not (source.is_integer() and target.is_integer()):
        return False
    lo, hi = int_range(source)
    to_lo, to_hi = int_range(target)
    return to_lo <= lo and hi <= to_hi


def _unchecked(dtype: Any) -> str | None:
    """Why arithmetic on ``dtype`` cannot be checked row by row in every engine, or None."""
    text = str(dtype)
    if text.startswith("Decimal"):
        return "Decimal arithmetic can overflow"
    if text in ("Int128", "UInt128"):
        return "128-bit integer arithmetic can overflow"
    return None


def _check_number(name: str, dtype: Any, reader: _Reader) -> None:
    """Refuse a sum no engine can check row by row (Decimal, 128-bit integers)."""
    why = None if dtype is None else _unchecked(dtype)
    if why is not None:
        raise reader.refuse(
            f"{name!r}: {why}, and dpframe cannot check that row by row in every engine; cast "
            "the operand to Float64 (or to Int64) first."
        )


def _check_arithmetic(op: str, left: RowExpr, right: RowExpr, result: Any,
                      reader: _Reader) -> None:
    """Arithmetic is accepted on numbers (and ``+`` on strings, which concatenates); integer
    results are checked by the compilers, which needs operands of at most 64 bits."""
    import polars as pl

    if op == "Plus" and result == pl.String:
        return
    symbol = OPERATORS[op].split("`")[1]
    for dtype in (left.dtype, right.dtype, result):
        if not (dtype.is_numeric() or dtype == pl.Boolean):
            raise reader.refuse(
                f"{symbol!r} on {dtype} values is not accepted (it can overflow in some "
                "engines); extract numbers first (dt.year(), ...) or cast to Float64."
            )
    # a 128-bit result of 64-bit values (UInt64 with Int64) cannot overflow 128 bits
    checked = [value_dtype(left), value_dtype(right)]
    if str(result) != "Int128":
        checked.append(result)
    for dtype in checked:
        why = _unchecked(dtype)
        if why is not None:
            raise reader.refuse(
                f"{symbol!r}: {why}, and dpframe cannot check that row by row in every "
                "engine; cast the operands to Float64 (or to Int64) first."
            )


def _check_plain_number(api: str, dtype: Any, reader: _Reader, what: str = " values"
                        ) -> None:
    """Refuse sums and means of anything but numbers and booleans: Polars adds strings by
    concatenation and fails on the mean of a string, a date or a nested value as soon as a row
    holds one (the verification probe may hold a value that happens to parse)."""
    import polars as pl

    if dtype is None or not (dtype.is_numeric() or dtype in (pl.Boolean, pl.Null)):
        raise reader.refuse(f"{api} of {dtype}{what} is not accepted: it fails or changes "
                            "meaning on some values; cast the arguments to a number first.")


def _check_clip_bounds(args: tuple[RowExpr, ...], reader: _Reader) -> None:
    """``clip`` converts its bounds to the subject's type, strictly in Polars: a bound that
    does not convert (a float bound on integers, or one out of the type's range) would fail —
    on every row for a literal, on some rows for a column. Bounds must be of the subject's
    type, or integer-valued literals that fit it."""
    subject = args[0].dtype
    for bound in args[1:]:
        if bound.dtype == subject:
            continue
        value = bound.value if isinstance(bound, Lit) else None
        if subject.is_integer() and isinstance(value, int | float) and not isinstance(
                value, bool) and float(value).is_integer():
            lo, hi = int_range(subject)
            if lo <= int(value) <= hi:
                continue
        elif subject.is_float() and isinstance(value, int | float) and not isinstance(
                value, bool):
            continue
        raise reader.refuse(
            f"clip bounds must be of the clipped column's type ({subject}); got a "
            f"{bound.dtype} bound" + (f" {value!r}" if value is not None else "") + ". Give "
            "bounds of the column's type that fit it, or cast the column to Float64 first "
            "(nw.col(...).cast(nw.Float64).clip(...))."
        )


def castable(dtype: PolarsDtype) -> bool:
    """Whether casts from or to ``dtype`` are accepted: numbers (Decimal included), booleans,
    strings, categoricals and dates/times. Casts of nested or binary values (a List or Binary
    value to String, ...) fail on some values (bytes that are not UTF-8, ...): refused."""
    import polars as pl

    return bool(dtype.is_numeric() or dtype.is_temporal() or dtype in (
        pl.Boolean, pl.String, pl.Null) or isinstance(dtype, pl.Categorical | pl.Enum))


def _check_cast_exists(source: Any, target: Any, reader: _Reader) -> None:
    """Refuse a cast of a kind :func:`castable` does not accept, and one Polars refuses only
    when a row reaches it ("not supported" on any value, e.g. String to Boolean, or a
    categorical to a number): tried on a public sample value of the source type and a missing
    one, which no data is."""
    import polars as pl

    if source != target and not (castable(source) and castable(target)):
        raise reader.refuse(f"a cast from {source} to {target} can fail on some values; "
                            "dpframe casts numbers, booleans, strings, categoricals and "
                            "dates only.")
    try:
        pl.Series([sample_value(source), None], dtype=source, strict=False).cast(
            target, strict=False)
    except BaseException as exc:
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise reader.refuse(f"a cast from {source} to {target} is not supported by Polars "
                            "on any value; cast through another type.") from None


def sample_value(dtype: PolarsDtype) -> Any:
    """One typical, public value of a Polars ``dtype`` (a Python object), for trying an
    operation on a row that is not data: Polars refuses some operations only when a non-missing
    value reaches them (a categorical cast to a number, the maximum of nested lists). None
    only for types without values (Null, Object)."""
    import polars as pl

    if dtype == pl.Boolean:
        return True
    if dtype.is_integer():
        return 1
    if dtype.is_float():
        return 1.5
    if isinstance(dtype, pl.Enum):
        return dtype.categories[0] if len(dtype.categories) else None
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Categorical):
        return "1"
    if dtype == pl.Binary:
        return b"1"
    return _temporal_or_nested_sample(dtype)


def _temporal_or_nested_sample(dtype: Any) -> Any:
    """:func:`sample_value` of a temporal, decimal, list, array or struct dtype (None for
    any other)."""
    import datetime as dt
    import decimal

    import polars as pl

    if dtype == pl.Date:
        return dt.date(2000, 1, 1)
    if isinstance(dtype, pl.Datetime):
        return dt.datetime(2000, 1, 1)
    if isinstance(dtype, pl.Duration):
        return dt.timedelta(seconds=1)
    if dtype == pl.Time:
        return dt.time(12)
    if isinstance(dtype, pl.Decimal):
        return decimal.Decimal(1)
    if isinstance(dtype, pl.List | pl.Array):
        inner = sample_value(dtype.inner)
        return [inner] * (dtype.size if isinstance(dtype, pl.Array) else 1)
    if isinstance(dtype, pl.Struct):
        return {f.name: sample_value(f.dtype) for f in dtype.fields}
    return None


def _check_table(args: tuple[RowExpr, ...], reader: _Reader) -> None:
    """``replace(old, new)``: a literal table whose keys repeat, or whose values do not fit
    the column, fails on rows that hold a key. Try it on the keys themselves (public
    literals, not data)."""
    import polars as pl

    subject, old, new = args[0].dtype, args[1], args[2]
    assert isinstance(old, Lit) and isinstance(new, Lit)
    keys = list(old.value) if isinstance(old.value, list | tuple) else [old.value]
    if len({repr(k) for k in keys}) != len(keys):
        raise reader.refuse("replace(): the table's old values repeat; give each once.")
    try:
        probe = pl.Series(keys, strict=False).cast(subject, strict=False)
        probe.replace(old.value, new.value)
    except BaseException as exc:
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise reader.refuse("replace(): the table's values do not fit the column's type "
                            f"({subject}); give values of that type.") from None


def _check_pattern(pattern: Any, reader: _Reader) -> None:
    """A literal regex pattern that does not compile fails on every row, but not on an empty
    frame: compile it here (with Polars' own regex engine), so the refusal does not wait for
    data."""
    if not isinstance(pattern, str):
        return
    import polars as pl

    try:
        pl.Series([""], dtype=pl.String).str.contains(pattern)
    except Exception:
        raise reader.refuse(f"the regular expression {pattern!r} does not compile; fix it or "
                            "pass literal=True.") from None


def _check_every(args: tuple[RowExpr, ...], name: str, reader: _Reader) -> None:
    """``dt.truncate`` / ``dt.round`` with a literal interval: an interval Polars cannot parse
    fails on every non-empty frame, so it is tried here on one public probe value."""
    import datetime as dt

    import polars as pl

    every = args[1]
    assert isinstance(every, Lit)
    start = dt.datetime(2000, 1, 1)
    probe = pl.Series([start], dtype=pl.Datetime("us"))
    what = f"dt.{name.rsplit('.', 1)[-1].lower()}"
    try:
        if name.endswith("Truncate"):
            probe.dt.truncate(every.value)
        else:
            probe.dt.round(every.value)
        end = probe.dt.offset_by(every.value).item()
    except BaseException as exc:
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise reader.refuse(f"{what}: the interval {every.value!r} is not a valid Polars "
                            "duration.") from None
    if not dt.timedelta(0) <= end - start <= dt.timedelta(days=366):
        raise reader.refuse(f"{what} takes an interval of at most a year (a public limit that "
                            f"keeps every result inside the type's range); got "
                            f"{every.value!r}.")
