"""Parquet export and import of the accounting log.

The log document is JSON: ``{"version": 1, "ledger_id", "budget": {...}, "entries": [...]}``
(infinite domain ends are ``null``). It is stored in the Parquet file's key-value metadata:

* pandas: ``DataFrame.to_parquet`` stores ``attrs`` as JSON under ``PANDAS_ATTRS``; a protected
  frame's ``attrs["dpframe"]`` and a release table's ``attrs["dpframe_log"]`` are the document.
* Polars (and pandas, explicitly): ``frame.dp.write_parquet(path)`` writes it under the key
  ``dpframe.log``.

:func:`read_log` finds the document under either key.
"""

from __future__ import annotations

import json
import os
from typing import Any

from dpframe.accounting import LOG_VERSION
from dpframe.errors import LedgerError

__all__ = ["LOG_KEY", "read_log", "write_parquet"]

LOG_KEY = b"dpframe.log"
_PANDAS_KEY = b"PANDAS_ATTRS"


def _to_arrow(frame: Any) -> Any:
    import pyarrow as pa

    mod = type(frame).__module__.split(".")[0]
    if mod == "pandas":
        return pa.Table.from_pandas(frame)
    if type(frame).__name__ == "LazyFrame":
        frame = frame.collect()
    return frame.to_arrow()


def write_parquet(frame: Any, path: str | os.PathLike[str], document: dict[str, Any]) -> None:
    """Write ``frame`` to ``path`` with ``document`` (the log) in the key-value metadata."""
    import pyarrow.parquet as pq

    table = _to_arrow(frame)
    meta = dict(table.schema.metadata or {})
    meta[LOG_KEY] = json.dumps(document, allow_nan=False).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def read_log(path: str | os.PathLike[str], *, as_frame: str | None = None) -> Any:
    """The dpframe log stored in a Parquet file (written by either route above).

    Returns the JSON document (a dict), or with ``as_frame="pandas"``/``"polars"`` its entries
    as a frame. Raises :class:`LedgerError` if the file carries no dpframe log.
    """
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    doc = None
    if LOG_KEY in meta:
        doc = json.loads(meta[LOG_KEY])
    elif _PANDAS_KEY in meta:
        attrs = json.loads(meta[_PANDAS_KEY])
        doc = attrs.get("dpframe_log") or attrs.get("dpframe")
    if not isinstance(doc, dict) or "entries" not in doc:
        raise LedgerError(
            f"{os.fspath(path)!r} carries no dpframe log; write releases with "
            "table.to_parquet(...) (pandas) or table.dp.write_parquet(...)"
        )
    if doc.get("version", 0) > LOG_VERSION:
        raise LedgerError(
            f"log version {doc.get('version')} is newer than this dpframe understands "
            f"({LOG_VERSION}); upgrade dpframe"
        )
    if as_frame is None:
        return doc
    from dpframe.frames.results import log_frame

    return log_frame(doc, "pandas" if as_frame == "pandas" else "polars")
