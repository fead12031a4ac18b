"""Accuracy before spending (issue 13): how accurate a release will be, what ε a target
accuracy needs, and how to split one budget over several targets — from public facts only.

Each function plans the queries exactly as :func:`dpframe.release._pipeline.run` would (same
measurements, sensitivities, domains and mechanisms: :func:`dpframe.release._pipeline.plan`), then
asks the mechanisms' accuracy (:mod:`dpframe.mechanisms.accuracy`). Nothing reads the data and
nothing is spent or logged.

A half-width ``h`` at level ``α`` means: whatever the true value in the statistic's domain,
``P(|released − true| ≤ h) ≥ 1 − α``. For an answer that is one measurement (counts; sums,
means and variances on a public size; a std is the square root of a variance, and
``|√a − √b| ≤ √|a − b|``) it is exact up to the snapping radius. A private-size mean divides a
noisy sum by a noisy count; its half-width holds for every group of at least ``min_rows``
rows, a public assumption the caller states. Private-size variances, proportions and
covariances have no half-width before spending: release them with ``ci=`` instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpframe._validation import check_alpha, check_count, check_number
from dpframe.errors import ParameterError
from dpframe.mechanisms.accuracy import AccuracyTarget, epsilon_for_half_width, split_epsilon
from dpframe.mechanisms.accuracy import (  # re-exported: the count rounding rule's old home
    rounded_half_width as rounded_half_width,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.provenance import Session, resolve
from dpframe.query import BRACKETS
from dpframe.query.registry import accuracy_of
from dpframe.query.statistics import Query
from dpframe.release._pipeline import plan, plan_release
from dpframe.release._records import GroupBy

__all__ = ["Accuracy", "accuracy", "epsilon_for", "split"]


@dataclass(frozen=True)
class Accuracy:
    """The accuracy of one query of a planned release."""

    name: str
    query: str
    epsilon: float
    half_width: float  # NaN where it cannot be known before spending
    alpha: float
    mechanisms: str
    note: str
    #: keys selected from the data (the ``keys`` row only; NaN elsewhere): the selection
    #: threshold τ and the smallest group kept with probability ½ and with ``1 − alpha``
    threshold: float = math.nan
    min_group_half: float = math.nan
    min_group_1_alpha: float = math.nan


def accuracy(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: float,
    delta: float = 0.0,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    mechanism: str = "auto",
    alpha: float = 0.05,
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    min_rows: int | None = None,
    session: Session | str | None = None,
    selection_share: float = 0.5,
    ci: float | None = None,
) -> list[Accuracy]:
    """Half-width at level ``1 − alpha`` of each query of the release these arguments describe
    (see the module docstring); ``min_rows``: a public lower bound on the rows behind a
    private-size mean (per group when grouped). A group-by whose keys are selected from the
    data (no keys declared, δ > 0) gets a first row ``keys`` for the selection
    (:func:`_selection_row`); the queries' rows then hold for each kept group."""
    a = check_alpha(alpha)
    if min_rows is not None:
        min_rows = check_count("min_rows", min_rows, minimum=1)
    planned, rule = plan_release(frame, queries, epsilon=epsilon, delta=delta,
                                 weights=weights, mechanism=mechanism, group_by=group_by,
                                 keys=keys, session=session, selection_share=selection_share,
                                 ci=ci)  # (ci: a quantile's interval takes part of its ε)
    out = [] if rule is None else [_selection_row(frame, session, rule, a)]
    for p in planned:
        mechs = dict(zip((m.name for m in p.plan.measurements), p.mechanisms, strict=True))
        names = ", ".join(sorted({m.name for m in mechs.values() if m is not None}))
        h, note = _half_width(p.plan.query, mechs, a, p.plan.public_size, min_rows, p.bounds)
        note += _interval_share_note(p.plan.measurements, p.epsilon)
        out.append(Accuracy(p.name, p.plan.query, p.epsilon, h, a, names, note))
    return out


def _interval_share_note(measurements: Sequence[Any], epsilon: float) -> str:
    """What a quantile's value interval costs its point (empty without one): with ``ci=`` and
    ``ci_share = s`` the query's ε is split ``1 − s`` for the point and ``s/2`` for each
    bracketing release (:mod:`dpframe.query._quantile_plan`); the point's accuracy above is
    the one at ``ε·(1 − s)``, as the plan's point measurement carries that weight."""
    brackets = [m for m in measurements if m.name in BRACKETS]
    if not brackets:
        return ""
    total = sum(float(m.weight) for m in measurements)
    share = sum(float(m.weight) for m in brackets) / total
    point = epsilon * (1.0 - share)
    return (f"; with ci=, the point gets ε·(1 − ci_share) = {point:.4g} (its accuracy above is "
            f"at that ε) and the value interval ci_share = {share:g} of ε ({epsilon - point:.4g},"
            f" half to each bracketing release)")


def _selection_row(frame: Any, session: Session | str | None, rule: Any, alpha: float
                   ) -> Accuracy:
    """The key selection's plan: a group is kept iff its snapped noisy count exceeds the
    threshold τ, so a group of exact count ``x`` is kept with probability
    ``S((t* − x)/b)`` (``S`` the Laplace survival function, ``t*`` the exact draw the snapped
    release must reach, :meth:`~dpframe.mechanisms.selection.SelectionRule.keep_probability`);
    the smallest group kept with probability ``q ≥ ½`` is ``⌈t* + δ_t + b·ln(1/(2(1 − q)))⌉``
    (:meth:`~dpframe.mechanisms.selection.SelectionRule.smallest_kept`). Groups count rows, or
    persons (distinct privacy units, after keeping k rows per person) on a frame with one."""
    counted = "rows" if resolve(frame, session).unit is None else "persons"
    half, sure = rule.smallest_kept(0.5), rule.smallest_kept(1.0 - alpha)
    note = (f"key selection: a group is kept iff its noisy count (Laplace, scale "
            f"{rule.scale:.4g}) exceeds {rule.threshold:.4g}; a group of {half} {counted} is "
            f"kept with probability ≥ ½, of {sure} with probability ≥ {1 - alpha:g}; a group "
            f"only one person is in, with probability ≤ δ. Declared keys (keys=[...]) need no "
            f"selection")
    return Accuracy("keys", "key selection", rule.epsilon, math.nan, alpha, "laplace", note,
                    rule.threshold, float(half), float(sure))


def _half_width(kind: str, mechs: Mapping[str, Mechanism | None], alpha: float,
                public: bool, min_rows: int | None, bounds: tuple[float, float] | None
                ) -> tuple[float, str]:
    """``(h, note)`` of a planned query: exact for an answer from public facts, else the
    statistic's own accuracy rule (:func:`dpframe.query.registry.accuracy_of`)."""
    if not mechs:  # answered from public facts (a public size): exact, no ε
        return 0.0, "exact: a public value, released without noise and without ε"
    return accuracy_of(kind).half_width(kind, mechs, alpha, public, min_rows, bounds)


def epsilon_for(
    frame: Any,
    query: Query,
    half_width: float,
    *,
    alpha: float = 0.05,
    delta: float = 0.0,
    mechanism: str = "bounded",
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
) -> float:
    """The smallest ε at which ``query`` (one measurement) has ``half_width`` at level
    ``1 − alpha``: the inverse of :func:`accuracy`; 0 for the count of a public size (exact)."""
    try:
        target = _target(frame, query, half_width, alpha=alpha, delta=delta,
                         mechanism=mechanism, group_by=group_by, keys=keys, session=session)
    except _PublicValueError:
        return 0.0  # the public n: exact, every half-width met at no ε
    eps = epsilon_for_half_width(target.kind, target.target, sensitivity=target.sensitivity,
                                 lower=target.lower, upper=target.upper, delta=target.delta,
                                 alpha=target.alpha, **dict(target.options))
    return eps / _group_factor(group_by, frame, session)


def split(
    frame: Any,
    targets: Mapping[str, tuple[Query, float]],
    *,
    epsilon: float,
    alpha: float = 0.05,
    mechanism: str = "bounded",
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
) -> dict[str, tuple[float, float]]:
    """Split ``epsilon`` over queries with target half-widths ``{name: (query, target)}`` so
    that the worst ratio achieved/target is as small as possible (every target met when it is
    ≤ 1). Returns ``{name: (epsilon, achieved half-width)}``; pass the ε's as ``weights=`` of
    one release."""
    if not isinstance(targets, Mapping) or not targets:
        raise ParameterError("split takes a non-empty dict name -> (query, target half-width)")
    reqs = {}
    for name, pair in targets.items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ParameterError(f"target {name!r} must be a (query, half_width) pair")
        reqs[name] = _target(frame, pair[0], pair[1], alpha=alpha, delta=0.0,
                             mechanism=mechanism, group_by=group_by, keys=keys,
                             session=session)
    factor = _group_factor(group_by, frame, session)
    result = split_epsilon(list(reqs.values()), check_number("epsilon", epsilon) * factor)
    return {name: (eps / factor, accuracy_of(getattr(targets[name][0], "kind", "")).released(h))
            for name, eps, h in zip(reqs, result.epsilons, result.half_widths, strict=True)}


def _group_factor(group_by: GroupBy | None, frame: Any, session: Session | str | None
                  ) -> float:
    """Each group's share of ε: 1/2, or 1/(2·min(g, k)) with a privacy unit (privacy.md §U.4),
    or the whole ε under add/remove neighbours (a row added or removed is in one group)."""
    if group_by is None:
        return 1.0
    facts = resolve(frame, session)
    if facts.dataset.size_private:
        return 1.0
    unit = facts.unit
    return 0.5 / (1 if unit is None else unit.touched_groups)


class _PublicValueError(ParameterError):
    """The query is answered from public facts (the public size): exact, at no ε."""


def _target(frame: Any, query: Query, target: float, *, alpha: float, delta: float,
            mechanism: str, group_by: GroupBy | None, keys: Sequence[Any] | None,
            session: Session | str | None) -> AccuracyTarget:
    a = check_alpha(alpha)
    target = check_number("half_width", target)
    if isinstance(mechanism, str) and mechanism == "auto":
        raise ParameterError("name the mechanism ('bounded', 'truncated' or 'laplace') to "
                             "invert its accuracy; 'auto' picks one per ε")
    planned = plan(frame, {"q": query}, epsilon=1.0, delta=delta, mechanism=mechanism,
                   group_by=group_by, keys=keys, session=session)[0]
    ms = planned.plan.measurements
    if not ms and planned.plan.public_size:
        raise _PublicValueError(f"{query!r} here is the public size n, released exactly at no ε: "
                           "it needs no epsilon (leave it out of a split)")
    rule = accuracy_of(planned.plan.query)
    if not rule.in_values:
        raise ParameterError("a quantile's accuracy in values depends on the data; "
                             "accuracy() reports its accuracy in ranks at a given epsilon "
                             "(with ci=, at the epsilon·(1 − ci_share) its point gets)")
    mech = planned.mechanisms[0] if len(ms) == 1 else None
    if mech is None or not rule.invertible:
        raise ParameterError(
            f"{query!r} here is composed of {len(ms)} measurements; the inverse is available "
            "for answers that are one measurement (counts; public-size sums, means and "
            "variances). Use accuracy() at candidate epsilons instead."
        )
    if group_by is None and planned.plan.cell_share is not None:
        raise ParameterError(
            f"{query!r} releases one count per cell at a share of its ε; the inverse is "
            "available for it per group (frame.dp.groupby(...).epsilon_for). Use accuracy() "
            "at candidate epsilons instead (its half-width is exact for each cell).")
    m = ms[0]
    bounded = math.isfinite(m.lower) and math.isfinite(m.upper)
    options = {} if m.magnitude is None or bounded else {"magnitude": m.magnitude}
    return AccuracyTarget(
        mech.name, float(mech.sensitivity), rule.raw_target(float(target)),
        lower=m.lower if math.isfinite(m.lower) else None,
        upper=m.upper if math.isfinite(m.upper) else None,
        delta=float(mech.delta) if mech.name == "bounded" else 0.0, alpha=a, options=options,
    )
