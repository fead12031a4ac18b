"""Counts over equal public bins of a bounded column (``dpf.histogram(col, bins=B)``):
:class:`Histogram`."""

from __future__ import annotations

import math

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.quantiles import DEFAULT_MAX_CELLS
from dpframe.query._aggregates import Agg, Bins
from dpframe.query._cells import bin_labels, cell_counts, refuse_units
from dpframe.query._plans import (
    Plan,
    PlanContext,
    Query,
    require_bounds,
)

__all__ = ["Histogram", "histogram"]


class Histogram(Query):
    r"""Counts of a bounded numeric column over ``B`` equal public bins of its declared bounds
    ``[l, u]`` (``dpf.histogram(col, bins=B)``, a statistic of a release; the frame method
    ``frame.dp.histogram`` also takes arbitrary public edges).

    The engine counts rows per bin (:class:`dpframe.query._aggregates.Bins`, the quantiles' bins:
    the bin of a value ``x`` clamped to ``[l, u]`` is ``⌊t·B⌋`` limited to ``B − 1`` with
    ``t = (x/2 − l/2)/(u/2 − l/2)``, so bin ``j`` is ``[l + (u − l)·j/B, l + (u − l)·(j+1)/B)``
    up to the rounding of ``t``, the last bin closed, values outside the bounds in the end
    bins); missing values follow the column's rule (dropped: in no bin).

    *Sensitivity.* The bins are disjoint cells: replacing a row moves it between at most two
    cells, each count changing by 1 (in a group-by, two (group, bin) cells in all). Each cell
    is a count with Δ = 1 on ``[0, n]`` released at ε/2 (ungrouped: ``cell_share`` ½;
    grouped: the group share ½), so the whole histogram costs ε once (parallel composition,
    as for ``frame.dp.histogram``, a group-by count over the bins). Counts are rounded to
    non-negative integers (post-processing). A frame with a privacy unit is refused: one
    person's ``k`` rows can reach ``k`` bins of a group, which the group bound ``g`` does not
    limit (``frame.dp.histogram`` and ``groupby(...).histogram`` bound the bins per person).
    """

    kind = "histogram"

    def __init__(self, column: str, bins: int) -> None:
        super().__init__(column)
        if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or not (
                1 <= int(bins) <= DEFAULT_MAX_CELLS):
            raise ParameterError(f"dpf.histogram takes bins=<int> from 1 to "
                                 f"{DEFAULT_MAX_CELLS:,} (equal bins of the declared bounds; "
                                 f"arbitrary public edges: frame.dp.histogram(col, "
                                 f"edges=[...])), got {bins!r}")
        self.bins = int(bins)

    def __repr__(self) -> str:
        return f"dpf.histogram({self.column!r}, bins={self.bins})"

    def plan(self, ctx: PlanContext) -> Plan:
        refuse_units(ctx, "histogram")
        lo, hi = require_bounds(ctx, self.kind)
        count = self.bins
        bins = Bins(float(lo), float(hi), count)
        if not (hi > lo and math.isfinite(lo) and math.isfinite(hi) and bins.half_width > 0):
            raise ParameterError(f"a histogram of {self.column!r} needs finite bounds lower < "
                                 f"upper with upper/2 − lower/2 > 0; got [{lo:g}, {hi:g}]")
        return cell_counts(self.kind, self.column, Agg("bins", self.column, bins=bins),
                            bin_labels(lo, hi, count), ctx,
                            f"{count} equal public bins of [{lo:g}, {hi:g}]")


def histogram(column: str, *, bins: int) -> Histogram:
    """Query builder: counts of ``column`` over ``bins`` equal public bins of its declared
    bounds (:class:`Histogram`), named ``<name>[<lower>,<upper>]`` in a release (and
    ``<name>[<lower>,<upper>]_lower``/``_upper`` with ``ci=``). Public edges of any spacing:
    ``frame.dp.histogram(col, edges=[...])``."""
    return Histogram(column, bins)
