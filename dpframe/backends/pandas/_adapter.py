"""pandas: eager frames whose numpy blocks the user may still hold and write."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpframe import engine
from dpframe import engine as tick_keys
from dpframe.backends._base import Backend, duplicate_names
from dpframe.backends._private import private, private_column
from dpframe.backends._text import invalid_pandas_column
from dpframe.backends.pandas import _rowwise as pandas_rowwise
from dpframe.backends.pandas._memory import hand_out_pandas, own_pandas, pandas_ranges
from dpframe.backends.pandas._rowwise import polars_schema
from dpframe.engine import Bounding, bound_pandas

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
    rowwise = pandas_rowwise.TARGET
    lazy = False
    ticks_temporal_keys = True
    carries_handle = True
    bounds_units = True
    object_strings = True
    detect = staticmethod(is_pandas_frame)

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        return len(frame)

    def schema(self, frame: Any) -> dict[str, Any]:
        if not frame.columns.is_unique:
            raise duplicate_names(list(frame.columns))
        return dict(frame.dtypes.items())

    def column_dtype(self, frame: Any, column: str) -> Any:
        return private_column(frame, column, "dtype", lambda: frame[column].dtype)

    def polars_schema(self, frame: Any) -> dict[str, Any]:

        return polars_schema(frame)

    def buffer_ranges(self, frame: Any) -> list[tuple[int, int]]:
        """numpy-backed and Arrow-backed columns (:func:`_memory.pandas_ranges`)."""

        return pandas_ranges(frame)

    def snapshot(self, frame: Any) -> Any:
        """dpframe's byte copy (:func:`_memory.own_pandas`): a frame's numpy blocks can
        be views of arrays the user still holds and writes, its Arrow-backed columns arrays
        over numpy buffers (pandas' deep copy keeps the same Arrow array), its object columns
        lists or arrays the user can change in place. Every numpy array of the copy is
        read-only, its Arrow buffers too: no view taken from it (or from a frame derived from
        it) can write it."""

        return private(own_pandas(frame))

    def private_result(self, frame: Any) -> Any:
        """What releases of a derived frame read: a copy of ``frame`` (the frame handed to the
        user) -- shallow under copy-on-write (pandas 3: writing through the user's frame copies
        the block first), dpframe's byte copy before -- taken *before* ``frame`` is made safe
        to hand out (:func:`_memory.hand_out_pandas`): the user's frame then gets
        sealed copies of the numpy arrays pandas computed (``frame[c].array`` writes a block in
        place, and a read-only flag can be set back), copies of the Arrow columns pyarrow
        computed (writable through ``np.frombuffer``) and of object columns' cells, so the
        arrays the copy keeps are reachable from dpframe alone."""

        if not _pandas_copy_on_write():  # (the user's frame stays writable: pandas writes
            return private(own_pandas(frame))  # it in place)
        kept = frame.copy(deep=False)  # (before the user's frame gets its own arrays)
        hand_out_pandas(frame)
        return private(kept)

    def can_hold_missing(self, dtype: Any) -> bool:
        return not (isinstance(dtype, np.dtype) and dtype.kind in "iub")

    def user_frame(self, frame: Any) -> Any:
        """A new pandas object over the user's columns (a shallow copy), which protect hands
        out with dpframe's handle in its ``attrs``: the user's own object is left as it was."""
        return frame.copy(deep=False)

    def numpy_column(self, frame: Any, column: str) -> Any:
        return private_column(frame, column, "view", lambda: engine.pandas_view(frame, column))

    def key_codes(self, frame: Any, column: str, keys: Sequence[Any]) -> np.ndarray | None:
        return engine.pandas_codes(frame, column, keys)

    def bound_contributions(self, frame: Any, bounding: Bounding, *, columns: Sequence[str],
                            group_by: str | tuple[str, ...] | None = None,
                            keys: Sequence[Any] | None = None) -> tuple[Any, Backend]:
        return bound_pandas(frame, bounding, columns=columns, group_by=group_by,
                            keys=keys), self

    def with_ticks(self, frame: Any, columns: Sequence[str], keep: Any = None) -> Any:
        return tick_keys.with_ticks(frame, columns, keep)

    def tick_kind(self, frame: Any, column: str) -> Any:
        return tick_keys.column_kind(frame, column)

    def invalid_text(self, frame: Any) -> bool:
        """Python strings that do not encode (object columns: lone surrogates), Arrow strings
        that are not UTF-8."""
        return any(invalid_pandas_column(frame[name]) for name in frame.columns)

    def count_units(self, frame: Any, column: str) -> int:
        """The number of distinct non-missing ids of ``column`` (read once, at protect)."""
        return int(frame[column].nunique(dropna=True))


def _pandas_copy_on_write() -> bool:
    """pandas' copy-on-write is on (always from pandas 3; an option before)."""
    import pandas as pd

    if int(pd.__version__.split(".", 1)[0]) >= 3:
        return True
    return bool(getattr(pd.options.mode, "copy_on_write", False) is True)


