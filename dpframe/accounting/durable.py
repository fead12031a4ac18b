r"""A durable, append-only, hash-chained ledger that fails closed (issue 11).

:class:`DurableLedger` is a :class:`dpframe.accounting.ledger.Ledger` whose commits are written to
disk *before* they take effect. Two files make up one ledger (see docs/ledger.md), the ledger
file and its head file (their format: :mod:`dpframe.accounting._ledger_format`).

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

What is detected, what is recovered and what is not: :mod:`dpframe.accounting._ledger_chain`.

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

from dpframe._validation import check_head
from dpframe.accounting._ledger_chain import (
    _Chain,
    _check_against_head,
    _load,
    check_expected_head,
    check_ledger_head,
    head_digest,
    ledger_head,
    read_ledger_file,
)
from dpframe.accounting._ledger_files import _fsync_dir, _ino, _open_existing
from dpframe.accounting._ledger_format import (
    _SLOT,
    FORMAT,
    FORMAT_VERSION,
    HEAD_SUFFIX,
    _check_header,
    _encode,
    _frac,
    _head_slot,
    _read_head,
    check_location,
    head_path,
)
from dpframe.accounting._log_entries import frozen_entries
from dpframe.accounting._log_snapshot import LogDocument
from dpframe.accounting.ledger import Ledger, Reservation, _stamp
from dpframe.accounting.neighbours import (
    ADD_REMOVE,
    FIELD,
    REPLACE,
    Neighbours,
    check_neighbours,
    check_same,
    neighbours_of,
)
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


# -- fork support ------------------------------------------------------------------------------
_open_ledgers: weakref.WeakSet[DurableLedger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for led in list(_open_ledgers):
        led._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


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
        neighbours: Neighbours | None = None,
    ) -> None:
        asked = None if neighbours is None else check_neighbours(neighbours)
        if expect_head is not None:

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
                    self._create(hfd, float(checked._eps_total), float(checked._delta_total),
                                 asked or REPLACE)
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
                held = neighbours_of(header)  # (no field: replace, as every older file)
                if asked is not None:
                    check_same(held, asked, str(self.path))
                super().__init__(header["epsilon_float"], header["delta_float"],
                                 neighbours=held)
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

    def _create(self, hfd: int, epsilon: float, delta: float, neighbours: Neighbours) -> None:
        """Build a new ledger (header in a temp file, head file, link, directory fsync)."""
        self._check_no_prior(hfd)
        ledger_id = secrets.token_hex(16)
        header: dict[str, Any] = {
            "type": "header", "format": FORMAT, "version": FORMAT_VERSION,
            "ledger_id": ledger_id, "created": datetime.now(UTC).isoformat(),
            "epsilon": str(Fraction(epsilon)), "delta": str(Fraction(delta)),
            "epsilon_float": epsilon, "delta_float": delta, "seq": 0, "prev": "",
        }
        if neighbours == ADD_REMOVE:  # (absent: replace, as in every older file)
            header[FIELD] = ADD_REMOVE
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
        return self._committed(reservation, entries, keys, snapshot=False)[0]

    def _committed(self, reservation: Reservation, entries: list[dict[str, Any]],
                   keys: Mapping[str, str] | None, *, snapshot: bool
                   ) -> tuple[int, dict[str, Any] | None]:
        try:
            with self._op() as (lfd, hfd):
                return self._commit_locked(lfd, hfd, reservation, entries, keys or {},
                                           snapshot)
        except BaseException:
            self.cancel(reservation)  # a no-op once committed
            raise

    def _commit_locked(self, lfd: int, hfd: int, reservation: Reservation,
                       entries: list[dict[str, Any]], keys: Mapping[str, str],
                       snapshot: bool = False) -> tuple[int, dict[str, Any] | None]:
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
            return seq, (self._snapshot_locked() if snapshot else None)

    def snapshot_document(self) -> dict[str, Any]:
        """The log document as of this process's last operation, with ``chain``: the seq and
        hash of the ledger's last line it includes (compare them with the ledger file)."""
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> dict[str, Any]:
        return LogDocument({**self._fields(), "chain": {"seq": self._doc_chain[0],
                                                        "hash": self._doc_chain[1]}})

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
    expect_head: str | None = None, neighbours: Neighbours = REPLACE,
) -> Ledger:
    """The ledger ``dpf.protect`` would create: in memory, or durable when ``path`` is given
    (refused unless it contains ``expect_head``, when given, or when it accounts under another
    neighbour definition)."""
    if path is None:
        return Ledger(epsilon, delta, neighbours=neighbours)
    return DurableLedger(path, epsilon, delta, expect_head=expect_head, neighbours=neighbours)


def stored_neighbours(path: str | os.PathLike[str]) -> Neighbours | None:
    """The neighbour definition of the durable ledger at ``path``, read from its header line
    without locking or changing anything (None: no ledger file there yet). :func:`protect`
    asks before it reads any data, so a definition that differs is refused first; opening the
    ledger checks it again under the lock."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
    except OSError:
        return None
    try:
        header = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None  # (a damaged header: opening the ledger says so)
    return neighbours_of(header) if isinstance(header, dict) else None

