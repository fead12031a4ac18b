"""Registry: which frame objects are verified, and the facts each carries.

How a frame is recognised (no data is read, no lengths or values are compared):

* pandas: the frame returned by :func:`~dpframe.provenance._protect.protect` or a ``.dp``
  derivation carries a handle in ``attrs``; the handle knows the one frame object it belongs
  to. pandas copies ``attrs`` into frames it derives (``pf[pf.age > 40]``, ``pd.concat``,
  ``fillna`` ...): such a frame has the handle but is not its owner, so it is refused as an
  unverified derivation.
* Polars ``DataFrame``: the exact objects returned by
  :func:`~dpframe.provenance._protect.protect` and ``.dp`` derivations are registered by
  identity; any other eager frame has no protected root.
* Polars ``LazyFrame``: the plan is walked (:mod:`dpframe.provenance._derivations`) down to the
  nearest dpframe marker, verifying every step above it, so native
  ``lf.filter(...).with_columns(...)`` chains work.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

from dpframe._util.identity import IdentityMap
from dpframe.backends import Backend, anchored_series
from dpframe.errors import (
    DerivationError,
    NoLedgerError,
)
from dpframe.provenance import _derivations as derivations
from dpframe.provenance._datasets import _registry_lock
from dpframe.provenance._facts import FrameFacts
from dpframe.rowwise.engines import apply_steps

__all__ = ["ATTRS_KEY"]

ATTRS_KEY = "dpframe"


class _Handle(dict[str, str]):
    """What a verified pandas frame keeps in ``attrs["dpframe"]``.

    It serialises (``to_parquet`` writes ``attrs``) as a short notice, never as a log. It knows
    the one frame it belongs to; pandas copies it (deep copies return the same handle) into
    every frame derived with pandas operations, which are thereby recognised as unverified.
    """

    def __init__(self, facts: FrameFacts, owner: Any) -> None:
        super().__init__(dpframe_handle="live privacy-budget handle; not a release log")
        self.facts = facts
        self.owner = weakref.ref(owner)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Handle:
        return self

    def __copy__(self) -> _Handle:
        return self

    def __reduce__(self) -> Any:  # pickling drops the live budget
        return (dict, (dict(self),))


_frames: IdentityMap[FrameFacts] = IdentityMap()  # verified Polars and engine frames


class _MarkerRecord:
    """What dpframe knows about one marker: the facts it vouches for, the signature of the plan
    beneath it, and that plan. Held only by the marker itself (the plan's anchored literal,
    :func:`backends.polars._memory.anchored_series`), so it lives exactly as long as some plan that
    carries the marker: holding the plan beneath keeps the in-memory frames it scans alive, so
    their buffer addresses (part of the signature) cannot be reused by other data while the
    marker can be presented, and once the last such plan is freed the record (and every byte
    it held) goes with it; a marker whose record is gone is unknown, never someone else's."""

    __slots__ = ("__weakref__", "beneath", "facts", "signature")

    def __init__(self, facts: FrameFacts, signature: str, beneath: Any) -> None:
        self.facts, self.signature, self.beneath = facts, signature, beneath


#: marker -> its record, while a plan carrying the marker lives
_markers: weakref.WeakValueDictionary[str, _MarkerRecord] = weakref.WeakValueDictionary()
#: records no plan can hold (a pyarrow / Polars pair that cannot share an anchored value):
#: kept for the life of the process, as before anchors existed
_unanchored: list[_MarkerRecord] = []


def _register(frame: Any, facts: FrameFacts, data: Any = None) -> Any:
    """Make ``frame`` (the object handed to the user) a verified frame with ``facts``;
    ``data``: the private object its releases read (default: a snapshot of ``frame``).
    Returns the frame to hand out (a LazyFrame gains its marker)."""
    backend = facts.dataset.backend
    facts = replace(facts, data=backend.snapshot(frame) if data is None else data)
    if backend.carries_handle:
        frame.attrs = {**{k: v for k, v in frame.attrs.items() if k != ATTRS_KEY},
                       ATTRS_KEY: _Handle(facts, frame)}
        return frame
    if backend.readable_plans:
        marker = derivations.new_marker()
        record = _MarkerRecord(facts, derivations.plan_signature(frame), frame)
        try:
            anchor = anchored_series(marker, record)
        except (RuntimeError, AttributeError, TypeError):  # pragma: no cover - old pyarrow
            anchor = None  # (no string_view, or a copy on import): kept for good instead
            _unanchored.append(record)
        frame = derivations.add_marker(frame, marker, anchor)
        with _registry_lock:
            _markers[marker] = record
    if facts.data is frame:  # (an immutable engine frame read as is: a value holding its own
        # key would keep both alive for ever)
        facts = replace(facts, data=_SELF)
    _frames.set(frame, facts)
    return frame


#: stands for "the registered frame itself" as a registered frame's data
_SELF: Any = object()


def _registered(frame: Any) -> FrameFacts | None:
    facts = _frames.get(frame)
    if facts is not None and facts.data is _SELF:
        return replace(facts, data=frame)
    return facts


_UNVERIFIED_PANDAS = (
    "this pandas frame was derived from a protected frame with a pandas operation (indexing, "
    "fillna, concat, merge, assign, copy, ...), which dpframe cannot verify to be row-wise. "
    "Derive it through dpframe instead, with narwhals expressions: "
    "pf.dp.filter(nw.col('age') >= 65), pf.dp.with_columns((nw.col('income') / 1000)"
    ".alias('income_k'), bounds={'income_k': (0, 250)}), pf.dp.select(...), pf.dp.drop(...), "
    "pf.dp.rename({...}) (import narwhals as nw). Nothing was read or spent."
)
_NO_ROOT_PANDAS = (
    "this pandas frame has no privacy budget: it is neither a frame returned by dpf.protect "
    "nor a .dp derivation of one (pandas operations such as merge, concat, indexing or "
    "to_numpy produce frames dpframe cannot trace). A frame computed from protected data must "
    "be derived from the protected frame: frame.dp.filter(nw.col('age') >= 65), "
    "frame.dp.with_columns(...), .dp.select / .dp.drop / .dp.rename (import narwhals as nw). "
    "Nothing was read or spent."
)


def _facts_of(frame: Any, backend: Backend) -> FrameFacts:
    if backend.carries_handle:
        handle = frame.attrs.get(ATTRS_KEY)
        if isinstance(handle, _Handle):
            if handle.owner() is frame:
                return handle.facts
            raise DerivationError(_UNVERIFIED_PANDAS)
        raise NoLedgerError(_NO_ROOT_PANDAS)
    facts = _registered(frame)
    if facts is not None:
        return facts
    if not backend.readable_plans:
        raise NoLedgerError(backend.no_root_message())
    marker, steps, beneath = derivations.walk_lazy_plan(frame)
    with _registry_lock:
        found = _markers.get(marker)
    if found is None:
        raise NoLedgerError(
            "this LazyFrame's plan carries a dpframe marker that this process does not know "
            "(a plan from another process, or serialized and read back), so it has no "
            "privacy budget here. Query the protected LazyFrame of this process, or continue "
            "its budget across processes with a durable dpf.Session(path=...). Nothing was "
            "read or spent."
        )
    base, signature = found.facts, found.signature
    if beneath != signature:
        raise DerivationError(
            "the plan beneath this LazyFrame's dpframe marker is not the plan that was "
            "protected (a marker copied onto other data, or a protected plan changed); "
            "derive frames from the protected LazyFrame itself. Nothing was read or spent."
        )
    if not steps:
        return base
    # what releases read: the protected plan with the verified steps compiled by dpframe,
    # never the plan the user built
    return replace(base.after(steps), data=apply_steps(base.data, steps, backend.rowwise))
