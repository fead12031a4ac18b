"""Release tables and their logs: which log a released table carries, and (issue 11) how that
log is bound to the table's values.

A release table is the frame a ``.dp`` release returns (``release()``, a group-by, ``cov``,
``describe`` ...). It carries the log of the ledger it was drawn from, as of its release:

* pandas: in ``attrs`` under :data:`RELEASE_ATTRS_KEY` (``DataFrame.to_parquet`` writes
  ``attrs`` into the file's key-value metadata);
* Polars: remembered by object identity (Polars frames carry no metadata);
  ``table.dp.write_parquet(path)`` writes it.

The pipeline calls :func:`attach_release_log` once per release table; everything that reads a
table's log goes through :func:`release_log_of`.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["RELEASE_ATTRS_KEY", "attach_release_log", "release_log_of"]

RELEASE_ATTRS_KEY = "dpframe_log"

_polars_logs: dict[int, tuple[Any, dict[str, Any]]] = {}
_lock = threading.Lock()


def _is_pandas(frame: Any) -> bool:
    return type(frame).__module__.split(".")[0] == "pandas"


def attach_release_log(table: Any, document: dict[str, Any]) -> None:
    """Make ``document`` (a ledger snapshot that includes this release) the log of ``table``."""
    if _is_pandas(table):
        table.attrs = {RELEASE_ATTRS_KEY: document}
        return
    key = id(table)

    def _forget(_: Any, key: int = key) -> None:
        with _lock:
            _polars_logs.pop(key, None)

    with _lock:
        _polars_logs[key] = (weakref.ref(table, _forget), document)


def release_log_of(frame: Any) -> dict[str, Any] | None:
    """The log attached to a release table, or None for any other frame."""
    if _is_pandas(frame):
        doc = frame.attrs.get(RELEASE_ATTRS_KEY)
        return doc if isinstance(doc, dict) else None
    with _lock:
        found = _polars_logs.get(id(frame))
    if found is not None and found[0]() is frame:
        return found[1]
    return None
