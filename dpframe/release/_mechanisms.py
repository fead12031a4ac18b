"""The mechanisms of a release: each measurement's, built before the read from its share of ε
and δ (``mechanism="auto"`` picks from public facts only: docs/privacy.md, section I.5), and
the draw of every measurement the one way its kind says, with one log entry each
(docs/architecture.md, "Module by module", steps 7 and 11).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.mechanisms import choose_mechanism, make_mechanism
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query import LaplaceFactory
from dpframe.query.statistics import Measurement
from dpframe.release._entries import LogContext
from dpframe.release._records import Planned, Request


def mark_pure(p: Planned) -> None:
    """Note the measurements whose mechanism, built before the read, uses no δ (the truncated
    and plain Laplace mechanisms, the bounded one at δ = 0, which "auto" runs where δ would buy
    less than ``DELTA_MIN_GAIN``, and the exponential mechanism of quantiles): a pure ε-DP
    release composes with δ = 0, so its share of δ is not charged. A mechanism built after
    earlier measurements (None here) or of another family keeps its share: charged,
    conservatively."""
    p.pure = frozenset(m.name for m, mech in zip(p.plan.measurements, p.mechanisms,
                                                 strict=True) if _uses_no_delta(mech))


def _uses_no_delta(mechanism: object) -> bool:
    name = getattr(mechanism, "name", None)
    if name in ("truncated", "laplace"):
        return True
    return name in ("bounded", "exponential-quantile") and getattr(mechanism, "delta", 1) == 0


def release_delta(planned: Sequence[Planned], request: Request) -> float:
    """The δ a release charges: :func:`charged_delta`, or all of the request's δ when keys
    are selected (the selection uses it)."""
    if request.selection is not None:
        return request.delta
    return charged_delta(planned, request.delta)


def charged_delta(planned: Sequence[Planned], delta: float) -> float:
    """The δ a release of ``planned`` asking for ``delta`` charges: ``delta`` less the shares
    of its pure ε-DP measurements (:func:`mark_pure`); all of it when none is pure."""
    if not any(p.pure for p in planned):
        return delta
    used = math.fsum(delta * p.share * m.weight for p in planned for m in p.plan.measurements
                     if m.name not in p.pure)
    return min(used, delta)


def build_mechanisms(p: Planned, request: Request) -> None:
    """The mechanism of each of ``p``'s measurements: its own (quantiles: the exponential
    mechanism over bins), None when its domain depends on earlier noisy values (built after
    them), else the Laplace family member ``request.mechanism`` names."""
    p.mechanisms = []
    for m in p.plan.measurements:
        eps, dlt = _charged(p, m, request, grouped=True)
        p.mechanisms.append(m.kind.build(m, eps, dlt, _laplace(request, m, eps, dlt, p.choices)))
        if m.make is not None:
            p.choices[m.name] = "the exponential mechanism (used for every quantile)"


def _charged(p: Planned, m: Measurement, request: Request, *, grouped: bool
             ) -> tuple[float, float]:
    """The ε and δ of measurement ``m``: its share of the release; ``grouped``: the share a
    mechanism of one group is calibrated to (each row is in one group, but a changed row can
    move between two: ``group_share``, default ½; ungrouped, a plan of several disjoint cells
    gives each its ``cell_share``: :meth:`~dpframe.query.statistics.Plan.epsilon_factor`)."""
    factor = p.plan.epsilon_factor(request.group_by is not None) if grouped else 1.0
    delta = 0.0 if m.name in p.pure else request.delta * p.share * m.weight * factor
    return request.epsilon * p.share * m.weight * factor, delta


def _laplace(request: Request, m: Measurement, epsilon: float, delta: float,
             choices: dict[str, str]) -> LaplaceFactory:
    """The request's Laplace-family member for ``m`` at ``(epsilon, delta)``, on the given
    feasible set and sensitivity (``None``: the measurement's own)."""
    return lambda lower, upper, sensitivity: _mechanism(request, m, epsilon, delta, lower,
                                                        upper, sensitivity, choices=choices)


def _laplace_at_draw(request: Request, m: Measurement, p: Planned) -> LaplaceFactory:
    """:func:`_laplace` at ``m``'s grouped charge (:func:`_charged`), computed when a kind
    asks for a mechanism at draw time (most draw with the one built before the read)."""
    return lambda lower, upper, sensitivity: _mechanism(
        request, m, *_charged(p, m, request, grouped=True), lower, upper, sensitivity,
        choices=p.choices)


def _mechanism(request: Request, m: Measurement, epsilon: float, delta: float,
               lower: float | None = None, upper: float | None = None,
               sensitivity: float | None = None, *, choices: dict[str, str]) -> Mechanism:
    lo = m.lower if lower is None else lower
    hi = m.upper if upper is None else upper
    sens = m.sensitivity if sensitivity is None else sensitivity
    magnitude = None if math.isfinite(lo) and math.isfinite(hi) else m.magnitude
    name = request.mechanism
    if name == "auto":
        name, choices[m.name], delta = _auto(epsilon, sens, lo, hi, delta)
    return make_mechanism(name, epsilon=epsilon, sensitivity=sens, lower=lo, upper=hi,
                          delta=delta if name == "bounded" else 0.0, magnitude=magnitude)


@functools.lru_cache(maxsize=1024)
def _auto(epsilon: float, sensitivity: float, lower: float, upper: float, delta: float
          ) -> tuple[str, str, float]:
    """``mechanism="auto"``: the mechanism with the smaller certified worst-case MSE over the
    output domain, from public facts only, and the δ it uses: ``delta`` only where the bounded
    mechanism at ``delta`` beats every pure ε-DP candidate's worst-case RMSE by at least
    ``DELTA_MIN_GAIN`` (:func:`dpframe.mechanisms.choose_mechanism`), else 0."""
    choice = choose_mechanism(epsilon, sensitivity,
                              lower if math.isfinite(lower) else None,
                              upper if math.isfinite(upper) else None, delta)
    return choice.name, choice.reason, choice.delta


def draw_all(p: Planned, request: Request, aggs: Mapping[Any, np.ndarray],
             context: LogContext, entries: list[dict[str, Any]]
             ) -> tuple[dict[str, np.ndarray], dict[str, Mechanism | None]]:
    """Every measurement of ``p`` released the one way its kind says
    (:mod:`dpframe.query._measurement_kinds`), in plan order (a later measurement's domain may
    read the earlier noisy values); one log entry each."""
    noisy: dict[str, np.ndarray] = {}
    used: dict[str, Mechanism | None] = {}
    for m, mech in zip(p.plan.measurements, p.mechanisms, strict=True):
        eps, dlt = _charged(p, m, request, grouped=False)
        laplace = _laplace_at_draw(request, m, p)
        drawn = m.kind.draw(m, mech, np.asarray(m.statistic(aggs), dtype=float), noisy,
                            laplace, request.rng)
        noisy[m.name], used[m.name] = drawn.value, drawn.mechanism
        if drawn.point is None and mech is not None and drawn.mechanism is mech:
            entries.append(context.planned_entry(p, m, mech, eps, dlt))
        else:  # (a mechanism built at draw time, or a single-point domain)
            entries.append(context.entry(p, m, drawn.mechanism, eps, dlt, drawn.point))
    if not p.plan.measurements:  # answered from public facts: logged, not noised
        entries.append(context.entry(p, None, None, 0.0, 0.0, None))
    return noisy, used
