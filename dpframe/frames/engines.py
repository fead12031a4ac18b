"""``.dp`` on the engines users outgrow pandas and Polars for: DuckDB relations, PySpark and
Dask DataFrames. Registered the first time such a frame is protected (dpframe never imports
an engine it was not handed), with the same :class:`DPNamespace` as pandas and Polars.
"""

from __future__ import annotations

import threading
from typing import Any

import pandas as pd

from dpframe.backends import Backend
from dpframe.frames.namespace import DPNamespace
from dpframe.frames.registration import register
from dpframe.provenance import on_protect

__all__ = ["EngineDP", "ensure_namespace"]

_done: set[str] = set()
_lock = threading.Lock()


class EngineDP(DPNamespace[Any, pd.DataFrame]):
    """``.dp`` on a DuckDB relation, a PySpark or a Dask DataFrame: aggregates run inside the
    engine; only per-group aggregates are collected; result tables are pandas frames."""


def _as_attribute(cls: type) -> Any:
    def registrar(attr: str) -> Any:
        def apply(namespace: type) -> type:
            setattr(cls, attr, property(namespace))
            return namespace
        return apply
    return registrar


def ensure_namespace(backend: Backend) -> None:
    """Register ``.dp`` for ``backend``'s frame class, once (a no-op for pandas and Polars,
    whose namespaces are registered when dpframe is imported)."""
    target = backend.namespace_target()
    if target is None:
        return
    with _lock:
        if backend.name in _done:
            return
        cls, registrar = target
        register(cls, "dp", EngineDP, registrar or _as_attribute(cls))
        _done.add(backend.name)


on_protect(ensure_namespace)
