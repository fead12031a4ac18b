"""Committed log entries as immutable JSON values whose canonical text is computed once.

Every release table carries the log document of its ledger as of that release, sealed with a
SHA-256 over the document's canonical JSON (:mod:`dpframe.accounting.seals`). Re-encoding (and, to
detach the table's copy from the ledger, re-decoding) every earlier entry at each release made a
table release cost O(entries in the ledger): 38 ms after 1,000 queries, 110 ms after 3,000.

A ledger never changes an entry after it commits it, so each committed entry becomes a
:class:`LogEntry`: a ``dict`` that refuses mutation (nested lists and dicts likewise), remembers
its canonical JSON, and can therefore be shared by every document and table that includes it.
:func:`canonical_json` writes a document byte for byte as
``json.dumps(doc, sort_keys=True, separators=(",", ":"))`` would, taking each entry's cached
text; :func:`detached` copies a document for a table, sharing the immutable entries.

**Chained digests** (issue 24: a table release sealed the whole log, O(history) per release).
A ledger also keeps a running digest of its entries and one of its key table, extended at each
commit by the new items only::

    entries:  d_0 = SHA-256("dpframe-log-entries-v1")
              d_i = SHA-256(d_{i-1} ‖ canonical(e_i))
    keys:     k_0 = SHA-256("dpframe-log-keys-v1")
              k_i = SHA-256(k_{i-1} ‖ canonical([ref_i, json_i]))

(``d_{i-1}`` as its 32 raw bytes, the canonical JSON as UTF-8; keys in the order the ledger
added them, which is the order of the document's ``keys`` object). ``d_n`` binds the whole
ordered list of entries, so a seal that covers ``d_n`` covers the log by reference:
:meth:`dpframe.accounting.ledger.Ledger.snapshot_document` hands out its entries as an
:class:`EntryLog` and its keys as a :class:`KeyTable`, immutable containers that carry their
digest (made from the ledger's append-only lists when first read:
:mod:`dpframe.accounting._log_snapshot`), and sealing a table costs O(1) in the history. A
verifier recomputes both chains from the document (O(entries), once per check).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, NoReturn

__all__ = [
    "ENTRIES_CHAIN_START",
    "KEYS_CHAIN_START",
    "EntryChain",
    "EntryLog",
    "KeyTable",
    "LogEntry",
    "canonical_json",
    "chain_entries",
    "chain_keys",
    "detached",
    "entries_digest",
    "frozen_entries",
    "keys_digest",
]


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("a committed log entry cannot be changed; copy it with dict(entry)")


class _Shared:
    """Immutable, so ``copy``/``deepcopy`` (pandas copies ``attrs`` that way) return the
    object itself."""

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self


class _FrozenList(_Shared, list[Any]):
    """A JSON list inside a committed entry (a ``list`` for readers and ``json``)."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> Any:
        return (_frozen, (list(self),))


class LogEntry(_Shared, dict[str, Any]):
    """A committed log entry: a ``dict`` that cannot change, with its canonical JSON cached;
    copies are the entry itself."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    update = pop = popitem = clear = setdefault = _refuse

    @property
    def canonical(self) -> str:
        """``json.dumps(self, sort_keys=True, separators=(",", ":"))``, computed once."""
        text = self.__dict__.get("_canonical")
        if text is None:
            text = json.dumps(self, sort_keys=True, separators=(",", ":"))
            self.__dict__["_canonical"] = text
        return text

    def __reduce__(self) -> Any:
        return (_frozen, (dict(self),))


_SCALAR_TYPES = (str, int, float, bool, type(None))
_SCALARS = frozenset(_SCALAR_TYPES)
_STR = {str}


class _NotStringKeyError(Exception):
    """A dict key JSON would turn into a string (the entry takes the round trip)."""


def _frozen(value: Any) -> Any:
    """An immutable copy of a JSON value (dicts become :class:`LogEntry`, lists
    ``_FrozenList``, tuples lists, as a JSON round trip would make them); raises
    :class:`_NotStringKeyError` for a dict key that is not a string."""
    if isinstance(value, dict):
        if not set(map(type, value)) <= _STR:
            raise _NotStringKeyError
        out = LogEntry()
        dict.update(out, value)  # then freeze the few values that are containers, if any
        if not set(map(type, value.values())) <= _SCALARS:
            for k, v in value.items():
                if type(v) not in _SCALARS:
                    dict.__setitem__(out, k, _frozen(v))
        return out
    if isinstance(value, list | tuple):
        return _FrozenList(v if type(v) in _SCALARS else _frozen(v) for v in value)
    return value


def frozen_entries(entries: Iterable[dict[str, Any]]) -> list[LogEntry]:
    """Entries as a ledger commits them, frozen: what a JSON round trip (the document copy
    made of them before) would give -- tuples become lists; an entry whose dicts have keys
    other than strings (JSON turns them into strings) takes the round trip itself."""
    out = []
    for entry in entries:
        if isinstance(entry, LogEntry):
            out.append(entry)
            continue
        try:
            frozen = _frozen(entry)
        except _NotStringKeyError:
            frozen = _frozen(json.loads(json.dumps(entry)))
        assert isinstance(frozen, LogEntry)
        out.append(frozen)
    return out


ENTRIES_CHAIN_START = hashlib.sha256(b"dpframe-log-entries-v1").hexdigest()
KEYS_CHAIN_START = hashlib.sha256(b"dpframe-log-keys-v1").hexdigest()


def chain_entries(digest: str, entries: Iterable[Any]) -> str:
    """The entries chain ``digest`` extended by ``entries`` (module docstring)."""
    state = bytes.fromhex(digest)
    for entry in entries:  # a plain value (read from a file): json's C encoder, same text
        text = entry.canonical if isinstance(entry, LogEntry) else _dump(entry)
        state = hashlib.sha256(state + text.encode("utf-8")).digest()
    return state.hex()


def chain_keys(digest: str, items: Iterable[tuple[Any, Any]]) -> str:
    """The keys chain ``digest`` extended by ``(reference, JSON text)`` pairs."""
    state = bytes.fromhex(digest)
    for ref, text in items:
        state = hashlib.sha256(state + _dump([ref, text]).encode("utf-8")).digest()
    return state.hex()


class EntryChain:
    """The entries chain of one append-only list of committed entries, extended lazily.

    A ledger commits an entry on every release, but the chain is read only when a document is
    sealed (a release table, an export) or verified; a scalar release (``df.dp.mean``) never
    needs it. So the ledger keeps the latest ``(count, digest)`` known for its list here, and
    a snapshot (:class:`EntryLog`) extends it over its own items when its digest is first
    read, recording the extension for later snapshots. Every snapshot sharing one chain is a
    prefix of the same list (the ledger replaces the chain when it clears its log), so any
    recorded pair is a valid start for a longer snapshot; a pair is a tuple, replaced whole."""

    __slots__ = ("latest",)

    def __init__(self, count: int = 0, digest: str = ENTRIES_CHAIN_START) -> None:
        self.latest: tuple[int, str] = (count, digest)

    def digest_of(self, entries: list[Any], start: tuple[int, str]) -> str:
        """The chain over ``entries`` (a prefix of this chain's list), from the recorded
        pair if it lies within them, else from ``start`` (a pair that does)."""
        count, digest = self.latest
        if not start[0] <= count <= len(entries):
            count, digest = start
        digest = chain_entries(digest, entries[count:])
        if len(entries) > self.latest[0]:
            self.latest = (len(entries), digest)
        return digest


class EntryLog(_FrozenList):
    """A ledger's committed entries as of a snapshot: an immutable ``list`` that carries
    ``digest``, the entries chain over exactly its items (computed on first read from the
    ledger's :class:`EntryChain`)."""

    _digest: str | None = None
    _chain: EntryChain | None = None
    _start: tuple[int, str] = (0, ENTRIES_CHAIN_START)

    @classmethod
    def of(cls, entries: list[Any], chain: EntryChain) -> EntryLog:
        """A snapshot of ``entries`` whose digest ``chain`` will give."""
        out = cls(entries)
        out._chain, out._start = chain, chain.latest
        return out

    @property
    def digest(self) -> str:
        if self._digest is None:
            chain = self._chain or EntryChain()
            self._digest = chain.digest_of(self, self._start)
        return self._digest

    @digest.setter
    def digest(self, value: str) -> None:
        self._digest = value

    def __reduce__(self) -> Any:
        return (_entry_log, (list(self), self.digest))


class KeyTable(LogEntry):
    """A ledger's key table as of a snapshot: an immutable ``dict`` (insertion order kept)
    that carries ``digest``, the keys chain over exactly its items."""

    digest: str

    def __reduce__(self) -> Any:
        return (_key_table, (dict(self), self.digest))


def _entry_log(entries: list[Any], digest: str) -> EntryLog:
    out = EntryLog(entries)
    out.digest = digest
    return out


def _key_table(keys: dict[str, Any], digest: str) -> KeyTable:
    out = KeyTable()
    dict.update(out, keys)
    out.digest = digest
    return out


def entries_digest(entries: Any) -> str:
    """The entries chain over ``entries``: the carried one of an :class:`EntryLog`, else
    computed (O(len(entries)))."""
    if isinstance(entries, EntryLog):
        return entries.digest
    return chain_entries(ENTRIES_CHAIN_START, entries)


def keys_digest(keys: Any) -> str:
    """The keys chain over ``keys`` (a mapping, in its order): the carried one of a
    :class:`KeyTable`, else computed."""
    if isinstance(keys, KeyTable):
        return keys.digest
    return chain_keys(KEYS_CHAIN_START, keys.items())


def detached(value: Any) -> Any:
    """A copy of a JSON document that no later change of the original reaches: committed
    entries (immutable) are shared, other dicts and lists copied, tuples made lists."""
    if isinstance(value, LogEntry | _FrozenList):
        return value
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [detached(v) for v in value]
    if isinstance(value, _SCALAR_TYPES):
        return value
    return json.loads(json.dumps(value))  # (anything else: as the JSON round trip made it)


def canonical_json(doc: Any) -> str:
    """``json.dumps(doc, sort_keys=True, separators=(",", ":"))``, with committed entries
    written from their cached text: ``doc`` is a document (a ``dict`` with string keys, whose
    lists may hold entries), a list of entries, or any JSON value."""
    if isinstance(doc, LogEntry):
        return doc.canonical
    if isinstance(doc, list) and any(isinstance(v, LogEntry) for v in doc):
        return "[" + ",".join(canonical_json(v) for v in doc) + "]"
    if isinstance(doc, dict) and all(isinstance(k, str) for k in doc):
        return "{" + ",".join(json.dumps(k) + ":" + canonical_json(doc[k])
                              for k in sorted(doc)) + "}"
    return _dump(doc)


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
