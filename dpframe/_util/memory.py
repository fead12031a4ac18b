"""Which memory protected data owns, and dpframe's own copies of Arrow data and object cells.

Two frames that share memory hold the same people's data, however they were made: a Polars
``clone()``, ``lazy()``, ``select(pl.all())`` or ``from_arrow(df.to_arrow().slice(1))``, a
pandas frame over the same numpy or Arrow buffers. Each engine lists the byte ranges of a
frame's column buffers without copying anything (``Backend.buffer_ranges``:
:mod:`dpframe.backends.pandas._memory`, :mod:`dpframe.backends.polars._memory`), and
:class:`MemoryRegistry` remembers the ranges of every protected frame while that frame lives,
so that ``protect`` can refuse a second budget on them (a range that *overlaps* one of them, not
only the same start).

The snapshot a release reads (DESIGN §2 rule 1, *what protect captured is what every release
reads*) is a byte copy of every buffer of every column, in memory dpframe allocated and nobody
else can write; the engine-neutral parts are here: :func:`own_arrow` (Arrow columns, through one
IPC stream into a read-only buffer) and :func:`own_cells` (object cells). A dtype is no
guarantee: Polars and pyarrow wrap numpy arrays without copying them (``pl.from_numpy``,
``pa.array(np_arr)``), pandas' deep copy keeps the same Arrow array, and an Arrow buffer that
pyarrow allocated is writable through ``np.frombuffer``.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from dpframe.errors import LedgerError

__all__ = ["LIVE_BUDGET", "PROTECTED_MEMORY", "MemoryRegistry", "Range", "arrow_ranges",
           "own_arrow", "own_arrow_columns", "own_cells", "refuse_protected_memory"]

Range = tuple[int, int]  # [start, end) addresses


def arrow_ranges(array: Any) -> list[Range]:
    return [(b.address, b.address + b.size) for b in array.buffers()
            if b is not None and b.size > 0]


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
        self._items: list[tuple[int, int, Any]] = []  # (start, end, (holder ref, ranges_of))

    def add(self, ranges: Iterable[Range], holder: Any,
            ranges_of: Callable[[Any], list[Range]]) -> None:
        """Remember ``ranges`` as protected while ``holder`` holds them; ``ranges_of`` lists
        the ranges a holder of its kind has now (its engine's ``Backend.buffer_ranges``)."""
        ranges = list(ranges)
        if not ranges:
            return
        ref = weakref.ref(holder)
        kind = ranges_of
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
        for start, end, (ref, ranges_of) in hits:
            holder = ref()
            if holder is not None and (start, end) in set(ranges_of(holder)):
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


def own_cells(values: Any) -> Any:
    """A new object ndarray of ``values``' cells in which every cell that could be written
    (a list, a dict, a bytearray, a numpy array, any object not of an immutable built-in type)
    is a deep copy: writing the user's cell afterwards changes nothing dpframe holds."""
    import numpy as np

    if isinstance(values, np.ndarray) and set(map(type, values)) <= _IMMUTABLE_CELLS:
        return values.copy()  # (every cell immutable, e.g. strings: no per-cell work)
    cells = [v if type(v) in _IMMUTABLE_CELLS else _owned_cell(v) for v in values]
    out = np.empty(len(cells), dtype=object)
    for i, v in enumerate(cells):  # (a slice assignment would unpack list cells)
        out[i] = v
    return out


#: Built-in value types whose subclasses a cell can hold (``class S(str)``): such a cell is
#: rebuilt as the exact built-in by the type's own conversion slot, which reads the built-in
#: value and never a method the subclass overrides. A deep copy would keep the subclass, whose
#: ``__eq__``/``__hash__`` may read state the user still holds (its class's attributes).
_BUILTIN_BASES: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (str, str.__str__), (bytes, bytes.__bytes__), (int, int.__int__), (float, float.__float__),
    (complex, complex.__complex__))
#: ``type.__flags__`` bit of a class defined at run time (in Python code); compiled types such as
#: numpy's scalars (``np.float64`` is a ``float``) do not have it and are deep-copied as before.
_HEAP_TYPE = 1 << 9


def _owned_cell(value: Any) -> Any:
    """dpframe's own copy of one cell: the exact built-in value of a Python-defined subclass of
    a built-in value type (:data:`_BUILTIN_BASES`), else a deep copy."""
    if type(value).__flags__ & _HEAP_TYPE:
        for base, exact in _BUILTIN_BASES:
            if isinstance(value, base):
                return exact(value)
    return copy.deepcopy(value)


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


    # elsewhere, np.frombuffer(memoryview(bytearray).toreadonly()), is not sealed)


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

    if PROTECTED_MEMORY.overlaps(ranges):
        raise LedgerError(LIVE_BUDGET)
