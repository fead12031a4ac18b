"""The one place that tells dataframe libraries apart.

Every other module asks this one: :func:`backend_of` names the :class:`Backend` of a native
frame, and the backend's methods answer the few questions that differ between libraries
(row count, schema, building a result table, whether a dtype can hold a missing value).
Detection never imports a library: a frame of library X can only exist if X is already in
``sys.modules``, so we look there (the approach narwhals takes).

Adding an engine is one :class:`Backend` entry in :data:`BACKENDS` plus, where it needs one,
its aggregation path in :mod:`dpframe.engine`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpframe.errors import UnsupportedInputError

__all__ = [
    "BACKENDS",
    "PANDAS",
    "POLARS",
    "POLARS_LAZY",
    "Backend",
    "backend_of",
    "is_pandas_frame",
    "is_polars_eager",
    "is_polars_lazy",
]


def is_pandas_frame(obj: Any) -> bool:
    """True for a ``pandas.DataFrame`` (without importing pandas)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def is_polars_eager(obj: Any) -> bool:
    """True for a ``polars.DataFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.DataFrame)


def is_polars_lazy(obj: Any) -> bool:
    """True for a ``polars.LazyFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.LazyFrame)


@dataclass(frozen=True)
class Backend:
    """What dpframe needs to know about one kind of frame.

    ``name``: as logged; ``family``: the library (results are built in it); ``lazy``: the frame
    is a plan, not data (its structure is verified from the plan; its size is counted once at
    protect time); ``keeps_metadata``: the library carries ``attrs`` through operations
    (pandas), so a protected frame can carry a handle to its ledger.
    """

    name: str
    family: str
    lazy: bool
    keeps_metadata: bool

    def count_rows(self, frame: Any) -> int:
        """The number of rows (for a lazy frame this runs the plan's count once)."""
        if self.family == "pandas":
            return len(frame)
        if not self.lazy:
            return int(frame.height)
        import polars as pl

        return int(frame.select(pl.len()).collect().item())

    def schema(self, frame: Any) -> dict[str, Any]:
        """Column name → native dtype, from the schema only (no data is read)."""
        if self.family == "pandas":
            return dict(frame.dtypes.items())
        if self.lazy:
            return dict(frame.collect_schema().items())
        return dict(frame.schema.items())

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        """The frame's schema as Polars dtypes (for verifying expressions on an empty frame)."""
        if self.family == "polars":
            return self.schema(frame)
        import narwhals as nw

        return dict(nw.from_native(frame.iloc[:0], eager_only=True).schema.to_polars().items())

    def can_hold_missing(self, dtype: Any) -> bool:
        """Whether a column of this dtype can hold a missing value (null or NaN). A schema
        fact: numpy integer and boolean columns in pandas cannot; every Polars column can."""
        if self.family == "pandas":
            import numpy as np

            return not (isinstance(dtype, np.dtype) and dtype.kind in "iub")
        return True

    def table(self, data: Mapping[str, Sequence[Any]], index: Sequence[Any] | None = None) -> Any:
        """A small result table of this library (eager, even for lazy inputs)."""
        if self.family == "pandas":
            import pandas as pd

            return pd.DataFrame(dict(data), index=None if index is None else list(index))
        import polars as pl

        return pl.DataFrame(dict(data), strict=False)


PANDAS = Backend("pandas", "pandas", lazy=False, keeps_metadata=True)
POLARS = Backend("polars", "polars", lazy=False, keeps_metadata=False)
POLARS_LAZY = Backend("polars-lazy", "polars", lazy=True, keeps_metadata=False)

#: (type guard, backend), in the order they are tried.
BACKENDS = (
    (is_pandas_frame, PANDAS),
    (is_polars_eager, POLARS),
    (is_polars_lazy, POLARS_LAZY),
)


def backend_of(frame: Any) -> Backend:
    """The :class:`Backend` of a native frame; :class:`UnsupportedInputError` otherwise."""
    for guard, backend in BACKENDS:
        if guard(frame):
            return backend
    raise UnsupportedInputError(
        "dpframe protects pandas DataFrames and Polars DataFrames/LazyFrames, got "
        f"{type(frame).__module__}.{type(frame).__name__}"
    )
