"""Plans already made: a plan is a function of public facts alone (the frame's facts, which
never change, and the checked arguments), so a repeated query reuses its plan and mechanisms
(docs/architecture.md, "What a repeated query costs").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpframe._util.identity import IdentityMap
from dpframe.provenance import FrameFacts
from dpframe.query import Keys
from dpframe.query.statistics import Query
from dpframe.release._planning import _plan_all, immutable
from dpframe.release._records import Planned, Request

#: Plans already made, per frame (its :class:`FrameFacts`, by identity) and request
#: (:func:`_plan_key`); an entry leaves with its frame's facts.
_PLANS: IdentityMap[dict[Any, list[Planned]]] = IdentityMap()
_PLANS_PER_FRAME = 64


def plan_repeated(frame: Any, facts: FrameFacts, request: Request,
                  queries: Mapping[str, Query]) -> list[Planned]:
    """:func:`_plan_all`, made once per frame and request: a plan is a function of public
    facts alone (the frame's facts, which never change, and the checked arguments), so a
    repeated query -- a notebook asking ``df.dp.mean`` again -- reuses its plan and
    mechanisms instead of re-deriving them (a third of a scalar query's fixed cost). Each
    caller gets its own copies of the plans' mutable parts."""
    key = _plan_key(facts, request, queries)
    if key is None:
        return _plan_all(frame, facts, request, queries)
    per_frame = _PLANS.get(facts)
    if per_frame is None:
        per_frame = {}
        _PLANS.set(facts, per_frame)
    known = per_frame.get(key)
    if known is not None:
        return [_copied(p) for p in known]
    planned = _plan_all(frame, facts, request, queries)
    if len(per_frame) < _PLANS_PER_FRAME:
        for p in planned:  # the copies share one table of log entries (public facts only)
            p.entries = {}
        per_frame[key] = [_copied(p) for p in planned]
    return planned


def _copied(p: Planned) -> Planned:
    """``p`` with its own lists of mechanisms and choices (a draw may add to them) and the
    same table of log entries (``dataclasses.replace`` without its per-field machinery: this
    runs on every repeated query)."""
    return Planned(p.name, p.query, p.plan, p.share, list(p.mechanisms), dict(p.choices),
                   p.epsilon, p.bounds, p.pure, p.entries)


def _plan_key(facts: FrameFacts, request: Request, queries: Mapping[str, Query]) -> Any:
    """Everything a plan depends on besides the frame's facts, as a hashable value with the
    type of every value in it (``1`` and ``True`` are different keys); None where something
    is not hashable or the frame's schema could change (then nothing is reused)."""
    if not immutable(facts):
        return None
    try:
        key = (tuple([(name, type(q), _typed(vars(q))) for name, q in queries.items()]),
               _typed((request.epsilon, request.delta, request.mechanism, request.shares,
                       request.group_by, request.keys, request.ci, request.keys_from_data)))
        hash(key)
    except TypeError:
        return None
    return key


#: Leaf types whose values are their own image (with the type); subclasses take
#: :func:`_typed_other`, which gives them the same image.
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _typed(value: Any) -> Any:
    """A hashable, typed image of ``value``: containers element by element, every leaf with
    its type; raises ``TypeError`` for anything it cannot represent faithfully."""
    kind = type(value)
    if kind in _LEAVES:  # (the common case, without isinstance's subclass checks)
        return (kind, value)
    return _typed_other(value)


def _typed_other(value: Any) -> Any:
    """:func:`_typed` of anything but an exact leaf type (exact lists, tuples and dicts
    first: none of them is a leaf or a key list)."""
    kind = type(value)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple([(type(v), v) if type(v) in _LEAVES else _typed_other(v)
                                      for v in value]))
    if kind is dict:
        return ("dict", tuple([(_typed(k), _typed(v)) for k, v in value.items()]))
    if isinstance(value, str | int | float | bool | type(None)):
        return (type(value), value)
    if isinstance(value, Keys) and value.fingerprint is not None:
        return value.fingerprint  # built once per key list: no per-key work per query
    if isinstance(value, dict):
        return ("dict", tuple([(_typed(k), _typed(v)) for k, v in value.items()]))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple([_typed(v) for v in value]))
    raise TypeError("not a plain value")
