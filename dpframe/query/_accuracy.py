"""How accurate a statistic's answer is before anything is spent, from its mechanisms.

Each statistic of the registry (:mod:`dpframe.query.registry`) names one
:class:`AnswerAccuracy`; the accuracy planner (:mod:`dpframe.release._accuracy_planner`) asks
it, so the planner never branches on a statistic's name.

A half-width ``h`` at level ``α`` means: whatever the true value in the statistic's domain,
``P(|released − true| ≤ h) ≥ 1 − α``.

* :class:`OneMeasurement` — the answer is one measurement (a sum, mean or variance on a
  public size): the mechanism's own half-width (:func:`dpframe.mechanisms.accuracy.half_width`),
  exact up to the snapping radius.
* :class:`RoundedCount` — a noisy count released as an integer (per cell for bins and keys):
  ``|rint(x) − n| ≤ ⌊h + ½⌋`` whenever ``|x − n| ≤ h``
  (:func:`dpframe.mechanisms.accuracy.rounded_half_width`).
* :class:`SquareRoot` — a std, the square root of a released variance:
  ``|√a − √b| ≤ √|a − b|``, so ``√h`` of the variance's half-width.
* :class:`MeanAccuracy` — a public-size mean is one measurement; a private-size mean divides
  a noisy centred sum by a noisy count, and its half-width holds for every group of at least
  ``min_rows`` rows (:func:`dpframe.mechanisms.accuracy.mean_half_width`), a public
  assumption the caller states.
* :class:`RankAccuracy` — a quantile: data-dependent in values; in ranks each level is within
  ``r = ln(B/α)/λ`` of its target with probability ``≥ 1 − α`` (``docs/privacy.md``, Q.6).
* :data:`NO_HALF_WIDTH` — none before spending (private-size variances, proportions,
  covariances): release with ``ci=`` instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

from dpframe.mechanisms.accuracy import (
    half_width,
    mean_half_width,
    raw_target,
    rounded_half_width,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query._quantile import QuantileSelection

__all__ = [
    "NO_HALF_WIDTH",
    "AnswerAccuracy",
    "MeanAccuracy",
    "OneMeasurement",
    "RankAccuracy",
    "RoundedCount",
    "SquareRoot",
]

#: the mechanisms of one planned query, by measurement name (None: built at draw time)
Mechanisms = Mapping[str, "Mechanism | None"]


def _single(mechs: Mechanisms) -> Mechanism | None:
    """The one mechanism of a one-measurement answer built before spending, else None."""
    if len(mechs) != 1:
        return None
    return next(iter(mechs.values()))


class AnswerAccuracy:
    """A statistic's accuracy rule (module docstring). The default: no half-width before
    spending."""

    #: the answer is a noisy count rounded to an integer
    rounded: ClassVar[bool] = False
    #: False: the accuracy is in ranks, not values (no ε for a half-width in values)
    in_values: ClassVar[bool] = True
    #: an answer of one measurement whose half-width can be inverted to an ε
    invertible: ClassVar[bool] = True

    def half_width(self, kind: str, mechs: Mechanisms, alpha: float, public: bool,
                   min_rows: int | None, bounds: tuple[float, float] | None
                   ) -> tuple[float, str]:
        """``(h, note)`` at level ``1 − alpha`` of a query (plan name ``kind``) with these
        mechanisms; ``h`` NaN where it cannot be known before spending."""
        return math.nan, (f"no half-width before spending for a "
                          f"{'public' if public else 'private'}-size {kind}; release it with "
                          "ci= to get an interval")

    def raw_target(self, target: float) -> float:
        """The half-width the noisy value must reach for the released value to reach
        ``target``."""
        return target

    def released(self, h: float) -> float:
        """The released value's half-width from the noisy value's ``h``."""
        return rounded_half_width(h) if self.rounded else h


NO_HALF_WIDTH = AnswerAccuracy()


class OneMeasurement(AnswerAccuracy):
    """The answer is its one measurement: that mechanism's half-width."""

    def half_width(self, kind: str, mechs: Mechanisms, alpha: float, public: bool,
                   min_rows: int | None, bounds: tuple[float, float] | None
                   ) -> tuple[float, str]:
        mech = _single(mechs)
        if mech is None:
            return super().half_width(kind, mechs, alpha, public, min_rows, bounds)
        return half_width(mech, alpha), "exact (one measurement)"


class RoundedCount(AnswerAccuracy):
    """A noisy count rounded to an integer (``cells``: one per bin or key)."""

    rounded = True

    def __init__(self, cells: bool = False) -> None:
        self.cells = cells

    def half_width(self, kind: str, mechs: Mechanisms, alpha: float, public: bool,
                   min_rows: int | None, bounds: tuple[float, float] | None
                   ) -> tuple[float, str]:
        mech = _single(mechs)
        if mech is None:
            return super().half_width(kind, mechs, alpha, public, min_rows, bounds)
        h = half_width(mech, alpha)
        each = ", each cell" if self.cells else ""
        return rounded_half_width(h), (f"exact (one measurement{each}): the noisy count is "
                                       f"within {h:.4g}, the released integer within "
                                       f"⌊{h:.4g} + ½⌋")

    def raw_target(self, target: float) -> float:
        return raw_target("count", target)


class SquareRoot(AnswerAccuracy):
    """The square root of one released variance (a std)."""

    invertible = False

    def half_width(self, kind: str, mechs: Mechanisms, alpha: float, public: bool,
                   min_rows: int | None, bounds: tuple[float, float] | None
                   ) -> tuple[float, str]:
        mech = _single(mechs)
        if mech is None:
            return super().half_width(kind, mechs, alpha, public, min_rows, bounds)
        return math.sqrt(half_width(mech, alpha)), \
            "√ of the variance's half-width (|√a − √b| ≤ √|a − b|)"


class MeanAccuracy(OneMeasurement):
    """One measurement on a public size; a noisy sum over a noisy count on a private one."""

    def half_width(self, kind: str, mechs: Mechanisms, alpha: float, public: bool,
                   min_rows: int | None, bounds: tuple[float, float] | None
                   ) -> tuple[float, str]:
        count, total = mechs.get("count"), mechs.get("sum")
        if _single(mechs) is not None or set(mechs) != {"count", "sum"} or bounds is None:
            return super().half_width(kind, mechs, alpha, public, min_rows, bounds)
        if min_rows is None:
            return math.nan, ("a private-size mean's accuracy depends on its private size: "
                              "pass min_rows= (a public lower bound on its rows)")
        assert count is not None and total is not None  # both built before spending
        lo, hi = bounds
        h = mean_half_width(count, total, int(min_rows), alpha,
                            lower=lo, upper=hi, center=lo / 2 + hi / 2)
        return h, f"holds for every group of at least {int(min_rows)} rows"


class RankAccuracy(AnswerAccuracy):
    """A quantile's accuracy in ranks, which does not depend on the data: the mechanism picks
    a bin whose rank distance exceeds ``r`` with probability at most ``B·e^{−λr}`` (at most
    ``B`` bins each weighted ``≤ e^{−λr}`` against a bin at distance 0), so with
    ``r = ln(B/α)/λ`` each level is within ``r`` ranks of its target with probability
    ``≥ 1 − α``, plus half a bin in value. In values it depends on the data's density."""

    in_values = False

    def half_width(self, kind: str, mechs: Mechanisms, alpha: float, public: bool,
                   min_rows: int | None, bounds: tuple[float, float] | None
                   ) -> tuple[float, str]:
        release = next(iter(mechs.values()))
        assert isinstance(release, QuantileSelection)  # the quantile's own mechanism
        mech = release.mechanism
        r = max(math.log(mech.bins / alpha) / lam for lam in mech.coefficients)
        return math.nan, (f"data-dependent in values; in ranks: each level within ±{r:.3g} "
                          f"rows of its target rank (probability ≥ {1 - alpha:g}), and within "
                          f"half a bin ({release.grid / 2:.3g}) of the chosen bin")
