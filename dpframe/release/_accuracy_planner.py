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
from dpframe.mechanisms.accuracy import (
    ROUNDED,
    AccuracyTarget,
    epsilon_for_half_width,
    half_width,
    mean_half_width,
    raw_target,
    rounded_half_width,
    split_epsilon,
)
from dpframe.provenance._protect import Session
from dpframe.query.statistics import Query
from dpframe.release._pipeline import GroupBy, plan, plan_release

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
                                 keys=keys, session=session, selection_share=selection_share)
    out = [] if rule is None else [_selection_row(frame, session, rule, a)]
    for p in planned:
        mechs = dict(zip((m.name for m in p.plan.measurements), p.mechanisms, strict=True))
        names = ", ".join(sorted({m.name for m in mechs.values() if m is not None}))
        h, note = _half_width(p.plan.query, mechs, a, p.plan.public_size, min_rows,
                              p.query, p.bounds)
        out.append(Accuracy(p.name, p.plan.query, p.epsilon, h, a, names, note))
    return out


def _selection_row(frame: Any, session: Session | str | None, rule: Any, alpha: float
                   ) -> Accuracy:
    """The key selection's plan: a group is kept iff its snapped noisy count exceeds the
    threshold τ, so a group of exact count ``x`` is kept with probability
    ``S((t* − x)/b)`` (``S`` the Laplace survival function, ``t*`` the exact draw the snapped
    release must reach, :meth:`~dpframe.mechanisms.selection.SelectionRule.keep_probability`);
    the smallest group kept with probability ``q ≥ ½`` is ``⌈t* + δ_t + b·ln(1/(2(1 − q)))⌉``
    (:meth:`~dpframe.mechanisms.selection.SelectionRule.smallest_kept`). Groups count rows, or
    persons (distinct privacy units, after keeping k rows per person) on a frame with one."""
    from dpframe.provenance._protect import resolve

    counted = "rows" if resolve(frame, session).unit is None else "persons"
    half, sure = rule.smallest_kept(0.5), rule.smallest_kept(1.0 - alpha)
    note = (f"key selection: a group is kept iff its noisy count (Laplace, scale "
            f"{rule.scale:.4g}) exceeds {rule.threshold:.4g}; a group of {half} {counted} is "
            f"kept with probability ≥ ½, of {sure} with probability ≥ {1 - alpha:g}; a group "
            f"only one person is in, with probability ≤ δ. Declared keys (keys=[...]) need no "
            f"selection")
    return Accuracy("keys", "key selection", rule.epsilon, math.nan, alpha, "laplace", note,
                    rule.threshold, float(half), float(sure))


#: statistics released as one noisy count per cell (bins, keys): a count's accuracy per cell
_CELLS = ("histogram", "value_counts")


def _half_width(kind: str, mechs: Mapping[str, Any], alpha: float, public: bool,
                min_rows: int | None, query: Query, bounds: tuple[float, float] | None
                ) -> tuple[float, str]:
    if not mechs:  # answered from public facts (a public size): exact, no ε
        return 0.0, "exact: a public value, released without noise and without ε"
    single = len(mechs) == 1 and None not in mechs.values()
    if kind == "quantile":
        return math.nan, _quantile_note(next(iter(mechs.values())), alpha)
    if single and (kind in ROUNDED or kind in _CELLS):
        h = half_width(next(iter(mechs.values())), alpha)
        each = ", each cell" if kind in _CELLS else ""
        return rounded_half_width(h), (f"exact (one measurement{each}): the noisy count is "
                                       f"within {h:.4g}, the released integer within "
                                       f"⌊{h:.4g} + ½⌋")
    if single and kind in ("sum", "mean", "variance"):
        return half_width(next(iter(mechs.values())), alpha), "exact (one measurement)"
    if single and kind == "std":
        return math.sqrt(half_width(mechs["variance"], alpha)), \
            "√ of the variance's half-width (|√a − √b| ≤ √|a − b|)"
    if kind == "mean" and set(mechs) == {"count", "sum"} and bounds is not None:
        if min_rows is None:
            return math.nan, ("a private-size mean's accuracy depends on its private size: "
                              "pass min_rows= (a public lower bound on its rows)")
        lo, hi = bounds
        h = mean_half_width(mechs["count"], mechs["sum"], int(min_rows), alpha,
                            lower=lo, upper=hi, center=lo / 2 + hi / 2)
        return h, f"holds for every group of at least {int(min_rows)} rows"
    return math.nan, (f"no half-width before spending for a {'public' if public else 'private'}"
                      f"-size {kind}; release it with ci= to get an interval")


def _quantile_note(release: Any, alpha: float) -> str:
    """A quantile's accuracy in *ranks*, which does not depend on the data: the mechanism
    picks a bin whose rank distance exceeds ``r`` with probability at most ``B·e^{−λr}`` (at
    most ``B`` bins each weighted ``≤ e^{−λr}`` against a bin at distance 0), so with
    ``r = ln(B/α)/λ`` each level is within ``r`` ranks of its target with probability
    ``≥ 1 − α``, plus half a bin in value. In values it depends on the data's density."""
    mech = release.mechanism
    r = max(math.log(mech.bins / alpha) / lam for lam in mech.coefficients)
    return (f"data-dependent in values; in ranks: each level within ±{r:.3g} rows of its "
            f"target rank (probability ≥ {1 - alpha:g}), and within half a bin "
            f"({release.grid / 2:.3g}) of the chosen bin")


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
    return {name: (eps / factor, rounded_half_width(h)
                   if getattr(targets[name][0], "kind", None) in (*ROUNDED, *_CELLS) else h)
            for name, eps, h in zip(reqs, result.epsilons, result.half_widths, strict=True)}


def _group_factor(group_by: GroupBy | None, frame: Any, session: Session | str | None
                  ) -> float:
    """Each group's share of ε: 1/2, or 1/(2·min(g, k)) with a privacy unit (privacy.md §U.4)."""
    if group_by is None:
        return 1.0
    from dpframe.provenance._protect import resolve

    unit = resolve(frame, session).unit
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
    if planned.plan.query == "quantile":
        raise ParameterError("a quantile's accuracy in values depends on the data; "
                             "accuracy() reports its accuracy in ranks at a given epsilon")
    if len(ms) != 1 or planned.plan.query == "std" or planned.mechanisms[0] is None:
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
    m, mech = ms[0], planned.mechanisms[0]
    bounded = math.isfinite(m.lower) and math.isfinite(m.upper)
    options = {} if m.magnitude is None or bounded else {"magnitude": m.magnitude}
    return AccuracyTarget(
        mech.name, float(mech.sensitivity), raw_target(
            "count" if planned.plan.query in _CELLS else planned.plan.query, float(target)),
        lower=m.lower if math.isfinite(m.lower) else None,
        upper=m.upper if math.isfinite(m.upper) else None,
        delta=float(mech.delta) if mech.name == "bounded" else 0.0, alpha=a, options=options,
    )
