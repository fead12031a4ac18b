"""pandas: eager frames whose numpy blocks the user may still hold and write."""

from __future__ import annotations

import sys
from typing import Any

from dpframe.backends._base import Backend, duplicate_names

__all__ = ["PandasBackend", "is_pandas_frame"]


def is_pandas_frame(obj: Any) -> bool:
    """True for a ``pandas.DataFrame`` (without importing pandas)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


class PandasBackend(Backend):
    """pandas ``DataFrame``s: ``attrs`` travel through operations (a handle to the ledger
    can ride along); numpy integer and boolean columns cannot hold a missing value."""

    name = "pandas"
    family = "pandas"
    lazy = False
    detect = staticmethod(is_pandas_frame)

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        return len(frame)

    def schema(self, frame: Any) -> dict[str, Any]:
        if not frame.columns.is_unique:
            raise duplicate_names(list(frame.columns))
        return dict(frame.dtypes.items())

    def column_dtype(self, frame: Any, column: str) -> Any:
        return frame[column].dtype

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        from dpframe.rowwise.pandas_eval import polars_schema

        return polars_schema(frame)

    def snapshot(self, frame: Any) -> Any:
        """A deep copy: a frame's numpy blocks can be views of arrays the user still holds
        and writes."""
        return frame.copy(deep=True)

    def private_result(self, frame: Any) -> Any:
        """A copy — shallow under copy-on-write (pandas 3: writing through the user's frame
        copies the block first, and its numpy views are read-only), deep before."""
        return frame.copy(deep=not _pandas_copy_on_write())

    def can_hold_missing(self, dtype: Any) -> bool:
        import numpy as np

        return not (isinstance(dtype, np.dtype) and dtype.kind in "iub")


def _pandas_copy_on_write() -> bool:
    """pandas' copy-on-write is on (always from pandas 3; an option before)."""
    import pandas as pd

    if int(pd.__version__.split(".", 1)[0]) >= 3:
        return True
    return bool(getattr(pd.options.mode, "copy_on_write", False) is True)


