"""The row count (``dpf.count()``, ``frame.dp.count``): :class:`Count`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dpframe.query._aggregates import Agg
from dpframe.query._plans import (
    Measurement,
    Plan,
    PlanContext,
    Query,
    rows_of,
    single_interval,
)

__all__ = ["Count", "count"]


class Count(Query):
    r"""Number of rows.

    On a frame whose size is public (the protected frame, or a derivation that keeps every row)
    the count *is* ``n``, a public fact: whatever ε is asked (0 included) it is released
    exactly, costs nothing, and the log says so (``size`` "public", ``mechanism`` "none (public
    size)"); in a release with other queries its share of ε goes to them. Noising a public
    value would only add error (``frame.dp.size`` also gives ``n``). On a derived
    (private-size) frame a replacement upstream adds, removes or replaces one row, moving the
    count by at most 1: Δ = 1, domain ``[0, n]`` (no verified derivation has more rows than the
    protected frame), released as an integer (post-processing). Per group the count is always
    private.

    Under add/remove neighbours (``dpf.protect(..., neighbours="add_remove")``) the count is
    never public: one added or removed row moves it by 1, Δ = 1, domain ``[0, max_rows]``
    (``[0, 2³¹]`` when no ``max_rows`` is declared; a count above is clamped to it).
    """

    kind = "count"
    needs_column = False

    def plan(self, ctx: PlanContext) -> Plan:
        upper = float(ctx.count_cap)
        if ctx.size_public and not ctx.grouped:
            n = float(ctx.n)  # public: released exactly, no noise, no ε (logged as public)

            def exact(_: Mapping[str, np.ndarray]) -> np.ndarray:
                return np.array([n])

            return Plan("count", None, (), exact, "public size n, released exactly (no noise, "
                        "no ε)", public_size=True,
                        interval=lambda _m, _v, _l: (np.array([n]), np.array([n])))
        rows = Agg("rows")
        m = Measurement("count", rows_of(rows), 1.0, 0.0, upper, 1.0, (rows,), float(ctx.n))
        return Plan(
            "count", None, (m,), lambda v: np.clip(np.rint(v["count"]), 0.0, upper),
            "noisy count, rounded to an integer" + (
                " (public n)" if ctx.size_public else " (add/remove neighbours)"
                if ctx.add_remove else " (private size)"),
            public_size=ctx.size_public and not ctx.grouped,  # the log's size field
            interval=single_interval("count", 0.0, upper, integer=True),
        )


def count() -> Count:
    """Query builder: number of rows."""
    return Count()
