"""The ``.dp`` derivations (``filter``, ``with_columns``, ``select``, ``drop``, ``rename``, and
the hidden bin column of histograms): check the request against public facts, verify the
expressions (:mod:`dpframe.provenance._derivations`), build the derived frame and register it
with its provenance (:func:`dpframe.provenance._protect.derive`).

The derived frame is dpframe's own compilation of the verified steps applied to the private
data: eager frames are computed here (:func:`dpframe.release._pipeline.evaluate_derivation`),
lazy ones are plans (:func:`dpframe.rowwise.engines.apply_steps`). Nothing here reads a value:
refusals come from names, schemas and the structure of expressions only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic

import narwhals.stable.v2 as nw
import polars as pl

from dpframe import provenance
from dpframe import provenance as derivations
from dpframe.engine import remember_schema
from dpframe.errors import DerivationError, ParameterError
from dpframe.frames import bins as bins_
from dpframe.frames.parameters import shared_parameters
from dpframe.frames.types import FrameT
from dpframe.provenance import Missing, Session
from dpframe.release import evaluate_derivation
from dpframe.rowwise.engines import apply_steps

__all__ = ["DerivationVerbs", "binned", "column_names", "derive", "keep_rows", "renaming"]

#: The verbs that keep every row and only choose, order or rename columns.
ROW_KEEPING = ("select", "drop", "rename")


def column_names(columns: Sequence[str]) -> list[str]:
    """``columns`` as a list of names; ParameterError unless they are strings."""
    if not columns or not all(isinstance(c, str) for c in columns):
        raise ParameterError("pass column names as strings, e.g. frame.dp.select('age', 'sex')")
    return list(columns)


def renaming(mapping: Mapping[str, str]) -> dict[str, str]:
    """``mapping`` as a dict old name → new name; ParameterError unless both are strings."""
    if not isinstance(mapping, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        raise ParameterError("rename takes a dict old name -> new name (strings)")
    return dict(mapping)


def _outputs(verb: str, names: list[str], mapping: dict[str, str] | None,
             schema: Mapping[str, Any]) -> dict[str, str]:
    """The columns a row-keeping verb produces: new name → the column it copies."""
    if verb == "select":
        return {c: c for c in names}
    if verb == "drop":
        return {c: c for c in schema if c not in names}
    assert mapping is not None
    outputs = {mapping.get(c, c): c for c in schema}
    if len(outputs) != len(schema):
        raise ParameterError(f"dp.rename: the new names collide: {mapping}")
    return outputs


def keep_rows(frame: object, verb: str, names: list[str],
              mapping: dict[str, str] | None) -> Any:
    """``frame`` with every row and the columns ``verb`` (one of :data:`ROW_KEEPING`) keeps:
    the ``names`` selected or dropped, or all renamed by ``mapping``."""
    facts = provenance.resolve(frame)
    schema = facts.dataset.backend.polars_schema(facts.data)
    unknown = [c for c in names if c not in schema]
    if unknown:
        raise ParameterError(f"dp.{verb}: unknown columns {unknown}; available: "
                             f"{list(schema)}")
    outputs = _outputs(verb, names, mapping, schema)
    if not outputs:
        raise DerivationError(f"dp.{verb}: {derivations.NO_COLUMNS}")
    steps = [derivations.Step.copying(outputs, schema)]
    return _built(facts, facts.after(steps), steps, schema)


def derive(frame: object, verb: str, exprs: Sequence[object],
           bounds: Mapping[str, tuple[float, float]] | None,
           missing: Missing | Mapping[str, Missing] | None) -> Any:
    """``frame`` with the row-wise expressions of ``verb`` ("filter" or "with_columns")
    applied, after their structure is verified; ``bounds``/``missing`` declare new columns."""
    facts = provenance.resolve(frame)
    backend = facts.dataset.backend
    if not backend.polars_expressions and exprs and all(isinstance(e, pl.Expr) for e in exprs):
        raise DerivationError("Polars expressions apply to Polars frames; use narwhals "
                              "expressions (import narwhals as nw) for this frame")
    schema = backend.polars_schema(facts.data)
    steps, _derived_schema = derivations.verify_expressions(schema, exprs, verb)
    backend.rowwise.check(steps)
    new = facts.after(steps)
    if bounds is not None or missing is not None:
        new = _declare(new, steps, bounds or {}, missing)
    return _built(facts, new, steps, schema)


def binned(frame: object, column: str, edges: list[float],
           session: Session | str | None) -> Any:
    """``frame`` with the hidden bin column (:func:`dpframe.frames.bins.bin_step`), made once per
    frame, column and edges (:func:`dpframe.frames.bins.binned_frame`)."""
    facts = provenance.resolve(frame, session)

    def build() -> Any:
        backend = facts.dataset.backend
        schema = backend.polars_schema(facts.data)
        steps = [bins_.bin_step(column, edges, facts, schema)]
        backend.rowwise.check(steps)
        out = _built(facts, facts.after(steps), steps, schema)
        _remember_binned_schema(facts, out)
        return out

    return bins_.binned_frame(facts, column, edges, build)


def _remember_binned_schema(parent: provenance.FrameFacts, frame: Any) -> None:
    """The binned in-memory frame's schema, remembered as it is built: the parent's schema
    (read when dpframe took hold of the parent, :func:`dpframe.engine.remember_schema`) plus
    the bin column, Int64 (the verified step's output dtype; in the engine: pandas'
    nullable ``Int64``, Polars' ``Int64``, as the derivation built it), so the histogram's
    first release plans without reading the derived frame's schema again
    (:func:`dpframe.engine.remember_schema` with its ``parent``). Names and dtypes only; nothing
    when the parent's schema was never remembered or for a lazy frame (its release reads the
    schema as before)."""
    backend = parent.dataset.backend
    if backend.lazy or parent.data is None:
        return
    data = provenance.resolve(frame).data
    if data is None:
        return
    remember_schema(data, backend.schema, parent=parent.data, added={
        bins_.BIN: (nw.Int64(), backend.column_dtype(data, bins_.BIN))})


def _built(facts: provenance.FrameFacts, new: provenance.FrameFacts,
           steps: Sequence[derivations.Step], schema: Mapping[str, Any]) -> Any:
    """The derived frame: dpframe's compilation of the verified ``steps`` applied to the
    private data of this frame (eager frames are computed here, lazy ones are plans)."""
    backend = facts.dataset.backend
    if backend.lazy:
        native = apply_steps(facts.data, steps, backend.rowwise, schema)
    else:
        native = evaluate_derivation(facts, steps, schema)
    return provenance.derive(new, native)


def _declare(facts: provenance.FrameFacts, steps: Sequence[derivations.Step],
             bounds: Mapping[str, tuple[float, float]],
             missing: Missing | Mapping[str, Missing] | None) -> provenance.FrameFacts:
    """Add declared bounds (and missing policies) for columns the derivation produced
    (:func:`dpframe.provenance.declare_derived`: a bounded column takes this call's
    ``missing=``, else the word given at protect, else drops missing values with protect's
    notice)."""
    return provenance.declare_derived(facts, steps, bounds, missing)


class DerivationVerbs(Generic[FrameT]):
    """The derivations of :class:`~dpframe.frames.namespace.DPNamespace`: each returns a new
    frame of the same library that draws from the same budget."""

    _frame: FrameT

    @shared_parameters()
    def filter(self, *predicates: object) -> FrameT:
        """Keep the rows where every predicate holds (row-wise predicates only).

        Parameters
        ----------
        *predicates
            narwhals expressions (``nw.col("age") >= 65``, any backend) or, on Polars frames,
            Polars expressions. Verified from their structure before any data is read;
            aggregates, windows, shifts, ranks and the like are refused.

        Returns
        -------
        A frame of the same library with a *private* size, drawing from the same budget.

        Examples
        --------
        >>> import narwhals as nw, pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"age": [30, 70]}), epsilon=1,
        ...                  bounds={"age": (0, 120)})
        >>> older = pf.dp.filter(nw.col("age") >= 65)
        >>> older.dp.is_size_public
        False
        """
        return derive(self._frame, "filter", predicates, None, None)

    @shared_parameters()
    def with_columns(self, *exprs: object,
                     bounds: Mapping[str, tuple[float, float]] | None = None,
                     missing: Missing | Mapping[str, Missing] | None = None) -> FrameT:
        """Add or replace columns computed row-wise.

        Parameters
        ----------
        *exprs
            Named (``.alias``) narwhals expressions, or Polars expressions on Polars frames.
        bounds : dict, optional
            Public bounds of new or replaced columns that will be aggregated. A replaced
            column loses its old bounds; a column copied or cast keeps them.
        missing : "drop", number or dict, optional
            Missing-value policy of the newly bounded columns (default ``"drop"``).

        Returns
        -------
        A frame of the same library; its size stays public if this frame's was.
        """
        return derive(self._frame, "with_columns", exprs, bounds, missing)

    @shared_parameters()
    def select(self, *columns: str) -> FrameT:
        """Keep only these columns (by name); every row is kept.

        Parameters
        ----------
        *columns
            Column names.
        """
        names = column_names(columns)
        return keep_rows(self._frame, "select", names, None)

    @shared_parameters()
    def drop(self, *columns: str) -> FrameT:
        """Drop these columns (by name); every row is kept.

        Parameters
        ----------
        *columns
            Column names.
        """
        names = column_names(columns)
        return keep_rows(self._frame, "drop", names, None)

    @shared_parameters()
    def rename(self, mapping: Mapping[str, str]) -> FrameT:
        """Rename columns; bounds, missing-value policies and keys follow the names.

        Parameters
        ----------
        mapping : dict of str to str
            Old name to new name.
        """
        renamed = renaming(mapping)
        return keep_rows(self._frame, "rename", list(renamed), renamed)
