"""The one place that tells dataframe libraries apart: one adapter per engine.

:func:`backend_of` names the :class:`Backend` of a native frame; each engine is a subclass
in its own folder (:mod:`.pandas`, :mod:`.polars`, :mod:`.duckdb`, :mod:`.spark`,
:mod:`.dask`) that answers the questions that differ between libraries: detection, row count,
schema, dtypes, the private snapshot releases read, the handle given to the user, the files a
frame reads, file-reader checks, result tables, the handle of the ledger, privacy-unit
bounding — and dispatches the one aggregation pass (:func:`aggregate`) to the engine's path:
:mod:`dpframe.engine._aggregation`'s numpy kernel and expressions, asking the adapter what differs,
Spark SQL text (:mod:`.spark._sql`), Dask per partition (:mod:`.dask._partitions`). Detection never
imports a library: a frame of library X can only exist if X is already in ``sys.modules``, so
we look there (the approach narwhals takes). No module outside this package tells engines
apart (``tests/project/test_layers.py`` checks it).

Adding an engine is one subclass registered in :data:`BACKENDS` plus, where narwhals does not
already run the per-row expressions there, its :meth:`Backend.engine_sums` and a row-wise
target in :mod:`dpframe.rowwise`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.backends._base import Backend, registered
from dpframe.backends._file_inputs import CSV_POLARS
from dpframe.backends.dask._adapter import DaskBackend, is_dask_frame
from dpframe.backends.duckdb._adapter import DuckDBBackend, duckdb_parse, is_duckdb_relation
from dpframe.backends.pandas._adapter import PandasBackend, is_pandas_frame
from dpframe.backends.pandas._memory import pandas_ranges
from dpframe.backends.polars._adapter import (
    PolarsBackend,
    PolarsLazyBackend,
    is_polars_eager,
    is_polars_lazy,
)
from dpframe.backends.polars._memory import anchored_series, arrow_chunks
from dpframe.backends.polars._rowwise import apply_step
from dpframe.backends.spark._adapter import SparkBackend, is_spark_frame
from dpframe.engine import Bounding
from dpframe.errors import UnsupportedInputError
from dpframe.query import Agg

__all__ = [
    "BACKENDS",
    "CSV_POLARS",
    "DASK",
    "DUCKDB",
    "PANDAS",
    "POLARS",
    "POLARS_LAZY",
    "SPARK",
    "Backend",
    "aggregate",
    "anchored_series",
    "apply_step",
    "arrow_chunks",
    "backend_named",
    "backend_of",
    "duckdb_parse",
    "is_dask_frame",
    "is_duckdb_relation",
    "is_pandas_frame",
    "is_polars_eager",
    "is_polars_lazy",
    "is_spark_frame",
    "pandas_ranges",
]

PANDAS: Backend = PandasBackend()
POLARS: Backend = PolarsBackend()
POLARS_LAZY: Backend = PolarsLazyBackend()
DUCKDB: Backend = DuckDBBackend()
SPARK: Backend = SparkBackend()
DASK: Backend = DaskBackend()

#: every registered engine, in the order detection tries them
BACKENDS: tuple[Backend, ...] = (PANDAS, POLARS, POLARS_LAZY, DUCKDB, SPARK, DASK)


def backend_of(frame: Any) -> Backend:
    """The :class:`Backend` of a native frame; :class:`UnsupportedInputError` otherwise."""
    for backend in BACKENDS:
        if backend.detect(frame):
            return backend
    raise UnsupportedInputError(
        "dpframe protects pandas DataFrames, Polars DataFrames/LazyFrames, DuckDB relations, "
        "PySpark DataFrames and Dask DataFrames, got "
        f"{type(frame).__module__}.{type(frame).__name__}"
    )


def backend_named(name: str) -> Backend:
    """The registered backend logged as ``name``."""
    return registered(name)


def aggregate(native: Any, aggs: Sequence[Agg], *, missing: Mapping[str, Any],
              group_by: str | tuple[str, ...] | None = None, keys: Sequence[Any] | None = None,
              method: str = "auto", bounding: Bounding | None = None,
              columns: Mapping[str, Any] | None = None) -> dict[Agg, np.ndarray]:
    """Every aggregate of ``aggs``, exactly, in one pass over ``native``, by its engine's
    adapter (:meth:`Backend.aggregate`; the arguments of
    :func:`dpframe.engine._aggregation.aggregate`)."""
    return backend_of(native).aggregate(native, aggs, missing=missing, group_by=group_by,
                                        keys=keys, method=method, bounding=bounding,
                                        columns=columns)
