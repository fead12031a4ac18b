"""Dask DataFrames: mutable collections over a graph (assigning a column rebinds the object),
so dpframe keeps collections of its own."""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe import engine, tick_keys
from dpframe.aggregates import ADDITIVE_KINDS, Agg
from dpframe.backends._base import Backend, registered
from dpframe.backends._text import invalid_pandas_column, text_dtype
from dpframe.errors import UnsupportedInputError
from dpframe.rowwise import engines as rowwise_engines

__all__ = ["DaskBackend", "is_dask_frame"]


def is_dask_frame(obj: Any) -> bool:
    """True for a Dask ``DataFrame``."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(obj, dd.DataFrame)


class DaskBackend(Backend):
    """Dask DataFrames (results in pandas: a few rows)."""

    name = "dask"
    family = "dask"
    rowwise = rowwise_engines.DASK
    result_family = "pandas"
    ticks_temporal_keys = True
    detect = staticmethod(is_dask_frame)

    def namespace_target(self) -> tuple[type, Any] | None:
        from dask.dataframe.extensions import register_dataframe_accessor

        return sys.modules["dask.dataframe"].DataFrame, register_dataframe_accessor

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """The in-memory path on each pandas partition (:mod:`dpframe.backends._dask_partitions`),
        for the additive kinds; None for others (the narwhals expressions run)."""
        if not all(a.kind in ADDITIVE_KINDS for a in aggs):
            return None
        from dpframe.backends._dask_partitions import dask_sums

        in_memory = functools.partial(engine.aggregate, backend=registered("pandas"))
        return dask_sums(frame, aggs, missing, group_by, keys, partition_sums=in_memory)

    def with_ticks(self, frame: Any, columns: Sequence[str], keep: Any = None) -> Any:
        return tick_keys.partitions_with_ticks(frame, columns, keep)

    def tick_kind(self, frame: Any, column: str) -> Any:
        return tick_keys.column_kind(frame._meta, column)

    def check_readers(self, frame: Any) -> None:
        """``read_csv`` must name every column's type in ``dtype=`` (or one type for all)."""
        for columns, dtype in _csv_reads(frame):
            declared = dtype is not None and (
                not isinstance(dtype, dict) or all(c in dtype for c in columns))
            if not declared:
                raise UnsupportedInputError(
                    "this Dask frame reads a CSV file whose column types Dask infers from its "
                    "first block; a later value that does not parse would then fail a "
                    "release. Declare every column's type: " + _DASK_FIX + ". Nothing was "
                    "read."
                )

    def reads_csv(self, frame: Any) -> bool:
        return bool(_csv_reads(frame))

    def parse_rows(self, frame: Any) -> int:
        return int(frame.map_partitions(
            lambda part: len(part.notna().sum(axis=1))).compute().sum())

    def invalid_text(self, frame: Any) -> bool:
        """pandas' check on every partition (Dask's Parquet reader takes Arrow strings
        without checking their UTF-8)."""
        if not any(text_dtype(d) for d in frame.dtypes):
            return False
        flags = frame.map_partitions(
            lambda part: bool(any(invalid_pandas_column(part[c]) for c in part.columns)),
            meta=(None, bool))
        return bool(flags.compute().any())

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        from dpframe.rowwise.pandas_eval import polars_schema

        return polars_schema(frame._meta)

    def snapshot(self, frame: Any) -> Any:
        """A new collection over the same graph: assigning a column to the user's object
        rebinds only that object."""
        return frame.copy()

    def handout(self, frame: Any) -> Any:
        """A separate collection: the user's assignments never reach dpframe's."""
        return frame.copy()

    def source_paths(self, frame: Any) -> list[str]:
        """The expression's ``path`` operands (read_parquet, read_csv, ...)."""
        return _dask_paths(getattr(frame, "expr", None))


_DASK_FIX = (
    "dd.read_csv(path, dtype={'age': 'float64', 'region': 'string', ...}) naming every "
    "column, or dtype=str and casts in a derivation (a cast that fails gives a missing value)"
)


def _csv_reads(frame: Any) -> list[tuple[list[str], Any]]:
    """(columns, dtype argument) of every pandas CSV reader in a Dask expression tree."""
    found: list[tuple[list[str], Any]] = []
    stack = [getattr(frame, "expr", None)]
    seen = 0
    while stack and seen < 10_000:
        expr = stack.pop()
        seen += 1
        if expr is None:
            continue
        parameters = getattr(expr, "_parameters", ())
        if "func" in parameters:
            func = expr.operand("func")
            keywords = getattr(func, "keywords", None) or {}
            reader = keywords.get("reader")
            if getattr(reader, "__name__", "") in ("read_csv", "read_table", "read_fwf"):
                kwargs = keywords.get("kwargs") or {}
                found.append((list(keywords.get("full_columns") or []), kwargs.get("dtype")))
        stack.extend(expr.dependencies())
    return found


def _dask_paths(expr: Any, depth: int = 0) -> list[str]:
    """``path`` operands of a Dask expression tree (read_parquet, read_csv, ...)."""
    if expr is None or depth > 50:
        return []
    found: list[str] = []
    path = getattr(expr, "path", None) if "path" in getattr(expr, "_parameters", ()) else None
    if isinstance(path, str):
        found.append(path)
    elif isinstance(path, list | tuple):
        found += [p for p in path if isinstance(p, str)]
    for dep in getattr(expr, "dependencies", lambda: [])():
        found += _dask_paths(dep, depth + 1)
    return found


