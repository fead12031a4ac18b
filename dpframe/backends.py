"""The one place that tells dataframe libraries apart.

Every other module asks this one: :func:`backend_of` names the :class:`Backend` of a native
frame, and the backend's methods answer the few questions that differ between libraries
(row count, schema, building a result table, whether a dtype can hold a missing value).
Detection never imports a library: a frame of library X can only exist if X is already in
``sys.modules``, so we look there (the approach narwhals takes).

Adding an engine is one :class:`Backend` entry in :data:`BACKENDS` (and its type guard) plus,
where narwhals does not already run the per-row expressions there, an aggregation path in
:mod:`dpframe.engine`. DuckDB, PySpark and Dask need none: the same narwhals expressions run
inside them and only per-group aggregates are collected.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpframe.errors import UnsupportedInputError

__all__ = [
    "BACKENDS",
    "DASK",
    "DUCKDB",
    "PANDAS",
    "POLARS",
    "POLARS_LAZY",
    "SPARK",
    "Backend",
    "backend_of",
    "is_dask_frame",
    "is_duckdb_relation",
    "is_pandas_frame",
    "is_polars_eager",
    "is_polars_lazy",
    "is_spark_frame",
]


def is_pandas_frame(obj: Any) -> bool:
    """True for a ``pandas.DataFrame`` (without importing pandas)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def is_polars_eager(obj: Any) -> bool:
    """True for a ``polars.DataFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.DataFrame)


def is_polars_lazy(obj: Any) -> bool:
    """True for a ``polars.LazyFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.LazyFrame)


def is_duckdb_relation(obj: Any) -> bool:
    """True for a DuckDB relation (``duckdb.DuckDBPyRelation``)."""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(obj, duckdb.DuckDBPyRelation)


def is_spark_frame(obj: Any) -> bool:
    """True for a PySpark ``DataFrame`` (classic or Spark Connect)."""
    for name in ("pyspark.sql.dataframe", "pyspark.sql.connect.dataframe"):
        mod = sys.modules.get(name)
        if mod is not None and isinstance(obj, mod.DataFrame):
            return True
    return False


def is_dask_frame(obj: Any) -> bool:
    """True for a Dask ``DataFrame``."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(obj, dd.DataFrame)


def _duplicate_names(names: list[Any]) -> UnsupportedInputError:
    """The error for a frame whose column names repeat (names are public schema)."""
    seen: dict[Any, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    repeated = [f"{name!r} ({n} times)" for name, n in seen.items() if n > 1]
    return UnsupportedInputError(
        f"column names must be unique, but {', '.join(repeated[:5]) or 'some'} repeat: rename "
        "or drop the copies before protecting (a statistic must name one column)"
    )


@dataclass(frozen=True)
class Backend:
    """What dpframe needs to know about one kind of frame.

    ``name``: as logged; ``family``: the library; ``lazy``: the frame is a plan, not data (its
    size is counted once at protect time); ``keeps_metadata``: the library carries ``attrs``
    through operations (pandas), so a protected frame can carry a handle to its ledger;
    ``readable_plans``: dpframe can read and verify the frame's logical plan (Polars
    LazyFrames), so native derivations are accepted; ``result_family``: the library small
    result tables are built in (pandas for the distributed engines: results are a few rows).
    """

    name: str
    family: str
    lazy: bool
    keeps_metadata: bool
    readable_plans: bool = False
    result_family: str = ""

    @property
    def results_in(self) -> str:
        return self.result_family or self.family

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        """The number of rows (for a lazy frame this runs the plan's count once). ``fresh``:
        count what the source holds now — a Polars plan answers a bare ``select(len())`` from
        the row count it cached when it first counted, so the re-count goes through a
        (no-op) filter that makes Polars read the source again."""
        if self.family == "pandas":
            return len(frame)
        if self.family == "polars" and not self.lazy:
            return int(frame.height)
        if self.family == "polars" and fresh:
            import polars as pl

            return int(frame.filter(pl.lit(True)).select(pl.len()).collect().item())
        import narwhals as nw

        return int(nw.from_native(frame).select(nw.len()).lazy().collect().item())

    def schema(self, frame: Any) -> dict[str, Any]:
        """Column name → dtype (native for pandas and Polars, narwhals otherwise), from the
        schema only (no data is read)."""
        if self.family == "pandas":
            if not frame.columns.is_unique:
                raise _duplicate_names(list(frame.columns))
            return dict(frame.dtypes.items())
        if self.family == "polars":
            return dict(frame.collect_schema().items() if self.lazy else frame.schema.items())
        import narwhals as nw

        names = list(frame.columns)  # DuckDB, Spark and Dask allow repeated names
        if len(set(names)) != len(names):
            raise _duplicate_names(names)
        return dict(nw.from_native(frame).collect_schema().items())

    def column_dtype(self, frame: Any, column: str) -> Any:
        """One column's dtype, as :meth:`schema` gives it, without converting the whole
        schema (pandas: the column's own dtype; Polars eager: its cached schema)."""
        if self.family == "pandas":
            return frame[column].dtype
        if self.family == "polars" and not self.lazy:
            return frame.get_column(column).dtype
        return self.schema(frame)[column]

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        """The frame's schema as Polars dtypes (for verifying expressions on an empty frame)."""
        if self.family == "polars":
            return self.schema(frame)
        import narwhals as nw

        if self.family == "pandas":
            from dpframe.rowwise.pandas_eval import polars_schema

            return polars_schema(frame)
        if self.name == "dask":
            from dpframe.rowwise.pandas_eval import polars_schema

            return polars_schema(frame._meta)
        return dict(nw.from_native(frame).collect_schema().to_polars().items())

    def snapshot(self, frame: Any) -> Any:
        """dpframe's private copy of a frame it protects or verifies, which later edits of
        the object the user holds can never reach (DESIGN §2: nothing reads the user's mutable
        object after ``protect``). pandas: a deep copy (a frame's numpy blocks can be views of
        arrays the user still holds and writes); Polars: its number columns copied (Polars
        takes numpy arrays without copying them, and the user can write those arrays), the rest
        shared (Arrow memory is immutable); a Polars plan or a
        Spark DataFrame: the object itself (immutable); Dask: a new collection over the same
        graph (assigning a column to the user's object rebinds only that object); DuckDB: the
        relation itself when it reads files only (bound by their identity, checked before each
        release), else its rows copied into Arrow and queried on a connection of dpframe's own
        (a relation over a table or a pandas frame reads their current contents)."""
        if self.family == "pandas":
            return frame.copy(deep=True)  # (numpy blocks may be views of the user's arrays)
        if self.family == "polars":
            return frame if self.lazy else _own_numbers(frame)
        if self.name == "dask":
            return frame.copy()
        if self.name == "duckdb" and not _duckdb_reads_files_only(frame):
            import duckdb

            copy = getattr(frame, "to_arrow_table", None) or frame.fetch_arrow_table
            return duckdb.connect().from_arrow(copy())
        return frame

    def private_result(self, frame: Any) -> Any:
        """What releases of an eager frame dpframe computed itself (a verified derivation)
        read, which edits of the object handed to the user cannot reach. Its buffers are
        dpframe's (no array the user holds), so Polars needs another handle only (Polars never
        writes a buffer in place); pandas a copy — shallow under copy-on-write (pandas 3:
        writing through the user's frame copies the block first, and its numpy views are
        read-only), deep before."""
        if self.family == "pandas":
            return frame.copy(deep=not _pandas_copy_on_write())
        return frame.clone()

    def handout(self, frame: Any) -> Any:
        """The object handed to the user for a derived frame dpframe built (and keeps, as
        what releases read): a separate Dask collection, the same object elsewhere (immutable
        plans; eager frames are snapshot when registered)."""
        return frame.copy() if self.name == "dask" else frame

    def source_paths(self, frame: Any) -> list[str]:
        """The files an engine frame reads, where the engine says so without reading them
        (DuckDB: the paths in its relation's SQL; Dask: its expression's ``path`` operands);
        empty when unknown (tables, in-memory data). Polars plans are read elsewhere
        (:func:`dpframe.polars_plan.plan_sources`)."""
        if self.name == "duckdb":
            return _duckdb_paths(frame.sql_query())
        if self.name == "dask":
            return _dask_paths(getattr(frame, "expr", None))
        return []

    def bound_files(self, frame: Any) -> tuple[str, ...] | None:
        """Every file the frame's plan reads, as local paths, when the engine fixes that list
        in the plan and says so without reading data; None otherwise (then the row count is
        re-read before each release instead).

        Spark (classic, not Connect): every leaf of the analysed plan is either an in-memory
        ``LocalRelation`` (immutable data held in the plan) or a file relation over an
        ``InMemoryFileIndex`` — the listing Spark made when the frame was created and reads
        from until it is refreshed — and every file ``inputFiles()`` names is a ``file:`` URI.
        Other engines: None (DuckDB and Dask re-list their globs at every query)."""
        if self.name == "spark":
            return _spark_files(frame)
        return None

    def can_hold_missing(self, dtype: Any) -> bool:
        """Whether a column of this dtype can hold a missing value (null or NaN). A schema
        fact: numpy integer and boolean columns in pandas cannot; every Polars column can."""
        if self.family == "pandas":
            import numpy as np

            return not (isinstance(dtype, np.dtype) and dtype.kind in "iub")
        return True

    def table(self, data: Mapping[str, Sequence[Any]], index: Sequence[Any] | None = None) -> Any:
        """A small result table (eager, even for lazy inputs): pandas or Polars."""
        if self.results_in == "pandas":
            import pandas as pd

            return pd.DataFrame(dict(data), index=None if index is None else list(index))
        import polars as pl

        return pl.DataFrame(dict(data), strict=False)


_DUCKDB_SCANS = re.compile(
    r"\b(?:read_parquet|parquet_scan|read_csv(?:_auto)?|csv_scan|read_json(?:_auto)?)\s*\(\s*"
    r"(\[[^\]]*\]|'(?:[^']|'')*')", re.IGNORECASE)


def _pandas_copy_on_write() -> bool:
    """pandas' copy-on-write is on (always from pandas 3; an option before)."""
    import pandas as pd

    if int(pd.__version__.split(".", 1)[0]) >= 3:
        return True
    return bool(getattr(pd.options.mode, "copy_on_write", False) is True)


def _duckdb_paths(sql: str) -> list[str]:
    """File paths (or globs) in the file-scanning calls of a DuckDB relation's SQL."""
    paths = []
    for match in _DUCKDB_SCANS.finditer(sql):
        paths += [p.replace("''", "'") for p in re.findall(r"'((?:[^']|'')*)'", match.group(1))]
    return paths


def _own_numbers(frame: Any) -> Any:
    """A Polars frame whose number, boolean and date columns are in memory of its own (their
    Arrow buffers copied byte for byte), other columns shared."""
    import polars as pl
    import pyarrow as pa

    columns = []
    for series in frame.iter_columns():
        dtype = series.dtype
        if dtype in (pl.Int128, pl.UInt128):  # (numpy holds no 128-bit integers)
            columns.append(series)
        elif (dtype.is_numeric() and not isinstance(dtype, pl.Decimal)) \
                or dtype.is_temporal() or dtype == pl.Boolean:
            arrow = series.rechunk().to_arrow()
            buffers = [None if b is None else pa.py_buffer(b.to_pybytes())
                       for b in arrow.buffers()]
            copy = pa.Array.from_buffers(arrow.type, len(arrow), buffers, arrow.null_count,
                                         arrow.offset)
            columns.append(pl.Series(series.name, copy, dtype=dtype))
        else:
            columns.append(series)
    return pl.DataFrame(columns)


#: DuckDB table functions that read files (whose identity dpframe binds at protect).
_DUCKDB_FILE_READERS = frozenset({
    "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "csv_scan", "read_json",
    "read_json_auto", "read_ndjson", "read_ndjson_auto"})


def _duckdb_reads_files_only(relation: Any) -> bool:
    """Whether a DuckDB relation's query reads nothing but files through file-reading table
    functions (no table, view, replacement scan of a Python object, or other table
    function), from DuckDB's own parse of its SQL. Anything unreadable counts as False."""
    tree = duckdb_parse(relation)
    if tree is None:  # an engine version that answers differently: copy instead
        return False
    ctes: set[str] = set()
    _cte_names(tree, ctes)
    return _only_file_scans(tree["statements"], ctes)


def duckdb_parse(relation: Any) -> dict[str, Any] | None:
    """DuckDB's own parse of a relation's SQL (``json_serialize_sql``), on a throwaway
    connection (no data is read); None when it cannot be had."""
    import json

    import duckdb

    try:
        row = duckdb.connect().execute("SELECT json_serialize_sql(?)",
                                       [relation.sql_query()]).fetchone()
        tree = json.loads(row[0]) if row is not None else None
    except Exception:
        return None
    if not isinstance(tree, dict) or tree.get("error") or not tree.get("statements"):
        return None
    return tree


def _cte_names(node: Any, found: set[str]) -> None:
    """Every common-table-expression name defined anywhere in a parsed query (the relational
    API wraps each step in one; a reference to it is a step of the same query)."""
    if isinstance(node, list):
        for item in node:
            _cte_names(item, found)
    elif isinstance(node, dict):
        for entry in (node.get("cte_map") or {}).get("map", []) if isinstance(
                node.get("cte_map"), dict) else []:
            found.add(str(entry.get("key")))
        for value in node.values():
            _cte_names(value, found)


def _only_file_scans(node: Any, ctes: set[str]) -> bool:
    if isinstance(node, list):
        return all(_only_file_scans(item, ctes) for item in node)
    if not isinstance(node, dict):
        return True
    kind = node.get("type")
    if kind == "BASE_TABLE" and (node.get("schema_name") or node.get("catalog_name")
                                 or node.get("table_name") not in ctes):
        return False
    if kind == "TABLE_FUNCTION":
        function = node.get("function") or {}
        if str(function.get("function_name", "")).lower() not in _DUCKDB_FILE_READERS:
            return False
    return all(_only_file_scans(value, ctes) for value in node.values())


_SPARK_LOCAL = "org.apache.spark.sql.catalyst.plans.logical.LocalRelation"
_SPARK_FILES = ("org.apache.spark.sql.execution.datasources.LogicalRelation",
                "org.apache.spark.sql.execution.datasources.HadoopFsRelation",
                "org.apache.spark.sql.execution.datasources.InMemoryFileIndex")


def _spark_files(frame: Any) -> tuple[str, ...] | None:
    """See :meth:`Backend.bound_files` (a few JVM calls; no Spark job)."""
    from urllib.parse import unquote, urlparse

    jdf = getattr(frame, "_jdf", None)
    if jdf is None:  # Spark Connect: the plan is on the server
        return None
    try:
        leaves = jdf.queryExecution().analyzed().collectLeaves().iterator()
        while leaves.hasNext():
            leaf = leaves.next()
            name = leaf.getClass().getName()
            if name == _SPARK_LOCAL:
                continue
            if name != _SPARK_FILES[0]:
                return None
            relation = leaf.relation()
            if (relation.getClass().getName() != _SPARK_FILES[1]
                    or relation.location().getClass().getName() != _SPARK_FILES[2]):
                return None
        uris = list(frame.inputFiles())
    except Exception:  # an engine version that answers differently: re-count instead
        return None
    paths = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            return None
        paths.append(unquote(parsed.path))
    return tuple(sorted(paths))


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


PANDAS = Backend("pandas", "pandas", lazy=False, keeps_metadata=True)
POLARS = Backend("polars", "polars", lazy=False, keeps_metadata=False)
POLARS_LAZY = Backend("polars-lazy", "polars", lazy=True, keeps_metadata=False,
                      readable_plans=True)
DUCKDB = Backend("duckdb", "duckdb", lazy=True, keeps_metadata=False, result_family="pandas")
SPARK = Backend("spark", "spark", lazy=True, keeps_metadata=False, result_family="pandas")
DASK = Backend("dask", "dask", lazy=True, keeps_metadata=False, result_family="pandas")

#: (type guard, backend), in the order they are tried.
BACKENDS = (
    (is_pandas_frame, PANDAS),
    (is_polars_eager, POLARS),
    (is_polars_lazy, POLARS_LAZY),
    (is_duckdb_relation, DUCKDB),
    (is_spark_frame, SPARK),
    (is_dask_frame, DASK),
)


def backend_of(frame: Any) -> Backend:
    """The :class:`Backend` of a native frame; :class:`UnsupportedInputError` otherwise."""
    for guard, backend in BACKENDS:
        if guard(frame):
            return backend
    raise UnsupportedInputError(
        "dpframe protects pandas DataFrames, Polars DataFrames/LazyFrames, DuckDB relations, "
        "PySpark DataFrames and Dask DataFrames, got "
        f"{type(frame).__module__}.{type(frame).__name__}"
    )
