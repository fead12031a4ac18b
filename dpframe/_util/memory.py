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

:func:`own_pandas`, :func:`own_polars` and :func:`own_arrow` make the snapshot a release reads
(DESIGN §2 rule 1, *what protect captured is what every release reads*): a byte copy of every
buffer of every column, in memory dpframe allocated and nobody else can write. A dtype is no
guarantee: Polars and pyarrow wrap numpy arrays without copying them (``pl.from_numpy``,
``pa.array(np_arr)``), pandas' deep copy keeps the same Arrow array, and an Arrow buffer that
pyarrow allocated is writable through ``np.frombuffer``.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import io
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from dpframe._util.identity import IdentityMap

__all__ = ["LIVE_BUDGET", "PROTECTED_MEMORY", "MemoryRegistry", "anchored_series",
           "arrow_chunks", "buffer_ranges", "hand_out_pandas", "own_arrow", "own_arrow_columns",
           "own_cells", "own_pandas", "own_polars", "refuse_protected_memory", "seal_pandas",
           "sealed_array"]

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
    for a LazyFrame those of the in-memory data its plan holds: scanned frames, Series
    literals, in-memory pyarrow datasets under a Python scan, :func:`dpframe._util.polars_plan.
    held_memory`; pandas: numpy-backed and Arrow-backed columns). Nothing is copied and no
    plan is run; other kinds of frames give no ranges."""
    if family == "polars" and lazy:
        import polars as pl

        from dpframe._util.polars_plan import held_memory

        out: list[Range] = []
        for held in held_memory(frame):
            if isinstance(held, pl.DataFrame):
                out += buffer_ranges(held, "polars")
            else:  # a pyarrow record batch
                for column in held.columns:
                    out += _arrow_ranges(column)
        return out
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


# -- dpframe's own copies ----------------------------------------------------------------------
#: Python types whose values cannot change: a cell of one of these exact types is kept as is by
#: :func:`own_cells` (``copy.deepcopy`` would return the same object anyway); any other cell is
#: deep-copied. Only the speed depends on a cell's type, never what a release reads.
_IMMUTABLE_CELLS = frozenset({str, int, float, bool, complex, bytes, type(None), decimal.Decimal,
                              datetime.datetime, datetime.date, datetime.time,
                              datetime.timedelta})

#: the array attributes of pandas extension arrays that hold numpy memory (masked arrays:
#: values and mask; datetimes, periods, categoricals, numpy-backed arrays: ``_ndarray``)
_EA_NDARRAYS = ("_ndarray", "_data", "_mask", "_left", "_right", "_sparse_values")


def own_cells(values: Any) -> Any:
    """A new object ndarray of ``values``' cells in which every cell that could be written
    (a list, a dict, a bytearray, a numpy array, any object not of an immutable built-in type)
    is a deep copy: writing the user's cell afterwards changes nothing dpframe holds."""
    import numpy as np

    if isinstance(values, np.ndarray) and set(map(type, values)) <= _IMMUTABLE_CELLS:
        return values.copy()  # (every cell immutable, e.g. strings: no per-cell work)
    cells = [v if type(v) in _IMMUTABLE_CELLS else copy.deepcopy(v) for v in values]
    out = np.empty(len(cells), dtype=object)
    for i, v in enumerate(cells):  # (a slice assignment would unpack list cells)
        out[i] = v
    return out


def own_arrow(chunked: Any) -> Any:
    """A byte copy of a pyarrow ``ChunkedArray``: :func:`own_arrow_columns` of one column."""
    return own_arrow_columns([chunked])[0]


def own_arrow_columns(columns: list[Any]) -> list[Any]:
    """A byte copy of pyarrow chunked arrays (every buffer of every chunk and child:
    validity, offsets, values, dictionaries, views' data; a slice keeps only its rows), in one
    buffer dpframe allocated and hands out read-only (``pa.foreign_buffer``: no ``pa.Buffer``
    reachable from the copy is mutable, so ``np.frombuffer`` of it cannot write).

    Written once in Arrow's IPC stream format (which copies what a slice shows, whatever the
    type) into a buffer of the stream's exact size, then read back without copying."""
    import numpy as np
    import pyarrow as pa

    table = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(len(columns))])
    sizer = pa.MockOutputStream()
    with pa.ipc.new_stream(sizer, table.schema) as writer:
        writer.write_table(table)
    # (numpy's allocation, returned to the system when the data set goes, where pyarrow's
    # default pool, mimalloc, kept about 90 MB of dropped snapshots resident for reuse)
    target = np.empty(sizer.size(), dtype=np.uint8)
    with pa.ipc.new_stream(pa.FixedSizeBufferWriter(pa.py_buffer(target)),
                           table.schema) as writer:
        writer.write_table(table)
    frozen = pa.foreign_buffer(target.ctypes.data, target.nbytes, base=target)
    owned = pa.ipc.open_stream(frozen).read_all()
    out = []
    for column, source in zip(owned.columns, columns, strict=True):
        if column.num_chunks == 0:  # (an empty column: pandas wants one chunk)
            column = pa.chunked_array([pa.array([], type=source.type)], type=source.type)
        out.append(column)
    return out


def seal_pandas(frame: Any) -> Any:
    """Seal every numpy array under ``frame``'s columns (in place) and return it: each becomes
    a read-only array over memory no view can reopen (:func:`sealed_array`).

    Under pandas' copy-on-write, ``frame.values`` and ``to_numpy()`` are read-only views, but
    ``frame[c].array`` still writes the shared block in place, and a read-only flag alone does
    not hold: numpy lets anyone set ``writeable`` back on an array that owns its memory, and
    every view leads to that owner through ``.base``. A sealed array's ``.base`` is a
    read-only Arrow buffer that hides the allocation under it, so numpy refuses to make it, or
    any view of it, writable. Object arrays (Python objects cannot live in such a buffer) are
    only flagged read-only. pandas' own operations copy before writing (copy-on-write)."""
    import numpy as np
    import pandas as pd

    for i, (_name, series) in enumerate(frame.items()):
        values = series._values
        if isinstance(values, np.ndarray):
            if values.dtype.hasobject:
                values.flags.writeable = False  # (kept as it is: no inference of its dtype)
            elif not _is_sealed(values):
                frame.isetitem(i, pd.Series(sealed_array(values), index=frame.index, copy=False))
            continue
        sealed = _sealed_extension(values)
        if sealed is not None:
            frame.isetitem(i, pd.Series(sealed, index=frame.index, copy=False))
    return frame


def _sealed_extension(values: Any) -> Any:
    """A pandas extension array over sealed copies of its numpy arrays, or None when they are
    sealed already (or the array keeps none: Arrow-backed). Arrays backed by one ndarray
    (datetimes, timedeltas, periods, categorical codes, numpy-backed strings) are rebuilt
    over it, masked arrays (nullable numbers, booleans) over their values and mask; any other
    kind only has its arrays flagged read-only."""
    import numpy as np

    backing = getattr(values, "_ndarray", None)
    if isinstance(backing, np.ndarray) and hasattr(values, "_from_backing_data"):
        if _is_sealed(backing):
            return None
        return values._from_backing_data(sealed_array(backing))
    data, mask = getattr(values, "_data", None), getattr(values, "_mask", None)
    if isinstance(data, np.ndarray) and isinstance(mask, np.ndarray):
        if _is_sealed(data) and _is_sealed(mask):
            return None
        return type(values)(sealed_array(data), sealed_array(mask))
    for name in _EA_NDARRAYS:
        array = getattr(values, name, None)
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    return None


#: the read-only buffers :func:`sealed_array` made (by identity, while they live)
_SEALED: IdentityMap[bool] = IdentityMap()


def sealed_array(array: Any) -> Any:
    """A read-only copy of a numpy array that nothing can make writable: its memory is a numpy
    allocation wrapped in a read-only ``pyarrow`` buffer (``pa.foreign_buffer``, which does
    not hand out what it wraps), so the array's ``.base`` chain ends in a buffer numpy knows
    to be read-only and ``flags.writeable = True`` is refused on it and on every view. An
    object array gets a copy flagged read-only (Python objects cannot live in such a buffer:
    its holder alone can reach it)."""
    import numpy as np
    import pyarrow as pa

    if array.dtype.hasobject:  # (a copy of its own, flagged: it can be reopened, but only
        copied = array.copy()  # the holder of this copy can reach it)
        copied.flags.writeable = False
        return copied
    target = np.empty_like(array, order="K")
    np.copyto(target, array)
    frozen = pa.foreign_buffer(target.ctypes.data, target.nbytes, base=target)
    _SEALED.set(frozen, True)
    return np.ndarray(target.shape, target.dtype, buffer=frozen, strides=target.strides)


def _is_sealed(array: Any) -> bool:
    """Whether no view of ``array`` can be made writable: its ``.base`` chain ends in a
    read-only buffer that is not an array (object arrays: never)."""
    import numpy as np

    if array.dtype.hasobject:
        return False
    base = array
    while isinstance(base, np.ndarray):
        if base.base is None:
            return False  # an owner: numpy lets its flag be set back
        base = base.base
    return _SEALED.get(base) is not None  # (a read-only view of memory the user can write
    # elsewhere, np.frombuffer(memoryview(bytearray).toreadonly()), is not sealed)


def _pandas_arrow(array: Any) -> bool:
    """A pandas array backed by pyarrow (``pd.ArrowDtype``, ``string[pyarrow]``, pandas 3's
    ``str``)."""
    return getattr(array, "_pa_array", None) is not None


def _with_arrow(array: Any, chunked: Any) -> Any:
    """A copy of the Arrow-backed pandas ``array`` (same class and dtype) over ``chunked``."""
    out = object.__new__(type(array))  # (copy.copy pickles an Arrow string array: 50 ms
    out.__dict__.update(vars(array))  # at 2M rows, for nothing)
    out._pa_array = chunked
    if "_cache" in out.__dict__:  # (what pandas derived from the old Arrow data)
        out._cache = {}
    return out


def _mutable_arrow(chunked: Any) -> bool:
    """Whether any buffer of ``chunked`` is writable (e.g. through ``np.frombuffer``)."""
    return any(b is not None and b.is_mutable for chunk in chunked.chunks
               for b in chunk.buffers())


def own_pandas(frame: Any) -> Any:
    """dpframe's byte copy of a pandas DataFrame or Series: numpy columns and the numpy arrays
    of extension arrays (nullable, datetime, categorical codes) copied into sealed memory
    (:func:`seal_pandas`: no view can reopen them), Arrow-backed columns and an
    Arrow-backed index copied buffer by buffer (:func:`own_arrow`; pandas' deep copy keeps the
    same Arrow array), object columns with every mutable cell deep-copied (:func:`own_cells`),
    categoricals with their categories copied too, the index and the column labels (pandas 3
    keeps ``str`` labels in a writable Arrow buffer) rebuilt. One copy of each buffer: the
    frame is copied shallowly first. Serves every engine that holds pandas objects (pandas
    itself, the ``from_pandas`` leaves of a Dask snapshot)."""
    import numpy as np
    import pandas as pd

    if isinstance(frame, pd.Series):
        owned = own_pandas(frame.to_frame(name=0))
        return owned.iloc[:, 0].rename(frame.name)
    out = frame.copy(deep=False)
    for i, (_name, series) in enumerate(out.items()):
        array = series.array
        if _pandas_arrow(array):
            out.isetitem(i, _with_arrow(array, own_arrow(array._pa_array)))
        elif series.dtype == np.dtype(object):
            out.isetitem(i, _object_column(out, own_cells(series.to_numpy(copy=False))))
        elif isinstance(series.dtype, pd.CategoricalDtype):
            out.isetitem(i, _own_categorical(array))
    if not isinstance(out.index, pd.RangeIndex):  # (a RangeIndex holds no buffer; its
        index = out.index.array  # .array would build one of n integers)
        if _pandas_arrow(index):
            out.index = pd.Index(_with_arrow(index, own_arrow(index._pa_array)),
                                 name=out.index.name, copy=False)
        else:
            out.index = out.index.copy(deep=True)
    out.columns = pd.Index(list(out.columns), dtype=out.columns.dtype, name=out.columns.name)
    return seal_pandas(out)


def _object_column(frame: Any, cells: Any) -> Any:
    """``cells`` as a column of ``frame`` that stays of ``object`` dtype (a bare object ndarray
    would be inferred: pandas 3 makes strings its ``str`` dtype, through pyarrow, which also
    fails on a lone surrogate that the strings check refuses with dpframe's own message)."""
    import pandas as pd

    return pd.Series(cells, index=frame.index, dtype=object, copy=False)


def _own_categorical(array: Any) -> Any:
    """A categorical over its (deep-copied) codes and a copy of its categories: a deep copy
    keeps the categories ``Index``, whose buffers (Arrow-backed under pandas 3's ``str``,
    writable through ``np.frombuffer``; numpy through ``.array``) the user's frame shares."""
    import numpy as np
    import pandas as pd

    categories = array.dtype.categories
    values = categories.array
    if _pandas_arrow(values):
        values = _with_arrow(values, own_arrow(values._pa_array))
    elif values.dtype == np.dtype(object):
        values = own_cells(categories.to_numpy())
    else:
        values = sealed_array(categories.to_numpy())
    owned = pd.Index(values, name=categories.name, copy=False)
    dtype = pd.CategoricalDtype(owned, ordered=array.dtype.ordered)
    return pd.Categorical.from_codes(array.codes, dtype=dtype, validate=False)


def hand_out_pandas(frame: Any) -> Any:
    """Prepare ``frame``, a pandas frame dpframe computed from a snapshot and is about to hand
    out (a verified derivation), so that nothing reachable from it writes memory a release
    reads: Arrow columns with a writable buffer (computed by pyarrow) replaced by read-only
    copies, object columns by copies of their mutable cells (the snapshot's cells stay
    dpframe's), numpy arrays sealed (:func:`seal_pandas`: the ones pandas computed are copied,
    the snapshot's are sealed already). In place; returns ``frame``."""
    import numpy as np

    for i, (_name, series) in enumerate(frame.items()):
        array = series.array
        if _pandas_arrow(array) and _mutable_arrow(array._pa_array):
            frame.isetitem(i, _with_arrow(array, own_arrow(array._pa_array)))
        elif series.dtype == np.dtype(object):
            frame.isetitem(i, _object_column(frame, own_cells(series.to_numpy(copy=False))))
    return seal_pandas(frame)


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


#: The memory of every protected frame in this process (the objects passed to protect, and
#: dpframe's snapshots), while they live: ``protect`` refuses a second budget over it.
PROTECTED_MEMORY = MemoryRegistry()

#: Why data that already carries a budget is refused (no value is ever compared to tell).
LIVE_BUDGET = (
    "this data already carries a privacy budget in this process (the frame is "
    "protected, derived from a protected frame, shares its memory, was passed to "
    "dpf.protect before, or reads files a protected frame reads); protecting it again "
    "would open a second budget on the same people. Keep querying the protected frame "
    "(re-running a notebook cell: use the frame from the first run), or use a durable "
    "dpf.Session(path=...) to continue one budget across runs."
)


def refuse_protected_memory(ranges: Iterable[Range]) -> None:
    """Refuse (:class:`~dpframe.errors.LedgerError`) memory that overlaps a protected frame's:
    what a plan collected at protect turned out to hand back (a Python scan or function
    returning a protected frame's buffers, which its structure does not show). Addresses only:
    no value is compared."""
    from dpframe.errors import LedgerError

    if PROTECTED_MEMORY.overlaps(ranges):
        raise LedgerError(LIVE_BUDGET)
