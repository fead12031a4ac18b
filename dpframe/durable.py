r"""A durable, append-only ledger: spending survives a crash, and several processes share it.

:class:`DurableLedger` is a :class:`dpframe.accounting.Ledger` whose commits are written to a
JSON-lines file *before* they take effect: the release's line is written, flushed and
``fsync``-ed, and only then is the value returned to the caller. Re-opening the file (after a
restart, a crash, or from another process) reloads the spent budget.

**File format** (one JSON object per line, UTF-8, ``\n``-terminated)::

    {"type": "header", "format": "dpframe-ledger", "version": 1,
     "epsilon": "1/1", "delta": "0/1", "epsilon_float": 1.0, "delta_float": 0.0, "crc": ...}
    {"type": "release", "seq": 1, "pid": 4242, "epsilon": "1/10", "delta": "0/1",
     "entries": [...log entries...], "crc": ...}

ε and δ are stored as exact fractions of the floats that were spent, so sums are exact and
independent of order (as in the in-memory ledger). ``crc`` is the CRC-32 of the line's canonical
JSON without the ``crc`` field.

**Crash consistency.** A release is acknowledged only after its complete line (with its
newline) is on disk. A crash can therefore leave at most one *torn* line: the last one, not
newline-terminated or failing to parse or to match its CRC. That release was never returned to
anyone, so on open the torn tail is cut off (``truncate``) and the fact is recorded in
:attr:`DurableLedger.recovered`. A damaged line that is *not* the last one cannot come from a
crash of this writer and raises :class:`~dpframe.errors.LedgerError` (never silently ignored: it
could hide spent budget).

**Guarantee.** After any crash, the spent budget reloaded from the file is at least the sum of
every release that was returned to a caller (each was fsync-ed first), and at most that plus
the one torn release (which is discarded; discarding it is safe because nobody saw its value).

**Several threads and processes.** Commits take a process-local lock and an exclusive
``flock`` on the file, re-read any lines other processes appended since the last read, check
``spent + this ≤ budget·(1 + 1e-9)`` against the file's total, append, fsync, and release the
lock: the file is the single source of truth, so no interleaving can overspend. ``reserve``
also syncs first, for an early refusal; the binding check is the one in ``commit`` (a release
refused there raises :class:`~dpframe.errors.BudgetExceededError`, its value is never
returned, and nothing is spent).

**Use.** ``dpf.Session(path="ledger.jsonl")``: :func:`dpframe.protect` then builds its ledger
with :func:`open_ledger`, so every ``.dp`` release through that session is durable.
:func:`open_ledger` returns a plain in-memory :class:`Ledger` when ``path`` is None.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.accounting import Ledger, Reservation, _stamp
from dpframe.errors import BudgetExceededError, LedgerError, ParameterError

__all__ = ["FORMAT", "FORMAT_VERSION", "DurableLedger", "open_ledger", "read_ledger_file"]

FORMAT = "dpframe-ledger"
FORMAT_VERSION = 1


def _crc(record: dict[str, Any]) -> int:
    body = {k: v for k, v in record.items() if k != "crc"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return zlib.crc32(canon.encode("utf-8"))


def _encode(record: dict[str, Any]) -> bytes:
    rec = dict(record)
    rec["crc"] = _crc(rec)
    return (json.dumps(rec, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def _frac(s: Any) -> Fraction:
    return Fraction(str(s))


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record of one complete line, or None if it is damaged."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or rec.get("crc") != _crc(rec):
        return None
    return rec


def read_ledger_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ledger file without modifying it.

    Returns ``{"header", "releases", "epsilon_spent", "delta_spent", "torn_tail_bytes",
    "valid_bytes"}`` (spent amounts as exact :class:`~fractions.Fraction`). Raises
    :class:`LedgerError` for damage other than a torn last line.
    """
    data = Path(path).read_bytes()
    return _scan(data, str(path))


def _scan(data: bytes, where: str, *, header_expected: bool = True) -> dict[str, Any]:
    lines = data.split(b"\n")
    # ``lines[-1]`` is what follows the last newline: empty if the file ends cleanly
    complete, tail = lines[:-1], lines[-1]
    header: dict[str, Any] | None = None
    releases: list[dict[str, Any]] = []
    eps = Fraction(0)
    dlt = Fraction(0)
    valid = 0
    torn = len(tail)
    for i, raw in enumerate(complete):
        rec = _parse(raw)
        if rec is None:
            # a crash can only leave an *unterminated* tail (each line is written whole, with
            # its newline, and fsync-ed before the release returns); a damaged terminated line
            # may hide a release that was returned, so it is never dropped
            raise LedgerError(
                f"ledger file {where} is damaged at line {i + 1} (a complete line, so not a "
                "torn write); restore it from a backup — dpframe will not guess the spent budget"
            )
        if i == 0 and header_expected:
            if rec.get("type") != "header" or rec.get("format") != FORMAT:
                raise LedgerError(f"{where} is not a dpframe ledger file (no header line)")
            if rec.get("version") != FORMAT_VERSION:
                raise LedgerError(
                    f"{where} has ledger format version {rec.get('version')!r}; this dpframe "
                    f"reads version {FORMAT_VERSION}"
                )
            header = rec
        elif rec.get("type") == "release":
            releases.append(rec)
            eps += _frac(rec["epsilon"])
            dlt += _frac(rec["delta"])
        else:
            raise LedgerError(f"{where}: unknown record type at line {i + 1}")
        valid += len(raw) + 1
    return {
        "header": header,
        "releases": releases,
        "epsilon_spent": eps,
        "delta_spent": dlt,
        "torn_tail_bytes": torn,
        "valid_bytes": valid,
    }


class DurableLedger(Ledger):
    """A :class:`Ledger` backed by an append-only, fsync-ed JSON-lines file.

    ``DurableLedger(path, epsilon, delta)`` creates the file (or opens an existing one, whose
    budget must equal the one given); ``DurableLedger(path)`` opens an existing file with its
    own budget. ``fsync=False`` is for tests of throughput only: it gives up crash safety.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        fsync: bool = True,
    ) -> None:
        self.path = Path(path)
        self._fsync = bool(fsync)
        self._io_lock = threading.Lock()
        self.recovered: dict[str, Any] = {"torn_tail_bytes": 0}
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            with self._file_lock():
                header = self._open_or_create(epsilon, delta)
        except BaseException:
            os.close(self._fd)
            raise
        super().__init__(header["epsilon_float"], header["delta_float"])
        self._eps_total = _frac(header["epsilon"])
        self._delta_total = _frac(header["delta"])
        self._offset = 0
        self._seq = 0
        with self._io_lock, self._file_lock():
            self._sync()

    # -- file plumbing --------------------------------------------------------------------
    class _Flock:
        def __init__(self, fd: int) -> None:
            self.fd = fd

        def __enter__(self) -> None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)

        def __exit__(self, *exc: object) -> None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _file_lock(self) -> DurableLedger._Flock:
        return DurableLedger._Flock(self._fd)

    def _read_all(self) -> bytes:
        size = os.fstat(self._fd).st_size
        return os.pread(self._fd, size, 0) if size else b""

    def _write(self, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self._fsync:
            os.fsync(self._fd)

    def _open_or_create(self, epsilon: float | None, delta: float | None) -> dict[str, Any]:
        data = self._read_all()
        if not data:
            if epsilon is None:
                raise ParameterError(
                    f"{self.path} does not exist or is empty; pass epsilon= (and delta=) to "
                    "create a new durable ledger"
                )
            eps = float(epsilon)
            dlt = float(delta or 0.0)
            Ledger(eps, dlt)  # validates the budget with the usual messages
            header = {
                "type": "header", "format": FORMAT, "version": FORMAT_VERSION,
                "epsilon": str(Fraction(eps)), "delta": str(Fraction(dlt)),
                "epsilon_float": eps, "delta_float": dlt,
            }
            self._write(_encode(header))
            self._fsync_dir()
            return header
        scan = _scan(data, str(self.path))
        if scan["header"] is None:
            if scan["valid_bytes"] == 0:  # the header line itself was torn: nothing was spent
                os.ftruncate(self._fd, 0)
                self.recovered["torn_tail_bytes"] = len(data)
                return self._open_or_create(epsilon, delta)
            raise LedgerError(f"{self.path} has no header")  # pragma: no cover
        header = scan["header"]
        for name, given in (("epsilon", epsilon), ("delta", delta)):
            if given is not None and _frac(header[name]) != Fraction(float(given)):
                raise LedgerError(
                    f"{self.path} holds a ledger with {name}={header[name + '_float']!r}, not "
                    f"{given!r}; a budget cannot be changed by reopening. Open it without "
                    f"{name}= (or with the same value), or use a new file"
                )
        return header

    def _fsync_dir(self) -> None:
        if not self._fsync:
            return
        try:
            dfd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:  # pragma: no cover - platforms without directory fds
            return
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _sync(self) -> None:
        """Load lines appended since the last read; cut a torn tail. Needs both locks."""
        size = os.fstat(self._fd).st_size
        if size < self._offset:
            raise LedgerError(f"{self.path} shrank while open; it was modified by hand")
        data = os.pread(self._fd, size - self._offset, self._offset) if size > self._offset else b""
        if not data:
            return
        scan = _scan(data, str(self.path), header_expected=self._offset == 0)
        if scan["torn_tail_bytes"]:
            # only a crashed writer leaves an unterminated/damaged last line, and we hold
            # the exclusive lock, so no live writer is mid-append: cut it off
            os.ftruncate(self._fd, self._offset + scan["valid_bytes"])
            if self._fsync:
                os.fsync(self._fd)
            self.recovered["torn_tail_bytes"] += scan["torn_tail_bytes"]
        with self._lock:
            self._eps_spent += scan["epsilon_spent"]
            self._delta_spent += scan["delta_spent"]
            for rec in scan["releases"]:
                self.entries.extend(rec.get("entries", []))
            self._seq += len(scan["releases"])
            self._refresh_budget_doc()
        self._offset += scan["valid_bytes"]

    # -- protocol -------------------------------------------------------------------------
    def reserve(self, epsilon: float, delta: float = 0.0) -> Reservation:
        """Sync with the file, then hold ε/δ in this process (early refusal)."""
        with self._io_lock, self._file_lock():
            self._sync()
        return super().reserve(epsilon, delta)

    def commit(self, reservation: Reservation, entries: list[dict[str, Any]]) -> int:
        """Durably spend: under the file lock, re-check against the file, append, fsync."""
        with self._io_lock, self._file_lock():
            self._sync()
            with self._lock:
                if reservation.token not in self._pending:
                    raise LedgerError("reservation was already committed or cancelled")
                eps_ok = self._fits(self._eps_spent, Fraction(0), reservation.epsilon,
                                    self._eps_total)
                dlt_ok = reservation.delta == 0 or self._fits(
                    self._delta_spent, Fraction(0), reservation.delta, self._delta_total)
            if not (eps_ok and dlt_ok):
                self.cancel(reservation)
                raise BudgetExceededError(
                    "another process spent this budget first: this release would exceed it, "
                    "so its value was discarded. Nothing was spent; ask for a smaller epsilon."
                )
            _stamp(entries, self.id, self._seq + 1)
            record = {
                "type": "release", "seq": self._seq + 1, "pid": os.getpid(),
                "epsilon": str(reservation.epsilon), "delta": str(reservation.delta),
                "entries": entries,
            }
            try:
                payload = _encode(record)
            except (TypeError, ValueError) as exc:
                self.cancel(reservation)
                raise LedgerError(f"log entries are not JSON-serialisable: {exc}") from exc
            self._write(payload)
            self._seq += 1
            self._offset += len(payload)
            with self._lock:  # our own line is now on disk: count it as read
                self._eps_spent += reservation.epsilon
                self._delta_spent += reservation.delta
                self._pending.pop(reservation.token, None)
                self.entries.extend(entries)
                self._refresh_budget_doc()
            return self._seq

    def close(self) -> None:
        """Close the file (further commits fail)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> DurableLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


def open_ledger(
    epsilon: float, delta: float = 0.0, *, path: str | os.PathLike[str] | None = None
) -> Ledger:
    """The ledger ``dpf.protect`` would create: in memory, or durable when ``path`` is given."""
    if path is None:
        return Ledger(epsilon, delta)
    return DurableLedger(path, epsilon, delta)
