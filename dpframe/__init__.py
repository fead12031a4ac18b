"""dpframe: differentially private statistics straight from pandas and Polars frames."""

from __future__ import annotations

__version__ = "0.1.0"

from dpframe import errors as errors
from dpframe.accounting import Budget
from dpframe.errors import (
    BoundsError,
    BudgetExceededError,
    DPFrameError,
    LedgerError,
    NoLedgerError,
    ParameterError,
    PrivateSizeError,
    UnsupportedInputError,
)
from dpframe.frames import Session, protect
from dpframe.io import read_log
from dpframe.queries import count, mean, std, sum, variance

__all__ = [
    "BoundsError",
    "Budget",
    "BudgetExceededError",
    "DPFrameError",
    "LedgerError",
    "NoLedgerError",
    "ParameterError",
    "PrivateSizeError",
    "Session",
    "UnsupportedInputError",
    "__version__",
    "count",
    "mean",
    "protect",
    "read_log",
    "std",
    "sum",
    "variance",
]
