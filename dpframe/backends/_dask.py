"""Dask DataFrames: mutable collections over a graph (assigning a column rebinds the object),
so dpframe keeps collections of its own."""

from __future__ import annotations

import sys
from typing import Any

from dpframe.backends._base import Backend

__all__ = ["DaskBackend", "is_dask_frame"]


def is_dask_frame(obj: Any) -> bool:
    """True for a Dask ``DataFrame``."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(obj, dd.DataFrame)


class DaskBackend(Backend):
    """Dask DataFrames (results in pandas: a few rows)."""

    name = "dask"
    family = "dask"
    result_family = "pandas"
    detect = staticmethod(is_dask_frame)

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


