"""Parquet export and import of sealed release logs.

A release table's log (:mod:`dpframe.integrity`) is JSON stored in the Parquet file's key-value
metadata:

* pandas: ``DataFrame.to_parquet`` stores ``attrs`` as JSON under ``PANDAS_ATTRS``; a release
  table's ``attrs["dpframe_log"]`` is its sealed log;
* Polars (and pandas, explicitly): ``table.dp.write_parquet(path)`` writes it under the key
  ``dpframe.log``.

Only sealed release logs (``"kind": "dpframe.release"`` with a ``seal``) are read as logs.
A protected frame keeps a live budget handle in ``attrs["dpframe"]``, which is never a log, and
frames derived from it with pandas operations carry no release log, so their files are
refused (:class:`~dpframe.errors.LedgerError`, "no dpframe release log").

:func:`read_log` verifies by default: the values stored in the file must match the seal's
table digest and the log its digest (and, with ``key=``, its HMAC signature); otherwise it
raises :class:`~dpframe.errors.IntegrityError`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from dpframe.accounting import LOG_VERSION
from dpframe.errors import IntegrityError, LedgerError
from dpframe.integrity import RELEASE_ATTRS_KEY, check_seal

__all__ = ["LOG_KEY", "find_log", "read_log", "write_parquet"]

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
    """Write ``frame`` to ``path`` with ``document`` (its sealed log) in the key-value
    metadata under ``dpframe.log``."""
    import pyarrow.parquet as pq

    table = _to_arrow(frame)
    meta = dict(table.schema.metadata or {})
    meta[LOG_KEY] = json.dumps(document, allow_nan=False).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def find_log(metadata: dict[bytes, bytes] | None, where: str) -> dict[str, Any]:
    """The release log document in a Parquet file's key-value metadata (not verified).

    Raises :class:`LedgerError` if there is none and :class:`IntegrityError` if the two places
    a log can be stored hold different logs."""
    meta = metadata or {}
    found = []
    if LOG_KEY in meta:
        found.append(_json(meta[LOG_KEY], where))
    if _PANDAS_KEY in meta:
        attrs = _json(meta[_PANDAS_KEY], where)
        if isinstance(attrs, dict) and isinstance(attrs.get(RELEASE_ATTRS_KEY), dict):
            found.append(attrs[RELEASE_ATTRS_KEY])
    docs = [d for d in found if isinstance(d, dict) and "entries" in d]
    if not docs:
        raise LedgerError(
            f"{where!r} carries no dpframe release log (only release tables — what a .dp "
            "release returns — are written with one; write them with table.to_parquet(...) "
            "(pandas) or table.dp.write_parquet(...))"
        )
    if len(docs) == 2 and docs[0] != docs[1]:
        raise IntegrityError(f"{where!r} carries two different dpframe logs; it was altered")
    return docs[0]


def _json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IntegrityError(f"{where!r}: the dpframe log metadata is not valid JSON") from exc


def read_log(
    path: str | os.PathLike[str],
    *,
    as_frame: str | None = None,
    verify: bool = True,
    key: bytes | str | None = None,
) -> Any:
    """The sealed release log stored in a Parquet file, verified against the file's values.

    ``verify=True`` (default): raise :class:`~dpframe.errors.IntegrityError` unless the log
    is a sealed release log whose table digest matches the values in the file and whose digest
    matches the log; with ``key=`` (the steward's HMAC key) the signature must match too.
    ``verify=False`` reads the log without any check (for forensics).

    Returns the JSON document (a dict), or with ``as_frame="pandas"``/``"polars"`` its entries
    as a frame. Raises :class:`~dpframe.errors.LedgerError` if the file carries no release log.
    """
    import pyarrow.parquet as pq

    where = os.fspath(path)
    doc = find_log(pq.read_schema(path).metadata, where)
    version = doc.get("version", 0)
    if not isinstance(version, int) or version > LOG_VERSION:
        raise LedgerError(
            f"log version {version!r} is newer than this dpframe understands "
            f"({LOG_VERSION}); upgrade dpframe"
        )
    if verify or key is not None:
        check_seal(doc, pq.read_table(path), key=key, where=where)
    if as_frame is None:
        return doc
    from dpframe.log_schema import log_frame

    return log_frame(doc, "pandas" if as_frame == "pandas" else "polars")
