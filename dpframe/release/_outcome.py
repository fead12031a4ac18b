"""The outcome of a release: each query's post-processed answer (one column, or one per
label), its confidence interval (docs/privacy.md, sections I.2–I.3 and Q.6) and, for keys
selected from the data, the warning when no key was kept (docs/privacy.md, section K.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe.backends import Backend
from dpframe.errors import (
    SelectionWarning,
    warn_user,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.provenance import FrameFacts
from dpframe.release._records import GroupBy, Planned, Request


@dataclass
class Outcome:
    """Answers of one release: ``values[name]`` is an array over ``keys`` (one entry when
    ungrouped; a matrix for cov/corr), plus the committed log entries and the log document as
    of this release."""

    values: dict[str, np.ndarray]
    keys: Sequence[Any] | None  # (a Keys: the request's checked key tuple)
    group_by: GroupBy | None
    entries: list[dict[str, Any]]
    document: dict[str, Any]
    release_id: int
    backend: Backend
    intervals: dict[str, tuple[np.ndarray, np.ndarray]]
    level: float | None
    #: keys selected from the data: the group columns' dtypes (public schema), so a table
    #: with no kept key still has typed key columns
    key_dtypes: dict[str, Any] | None = None


def released_selection(request: Request, facts: FrameFacts) -> dict[str, Any] | None:
    """After the commit, for keys selected from the data: warn if none was kept (a function
    of the released keys alone: post-processing) and give the key columns' dtypes."""
    chosen = request.selected
    if chosen is None:
        return None
    if not request.keys:
        _warn_empty_selection(chosen.rule, chosen.share,
                              "rows" if facts.unit is None else "persons")
    return chosen.key_dtypes


def _warn_empty_selection(rule: Any, share: float, counted: str) -> None:
    """The released key set is empty: say so, with the public threshold and the ways to get
    groups. Issued on the released keys alone (post-processing); quotes no data."""
    half = rule.smallest_kept(0.5)
    warn_user(SelectionWarning(
        f"no group passed the key selection, so the table has no rows: a group is kept when "
        f"its noisy count exceeds the threshold {rule.threshold:.4g} (a group of {half} "
        f"{counted} is kept half the time), set by ε = {rule.epsilon:.4g} for the selection "
        f"(selection_share={share:g} of this release's ε) and δ = "
        f"{rule.delta:.3g}. To get groups: declare the keys (keys=[...]: no selection, no "
        f"threshold), give the release more epsilon, or give the selection a larger "
        f"selection_share; frame.dp.groupby(...).accuracy(...) shows the threshold before "
        f"spending"))


def record_answer(p: Planned, request: Request, noisy: dict[str, np.ndarray],
                  used: Mapping[str, Mechanism | None], values: dict[str, np.ndarray],
                  intervals: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """``p``'s post-processed answer (one column, or one per label) and its interval."""
    answer = np.asarray(p.plan.finalize(noisy), dtype=float)
    bounds = None
    if request.ci is not None and p.plan.interval is not None:
        bounds = [np.asarray(b, dtype=float) for b in p.plan.interval(used, noisy, request.ci)]
    if p.plan.labels is not None:  # several answers per group: one output each (histogram
        width = len(p.plan.labels)  # bins and matrix entries with their value intervals)
        for i, label in enumerate(p.plan.labels):
            values[f"{p.name}[{label}]"] = answer.reshape(-1, width)[:, i]
            if bounds is not None:
                intervals[f"{p.name}[{label}]"] = (bounds[0].reshape(-1, width)[:, i],
                                                   bounds[1].reshape(-1, width)[:, i])
    else:
        values[p.name] = answer
        if bounds is not None:
            intervals[p.name] = (bounds[0], bounds[1])
    values.update(_ci_columns(p, used, answer, request.ci))


def _ci_columns(p: Planned, used: Mapping[str, Mechanism | None], answer: np.ndarray,
                level: float | None) -> dict[str, np.ndarray]:
    """A plan's non-value interval columns (quantiles: the rank interval), computed from the
    level and public parameters only; one value per group."""
    if level is None or p.plan.ci_columns is None:
        return {}
    groups = answer.reshape(-1, len(p.plan.labels or (None,))).shape[0]
    return {f"{p.name}_{suffix}": np.full(groups, float(v))
            for suffix, v in p.plan.ci_columns(used, level).items()}
