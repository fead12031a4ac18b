""":class:`FrameFacts` — the public facts of one *verified* frame: its data set, whether its
size is the public ``n``, and each column's declared bounds and missing-value policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from dpframe.engine import UnitBound, remember_schema
from dpframe.errors import DerivationError
from dpframe.provenance import _derivations as derivations
from dpframe.provenance._datasets import Dataset
from dpframe.provenance._missing import Missing
from dpframe.query import Keys

__all__ = ["FrameFacts"]


@dataclass(frozen=True, eq=False)
class FrameFacts:
    """Public facts of one verified frame (the root or a verified derivation of it)."""

    dataset: Dataset
    size_public: bool
    bounds: dict[str, tuple[float, float]]
    missing: dict[str, Missing]
    keys: dict[str, Keys]
    derivation: tuple[str, ...] = ("protect",)
    #: the data releases read: dpframe's private object for this frame (a snapshot of an
    #: in-memory frame, the protected plan with the verified steps compiled on it, a private
    #: Dask collection or DuckDB copy; :meth:`Backend.snapshot`), so editing the object a
    #: user holds can never reach a release. None only while a frame is being registered.
    data: Any = field(default=None, repr=False)
    #: the privacy unit (``dpf.protect(..., privacy_unit=...)``), its column as named in this
    #: frame; None: one row per unit
    unit: UnitBound | None = None
    #: bounded columns this derivation declared with the default rule ``"drop"`` (no
    #: ``missing=`` naming them, no fill word at protect): :func:`derive` names those whose
    #: dtype can hold a missing value in one :class:`PrivateSizeWarning`, as protect does
    notice: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.data is not None and len(self.derivation) == 1:  # (the protected frame)
            _read_schema(self.data, self.dataset)

    def after(self, steps: Sequence[derivations.Step]) -> FrameFacts:
        """The facts of the frame these verified steps produce from this one."""
        facts = self
        for step in steps:
            facts = facts._apply(step)
        return facts

    def _apply(self, step: derivations.Step) -> FrameFacts:
        if step.kind == "filter":
            return replace(self, size_public=False, derivation=(*self.derivation, "filter"),
                       data=None)
        keep = step.kind != "select"
        return replace(
            self,
            bounds=_carry(self.bounds, step.outputs, keep),
            missing=_carry(self.missing, step.outputs, keep),
            keys=_carry(self.keys, step.outputs, keep),
            derivation=(*self.derivation, step.kind),
            data=None,
            unit=_carry_unit(self.unit, step, keep),
        )


def _read_schema(data: Any, dataset: Dataset) -> None:
    """The schema of the data releases read (public: names and dtypes), read when the facts of
    a protected frame take hold of dpframe's copy -- at protect, not on its first query --
    and remembered with it (:func:`dpframe.engine._schema.remember_schema`), so the first
    release on the frame plans without converting it again. Derived frames are left to their
    first release: a derivation that is only derived from again would pay for a schema no
    release reads (a native LazyFrame derivation is verified anew on every query). The one
    exception is a histogram's binned frame, whose schema is its parent's remembered one plus
    the bin column, stored without a read where it is built (``dpframe.frames.derivations``,
    ``remember_schema(parent=..., added=...)``). Best
    effort: a schema that cannot be read here is read again by the release that needs it,
    which raises what it raised before."""
    if type(data) is object:  # (the registry's placeholder of a frame that is its own data)
        return
    try:
        remember_schema(data, dataset.backend.schema)
    except Exception:  # (see above: the release reads it again and reports)
        return


def _carry_unit(unit: UnitBound | None, step: derivations.Step, keep: bool
                ) -> UnitBound | None:
    """The privacy-unit column after a step: it must reach the output value for value (a bare
    reference, possibly renamed); a step that drops it, replaces it or casts it is refused,
    before any data is read (a cast can merge two persons' ids, and without the column rows
    could not be bounded per person)."""
    if unit is None:
        return None
    col = unit.column
    same = [name for name, src in step.outputs.items() if src == col and name not in step.casts]
    if keep and col not in step.outputs:
        return unit  # with_columns that leaves the unit column alone
    if col in same:
        return unit
    if not keep and same:
        return unit.renamed(same[0])
    raise DerivationError(
        f"this {step.kind} " + ("replaces or casts" if keep or col in step.outputs else "drops")
        + f" the privacy-unit column {col!r}; every derived frame must keep it unchanged "
        "(renaming it is fine) so each person's rows can be bounded. Keep the column (e.g. "
        f"select it too) and add a new column instead of changing it. Nothing was read or spent."
    )


V = TypeVar("V")


def _carry(own: Mapping[str, V], outputs: Mapping[str, str | None], keep: bool) -> dict[str, V]:
    """A per-column table after a step: outputs that copy a column take its entry, computed
    outputs lose theirs; other columns stay (``keep``, for ``with_columns``) or go (select)."""
    table = dict(own) if keep else {}
    for name, source in outputs.items():
        table.pop(name, None)
        if source is not None and source in own:
            table[name] = own[source]
    return table
