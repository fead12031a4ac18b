"""A ledger's log document as of a snapshot, its entries and key lists copied out when first
read (issue 34: a table release's cost must not grow with the ledger's history).

Every release table carries the log of its ledger as of its release
(:mod:`dpframe.accounting.seals`). The document's ``entries`` is a list of every committed
entry; copying it at every table release cost O(history) per release (1 µs at 300 entries,
20 µs at 8,200), although most tables' logs are never read. A ledger only ever *appends* to
its list of entries and to its list of key tables (and replaces both lists, never clears them,
when it forgets its log), so the first ``n`` items of either list never change once there are
``n`` of them. A snapshot therefore needs only the list and ``n``:

* :class:`EntriesAsOf` — the first ``n`` committed entries of a ledger's list, and the entries
  chain recorded when the snapshot was taken; :meth:`EntriesAsOf.value` is the
  :class:`~dpframe.accounting._log_entries.EntryLog` a copy of the list at snapshot time would
  have been (the same items, and the same digest ``d_n`` of the chain), made on first call;
* :class:`KeysAsOf` — the same for the ledger's key table (its ``(reference, JSON)`` pairs in
  the order added, and the keys chain ``k_m`` over them, known at snapshot time);
* :class:`LogDocument` — the document (``version``, ``ledger_id``, ``budget``, ``entries``,
  ``keys``, ...), a ``dict`` whose ``entries`` and ``keys`` are made from these when anything
  reads it (every reading method, comparison, copy or pickling materializes it first, so a
  reader sees exactly the document a copy at snapshot time would have been). A seal only needs
  the chains' digests, so :func:`dpframe.accounting.seals.attach_release_log` takes the parts
  unread (:meth:`LogDocument.fields`) and the copy is made when the table's log is first read.

A later commit appends past ``n`` and leaves the snapshot's prefix as it was, so a later
release never changes an earlier table's log.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from dpframe.accounting._log_entries import EntryChain, EntryLog, KeyTable

__all__ = ["LAZY_PARTS", "EntriesAsOf", "KeysAsOf", "LogDocument", "add_materializing_readers",
           "resolved"]


class EntriesAsOf:
    """The first ``count`` entries of a ledger's append-only list, as of a snapshot, with the
    ledger's entries chain and the ``(count, digest)`` pair it held then (a valid start for
    the chain over these entries: :class:`~dpframe.accounting._log_entries.EntryChain`)."""

    __slots__ = ("_chain", "_count", "_lock", "_source", "_start", "_value")

    def __init__(self, source: list[Any], chain: EntryChain) -> None:
        self._source, self._count = source, len(source)
        self._chain, self._start = chain, chain.latest
        self._value: EntryLog | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def value(self) -> EntryLog:
        """The entries as an :class:`EntryLog` (made at the first call, then the same one)."""
        with self._lock:
            if self._value is None:
                out = EntryLog(self._source[: self._count])  # (a prefix: appends go past it)
                out._chain, out._start = self._chain, self._start
                self._value = out
            return self._value


class KeysAsOf:
    """The first ``count`` key lists of a ledger's append-only list of ``(reference, JSON)``
    pairs, as of a snapshot, with the keys chain over exactly them."""

    __slots__ = ("_count", "_digest", "_lock", "_source", "_value")

    def __init__(self, source: list[tuple[str, str]], digest: str) -> None:
        self._source, self._count, self._digest = source, len(source), digest
        self._value: KeyTable | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def value(self) -> KeyTable:
        """The key lists as a :class:`KeyTable` (made at the first call, then the same one)."""
        with self._lock:
            if self._value is None:
                out = KeyTable()
                dict.update(out, self._source[: self._count])
                out.digest = self._digest
                self._value = out
            return self._value


#: the parts of a document copied out when it is read
LAZY_PARTS = (EntriesAsOf, KeysAsOf)


def resolved(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` (a plain dict) with every lazy part replaced by its value, in place."""
    for name, part in [(k, v) for k, v in fields.items() if isinstance(v, LAZY_PARTS)]:
        fields[name] = part.value()
    return fields


def _materializing(name: str) -> Callable[..., Any]:
    base = getattr(dict, name)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.materialize()
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


#: every ``dict`` method that reads or changes its items (a subclass overriding ``__iter__``
#: also makes ``dict(d)``, ``{**d}`` and the JSON encoder go through ``keys``/``items``)
READERS = ("__getitem__", "__contains__", "__iter__", "__len__", "__repr__", "__or__",
           "__ror__", "__ior__", "__setitem__", "__delitem__", "__reversed__", "get", "keys",
           "items", "values", "copy", "pop", "popitem", "setdefault", "update", "clear")


def add_materializing_readers(cls: type) -> type:
    """Make every reading method of the ``dict`` subclass ``cls`` call ``self.materialize()``
    first (:data:`READERS`)."""
    for name in READERS:
        setattr(cls, name, _materializing(name))
    return cls


@add_materializing_readers
class LogDocument(dict[str, Any]):
    """A ledger's log document as of a snapshot (module docstring): a ``dict`` that holds
    :class:`EntriesAsOf` / :class:`KeysAsOf` parts until it is first read, and the entries
    and key table they stand for from then on. Its items never empty (the JSON
    encoder skips an empty dict without asking it)."""

    __slots__ = ("_stored",)

    def __init__(self, fields: dict[str, Any]) -> None:
        dict.__init__(self, fields)
        #: the fields as given (a plain dict: read without materializing), None once read
        self._stored: dict[str, Any] | None = fields

    def materialize(self) -> None:
        """Copy the entries and key lists out (once); afterwards a plain document."""
        stored = self._stored
        if stored is not None:
            dict.update(self, resolved(dict(stored)))
            self._stored = None

    def fields(self) -> dict[str, Any]:
        """A new dict of the document's fields, the entries and keys as their lazy parts
        until the document is read (then as read): for sealing without copying them."""
        stored = self._stored
        return dict(stored) if stored is not None else dict.copy(self)

    def __eq__(self, other: object) -> bool:
        self.materialize()
        if isinstance(other, LogDocument):
            other.materialize()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __copy__(self) -> dict[str, Any]:
        self.materialize()
        return dict.copy(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        self.materialize()
        return copy.deepcopy(dict.copy(self), memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        self.materialize()
        return (dict, (dict.copy(self),))
