"""A quantile's plan with its intervals: the point release, and with ``ci=`` the two
bracketing releases of its value interval (:mod:`dpframe.mechanisms.quantile_intervals`) and
the point's rank interval (docs/privacy.md Q.6).

With ``ci=level`` and ``ci_share = s > 0`` the query's ε is split ``1 − s`` (the point, as
without ``ci``), ``s/2`` (lower bracket) and ``s/2`` (upper bracket): sequential composition
of three releases on the same bin counts, each logged as its own part. The value interval
``[<name>_lower, <name>_upper]`` contains the sample quantile with probability ``≥ level``
for every data set (union bound over the two sides, each at ``α/2``); ``s = 0`` spends
nothing on it and states the declared bounds, which always hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from dpframe.mechanisms.quantile_intervals import BracketMechanism, value_interval

__all__ = ["BRACKETS", "quantile_plan_fields"]

BRACKETS = ("lower_bracket", "upper_bracket")
#: wraps a mechanism into the form the pipeline logs (``statistics._QuantileRelease``)
Wrap = Callable[[Any], Any]


def _brackets(point: Any, ci: float, levels: list[float], share: float, rows_per_unit: int,
              neighbours: str, bins: int, wrap: Wrap) -> list[Any]:
    """The two bracketing measurements (same bin counts as the point), ``share/2`` each."""
    alpha_side = (1.0 - ci) / 2.0
    lo, hi, k = point.lower, point.upper, rows_per_unit

    def bracket(side: str) -> Any:
        def make(epsilon: float, delta: float) -> Any:
            return wrap(BracketMechanism(
                epsilon / k, lo, hi, levels, side=side, alpha_side=alpha_side, bins=bins,
                neighbours=neighbours))

        return replace(point, name=f"{side}_bracket", weight=share / 2.0, make=make)

    return [bracket("lower"), bracket("upper")]


def quantile_plan_fields(query: Any, point: Any, formulation: str, ctx: Any,
                         rows_per_unit: int, neighbours: str, bins: int, wrap: Wrap
                         ) -> dict[str, Any]:
    """The fields of the :class:`~dpframe.query.statistics.Plan` of the quantile ``query``
    from its point measurement ``point`` (weight 1 without ``ci=``), the plan context
    ``ctx`` and ``wrap`` (a mechanism in the form the pipeline logs)."""
    levels = list(query.levels)
    scalar = query.scalar
    lo, hi = point.lower, point.upper
    share = query.ci_share if ctx.ci is not None else 0.0
    measurements = [point]
    if share > 0:
        measurements = [replace(point, weight=1.0 - share),
                        *_brackets(point, ctx.ci, levels, share, rows_per_unit, neighbours,
                                   bins, wrap)]
        formulation += (
            f"; with ci=, a value interval from two more releases on the same counts "
            f"(ε share {share:g}, half each): padded by public rows at both ends, targets "
            f"q·n ∓ (1 + r), the chosen bin's outer edge")

    def finalize(v: Mapping[str, np.ndarray]) -> np.ndarray:
        out = np.asarray(v["quantile"], dtype=float)
        return out[:, 0] if scalar else out

    def interval(mechs: Mapping[str, Any], noisy: Mapping[str, np.ndarray], level: float
                 ) -> tuple[np.ndarray, np.ndarray]:
        if share > 0:
            low, high = value_interval(noisy["lower_bracket"], noisy["upper_bracket"])
        else:  # no ε for it: the declared bounds, which always hold
            shape = np.shape(noisy["quantile"])
            low, high = np.full(shape, lo), np.full(shape, hi)
        return (low[:, 0], high[:, 0]) if scalar else (low, high)

    size_public = ctx.size_public and not ctx.grouped
    n_cap = ctx.n

    def ci_columns(used: Mapping[str, Any], level: float) -> dict[str, float]:
        # the point's rank interval: public parameters only, clipped at the largest rank
        # distance any data set of at most n_cap rows has (docs/privacy.md Q.6)
        r = used["quantile"].mechanism.rank_error(1.0 - level, max_rows=n_cap)
        out = {"rank_error": r}
        if size_public and len(levels) == 1 and n_cap > 0:
            out["q_lower"] = max(0.0, levels[0] - r / n_cap)
            out["q_upper"] = min(1.0, levels[0] + r / n_cap)
        return out

    value_note = (
        f"value interval <name>_lower, <name>_upper from two bracketing releases (ε share "
        f"{share:g} of this query, parts lower_bracket and upper_bracket): it contains the "
        "sample quantile with probability ≥ the level for every data set" if share > 0 else
        "value interval <name>_lower, <name>_upper = the declared bounds (ci_share=0: no ε "
        "spent on it)")
    note = (f"{value_note}; and the point's rank interval (post-processing, no ε): with "
            "probability ≥ the level its chosen bin holds rows within <name>_rank_error ranks "
            "of the target rank q·n" + (" (levels <name>_q_lower, <name>_q_upper)"
                                        if size_public and len(levels) == 1 else "")
            + " (docs/privacy.md Q.6)")
    return {"measurements": tuple(measurements), "finalize": finalize,
            "formulation": formulation, "labels": query.labels, "interval": interval,
            "ci_columns": ci_columns, "interval_note": note}
