"""The histogram's bin step on a float64 numpy column of a pandas frame, computed in numpy.

Every other pandas derivation is evaluated in Polars (:mod:`dpframe.backends.pandas._rowwise`):
the column goes to Polars, the verified tree runs there, the result comes back as a nullable
pandas column. For the one step dpframe itself builds for ``histogram`` (the hidden bin column,
:func:`dpframe.frames.bins.bin_step`) over a column whose dtype is numpy's ``float64``, that
round trip costs more than the search: here the same column is computed with one
``np.searchsorted`` straight into a pandas ``Int64`` column.

The route is chosen from public facts alone: the step's structure (node by node, the exact tree
``bin_step`` verifies, :func:`bin_search`: the internal search node no user expression can
contain, over a column read as Float64 with no cast, its edges and its missing-value branch)
and the column's dtype. Nothing reads a value to choose it.

What it computes is what the Polars compilation computes, value for value
(``tests/backends/pandas/test__bins.py`` compares both over random edges and every kind of
float): with the inner edges ``e_1 < … < e_{B−1}``,

* a present value ``x`` (not NaN; a numpy float64 column holds no null) gets the number of
  inner edges ``e ≤ x``: ``searchsorted(edges, x, side="right")``, IEEE comparison in both
  (``-0.0`` equals ``0.0``; ``-inf`` is in bin 0, ``+inf`` in the last bin; subnormals are
  ordinary numbers);
* a NaN gets the tree's ``otherwise``: a missing bin (rule ``"drop"``) or the fill value's bin
  (a literal the tree carries).

Total: ``searchsorted`` and ``isnan`` take any float64 (NaN included) without an error or a
warning, under ``np.errstate`` all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe.rowwise.functions import SEARCH_EDGES
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When

__all__ = ["BinSearch", "bin_column", "bin_search"]


@dataclass(frozen=True)
class BinSearch:
    """A verified bin step, read from its tree: the bin of ``column`` over the sorted inner
    ``edges``; a NaN gets ``fill`` (None: missing)."""

    column: str
    edges: np.ndarray
    fill: int | None


def bin_search(columns: Any, schema: Any) -> BinSearch | None:
    """The bin step ``columns`` (a ``with_columns`` step's ``(name, tree)`` pairs) computes, if
    it is exactly :func:`dpframe.frames.bins.bin_step`'s tree over a column the verified
    ``schema`` reads as Float64; None for any other step (it keeps the Polars route)."""
    if len(columns) != 1:
        return None
    tree = columns[0][1]
    if not (isinstance(tree, When) and _is(tree, "Int64")):
        return None
    search = tree.then
    if not (isinstance(search, Call) and search.name == SEARCH_EDGES
            and _is(search, "Int64") and len(search.args) == 1 and len(search.params) == 1):
        return None
    column = _float_column(search.args[0])
    if column is None or str(schema.get(column)) != "Float64" or not _present(
            tree.predicate, column):
        return None
    edges = _edges(search.params[0])
    if edges is None:
        return None
    return _with_fill(column, edges, tree.otherwise)


def _is(node: RowExpr, dtype: str) -> bool:
    return str(node.dtype) == dtype


def _float_column(node: RowExpr) -> str | None:
    """The column ``node`` reads as it is, if it is a Float64 column (no cast)."""
    if type(node) is Col and _is(node, "Float64") and isinstance(node.name, str):
        return node.name
    return None


def _call(node: RowExpr, name: str, dtype: str, arity: int) -> tuple[RowExpr, ...] | None:
    """The arguments of ``node`` if it is a call of ``name`` with no parameters."""
    if (type(node) is Call and node.name == name and _is(node, dtype)
            and len(node.args) == arity and not node.params):
        return node.args
    return None


def _present(node: RowExpr, column: str) -> bool:
    """``node`` is ``~(x.is_null() | x.is_nan()).fill_null(False)`` over ``column``."""
    (inner,) = _call(node, "BooleanFunction.Not", "Boolean", 1) or (None,)
    filled = _call(inner, "fill_null", "Boolean", 2) if inner is not None else None
    if filled is None:
        return False
    either, default = filled
    if not (type(default) is Lit and _is(default, "Boolean") and default.value is False):
        return False
    if not (type(either) is Binary and either.op == "Or" and _is(either, "Boolean")):
        return False
    null = _call(either.left, "BooleanFunction.IsNull", "Boolean", 1)
    nan = _call(either.right, "BooleanFunction.IsNan", "Boolean", 1)
    return (null is not None and nan is not None and _float_column(null[0]) == column
            and _float_column(nan[0]) == column)


def _edges(params: Any) -> np.ndarray | None:
    """The inner edges as float64, if they are Python floats, finite and strictly
    increasing (what ``bin_step`` passes; anything else keeps the Polars route)."""
    if not isinstance(params, tuple) or not all(type(e) is float for e in params):
        return None
    edges = np.array(params, dtype=np.float64)
    if not np.isfinite(edges).all() or (edges.size > 1 and not (np.diff(edges) > 0).all()):
        return None
    return edges


def _with_fill(column: str, edges: np.ndarray, otherwise: RowExpr) -> BinSearch | None:
    """The search with the missing-value branch: ``Int64(null)`` (a missing bin) or a bin
    number literal (the fill value's bin)."""
    if (type(otherwise) is Cast and _is(otherwise, "Int64") and type(otherwise.expr) is Lit
            and _is(otherwise.expr, "Null") and otherwise.expr.value is None):
        return BinSearch(column, edges, None)
    if (type(otherwise) is Lit and _is(otherwise, "Int64") and type(otherwise.value) is int
            and 0 <= otherwise.value <= edges.size):
        return BinSearch(column, edges, otherwise.value)
    return None


def bin_column(series: Any, search: BinSearch, name: str) -> Any:
    """The bins of a float64 numpy column ``series`` as a pandas ``Int64`` column named
    ``name`` on the same index, or None when ``series`` is not such a column (a pandas
    dtype only: nullable, Arrow-backed, another width or byte order keep the Polars
    route)."""
    import pandas as pd

    if not (isinstance(series, pd.Series) and isinstance(series.dtype, np.dtype)
            and series.dtype == _FLOAT64):
        return None
    x = series.to_numpy(copy=False)
    with np.errstate(all="ignore"):
        bins = np.searchsorted(search.edges, x, side="right").astype(np.int64, copy=False)
        missing = np.isnan(x)
    if search.fill is None:
        bins[missing] = 0
        mask = missing
    else:
        bins[missing] = search.fill
        mask = np.zeros(len(bins), dtype=np.bool_)
    return pd.Series(pd.arrays.IntegerArray(bins, mask), index=series.index, name=name,
                     copy=False)


_FLOAT64 = np.dtype(np.float64)
