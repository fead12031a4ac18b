"""Proportions of a group-by's declared keys (``frame.dp.groupby(col).proportions``):
:class:`Proportions` (Liu §4.2)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from dpframe.errors import ParameterError, PrivateSizeError
from dpframe.mechanisms import matrices as analyses
from dpframe.mechanisms.intervals import (
    component_level,
    confidence_interval,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query._aggregates import Agg
from dpframe.query._exact import (
    FP_SLACK,
    round_up,
)
from dpframe.query._plans import (
    Interval,
    Measurement,
    Plan,
    PlanContext,
    Query,
    composed,
    rows_of,
)

__all__ = ["Proportions"]


class Proportions(Query):
    r"""Proportions of the declared keys of the group-by column (Liu §4.2).

    *Public size.* Per cell ``c_j/n`` on ``[0, 1]``, ``Δ = 1/n`` (plus ``2⁻⁵²`` float slack).
    One replacement moves one row between two cells, changing two proportions by ``1/n``
    each; each released cell is charged ε/2, or the whole ε when only one cell is released
    (``all_but_one`` with two keys). *Private size.* Per cell the count ``c_j`` on ``[0, n]``,
    ``Δ = 1``. Post-processing: :func:`dpframe.mechanisms.matrices.sum_to_one` (``"rescale"``
    divides by the sum; ``"all_but_one"`` discards the remainder cell's noisy value and sets it to
    one
    minus the others, so that cell is never released).
    """

    kind = "proportions"
    needs_column = False

    def __init__(self, method: str = "rescale", remainder: int = -1) -> None:
        super().__init__(None)
        if not isinstance(method, str) or method not in ("rescale", "all_but_one"):
            raise ParameterError(f"method must be 'rescale' or 'all_but_one', got {method!r}")
        self.method = method
        self.remainder = int(remainder)

    def plan(self, ctx: PlanContext) -> Plan:

        method, rem = self.method, self.remainder
        released = ctx.n_groups - (1 if method == "all_but_one" else 0)
        share = analyses.proportion_epsilon_share(max(released, 1))
        rows = Agg("rows")
        if ctx.size_public:
            n = ctx.n
            sens = round_up(Fraction(1, n) + Fraction(FP_SLACK))
            # rows/n in IEEE division is the correctly rounded exact quotient (both < 2^53)
            m = Measurement("proportion", lambda a: np.asarray(a[rows], np.float64) / n, sens,
                            0.0, 1.0, 1.0, (rows,))
            return Plan("proportions", None, (m,),
                        lambda v: analyses.sum_to_one(v["proportion"], method, rem),  # type: ignore[arg-type]
                        f"per-cell proportion c/n on [0, 1] (public n), then {method}",
                        public_size=True, group_share=share,
                        interval=_proportion_cells(method, rem))
        if method == "all_but_one":
            raise PrivateSizeError(
                "method='all_but_one' needs the public row count of the protected frame, which "
                + ("neighbours='add_remove' makes private" if ctx.add_remove else
                   "a derived frame does not have")
                + "; use method='rescale' (noisy counts, normalised)"
            )
        upper = float(ctx.count_cap)
        m = Measurement("count", rows_of(rows), 1.0, 0.0, upper, 1.0, (rows,))
        return Plan("proportions", None, (m,),
                    lambda v: analyses.sum_to_one(v["count"], "rescale"),
                    "per-cell noisy count (private size), then rescale", group_share=share,
                    interval=composed("proportions"))


def _proportion_cells(method: str, remainder: int) -> Interval:
    """Per-cell intervals of public-size proportions c_j/n, from each cell's own release.
    ``all_but_one``: the remainder cell is 1 − Σ others, so its interval needs every released
    cell's interval at once (Šidák level over the K − 1 cells)."""

    def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                 level: float) -> tuple[np.ndarray, np.ndarray]:
        mech, cells = mechs["proportion"], np.asarray(noisy["proportion"], dtype=float)
        lo, hi = (np.asarray(v, dtype=float) for v in confidence_interval(mech, cells, level))
        if method == "all_but_one" and cells.size > 1:
            rem = remainder % cells.size
            others = np.arange(cells.size) != rem
            j_lo, j_hi = (np.asarray(v, dtype=float) for v in confidence_interval(
                mech, cells[others], component_level(level, int(others.sum()))))
            lo[rem] = max(0.0, 1.0 - float(j_hi.sum()))
            hi[rem] = min(1.0, 1.0 - float(j_lo.sum()))
        return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)

    return interval
