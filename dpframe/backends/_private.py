"""Frames dpframe made and never writes, and what it read of them once.

A release reads dpframe's private object for a frame (:meth:`Backend.snapshot` of a protected
in-memory frame, :meth:`Backend.private_result` of a verified derivation), never the user's.
Such an object is never written, so what a release looks up in it -- a column's dtype, its
numpy view -- is the same every time. Looking a column up costs more than summing 1,000 rows
(pandas resolves the name through its index; Polars checks chunks and nulls), so each is
read once per frame and column. Only frames registered here are remembered (by identity: an
entry leaves when its frame is collected, before its id can be reused); any other frame is
read afresh.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["private", "private_column"]

_PRIVATE: dict[int, dict[tuple[str, str], Any]] = {}


def private(frame: Any) -> Any:
    """Register ``frame`` (dpframe's own, never written) and return it."""
    _PRIVATE[id(frame)] = {}
    weakref.finalize(frame, _PRIVATE.pop, id(frame), None)
    return frame


def private_column(frame: Any, column: str, what: str, read: Callable[[], Any]) -> Any:
    """``read()`` -- ``what`` of ``column`` (its dtype, its view) -- remembered for a
    registered private frame, computed afresh for any other."""
    known = _PRIVATE.get(id(frame))
    if known is None:
        return read()
    key = (column, what)
    if key not in known:
        known[key] = read()
    return known[key]
