"""Histograms over public bins: noisy counts, then integer post-processing.

Input: exact counts per public bin (or per declared key), one vector per group. Each count is
released by the library's snapped Laplace-family mechanism with sensitivity 1:

* ``neighbours="replace"``: one replaced row leaves one bin and joins another, changing two
  counts by 1 each; every bin gets ``ε/2`` and the histogram costs ``ε`` once (parallel
  composition over disjoint bins applied to the two bins a replacement touches — the same rule
  as the library's group-by);
* ``neighbours="add/remove"``: one count changes by 1; every bin gets ``ε``.

Post-processing (no data, no ε): :func:`nonnegative_integers` rounds released values to the
nearest integer and clips at 0; :func:`apportion` makes non-negative integers that add up to a
given total (e.g. the public size ``n`` of the protected frame, or a separately released noisy
count) by the largest-remainder method. All functions are pure and work on arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.laplace import make_mechanism
from dpframe.mechanisms.randomness import RandomSource, RandomState

__all__ = [
    "DEFAULT_COUNT_UPPER",
    "HistogramRelease",
    "apportion",
    "histogram_epsilon_per_bin",
    "noisy_histogram",
    "nonnegative_integers",
]

#: Public bound on a count when none is given (the snapping window needs one).
DEFAULT_COUNT_UPPER = float(2**31)


@dataclass(frozen=True)
class HistogramRelease:
    """Snapped noisy counts (floats, shape of the input), their integer form, and the log."""

    noisy: np.ndarray
    counts: np.ndarray  # non-negative int64 (or apportioned to ``total``)
    log: dict[str, Any]


def histogram_epsilon_per_bin(epsilon: float, neighbours: str = "replace") -> float:
    """ε of each bin's release: ``ε/2`` under replacement, ``ε`` under add/remove."""
    if neighbours == "replace":
        return epsilon / 2.0
    if neighbours == "add/remove":
        return epsilon
    raise ParameterError(f"neighbours must be 'replace' or 'add/remove', got {neighbours!r}")


def _check_counts(counts: Any) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim not in (1, 2) or c.size == 0:
        raise ParameterError("counts must be a non-empty vector (or 2-D: one row per group)")
    if c.dtype.kind not in "iuf" or not np.isfinite(c).all() or (c < 0).any():
        raise ParameterError("counts must be finite non-negative numbers (exact counts)")
    return c.astype(float)


def noisy_histogram(
    counts: Any,
    epsilon: float,
    *,
    neighbours: str = "replace",
    mechanism: str = "truncated",
    count_upper: float | None = None,
    delta: float = 0.0,
    total: Any = None,
    random_state: RandomState = None,
) -> HistogramRelease:
    """Release every bin count of ``counts`` ((B,) or (G, B)) for a total of ``epsilon``.

    ``count_upper`` is the public bound on one count (the public ``n`` of the protected frame,
    or the library's count cap); it fixes the feasible set ``[0, count_upper]`` of the counts and
    the snapping window. ``mechanism`` is a name for :func:`make_mechanism` (``"truncated"`` —
    clamped at the ends —, ``"bounded"`` or ``"laplace"``); ``delta`` only for ``"bounded"``
    (split like ε). ``total`` (an int or one per group) makes the integer counts add up to it
    (:func:`apportion`); otherwise they are :func:`nonnegative_integers`.
    """
    c = _check_counts(counts)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer,
                                                              np.floating)):
        raise ParameterError("epsilon must be a number > 0")
    eps_bin = histogram_epsilon_per_bin(float(epsilon), neighbours)
    delta_bin = histogram_epsilon_per_bin(float(delta), neighbours) if delta else 0.0
    upper = DEFAULT_COUNT_UPPER if count_upper is None else float(count_upper)
    if not (math.isfinite(upper) and upper >= 1):
        raise ParameterError(f"count_upper must be a finite number ≥ 1, got {count_upper!r}")
    if (c > upper).any():
        raise ParameterError("a count exceeds count_upper; pass the public bound on counts")
    mech = make_mechanism(mechanism, epsilon=eps_bin, sensitivity=1.0, lower=0.0, upper=upper,
                          delta=delta_bin)
    source_kind = RandomSource(random_state).kind
    noisy = np.asarray(mech.sample(c, random_state=random_state), dtype=float).reshape(c.shape)
    ints = nonnegative_integers(noisy) if total is None else apportion(noisy, total)
    log = {
        "mechanism": f"histogram/{mech.name}",
        "epsilon": float(epsilon),
        "delta": float(delta),
        "epsilon_per_bin": eps_bin,
        "delta_per_bin": delta_bin,
        "neighbours": neighbours,
        "bins": int(c.shape[-1]),
        "count_upper": upper,
        "scale": mech.scale,
        "grid": mech.grid,
        "epsilon_overhead": mech.epsilon_overhead,
        "post_processing": "nonnegative_integers" if total is None else "apportion",
        "random_source": source_kind,
    }
    return HistogramRelease(noisy, ints, log)


def nonnegative_integers(noisy: Any) -> np.ndarray:
    """Round to the nearest integer (halves up) and clip at 0 (post-processing)."""
    x = np.asarray(noisy, dtype=float)
    if not np.isfinite(x).all():
        raise ParameterError("noisy counts must be finite")
    return np.maximum(np.floor(x + 0.5), 0.0).astype(np.int64)


def apportion(noisy: Any, total: Any) -> np.ndarray:
    """Non-negative integers adding up to ``total`` (per row), close to ``noisy``.

    Largest-remainder (Hamilton) method: weights ``w = max(noisy, 0)`` (all equal if they sum to
    0), quotas ``total·w/Σw``, each bin gets the floor of its quota and the remaining units go to
    the largest fractional parts, ties to the lower index. Every count is within 1 of its quota.
    ``total`` is rounded to the nearest integer ≥ 0; it must itself be public or released.
    """
    x = np.asarray(noisy, dtype=float)
    if x.ndim == 1 and x.size == 0:  # no bins (no key passed a selection): nothing to share
        return np.zeros(0, dtype=np.int64)
    if x.ndim not in (1, 2) or x.size == 0 or not np.isfinite(x).all():
        raise ParameterError("noisy counts must be a finite non-empty vector (or 2-D)")
    x2 = np.atleast_2d(x)
    t = np.broadcast_to(np.asarray(total, dtype=float), (x2.shape[0],))
    if not np.isfinite(t).all():
        raise ParameterError("total must be finite")
    t = np.maximum(np.floor(t + 0.5), 0.0).astype(np.int64)
    w = np.maximum(x2, 0.0)
    sums = w.sum(axis=1, keepdims=True)
    w = np.where(sums > 0, w, 1.0)
    sums = w.sum(axis=1, keepdims=True)
    quota = (w / sums) * t[:, None]
    base = np.floor(quota).astype(np.int64)
    over = base.sum(axis=1) - t  # rounding can push Σ floor above the total by a unit or so
    frac = quota - base
    out = base.copy()
    for g in range(x2.shape[0]):
        left = int(t[g] - base[g].sum())
        if left > 0:
            order = np.lexsort((np.arange(w.shape[1]), -frac[g]))
            out[g, order[:left]] += 1
        elif over[g] > 0:  # remove from the smallest fractional parts among positive counts
            ranked = np.lexsort((-np.arange(w.shape[1]), frac[g]))
            positive = [i for i in ranked if out[g, i] > 0]
            for i in positive[: int(over[g])]:
                out[g, i] -= 1
    return out if x.ndim == 2 else out[0]
