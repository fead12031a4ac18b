"""Frames dpframe made and never writes, and what it read of them once.

A release reads dpframe's private object for a frame (:meth:`Backend.snapshot` of a protected
in-memory frame, :meth:`Backend.private_result` of a verified derivation), never the user's.
Such an object is never written, so what a release looks up in it -- a column's dtype, its
numpy view -- is the same every time. Looking a column up costs more than summing 1,000 rows
(pandas resolves the name through its index; Polars checks chunks and nulls), so each is
read once per frame and column. Only frames registered here are remembered (by identity,
:class:`dpframe._util.identity.IdentityMap`: an entry leaves with its frame); any other frame is
read afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpframe._util.identity import IdentityMap

__all__ = ["private", "private_column"]

_PRIVATE: IdentityMap[dict[tuple[str, str], Any]] = IdentityMap()


def private(frame: Any) -> Any:
    """Register ``frame`` (dpframe's own, never written) and return it."""
    _PRIVATE.set(frame, {})
    return frame


def private_column(frame: Any, column: str, what: str, read: Callable[[], Any]) -> Any:
    """``read()`` -- ``what`` of ``column`` (its dtype, its view) -- remembered for a
    registered private frame, computed afresh for any other."""
    known = _PRIVATE.get(frame)
    if known is None:
        return read()
    key = (column, what)
    if key not in known:
        known[key] = read()
    return known[key]
