"""The ``[with_columns]`` table of a release spec: derived columns, as the API's
``frame.dp.with_columns(<expr>.alias(name), bounds={name: (lo, hi)}, missing={name: rule})``.

Each entry is ``name = { expr = "income / 1000", bounds = [0, 250], missing = "midpoint" }``
(``bounds`` and ``missing`` are ``with_columns``' parameters: a derived column a statistic
reads needs bounds; ``missing`` is its rule, default the fill word given under ``missing`` for
every column, else "drop"). The expression is arithmetic on columns and numbers, compiled here
to a narwhals expression from Python's syntax tree, with a fixed list of operators and
functions (nothing is evaluated as Python); the library then verifies it as it verifies any
``with_columns`` (row-wise, total), before any data is read.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any

from dpframe.errors import ParameterError
from dpframe.provenance import validate_bounds, validate_missing
from dpframe.spec._columns import _one
from dpframe.spec._model import DerivedColumn
from dpframe.spec._toml import Path_, _Checker

__all__ = ["FUNCTIONS", "compile_expression", "derived_columns", "expression_columns",
           "with_columns"]

_KEYS = ("expr", "bounds", "missing")

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

#: The functions an expression may call, as narwhals methods: ``abs(x)``, ``sqrt(x)``,
#: ``log(x)`` (natural), ``exp(x)``, ``round(x, digits)``, ``clip(x, lower, upper)``,
#: ``min(a, b, ...)``/``max(a, b, ...)`` (row-wise), ``col("a name")`` (a column whose name
#: is not an identifier).
FUNCTIONS = ("abs", "sqrt", "log", "exp", "round", "clip", "min", "max", "col")


def _number(node: ast.expr) -> float | None:
    """A literal number (a negative one included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not \
            isinstance(node.value, bool):
        return float(node.value)
    return None


def _call(node: ast.Call, build: Callable[[ast.expr], Any]) -> Any:
    import narwhals as nw

    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
        raise ParameterError(f"unknown function; an expression may call {', '.join(FUNCTIONS)}")
    name, args = node.func.id, node.args
    if name == "col":
        if len(args) != 1 or not (isinstance(args[0], ast.Constant)
                                  and isinstance(args[0].value, str)):
            raise ParameterError('col takes one column name in quotes, e.g. col("net pay")')
        return nw.col(args[0].value)
    if name in ("min", "max"):
        if len(args) < 2:
            raise ParameterError(f"{name} takes two or more arguments (row-wise)")
        parts = [build(a) for a in args]
        return (nw.min_horizontal if name == "min" else nw.max_horizontal)(*parts)
    numbers = [_number(a) for a in args[1:]]
    arity = {"round": (1, 2), "clip": (3, 3)}.get(name, (1, 1))
    if not arity[0] <= len(args) <= arity[1] or any(x is None for x in numbers):
        raise ParameterError(f"{name} takes a column expression" + (
            " and numbers" if arity[1] > 1 else "") + f" ({arity[1]} argument"
            f"{'s' if arity[1] > 1 else ''} at most)")
    x = build(args[0])
    given = [float(v) for v in numbers if v is not None]
    if name == "round":
        return x.round(int(given[0]) if given else 0)
    if name == "clip":
        return x.clip(given[0], given[1])
    return getattr(x, name)()


def _build(node: ast.expr) -> Any:
    import narwhals as nw

    number = _number(node)
    if number is not None:
        return nw.lit(number)
    if isinstance(node, ast.Name):
        return nw.col(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_build(node.left), _build(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _build(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Call):
        return _call(node, _build)
    raise ParameterError("an expression is arithmetic (+ - * / // % **) on columns and numbers, "
                         f"with the functions {', '.join(FUNCTIONS)}")


def compile_expression(text: str) -> Any:
    """The narwhals expression of an arithmetic text, e.g. ``"income / hours"`` →
    ``nw.col("income") / nw.col("hours")``; :class:`ParameterError` for anything else."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ParameterError("not an expression, e.g. expr = \"income / 1000\"") from None
    return _build(tree.body)


def expression_columns(text: str) -> tuple[str, ...]:
    """The column names an expression reads (checked against the input's schema)."""
    tree = ast.parse(text.strip(), mode="eval")
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls]
    quoted = [n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name) and n.func.id == "col" and n.args
              and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)]
    return tuple(dict.fromkeys([*names, *quoted]))


def derived_columns(c: _Checker, raw: Any, bounds: Mapping[str, tuple[float, float]]
                    ) -> tuple[DerivedColumn, ...]:
    """``[with_columns]``: each entry's expression compiled (a refusal names its line), its
    bounds checked by :func:`dpframe.provenance.validate_bounds` and its missing rule
    by :func:`~dpframe.provenance.validate_missing` (within those bounds)."""
    t = c.table(raw, ("with_columns",), "[with_columns]")
    out = []
    for name, entry in t.items():
        path: Path_ = ("with_columns", name)
        e = c.table(entry, path, f"with_columns.{name}")
        c.known(e, path, _KEYS, f"with_columns.{name}")
        expr = c.string(c.required(e, "expr", path, f"with_columns.{name}",
                                   'expr = "income / 1000"'), (*path, "expr"),
                        f"with_columns.{name}.expr")
        c.library(compile_expression, expr, (*path, "expr"), f"with_columns.{name}.expr")
        if name in bounds:
            raise c.fail(path, f"with_columns.{name} replaces a column with [bounds]; a derived "
                         "column's bounds go in its own entry (bounds = [lower, upper])")
        pair = None
        if "bounds" in e:
            pair = c.library(functools.partial(_one, validate_bounds, name), e["bounds"],
                             (*path, "bounds"), f"with_columns.{name}.bounds")
        rule = None
        if "missing" in e:
            if pair is None:
                raise c.fail((*path, "missing"), f"with_columns.{name}: missing is the rule "
                             "of a bounded column; give bounds = [lower, upper] too")
            rule = c.library(functools.partial(_one, validate_missing, name,
                                               extra=({name: pair},)),
                             e["missing"], (*path, "missing"), f"with_columns.{name}.missing")
        out.append(DerivedColumn(name, expr, pair, rule, path))
    return tuple(out)


def with_columns(frame: Any, derived: tuple[DerivedColumn, ...]) -> Any:
    """``frame.dp.with_columns(...)`` of the spec's derived columns (``frame`` unchanged
    without any): one verified derivation, as the API makes it."""
    if not derived:
        return frame
    bounds = {d.name: d.bounds for d in derived if d.bounds is not None}
    missing = {d.name: d.missing for d in derived if d.missing is not None}
    return frame.dp.with_columns(*(compile_expression(d.expr).alias(d.name) for d in derived),
                                 bounds=bounds or None, missing=missing or None)
