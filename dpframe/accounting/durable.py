r"""A durable, append-only, hash-chained ledger that fails closed (issue 11).

:class:`DurableLedger` is a :class:`dpframe.accounting.ledger.Ledger` whose commits are written to
disk *before* they take effect. Two files make up one ledger (see docs/ledger.md):

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

**Commit protocol** (:meth:`DurableLedger.commit`), with the exclusive lock held:

1. open both files afresh *by path* and ``flock`` the head file (one lock per operation, on a
   new open file description: nothing about the lock is inherited by ``fork``); check both are
   still the files opened at the start (device and inode) and the header bytes are unchanged;
2. read the lines other processes appended since the last operation, verifying each hash,
   ``prev`` and ``seq``, and compare the last one with the head file;
3. check ``spent + ε ≤ budget·(1 + 1e-9)`` (and δ) against the file's total;
4. append the line, ``fsync`` the ledger file, write the head slot, ``fsync`` the head file;
5. only then return the release id, so the caller releases the value only once step 4 is done.

A new ledger is built in a temporary file (header, ``fsync``), the head file is written
(``fsync``), the ledger is ``link``-ed to ``PATH`` (never overwriting anything) and the
directory is ``fsync``-ed.

**What is detected** (:class:`~dpframe.errors.LedgerError`, on open or on the next operation;
nothing is ever read as less spent): a changed, inserted, removed or reordered line anywhere
(hash chain, ``seq``); truncation that drops committed lines (the head file names a later
``seq``/``hash``); a missing, foreign, empty or damaged header; a foreign or empty file at
``PATH``; a missing, damaged or foreign head file next to a ledger; a ledger file deleted while
its head file remains; either file deleted, replaced or truncated while a session has it open.

**What is recovered** (recorded in :attr:`DurableLedger.recovered`): an *unterminated* last
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

**Errors while writing.** If the append fails, the partial line is cut off and nothing is
spent. If an ``fsync`` fails (``EIO``), the value is *not* returned but the release may already
be on disk and counted as spent: it is charged without having been returned (the safe
direction). The session then refuses further operations; reopen it to re-read the file.

**Fork, spawn, threads.** A ledger opened in a parent may be used from forked children (the
default ``multiprocessing`` start method on Linux): all state that matters is re-read from the
file under the per-operation lock; a child drops the parent's pending reservations and gets
fresh thread locks. Spawned processes and independent programs open the file by path (a pickled
ledger reopens its path). An in-memory :class:`Ledger` refuses to spend in a forked child.

**Use.** ``dpf.Session(path="ledger.jsonl")``: :func:`dpframe.protect` builds its ledger with
:func:`open_ledger`, so every ``.dp`` release through that session is durable. Stewards verify a
ledger with :func:`read_ledger_file` or ``python -m dpframe inspect ledger.jsonl``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import threading
import weakref
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.accounting._log_entries import frozen_entries
from dpframe.accounting.ledger import LOG_VERSION, Ledger, Reservation, _stamp
from dpframe.errors import BudgetExceededError, LedgerError, ParameterError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "HEAD_SUFFIX",
    "DurableLedger",
    "check_expected_head",
    "check_ledger_head",
    "head_digest",
    "head_path",
    "ledger_head",
    "open_ledger",
    "read_ledger_file",
]

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
    from dpframe._validation import check_head

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
    from dpframe._validation import check_head

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


# -- fork support ------------------------------------------------------------------------------
_open_ledgers: weakref.WeakSet[DurableLedger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for led in list(_open_ledgers):
        led._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _ino(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _open_existing(path: Path, flags: int, ledger: Path) -> int:
    """``os.open`` of an existing ledger or head file; a file this process may not open
    (no permission, a read-only file system) is a :class:`LedgerError` naming the fix.
    ``FileNotFoundError`` passes through (the callers tell what a missing file means)."""
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise LedgerError(
            f"cannot open {path} of the ledger {ledger} for reading and writing "
            f"({exc.strerror or type(exc).__name__}): dpframe appends every release to the "
            "ledger and its head file. Give this user read and write permission on both (and "
            "a writable file system), or name another ledger path; nothing was read or spent"
        ) from None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DurableLedger(Ledger):
    """A :class:`Ledger` backed by an append-only, hash-chained, fsync-ed file and its head
    file (module docstring; docs/ledger.md).

    ``DurableLedger(path, epsilon, delta)`` creates the ledger (or opens an existing one, whose
    budget must equal the one given); ``DurableLedger(path)`` opens an existing ledger with its
    own budget. ``fsync=False`` is for throughput tests only: it gives up crash safety.
    ``expect_head``: a head digest recorded earlier (:func:`ledger_head`); the ledger is
    refused unless its history contains it (:func:`check_expected_head`), and is never
    created when it names a head.
    ``ledger.id`` is the random ledger id stored in the header (32 hex digits).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        fsync: bool = True,
        expect_head: str | None = None,
    ) -> None:
        if expect_head is not None:
            from dpframe._validation import check_head

            check_head(expect_head)
        self.path = check_location(path)
        self.head_path = head_path(self.path)
        self._fsync = bool(fsync)
        self._io_lock = threading.Lock()
        self._broken: str | None = None
        self._closed = False
        self._op_fds: list[int] = []
        self.recovered: dict[str, Any] = {"torn_tail_bytes": 0, "head_rolled_forward": 0}
        with self._head_locked(create=True) as hfd:
            if not os.path.lexists(self.path):
                try:
                    if expect_head is not None:
                        raise LedgerError(
                            f"{self.path} does not exist, but a head {expect_head!r} of it "
                            "was recorded: the ledger was deleted or moved. Restore it; a new "
                            "ledger here would start the budget again"
                        )
                    self._check_no_prior(hfd)
                    if epsilon is None:
                        raise ParameterError(
                            f"{self.path} does not exist; pass epsilon= (and delta=) to create "
                            "a new durable ledger"
                        )
                    checked = Ledger(epsilon, delta or 0.0)  # the usual messages
                    self._create(hfd, float(checked._eps_total), float(checked._delta_total))
                except BaseException:
                    if os.fstat(hfd).st_size == 0:  # we made an empty head file: remove it
                        with contextlib.suppress(OSError):
                            os.unlink(self.head_path)
                    raise
            lfd = _open_existing(self.path, os.O_RDWR | os.O_CLOEXEC, self.path)
            self._op_fds.append(lfd)
            try:
                chain, _, _ = _load(self._read_from(lfd, 0), str(self.path))
                self._ids = (_ino(os.fstat(hfd)), _ino(os.fstat(lfd)))
                header = chain.header
                for name, given in (("epsilon", epsilon), ("delta", delta)):
                    if given is not None and _frac(header[name]) != Fraction(float(given)):
                        raise LedgerError(
                            f"{self.path} holds a ledger with {name}="
                            f"{header[name + '_float']!r}, not {given!r}; a budget cannot be "
                            f"changed by reopening. Open it without {name}= (or with the same "
                            "value), or use a new file"
                        )
                super().__init__(header["epsilon_float"], header["delta_float"])
                self.id: str = chain.ledger_id
                self.document["ledger_id"] = self.id
                self._eps_total = _frac(header["epsilon"])
                self._delta_total = _frac(header["delta"])
                self._chain = _Chain(header, chain.header_bytes)
                self._doc_chain = (0, header["hash"])
                self._reload = False
                self._absorb(lfd, hfd, chain.header_bytes)
                if expect_head is not None:
                    check_expected_head(self._chain.hashes, expect_head, str(self.path))
            finally:
                self._op_fds.remove(lfd)
                os.close(lfd)
        self._pid = os.getpid()
        _open_ledgers.add(self)

    # -- creation and locking ------------------------------------------------------------------
    @contextlib.contextmanager
    def _head_locked(self, *, create: bool) -> Iterator[int]:
        """Open the head file afresh by path and hold an exclusive ``flock`` on it."""
        while True:
            try:
                fd = _open_existing(self.head_path, os.O_RDWR | os.O_CLOEXEC, self.path)
            except FileNotFoundError:
                if not create or os.path.lexists(self.path):
                    if os.path.lexists(self.path):
                        self._describe_headless()
                    raise LedgerError(
                        f"the head file {self.head_path} of ledger {self.path} was deleted; "
                        "restore it from a backup"
                    ) from None
                try:
                    fd = os.open(self.head_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                except OSError as exc:
                    raise LedgerError(
                        f"cannot create the ledger {self.path}: {exc.strerror or exc} (creating "
                        f"its head file {self.head_path}); nothing was created"
                    ) from None
            self._op_fds.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    same = _ino(os.stat(self.head_path)) == _ino(os.fstat(fd))
                except FileNotFoundError:
                    same = False
                if not same and create:  # removed while we waited (a failed creation)
                    continue
                yield fd
                return
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                self._op_fds.remove(fd)
                os.close(fd)

    def _describe_headless(self) -> None:
        """The clearest error for a ledger path without a head file."""
        with contextlib.suppress(OSError):
            with open(self.path, "rb") as fh:
                first = fh.readline()
            _check_header(first.rstrip(b"\n"), str(self.path))

    def _check_no_prior(self, hfd: int) -> None:
        """The ledger file is missing: refuse if the head file shows it ever held releases."""
        old = os.pread(hfd, 2 * _SLOT, 0)
        if old:
            try:
                prior = _read_head(old, str(self.path))
            except LedgerError:
                prior = None
            if prior is None or prior["seq"] != 0:
                raise LedgerError(
                    f"{self.path} is missing but its head file {self.head_path} records "
                    f"{'committed releases' if prior else 'a damaged state'}: the ledger "
                    "file was deleted. Restore it from a backup; dpframe will not start the "
                    "budget again"
                )

    def _create(self, hfd: int, epsilon: float, delta: float) -> None:
        """Build a new ledger (header in a temp file, head file, link, directory fsync)."""
        self._check_no_prior(hfd)
        ledger_id = secrets.token_hex(16)
        header: dict[str, Any] = {
            "type": "header", "format": FORMAT, "version": FORMAT_VERSION,
            "ledger_id": ledger_id, "created": datetime.now(UTC).isoformat(),
            "epsilon": str(Fraction(epsilon)), "delta": str(Fraction(delta)),
            "epsilon_float": epsilon, "delta_float": delta, "seq": 0, "prev": "",
        }
        payload = _encode(header)
        tmp = self.path.with_name(f".{self.path.name}.{ledger_id}.tmp")
        try:
            self._write_new(tmp, payload)
            slot = _head_slot(ledger_id, 0, json.loads(payload)["hash"])
            os.ftruncate(hfd, 0)
            os.pwrite(hfd, slot + slot, 0)
            if self._fsync:
                os.fsync(hfd)
            try:
                os.link(tmp, self.path)  # never replaces an existing file
            except FileExistsError:  # pragma: no cover - only a non-dpframe writer can race us
                raise LedgerError(f"{self.path} appeared while creating it; retry") from None
            except OSError:  # pragma: no cover - a filesystem without hard links
                if os.path.lexists(self.path):
                    raise LedgerError(f"{self.path} appeared while creating it; retry") from None
                os.rename(tmp, self.path)  # we hold the lock, and the path was free
        except OSError as exc:
            raise LedgerError(
                f"cannot create the ledger {self.path}: {exc.strerror or exc}; nothing was "
                "created"
            ) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if self._fsync:
            _fsync_dir(self.path.parent)

    def _write_new(self, tmp: Path, payload: bytes) -> None:
        """Write ``payload`` to the new file ``tmp`` (synced); the caller removes it."""
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            self._write_all(fd, payload)
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _write_all(fd: int, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    @contextlib.contextmanager
    def _op(self) -> Iterator[tuple[int, int]]:
        """One ledger operation: thread lock, fresh fds, file lock, identity checks, sync."""
        with self._io_lock:
            if self._closed:
                raise LedgerError(f"the durable ledger {self.path} is closed")
            if self._broken:
                raise LedgerError(self._broken)
            with self._head_locked(create=False) as hfd:
                if _ino(os.fstat(hfd)) != self._ids[0]:
                    raise LedgerError(
                        f"the head file {self.head_path} was replaced while this session had "
                        "it open; dpframe stops rather than trust either copy"
                    )
                try:
                    lfd = _open_existing(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC,
                                         self.path)
                except FileNotFoundError:
                    raise LedgerError(
                        f"the ledger file {self.path} was deleted while this session had it "
                        "open; restore it — no further releases are recorded"
                    ) from None
                self._op_fds.append(lfd)
                try:
                    if _ino(os.fstat(lfd)) != self._ids[1]:
                        raise LedgerError(
                            f"the ledger file {self.path} was replaced while this session had "
                            "it open; dpframe stops rather than trust either copy"
                        )
                    if self._reload:
                        self._reset_chain()
                    self._absorb(lfd, hfd, None)
                    yield lfd, hfd
                finally:
                    self._op_fds.remove(lfd)
                    os.close(lfd)

    @staticmethod
    def _read_from(fd: int, offset: int) -> bytes:
        size = os.fstat(fd).st_size
        return os.pread(fd, size - offset, offset) if size > offset else b""

    def _absorb(self, lfd: int, hfd: int, header_bytes: bytes | None) -> None:
        """Read, verify and count the lines appended since the last operation; compare with
        the head file; cut a torn tail or roll the head forward. Holds the file lock."""
        chain = self._chain
        where = str(self.path)
        if header_bytes is None:
            hb = chain.header_bytes
            if os.pread(lfd, len(hb), 0) != hb:
                raise LedgerError(
                    f"the ledger file {where} was replaced while this session had it open (its "
                    "header changed); dpframe stops rather than trust either copy"
                )
        size = os.fstat(lfd).st_size
        if size < chain.offset:
            raise LedgerError(
                f"{where} shrank while open (from {chain.offset} to {size} bytes): it was "
                "truncated by hand; committed releases are missing"
            )
        records, tail = chain.extend(self._read_from(lfd, chain.offset), where)
        head = _read_head(os.pread(hfd, 2 * _SLOT, 0), where)
        state = _check_against_head(chain, head, tail, where)
        if state == "cut":
            os.ftruncate(lfd, chain.offset)
            if self._fsync:
                os.fsync(lfd)
            self.recovered["torn_tail_bytes"] += len(tail)
        elif state == "forward":
            self._write_head(hfd, chain.seq, chain.hashes[-1])
            self.recovered["head_rolled_forward"] += 1
        if records:
            with self._lock:
                self._eps_spent = chain.eps
                self._delta_spent = chain.dlt
                for rec in records:
                    self._append_log(frozen_entries(rec.get("entries", [])), rec.get("keys", {}))
                    self.note(rec.get("entries", []))
                self._doc_chain = (chain.seq, chain.hashes[-1])
                self._refresh_budget_doc()

    def _check_process(self) -> None:
        """A durable ledger may be used from any process: the file is the budget."""

    def _reset_chain(self) -> None:
        """Forget what was read (after a fork) so the next sync re-reads the whole file."""
        self._chain = _Chain(self._chain.header, self._chain.header_bytes)
        with self._lock:
            self._clear_log()
            self.locked = False  # re-read with the entries
            self._eps_spent = Fraction(0)
            self._delta_spent = Fraction(0)
            self._doc_chain = (0, self._chain.hashes[0])
            self._refresh_budget_doc()
        self._reload = False

    def _write_head(self, hfd: int, seq: int, chain_hash: str) -> None:
        os.pwrite(hfd, _head_slot(self._chain.ledger_id, seq, chain_hash), (seq % 2) * _SLOT)
        if self._fsync:
            os.fsync(hfd)

    def _forked(self) -> None:
        """In a forked child: fresh thread locks, no inherited pending reservations, and the
        parent's per-operation file descriptors closed (never unlocked: the lock belongs to
        the parent's open file description)."""
        self._io_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending.clear()
        self._reload = True
        for fd in self._op_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._op_fds = []
        self._pid = os.getpid()

    # -- protocol ----------------------------------------------------------------------------
    @property
    def budget(self) -> Any:
        """Total, spent and remaining ε/δ, re-read from the file (other processes' releases
        included); a damaged or vanished file raises :class:`LedgerError`."""
        if not self._closed:
            with self._op():
                pass
        return super().budget

    def refresh(self) -> None:
        """Re-read and verify the file now (raises :class:`LedgerError` on damage)."""
        with self._op():
            pass

    def reserve(self, epsilon: float, delta: float = 0.0) -> Reservation:
        """Sync with the file, then hold ε/δ in this process (an early refusal; the binding
        check is in :meth:`commit`)."""
        with self._op():
            pass
        return super().reserve(epsilon, delta)

    def commit(self, reservation: Reservation, entries: list[dict[str, Any]],
               keys: Mapping[str, str] | None = None) -> int:
        """Durably spend: under the file lock, re-check against the file, append, fsync the
        ledger, advance and fsync the head file; return the release id (the line's ``seq``)."""
        try:
            with self._op() as (lfd, hfd):
                return self._commit_locked(lfd, hfd, reservation, entries, keys or {})
        except BaseException:
            self.cancel(reservation)  # a no-op once committed
            raise

    def _commit_locked(self, lfd: int, hfd: int, reservation: Reservation,
                       entries: list[dict[str, Any]], keys: Mapping[str, str]) -> int:
        chain = self._chain
        with self._lock:
            if reservation.token not in self._pending:
                raise LedgerError("reservation was already committed or cancelled")
            eps_ok = self._fits(chain.eps, Fraction(0), reservation.epsilon, self._eps_total)
            dlt_ok = reservation.delta == 0 or self._fits(
                chain.dlt, Fraction(0), reservation.delta, self._delta_total)
        if not (eps_ok and dlt_ok):
            self.cancel(reservation)
            raise BudgetExceededError(
                "another process spent this budget first: this release would exceed it, "
                "so its value was discarded. Nothing was spent; ask for a smaller epsilon."
            )
        seq = chain.seq + 1
        _stamp(entries, self.id, seq)
        record = {
            "type": "release", "ledger_id": chain.ledger_id, "seq": seq, "pid": os.getpid(),
            "epsilon": str(reservation.epsilon), "delta": str(reservation.delta),
            "entries": entries, "prev": chain.hashes[-1],
        }
        with self._lock:  # key lists the file holds already are not written again
            new_keys = {ref: text for ref, text in keys.items() if ref not in self.keys}
        if new_keys:
            record["keys"] = new_keys
        try:
            payload = _encode(record)
        except (TypeError, ValueError) as exc:
            self.cancel(reservation)
            raise LedgerError(f"log entries are not JSON-serialisable: {exc}") from exc
        try:
            self._write_all(lfd, payload)
        except OSError as exc:
            self.cancel(reservation)
            try:  # cut the partial line: nothing was spent
                os.ftruncate(lfd, chain.offset)
            except OSError:
                self._broken = f"writing {self.path} failed ({exc}); reopen the ledger"
            raise LedgerError(f"could not write to {self.path}: {exc}; nothing was spent") from exc
        step = f"an fsync of {self.path}"
        try:
            if self._fsync:
                os.fsync(lfd)
            step = f"writing the head file {self.head_path}"
            self._write_head(hfd, seq, json.loads(payload)["hash"])
        except OSError as exc:
            self.cancel(reservation)
            self._broken = (
                f"{step} failed ({exc}); the last release may be on disk and charged although "
                "its value was never returned. Reopen the ledger to re-read what is on disk"
            )
            raise LedgerError(self._broken) from exc
        chain.extend(payload, str(self.path))
        with self._lock:
            self._eps_spent = chain.eps
            self._delta_spent = chain.dlt
            self._pending.pop(reservation.token, None)
            self._append_log(frozen_entries(entries), new_keys)
            self.note(entries)
            self._doc_chain = (seq, chain.hashes[seq])
            self._refresh_budget_doc()
        return seq

    def snapshot_document(self) -> dict[str, Any]:
        """The log document as of this process's last operation, with ``chain``: the seq and
        hash of the ledger's last line it includes (compare them with the ledger file)."""
        with self._lock:
            entries, keys = self._log_snapshot()
            return {
                "version": LOG_VERSION,
                "ledger_id": self.id,
                "budget": dict(self.budget_doc),
                "entries": entries,
                "keys": keys,
                "chain": {"seq": self._doc_chain[0], "hash": self._doc_chain[1]},
            }

    def __reduce__(self) -> Any:
        """Pickling (e.g. to a ``spawn``-ed process) reopens the same ledger by path there;
        if the file at that path holds another ledger by then, unpickling raises."""
        return (_reopen, (str(self.path), self.id, self._fsync))

    def close(self) -> None:
        """Close the ledger (further operations raise :class:`LedgerError`)."""
        self._closed = True

    def __enter__(self) -> DurableLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reopen(path: str, ledger_id: str, fsync: bool) -> DurableLedger:
    led = DurableLedger(path, fsync=fsync)
    if led.id != ledger_id:
        raise LedgerError(
            f"{path} now holds ledger {led.id!r}, not {ledger_id!r}: it was replaced"
        )
    return led


def open_ledger(
    epsilon: float, delta: float = 0.0, *, path: str | os.PathLike[str] | None = None,
    expect_head: str | None = None,
) -> Ledger:
    """The ledger ``dpf.protect`` would create: in memory, or durable when ``path`` is given
    (refused unless it contains ``expect_head``, when given)."""
    if path is None:
        return Ledger(epsilon, delta)
    return DurableLedger(path, epsilon, delta, expect_head=expect_head)

