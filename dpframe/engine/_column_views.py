"""Numeric columns as the numpy kernels read them: zero-copy views of plain arrays, float64
blocks (:class:`_FloatBlocks`; a pandas nullable integer column also as its stored integers
and missing-value mask, :class:`_NullableIntBlocks`), or values buffer and validity bitmap in
place (:class:`_MaskedBlocks`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["pandas_view", "polars_view"]


class _FloatBlocks:
    """A numeric column the numpy kernels read block by block as float64 copies, missing
    values as NaN: pandas extension arrays (nullable ``Float64``/``Int64``/``boolean``,
    Arrow-backed numbers) and Polars columns with nulls or several chunks.

    Only one block (64 K values) is copied at a time, so memory stays flat. A missing value
    (``pd.NA``, a Polars null) becomes NaN, which the kernels treat exactly as the narwhals
    path treats "null or NaN" (dropped, or filled with the public value); integers become the
    float64 the narwhals path casts them to (round to nearest), so both paths agree bit for
    bit."""

    dtype = np.dtype(np.float64)

    def __init__(self, column: Any, size: int, polars: bool) -> None:
        self._column = column
        self.size = size
        self._polars = polars

    def __getitem__(self, part: slice) -> np.ndarray:
        start, stop, _ = part.indices(self.size)
        if self._polars:
            block = self._column.slice(start, stop - start).cast(_polars_float64())
            return np.asarray(block.to_numpy(), dtype=np.float64)
        return np.asarray(self._column[start:stop].to_numpy(dtype=np.float64,
                                                             na_value=np.nan))


class _NullableIntBlocks(_FloatBlocks):
    """A pandas nullable integer column (``Int64`` and the like, e.g. a histogram's bin
    column): read as float64 blocks by the value kernels, exactly as :class:`_FloatBlocks`
    (a subclass, so every path that reads values is unchanged), and by the small-range key
    count (:func:`dpframe.engine._kernel._small_range_counts`) as its stored integers and
    missing-value mask in place (:meth:`read`, the contract of :meth:`_MaskedBlocks.read`).
    A missing slot's stored integer is arbitrary and never used."""

    def __init__(self, array: Any, values: np.ndarray, missing: np.ndarray) -> None:
        super().__init__(array, values.size, polars=False)
        self._values = values  # the array's integers, as stored (no copy)
        self._missing = missing  # True where the row misses a value (no copy)

    @property
    def stored_dtype(self) -> np.dtype:
        """The numpy dtype of the stored integers."""
        return self._values.dtype

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start:stop`` as stored (a view) and which of them miss a value (a view of
        the mask, never None: the mask is handed on whether or not it marks a row)."""
        return self._values[start:stop], self._missing[start:stop]

    @staticmethod
    def of(array: Any) -> _NullableIntBlocks | None:
        """The blocks of a pandas ``IntegerArray`` whose values and mask are exposed as
        numpy arrays of one length (decided from the array's type and layout alone), else
        None."""
        values = getattr(array, "_data", None)
        missing = getattr(array, "_mask", None)
        if not (isinstance(values, np.ndarray) and isinstance(missing, np.ndarray)
                and values.ndim == 1 and missing.shape == values.shape
                and values.dtype.kind in "iu" and missing.dtype == np.bool_):
            return None
        return _NullableIntBlocks(array, values, missing)


class _MaskedBlocks:
    """A numeric column in Arrow's layout -- a values buffer and a validity bitmap, as an
    eager Polars column with nulls holds it -- read block by block (:meth:`read`) as the
    stored values plus a mask of the rows missing a value. Both buffers are read in place, and
    a null's (arbitrary) stored value is never used."""

    def __init__(self, values: np.ndarray, validity: np.ndarray | None, offset: int) -> None:
        self._values = values  # the column's values, already sliced to its length
        self._validity = validity  # bitmap bytes (LSB first) from bit 0 of the buffer
        self._offset = offset  # the column's first bit in the bitmap
        self.size = values.size

    @property
    def stored_dtype(self) -> np.dtype:
        """The numpy dtype of the stored values."""
        return self._values.dtype

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows ``start:stop`` as stored (a view, no copy) and which of them miss a value:
        null in the validity bitmap, or NaN."""
        stop = min(stop, self.size)
        block = self._values[start:stop]
        missing = np.isnan(block) if block.dtype.kind == "f" else None
        if self._validity is not None and stop > start:
            lo, hi = start + self._offset, stop + self._offset
            bits = np.unpackbits(self._validity[lo // 8 : (hi + 7) // 8], bitorder="little")
            null = bits[lo % 8 : lo % 8 + (stop - start)] == 0
            missing = null if missing is None else missing | null
        return block, missing

    @staticmethod
    def of(series: Any) -> _MaskedBlocks | None:
        """The blocks of a one-chunk Polars column of a numpy-representable number type
        (8- to 64-bit integers, Float32, Float64), decided from the dtype alone; None for
        every other dtype or layout (read through Polars instead). Nothing here may fail
        for some values and not others: a data-dependent error would be an outcome the
        noise does not cover."""
        import pyarrow as pa

        if series.dtype not in _polars_numpy_numbers():
            return None
        try:
            arr = series.to_arrow()
            validity, values = arr.buffers()[:2]
            kind = arr.type
            np_dtype = np.dtype(kind.to_pandas_dtype())
        except Exception:  # pragma: no cover - an unexpected export: read through Polars
            return None
        if not isinstance(arr, pa.Array) or values is None or np_dtype.kind not in "iuf":
            return None
        data = np.frombuffer(values, dtype=np_dtype)[arr.offset : arr.offset + len(arr)]
        bitmap = None if validity is None else np.frombuffer(validity, dtype=np.uint8)
        return _MaskedBlocks(data, bitmap, arr.offset)


@functools.cache
def _polars_numpy_numbers() -> frozenset[Any]:
    """Polars number dtypes numpy holds as they are (no Int128/UInt128, Float16, Decimal)."""
    import polars as pl

    return frozenset({pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32,
                      pl.UInt64, pl.Float32, pl.Float64})


@functools.cache
def _polars_float64() -> Any:
    import polars as pl

    return pl.Float64


def pandas_view(native: Any, column: str) -> Any:
    """A numeric column of a pandas frame as the numpy kernels read it, or None: a column
    held as a plain numpy array is a zero-copy view; nullable and Arrow-backed numbers
    (extension dtypes of kind f, i, u or b) are read in float64 blocks
    (:class:`_FloatBlocks`), a nullable integer column's blocks also exposing its integers and
    mask (:class:`_NullableIntBlocks`)."""
    import pandas as pd

    series = native[column]
    dtype = getattr(series, "dtype", None)
    if isinstance(dtype, np.dtype):
        return series.to_numpy(copy=False) if dtype.kind in "fiu" else None
    if getattr(dtype, "kind", None) in ("f", "i", "u", "b"):
        array = series.array
        nullable = (_NullableIntBlocks.of(array)
                    if isinstance(array, pd.arrays.IntegerArray) else None)
        return _FloatBlocks(array, len(series), polars=False) if nullable is None else nullable
    return None


def polars_view(native: Any, column: str) -> Any:
    """A numeric column of an eager Polars frame as the numpy kernels read it, or None: one
    chunk and no nulls is exposed without copying (``allow_copy=False``); with nulls, its
    values buffer and validity bitmap in place (:class:`_MaskedBlocks`); with several chunks,
    in blocks."""
    series = native.get_column(column)
    if not (series.dtype.is_numeric() or series.dtype == _polars_boolean()):
        return None
    if series.null_count() and series.n_chunks() == 1 and series.dtype.is_numeric():
        masked = _MaskedBlocks.of(series)
        if masked is not None:
            return masked
    if series.null_count() or series.n_chunks() != 1 or not series.dtype.is_numeric():
        return _FloatBlocks(series, len(series), polars=True)
    try:
        values = series.to_numpy(allow_copy=False)
    except Exception:
        return _FloatBlocks(series, len(series), polars=True)
    return values if values.dtype.kind in "fiu" else None


@functools.cache
def _polars_boolean() -> Any:
    import polars as pl

    return pl.Boolean
