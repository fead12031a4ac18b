"""The numpy kernel: the aggregates from zero-copy numpy views, block by block (a long
column's blocks split between threads: :func:`_column_kernel`)."""

from __future__ import annotations

import contextvars
import itertools
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.engine._column_views import _MaskedBlocks, _NullableIntBlocks
from dpframe.engine._frame_engine import FrameEngine
from dpframe.engine._key_codes import _consecutive_run, _int_lookup
from dpframe.engine._row_expressions import drops
from dpframe.query import DROP, Agg, FixedPoint, Keys

__all__ = ["POLARS_ROWS_PER_KEY", "SMALL_RANGE_CELLS", "forced_numpy_sums"]


#: Rows per block of the numpy kernel: 64 K doubles (512 KB) stay in the CPU cache.
_BLOCK = 1 << 16

#: float64, compared by identity (cheaper than ==; another float64 dtype takes the dtype= path).
_FLOAT64 = np.dtype(np.float64)

#: An eager Polars group-by runs the numpy kernel only with at least one declared key per this
#: many rows. Measured on 2 cores: per row, Polars' parallel group-by costs ~6 ns and the
#: kernel ~10 ns; per key, aligning Polars' groups with the declared keys costs ~0.7 µs and
#: the kernel ~0.1 µs, so the kernel wins when keys > rows·4 ns/0.6 µs ≈ rows/160 (1 M rows:
#: 12.6 vs 12.9 ms at 1,000 keys, 18 vs 78 ms at 100,000; 10 M rows: 96 vs 59 ms at 1,000).
#: Row counts alone per integer key of a small range are the exception, tried before this
#: rule: one ``bincount`` per block (:func:`_small_range_counts`) beats Polars' filter and
#: group-by at any number of keys (10 M rows, 10 keys: ~21 vs ~76 ms).
POLARS_ROWS_PER_KEY = 160


def _numpy_sums(
    native: Any,
    backend: FrameEngine,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    method: str = "auto",
) -> dict[Agg, np.ndarray] | None:
    """The same aggregates from zero-copy numpy views, block by block, or None when a column
    is not held as a plain numeric array (then the narwhals path runs). ``method="auto"``
    leaves an eager Polars group-by with few keys per row to Polars
    (:data:`POLARS_ROWS_PER_KEY`, :meth:`FrameEngine.leaves_group_by`); ``"numpy"`` takes the
    kernel whenever it can run.

    pandas keeps such a column as one contiguous numpy array; an eager Polars column with one
    chunk and no nulls is exposed without copying; other numeric columns are read in float64
    blocks (:class:`_FloatBlocks`). A group-by maps each row's key to its position among the
    declared keys (pandas' hash index, or Arrow's ``index_in`` for Arrow-backed strings; -1
    for undeclared or missing keys, which are dropped) and sums per key with
    ``np.bincount``. Every value is an integer-valued double, so every partial sum, in any
    order, is exact: the results equal the narwhals path's.
    """
    in_memory = not backend.lazy
    several_keys = group_by is not None and not isinstance(group_by, str)
    if not in_memory or several_keys or any(a.kind in ("sum_prod", "units") for a in aggs):
        return None
    needed = sorted({c for a in aggs for c in a.columns()})
    views = {}
    for column in needed:
        view = backend.numpy_column(native, column)
        if view is None:
            return None
        views[column] = view
    n_rows = backend.count_rows(native)
    codes = None
    if group_by is not None:
        assert isinstance(group_by, str)
        if all(a.kind == "rows" and not drops(a.column, columns, missing) for a in aggs):
            counts = _small_range_counts(backend.numpy_column(native, group_by), keys)
            if counts is not None:  # rows per key only (a value count, a grouped count):
                return {a: counts.copy() for a in aggs}  # (one pass, at any number of keys)
        if method != "numpy" and backend.leaves_group_by(len(keys or ()), n_rows):
            return None  # few keys for many rows: e.g. Polars' parallel group-by is faster
        codes = backend.key_codes(native, group_by, keys or ())
        if codes is None:
            return None
    n_groups = 1 if codes is None else len(keys or [])
    out = {a: np.zeros(n_groups) for a in aggs}
    all_rows = [a for a in aggs if a.kind == "rows" and not drops(a.column, columns, missing)]
    if all_rows:
        counts = np.array([float(n_rows)]) if codes is None else _key_counts(codes, n_groups)
        for agg in all_rows:
            out[agg] = counts.copy()
    for column, values in views.items():
        mine = [a for a in aggs if a.column == column and a not in all_rows]
        _column_kernel(values, mine, missing.get(column, DROP), codes, n_groups, out)
    return out


def forced_numpy_sums(
    native: Any,
    backend: FrameEngine,
    aggs: Sequence[Agg],
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | None,
    keys: Sequence[Any] | None,
) -> dict[Agg, np.ndarray] | None:
    """:func:`_numpy_sums` with ``method="numpy"`` (never left to the engine's group-by by the
    frame's row count), for an adapter that chose the kernel from public facts itself and hands
    it an in-memory frame of its own engine (``backend``); None where a column's dtype does not
    allow it. Runs inside :func:`~dpframe.engine._aggregation.aggregate`'s pass (its
    floating-point settings included). Without a group-by, a frame of plain arrays of at most
    one block takes :func:`one_block_sums` first, as ``aggregate`` does for the eager frame
    itself (the same numbers, without the blocked pass's bookkeeping: a LazyFrame's warm mean
    at 1,000 rows 0.12 -> 0.10 ms)."""
    small = None if group_by is not None else one_block_sums(native, backend, aggs, missing)
    if small is not None:
        return small
    return _numpy_sums(native, backend, aggs, columns, missing, group_by, keys, "numpy")


#: The widest integer key range (cells of :attr:`Keys.int_lookup`'s table) counted directly by
#: :func:`_small_range_counts`: a per-block ``bincount`` of that many cells stays in cache.
SMALL_RANGE_CELLS = 4096


def _small_range_counts(values: Any, keys: Sequence[Any] | None) -> np.ndarray | None:
    """Rows per declared key of an integer key column whose keys span at most
    :data:`SMALL_RANGE_CELLS` integers, without a code per row: each block's offsets from the
    lowest key (as unsigned integers, a value below it wrapping to above the range), capped
    at the table's last cell (every value outside the range, as in :func:`_lookup_codes`),
    are counted with one ``bincount`` per block, and each declared key takes its cell's
    count. The same counts as looking every row up and counting the codes (one pass instead
    of three, and no int64 code array the size of the column; :func:`_range_cells`,
    :func:`_per_declared_key`).

    The column is a plain numpy integer array, or one with a missing-value mask
    (:func:`_int_key_blocks`: a pandas nullable integer column such as a histogram's bin
    column, an eager Polars integer column with nulls). A row missing its key is put in the
    table's last cell, which is no declared key: it is counted in no key, as its code -1 is
    by :func:`_key_counts` on the code path. The mask is applied to every block of such a
    column, whether or not it marks any row, so the route and the work are decided from the
    column's dtype and layout and the declared keys alone (public facts), never from which
    values are missing. None where this does not apply (then the codes are looked up).

    Measured (10 keys from 0, CPU, 2 shared cores, loads 2.5-7): a pandas histogram's warm
    aggregation step at 1,000 rows 61-83 -> 47-56 us (codes then counted before); at 10 M rows
    the warm histogram 65-70 -> 29-34 ms (native ``cut``: ~375-435 ms); an eager Polars
    ``Int64`` key column with 1 % nulls at 10 M rows 104-127 ms CPU in Polars' group-by ->
    39-44 ms here."""
    blocks = _int_key_blocks(values)
    if blocks is None or not isinstance(keys, Keys):
        return None
    dtype, size, read = blocks
    lookup = _int_lookup(keys, dtype)
    if lookup is None or lookup[1].size > SMALL_RANGE_CELLS:
        return None
    low, table = lookup
    return _per_declared_key(_range_cells(read, size, low, table.size), table, keys)


def _range_cells(read: _KeyBlockReader, size: int, low: int, n_cells: int) -> np.ndarray:
    """Rows per cell of a key table of ``n_cells`` cells from ``low`` (:func:`_offsets` of
    every block, counted by ``bincount``; the last cell holds every row outside the range or
    missing its key). A column of one block is counted in one call (no running total, no
    scratch block: at a thousand rows those calls cost more than the counting)."""
    last = np.uint64(n_cells - 1)
    shift = np.uint64(low % (1 << 64))
    if size <= _BLOCK:
        stored, missing = read(0, size)
        offset = _offsets(stored, shift, last, missing, None)
        return np.bincount(offset.view(np.int64), minlength=n_cells)
    cells = np.zeros(n_cells, dtype=np.int64)
    scratch = np.empty(_BLOCK, dtype=np.uint64)
    for start in range(0, size, _BLOCK):
        stored, missing = read(start, start + _BLOCK)
        offset = _offsets(stored, shift, last, missing, scratch[: stored.size])
        cells += np.bincount(offset.view(np.int64), minlength=n_cells)
    return cells


def _offsets(stored: np.ndarray, shift: np.uint64, last: np.uint64,
             missing: np.ndarray | None, out: np.ndarray | None) -> np.ndarray:
    """Each row's cell: its key's offset from the lowest key as an unsigned integer (a value
    below it wrapping to above the range), capped at ``last``; ``last`` for a row in
    ``missing``. Written into ``out`` (or a new array); the stored block is only read."""
    block = stored.astype(np.int64, copy=False).view(np.uint64)
    if shift:
        offset = np.subtract(block, shift, out=out)
        np.minimum(offset, last, out=offset)
    else:  # keys from 0 (a histogram's bins): the offset is the value (one pass fewer)
        offset = np.minimum(block, last, out=out)
    if missing is not None:  # (a layout fact: a masked column, a mask on every block)
        np.putmask(offset, missing, last)  # a missing key: the last cell, no declared key
    return offset


def _per_declared_key(cells: np.ndarray, table: np.ndarray, keys: Keys) -> np.ndarray:
    """Each declared key's count from the cells of its lookup table (``table[i]``: the
    position of key ``low + i``, -1 for none), as float64. Keys that are the whole range in
    increasing order (``low, low + 1, …``: a histogram's bins, keys ``0 .. k − 1``; the
    key codes' own test of it, :func:`~dpframe.engine._key_codes._consecutive_run`, worked
    out once per key list) take the first cells as they are."""
    n = len(keys)
    if _consecutive_run(keys) is not None:
        return cells[:n].astype(np.float64)
    counts = np.zeros(n, dtype=np.float64)
    declared = table >= 0
    counts[table[declared]] = cells[declared]
    return counts


_KeyBlockReader = Callable[[int, int], tuple[np.ndarray, np.ndarray | None]]


def _int_key_blocks(values: Any) -> tuple[np.dtype, int, _KeyBlockReader] | None:
    """``(dtype, rows, read)`` of an integer key column as :func:`_small_range_counts` reads
    it: ``read(start, stop)`` gives the rows' stored integers and which of them miss a key
    (None for a plain array, which cannot miss one). A plain numpy array, a pandas nullable
    integer column (:class:`_NullableIntBlocks`) or an Arrow-layout column with a validity
    bitmap (:class:`_MaskedBlocks`) of an integer dtype; None for anything else. Decided from
    the column's type and dtype alone."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.dtype.kind not in "iu":
            return None
        return values.dtype, values.size, lambda start, stop: (values[start:stop], None)
    if isinstance(values, _NullableIntBlocks | _MaskedBlocks):
        dtype = values.stored_dtype
        return (dtype, values.size, values.read) if dtype.kind in "iu" else None
    return None


def _key_counts(codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Rows per declared key (codes ≥ 0), counted 1 M rows at a time (a whole-column count
    would widen every code to int64 at once: the column's size again in memory)."""
    counts = np.zeros(n_groups, dtype=np.float64)
    for start in range(0, codes.size, 1 << 20):
        block = codes[start : start + (1 << 20)]
        if block.size and block.min() < 0:  # (the minimum: no mask when every key is declared)
            block = block[block >= 0]
        counts += np.bincount(block, minlength=n_groups)
    return counts


#: Rows per thread from which a column's blocks are split between threads
#: (:func:`_parts`): a thread costs ~0.1 ms to start and join, the kernel ~1.3 ns per row.
PARALLEL_ROWS = 1 << 21

#: The most threads one column's pass uses.
_MAX_THREADS = 4

#: Rows per block of a pass split between threads: numpy holds the GIL between its calls, so
#: each block costs a few hand-overs of it; twice :data:`_BLOCK` (a 1 MB scratch, still in a
#: core's cache) halves them. Measured at 10 M rows on 2 free cores: 9.7 ms with 128 K-row
#: blocks, 14.7 ms with 64 K-row ones, 14.3 ms on one thread.
_THREAD_BLOCK = 2 * _BLOCK


def _cores() -> int:
    """The cores this process may run on (a fact of the machine, never of the data)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _parts(values: Any, step: int) -> list[tuple[int, int]]:
    """The row ranges ``[start, stop)`` of a column's pass, one per thread, each a whole
    number of blocks of ``step`` rows: a single range below :data:`PARALLEL_ROWS` rows per
    thread or for a column read through its engine (:class:`_FloatBlocks`, which calls
    back into pandas or Polars per block), else up to the machine's cores (at most
    :data:`_MAX_THREADS`). Decided from the column's length and how it is held (its dtype,
    its chunks) only, never from a value: a column of a numpy number dtype splits the same
    way with or without missing values (plain array or values buffer + bitmap)."""
    size = int(values.size)
    n = size // PARALLEL_ROWS  # (the cores are looked up only for a long column)
    threaded = n >= 2 and isinstance(values, np.ndarray | _MaskedBlocks)
    n = min(n, _cores(), _MAX_THREADS) if threaded else 1
    if n < 2:
        return [(0, size)]
    blocks = -(-size // step)
    cuts = [min(size, step * (blocks * i // n)) for i in range(n + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def _column_kernel(
    values: np.ndarray,
    aggs: Sequence[Agg],
    policy: Any,
    codes: np.ndarray | None,
    n_groups: int,
    out: dict[Agg, np.ndarray],
) -> None:
    """One column's ``aggs`` (rows present, Σk, Σk²) added to ``out``: a blocked pass
    (:func:`_column_pass`), split into whole-block row ranges (:func:`_parts`) that run on
    threads of their own (:func:`_in_threads`; numpy releases the GIL in its ufuncs, so
    they run on separate cores) and are added up in a fixed order.

    The split changes no bit of the result: every term is an integer-valued double
    (a row count, ``k``, or ``k²``) and every partial sum of a range, per group, is an
    integer of magnitude below 2⁵³ (:class:`FixedPoint` sizes ``q`` so that ``|Σk| < 2⁵³``
    and ``Σk² < 2⁵³`` over all ``n`` rows; :mod:`dpframe.engine._aggregation`), so each
    is exact, and adding the ranges' exact sums is exact in any order: the same numbers as
    one pass over the whole column."""
    step = _step(codes, n_groups, _THREAD_BLOCK)
    parts = _parts(values, step)
    if len(parts) == 1:
        _column_pass(values, aggs, policy, codes, n_groups, out, 0, values.size,
                     _step(codes, n_groups, _BLOCK))
        return
    sums = [{a: np.zeros(n_groups) for a in aggs} for _ in parts]
    _in_threads([_bound_pass(values, aggs, policy, codes, n_groups, part, (lo, hi, step))
                 for part, (lo, hi) in zip(sums, parts, strict=True)])
    for part in sums:  # exact integers: the order does not matter (fixed all the same)
        for a, v in part.items():
            out[a] += v


def _bound_pass(values: np.ndarray, aggs: Sequence[Agg], policy: Any,
                codes: np.ndarray | None, n_groups: int, out: dict[Agg, np.ndarray],
                rows: tuple[int, int, int]) -> Callable[[], None]:
    """:func:`_column_pass` over ``rows`` (start, stop, step), to be called later."""
    return lambda: _column_pass(values, aggs, policy, codes, n_groups, out, *rows)


def _in_threads(tasks: Sequence[Callable[[], None]]) -> None:
    """Run ``tasks[0]`` on this thread and each other task on a thread of its own, wait for
    all of them, then re-raise here the first exception (in task order), if any. Nothing
    leaves a worker thread but through here: its exception is caught and handed over (never
    printed by the thread), and each thread runs in a copy of the caller's context, so
    :func:`~dpframe.engine._aggregation.aggregate`'s ``np.errstate`` (no floating-point
    warning: overflow and invalid are ignored) holds there too; the ufuncs the kernel calls
    warn of nothing else. A thread that cannot be started runs its task here instead, and
    every started thread is joined before this returns or raises, so no worker outlives the
    read (the caller's :func:`~dpframe.release._safety_net.quiet` covers the whole pass)."""
    errors: list[BaseException | None] = [None] * len(tasks)

    def run(i: int) -> None:
        try:
            tasks[i]()
        except BaseException as exc:  # handed to the caller below
            errors[i] = exc

    threads: list[threading.Thread] = []
    here = [0]
    for i in range(1, len(tasks)):
        thread = threading.Thread(target=contextvars.copy_context().run, args=(run, i),
                                  name="dpframe-kernel", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: run it on this one
            here.append(i)
            continue
        threads.append(thread)
    try:
        for i in here:
            run(i)
    finally:
        for thread in threads:
            thread.join()
    for error in errors:
        if error is not None:
            raise error


def _step(codes: np.ndarray | None, n_groups: int, block: int) -> int:
    """Rows per block (at least ``block``): a per-group sum costs O(rows + groups) per
    block, so with many groups longer blocks keep the per-group part (allocating and adding
    G cells) below a quarter of the work."""
    return block if codes is None else max(block, 4 * n_groups)


def _column_pass(
    values: np.ndarray,
    aggs: Sequence[Agg],
    policy: Any,
    codes: np.ndarray | None,
    n_groups: int,
    out: dict[Agg, np.ndarray],
    begin: int,
    end: int,
    step: int,
) -> None:
    """Blocked pass over rows ``begin:end`` of one column, ``step`` rows at a time,
    computing its ``aggs`` (rows present, Σk, Σk²), added to ``out``."""
    by_fp: dict[FixedPoint, list[Agg]] = {}
    row_aggs = [a for a in aggs if a.kind == "rows"]
    for a in aggs:
        if a.fp is not None:
            by_fp.setdefault(a.fp, []).append(a)
    speculate = True  # until a block turns out to hold NaN
    scratch = np.empty(min(step, end - begin), dtype=np.float64)
    scratch2 = np.empty(scratch.size if any(a.kind == "sum_sq" for a in aggs) else 0)
    for start in range(begin, end, step):
        stop = min(start + step, end)
        block, missing = _read_block(values, start, stop)
        if missing is _UNCHECKED and not speculate:
            missing = np.isnan(block)
        group = None
        if codes is not None:  # keep the rows of declared keys only
            block, group, missing = _declared_rows(block, codes[start:stop], missing)
        if missing is _UNCHECKED:
            # a float column read without a mask: NaN, if any, reaches every sum (NaN stays
            # NaN through scaling, clip and rounding), so sum first and look for NaN only then
            sums = (_block_sums(block, group, by_fp, None, policy, n_groups, scratch, scratch2)
                    if by_fp else None)
            if sums is not None and not _any_nan(sums):
                for a, v in sums.items():
                    out[a] += v
                _add_rows(row_aggs, block.size, group, n_groups, out)
                continue
            missing = np.isnan(block)
            speculate = False
        assert missing is not _UNCHECKED
        if missing is not None and not missing.any():
            missing = None
        if missing is not None and policy == DROP:  # rows missing the value leave the pass
            present = ~missing
            block, missing = block[present], None
            group = None if group is None else group[present]
        _add_rows(row_aggs, block.size, group, n_groups, out)
        for a, v in _block_sums(block, group, by_fp, missing, policy, n_groups, scratch,
                                scratch2).items():
            out[a] += v


def _any_nan(sums: Mapping[Agg, np.ndarray]) -> bool:
    """Whether any of a block's sums is NaN (a single sum looked at in Python)."""
    return any(math.isnan(v.item()) if v.size == 1 else np.isnan(v).any()
               for v in sums.values())


def _declared_rows(block: np.ndarray, group: np.ndarray, missing: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The rows of a block whose key is declared (code ≥ 0): the block, its codes and its
    missing-value mask (if looked at) restricted to them."""
    if group.size and group.min() < 0:
        keep = group >= 0
        block, group = block[keep], group[keep]
        if missing is not None and missing is not _UNCHECKED:
            missing = missing[keep]
    return block, group, missing


#: :func:`_read_block`'s mark for a float block whose missing values were not looked for.
_UNCHECKED: Any = np.empty(0, dtype=bool)


def _add_rows(row_aggs: Sequence[Agg], size: int, group: np.ndarray | None, n_groups: int,
              out: dict[Agg, np.ndarray]) -> None:
    """Row counts of a block whose rows all hold a value (only under "drop": with a fill
    value the row count is the public size)."""
    if row_aggs:
        counts = _per_group(None, size, group, n_groups)
        for a in row_aggs:
            out[a] += counts


def _block_sums(block: np.ndarray, group: np.ndarray | None,
                by_fp: Mapping[FixedPoint, Sequence[Agg]], missing: np.ndarray | None,
                policy: Any, n_groups: int, scratch: np.ndarray, scratch2: np.ndarray
                ) -> dict[Agg, np.ndarray]:
    """Σk and Σk² (per group) of one block: ``k = round(clip((x − c)/q))`` as exact
    integer-valued doubles, rows in ``missing`` taking the public fill value. ``scratch``,
    ``scratch2``: float64 buffers of at least the block's length, reused block after block
    (a fresh half-megabyte array per block costs more than the arithmetic)."""
    sums: dict[Agg, np.ndarray] = {}
    for fp, group_aggs in by_fp.items():
        y = _fixed_point_k(block, fp, scratch[: block.size], missing, policy)
        for a in group_aggs:
            w = y if a.kind == "sum" else np.multiply(y, y, out=scratch2[: y.size])
            sums[a] = _per_group(w, w.size, group, n_groups)
    return sums


def _fixed_point_k(x: np.ndarray, fp: FixedPoint, y: np.ndarray,
                   missing: np.ndarray | None = None, fill: Any = 0.0) -> np.ndarray:
    """``k = round(clip((x − c)/q, k_lo, k_hi))`` of every row of ``x`` as exact
    integer-valued doubles, written into ``y`` (a float64 buffer of ``x``'s length) and
    returned; rows in ``missing`` take the public ``fill`` value. The one place this is
    computed, for the blocked pass and the one-block pass alike (the same operations in the
    same order, so the same doubles)."""
    inv_q = 1.0 / fp.q
    if x.dtype is _FLOAT64:  # x/q, exact (in float64, whatever the column's dtype; identity
        np.multiply(x, inv_q, out=y)  # is cheaper than ==, and dtype= costs a microsecond)
    else:
        np.multiply(x, inv_q, out=y, dtype=np.float64)
    if fp.center != 0.0:
        y -= fp.center * inv_q  # exact: scaling by a power of two
    if missing is not None:  # the public fill value (the policy is not "drop" here)
        y[missing] = (float(fill) - fp.center) * inv_q
    y.clip(fp.k_lo, fp.k_hi, out=y)  # (np.clip: the same, through two more calls)
    # round half to even: what adding and subtracting 1.5·2^52 (the engines' form) gives
    # for |y| < 2^51, and |y| <= 2^50 after the clip (FixedPoint's limit)
    np.rint(y, out=y)
    return y


def _read_block(values: Any, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows ``start:stop`` of a column the kernel reads, and which of them miss a value (null
    or NaN; None when the column cannot miss one; :data:`_UNCHECKED` for a float block not
    yet looked at)."""
    if isinstance(values, _MaskedBlocks):
        return values.read(start, stop)
    block = values[start:stop]
    return block, _UNCHECKED if block.dtype.kind == "f" else None


def _per_group(weights: np.ndarray | None, size: int, group: np.ndarray | None,
               n_groups: int) -> np.ndarray:
    if group is None:
        return np.array([float(size) if weights is None else float(np.add.reduce(weights))])
    return np.bincount(group, weights=weights, minlength=n_groups).astype(np.float64, copy=False)


#: The aggregate kinds :func:`one_block_sums` computes.
_ONE_BLOCK_KINDS = frozenset({"rows", "sum", "sum_sq"})


def one_block_sums(native: Any, backend: FrameEngine, aggs: Sequence[Agg],
                   missing: Mapping[str, Any]) -> dict[Agg, np.ndarray] | None:
    """The ungrouped row counts, Σk and Σk² of an in-memory frame whose columns are plain
    numpy arrays of at most one block (:data:`_BLOCK` rows): each ``k = round(clip((x −
    c)/q))`` computed by the very operations of :func:`_block_sums`, each sum in one call,
    without the blocked pass's bookkeeping (block ranges, threads, scratch tables, per-block
    dictionaries), which on a thousand rows costs more than the arithmetic. None where this
    does not apply, and :func:`_numpy_sums` runs instead: another kind of aggregate, a column
    not held as a plain array of at most one block, or a sum that is not an integer.

    A sum of integer-valued doubles bounded by :class:`FixedPoint` (``|Σk| < 2⁵³``,
    ``Σk² < 2⁵³``, every partial sum too) is exact in any order, so these are the blocked
    pass's numbers bit for bit. The one value that makes a sum a non-integer is NaN (it
    survives scaling, clipping and rounding; ±inf is clipped to the bounds): a column holding
    one is handed to the blocked pass, which drops it or puts the public fill value in its
    place, as it does for every column. A missing value so changes which path computes the
    same numbers, never the numbers, and nothing here raises or warns (``np.errstate``:
    scaling a value near ±1.8e308 by ``1/q`` overflows to ±inf, which the clip maps to the
    bound)."""
    if backend.lazy:
        return None
    out: dict[Agg, np.ndarray] = {}
    rows: list[Agg] = []
    scaled: dict[tuple[str, FixedPoint], np.ndarray] = {}  # k of a column in fixed point fp
    with np.errstate(over="ignore", invalid="ignore"):
        for agg in aggs:
            if agg.kind == "rows":
                rows.append(agg)
                continue
            column, fp = agg.column, agg.fp
            if agg.kind not in _ONE_BLOCK_KINDS or column is None or fp is None:
                return None
            k = scaled.get((column, fp))
            if k is None:
                values = _one_block_view(native, backend, column)
                if values is None:
                    return None
                k = scaled[column, fp] = _fixed_point_k(
                    values, fp, np.empty(values.size, dtype=np.float64))
            total = float(np.add.reduce(k) if agg.kind == "sum" else np.dot(k, k))
            if not total.is_integer():  # NaN in the column: the blocked pass handles it
                return None
            out[agg] = np.array([total])
    for agg in rows:
        count = _one_block_rows(native, backend, agg, scaled, missing)
        if count is None:
            return None
        out[agg] = np.array([float(count)])
    return out


def _one_block_view(native: Any, backend: FrameEngine, column: str) -> np.ndarray | None:
    """``column`` as a plain numpy array of at most one block, or None."""
    values = backend.numpy_column(native, column)
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.size <= _BLOCK:
        return values
    return None


def _one_block_rows(native: Any, backend: FrameEngine, agg: Agg,
                    scaled: Mapping[tuple[str, FixedPoint], np.ndarray],
                    missing: Mapping[str, Any]) -> int | None:
    """The rows of :func:`one_block_sums`'s frame (``agg.column`` None or filled: the public
    size), or those where ``agg.column`` holds a value under ``"drop"``: all of them when a
    sum of the column was an integer (no NaN) or its dtype cannot hold NaN, else those that
    are not NaN (a plain array holds no other kind of missing value). None: the column is not
    a plain array of at most one block."""
    if agg.column is None:
        return backend.count_rows(native)
    values = _one_block_view(native, backend, agg.column)
    if values is None:
        return None
    if not drops(agg.column, {}, missing) or values.dtype.kind != "f" or any(
            column == agg.column for column, _ in scaled):
        return int(values.size)
    return int(values.size - np.count_nonzero(np.isnan(values)))
