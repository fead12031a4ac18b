"""Verification of a durable ledger (:mod:`dpframe.accounting.durable`): its hash chain
read against its head file, and head digests.

**What is detected** (:class:`~dpframe.errors.LedgerError`, on open or on the next operation;
nothing is ever read as less spent): a changed, inserted, removed or reordered line anywhere
(hash chain, ``seq``); truncation that drops committed lines (the head file names a later
``seq``/``hash``); a missing, foreign, empty or damaged header; a foreign or empty file at
``PATH``; a missing, damaged or foreign head file next to a ledger; a ledger file deleted while
its head file remains; either file deleted, replaced or truncated while a session has it open.

**What is recovered** (recorded in
:attr:`dpframe.accounting.durable.DurableLedger.recovered`): an *unterminated* last
line beyond the head's ``seq`` (a crash during step 4: that release never returned, so it is cut
off) and one complete line beyond the head's ``seq`` (a crash between the two ``fsync``-s: it
is kept, counted as spent, and the head is rolled forward).

**What is not detected**: replacing *both* files by an older copy of both (a rollback to a
backup) or deleting both; someone who rewrites the whole chain and the head file consistently
(the hashes carry no key). Compare the ``ledger_id``, release ids and chain hashes in released
Parquet files (``python -m dpframe inspect``) with the ledger to catch those, or archive a
head digest elsewhere (:func:`ledger_head`, ``dpframe inspect LEDGER --head``) and open the
ledger with ``expect_head=`` (:func:`check_expected_head`): a ledger behind that digest, or
diverged from it (a clone that spent separately), is refused.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe._validation import check_head
from dpframe.accounting._ledger_format import _check_header, _frac, _parse, _read_head, head_path
from dpframe.errors import LedgerError


class _Chain:
    """Verified state of a ledger file read so far: the header, spent ε/δ, the hash of each
    line (index = seq), and the byte offset of the end of the last complete line."""

    def __init__(self, header: dict[str, Any], header_bytes: bytes) -> None:
        self.header = header
        self.header_bytes = header_bytes
        self.ledger_id: str = header["ledger_id"]
        self.hashes: list[str] = [header["hash"]]
        self.offset = len(header_bytes)
        self.eps = Fraction(0)
        self.dlt = Fraction(0)

    @property
    def seq(self) -> int:
        return len(self.hashes) - 1

    def extend(self, data: bytes, where: str) -> tuple[list[dict[str, Any]], bytes]:
        """Verify and add the complete lines of ``data`` (bytes after :attr:`offset`); return
        the new records and the unterminated tail (not added)."""
        lines = data.split(b"\n")
        complete, tail = lines[:-1], lines[-1]
        out: list[dict[str, Any]] = []
        for raw in complete:
            rec = _parse(raw)
            seq = self.seq + 1
            if rec is None:
                raise LedgerError(
                    f"ledger file {where} is damaged at release {seq} (line {seq + 1}: a "
                    "complete line that does not match its hash, so not a torn write); restore "
                    "it from a backup — dpframe will not guess the spent budget"
                )
            if (rec.get("type") != "release" or rec.get("seq") != seq
                    or rec.get("prev") != self.hashes[-1]
                    or rec.get("ledger_id") != self.ledger_id):
                raise LedgerError(
                    f"ledger file {where} is damaged at line {seq + 1}: expected release {seq} "
                    f"chained to the previous line, found release {rec.get('seq')!r} — a line "
                    "is missing, duplicated, reordered or from another ledger"
                )
            self.eps += _frac(rec["epsilon"])
            self.dlt += _frac(rec["delta"])
            self.hashes.append(rec["hash"])
            self.offset += len(raw) + 1
            out.append(rec)
        return out, tail


def _check_against_head(chain: _Chain, head: dict[str, Any], tail: bytes, where: str) -> str:
    """Compare a verified chain (and its unterminated tail) with the head file. Returns
    ``"ok"``, ``"cut"`` (the tail is a torn, never acknowledged release) or ``"forward"`` (one
    complete line beyond the head: the head must be rolled forward). Raises otherwise."""
    if head["ledger_id"] != chain.ledger_id:
        raise LedgerError(
            f"{where}: the head file belongs to ledger {head['ledger_id']!r}, the ledger file "
            f"to {chain.ledger_id!r}; one of them was replaced"
        )
    seq = head["seq"]
    if seq > chain.seq:
        raise LedgerError(
            f"{where} ends at release {chain.seq} but releases up to {seq} were committed: "
            f"{seq - chain.seq} acknowledged release(s) are missing (the file was truncated or "
            "replaced by an older copy); restore it from a backup"
        )
    if chain.hashes[seq] != head["hash"]:
        raise LedgerError(
            f"{where}: release {seq} does not match the head file's hash; the file was "
            "rewritten or replaced"
        )
    if seq == chain.seq:
        return "cut" if tail else "ok"
    if seq == chain.seq - 1 and not tail:
        return "forward"
    raise LedgerError(
        f"{where} has releases beyond the head file's release {seq} that no crash can leave; "
        "the head file was replaced by an older copy or the ledger was edited"
    )


def _unreadable(where: str, exc: OSError) -> LedgerError:
    return LedgerError(
        f"cannot read {where} ({exc.strerror or type(exc).__name__}): give this user read "
        "permission on the ledger and its head file, or name the ledger's path correctly"
    )


def read_ledger_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Verify a ledger (file and head file) without modifying either.

    Returns ``{"ledger_id", "header", "releases", "epsilon_spent", "delta_spent",
    "torn_tail_bytes", "valid_bytes", "head_seq", "chain_hash"}`` (spent amounts as exact
    :class:`~fractions.Fraction`; ``torn_tail_bytes`` > 0 when a crash left a release that
    was never returned, which the next session cuts off). Raises :class:`LedgerError` for any
    other damage (see the module docstring)."""
    where = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        extra = " (its head file remains: it was deleted)" if head_path(path).exists() else ""
        raise LedgerError(f"ledger file {where} does not exist{extra}") from None
    except OSError as exc:
        raise _unreadable(where, exc) from None
    try:
        head_data = head_path(path).read_bytes()
    except FileNotFoundError:
        head_data = b""
    except OSError as exc:
        raise _unreadable(str(head_path(path)), exc) from None
    try:
        chain, records, tail = _load(data, where)
        head = _read_head(head_data, where)
        state = _check_against_head(chain, head, tail, where)
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:  # a well-hashed but
        # ill-typed record (only someone recomputing the hashes writes one): damaged
        raise LedgerError(f"{where}: a ledger record is damaged ({type(exc).__name__}); "
                          "restore the ledger from a backup") from exc
    return {
        "ledger_id": chain.ledger_id,
        "header": chain.header,
        "releases": records,
        "epsilon_spent": chain.eps,
        "delta_spent": chain.dlt,
        "torn_tail_bytes": len(tail) if state == "cut" else 0,
        "valid_bytes": chain.offset,
        "head_seq": head["seq"],
        "chain_hash": chain.hashes[-1],
    }


# -- head digests: rollback and clone detection ------------------------------------------------
#: hex digits of a line hash kept in a head digest (128 bits)
HEAD_DIGEST_HEX = 32


def head_digest(seq: int, chain_hash: str) -> str:
    """The short commit digest of a ledger state: ``"<seq>:<first 32 hex of line seq's
    hash>"``. A line's hash covers its ``prev`` (the hash of the line before), so it commits
    to the header (budget, ledger id) and every release up to ``seq``; a ledger *extends* the
    digest when its line ``seq`` has that hash."""
    return f"{seq}:{chain_hash[:HEAD_DIGEST_HEX]}"


def ledger_head(path: str | os.PathLike[str]) -> str:
    """The head digest of the ledger at ``path`` (verified with :func:`read_ledger_file`;
    a complete line beyond the head file's count, which the next session keeps, is included)
    — what a steward archives elsewhere after a run, to pass later as
    ``dpf.Session(path, expect_head=...)``."""
    info = read_ledger_file(path)
    return head_digest(len(info["releases"]), info["chain_hash"])


def check_expected_head(hashes: list[str], expected: str, where: str) -> None:
    """Refuse (:class:`LedgerError`) a ledger whose chain (``hashes[seq]`` = hash of line
    ``seq``) does not contain the ``expected`` head digest: it ends before that release
    (**behind**: rolled back to an older copy, or deleted and created again) or holds a
    different line there (**diverged**: a copy that spent separately, another ledger, or a
    rewritten history). A ledger equal to or ahead of the digest passes."""

    seq, prefix = check_head(expected)
    last = len(hashes) - 1
    if seq > last:
        raise LedgerError(
            f"{where} is BEHIND the expected head {expected!r}: it ends at release {last}, "
            f"but release {seq} was committed when that head was recorded. It was rolled back "
            "to an older copy (or deleted and created again), so it shows less spent than was "
            "spent; restore the newer files. Nothing was read or spent"
        )
    if not hashes[seq].startswith(prefix):
        raise LedgerError(
            f"{where} has DIVERGED from the expected head {expected!r}: its release {seq} is "
            "not the one recorded (a copy of the ledger that spent separately, another ledger "
            "at this path, or a rewritten history); its spending is not the recorded one. "
            "Nothing was read or spent"
        )


def check_ledger_head(path: str | os.PathLike[str], expected: str) -> None:
    """Refuse (:class:`LedgerError`; :class:`~dpframe.errors.ParameterError` for a malformed
    digest) the ledger at ``path`` unless it exists and contains the head digest
    ``expected`` (:func:`check_expected_head`). Reads both files, modifies neither."""

    check_head(expected)
    where = os.fspath(path)
    if not os.path.lexists(path):
        raise LedgerError(
            f"{where} does not exist, but a head {expected!r} of it was recorded: the ledger "
            "was deleted or moved. Restore it; a new ledger here would start the budget again"
        )
    try:
        info = read_ledger_file(path)
    except OSError as exc:
        raise LedgerError(f"cannot read the ledger {where}: {exc.strerror or exc}") from None
    hashes = [info["header"]["hash"], *(r["hash"] for r in info["releases"])]
    check_expected_head(hashes, expected, where)


def _load(data: bytes, where: str) -> tuple[_Chain, list[dict[str, Any]], bytes]:
    if not data:
        raise LedgerError(
            f"{where} is empty, but a dpframe ledger is never empty (it is created whole); "
            "it was truncated — restore it from a backup"
        )
    first, sep, _ = data.partition(b"\n")
    if not sep:
        _check_header(first, where)  # a clear message for foreign files
        raise LedgerError(f"{where}: the ledger header is truncated; restore it from a backup")
    header = _check_header(first, where)
    chain = _Chain(header, first + b"\n")
    records, tail = chain.extend(data[chain.offset:], where)
    return chain, records, tail
