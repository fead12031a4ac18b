"""A protected data set and the session that names its ledger.

* :class:`Dataset` — one protected data set: its ledger, its public size ``n`` (read once by
  :func:`~dpframe.provenance._protect.protect`), declared group keys, and for lazy sources
  the files read, bound by content.
* :class:`Session` — the ledger of one protected data set, as an object you can name.
"""

from __future__ import annotations

import contextvars
import os
import threading
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from dpframe._validation import check_head
from dpframe.accounting.durable import check_ledger_head, check_location
from dpframe.accounting.ledger import Budget, Ledger
from dpframe.accounting.neighbours import ADD_REMOVE, REPLACE, Neighbours
from dpframe.backends import Backend
from dpframe.errors import (
    LedgerError,
    NoLedgerError,
    ParameterError,
    SourceChangedError,
)
from dpframe.provenance._binding import SourceBinding, source_columns

__all__ = ["Dataset", "Session", "current_session", "lookup_session"]

_current: contextvars.ContextVar[tuple[Session, ...]] = contextvars.ContextVar(
    "dpframe_sessions", default=()
)
_named: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
#: re-entrant: garbage collection can run a registry weakref callback (which takes this lock)
#: in the middle of a block that already holds it, on the same thread
_registry_lock = threading.RLock()


@dataclass(eq=False)
class Dataset:
    """One protected data set: its ledger and the public facts read at protect time."""

    ledger: Ledger
    n: int
    backend: Backend
    session: Session
    root_ref: Any = field(default=None, repr=False)  # weakref to the protected frame
    source: SourceBinding | None = None  # lazy roots
    root_strong: Any = field(default=None, repr=False)  # dpframe's own root, for re-counting
    #: the fill word given at protect for every column (``missing="lower"``...), which
    #: columns bounded later on a derivation take too; None: no word given
    fill_word: str | None = None
    #: the neighbour definition (``dpf.protect(..., neighbours=...)``,
    #: :mod:`dpframe.accounting.neighbours`); under ``"add_remove"`` ``n`` is private: no plan,
    #: parameter, refusal or log field reads it
    neighbours: Neighbours = REPLACE
    #: ``dpf.protect(..., max_rows=...)``: the public bound on the row count declared for an
    #: add/remove data set (it sizes count domains and fixed-point grids instead of ``n``)
    max_rows: int | None = None

    @property
    def size_private(self) -> bool:
        """Under add/remove the row count is private, whatever the derivation."""
        return self.neighbours == ADD_REMOVE

    def check_unchanged(self) -> None:
        """Refuse (before anything is spent) if a lazy root's files were replaced, added,
        removed or rewritten since ``protect`` — their list, metadata and content digest
        (:class:`SourceBinding`), and for sources dpframe cannot bind a re-count of rows.
        In-memory data needs no check: releases read dpframe's private snapshot, never the
        object the user holds, so an in-place edit of that object cannot reach a release and
        is not looked at. (:meth:`begin_check` and its result, at once.)"""
        self.begin_check()()

    def begin_check(self, columns: Collection[str] | None = None, plan: Any = None
                    ) -> Callable[[], None]:
        """:meth:`check_unchanged` split for a release
        (:func:`~dpframe.release._pipeline.run`): the list and metadata of the files (and
        the re-count, if any) are checked now, raising :class:`SourceChangedError`; the
        content digests run in a background thread (:class:`ContentCheck`) while the
        engine reads. Returns ``finish``: it waits for the digests and raises
        :class:`SourceChangedError` if any file's content changed — the caller calls it after
        the read and before drawing noise, and on that error cancels its reservation and
        drops what was read. A re-count that disagrees waits for the digests first, so a
        rewritten file is reported as such, as before.

        ``columns``: the columns *of the protected frame itself* that the release can read
        (a superset is fine; None: all) —
        :func:`~dpframe.provenance._binding.source_columns` of the plan the release reads and
        the columns its queries, groups and privacy unit read from it. Only the column
        chunks of those columns (and every Parquet file's footer and other bytes outside
        column chunks) are hashed, where the binding maps them to the files' columns
        (:class:`SourceBinding`, ``by_name``); otherwise every byte is. ``plan``: when given,
        ``columns`` are the columns the release reads *from that plan* (the protected frame
        with its verified steps), mapped to the protected frame's columns by
        :func:`~dpframe.provenance._binding.source_columns` (None there: every column) — only
        where ``by_name`` holds, so no other source pays for the mapping."""
        if self.source is None:
            return _unchanged
        if plan is not None and columns is not None:
            columns = source_columns(plan, columns) if self.source.by_name else None
        check = self.source.begin_check(columns)
        if check.decided:
            _refuse_changed_files(True, read=False)
        if self.source.recount and self.backend.count_rows(self.root_strong,
                                                            fresh=True) != self.n:
            _refuse_changed_files(check.changed(), read=False)
            raise SourceChangedError(
                "the source of this protected frame now has a different number of rows than "
                "at dpf.protect(); its public size no longer holds. Queries on it are refused. "
                "Nothing was spent."
            )
        return lambda: _refuse_changed_files(check.changed(), read=True)


def _unchanged() -> None:
    """The check of a source with nothing to check (in-memory data)."""


def _refuse_changed_files(changed: bool, *, read: bool) -> None:
    """Raise if ``changed``; ``read``: the engine may have read the files meanwhile (the
    digests ran beside the read), which the message then says was discarded."""
    if changed:
        raise SourceChangedError(
            "the files behind this protected frame changed after dpf.protect() (added, "
            "removed, replaced, or their content rewritten); the rows it counted are no "
            "longer what a release would read. Queries on it are refused. " + (
                "Nothing was spent or released (what the engine read meanwhile was "
                "discarded unlooked-at)." if read else "Nothing was read or spent.")
        )


class Session:
    """The ledger of one protected data set, as an object you can name.

    ``path=``: keep the ledger in a durable, append-only file (:mod:`dpframe.accounting.durable`).
    ``expect_head=``: a head digest of that ledger archived earlier (``dpframe inspect LEDGER
    --head``); the ledger is refused (:class:`LedgerError`, here and when :func:`protect` opens
    it) unless its history contains that head — a ledger rolled back to an older copy,
    deleted, or a copy that spent separately is not used.
    :func:`protect` binds a session to its data (the one passed as ``session=``, else the
    current ``with`` block's, else a new one). Queries find their ledger by provenance; naming
    a session (``session=s``) or querying inside ``with s:`` only *asserts* which ledger is
    meant, and a mismatch is an error.
    """

    def __init__(self, name: str | None = None, *, path: str | os.PathLike[str] | None = None,
                 expect_head: str | None = None) -> None:
        if path is not None:

            check_location(path)  # a clear error now, not at the first protect
        if expect_head is not None:
            _check_expected_head(path, expect_head)
        self.name = name
        self.path = path
        self.expect_head = expect_head
        self.dataset: Dataset | None = None
        self._lock = threading.Lock()
        self._tokens: list[contextvars.Token[tuple[Session, ...]]] = []
        if name is not None:
            with _registry_lock:
                if name in _named:
                    raise LedgerError(
                        f"a session named {name!r} already exists; choose another name"
                    )
                _named[name] = self

    def __enter__(self) -> Session:
        self._tokens.append(_current.set((*_current.get(), self)))
        return self

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:
        return self

    def __copy__(self) -> Session:
        return self

    def _bind(self, dataset: Dataset) -> None:
        with self._lock:
            if self.dataset is not None:
                raise LedgerError(
                    "this session already holds a protected dataset (one ledger per dataset); "
                    "open a new dpf.Session() for the other data"
                )
            self.dataset = dataset

    @property
    def ledger(self) -> Ledger:
        if self.dataset is None:
            raise NoLedgerError(
                "this session has no protected data yet: call dpf.protect(frame, epsilon=..., "
                "bounds=..., session=session) first"
            )
        return self.dataset.ledger

    @property
    def budget(self) -> Budget:
        return self.ledger.budget

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        state = repr(self.ledger.budget) if self.dataset else "no data protected yet"
        return f"<dpf.Session{label}: {state}>"


def _check_expected_head(path: str | os.PathLike[str] | None, expect_head: str) -> None:
    """``Session(path, expect_head=...)``: the ledger at ``path`` exists and its history
    contains ``expect_head`` (:func:`dpframe.accounting.durable.check_expected_head`), read without
    modifying it."""

    check_head(expect_head)
    if path is None:
        raise ParameterError("expect_head= checks a durable ledger: pass path= too")
    check_ledger_head(path, expect_head)


def current_session() -> Session | None:
    """The innermost session entered with ``with``, or None."""
    stack = _current.get()
    return stack[-1] if stack else None


def lookup_session(session: Session | str | None) -> Session | None:
    """A session given as an object or by name."""
    if session is None or isinstance(session, Session):
        return session
    if isinstance(session, str):
        found = _named.get(session)
        if found is None:
            raise NoLedgerError(
                f"no session named {session!r}; create it with dpf.Session(name=...)"
            )
        return found
    raise ParameterError(f"session must be a dpf.Session or its name, got {session!r}")
