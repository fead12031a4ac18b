"""Which library a release table is in: pandas or Polars, the two base libraries results are
built in.

A release table (or a log shown as a frame) is a pandas or a Polars object whatever engine
computed it (the distributed engines hand back pandas tables: ``Backend.results_in``). Telling
the two apart chooses a table library, not an engine, and is done here alone, by the object's
module name, so that asking imports neither library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

__all__ = ["TABLE_LIBRARIES", "ReleaseTableT", "is_pandas_table", "is_polars_table",
           "table_library"]

#: A release table: a pandas or a Polars DataFrame; a function taking one returns one of the
#: same library (post-processing keeps the library the release was built in).
ReleaseTableT = TypeVar("ReleaseTableT", "pd.DataFrame", "pl.DataFrame")

#: the libraries release tables are built in
TABLE_LIBRARIES = ("pandas", "polars")


def table_library(obj: Any) -> str | None:
    """``"pandas"`` or ``"polars"`` for an object of that library, None for anything else."""
    top = type(obj).__module__.partition(".")[0]
    return top if top in TABLE_LIBRARIES else None


def is_pandas_table(obj: Any) -> bool:
    """A pandas object (a release table built in pandas)."""
    return table_library(obj) == "pandas"


def is_polars_table(obj: Any) -> bool:
    """A Polars DataFrame (a release table built in Polars; a Series or LazyFrame is not)."""
    return table_library(obj) == "polars" and hasattr(obj, "height")
