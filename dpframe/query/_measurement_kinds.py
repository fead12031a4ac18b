"""How one measurement is released: its *kind*. The release pipeline treats every measurement
alike — it asks the kind for the measurement's mechanism before anything is spent
(:meth:`MeasurementKind.build`) and, after the one read, for the released value
(:meth:`MeasurementKind.draw`) — and the kind decides what that means:

* :class:`AddedNoise` — a member of the Laplace family (bounded: Holohan et al.; truncated:
  clamped; plain), calibrated to the measurement's sensitivity Δ on its feasible set
  ``[lower, upper]``; the exact statistic is clamped into that set first (it lies there by
  construction — clamped data, verified derivations — so this only keeps the mechanism's own
  input check from ever raising after the read);
* :class:`Selection` — a noisy *choice* over the exact statistic rather than noise added to
  it (quantiles: the exponential mechanism over bin counts); the measurement builds its own
  mechanism (``Measurement.make``);
* :class:`AdaptiveDomain` — a measurement whose feasible set is a function of measurements
  released before it in the same plan (Liu's covariance on ``±√(S*_jj S*_kk)``): its mechanism
  is built only at draw time from those noisy values (post-processing, no extra ε), and a
  domain that collapses to one point is released as that point, without noise.

The query that plans a measurement names its kind (``Measurement(..., kind=SELECTION)``;
added noise is the default); :meth:`MeasurementKind.check` refuses a measurement whose fields
do not fit its kind when it is built. Every mechanism is typed by the one protocol
:class:`dpframe.mechanisms.protocol.Mechanism`, so a reader (and mypy) can follow a release
from the query to the draw. A new kind of mechanism is a new subclass here, not a branch in the
pipeline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dpframe.mechanisms.protocol import Mechanism
from dpframe.mechanisms.randomness import RandomState
from dpframe.mechanisms.snapping import CLIP

__all__ = [
    "ADAPTIVE_DOMAIN",
    "ADDED_NOISE",
    "SELECTION",
    "AdaptiveDomain",
    "AddedNoise",
    "Drawn",
    "LaplaceFactory",
    "MeasurementKind",
    "Selection",
    "clamp_twice",
]

#: The request's Laplace-family member at this measurement's ε and δ:
#: ``(lower, upper, sensitivity)`` → mechanism; ``None`` means the measurement's own value.
LaplaceFactory = Callable[["float | None", "float | None", "float | None"], Mechanism]


class Measurement(Protocol):
    """What a kind reads of a measurement (:class:`dpframe.query.statistics.Measurement`)."""

    @property
    def magnitude(self) -> float | None: ...
    @property
    def make(self) -> Callable[[float, float], Mechanism] | None: ...
    @property
    def domain_after(self) -> Callable[[Mapping[str, np.ndarray]], tuple[float, float]] | None:
        ...
    @property
    def sensitivity_after(self) -> Callable[[float, float], float] | None: ...


@dataclass(frozen=True)
class Drawn:
    """A released measurement: its values (one per group), the mechanism that produced them
    (``None``: released without noise) and, for a single-point domain, that point."""

    value: np.ndarray
    mechanism: Mechanism | None
    point: tuple[float, float] | None = None


class MeasurementKind(ABC):
    """One way of releasing a measurement (module docstring)."""

    @abstractmethod
    def check(self, m: Measurement) -> None:
        """Refuse (``TypeError``) a measurement whose fields do not fit this kind: raised
        while the query plans, from the plan's own structure, before anything is read."""

    @abstractmethod
    def build(self, m: Measurement, epsilon: float, delta: float,
              laplace: LaplaceFactory) -> Mechanism | None:
        """The mechanism, from public facts only (before anything is read or spent), or
        ``None`` when it can only be built at draw time."""

    @abstractmethod
    def draw(self, m: Measurement, mechanism: Mechanism | None, exact: np.ndarray,
             noisy: Mapping[str, np.ndarray], laplace: LaplaceFactory,
             rng: RandomState) -> Drawn:
        """The released value of ``m`` from its exact statistic (after the read: total)."""


def _refuse(kind: str, why: str) -> TypeError:
    return TypeError(f"a measurement of kind {kind} {why}")


class AddedNoise(MeasurementKind):
    """Laplace-family noise added to the clamped exact statistic."""

    def check(self, m: Measurement) -> None:
        if m.make is not None or m.domain_after is not None or m.sensitivity_after is not None:
            raise _refuse("added noise", "takes neither make nor domain_after/"
                          "sensitivity_after (name kind=SELECTION or ADAPTIVE_DOMAIN)")

    def build(self, m: Measurement, epsilon: float, delta: float,
              laplace: LaplaceFactory) -> Mechanism:
        return laplace(None, None, None)

    def draw(self, m: Measurement, mechanism: Mechanism | None, exact: np.ndarray,
             noisy: Mapping[str, np.ndarray], laplace: LaplaceFactory,
             rng: RandomState) -> Drawn:
        assert mechanism is not None  # built before the read (build)
        lower, upper = mechanism.domain.lower, mechanism.domain.upper
        if exact.size == 1:  # one value (a scalar query): the same clamps, without arrays
            value = min(max(float(exact.item()), lower), upper)
            if m.magnitude is not None:
                value = min(max(value, -m.magnitude), m.magnitude)
            out = mechanism.sample(value, random_state=rng)
            if exact.ndim <= 1:  # (shape (1,): the array np.full would make, made directly)
                return Drawn(np.array([out], dtype=float), mechanism)
            return Drawn(np.full(exact.shape, out), mechanism)
        out = mechanism.sample(clamp_twice(exact, lower, upper, m.magnitude),
                               random_state=rng)
        return Drawn(np.atleast_1d(np.asarray(out, dtype=float)), mechanism)


def clamp_twice(exact: np.ndarray, lower: float, upper: float, magnitude: float | None
                ) -> np.ndarray:
    """``exact`` clamped into ``[lower, upper]``, then into ``[-magnitude, magnitude]`` (when
    given), as a new array, with numpy's clip ufunc (:data:`CLIP`, ``np.clip`` without its
    wrappers). Where the two intervals meet, one clamp into their intersection: the same
    doubles (a value inside both is kept, one beyond an end of the intersection becomes that
    end whichever clamp sets it, a NaN stays NaN, a signed zero tying with a bound keeps its
    sign in either form; ``tests/query/test_clamp_twice.py``)."""
    if magnitude is None:
        return CLIP(exact, lower, upper)
    low, high = max(lower, -magnitude), min(upper, magnitude)
    if low <= high:
        return CLIP(exact, low, high)
    return CLIP(CLIP(exact, lower, upper), -magnitude, magnitude)


class Selection(MeasurementKind):
    """A noisy choice over the exact statistic with the measurement's own mechanism."""

    def check(self, m: Measurement) -> None:
        if m.make is None or m.domain_after is not None:
            raise _refuse("selection", "needs make (its own mechanism) and no domain_after")

    def build(self, m: Measurement, epsilon: float, delta: float,
              laplace: LaplaceFactory) -> Mechanism:
        assert m.make is not None  # check
        return m.make(epsilon, delta)

    def draw(self, m: Measurement, mechanism: Mechanism | None, exact: np.ndarray,
             noisy: Mapping[str, np.ndarray], laplace: LaplaceFactory,
             rng: RandomState) -> Drawn:
        assert mechanism is not None  # built before the read (build)
        return Drawn(np.asarray(mechanism.sample(exact, random_state=rng)), mechanism)


class AdaptiveDomain(MeasurementKind):
    """Added noise on a feasible set read from earlier noisy measurements of the plan."""

    def check(self, m: Measurement) -> None:
        if m.domain_after is None or m.sensitivity_after is None or m.make is not None:
            raise _refuse("adaptive domain", "needs domain_after and sensitivity_after, and "
                          "no make")

    def build(self, m: Measurement, epsilon: float, delta: float,
              laplace: LaplaceFactory) -> None:
        return None

    def draw(self, m: Measurement, mechanism: Mechanism | None, exact: np.ndarray,
             noisy: Mapping[str, np.ndarray], laplace: LaplaceFactory,
             rng: RandomState) -> Drawn:
        assert m.domain_after is not None and m.sensitivity_after is not None  # check
        lower, upper = m.domain_after(noisy)
        if not upper > lower:  # a single point: released without noise
            return Drawn(np.full(exact.shape, lower), None, (lower, upper))
        built = laplace(lower, upper, m.sensitivity_after(lower, upper))
        return ADDED_NOISE.draw(m, built, np.clip(exact, lower, upper), noisy, laplace, rng)


ADDED_NOISE = AddedNoise()
SELECTION = Selection()
ADAPTIVE_DOMAIN = AdaptiveDomain()
