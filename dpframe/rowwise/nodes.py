"""The row-wise expression tree dpframe verifies and then compiles for each engine.

A derivation's expressions (narwhals or Polars) are read from the Polars plan they build on an
empty frame of the data's schema (:mod:`dpframe.rowwise.reading`), node by node, into the small
typed tree below. Nothing the user wrote runs on data: every engine evaluates what dpframe
*compiles* from this tree (:mod:`dpframe.rowwise.polars_target`, ``duckdb_target``,
``spark_target``), in a form that cannot fail on any value (``docs/frames.md``, "What each
function computes").

Every node carries the Polars dtype Polars' own type rules give it on the input schema (after
Polars inserted its implicit casts, which appear as :class:`Cast` nodes), so the compilers know,
for example, the integer width an addition is checked against.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Binary", "Call", "Cast", "Col", "Lit", "RowExpr", "When", "walk"]


@dataclass(frozen=True, eq=False)
class RowExpr:
    """A node of a verified row-wise expression; ``dtype`` is its Polars dtype."""

    dtype: Any

    def children(self) -> tuple[RowExpr, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Col(RowExpr):
    """The value of column ``name`` in the same row."""

    name: str


@dataclass(frozen=True, eq=False)
class Lit(RowExpr):
    """A literal scalar (a Python value; a list for ``is_in`` / ``replace`` tables)."""

    value: Any


@dataclass(frozen=True, eq=False)
class Binary(RowExpr):
    """``left op right``; ``op`` is Polars' operator name (``"Plus"``, ``"Eq"``, ...)."""

    op: str
    left: RowExpr
    right: RowExpr

    def children(self) -> tuple[RowExpr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, eq=False)
class Cast(RowExpr):
    """``expr`` converted to ``dtype``; a value that does not convert becomes missing (every
    cast is compiled non-strict, whatever the user asked)."""

    expr: RowExpr

    def children(self) -> tuple[RowExpr, ...]:
        return (self.expr,)


@dataclass(frozen=True, eq=False)
class When(RowExpr):
    """``when(predicate).then(then).otherwise(otherwise)``: chosen row by row."""

    predicate: RowExpr
    then: RowExpr
    otherwise: RowExpr

    def children(self) -> tuple[RowExpr, ...]:
        return (self.predicate, self.then, self.otherwise)


@dataclass(frozen=True, eq=False)
class Call(RowExpr):
    """An element-wise function of :data:`dpframe.rowwise.functions.FUNCTIONS`: ``name`` as
    Polars names it, ``args`` its expression inputs (the first is the subject), ``params`` its
    options from the plan (``function_data`` after the name: decimals, flags, ...)."""

    name: str
    args: tuple[RowExpr, ...]
    params: tuple[Any, ...] = ()

    def children(self) -> tuple[RowExpr, ...]:
        return self.args


def walk(expr: RowExpr) -> Iterator[RowExpr]:
    """Every node of ``expr``, depth first."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children())
