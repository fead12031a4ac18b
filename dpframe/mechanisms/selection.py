"""Private key selection: release only the keys whose noisy count clears a threshold.

For a group-by over keys not declared in advance. The caller has bounded every privacy unit's
contribution first: each unit touches at most ``m`` keys (``max_keys_per_unit``) and adds at most
``c`` to one key's count (``max_count_per_key``, 1 when units are counted). Input: the exact
count of every *observed* key. Every key gets an independent snapped Laplace release of
sensitivity ``c`` at ``ε_key = ε/m`` (add/remove) or ``ε/(2m)`` (replace); a key is released,
with its noisy count, iff the snapped value exceeds

    τ = c + Λ/2 + δ_t + b·ln(1/(2p)),      p = min(1 − (1 − δ)^{1/m}, 1 − e^{−ε_key}),

(``b`` the noise scale, ``Λ`` the snapping grid, ``δ_t`` the sampler's error bound). A key that
only one unit holds passes with probability at most ``p``, and the ``m`` keys a unit can bring
in pass together with probability at most ``1 − (1 − p)^m ≤ δ``. Derivation: docs/privacy.md,
section K. Keys are released in sorted order (the order of observation could reveal the data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.laplace import make_mechanism
from dpframe.mechanisms.randomness import RandomSource, RandomState

__all__ = ["KeySelection", "SelectionRule", "select_keys", "selection_rule"]

#: Public bound on one key's count when none is given (fixes the snapping window).
DEFAULT_COUNT_UPPER = float(2**31)


@dataclass(frozen=True)
class SelectionRule:
    """The public parameters: noise, threshold and the pass probability they guarantee."""

    epsilon: float
    delta: float
    max_keys_per_unit: int
    max_count_per_key: float
    neighbours: str
    epsilon_per_key: float
    scale: float
    grid: float
    delta_t: float
    epsilon_overhead: float
    pass_probability: float  # p: bound on P(a key held by one unit passes)
    threshold: float  # τ
    mechanism: Any

    def pass_bound(self, true_count: float) -> float:
        """Upper bound on P(release > τ) for a key whose exact count is ``true_count``,
        snapping included: the exact draw must exceed ``τ − Λ/2 − δ_t``."""
        z = self.threshold - self.grid / 2 - self.delta_t - float(true_count)
        if z <= 0:
            return 1.0 - 0.5 * math.exp(z / self.scale)
        return 0.5 * math.exp(-z / self.scale)

    def cut(self) -> float:
        """The exact draw ``t*`` a kept key's noisy count must reach: the snapped release
        ``jΛ`` (``j = ⌊(x + noise)/Λ + ½⌋``) exceeds τ iff ``j ≥ j* = ⌊τ/Λ⌋ + 1``, i.e. iff
        ``x + noise ≥ t* = j*Λ − Λ/2`` (``t*`` in ``(τ − Λ/2, τ + Λ/2]``)."""
        if self.grid <= 0:
            return self.threshold
        return (math.floor(self.threshold / self.grid) + 1) * self.grid - self.grid / 2

    def keep_probability(self, true_count: float) -> float:
        """``P(key kept)`` for a key whose exact count is ``true_count``: the Laplace
        survival ``S((t* − x)/b)``, ``S(z) = ½e^{−z}`` for ``z ≥ 0`` and ``1 − ½e^{z}`` below.
        Exact for exact Laplace noise; the sampler's draw is within ``δ_t`` of one, which
        moves ``t*`` by at most ``δ_t`` (:meth:`smallest_kept` allows for it)."""
        z = (self.cut() - float(true_count)) / self.scale
        return 0.5 * math.exp(-z) if z >= 0 else 1.0 - 0.5 * math.exp(z)

    def smallest_kept(self, probability: float) -> int:
        """The smallest count ``n`` (a whole number of rows or units, ``n ≥ 0``) kept with
        probability at least ``probability`` (in ``[½, 1)``), sampler error included:

            n = ⌈t* + δ_t + b·ln(1 / (2(1 − q)))⌉,

        from ``S(z) ≥ q ⇔ z ≤ −ln(1/(2(1 − q)))`` for ``q ≥ ½``. Every count ≥ n is kept with
        probability ≥ q (the keep probability increases with the count); ``n − 1`` falls short
        of q, or reaches it only if the sampler's error is exactly zero (the ``δ_t`` margin,
        about 1e-10, decides when a coarse grid puts the bound on a whole number)."""
        q = float(probability)
        if not 0.5 <= q < 1.0:
            raise ParameterError(f"probability must be in [0.5, 1), got {probability!r}")
        need = self.cut() + self.delta_t + self.scale * math.log(0.5 / (1.0 - q))
        return max(math.ceil(need), 0)

    def unit_delta(self) -> float:
        """Probability bound that any of the ``m`` keys only one unit holds is released."""
        return -math.expm1(self.max_keys_per_unit * math.log1p(-self.pass_bound(
            self.max_count_per_key)))

    def describe(self) -> dict[str, Any]:
        return {
            "mechanism": "key-selection/laplace",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "max_keys_per_unit": self.max_keys_per_unit,
            "max_count_per_key": self.max_count_per_key,
            "neighbours": self.neighbours,
            "epsilon_per_key": self.epsilon_per_key,
            "scale": self.scale,
            "grid": self.grid,
            "epsilon_overhead": self.epsilon_overhead,
            "threshold": self.threshold,
            "pass_probability": self.pass_probability,
        }


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def selection_rule(
    epsilon: float,
    delta: float,
    max_keys_per_unit: int = 1,
    *,
    max_count_per_key: float = 1.0,
    neighbours: str = "add/remove",
    count_upper: float | None = None,
) -> SelectionRule:
    """Calibrate noise and threshold for ``(ε, δ)`` and the contribution bounds (public only)."""
    eps = _positive(epsilon, "epsilon")
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise ParameterError("delta must be a number in (0, 1)")
    d = float(delta)
    if not 0.0 < d < 1.0:
        raise ParameterError(
            f"key selection needs delta > 0 (got {delta!r}): without δ a key one person holds"
            " could be published; declare the keys (keys=[...]) or give the budget a delta,"
            " e.g. delta=1e-6"
        )
    if isinstance(max_keys_per_unit, bool) or not isinstance(max_keys_per_unit,
                                                              (int, np.integer)):
        raise ParameterError("max_keys_per_unit must be an int ≥ 1")
    m = int(max_keys_per_unit)
    if m < 1:
        raise ParameterError(f"max_keys_per_unit must be ≥ 1, got {m}")
    c = _positive(max_count_per_key, "max_count_per_key")
    if neighbours == "add/remove":
        eps_key = eps / m
    elif neighbours == "replace":
        eps_key = eps / (2 * m)
    else:
        raise ParameterError(f"neighbours must be 'add/remove' or 'replace', got {neighbours!r}")
    upper = DEFAULT_COUNT_UPPER if count_upper is None else _positive(count_upper, "count_upper")
    mech = make_mechanism("laplace", epsilon=eps_key, sensitivity=c, lower=0.0, upper=upper)
    assert mech.plan is not None
    # p ≤ 1 − (1−δ)^{1/m}: all m new keys together pass with probability ≤ δ;
    # p ≤ 1 − e^{−ε_key}: the other direction stays pure (docs/privacy.md K.2)
    p_delta = -math.expm1(math.log1p(-d) / m)
    p_eps = -math.expm1(-eps_key)
    p = min(p_delta, p_eps)
    b = mech.scale
    p_cal = p * (1 - 1e-9)  # outward margin: float error of τ's terms is ~1e-15 relative
    tau = c + mech.grid / 2 + mech.plan.delta_t + b * math.log(1.0 / (2.0 * p_cal))
    if p_cal >= 0.5:  # only for absurd δ; τ must stay above the count of a new key
        tau = c + mech.grid / 2 + mech.plan.delta_t
    tau = math.nextafter(tau, math.inf)
    return SelectionRule(eps, d, m, c, neighbours, eps_key, b, mech.grid, mech.plan.delta_t,
                         mech.epsilon_overhead, p, tau, mech)


@dataclass(frozen=True)
class KeySelection:
    """Released keys (sorted), their snapped noisy counts and integer counts, and the log."""

    keys: list[Any]
    noisy: np.ndarray
    counts: np.ndarray
    threshold: float
    log: dict[str, Any]


def _sort_keys(keys: list[Any]) -> list[int]:
    try:
        return sorted(range(len(keys)), key=lambda i: keys[i])
    except TypeError:
        return sorted(range(len(keys)), key=lambda i: (type(keys[i]).__name__, repr(keys[i])))


def select_keys(
    counts: Mapping[Any, float] | tuple[Sequence[Any], Sequence[float]],
    epsilon: float,
    delta: float,
    max_keys_per_unit: int = 1,
    *,
    max_count_per_key: float = 1.0,
    neighbours: str = "add/remove",
    count_upper: float | None = None,
    random_state: RandomState = None,
) -> KeySelection:
    """Private key selection over the observed keys.

    ``counts``: ``{key: exact count}`` or ``(keys, counts)`` for the keys present in the data
    (a key's count is the number of units holding it, or rows after the per-unit bounds, at most
    ``max_count_per_key`` per unit). Returns the keys whose snapped noisy count exceeds the
    threshold, in sorted order, with those noisy counts (released values, usable as the group
    sizes at no further cost) and their nearest non-negative integers.
    """
    if isinstance(counts, Mapping):
        keys = list(counts.keys())
        values = np.asarray([counts[k] for k in keys], dtype=float)
    else:
        try:
            k_seq, v_seq = counts
        except (TypeError, ValueError):
            raise ParameterError("counts must be {key: count} or (keys, counts)") from None
        keys = list(k_seq)
        values = np.asarray(v_seq, dtype=float).ravel()
        if len(keys) != values.size:
            raise ParameterError("keys and counts must have the same length")
    if len(set(map(repr, keys))) != len(keys):
        raise ParameterError("keys must be distinct")
    if not np.isfinite(values).all() or (values < 0).any():
        raise ParameterError("counts must be finite and non-negative")
    rule = selection_rule(epsilon, delta, max_keys_per_unit, max_count_per_key=max_count_per_key,
                          neighbours=neighbours, count_upper=count_upper)
    if (values > rule.mechanism.domain.upper).any():
        raise ParameterError("a count exceeds count_upper; pass the public bound on counts")
    kind = RandomSource(random_state).kind
    noisy: np.ndarray = np.zeros(0)
    if values.size:
        noisy = np.asarray(rule.mechanism.sample(values, random_state=random_state),
                           dtype=float).reshape(values.shape)
    passed = np.flatnonzero(noisy > rule.threshold)
    chosen = [keys[i] for i in passed]
    order = _sort_keys(chosen)
    idx = passed[order] if passed.size else passed
    out_keys = [keys[i] for i in idx]
    out_noisy = noisy[idx]
    out_counts = np.maximum(np.floor(out_noisy + 0.5), 0).astype(np.int64)
    log = rule.describe()
    log["released_keys"] = len(out_keys)
    log["random_source"] = kind
    return KeySelection(out_keys, out_noisy, out_counts, rule.threshold, log)
