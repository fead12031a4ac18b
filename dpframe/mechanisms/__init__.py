"""Laplace-family mechanisms on feasible output sets, snapped against floating-point attacks.

See :mod:`dpframe.mechanisms.laplace` for the three mechanisms and ``docs/privacy.md`` for the
derivations (scales, snapping overhead, moments).
"""

from __future__ import annotations

from dpframe.mechanisms.certificate import LossCertificate, worst_case_loss
from dpframe.mechanisms.domains import FeasibleSet, half_line, interval, real_line, union
from dpframe.mechanisms.laplace import (
    MECHANISM_NAMES,
    BoundedLaplace,
    Laplace,
    TruncatedLaplace,
    make_mechanism,
)
from dpframe.mechanisms.randomness import RandomSource
from dpframe.mechanisms.scales import half_line_scale, holohan_scale

__all__ = [
    "MECHANISM_NAMES",
    "BoundedLaplace",
    "FeasibleSet",
    "Laplace",
    "LossCertificate",
    "RandomSource",
    "TruncatedLaplace",
    "half_line",
    "half_line_scale",
    "holohan_scale",
    "interval",
    "make_mechanism",
    "real_line",
    "union",
    "worst_case_loss",
]
