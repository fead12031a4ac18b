"""Polars memory: which buffers a Polars frame or plan holds, dpframe's own byte copy of a frame,
and values whose memory keeps a Python object alive.

:func:`polars_ranges` and :func:`polars_plan_ranges` list the byte ranges a frame's columns (or
the in-memory data a LazyFrame's plan holds) live in, without copying (``Backend.buffer_ranges``
of the Polars adapters); :func:`own_polars` is the snapshot ``protect`` takes; and
:func:`anchored_series` is a Polars value whose memory keeps a Python object alive exactly as long
as any plan or frame holds it (Polars' own objects cannot be weakly referenced from Python).
The registry of protected memory is engine-neutral: :mod:`dpframe._util.memory`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from dpframe._util.memory import Range, arrow_ranges, own_arrow_columns, own_cells
from dpframe._util.polars_plan import held_memory

__all__ = ["anchored_series", "arrow_chunks", "own_polars", "polars_plan_ranges",
           "polars_ranges"]


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


def polars_plan_ranges(frame: Any) -> list[Range]:
    """The byte ranges of the in-memory data a Polars LazyFrame's plan holds (scanned frames,
    Series literals, in-memory pyarrow datasets under a Python scan:
    :func:`dpframe._util.polars_plan.held_memory`). No plan is run."""
    import polars as pl


    out: list[Range] = []
    for held in held_memory(frame):
        if isinstance(held, pl.DataFrame):
            out += polars_ranges(held)
        else:  # a pyarrow record batch
            for column in held.columns:
                out += arrow_ranges(column)
    return out


def polars_ranges(frame: Any) -> list[Range]:
    """The byte ranges of a Polars DataFrame's column buffers (every chunk's Arrow buffers);
    nothing is copied."""
    return [r for _series, arr in arrow_chunks(frame) for r in arrow_ranges(arr)]


#: the most bytes :func:`own_polars` copies in one IPC round trip (its transient memory)
_OWN_BATCH_BYTES = 32 << 20


def _arrow_export(series: Any) -> Any:
    """``series``' chunks exported to Arrow without a copy, or None for a dtype that does not
    come back from Arrow the same (``Enum``, 128-bit integers, ``Object``)."""
    import polars as pl
    import pyarrow as pa
    from polars import CompatLevel

    dtype = series.dtype
    if dtype in (pl.Int128, pl.UInt128, pl.Object) or isinstance(dtype, pl.Enum):
        return None
    try:
        chunks = [c.to_arrow(compat_level=CompatLevel.newest()) for c in series.get_chunks()]
        return pa.chunked_array(chunks, type=chunks[0].type) if chunks else None
    except Exception:  # (a type pyarrow cannot carry: copied through Polars' IPC)
        return None


def _arrow_import(series: Any, owned: Any) -> Any:
    """``owned`` (dpframe's copy of ``series``' Arrow export) as a Polars Series without a
    copy, or None if Polars would not give back ``series``' dtype."""
    import polars as pl

    try:
        back = pl.from_arrow(owned, rechunk=False)
    except Exception:  # pragma: no cover - a Polars version that cannot import its export
        return None
    if not isinstance(back, pl.Series) or back.dtype != series.dtype:
        return None
    return back.alias(series.name)


def own_polars(frame: Any) -> Any:
    """dpframe's byte copy of a Polars DataFrame: every buffer of every column (values,
    validity, offsets, string views' data, list and struct children, categorical codes,
    Decimal and 128-bit integers). The columns Polars exports to Arrow are copied together
    by :func:`own_arrow_columns` (one read-only buffer) and imported back without a copy;
    any other
    (``Enum``, 128-bit integers) is written to Arrow IPC and read back by Polars into memory
    it allocates, a few columns at a time (at most about :data:`_OWN_BATCH_BYTES` of IPC at
    once). Polars hands out its memory read-only (``to_numpy`` views, ``to_arrow`` buffers).
    ``Object`` columns (Python objects, which neither can hold) get copies of their mutable
    cells (:func:`own_cells`)."""
    import polars as pl

    series_list = list(frame.iter_columns())
    columns: list[Any] = [None] * len(series_list)
    exported = {i: _arrow_export(series) for i, series in enumerate(series_list)}
    through_arrow = [i for i, chunked in exported.items() if chunked is not None]
    if through_arrow:  # (one buffer for all of them)
        copies = own_arrow_columns([exported[i] for i in through_arrow])
        for i, owned in zip(through_arrow, copies, strict=True):
            columns[i] = _arrow_import(series_list[i], owned)
    del exported
    batch: list[tuple[int, Any]] = []
    size = 0

    def flush() -> None:
        nonlocal batch, size
        if batch:
            sink = io.BytesIO()
            pl.DataFrame([s for _, s in batch]).write_ipc(sink, compression="uncompressed")
            sink.seek(0)
            for (index, _), owned in zip(batch, pl.read_ipc(sink).iter_columns(), strict=True):
                columns[index] = owned
            batch, size = [], 0

    for index, series in enumerate(series_list):
        if columns[index] is not None:
            continue
        if series.dtype == pl.Object:
            columns[index] = pl.Series(series.name, own_cells(series.to_list()), dtype=pl.Object)
            continue
        batch.append((index, series))
        size += series.estimated_size()
        if size >= _OWN_BATCH_BYTES:
            flush()
    flush()
    return pl.DataFrame(columns) if columns else frame.clear()
