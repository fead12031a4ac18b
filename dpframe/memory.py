"""Which memory a frame's columns live in, and which memory protected data owns.

Two frames that share memory hold the same people's data, however they were made: a Polars
``clone()``, ``lazy()``, ``select(pl.all())`` or ``from_arrow(df.to_arrow().slice(1))``, a
pandas frame over the same numpy or Arrow buffers. :func:`buffer_ranges` lists the byte ranges
of a frame's column buffers without copying anything, and :class:`MemoryRegistry` remembers
the ranges of every protected frame while that frame lives, so that ``protect`` can refuse a
second budget on them (a range that *overlaps* one of them, not only the same start).

:func:`anchored_series` is the other direction: a Polars value whose memory keeps a Python
object alive, so that the object lives exactly as long as any Polars plan or frame holding
that value (Polars' own objects cannot be weakly referenced from Python).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["MemoryRegistry", "anchored_series", "arrow_chunks", "buffer_ranges"]

Range = tuple[int, int]  # [start, end) addresses


def arrow_chunks(frame: Any) -> Iterable[tuple[Any, Any]]:
    """Every (column, Arrow chunk) of a Polars DataFrame, zero-copy."""
    import polars as pl
    from polars import CompatLevel

    for series in frame.iter_columns():
        if series.dtype == pl.Categorical or isinstance(series.dtype, pl.Enum):
            series = series.to_physical()
        if series.dtype in (pl.Int128, pl.UInt128):  # no Arrow export: its raw buffer
            yield series, _RawChunk(series)
            continue
        for chunk in series.get_chunks():
            yield series, chunk.to_arrow(compat_level=CompatLevel.newest())


class _RawBuffer:
    def __init__(self, address: int, size: int) -> None:
        self.address, self.size = address, size


class _RawChunk:
    """A column Arrow cannot export (128-bit integers), seen through Polars' buffer info:
    enough for its identity (address, offset, length) and its memory range."""

    def __init__(self, series: Any) -> None:
        series = series.rechunk()
        address = int(series._s.as_single_ptr())  # the values' address (no Arrow export)
        self.offset = 0
        self._length = len(series)
        self._buffers = [None, _RawBuffer(address, len(series) * 16)]

    def __len__(self) -> int:
        return self._length

    def buffers(self) -> list[Any]:
        return self._buffers


def anchored_series(text: str, owner: Any) -> Any:
    """A one-value String Polars Series holding ``text`` whose memory keeps ``owner`` alive.

    The value is built in Arrow memory whose buffers name ``owner`` as their base object
    (``pyarrow.foreign_buffer``) and taken by Polars without a copy, so every Polars object
    that shares this memory (the Series, a literal of it in a plan, every plan derived from
    that plan) holds ``owner``; when the last of them is freed, ``owner`` is released (and a
    weak reference to it dies). Raises ``RuntimeError`` if Polars copied the value instead
    (the link would not hold): checked by the buffers' addresses.
    """
    import polars as pl
    import pyarrow as pa
    from polars import CompatLevel

    plain = pa.array([text], type=pa.string_view())  # Polars' own string layout: no copy
    buffers = [None if b is None else pa.foreign_buffer(b.address, b.size, base=(owner, b))
               for b in plain.buffers()]
    linked = pa.Array.from_buffers(plain.type, 1, buffers, null_count=0)
    series = pl.from_arrow(linked, rechunk=False)
    wanted = {b.address for b in buffers if b is not None and b.size}
    held = {b.address for b in series.to_arrow(compat_level=CompatLevel.newest()).buffers()
            if b is not None and b.size}
    if not wanted <= held:  # pragma: no cover - a Polars version that copies on import
        raise RuntimeError("Polars copied an anchored value; its owner would not be kept alive")
    return series


def _arrow_ranges(array: Any) -> list[Range]:
    return [(b.address, b.address + b.size) for b in array.buffers()
            if b is not None and b.size > 0]


def buffer_ranges(frame: Any, family: str, lazy: bool = False) -> list[Range]:
    """The byte ranges of ``frame``'s column buffers (Polars: every chunk's Arrow buffers, and
    for a LazyFrame those of the in-memory frames it scans; pandas: numpy-backed and
    Arrow-backed columns). Nothing is copied; other kinds of frames give no ranges."""
    if family == "polars" and lazy:
        import polars as pl

        from dpframe.polars_plan import scanned_frames

        return [r for pydf in scanned_frames(frame)
                for r in buffer_ranges(pl.DataFrame._from_pydf(pydf), "polars")]
    if family == "polars":
        return [r for _series, arr in arrow_chunks(frame) for r in _arrow_ranges(arr)]
    if family == "pandas":
        return _pandas_ranges(frame)
    return []


def _pandas_ranges(frame: Any) -> list[Range]:
    import numpy as np
    import pandas as pd

    out: list[Range] = []
    for _name, series in frame.items():
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biufmM":
            values = series.to_numpy(copy=False)
            start = values.__array_interface__["data"][0]
            if values.nbytes:
                out.append((start, start + values.nbytes))
        elif isinstance(dtype, pd.ArrowDtype):
            chunked = series.array._pa_array  # the Arrow data pandas holds (no copy)
            for chunk in chunked.chunks:
                out += _arrow_ranges(chunk)
    return out


class MemoryRegistry:
    """The memory of protected frames: ranges, each with the object that holds it, referenced
    weakly (the registry never keeps memory alive: nothing in it refers to the data, its
    ledger or its frames). While the holder lives its memory cannot be freed, so an address
    in a range the holder still has is that memory and no other. A frame can drop memory while
    it lives (pandas consolidates its blocks, Polars rechunks), and freed memory is reused by
    other data: an overlap is therefore confirmed against the holder's memory *now* before it
    counts, and ranges the holder no longer has are forgotten (as are all its ranges once it
    is collected)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._items: list[tuple[int, int, Any]] = []  # (start, end, (holder ref, kind))

    def add(self, ranges: Iterable[Range], holder: Any, family: str, lazy: bool = False
            ) -> None:
        """Remember ``ranges`` as protected while ``holder`` holds them."""
        ranges = list(ranges)
        if not ranges:
            return
        ref = weakref.ref(holder)
        kind = (family, lazy)
        with self._lock:
            self._items += [(start, end, (ref, kind)) for start, end in ranges]
        weakref.finalize(holder, self._forget_holder, ref)

    def __len__(self) -> int:
        """How many ranges are remembered (for tests of forgetting)."""
        with self._lock:
            return len(self._items)

    def _forget_holder(self, ref: Any) -> None:
        with self._lock:
            self._items = [item for item in self._items if item[2][0] is not ref]

    def overlaps(self, ranges: Iterable[Range]) -> bool:
        """Whether any of ``ranges`` overlaps memory a protected frame still holds."""
        ranges = list(ranges)
        with self._lock:
            items = list(self._items)
        hits = [item for item in items
                if any(item[1] > start and item[0] < end for start, end in ranges)]
        stale = []
        found = False
        for start, end, (ref, (family, lazy)) in hits:
            holder = ref()
            if holder is not None and (start, end) in set(buffer_ranges(holder, family, lazy)):
                found = True
                break
            stale.append((start, end, ref))
        if stale:
            with self._lock:
                self._items = [item for item in self._items
                               if (item[0], item[1], item[2][0]) not in stale]
        return found
