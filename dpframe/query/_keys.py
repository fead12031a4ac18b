"""Declared group keys as one immutable public value whose derived forms are built once.

A group-by with many public keys (100,000 regions, say) touches the key list at several steps
of every release: checking the keys against the column's dtype, matching rows to keys, naming
the key list in the log (a SHA-256 of its JSON), and building the result frame. Each of these
is a pass over the keys in Python or a conversion to an engine's array, so repeating them per
release costs more than the aggregation itself. :class:`Keys` is a ``tuple`` (it is used
wherever the key tuple was) that remembers those derived forms; a frame's declared keys and a
group-by's ``keys=`` become one such object, reused by every release that names them.

Everything here is computed from the keys alone, which are public: no data is read.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Keys", "checked_keys", "key_kinds", "keys_reference"]


class Keys(tuple[Any, ...]):
    """A key list (one column: the keys; several: key tuples) with cached forms.

    Equal to, and hashed as, the plain tuple of its keys. The cached forms are only ever
    derived from the keys, so a cached value is the value that recomputing would give.
    Constructing one checks nothing: only :func:`checked_keys` marks a list as checked
    (distinct, no missing values), and dpframe trusts no other."""

    @property
    def checked(self) -> bool:
        """Made by :func:`checked_keys` (so distinct and non-missing)."""
        return self.__dict__.get("_checked") is _CHECKED

    @functools.cached_property
    def reference(self) -> tuple[str, str]:
        """``(reference, JSON)`` for the log (:func:`keys_reference`)."""
        return _compute_reference(self)

    @functools.cached_property
    def kinds(self) -> frozenset[type]:
        """The Python types of the keys (one pass in C)."""
        return frozenset(map(type, self))

    @functools.cached_property
    def pandas_index(self) -> Any:
        """The keys as a pandas ``Index`` (hash lookups of many rows at once)."""
        import pandas as pd

        return pd.Index(list(self))

    @functools.cached_property
    def column_values(self) -> Any:
        """The keys as a result-table column: a numpy array when every key is an ``int``
        within int64 (built without per-key Python), else the list of keys."""
        if self.kinds == {int}:
            index = self.pandas_index
            if index.dtype == np.int64:
                return index.to_numpy()
        return list(self)

    @functools.cached_property
    def int_lookup(self) -> tuple[int, np.ndarray] | None:
        """For distinct ``int`` keys within int64 whose range ``[low, high]`` is at most
        :data:`LOOKUP_SPAN_PER_KEY` times their number (plus 2^16): ``(low, table)``, where
        ``table[k - low]`` is the position of key ``k``, -1 at the integers in the range that
        are not keys, and one more -1 at the end (where every value outside the range is
        looked up). A row's key position is then one subtraction and one array read, faster
        than a hash lookup. None for other keys."""
        if not self or self.kinds != {int}:
            return None
        index = self.pandas_index
        if index.dtype != np.int64 or not index.is_unique:
            return None
        values = index.to_numpy()
        low, high = int(values.min()), int(values.max())
        if high - low >= LOOKUP_SPAN_PER_KEY * len(values) + (1 << 16):
            return None
        table = np.full(high - low + 2, -1, dtype=np.int64)
        table[values - low] = np.arange(len(values))
        return low, table

    @functools.cached_property
    def fingerprint(self) -> tuple[str, int, str] | None:
        """A small hashable stand-in for the keys' exact contents, values *and* types, built
        once: ``("keys", len, SHA-256 reference)`` where the log's JSON tells every key apart
        (each key, or each part of a key tuple, an exact ``int``, ``str``, ``float`` or
        ``bool``: JSON writes ``1``, ``1.0``, ``true`` and ``"1"`` differently), else None.
        Two lists with the same fingerprint are the same keys of the same types (up to a
        SHA-256 collision), so a cache keyed on it (the plan cache) needs no per-key work on
        a repeated query. The keys are public; nothing here reads data."""
        leaves = self.kinds
        if leaves == {tuple}:
            leaves = frozenset(map(type, itertools.chain.from_iterable(self)))
        if not leaves <= _JSON_EXACT:
            return None
        return ("keys", len(self), self.reference[0])

    @functools.cached_property
    def matched_dtypes(self) -> set[tuple[str, str]]:
        """``(column, dtype)`` pairs these keys were checked against (the check is a pass
        over every key; its outcome depends only on the keys and the dtype)."""
        return set()


#: The widest key range, per key, that :attr:`Keys.int_lookup` builds a table for (8 bytes per
#: integer of the range: 100,000 keys spread over 400,000 integers cost a 3.2 MB table).
LOOKUP_SPAN_PER_KEY = 4

#: Key types whose JSON is one-to-one (so the reference tells two key lists apart).
_JSON_EXACT = frozenset({int, str, float, bool})

_CHECKED = object()  # private: a Keys built by checked_keys carries it


def checked_keys(keys: Sequence[Any]) -> Keys:
    """``keys`` (already checked by the caller: distinct, no missing values) as a
    :class:`Keys` marked checked. A long list of keys all of one exact type ``int`` or
    ``str`` is interned (:data:`INTERNED_LISTS`): a group-by that passes the same
    ``keys=[...]`` on every query (a new ``frame.dp.groupby(col, keys=keys)`` each time) gets
    the same object back, with its log reference, fingerprint and lookup tables already
    built, after one hash and one comparison in C instead of a rebuild."""
    items = tuple(keys)
    kinds = frozenset(map(type, items))
    interned = bool(items) and (kinds == {int} or kinds == {str})
    # long and short lists are kept apart, so short ones (a histogram's bins, a few
    # categories) never push out a long one
    table, most = ((_INTERNED, INTERNED_LISTS) if len(items) >= INTERN_MIN_KEYS
                   else (_INTERNED_SHORT, INTERNED_SHORT_LISTS))
    if interned:
        # equal tuples of one such type hold the same values of the same type (no 1 == True
        # or 0.0 == -0.0 here), so the content is the whole key; a list the user mutates
        # later is a new content and finds (or makes) another entry
        with _INTERN_LOCK:
            found = table.get(items)
            if found is not None:
                table.move_to_end(items)
                return found
    out = Keys(items)
    out.__dict__["_checked"] = _CHECKED
    out.__dict__["kinds"] = kinds  # (the cached property's value, computed above)
    if interned:
        with _INTERN_LOCK:
            table[items] = out
            while len(table) > most:
                table.popitem(last=False)
    return out


#: Key lists at least this long are interned by :func:`checked_keys` in the table of long
#: lists; shorter ones in the table of short lists (their derived forms -- the log's JSON,
#: the fingerprint, the pandas index, the lookup table -- are most of a small group-by's
#: fixed cost: a histogram's ten bins).
INTERN_MIN_KEYS = 1000
#: The most interned long key lists kept (the least recently used leaves first).
INTERNED_LISTS = 8
#: The most interned short key lists kept (at most ``INTERN_MIN_KEYS - 1`` keys each).
INTERNED_SHORT_LISTS = 64
_INTERNED: OrderedDict[tuple[Any, ...], Keys] = OrderedDict()
_INTERNED_SHORT: OrderedDict[tuple[Any, ...], Keys] = OrderedDict()
_INTERN_LOCK = threading.Lock()


def key_kinds(keys: Sequence[Any]) -> frozenset[type]:
    """The Python types of ``keys`` (remembered by a :class:`Keys`)."""
    return keys.kinds if isinstance(keys, Keys) else frozenset(map(type, keys))


def keys_reference(keys: Sequence[Any]) -> tuple[str, str]:
    """``(reference, JSON)`` of a list of group keys for the log: the JSON list of the keys
    (a key of several columns as a list of its values; numpy scalars as Python values, other
    objects as their ``str``) and ``"sha256:"`` + the SHA-256 of its UTF-8 bytes. Log entries
    name the reference; the ledger stores the JSON once (:class:`dpframe.accounting.ledger.Ledger`).
    A :class:`Keys` computes it once."""
    return keys.reference if isinstance(keys, Keys) else _compute_reference(keys)


def _compute_reference(keys: Sequence[Any]) -> tuple[str, str]:
    kinds = key_kinds(keys)
    if kinds <= {int, str, float, bool}:  # one json.dumps call, no per-key Python
        return _reference(json.dumps(list(keys)))
    return _reference(json.dumps([[_key_json(v) for v in k] if isinstance(k, tuple) else
                                  _key_json(k) for k in keys]))


def _reference(text: str) -> tuple[str, str]:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(), text


def _key_json(k: Any) -> Any:
    if isinstance(k, bool | int | float | str):
        return k
    if hasattr(k, "item"):  # a numpy scalar: its Python value, if JSON has one
        try:
            v = k.item()
        except Exception:
            return str(k)
        return v if isinstance(v, bool | int | float | str) else str(v)
    return str(k)
