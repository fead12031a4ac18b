"""The types the ``.dp`` methods are written with: mechanism names, and the frame and table
types a namespace is generic in (checked by mypy: ``tests/typing/public_api.py``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

from dpframe.mechanisms.randomness import RandomState

__all__ = ["FrameT", "KeyList", "Mechanism", "QuantileMechanismName", "RandomState", "TableT"]

#: The mechanism names every release takes (docs/privacy.md).
Mechanism = Literal["bounded", "truncated", "laplace", "auto"]
#: The mechanism names a quantile takes: the exponential mechanism is the only one for them.
QuantileMechanismName = Literal["auto", "exponential"]
#: Public keys of a column (or key tuples of several columns).
KeyList = Sequence[Hashable]

#: The frame a namespace belongs to: derivations (``filter``, ``select``, ...) return one.
FrameT = TypeVar("FrameT")
#: The result tables of a namespace's library: a pandas or a Polars DataFrame (eager, also for
#: a Polars LazyFrame; pandas for the engines).
TableT = TypeVar("TableT")
