r"""The durable ledger's two files (:mod:`dpframe.accounting.durable`): their records, the
header, the head file's slots, and where they are.

``PATH`` — the **ledger file**, one JSON object per ``\n``-terminated line (UTF-8)::

    {"type": "header", "format": "dpframe-ledger", "version": 2, "ledger_id": "<32 hex>",
     "created": "...", "epsilon": "1/1", "delta": "0/1", "epsilon_float": 1.0,
     "delta_float": 0.0, "seq": 0, "prev": "", "hash": "<sha256>"}
    {"type": "release", "ledger_id": "<32 hex>", "seq": 1, "pid": 4242, "epsilon": "1/10",
     "delta": "0/1", "entries": [...], "keys": {...} (only new key lists),
     "prev": "<hash of line seq-1>", "hash": "<sha256>"}

``keys`` holds the group-key lists that this release's entries refer to (``group_keys`` =
``"sha256:<hex>"``, :class:`dpframe.accounting.ledger.Ledger`) and that no earlier line holds: each
list is written once per ledger. ``hash`` is the SHA-256 of the line's canonical JSON without
``hash`` (sorted keys, no spaces), and ``prev`` is the previous line's ``hash``: every line is
bound to all lines before it,
the header (which holds the budget and the random ``ledger_id``) included. Release ``seq``
numbers are 1, 2, 3, ... with no gap; ``seq`` is the release id.

``PATH.head`` — the **head file**, the commit counter: two fixed 512-byte slots, each a
self-checked JSON ``{"ledger_id", "seq", "hash", "check"}`` naming the last committed line.
Commit ``n`` overwrites slot ``n % 2`` in place and ``fsync``-s it, so a torn slot write leaves
the other slot (``n - 1``) intact. The head file is also the lock file.
"""

from __future__ import annotations

import hashlib
import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.errors import LedgerError, ParameterError

FORMAT = "dpframe-ledger"
FORMAT_VERSION = 2
HEAD_FORMAT = "dpframe-ledger-head"
HEAD_SUFFIX = ".head"
_SLOT = 512


def head_path(path: str | os.PathLike[str]) -> Path:
    """The head file (commit counter and lock) of the ledger file ``path``."""
    p = Path(path)
    return p.with_name(p.name + HEAD_SUFFIX)


def check_location(path: object) -> Path:
    """``path`` as a ledger file path, or a :class:`ParameterError` that says what is wrong
    with it: a path (str or ``os.PathLike``) naming a file, not a folder, in a folder that
    exists. Reads only the file system's names, never a ledger."""
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise ParameterError(f"a ledger path must be a str or os.PathLike, got {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text or not Path(text).name or text.endswith(os.sep):
        raise ParameterError(
            f"a ledger path must name a file, e.g. 'ledgers/survey.jsonl', got {path!r}"
        )
    p = Path(text)
    if p.is_dir():
        raise ParameterError(
            f"the ledger path {text!r} is a folder; name a file inside it, e.g. "
            f"{os.path.join(text, 'ledger.jsonl')!r}"
        )
    if not p.parent.is_dir():
        raise ParameterError(
            f"the folder {str(p.parent)!r} of ledger path {text!r} does not exist (or is not a "
            "folder); create it first"
        )
    return p


# -- records ---------------------------------------------------------------------------------
def _canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _hash(record: dict[str, Any]) -> str:
    return hashlib.sha256(_canon({k: v for k, v in record.items() if k != "hash"})).hexdigest()


def _encode(record: dict[str, Any]) -> bytes:
    rec = dict(record)
    rec["hash"] = _hash(rec)
    return _canon(rec) + b"\n"


def _frac(s: Any) -> Fraction:
    return Fraction(str(s))


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record of one complete line, or None if it is not a correctly hashed record."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(rec, dict) or rec.get("hash") != _hash(rec):
        return None
    return rec


def _check_header(raw: bytes, where: str) -> dict[str, Any]:
    rec = _parse(raw)
    if rec is None or rec.get("type") != "header" or rec.get("format") != FORMAT:
        try:
            probe = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            probe = None
        if isinstance(probe, dict) and probe.get("format") == FORMAT:
            if probe.get("version") not in (None, FORMAT_VERSION):
                raise LedgerError(
                    f"{where} has ledger format version {probe.get('version')!r}; this dpframe "
                    f"reads version {FORMAT_VERSION} (older files have no hash chain: start a "
                    "new ledger and keep the old file as a record)"
                )
            raise LedgerError(f"{where}: the ledger header is damaged; restore it from a backup")
        raise LedgerError(
            f"{where} is not a dpframe ledger file (no valid header line); dpframe never "
            "overwrites it — choose another path or move the file away"
        )
    if rec.get("version") != FORMAT_VERSION:
        raise LedgerError(
            f"{where} has ledger format version {rec.get('version')!r}; this dpframe reads "
            f"version {FORMAT_VERSION}"
        )
    if rec.get("seq") != 0 or rec.get("prev") != "" or not isinstance(rec.get("ledger_id"), str):
        raise LedgerError(f"{where}: the ledger header is damaged; restore it from a backup")
    return rec

# -- the head file -----------------------------------------------------------------------------
def _head_slot(ledger_id: str, seq: int, chain_hash: str) -> bytes:
    body = {"format": HEAD_FORMAT, "ledger_id": ledger_id, "seq": seq, "hash": chain_hash}
    body["check"] = hashlib.sha256(_canon(body)).hexdigest()
    raw = _canon(body)
    return raw + b" " * (_SLOT - 1 - len(raw)) + b"\n"


def _read_head(data: bytes, where: str) -> dict[str, Any]:
    """The newest valid slot of a head file's bytes; LedgerError if none is valid."""
    slots = []
    for i in range(2):
        raw = data[i * _SLOT:(i + 1) * _SLOT].strip()
        try:
            body = json.loads(raw.decode("ascii"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(body, dict) or body.get("format") != HEAD_FORMAT:
            continue
        check = body.pop("check", None)
        if check == hashlib.sha256(_canon(body)).hexdigest() and isinstance(body.get("seq"), int):
            slots.append(body)
    if not slots:
        raise LedgerError(
            f"{where}: the ledger's head file (commit counter) is missing, empty or damaged; "
            "without it, dropped releases could not be detected. Restore it from a backup"
        )
    if len(slots) == 2 and (slots[0]["ledger_id"] != slots[1]["ledger_id"]
                            or abs(slots[0]["seq"] - slots[1]["seq"]) > 1):
        raise LedgerError(f"{where}: the head file's two slots disagree; it was modified")
    return max(slots, key=lambda s: s["seq"])
