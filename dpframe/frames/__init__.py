"""pandas accessor and Polars namespaces (``.dp``)."""

from __future__ import annotations

from dpframe.frames import engines as _engines  # noqa: F401 - .dp of DuckDB, Spark, Dask
from dpframe.frames import pandas as _pandas  # noqa: F401 - registers DataFrame.dp
from dpframe.frames import polars as _polars  # noqa: F401 - registers DataFrame/LazyFrame.dp
from dpframe.frames.groupby import DPGroupBy
from dpframe.frames.namespace import DPNamespace

__all__ = ["DPGroupBy", "DPNamespace"]
