"""The records one release passes between its steps: the checked request
(:class:`Request`, step 2 of :mod:`dpframe.release._pipeline`), each query's plan with its share
of ε and its mechanisms (:class:`Planned`, step 3) and a key selection's public facts
(:class:`Selected`; docs/privacy.md, section K.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpframe.mechanisms.protocol import Mechanism
from dpframe.query.statistics import Plan, Query

#: A group-by: one column, or several (their keys are tuples).
GroupBy = str | tuple[str, ...]


@dataclass(frozen=True)
class Request:
    """The checked arguments of one release."""

    epsilon: float
    delta: float
    mechanism: str
    shares: tuple[float, ...]
    rng: np.random.Generator | None
    random_source: str
    group_by: GroupBy | None
    keys: tuple[Any, ...] | None
    ci: float | None = None
    #: keys selected from the data (none declared, δ > 0): the share of ε spent selecting
    #: them; all of δ goes to the selection, none to the queries
    selection: float | None = None
    keys_from_data: bool = False  # the keys were selected from the group column itself
    selected: Selected | None = None  # (set by the selection: its public facts)


def group_columns(group_by: GroupBy | None) -> tuple[str, ...]:
    """The group-by columns as a tuple (empty without a group-by)."""
    if group_by is None:
        return ()
    return (group_by,) if isinstance(group_by, str) else tuple(group_by)


@dataclass
class Planned:
    """One query of a planned release: its plan, its share of ε and its mechanisms (built
    before anything is read; None where a domain depends on earlier noisy values)."""

    name: str
    query: Query
    plan: Plan
    share: float
    mechanisms: list[Mechanism | None]  # one per measurement (None: built after earlier ones)
    choices: dict[str, str]  # measurement name -> why "auto" picked its mechanism
    epsilon: float = 0.0  # what this query costs
    bounds: tuple[float, float] | None = None  # of its column, if it has one
    #: measurements whose mechanism is pure ε-DP (auto picked truncated or plain Laplace):
    #: charged no δ (:func:`~dpframe.release._mechanisms.mark_pure`)
    pure: frozenset[str] = frozenset()
    #: log entries already written for this plan, shared by every copy a repeated query gets
    #: (:mod:`dpframe.release._plan_cache`): each a function of public facts alone, keyed by
    #: them (:meth:`dpframe.release._entries.LogContext.planned_entry`); None: not kept
    entries: dict[Any, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Selected:
    """Public facts of a key selection, for after the release: the group columns' dtypes
    (schema), its calibration and its share of ε."""

    key_dtypes: dict[str, Any]
    rule: Any
    share: float
