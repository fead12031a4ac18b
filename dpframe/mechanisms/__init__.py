"""Laplace-family mechanisms on feasible output sets (PLACEHOLDER: being replaced).

Public API (stable contract):

    BoundedLaplace(epsilon, sensitivity, lower=None, upper=None, delta=0.0, domain=None)
    TruncatedLaplace(epsilon, sensitivity, lower=None, upper=None, domain=None)
    Laplace(epsilon, sensitivity, lower=None, upper=None, domain=None)
    make_mechanism(name, *, epsilon, sensitivity, lower, upper, delta=0.0) -> mechanism
        name in {"bounded", "truncated", "laplace"}

Every mechanism has: .name, .scale, .epsilon, .delta, .epsilon_overhead, .grid (snapping grid
spacing), .domain, .sample(value, size=None, random_state=None), .bias(value), .mse(value),
.privacy_loss(), and .random_source(random_state) -> "secure" | "seeded".
"""

from __future__ import annotations

import math

import numpy as np

from dpframe.errors import ParameterError

MECHANISM_NAMES = ("bounded", "truncated", "laplace")


class _Placeholder:
    name = "placeholder"
    uses_delta = False

    def __init__(self, epsilon, sensitivity, lower=None, upper=None, delta=0.0, domain=None):
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        if delta and not self.uses_delta:
            raise ParameterError(f"{self.name} Laplace does not use delta; pass delta=0")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.sensitivity = float(sensitivity)
        self.lower, self.upper = lower, upper
        self.scale = self.sensitivity / self.epsilon
        self.epsilon_overhead = 0.0
        self.grid = 0.0

    @staticmethod
    def random_source(random_state=None):
        return "secure" if random_state is None else "seeded"

    def sample(self, value, size=None, random_state=None):
        rng = np.random.default_rng(random_state)
        out = np.asarray(value, dtype=float) + rng.laplace(0.0, self.scale, size=size)
        if self.lower is not None:
            out = np.clip(out, self.lower, self.upper)
        return float(out) if np.ndim(out) == 0 else out


class BoundedLaplace(_Placeholder):
    name = "bounded"
    uses_delta = True


class TruncatedLaplace(_Placeholder):
    name = "truncated"


class Laplace(_Placeholder):
    name = "laplace"


def make_mechanism(name, *, epsilon, sensitivity, lower, upper, delta=0.0):
    classes = {"bounded": BoundedLaplace, "truncated": TruncatedLaplace, "laplace": Laplace}
    if name not in classes:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of {MECHANISM_NAMES}")
    return classes[name](epsilon, sensitivity, lower=lower, upper=upper, delta=delta)
