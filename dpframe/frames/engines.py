"""``.dp`` on the engines users outgrow pandas and Polars for: DuckDB relations, PySpark and
Dask DataFrames. Registered the first time such a frame is protected (dpframe never imports
an engine it was not handed), with the same :class:`DPNamespace` as pandas and Polars.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from dpframe.backends import DASK, DUCKDB, SPARK, Backend
from dpframe.frames.namespace import DPNamespace
from dpframe.frames.registration import register
from dpframe.provenance import on_protect

__all__ = ["EngineDP", "ensure_namespace"]

_done: set[str] = set()
_lock = threading.Lock()


class EngineDP(DPNamespace):
    """``.dp`` on a DuckDB relation, a PySpark or a Dask DataFrame: aggregates run inside the
    engine; only per-group aggregates are collected; result tables are pandas frames."""


def _as_attribute(name: str) -> Any:
    def registrar(attr: str) -> Any:
        def apply(namespace: type) -> type:
            cls = _engine_class(name)
            setattr(cls, attr, property(namespace))
            return namespace
        return apply
    return registrar


def _engine_class(name: str) -> type:
    if name == DUCKDB.name:
        return sys.modules["duckdb"].DuckDBPyRelation
    if name == SPARK.name:
        return sys.modules["pyspark.sql"].DataFrame
    return sys.modules["dask.dataframe"].DataFrame


def ensure_namespace(backend: Backend) -> None:
    """Register ``.dp`` for ``backend``'s frame class, once (a no-op for pandas and Polars)."""
    if backend.name not in (DUCKDB.name, SPARK.name, DASK.name):
        return
    with _lock:
        if backend.name in _done:
            return
        cls = _engine_class(backend.name)
        if backend.name == DASK.name:
            from dask.dataframe.extensions import register_dataframe_accessor

            register(cls, "dp", EngineDP, register_dataframe_accessor)
        else:
            register(cls, "dp", EngineDP, _as_attribute(backend.name))
        _done.add(backend.name)


on_protect(ensure_namespace)
