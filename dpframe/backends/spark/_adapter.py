"""PySpark DataFrames (classic and Spark Connect): immutable plans, bound to the files their
analysed plan lists."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.backends._base import Backend
from dpframe.backends.spark._file_input import read_file
from dpframe.backends.spark._sql import job_group, spark_sums
from dpframe.query import Agg
from dpframe.rowwise.engines import SQLTarget

__all__ = ["SparkBackend", "is_spark_frame"]


def is_spark_frame(obj: Any) -> bool:
    """True for a PySpark ``DataFrame`` (classic or Spark Connect)."""
    for name in ("pyspark.sql.dataframe", "pyspark.sql.connect.dataframe"):
        mod = sys.modules.get(name)
        if mod is not None and isinstance(obj, mod.DataFrame):
            return True
    return False


class SparkBackend(Backend):
    """PySpark DataFrames (results in pandas: a few rows)."""

    name = "spark"
    family = "spark"
    rowwise = SQLTarget("dpframe.backends.spark._rowwise", "spark")
    result_family = "pandas"
    fixed_schema = True
    utc_as_fixed_zone = True
    detect = staticmethod(is_spark_frame)

    def read_file(self, path: str, fmt: str, declared: Mapping[str, str]) -> Any:

        return read_file(path, fmt, declared)

    def namespace_target(self) -> tuple[type, Any] | None:
        return sys.modules["pyspark.sql"].DataFrame, None

    def pass_hooks(self) -> tuple[Callable[[], None] | None, Callable[[], None] | None] | None:
        """Every pass under the engine timeout, in a job group of its own that is cancelled
        when the wait gives up (:func:`dpframe.backends.spark._sql.job_group`)."""

        return job_group() or (None, None)

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """The same arithmetic as Spark SQL text (:mod:`dpframe.backends.spark._sql`:
        building narwhals expressions costs a JVM round trip per operation here), or None
        when a declared key cannot be written as a literal (the narwhals path then runs)."""

        return spark_sums(frame, aggs, columns, missing, group_by, keys)

    def bound_files(self, frame: Any) -> tuple[str, ...] | None:
        """Spark (classic, not Connect): every leaf of the analysed plan is either an
        in-memory ``LocalRelation`` (immutable data held in the plan) or a file relation over
        an ``InMemoryFileIndex`` — the listing Spark made when the frame was created and reads
        from until it is refreshed — and every file ``inputFiles()`` names is a ``file:`` URI.
        """
        return _spark_files(frame)


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


