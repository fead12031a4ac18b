"""Verified derivations of pandas frames (and Dask partitions), evaluated in Polars.

pandas has no single arithmetic: numpy columns wrap on overflow and raise on a negative integer
power, Arrow-backed ones raise on overflow and on lossy casts, nullable ones refuse a float in
an integer column, and the dtype of a result can depend on the values (an integer column with
a missing value turns float). A derivation whose outcome depends on which of these a value
hits is a privacy leak. dpframe therefore evaluates a pandas derivation in Polars, the engine
that verified it, under the total rules of :mod:`dpframe.backends.polars._rowwise`, and gives the
result back to pandas with the dtype the plan says (nullable pandas dtypes, or Arrow-backed for
the rest). Only the columns the expressions read are converted; copied columns keep their
pandas column untouched.

Every conversion here is total: numbers, booleans, dates and Arrow-backed or nullable columns go
through Arrow; an ``object`` column (typed String by the schema dpframe verifies against) keeps
its ``str`` values and reads anything else as missing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from dpframe.backends.pandas._bins import bin_column, bin_search
from dpframe.backends.polars import _rowwise as polars_rowwise
from dpframe.engine import engine_dtypes
from dpframe.rowwise.engines import RowwiseTarget
from dpframe.rowwise.nodes import Col, RowExpr, walk

__all__ = ["TARGET", "PandasTarget", "apply_step", "from_polars", "polars_schema",
           "to_polars_columns"]

#: pandas nullable dtypes for the Polars dtypes a verified expression produces.
_PANDAS_NULLABLE = {
    "Float64": "Float64", "Float32": "Float32", "Int64": "Int64", "Int32": "Int32",
    "Int16": "Int16", "Int8": "Int8", "UInt64": "UInt64", "UInt32": "UInt32",
    "UInt16": "UInt16", "UInt8": "UInt8", "Boolean": "boolean", "String": "string",
}


def apply_step(frame: Any, kind: str, predicate: RowExpr | None,
               columns: Sequence[tuple[str, RowExpr]], schema: Mapping[str, Any]) -> Any:
    """One verified step on a pandas frame whose Polars schema (as verified) is ``schema``."""
    import pandas as pd

    if kind == "with_columns":
        binned = _binned(frame, columns, schema)
        if binned is not None:
            return binned
    trees = [predicate] if predicate is not None else [e for _, e in columns]
    data = to_polars_columns(frame, _read_columns(trees), schema)
    height = len(frame)
    if kind == "filter":
        assert predicate is not None
        # (with_columns broadcasts a literal predicate to every row; select would not; and
        # _broadcast makes sure of it whatever the expression reads)
        mask = polars_rowwise.apply_step(data, "with_columns", None,
                                        [("__dp_mask", predicate)])
        keep = _broadcast(mask.get_column("__dp_mask"), height).fill_null(False)
        return frame[keep.to_numpy()]
    computed = [(name, e) for name, e in columns if not isinstance(e, Col)]
    values = polars_rowwise.apply_step(data, "with_columns", None, [
        (f"__dp_{i}", e) for i, (_, e) in enumerate(computed)]) if computed else None
    out: dict[str, Any] = {}
    done = 0
    for name, e in columns:
        if isinstance(e, Col):
            out[name] = frame[e.name]
        else:
            assert values is not None
            out[name] = from_polars(_broadcast(values.get_column(f"__dp_{done}"), height),
                                    frame.index)
            done += 1
    if kind == "select":
        return pd.DataFrame(out, index=frame.index)
    result = frame.copy(deep=False)
    for name, series in out.items():
        result[name] = series
    return result


def _binned(frame: Any, columns: Sequence[tuple[str, RowExpr]],
            schema: Mapping[str, Any]) -> Any:
    """The histogram's bin step (:func:`~dpframe.backends.pandas._bins.bin_search`: dpframe's
    own step, read from its structure) over a float64 numpy column, computed in numpy
    (:func:`~dpframe.backends.pandas._bins.bin_column`, the bins Polars gives, without the
    round trip); None for every other step or column (they are evaluated in Polars)."""
    search = bin_search(columns, schema)
    if search is None or search.column not in frame.columns:
        return None
    name = columns[0][0]
    series = bin_column(frame[search.column], search, name)
    if series is None:
        return None
    result = frame.copy(deep=False)
    result[name] = series
    return result


def _broadcast(series: Any, height: int) -> Any:
    """A computed column at the frame's height: a scalar result (an expression reading no
    column: a literal, a comparison of literals) repeated on every row, so the step is total
    by construction, not by how the engine happens to broadcast. Any other length is a bug
    (the caller's safety net reports it)."""
    if len(series) == height:
        return series
    if len(series) == 1:
        return series.new_from_index(0, height) if height else series.clear()
    raise AssertionError("a row-wise expression gave a column of another height")


def _read_columns(trees: Sequence[RowExpr]) -> list[str]:
    names: dict[str, None] = {}
    for tree in trees:
        for node in walk(tree):
            if isinstance(node, Col):
                names[node.name] = None
    return list(names)


def polars_schema(frame: Any) -> dict[str, Any]:
    """The Polars dtype each pandas column is read as in derivations, from the dtypes alone:
    narwhals' mapping, numpy datetimes and timedeltas of a unit Polars lacks (seconds, days)
    read in milliseconds, and ``Object`` for what neither can map (periods, intervals, sparse
    and complex columns, Arrow dates in milliseconds...), which no expression may read.
    The pandas dtypes are those dpframe remembered for its own private object (its schema
    cannot change, :func:`dpframe.engine.engine_dtypes`), else read from ``frame``."""
    out: dict[str, Any] = {}
    known = engine_dtypes(frame)
    for name, dtype in (known if known is not None else frame.dtypes).items():
        out[name] = _polars_dtype(frame, name, dtype)
    return out


def _polars_dtype(frame: Any, name: Any, dtype: Any) -> Any:
    """:func:`polars_schema` of one column, cached per pandas dtype (its mapping depends on
    the dtype alone; object columns, whose mapping narwhals may refine, are not cached)."""
    key = None if str(dtype) == "object" else (type(dtype), str(dtype))
    if key is not None:
        with contextlib.suppress(TypeError):
            found = _DTYPES.get(key)
            if found is not None:
                return found
    mapped = _map_dtype(frame, name, dtype)
    if key is not None and len(_DTYPES) < 1024:
        _DTYPES[key] = mapped
    return mapped


_DTYPES: dict[Any, Any] = {}


def _map_dtype(frame: Any, name: Any, dtype: Any) -> Any:
    import narwhals as nw
    import numpy as np
    import polars as pl

    if isinstance(dtype, np.dtype) and dtype.kind in "mM" and np.datetime_data(
            dtype)[0] not in ("ns", "us", "ms"):
        return pl.Datetime("ms") if dtype.kind == "M" else pl.Duration("ms")
    try:  # (an empty slice: the mapping never looks at values)
        empty = nw.from_native(frame[[name]].iloc[:0], eager_only=True)
        mapped = empty.schema.to_polars()[name]
    except Exception:  # a dtype narwhals cannot map: unreadable in derivations
        return pl.Object
    # (an empty Polars frame would turn Unknown into Null)
    return pl.Object if mapped == pl.Unknown else mapped


def to_polars_columns(frame: Any, names: Sequence[str], schema: Mapping[str, Any]) -> Any:
    """A Polars frame of ``frame``'s columns ``names``, each with its verified Polars dtype
    (plus one row-count column when no column is read, so literals broadcast to the rows)."""
    import polars as pl

    if not names:
        import numpy as np

        return pl.DataFrame({"__dp_rows": np.zeros(len(frame), dtype=np.int8)})
    return pl.DataFrame([_column(frame[name], name, schema[name]) for name in names])


def _column(series: Any, name: str, dtype: Any) -> Any:
    """One pandas column as a Polars Series of ``dtype``, totally: a value that cannot be
    represented (a string that is not valid Unicode, a category that is not a string) is
    missing, never an error."""
    import numpy as np
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    native = series.dtype
    if isinstance(native, np.dtype) and native.kind in "biuf":
        out = pl.Series(name, series.to_numpy(copy=False))
    elif isinstance(native, np.dtype) and native.kind in "mM":
        values = series.to_numpy(copy=False)
        if np.datetime_data(native)[0] not in ("ns", "us", "ms"):
            values = values.astype(("datetime64" if native.kind == "M" else "timedelta64")
                                   + "[ms]")
        out = pl.Series(name, values)
    elif isinstance(native, np.dtype | pd.StringDtype | pd.CategoricalDtype):
        out = _strings(series, name)
    else:  # nullable and Arrow-backed arrays convert through Arrow
        out = pl.Series(name, pl.from_arrow(pa.array(series.array)))
    if out.dtype != dtype:
        out = out.cast(dtype, strict=False)
    return out


def _strings(series: Any, name: str) -> Any:
    """Text values as a Polars String Series: the ``str`` values (categories read as their
    text), anything else — and a string that is not valid Unicode (a lone surrogate) —
    missing."""
    import pandas as pd
    import polars as pl

    if isinstance(series.dtype, pd.CategoricalDtype):  # each category's text, by its code
        categories = [str(c) for c in series.cat.categories]
        codes = pl.Series(series.cat.codes.to_numpy())
        return codes.replace_strict(list(range(len(categories))), categories, default=None,
                                    return_dtype=pl.String).alias(name)
    items = [v if isinstance(v, str) else None for v in series.array]
    try:
        return pl.Series(name, items, dtype=pl.String)
    except Exception:  # a string that is not valid Unicode: the same values, those missing
        return pl.Series(name, [v if v is None or _encodes(v) else None for v in items],
                         dtype=pl.String)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def from_polars(series: Any, index: Any) -> Any:
    """A pandas Series with ``index`` holding a Polars result: nullable pandas dtypes for
    numbers, booleans and strings, Arrow-backed for the rest; never inferred from values."""
    import pandas as pd
    import polars as pl

    if series.dtype in (pl.Int128, pl.UInt128):  # pandas holds no 128-bit integers
        series = series.cast(pl.Int64, strict=False)
    arrow = series.to_arrow()
    name = _PANDAS_NULLABLE.get(str(series.dtype))
    if name is not None:
        dtype = pd.api.types.pandas_dtype(name)
        if name == "string":
            import pyarrow as pa

            arrow = arrow.cast(pa.large_string())
        return pd.Series(dtype.__from_arrow__(arrow), index=index, name=series.name, copy=False)
    return pd.Series(pd.arrays.ArrowExtensionArray(arrow), index=index, name=series.name,
                     copy=False)


class PandasTarget(RowwiseTarget):
    """pandas: each step in Polars, on the columns it reads (:func:`apply_step`)."""

    label = "pandas"

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        return apply_step(native, step.kind, step.predicate, step.columns,
                          schema or polars_schema(native))


#: the compiler the pandas adapter names (``Backend.rowwise``)
TARGET = PandasTarget()
