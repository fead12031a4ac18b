"""Counts and proportions of a column's public keys (``dpf.value_counts(col)``,
``dpf.proportions(col)``): :class:`ValueCounts`, :class:`KeyProportions`."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms import matrices as analyses
from dpframe.mechanisms.intervals import (
    composed_interval,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query._aggregates import Agg
from dpframe.query._cells import cell_counts, key_labels, public_keys, refuse_units
from dpframe.query._plans import (
    Plan,
    PlanContext,
    Query,
)

__all__ = ["KeyProportions", "ValueCounts", "proportions", "value_counts"]


class ValueCounts(Query):
    r"""Counts of a column's public keys (``dpf.value_counts(col, keys=None)``, a statistic
    of a release): the keys given, else those declared at protect; rows with another or a
    missing value are in no cell. Named ``<name>[<key>]``.

    *Sensitivity.* As :class:`Histogram`: the keys are disjoint cells, a replaced row changes
    at most two (in a group-by, two (group, key) cells in all), each a count with Δ = 1 on
    ``[0, n]`` at ε/2, so the query costs ε once. Keys are never read from the data here
    (``frame.dp.groupby(col)`` with δ selects them privately); a frame with a privacy unit is
    refused (``frame.dp.value_counts`` bounds the keys per person).
    """

    kind = "value_counts"

    def __init__(self, column: str, keys: Sequence[Any] | None = None) -> None:
        super().__init__(column)
        self.keys = None if keys is None else tuple(public_keys(column, keys))

    def __repr__(self) -> str:
        return f"dpf.value_counts({self.column!r})"

    def columns_read(self) -> tuple[str, ...]:
        return ()  # a key column: no bounds, no values summed (the keys are its cells)

    def columns_logged(self) -> tuple[str, ...]:
        """The key column: its entries are counted under it and named by it (``value counts of
        <col>``, ``proportions of <col>``), as ``frame.dp.value_counts(col)``'s are."""
        assert self.column is not None
        return (self.column,)

    def plan(self, ctx: PlanContext) -> Plan:
        assert self.column is not None
        refuse_units(ctx, self.kind)
        keys = self.keys
        if keys is None:
            declared = ctx.keys.get(self.column)
            if declared is None:
                raise ParameterError(
                    f"dpf.{self.kind}({self.column!r}) needs public keys: pass them, "
                    f"dpf.{self.kind}({self.column!r}, keys=[...]), or declare them at "
                    f"protect time with keys={{{self.column!r}: [...]}}; to select keys from "
                    f"the data privately, use frame.dp.groupby({self.column!r}) with delta > 0")
            keys = tuple(declared)
        agg = Agg("keys", self.column, keys=keys)
        return cell_counts(self.kind, self.column, agg, key_labels(keys), ctx,
                            f"{len(keys)} public keys of {self.column!r}")


class KeyProportions(ValueCounts):
    r"""Proportions of a column's public keys (``dpf.proportions(col, keys=None)``, a
    statistic of a release; per group in a group-by): the noisy counts of
    :class:`ValueCounts` (same cells, Δ = 1, ε/2 each, ε once), rescaled to sum to 1 within
    each group (:func:`dpframe.mechanisms.matrices.sum_to_one`, ``"rescale"``: post-processing, as
    the private-size :class:`Proportions`). Named ``<name>[<key>]``; with ``ci=``, each cell's
    interval from every cell's interval at the Šidák level (intervals I.3)."""

    kind = "proportions"

    def __repr__(self) -> str:
        return f"dpf.proportions({self.column!r})"

    def plan(self, ctx: PlanContext) -> Plan:


        counts = super().plan(ctx)
        name = counts.measurements[0].name

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            return analyses.sum_to_one(np.atleast_2d(v[name]), "rescale")

        def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                     level: float) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = composed_interval("proportions", {"count": mechs[name]},
                                       {"count": np.atleast_2d(noisy[name])}, level)
            return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)

        return replace(counts, query=self.kind, finalize=fin, interval=interval,
                       formulation=counts.formulation.replace(
                           "rounded to integers", "rescaled to sum to 1 in each group"))


def value_counts(column: str, *, keys: Sequence[Hashable] | None = None) -> ValueCounts:
    """Query builder: counts of ``column``'s public keys (``keys``, else those declared at
    protect), named ``<name>[<key>]`` in a release (:class:`ValueCounts`)."""
    return ValueCounts(column, keys)


def proportions(column: str, *, keys: Sequence[Hashable] | None = None) -> KeyProportions:
    """Query builder: proportions of ``column``'s public keys (``keys``, else those declared
    at protect), summing to 1 (in each group of a group-by), named ``<name>[<key>]``
    (:class:`KeyProportions`)."""
    return KeyProportions(column, keys)
