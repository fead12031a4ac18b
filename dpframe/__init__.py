"""dpframe: differentially private statistics straight from pandas and Polars frames."""

from __future__ import annotations

__version__ = "0.1.0"

from dpframe import errors as errors
from dpframe import frames as _frames  # noqa: F401 - registers the .dp namespaces
from dpframe.accounting import (
    concat_releases,
    read_log,
    read_release,
    rename_release,
    round_release,
    sort_release,
    write_parquet,
)
from dpframe.accounting.ledger import Budget
from dpframe.accounting.seals import sign_release
from dpframe.errors import (
    BoundsError,
    BudgetExceededError,
    DerivationError,
    DPFrameError,
    EngineTimeoutError,
    IntegrityError,
    LedgerError,
    NoLedgerError,
    ParameterError,
    PrivateSizeError,
    PrivateSizeWarning,
    ReleaseFailedError,
    ReleaseFileError,
    ReleaseWriteError,
    SelectionWarning,
    SourceChangedError,
    SpecError,
    UnsupportedInputError,
    UnsupportedProcessError,
)
from dpframe.frames.namespace import dp
from dpframe.frames.results import Estimate, QuantileEstimate
from dpframe.frames.show import show
from dpframe.provenance import Session, count_units, protect
from dpframe.query.statistics import (
    corr,
    count,
    cov,
    histogram,
    mean,
    median,
    proportions,
    quantile,
    std,
    sum,
    value_counts,
    variance,
)

__all__ = [
    "BoundsError",
    "Budget",
    "BudgetExceededError",
    "DPFrameError",
    "DerivationError",
    "EngineTimeoutError",
    "Estimate",
    "IntegrityError",
    "LedgerError",
    "NoLedgerError",
    "ParameterError",
    "PrivateSizeError",
    "PrivateSizeWarning",
    "QuantileEstimate",
    "ReleaseFailedError",
    "ReleaseFileError",
    "ReleaseWriteError",
    "SelectionWarning",
    "Session",
    "SourceChangedError",
    "SpecError",
    "UnsupportedInputError",
    "UnsupportedProcessError",
    "__version__",
    "concat_releases",
    "corr",
    "count",
    "count_units",
    "cov",
    "dp",
    "histogram",
    "mean",
    "median",
    "proportions",
    "protect",
    "quantile",
    "read_log",
    "read_release",
    "rename_release",
    "round_release",
    "show",
    "sign_release",
    "sort_release",
    "std",
    "sum",
    "value_counts",
    "variance",
    "write_parquet",
]
