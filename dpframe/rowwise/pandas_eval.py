"""Verified derivations of pandas frames (and Dask partitions), evaluated in Polars.

pandas has no single arithmetic: numpy columns wrap on overflow and raise on a negative integer
power, Arrow-backed ones raise on overflow and on lossy casts, nullable ones refuse a float in
an integer column, and the dtype of a result can depend on the values (an integer column with
a missing value turns float). A derivation whose outcome depends on which of these a value
hits is a privacy leak. dpframe therefore evaluates a pandas derivation in Polars, the engine
that verified it, under the total rules of :mod:`dpframe.rowwise.polars_target`, and gives the
result back to pandas with the dtype the plan says (nullable pandas dtypes, or Arrow-backed for
the rest). Only the columns the expressions read are converted; copied columns keep their
pandas column untouched.

Every conversion here is total: numbers, booleans, dates and Arrow-backed or nullable columns go
through Arrow; an ``object`` column (typed String by the schema dpframe verifies against) keeps
its ``str`` values and reads anything else as missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpframe.rowwise import polars_target
from dpframe.rowwise.nodes import Col, RowExpr, walk

__all__ = ["apply_step", "from_polars", "to_polars_columns"]

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

    trees = [predicate] if predicate is not None else [e for _, e in columns]
    data = to_polars_columns(frame, _read_columns(trees), schema)
    if kind == "filter":
        assert predicate is not None
        # (with_columns broadcasts a literal predicate to every row; select would not)
        mask = polars_target.apply_step(data, "with_columns", None,
                                        [("__dp_mask", predicate)])
        return frame[mask.get_column("__dp_mask").fill_null(False).to_numpy()]
    computed = [(name, e) for name, e in columns if not isinstance(e, Col)]
    values = polars_target.apply_step(data, "with_columns", None, [
        (f"__dp_{i}", e) for i, (_, e) in enumerate(computed)]) if computed else None
    out: dict[str, Any] = {}
    done = 0
    for name, e in columns:
        if isinstance(e, Col):
            out[name] = frame[e.name]
        else:
            assert values is not None
            out[name] = from_polars(values.get_column(f"__dp_{done}"), frame.index)
            done += 1
    if kind == "select":
        return pd.DataFrame(out, index=frame.index)
    result = frame.copy(deep=False)
    for name, series in out.items():
        result[name] = series
    return result


def _read_columns(trees: Sequence[RowExpr]) -> list[str]:
    names: dict[str, None] = {}
    for tree in trees:
        for node in walk(tree):
            if isinstance(node, Col):
                names[node.name] = None
    return list(names)


def to_polars_columns(frame: Any, names: Sequence[str], schema: Mapping[str, Any]) -> Any:
    """A Polars frame of ``frame``'s columns ``names``, each with its verified Polars dtype
    (plus one row-count column when no column is read, so literals broadcast to the rows)."""
    import polars as pl

    if not names:
        import numpy as np

        return pl.DataFrame({"__dp_rows": np.zeros(len(frame), dtype=np.int8)})
    return pl.DataFrame([_column(frame[name], name, schema[name]) for name in names])


def _column(series: Any, name: str, dtype: Any) -> Any:
    import numpy as np
    import polars as pl
    import pyarrow as pa

    values = series.array
    native = series.dtype
    if isinstance(native, np.dtype) and native.kind in "biufmM":
        out = pl.Series(name, series.to_numpy(copy=False))
    elif isinstance(native, np.dtype):  # object: its str values; anything else is missing
        out = pl.Series(name, [v if isinstance(v, str) else None for v in values],
                        dtype=pl.String)
    else:  # extension arrays (nullable, Arrow-backed, categorical, string) convert via Arrow
        out = pl.Series(name, pl.from_arrow(pa.array(values)))
    if out.dtype != dtype:
        out = out.cast(dtype, strict=False)
    return out


def from_polars(series: Any, index: Any) -> Any:
    """A pandas Series with ``index`` holding a Polars result: nullable pandas dtypes for
    numbers, booleans and strings, Arrow-backed for the rest; never inferred from values."""
    import pandas as pd

    arrow = series.to_arrow()
    name = _PANDAS_NULLABLE.get(str(series.dtype))
    if name is not None:
        dtype = pd.api.types.pandas_dtype(name)
        if name == "string":
            import pyarrow as pa

            arrow = arrow.cast(pa.large_string())
        return pd.Series(dtype.__from_arrow__(arrow), index=index, name=series.name)
    return pd.Series(pd.arrays.ArrowExtensionArray(arrow), index=index, name=series.name)
