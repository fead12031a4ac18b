"""Spark row-wise SQL: numeric, missing-value, horizontal and boolean functions.

* horizontal sums and means add their arguments in the reference's order (the first half,
  then the rest, recursively), so that float rounding is the same;
* ``floor``/``ceil`` of a double stay doubles (Spark's return a BIGINT and overflow): values of
  magnitude ≥ 2^52, infinities and NaN are already integral and are returned as they are, and
  the sign of a zero result is Polars' (``ceil(-0.5)`` is ``-0.0``);
* ``ln``/``log``/``log1p`` give −inf at the pole and NaN below it, as Polars, where Spark gives
  NULL; ``pow`` follows C's special cases (``1 ** NaN`` is 1), not Java's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dpframe.backends.spark._sql_compiler import (
    _arg,
    _boolean,
    _comparable,
    _literal_arg,
    _subject,
    _typed_null,
)
from dpframe.backends.spark._sql_types import (
    _INF,
    _NAN,
    _NINF,
    _ceil_double,
    _double,
    _fit,
    _fits,
    _float64,
    _floor_double,
    _info,
    _literal,
    _name,
    _refuse,
)
from dpframe.rowwise.nodes import Call, Lit, RowExpr


def _abs(node: Call) -> str:
    x, info = _subject(node)
    if info.kind == "int":
        return f"(CASE WHEN {x} = {_literal(info.lo, node.dtype)} THEN NULL ELSE abs({x}) END)"
    if info.kind in ("uint", "float"):
        return f"abs({x})" if info.kind == "float" else x
    raise _refuse(f"abs of {node.args[0].dtype}", "use numbers")


def _negate(node: Call) -> str:
    x, info = _subject(node)
    if info.kind == "int":
        return (f"(CASE WHEN {x} = {_literal(info.lo, node.dtype)} THEN NULL "
                f"ELSE negative({x}) END)")
    if info.kind == "uint":  # only 0 has a negation that fits
        return f"(CASE WHEN {x} = 0 THEN {x} END)"
    if info.kind == "float":
        return f"negative({x})"
    raise _refuse(f"negation of {node.args[0].dtype}", "use numbers")


def _clip(node: Call) -> str:
    """``x < lower → lower``, else ``x > upper → upper``, else x; a missing or NaN bound is
    ignored and NaN stays NaN (IEEE comparisons, as the reference's clip kernel)."""
    x, info = _subject(node)
    if info.kind not in ("int", "uint", "float"):
        raise _refuse(f"clip of {node.dtype}", "clip numbers")
    has_lower, has_upper = bool(node.params[0]), bool(node.params[1])
    bounds = iter(node.args[1:])
    cases = []
    for present, symbol in ((has_lower, "<"), (has_upper, ">")):
        if not present:
            continue
        bound = next(bounds)
        _check_clip_bound(bound, node.dtype)
        b = _arg(bound, node.dtype)
        guard = f"NOT isnan({b}) AND " if info.kind == "float" else ""
        cases.append(f"WHEN {guard}{x} {symbol} {b} THEN {b}")
    if not cases:
        return x
    nan = f"WHEN isnan({x}) THEN {x} " if info.kind == "float" else ""
    return f"(CASE {nan}{' '.join(cases)} ELSE {x} END)"


def _check_clip_bound(bound: RowExpr, dtype: Any) -> None:
    """The reference casts clip bounds to the subject's type *strictly*; refuse bounds for
    which that cast could fail (it would raise in Polars)."""
    target = _info(dtype)
    source = _info(bound.dtype)
    if (isinstance(bound, Lit) and source.kind in ("int", "uint")
            and target.kind in ("int", "uint")
            and (bound.value is None or target.lo <= int(bound.value) <= target.hi)):
        return
    if source.kind == "null" or source == target:
        return
    if target.kind == "float" and source.kind in ("int", "uint", "float", "bool"):
        return
    if target.kind in ("int", "uint") and source.kind in ("int", "uint", "bool") and _fits(
            source, target):
        return
    raise _refuse(f"clip bounds of type {bound.dtype} on {dtype} values (the reference "
                  "raises on bounds that do not fit)", "give bounds of the column's type")


def _powi(base: float, exponent: int) -> float:
    """``base ** exponent`` by repeated squaring, as Rust's ``powi`` computes the scale of
    ``round``."""
    result, factor = 1.0, base
    while exponent:
        if exponent & 1:
            result *= factor
        factor *= factor
        exponent >>= 1
    return result


def _round(node: Call) -> str:
    """Floats: ``y = x·10^d``; if y is not finite, x; else y rounded to an integer (half to
    even or half away from zero, as the mode says) divided by 10^d — the reference's algorithm,
    with 10^d computed as Rust's ``powi``. A zero keeps the sign of x."""
    x, info = _subject(node)
    decimals, mode = int(node.params[0]), str(node.params[1])
    if info.kind in ("int", "uint"):
        return x
    if info.kind != "float" or info.bits != 64:
        raise _refuse(f"round of {node.args[0].dtype}", "cast to Float64 first")
    if mode not in ("half_to_even", "half_away_from_zero") or decimals < 0:
        raise _refuse(f"round with mode {mode!r} and {decimals} decimals",
                      "use half_to_even or half_away_from_zero")
    scale = _powi(10.0, decimals)
    y = x if scale == 1.0 else f"({x} * {_double(scale)})"
    fn = "bround" if mode == "half_to_even" else "round"
    rounded = f"(CASE WHEN {fn}({y}, 0) = 0 THEN {y} * 0D ELSE {fn}({y}, 0) END)"
    scaled = rounded if scale == 1.0 else f"({rounded} / {_double(scale)})"
    return f"(CASE WHEN abs({y}) < {_INF} THEN {scaled} ELSE {x} END)"


def _floor_ceil(node: Call) -> str:
    x, info = _subject(node)
    if info.kind in ("int", "uint"):
        return x
    if info.kind != "float":
        raise _refuse(f"{node.name} of {node.args[0].dtype}", "use numbers")
    fn = _floor_double if node.name == "floor" else _ceil_double
    if info.bits == 64:
        return fn(x)
    return f"CAST({fn(f'CAST({x} AS DOUBLE)')} AS FLOAT)"


def _double_arg(node: Call, i: int = 0) -> str:
    arg = node.args[i]
    kind = _info(arg.dtype).kind
    if kind not in ("int", "uint", "float", "bool"):
        raise _refuse(f"{node.name!r} of {arg.dtype}", "use numbers")
    return _arg(arg, _float64())


def _require_float64(node: Call) -> None:
    if _name(node.dtype) != "Float64":
        raise _refuse(f"{node.name!r} computed in {node.dtype}",
                      "cast the argument to Float64 first")


def _sqrt(node: Call) -> str:
    x = _double_arg(node)
    if _name(node.dtype) == "Float32":  # a correctly rounded sqrt survives double rounding
        return f"CAST(sqrt({x}) AS FLOAT)"
    _require_float64(node)
    return f"sqrt({x})"


def _libm(spark_name: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        _require_float64(node)
        return f"{spark_name}({_double_arg(node)})"
    return build


def _exact_unary(spark_name: str) -> Callable[[Call], str]:
    """degrees/radians: one multiplication by the same constant in Java and Rust (exact)."""
    return _libm(spark_name)


def _ln(v: str) -> str:
    """Natural log as Polars computes it: −inf at ±0, NaN below 0 (Spark's ln gives NULL)."""
    return (f"(CASE WHEN {v} > 0 THEN ln({v}) WHEN {v} = 0 THEN {_NINF} "
            f"WHEN {v} < 0 THEN {_NAN} END)")


def _divide_by_zero(numerator: str) -> str:
    """IEEE ``numerator / +0.0`` (Spark's division raises or gives NULL)."""
    return (f"(CASE WHEN {numerator} IS NULL THEN NULL "
            f"WHEN isnan({numerator}) OR {numerator} = 0 THEN {_NAN} "
            f"WHEN {numerator} > 0 THEN {_INF} ELSE {_NINF} END)")


def _log(node: Call) -> str:
    """``ln(x) / ln(base)`` (the reference's formula). A literal base's logarithm is computed
    here with the platform's libm, as Polars computes it."""
    _require_float64(node)
    lx = _ln(_double_arg(node))
    base = node.args[1]
    if isinstance(base, Lit):
        if base.value is None:
            return _typed_null(node.dtype)
        value = float(base.value)
        lb = (math.log(value) if value > 0 else -math.inf if value == 0 else math.nan)
        if lb == 1.0:
            return lx
        if lb == 0.0:
            return _divide_by_zero(lx)
        return f"({lx} / {_double(lb)})"
    lbase = _ln(_double_arg(node, 1))
    return f"(CASE WHEN {lbase} = 0 THEN {_divide_by_zero(lx)} ELSE {lx} / {lbase} END)"


def _log1p(node: Call) -> str:
    _require_float64(node)
    x = _double_arg(node)
    return (f"(CASE WHEN {x} = -1 THEN {_NINF} WHEN {x} < -1 THEN {_NAN} "
            f"ELSE log1p({x}) END)")


def _pow(node: Call) -> str:
    """Float64 ``power`` with C's special cases where Java's differ: ``1 ** y`` is 1 for every
    y (NaN included) and ``(-1) ** ±inf`` is 1. An integer power (the reference's exact,
    checked integer power) or a Float32 one has no exact Spark form: refused."""
    if _name(node.dtype) != "Float64":
        raise _refuse(f"'**' typed {node.dtype} (an exact integer or Float32 power)",
                      "cast an operand to Float64 first: nw.col(...).cast(nw.Float64) ** y")
    x, y = _double_arg(node, 0), _double_arg(node, 1)
    return (f"(CASE WHEN {x} = 1 AND {y} IS NOT NULL THEN 1D "
            f"WHEN {x} = -1 AND abs({y}) = {_INF} THEN 1D ELSE power({x}, {y}) END)")


def _sign(node: Call) -> str:
    x, info = _subject(node)
    if info.kind in ("int", "uint"):
        return f"CAST(signum({x}) AS {_info(node.dtype).sql})"
    if info.kind == "float":
        return "signum(" + x + ")" if info.bits == 64 else f"CAST(signum({x}) AS FLOAT)"
    raise _refuse(f"sign of {node.args[0].dtype}", "use numbers")


def _fill_null(node: Call) -> str:
    return f"coalesce({_arg(node.args[0], node.dtype)}, {_arg(node.args[1], node.dtype)})"


def _coalesce(node: Call) -> str:
    _info(node.dtype)
    return "coalesce(" + ", ".join(_arg(a, node.dtype) for a in node.args) + ")"


def _table(node: Call, i: int, dtype: Any) -> list[Any]:
    """Literal list ``i`` cast to ``dtype`` the way Polars casts it (strictly: a value that
    does not convert makes the reference raise, so the tree is refused)."""
    import polars as pl

    arg = node.args[i]
    values = _literal_arg(node, i)
    if not isinstance(values, list):
        values = [values]
    inner = getattr(arg.dtype, "inner", None) or arg.dtype
    try:
        series = pl.Series(values, dtype=inner, strict=False).cast(dtype, strict=True)
    except Exception:
        raise _refuse(f"{node.name!r} with a table whose values do not fit {dtype} (the "
                      "reference raises)", "give values of the column's type") from None
    out: list[Any] = series.to_list()
    return out


def _replace(node: Call) -> str:
    """``CASE`` over the literal table; a missing value matches a missing key, NaN matches NaN
    and 0.0 matches -0.0 (Spark's ``=`` on doubles, as Polars' hash lookup)."""
    subject = node.args[0]
    x = _arg(subject, node.dtype)
    old = _table(node, 1, node.dtype)
    new = _table(node, 2, node.dtype)
    if len(new) == 1 and len(old) != 1:
        new = new * len(old)
    if len(old) != len(new):
        raise _refuse("replace with tables of different lengths", "give one new value per old")
    keys = [_hashable(v) for v in old]
    if len(set(keys)) != len(keys):
        raise _refuse("replace with duplicate old values (the reference raises)",
                      "list each old value once")
    pairs = [(o, n) for o, n in zip(old, new, strict=True) if o is not None]
    null_new = [n for o, n in zip(old, new, strict=True) if o is None]
    inner = x
    if pairs:
        whens = " ".join(f"WHEN {_literal(o, node.dtype)} THEN {_literal(n, node.dtype)}"
                         for o, n in pairs)
        inner = f"(CASE {x} {whens} ELSE {x} END)"
    if null_new:
        return f"(CASE WHEN {x} IS NULL THEN {_literal(null_new[0], node.dtype)} ELSE {inner} END)"
    return inner


def _hashable(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value == 0:
            return 0.0
    return value


def _horizontal_extreme(node: Call) -> str:
    """Largest (smallest) non-missing argument. Floats: NaN is skipped unless every present
    argument is NaN; among arguments equal to the result, the last one is returned (it decides
    the sign of a zero), as the reference's fold does."""
    info = _info(node.dtype)
    args = [_arg(a, node.dtype) for a in node.args]
    fn = "greatest" if node.name == "max_horizontal" else "least"
    if len(args) == 1:
        return args[0]
    if info.kind != "float":
        if info.kind not in ("int", "uint", "bool", "str", "date", "datetime", "decimal"):
            raise _refuse(f"{node.name} of {node.dtype}", "use numbers, strings or dates")
        return f"{fn}({', '.join(args)})"
    null = f"CAST(NULL AS {info.sql})"
    m = f"{fn}({', '.join(f'nanvl({a}, {null})' for a in args)})"
    any_nan = " OR ".join(f"isnan({a})" for a in args)
    last_zero = " ".join(f"WHEN {a} = 0 THEN {a}" for a in reversed(args))
    nan = _NAN if info.bits == 64 else f"CAST({_NAN} AS FLOAT)"
    return (f"(CASE WHEN {m} IS NULL THEN (CASE WHEN {any_nan} THEN {nan} END) "
            f"WHEN {m} = 0 THEN (CASE {last_zero} END) ELSE {m} END)")


def _halves(terms: list[str]) -> str:
    """The sum of ``terms`` associated as the reference adds them: the sum of the first half
    (``len // 2`` terms) plus the sum of the rest, recursively (float addition is not
    associative)."""
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return f"({_halves(terms[:middle])} + {_halves(terms[middle:])})"


def _sum_horizontal(node: Call) -> str:
    info = _info(node.dtype)
    ignore_nulls = bool(node.params[0]) if node.params else True
    if info.kind == "float":
        zero = f"CAST(0 AS {info.sql})"
        terms = [_arg(a, node.dtype) for a in node.args]
        if ignore_nulls:
            terms = [f"coalesce({t}, {zero})" for t in terms]
        return _halves(terms)
    if info.kind not in ("int", "uint"):
        raise _refuse(f"sum_horizontal with a {node.dtype} result", "sum numbers")
    terms = []
    for a in node.args:
        if _info(a.dtype).kind not in ("int", "uint", "bool"):
            raise _refuse(f"sum_horizontal of {a.dtype} into {node.dtype}", "cast first")
        term = f"CAST({_arg(a)} AS DECIMAL(20,0))"  # exact: no sum of 64-bit values overflows
        terms.append(f"coalesce({term}, CAST(0 AS DECIMAL(20,0)))" if ignore_nulls else term)
    return _fit(f"try_cast(({' + '.join(terms)}) AS BIGINT)", node.dtype)


def _mean_horizontal(node: Call) -> str:
    """Sum of the present arguments (added as the reference adds them, missing ones as 0)
    divided by their number; NULL when none is present (or, without ``ignore_nulls``, when
    one is missing)."""
    _require_float64(node)
    ignore_nulls = bool(node.params[0]) if node.params else True
    terms = []
    for a in node.args:
        info = _info(a.dtype)
        if not (info.kind in ("bool", "null") or (info.kind == "float" and info.bits == 64)
                or (info.kind in ("int", "uint") and info.hi < 2**32)):
            raise _refuse(f"mean_horizontal of {a.dtype} values (the reference's integer sum "
                          "can wrap)", "cast the arguments to Float64 first")
        terms.append(_arg(a, _float64()))
    if not ignore_nulls:
        return f"({_halves(terms)} / {_double(len(terms))})"
    total = _halves([f"coalesce({t}, 0D)" for t in terms])
    count = " + ".join(f"(CASE WHEN {t} IS NULL THEN 0D ELSE 1D END)" for t in terms)
    return f"(CASE WHEN ({count}) = 0 THEN NULL ELSE ({total}) / ({count}) END)"


def _kleene(word: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        return "(" + f" {word} ".join(_boolean(a) for a in node.args) + ")"
    return build


def _is_null(negate: bool) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        x = _arg(node.args[0])
        return f"({x} IS NOT NULL)" if negate else f"({x} IS NULL)"
    return build


def _float_predicate(kind: str) -> Callable[[Call], str]:
    """is_nan / is_not_nan / is_finite / is_infinite: NULL for a missing value; integers are
    never NaN or infinite."""
    def build(node: Call) -> str:
        x, info = _subject(node)
        if info.kind in ("int", "uint"):
            answer = "TRUE" if kind in ("not_nan", "finite") else "FALSE"
            return f"(CASE WHEN {x} IS NULL THEN NULL ELSE {answer} END)"
        if info.kind != "float":
            raise _refuse(f"{node.name!r} of {node.args[0].dtype}", "use numbers")
        test = {"nan": f"isnan({x})", "not_nan": f"NOT isnan({x})",
                "finite": f"NOT isnan({x}) AND abs({x}) != {_INF}",
                "infinite": f"abs({x}) = {_INF}"}[kind]
        return f"(CASE WHEN {x} IS NULL THEN NULL ELSE {test} END)"
    return build


def _not(node: Call) -> str:
    x, info = _subject(node)
    if info.kind in ("bool", "null"):
        return f"(NOT {x})"
    if info.kind == "int":
        return f"(~ {x})"
    if info.kind == "uint":
        return f"CAST({info.hi} - {x} AS {info.sql})"
    raise _refuse(f"not of {node.args[0].dtype}", "use booleans or integers")


def _is_between(node: Call) -> str:
    closed = str(node.params[0]) if node.params else "both"
    if closed not in ("both", "left", "right", "none"):
        raise _refuse(f"is_between(closed={closed!r})", "use both, left, right or none")
    lo_op = ">=" if closed in ("both", "left") else ">"
    hi_op = "<=" if closed in ("both", "right") else "<"
    x1, lo = _comparable(node.args[0], node.args[1])
    x2, hi = _comparable(node.args[0], node.args[2])
    return f"(({x1} {lo_op} {lo}) AND ({x2} {hi_op} {hi}))"


def _is_in(node: Call) -> str:
    """``x IN (items)`` over the present items; a missing x is NULL, or, with
    ``nulls_equal``, whether the list holds a missing item."""
    x, source = _arg(node.args[0]), node.args[0].dtype
    info = _info(source)
    if info.kind == "null":
        return "CAST(NULL AS BOOLEAN)"
    items = _table(node, 1, source)
    nulls_equal = bool(node.params[0]) if node.params else False
    present = [v for v in items if v is not None]
    test = ("FALSE" if not present else
            f"{x} IN ({', '.join(_literal(v, source) for v in present)})")
    missing = ("TRUE" if None in items else "FALSE") if nulls_equal else "NULL"
    return f"(CASE WHEN {x} IS NULL THEN {missing} ELSE {test} END)"
