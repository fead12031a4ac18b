"""dpframe: differentially private statistics straight from pandas and Polars frames."""

from __future__ import annotations

__version__ = "0.1.0"

from dpframe import errors as errors
from dpframe.errors import (
    BoundsError,
    BudgetExceededError,
    DPFrameError,
    NoLedgerError,
    ParameterError,
)

__all__ = [
    "BoundsError",
    "BudgetExceededError",
    "DPFrameError",
    "NoLedgerError",
    "ParameterError",
    "__version__",
]
