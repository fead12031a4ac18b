"""Laplace-family mechanisms on feasible output sets, snapped against floating-point attacks.

See :mod:`dpframe.mechanisms.laplace` for the three mechanisms and ``docs/privacy.md`` for the
derivations (scales, snapping overhead, moments).
"""

from __future__ import annotations

from dpframe.mechanisms.accuracy import (
    AccuracyTarget,
    EpsilonSplit,
    MechanismChoice,
    choose_mechanism,
    epsilon_for_half_width,
    half_width,
    mean_half_width,
    split_epsilon,
    worst_case_mse,
)
from dpframe.mechanisms.certificate import LossCertificate, worst_case_loss
from dpframe.mechanisms.domains import FeasibleSet, half_line, interval, real_line, union
from dpframe.mechanisms.histograms import (
    HistogramRelease,
    apportion,
    noisy_histogram,
    nonnegative_integers,
)
from dpframe.mechanisms.intervals import (
    component_level,
    composed_interval,
    confidence_interval,
    interval_from_components,
)
from dpframe.mechanisms.laplace import (
    MECHANISM_NAMES,
    BoundedLaplace,
    Laplace,
    TruncatedLaplace,
    make_mechanism,
)
from dpframe.mechanisms.quantiles import (
    QuantileMechanism,
    QuantileRelease,
    bin_counts,
    bin_edges,
    bin_index,
    choose_bins,
    release_quantiles,
)
from dpframe.mechanisms.randomness import RandomSource
from dpframe.mechanisms.scales import half_line_scale, holohan_scale
from dpframe.mechanisms.selection import KeySelection, SelectionRule, select_keys, selection_rule

__all__ = [
    "MECHANISM_NAMES",
    "AccuracyTarget",
    "BoundedLaplace",
    "EpsilonSplit",
    "FeasibleSet",
    "HistogramRelease",
    "KeySelection",
    "Laplace",
    "LossCertificate",
    "MechanismChoice",
    "QuantileMechanism",
    "QuantileRelease",
    "RandomSource",
    "SelectionRule",
    "TruncatedLaplace",
    "apportion",
    "bin_counts",
    "bin_edges",
    "bin_index",
    "choose_bins",
    "choose_mechanism",
    "component_level",
    "composed_interval",
    "confidence_interval",
    "epsilon_for_half_width",
    "half_line",
    "half_line_scale",
    "half_width",
    "holohan_scale",
    "interval",
    "interval_from_components",
    "make_mechanism",
    "mean_half_width",
    "noisy_histogram",
    "nonnegative_integers",
    "real_line",
    "release_quantiles",
    "select_keys",
    "selection_rule",
    "split_epsilon",
    "union",
    "worst_case_loss",
    "worst_case_mse",
]
