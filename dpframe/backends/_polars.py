"""Polars: eager DataFrames (numpy-backed columns the user may write) and LazyFrames
(plans dpframe reads and verifies)."""

from __future__ import annotations

import sys
from typing import Any

from dpframe.backends._base import Backend

__all__ = ["PolarsBackend", "PolarsLazyBackend", "is_polars_eager", "is_polars_lazy"]


def is_polars_eager(obj: Any) -> bool:
    """True for a ``polars.DataFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.DataFrame)


def is_polars_lazy(obj: Any) -> bool:
    """True for a ``polars.LazyFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.LazyFrame)


class PolarsBackend(Backend):
    """Polars ``DataFrame``s."""

    name = "polars"
    family = "polars"
    lazy = False
    detect = staticmethod(is_polars_eager)

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        return int(frame.height)

    def schema(self, frame: Any) -> dict[str, Any]:
        return dict(frame.schema.items())

    def column_dtype(self, frame: Any, column: str) -> Any:
        return frame.get_column(column).dtype

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        return self.schema(frame)

    def snapshot(self, frame: Any) -> Any:
        """Its number columns copied (Polars takes numpy arrays without copying them, and
        the user can write those arrays), the rest shared (Arrow memory is immutable)."""
        return _own_numbers(frame)

    def private_result(self, frame: Any) -> Any:
        """Another handle only: its buffers are dpframe's and Polars never writes a buffer
        in place."""
        return frame.clone()


class PolarsLazyBackend(Backend):
    """Polars ``LazyFrame``s: immutable plans whose derivations dpframe reads and verifies."""

    name = "polars-lazy"
    family = "polars"
    lazy = True
    readable_plans = True
    detect = staticmethod(is_polars_lazy)

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        """``fresh``: a Polars plan answers a bare ``select(len())`` from the row count it
        cached when it first counted, so the re-count goes through a (no-op) filter that makes
        Polars read the source again."""
        import polars as pl

        if fresh:
            return int(frame.filter(pl.lit(True)).select(pl.len()).collect().item())
        return int(frame.select(pl.len()).collect().item())

    def schema(self, frame: Any) -> dict[str, Any]:
        return dict(frame.collect_schema().items())

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        return self.schema(frame)


def _own_numbers(frame: Any) -> Any:
    """A Polars frame whose number, boolean and date columns are in memory of its own (their
    Arrow buffers copied byte for byte), other columns shared."""
    import polars as pl
    import pyarrow as pa

    columns = []
    for series in frame.iter_columns():
        dtype = series.dtype
        if dtype in (pl.Int128, pl.UInt128):  # (numpy holds no 128-bit integers)
            columns.append(series)
        elif (dtype.is_numeric() and not isinstance(dtype, pl.Decimal)) \
                or dtype.is_temporal() or dtype == pl.Boolean:
            arrow = series.rechunk().to_arrow()
            buffers = [None if b is None else pa.py_buffer(b.to_pybytes())
                       for b in arrow.buffers()]
            copy = pa.Array.from_buffers(arrow.type, len(arrow), buffers, arrow.null_count,
                                         arrow.offset)
            columns.append(pl.Series(series.name, copy, dtype=dtype))
        else:
            columns.append(series)
    return pl.DataFrame(columns)


