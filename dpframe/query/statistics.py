r"""Query specifications: sensitivity, output domain and formulation of each statistic.

A query (:class:`Count`, :class:`Sum`, :class:`Mean`, :class:`Variance`, :class:`Std`) turns
the public facts about a frame (its declared bounds, whether its size is public, a public row
cap) into a :class:`Plan`: a list of :class:`Measurement`\ s, each one noisy number per group
with its own sensitivity, output domain (the mechanism's feasible set) and share of ε, plus a
post-processing step that turns the noisy measurements into the answer. Nothing here reads
data; :mod:`dpframe.engine._aggregation` computes the exact aggregates the measurements need.

Notation: bounds ``[l, u]`` of the column, width ``w = u − l``; ``n`` the public row count of
the protected frame. Values outside ``[l, u]`` are clamped first (a per-row map, so neighbours
stay neighbours). Every value is then represented in fixed point, ``x = c + k·q`` with an
integer ``k ∈ [k_lo, k_hi]``, a public centre ``c`` and a power-of-two quantum ``q``
(:class:`dpframe.query._aggregates.FixedPoint`); ``k_lo, k_hi`` are chosen so that ``c + k·q`` stays
in ``[l, u]``, so the fixed-point data is itself a data set in ``[l, u]`` and every bound below
holds for it exactly.

Neighbours (docs/audit.md). The privacy unit is one row of the protected frame and neighbouring
data sets differ by *replacing* one row. On the protected frame itself ``n`` is public.

* **Public size** (the frame returned by :func:`dpframe.protect`): replacement neighbours of
  size ``n``.
* **Private size** (any frame derived from it: filter, dropna, head, sample, join, concat,
  even ``copy()``): replacing one row of the protected frame changes a row-wise derived frame
  by *adding*, *removing* or *replacing* one row (a row can pass the filter before and fail it
  after, or the reverse, or pass both times with a new value). Every private-size sensitivity
  below is therefore the maximum over all three changes. (Operations that copy one protected
  row into several derived rows — a self-concat, a one-to-many join — multiply a row's
  influence and are outside this model; see ``docs/frames.md``.)
* **Group-by with public keys**: a replaced row may leave one group and join another, so one
  replacement can change two groups, each by an add/remove. Each group's release therefore
  gets ε/2 (and δ/2); the whole group-by costs ε once (parallel composition over disjoint
  groups, McSherry 2009, applied to the two groups a replacement touches). Group sizes are
  never public, so group-by queries always use the private-size formulations.

Sensitivities and domains (each checked by brute force in ``tests/query/test_statistics.py``):

============ ===================================== ====================================
query        public size ``n``                     private size (and per group)
============ ===================================== ====================================
count        Δ = 1 on [0, n]                        Δ = 1 on [0, ∞) ([0, n] when rows of
                                                    the protected frame are counted, e.g.
                                                    its groups or with nulls="drop")
sum          Σ(x − l): Δ = w on [0, n·w], then +n·l Σx: Δ = max(w, |l|, |u|) on
                                                    [min(l,0)·∞, max(u,0)·∞]
mean         Σ(x − l)/n: Δ = w/n on [0, w], then +l noisy count (ε/2) and noisy
                                                    Σ(x − c), c = (l+u)/2 (ε/2, Δ = w),
                                                    mean = c + S/max(N,1) in [l, u]
variance     Δ = w²/n on [0, w²/4 · n/(n−1)]        noisy N, S = Σ(x−c), SS = Σ(x−c)²
(ddof=1)                                            (ε/3 each; Δ = 1, w, w²/4),
                                                    var = (SS − S²/N)/(N − 1) in
                                                    [0, w²/4 · N/(N−1)], N ≥ 2
std          sqrt of the released variance          sqrt of the released variance
============ ===================================== ====================================

Derivations are in each class's docstring; each statistic is one module of
:mod:`dpframe.query` (``_count``, ``_sum``, ``_mean``, ``_variance``, ``_proportions``,
``_histogram``, ``_value_counts``, ``_quantile``, ``_covariance``) with its entry in
:mod:`dpframe.query.registry`, and this module gathers their public names. Where the exact
aggregate is divided (mean, variance) the correctly rounded float differs from the exact
rational by at most half an ulp, ``2⁻⁵³·M`` for a statistic bounded by ``M``; two neighbours
can therefore differ by ``Δ + 2⁻⁵²·M`` in floating point, and that proven bound is what the
declared sensitivity is (Casacuberta et al. 2022, §4: account for the arithmetic error;
:mod:`dpframe.query._exact`). Sums are exact, no slack.
"""

from __future__ import annotations

from dpframe.query._count import Count, count
from dpframe.query._covariance import (
    Covariance,
    CovarianceEntries,
    _covariance_statistic,
    corr,
    cov,
)
from dpframe.query._exact import FP_SLACK, round_down, round_up
from dpframe.query._histogram import Histogram, histogram
from dpframe.query._mean import Mean, mean
from dpframe.query._plans import Measurement, Plan, PlanContext, Query, single_interval
from dpframe.query._proportions import Proportions
from dpframe.query._quantile import Quantile, median, quantile
from dpframe.query._sum import Sum, sum
from dpframe.query._value_counts import KeyProportions, ValueCounts, proportions, value_counts
from dpframe.query._variance import Std, Variance, std, variance
from dpframe.query.registry import STATISTICS

__all__ = [
    "FP_SLACK",
    "SCALAR_STATISTICS",
    "Count",
    "Covariance",
    "CovarianceEntries",
    "Histogram",
    "KeyProportions",
    "Mean",
    "Measurement",
    "Plan",
    "PlanContext",
    "Proportions",
    "Quantile",
    "Query",
    "Std",
    "Sum",
    "ValueCounts",
    "Variance",
    "_covariance_statistic",
    "corr",
    "count",
    "cov",
    "histogram",
    "mean",
    "median",
    "proportions",
    "quantile",
    "round_down",
    "round_up",
    "single_interval",
    "std",
    "sum",
    "value_counts",
    "variance",
]

#: The statistics of one column (or of the rows: ``count``) released as noisy numbers by the
#: Laplace family, by name: the registry's entries a spec builds as ``cls(column)``
#: (:mod:`dpframe.query.registry`); ``cls.needs_column`` says whether one takes a column.
SCALAR_STATISTICS: dict[str, type[Query]] = {
    e.name: e.query_type for e in STATISTICS.values()
    if e.in_spec and e.query_type is not None}
