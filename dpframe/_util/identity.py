"""Values attached to objects by identity, forgotten when the object is collected.

Polars frames are neither hashable nor able to carry metadata, so dpframe remembers what it
knows about a frame object (its verified facts, its release log, that it was protected) by
``id()``, guarded by a weak reference: an entry answers only for the very object it was made
for, and it disappears with that object, so a recycled ``id`` never inherits it.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Generic, TypeVar

__all__ = ["IdentityMap"]

V = TypeVar("V")


class IdentityMap(Generic[V]):
    """A thread-safe map from live objects (by identity) to values."""

    def __init__(self) -> None:
        # re-entrant: garbage collection can run a removal callback on a thread that is
        # inside one of these methods, holding the lock
        self._lock = threading.RLock()
        self._items: dict[int, tuple[weakref.ref[Any], V]] = {}

    def set(self, obj: Any, value: V) -> None:
        """Attach ``value`` to ``obj`` until ``obj`` is collected."""
        key = id(obj)
        lock, items = self._lock, self._items

        def forget(_: Any) -> None:  # binds lock and items: globals may be gone at shutdown
            with lock:
                items.pop(key, None)

        ref = weakref.ref(obj, forget)
        with lock:
            items[key] = (ref, value)

    def get(self, obj: Any) -> V | None:
        """The value attached to this very object, or None."""
        with self._lock:
            found = self._items.get(id(obj))
        if found is not None and found[0]() is obj:
            return found[1]
        return None

    def values(self) -> list[V]:
        """The values attached to objects still alive."""
        with self._lock:
            items = list(self._items.values())
        return [value for ref, value in items if ref() is not None]
