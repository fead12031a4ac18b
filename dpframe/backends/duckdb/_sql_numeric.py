"""DuckDB row-wise SQL: numeric, missing-value, horizontal and boolean functions.

Float functions return IEEE values (NaN, ±inf) wherever DuckDB could raise instead
(``ln(0)``, ``sqrt(-1)``, ``asin(2)``, ``sin(inf)``, ``0 ** -1``, a zero ``ln(base)``),
whatever the connection's ``ieee_floating_point_ops`` setting; ``round``,
``round_sig_figs`` and ``**`` repeat Polars' own steps (its powers of ten by repeated
squaring, its products for small integer exponents) so that they agree to the last bit;
``clip`` and ``max_horizontal`` / ``min_horizontal`` ignore NaN as Polars does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dpframe.backends.duckdb._sql_compiler import Handler, _binary_collation, _Compiler
from dpframe.backends.duckdb._sql_types import (
    _INF,
    _INTS,
    _NAN,
    _NINF,
    _double,
    _dtype,
    _duck,
    _int,
    _is_float32,
    _kind,
    _name,
    _null,
    _powi,
    _RefusalError,
    _signed,
)
from dpframe.rowwise.nodes import Call, Cast, Lit, RowExpr


def _lit_value(node: Call, i: int) -> Any:
    """The Python value of literal argument ``i``."""
    arg = node.args[i]
    assert isinstance(arg, Lit)
    return arg.value


def _exact_literal(arg: RowExpr) -> Any:
    """The value of a literal argument (through casts Polars inserted), or ``...`` if it is
    computed from the data."""
    while isinstance(arg, Cast):
        arg = arg.expr
    return arg.value if isinstance(arg, Lit) else ...


def _one_type(c: _Compiler, node: Call, out: Any | None = None) -> list[str]:
    """Every argument converted to the node's reference dtype (or ``out``)."""
    target = c.t(node) if out is None else out
    return [c.operand(a, target) for a in node.args]


def _float_in(c: _Compiler, node: Call) -> str:
    """The subject as DOUBLE (the type Polars computes float functions of non-Float32 values
    in)."""
    return c.operand(node.args[0], _dtype("Float64"))


def _float_out(c: _Compiler, node: Call, sql: str) -> str:
    return c.cast(sql, _dtype("Float64"), c.t(node))


def _math(build: Callable[[str], str], bind: bool = True,
          single: Callable[[str], str] | None = None) -> Handler:
    """A Float64 function of the subject (``build`` writes it from the DOUBLE value, guarded
    so that DuckDB returns Polars' IEEE result instead of raising). Polars computes it in
    single precision for Float32 values: only ``single``, the same computation in FLOAT
    (or None: refused), reproduces that."""
    def handler(c: _Compiler, node: Call) -> str:
        out = c.t(node)
        if _is_float32(out):
            if single is None:
                raise _RefusalError(f"{node.name}() of Float32 values (Polars computes it in "
                                    "single precision, DuckDB in double)",
                                    "cast to Float64 first")
            return c.let(c.operand(node.args[0], out), single)
        x = _float_in(c, node)
        body = c.let(x, build) if bind else build(x)
        return _float_out(c, node, f"TRY({body})")
    return handler


def _ln(x: str) -> str:
    return (f"(CASE WHEN isnan({x}) THEN {x} WHEN {x} = 0 THEN {_NINF} "
            f"WHEN {x} < 0 THEN {_NAN} ELSE ln({x}) END)")


def _ieee_divide(n: str, d: str) -> str:
    """IEEE ``n / d`` (a zero divisor gives ±inf or NaN, never an error)."""
    return (f"(CASE WHEN {n} IS NULL OR {d} IS NULL THEN NULL WHEN {d} <> 0 THEN {n} / {d} "
            f"WHEN {n} = 0 OR isnan({n}) THEN {_NAN} "
            f"WHEN ({n} < 0) <> signbit({d}) THEN {_NINF} ELSE {_INF} END)")


def _pow_ieee(a: str, b: str) -> str:
    """C's ``pow`` (Rust's ``powf``): zero to a negative power is ±inf (DuckDB may raise)."""
    odd = f"(isfinite({b}) AND {b} = trunc({b}) AND abs({b}) % 2 = 1)"
    return (f"(CASE WHEN {a} = 0 AND {b} < 0 THEN CASE WHEN signbit({a}) AND {odd} "
            f"THEN {_NINF} ELSE {_INF} END ELSE pow({a}, {b}) END)")


def _abs(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    x = c.operand(node.args[0], out)
    if _signed(out):
        low = _INTS[_name(out)][1]
        return c.let(x, lambda v: f"(CASE WHEN {v} = {low} THEN NULL ELSE abs({v}) END)")
    if _kind(out) == "int":
        return x
    if _kind(out) in ("float", "decimal"):
        return f"abs({x})"
    raise _RefusalError(f"abs() on {out}", "cast to Float64 or an integer type first")


def _negate(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    x = c.operand(node.args[0], out)
    if _signed(out):
        low = _INTS[_name(out)][1]
        return c.let(x, lambda v: f"(CASE WHEN {v} = {low} THEN NULL ELSE -{v} END)")
    if _kind(out) == "int":  # unsigned: only 0 has a negation that fits
        return c.let(x, lambda v: f"(CASE WHEN {v} = 0 THEN {v} END)")
    if _kind(out) in ("float", "decimal"):
        return f"(-{x})"
    raise _RefusalError(f"negation of {out}", "cast to Float64 or an integer type first")


def _clip(c: _Compiler, node: Call) -> str:
    """Polars' clamp: below a present lower bound -> the bound, else above a present upper
    bound -> that bound (IEEE comparisons: a NaN value or bound changes nothing)."""
    out = c.t(node)
    if _kind(out) not in ("int", "float", "date", "datetime", "decimal"):
        raise _RefusalError(f"clip() on {out}", "clip numbers")
    has_lower, has_upper = bool(node.params[0]), bool(node.params[1])
    rest = iter(node.args[1:])
    lower = c.operand(next(rest), out) if has_lower else None
    upper = c.operand(next(rest), out) if has_upper else None
    x = c.operand(node.args[0], out)
    is_float = _kind(out) == "float"

    def body(v: str) -> str:
        branches = []
        if lower is not None:
            cond = f"{v} < {{lo}}" + (" AND NOT isnan({lo})" if is_float else "")
            branches.append((cond, lower))
        if upper is not None:
            cond = f"{v} > {{hi}}" + (f" AND NOT isnan({v})" if is_float else "")
            branches.append((cond, upper))
        if not branches:
            return v
        text = "(CASE"
        for cond, bound in branches:
            key = "lo" if bound is lower else "hi"
            text += f" WHEN {cond.format(**{key: bound})} THEN {bound}"
        return text + f" ELSE {v} END)"

    return c.let(x, body)


def _round(c: _Compiler, node: Call) -> str:
    """Polars' float rounding: ``op(x * 10^d) / 10^d`` with 10^d as Rust's ``powi`` computes
    it, the value itself where that is not finite; integers unchanged."""
    out = c.t(node)
    decimals, mode = int(node.params[0]), str(node.params[1])
    if mode not in ("half_to_even", "half_away_from_zero"):
        raise _RefusalError(f"round(mode={mode!r})", "use 'half_to_even' or 'half_away_from_zero'")
    x = c.operand(node.args[0], out)
    if _kind(out) == "int":
        return x
    fn = "round_even" if mode == "half_to_even" else "round"
    if _kind(out) == "decimal":  # exact in DuckDB as in Polars
        return f"TRY_CAST({fn}({x}, {decimals}) AS {_duck(out)})"
    if _kind(out) != "float":
        raise _RefusalError(f"round() on {out}", "cast to Float64 first")

    def op(v: str) -> str:
        return f"{fn}({v}, 0)"

    if decimals == 0:
        return op(x)
    if _is_float32(out):
        if decimals >= 47:
            return x
        scale = _double(_powi(10.0, decimals))
        rounded = c.to_f32(f"({op(f'(CAST({{v}} AS DOUBLE) * {scale})')} / {scale})")
    else:
        if decimals >= 326:
            return x
        if decimals >= 300:
            mul2, mul5 = 2.0 ** decimals, _powi(5.0, decimals)
            rounded = (f"({op(f'(({{v}} * {_double(mul2)}) * {_double(mul5)})')} / "
                       f"{_double(mul5)} * {_double(1.0 / mul2)})")
        else:
            scale = _double(_powi(10.0, decimals))
            rounded = f"({op(f'({{v}} * {scale})')} / {scale})"
    return c.let(x, lambda v: c.let(rounded.replace("{v}", v), lambda r: (
        f"(CASE WHEN isfinite({r}) THEN {r} ELSE {v} END)")))


def _pow5(exponent: str) -> str:
    """Rust's ``5f64.powi(e)`` for an INTEGER ``e`` with |e| < 1024 (repeated squaring,
    each square rounded, multiplied in from the lowest bit up)."""
    squares = [5.0]
    for _ in range(9):
        squares.append(squares[-1] * squares[-1])
    factors = " * ".join(
        f"(CASE WHEN (abs({exponent}) >> {k}) & 1 = 1 THEN {_double(sq)} ELSE 1.0 END)"
        for k, sq in enumerate(squares))
    return (f"(CASE WHEN {exponent} < 0 THEN 1.0 / (1.0 * {factors}) "
            f"ELSE (1.0 * {factors}) END)")


def _round_sig_figs(c: _Compiler, node: Call) -> str:
    """Polars' significant-figure rounding, step by step: e = digits - 1 - floor(log10|x|);
    x * 2^e * 5^e rounded half away from zero, divided by 5^e, times 2^-e; the value itself
    where that is not finite; integers go through Float64 and back (saturating)."""
    out = c.t(node)
    digits = int(node.params[0])
    if _kind(out) not in ("int", "float"):
        raise _RefusalError(f"round_sig_figs() on {out}", "cast to Float64 first")
    v = c.operand(node.args[0], _dtype("Float64"))

    def body(x: str) -> str:
        exponent = f"CAST({digits - 1} - floor(log10(abs({x}))) AS INTEGER)"

        def scaled(e: str) -> str:
            pow5 = _pow5(e)
            return c.let(pow5, lambda p: (
                f"(round((({x} * pow(2.0, {e})) * {p}), 0) / {p}) * pow(2.0, -{e})"))

        descaled = c.let(exponent, scaled)
        return (f"(CASE WHEN {x} = 0 OR NOT isfinite({x}) THEN {x} ELSE "
                + c.let(descaled, lambda d: f"(CASE WHEN isfinite({d}) THEN {d} ELSE {x} END)")
                + " END)")

    result = c.let(v, body)
    if _kind(out) == "float":
        return c.cast(result, _dtype("Float64"), out)
    low, high = _INTS[_name(out)][1], _INTS[_name(out)][2]
    duck = _duck(out)
    return c.let(result, lambda r: (
        f"(CASE WHEN isnan({r}) THEN CAST(0 AS {duck}) WHEN {r} >= {float(high)!r} "
        f"THEN {_int(high, duck)} WHEN {r} <= {float(low)!r} THEN {_int(low, duck)} "
        f"ELSE CAST(trunc({r}) AS {duck}) END)"))


def _floor_ceil(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        out = c.t(node)
        x = c.operand(node.args[0], out)
        if _kind(out) == "int":
            return x
        if _kind(out) == "float":
            return f"{fn}({x})"
        if _kind(out) == "decimal":
            return f"TRY_CAST({fn}({x}) AS {_duck(out)})"
        raise _RefusalError(f"{fn}() on {out}", "cast to Float64 first")
    return handler


def _sign(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    if _kind(out) == "int":
        return f"CAST(sign({c.operand(node.args[0], out)}) AS {_duck(out)})"
    if _kind(out) == "float":
        x = c.operand(node.args[0], out)
        one = c.literal(1.0, out)
        minus = c.literal(-1.0, out)
        return c.let(x, lambda v: (f"(CASE WHEN isnan({v}) THEN {v} WHEN {v} > 0 THEN {one} "
                                   f"WHEN {v} < 0 THEN {minus} ELSE {v} END)"))
    raise _RefusalError(f"sign() on {out}", "cast to Float64 first")


def _log(c: _Compiler, node: Call) -> str:
    """Rust's ``x.log(base)``: ``ln(x) / ln(base)`` with IEEE results."""
    out = c.t(node)
    work = _dtype("Float32") if _is_float32(out) else _dtype("Float64")
    if _is_float32(work):
        raise _RefusalError("log() of Float32 values (Polars computes it in single precision)",
                            "cast to Float64 first")
    x = c.operand(node.args[0], work)
    base = c.operand(node.args[1], work)
    body = c.let(x, lambda v: c.let(base, lambda b: c.let(_ln(v), lambda n: c.let(
        _ln(b), lambda d: _ieee_divide(n, d)))))
    return c.cast(f"TRY({body})", work, out)


def _pow(c: _Compiler, node: Call) -> str:
    """Polars' power. Floats: in the plan's float type; a literal exponent 1 is the value,
    0.5 its square root, 2..9 repeated products (as Polars computes them), anything else C's
    ``pow`` (Float64 only: Polars' single-precision ``powf`` has no DuckDB twin). Integers:
    the exact power, missing for an exponent outside [0, 2^32) or a result that does not
    fit the type."""
    out = c.t(node)
    if _kind(out) == "int":
        return _integer_pow(c, node, out)
    if _kind(out) != "float":
        raise _RefusalError(f"** with a {out} result", "cast the operands to Float64")
    base = c.operand(node.args[0], out)
    exponent = _exact_literal(node.args[1])
    single = _is_float32(out)
    if exponent is None:
        return _null(out)
    if exponent is not ... and float(exponent) == 0.0:  # x ** 0 is 1, NaN included
        return c.let(base, lambda a: f"(CASE WHEN {a} IS NOT NULL THEN {c.literal(1.0, out)} END)")
    if exponent is not ... and float(exponent) == 1.0:
        return base
    if exponent is not ... and float(exponent) == 0.5:
        root = (f"(CASE WHEN {{a}} < 0 THEN {_NAN} ELSE sqrt(CAST({{a}} AS DOUBLE)) END)")
        return c.let(base, lambda a: c.cast(root.format(a=a), _dtype("Float64"), out))
    if exponent is not ... and float(exponent).is_integer() and 1.0 < float(exponent) < 10.0:
        def product(a: str) -> str:
            text = a
            for _ in range(int(exponent) - 1):
                text = f"({text} * {a})"
            return text
        return c.let(base, product)
    if single:
        raise _RefusalError("** on Float32 values (Polars computes it in single precision, "
                            "DuckDB in double)", "cast to Float64 first")
    if exponent is ...:
        e = c.operand(node.args[1], out)
        return c.let(base, lambda a: c.let(e, lambda b: f"TRY({_pow_ieee(a, b)})"))
    return c.let(base, lambda a: f"TRY({_pow_ieee(a, _double(float(exponent)))})")


def _integer_pow(c: _Compiler, node: Call, out: Any) -> str:
    """The exact integer power by squaring (each square computed only when the exponent
    needs it, so an overflow means the power itself does not fit)."""
    if _name(out) in ("Int128", "UInt128"):
        raise _RefusalError("** on 128-bit integers", "cast to Int64 or Float64 first")
    wide = _dtype("Int128")
    base = c.operand(node.args[0], wide)
    exponent = c.operand(node.args[1], wide)

    def power(b: str, e: str) -> str:
        def squares(k: int, previous: str, factors: list[str]) -> str:
            factors = [*factors, f"(CASE WHEN ({e} >> {k}) & 1 = 1 THEN {previous} ELSE 1 END)"]
            if k == 6:
                return "(" + " * ".join(factors) + ")"
            square = f"(CASE WHEN {e} >= {2 ** (k + 1)} THEN {previous} * {previous} END)"
            return c.let(square, lambda sq: squares(k + 1, sq, factors))
        return (f"(CASE WHEN {b} IS NULL OR {e} IS NULL OR {e} < 0 OR {e} > 4294967295 "
                "THEN NULL "
                f"WHEN {b} = 0 THEN CASE WHEN {e} = 0 THEN 1 ELSE 0 END "
                f"WHEN {b} = 1 THEN 1 "
                f"WHEN {b} = -1 THEN CASE WHEN {e} % 2 = 0 THEN 1 ELSE -1 END "
                f"WHEN {e} > 127 THEN NULL "
                f"ELSE TRY({squares(0, b, [])}) END)")
    body = c.let(base, lambda b: c.let(exponent, lambda e: power(b, e)))
    return f"TRY_CAST({body} AS {_duck(out)})"


def _fill_null(c: _Compiler, node: Call) -> str:
    return "coalesce(" + ", ".join(_one_type(c, node)) + ")"


def _replace(c: _Compiler, node: Call) -> str:
    """Values equal to an entry of ``old`` (NaN equals NaN, a null entry matches missing
    values) become the matching entry of ``new``; the first entry wins."""
    out = c.t(node)
    old, new = _lit_value(node, 1), _lit_value(node, 2)
    old_type = getattr(c.t(node.args[1]), "inner", out)
    new_type = getattr(c.t(node.args[2]), "inner", out)
    if not isinstance(old, list):
        old = [old]
    if not isinstance(new, list):
        new = [new] * len(old)
    if len(new) == 1 and len(old) > 1:
        new = new * len(old)
    x = c.operand(node.args[0], out)
    strings = _kind(out) == "str"

    def body(v: str) -> str:
        text = "(CASE"
        for o, n in zip(old, new, strict=True):
            value = c.cast(c.literal(n, new_type), new_type, out)
            if o is None:
                text += f" WHEN {v} IS NULL THEN {value}"
                continue
            key = c.cast(c.literal(o, old_type), old_type, out)
            left, right = ((_binary_collation(v), _binary_collation(key)) if strings
                           else (v, key))
            text += f" WHEN {left} = {right} THEN {value}"
        return text + f" ELSE {v} END)"

    return c.let(x, body) if old else x


def _coalesce(c: _Compiler, node: Call) -> str:
    return "coalesce(" + ", ".join(_one_type(c, node)) + ")"


def _extreme(largest: bool) -> Handler:
    """max_horizontal / min_horizontal: the largest / smallest non-missing value; NaN only
    where every present value is NaN (Polars ignores NaN here); on ties the last argument
    (Polars folds left to right and keeps the later of equal values: -0.0 vs 0.0)."""
    def handler(c: _Compiler, node: Call) -> str:
        out = c.t(node)
        if _is_float32(out):  # DuckDB's greatest on FLOAT loses the sign of zero
            return c.cast(compute(c, node, _dtype("Float64")), _dtype("Float64"), out)
        return compute(c, node, out)

    def compute(c: _Compiler, node: Call, out: Any) -> str:
        args = list(reversed(_one_type(c, node, out)))
        fn = "greatest" if largest else "least"
        if _kind(out) == "str":
            args = [_binary_collation(a) for a in args]
        if _kind(out) != "float":
            return f"{fn}({', '.join(args)})"
        nan = c.literal(math.nan, out)

        def body(names: list[str]) -> str:
            plain = ", ".join(f"NULLIF({a}, {nan})" for a in names)
            return f"coalesce({fn}({plain}), greatest({', '.join(names)}))"
        return _let_all(c, args, body)
    return handler


def _let_all(c: _Compiler, sqls: list[str], body: Callable[[list[str]], str]) -> str:
    """``body`` of all ``sqls``, each computed once."""
    if not sqls:
        return body([])

    def step(i: int, names: list[str]) -> str:
        if i == len(sqls):
            return body(names)
        return c.let(sqls[i], lambda n: step(i + 1, [*names, n]))
    return step(0, [])


def _sum_horizontal(c: _Compiler, node: Call) -> str:
    """Sum of the row's arguments, left to right; with ``ignore_nulls`` missing ones are
    skipped (an all-missing row sums to 0), else any missing one makes the sum missing.
    Integers are summed exactly and checked."""
    out = c.t(node)
    ignore_nulls = bool(node.params[0]) if node.params else True
    if _kind(out) == "int":
        wide = _dtype("Int128")
        args = [c.operand(a, wide) for a in node.args]
        if ignore_nulls:
            args = [f"coalesce({a}, 0)" for a in args]
        return f"TRY_CAST(TRY({' + '.join(args)}) AS {_duck(out)})"
    if _kind(out) != "float":
        raise _RefusalError(f"sum_horizontal() with a {out} result", "sum numbers")
    args = _one_type(c, node)
    return _float_sum(c, args, ignore_nulls, c.literal(0.0, out))


def _float_sum(c: _Compiler, args: list[str], ignore_nulls: bool, zero: str) -> str:
    """Left to right; with ``ignore_nulls`` a missing value counts as 0 (Polars fills them
    with zero, so ``-0.0 + missing`` is ``0.0``)."""
    if ignore_nulls:
        args = [f"coalesce({a}, {zero})" for a in args]
    return "(" + " + ".join(args) + ")"


def _mean_horizontal(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    ignore_nulls = bool(node.params[0]) if node.params else True
    if _kind(out) != "float":
        raise _RefusalError(f"mean_horizontal() with a {out} result", "average numbers")
    args = _one_type(c, node)
    if not ignore_nulls:
        return f"(({' + '.join(args)}) / {c.literal(float(len(args)), out)})"

    def body(names: list[str]) -> str:
        count = " + ".join(f"CAST({n} IS NOT NULL AS INTEGER)" for n in names)
        total = _float_sum(c, names, True, c.literal(0.0, out))
        return (f"(CASE WHEN ({count}) = 0 THEN NULL "
                f"ELSE {total} / CAST(({count}) AS {_duck(out)}) END)")
    return _let_all(c, args, body)


def _is_null(negate: bool) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        return f"({c.sql(node.args[0])} IS {'NOT ' if negate else ''}NULL)"
    return handler


def _float_predicate(fn: str, on_other: bool) -> Handler:
    """is_nan / is_not_nan / is_finite / is_infinite; on integers the answer is the same for
    every present value."""
    def handler(c: _Compiler, node: Call) -> str:
        x = c.sql(node.args[0])
        kind = _kind(c.t(node.args[0]))
        if kind == "float":
            return f"{fn}({x})"
        if kind in ("int", "bool", "decimal"):
            answer = "TRUE" if on_other else "FALSE"
            return f"(CASE WHEN {x} IS NOT NULL THEN {answer} END)"
        raise _RefusalError(f"{fn}() on {c.t(node.args[0])}", "apply it to numbers")
    return handler


def _not(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    x = c.operand(node.args[0], out)
    if _kind(out) == "bool":
        return f"(NOT {x})"
    if _kind(out) == "int":
        return f"CAST((~{x}) AS {_duck(out)})"
    raise _RefusalError(f"not_() on {out}", "apply it to booleans or integers")


def _is_between(c: _Compiler, node: Call) -> str:
    closed = str(node.params[0])
    x, lower, upper = node.args
    low_op = ">=" if closed in ("both", "left") else ">"
    high_op = "<=" if closed in ("both", "right") else "<"
    xl, lo = c.pair(x, lower)
    xh, hi = c.pair(x, upper)
    if xl == xh:
        return c.let(xl, lambda v: f"(({v} {low_op} {lo}) AND ({v} {high_op} {hi}))")
    return f"(({xl} {low_op} {lo}) AND ({xh} {high_op} {hi}))"


def _is_in(c: _Compiler, node: Call) -> str:
    """Polars' ``is_in``: a missing value is missing (or, with ``nulls_equal``, whether the
    list holds a null); a present value is in the list or not (a null in the list does not
    make the answer missing, unlike SQL's IN)."""
    values = _lit_value(node, 1)
    if not isinstance(values, list):
        values = [values]
    nulls_equal = bool(node.params[0]) if node.params else False
    subject = c.t(node.args[0])
    inner = getattr(c.t(node.args[1]), "inner", subject)
    common = c.common(subject, inner)
    target = subject if common is None else common
    x = c.operand(node.args[0], target)
    present = [c.cast(c.literal(v, inner), inner, target) for v in values if v is not None]
    has_null = len(present) < len(values)
    if _kind(target) == "str":
        x = _binary_collation(x)
        present = [_binary_collation(p) for p in present]
    if_null = ("TRUE" if has_null else "FALSE") if nulls_equal else "NULL"
    if not present:
        return f"(CASE WHEN {x} IS NULL THEN {if_null} ELSE FALSE END)"
    return c.let(x, lambda v: (f"(CASE WHEN {v} IS NULL THEN {if_null} "
                               f"ELSE coalesce({v} IN ({', '.join(present)}), FALSE) END)"))
