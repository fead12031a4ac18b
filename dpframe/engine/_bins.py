"""Exact rows per bin of a column (:class:`Bins`), per declared key."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine._expressions import _group_columns, _keep_declared
from dpframe.engine._frame_engine import FrameEngine
from dpframe.engine._kernel import _UNCHECKED, _in_threads, _parts, _read_block
from dpframe.engine._row_expressions import (
    as_float_if,
    is_present,
)
from dpframe.mechanisms.quantiles import CumulativeCounts, fine_blocks_read
from dpframe.query import DROP, Agg, Bins

__all__: list[str] = []

#: Rows per block of the bin-count kernel: 64 K doubles (512 KB) and their indices stay in the
#: CPU cache between the steps of the bin formula.
_BIN_BLOCK = 1 << 16
#: The two-pass count (:func:`two_pass_counts`) runs from this many bins on (below, the count
#: array stays in cache and one pass is cheaper) and from this many rows on (below, the dense
#: count is no dearer); both give the sampler the same reads, so the choice is free.
TWO_PASS_MIN_BINS = 1 << 15
TWO_PASS_MIN_ROWS = 1 << 14
#: Fine bins per block of the block totals (the sampler's :class:`CumulativeCounts`).
_FINE = CumulativeCounts.BLOCK
#: Blocks of :data:`_BIN_BLOCK` rows per block of a count split between threads (256 K
#: rows: 2 MB of doubles, within a core's 2 MB L2 share): fewer blocks, fewer hand-overs of
#: the GIL. Measured on the 10 M-row median (2 cores): 62 ms on one thread; split, 62 ms
#: with 64 K-row blocks, 53 ms with 128 K, 47-50 ms with 256 K, 51-57 ms with 512 K. With
#: one core kept busy by another process the split is slower than one thread (73-82 against
#: 68-75 ms), as the mean's kernel is (20-22 against 15 ms): a thread sharing its core waits
#: for the GIL held by one the OS has set aside (handing out blocks as the threads ask for
#: them instead of fixed parts was measured no better: 74-82 ms).
_THREAD_BLOCKS = 4


def _bin_counts(
    native: Any,
    backend: FrameEngine,
    agg: Agg,
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    method: str,
) -> tuple[np.ndarray, bool]:
    """Exact rows per bin of ``agg.column`` (:class:`Bins`), per declared key: a ``(G, B)``
    array of integer-valued doubles (``G = 1`` without a group-by). Rows with undeclared keys
    are left out; missing values follow the column's policy (dropped, or binned at the public
    fill value). With it, whether the counts are integers by construction: the numpy kernel's
    are int64 counts (below 2⁵³ rows) turned into doubles, so the caller need not check
    their ``G·B`` cells (at 2²² bins that check cost about 30 ms of a 10 M-row quantile)."""
    assert agg.column is not None and agg.bins is not None
    cols = _group_columns(group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])]
    n_groups = len(tuples) if cols else 1
    if method != "narwhals":
        counts = _numpy_bin_counts(native, backend, agg, missing.get(agg.column, DROP),
                                   group_by, list(keys or []), n_groups)
        if counts is not None:
            return counts, True
    bins, column = agg.bins, agg.column
    frame = backend.engine_frame(native)
    x = nw.col(column) if columns[column] == nw.Float64 else nw.col(column).cast(nw.Float64)
    present = is_present(column, columns[column])
    policy = missing.get(column, DROP)
    if policy == DROP:
        frame = frame.filter(present)
    else:
        x = nw.when(present).then(x).otherwise(nw.lit(float(policy)))
    frame = _keep_declared(frame, cols, tuples, columns)
    label = "__dp_bin"
    frame = frame.select(*(nw.col(c) for c in cols), bins.expression(x).alias(label))
    result = frame.group_by(*cols, label).agg(nw.len().alias("__dp_len"))
    if isinstance(result, nw.LazyFrame):
        result = backend.collect(result)
    j = np.asarray(result.get_column(label).to_numpy(), dtype=np.int64)
    n = np.asarray(result.get_column("__dp_len").to_numpy(), dtype=np.float64)
    group = np.zeros(j.size, dtype=np.int64)
    if cols:
        import pandas as pd

        found = [[as_float_if(columns[c], v) for v in result.get_column(c).to_list()]
                 for c in cols]
        declared_keys = [[as_float_if(columns[c], k[i]) for k in tuples]
                         for i, c in enumerate(cols)]
        if len(cols) == 1:
            group = pd.Index(declared_keys[0], dtype=object).get_indexer(
                pd.Index(found[0], dtype=object))
        else:
            group = pd.MultiIndex.from_arrays(declared_keys).get_indexer(
                pd.MultiIndex.from_arrays(found))
    out = np.zeros(n_groups * bins.count, dtype=np.float64)
    keep = group >= 0
    np.add.at(out, group[keep] * bins.count + j[keep], n[keep])
    return out.reshape(n_groups, bins.count), False


def _numpy_bin_counts(native: Any, backend: FrameEngine, agg: Agg, policy: Any,
                      group_by: str | tuple[str, ...] | None, keys: list[Any], n_groups: int
                      ) -> np.ndarray | None:
    """The bin counts from a zero-copy numpy view (see :func:`_numpy_sums`), or None.

    One pass over the column in cache-sized blocks (:data:`_BIN_BLOCK` rows), each row added
    to its cell of one int64 count array (:func:`_add_block`); no per-block array of the
    ``G·B`` cells, so the cost is per row, not per block × cell. A quantile's bins (with the
    draws its mechanisms recorded) are counted in two passes instead, exactly where the draws
    read (:func:`two_pass_counts`, :func:`grouped_two_pass_counts`)."""
    assert agg.column is not None and agg.bins is not None
    if backend.lazy or (
            group_by is not None and not isinstance(group_by, str)):
        return None
    values = backend.numpy_column(native, agg.column)
    if values is None:
        return None
    codes = None
    if group_by is not None:
        assert isinstance(group_by, str)
        codes = backend.key_codes(native, group_by, keys)
        if codes is None:
            return None
    counts = (two_pass_counts(values, agg.bins, policy) if codes is None else
              grouped_two_pass_counts(values, codes, agg.bins, policy, n_groups))
    if counts is not None:
        return counts
    if values.size <= _BIN_BLOCK:  # one block: counted straight into doubles
        binning = _BlockBinning(agg.bins, n_groups, values.size, np.float64)
        block, missing = _read_block(values, 0, values.size)
        binning.add(block, missing, policy, codes)
        return binning.counts()
    parts, step = _split(values)
    binnings = [_BlockBinning(agg.bins, n_groups, min(values.size, step)) for _ in parts]
    _run_parts(parts, step, functools.partial(_dense_pass, values, codes, policy, binnings))
    for part in binnings[1:]:  # int64 counts: exact in any order (fixed all the same)
        binnings[0].cells += part.cells
    return binnings[0].counts()


def _split(values: Any) -> tuple[list[tuple[int, int]], int]:
    """The row ranges of a column's count, one per thread (:func:`_parts`: from the column's
    length and how it is held only, never a value), and the rows per block: :data:`_BIN_BLOCK`
    on one thread, :data:`_THREAD_BLOCKS` times more when split (numpy holds the GIL between
    its calls, so each block costs a few hand-overs of it between the threads)."""
    parts = _parts(values, _THREAD_BLOCKS * _BIN_BLOCK)
    return parts, _BIN_BLOCK if len(parts) == 1 else _THREAD_BLOCKS * _BIN_BLOCK


def _run_parts(parts: list[tuple[int, int]], step: int,
               task: Callable[[int, int, int, int], None]) -> None:
    """``task(i, start, stop, step)`` for each part ``i`` of :func:`_split` (blocks of
    ``step`` rows): here for one part (no thread), else each on a thread of its own
    (:func:`_in_threads`: every thread joined, the first exception re-raised here, the
    caller's ``np.errstate`` in force). Each part writes only its own counts and its own rows
    of any per-row array, and the caller adds the parts' counts in a fixed order: integers
    (int64, or doubles below 2⁵³), so the sums are exact and the result is the same bits as
    one pass over the column."""
    if len(parts) == 1:
        task(0, *parts[0], step)
        return
    _in_threads([functools.partial(task, i, lo, hi, step) for i, (lo, hi) in enumerate(parts)])


def _dense_pass(values: Any, codes: np.ndarray | None, policy: Any,
                binnings: list[_BlockBinning], part: int, lo: int, hi: int, step: int) -> None:
    """The dense count of rows ``lo:hi`` (whole blocks) into ``binnings[part]``."""
    binning = binnings[part]
    for start in range(lo, hi, step):
        stop = min(start + step, hi)
        block, missing = _read_block(values, start, stop)
        block_codes = None if codes is None else codes[start:stop]
        binning.add(block, missing, policy, block_codes)


class _BlockBinning:
    """Rows per bin and group, accumulated block by block (the numpy twin of
    :meth:`Bins.expression`, bit for bit).

    The bin of a value is :meth:`Bins.index`'s ``min(⌊B·t⌋, B − 1)``,
    ``t = (clip(x, l, u)·½ − l/2) / (u/2 − l/2)``, computed by the same IEEE operations in the
    same order on a reused buffer. Two steps are dropped without changing any result: ``⌊·⌋``
    (``B·t ≥ 0``, as ``x ≥ l`` gives ``x·½ ≥ l·½`` under monotone rounding, so the cast's
    truncation is the floor), and ``min(·, B − 1)``: ``B·t ≤ B`` (``x ≤ u`` gives
    ``x·½ − l/2 ≤ u/2 − l/2``), so each group gets ``B + 1`` cells and the count of cell ``B``
    (values at ``u`` exactly) is added to cell ``B − 1`` at the end. Rows are added with
    ``np.add.at`` into int64 cells (exact); rows with a missing value are dropped or binned at
    the public fill value, rows of undeclared keys (code −1) dropped, before any index is
    formed, so every index is in range for every value (±inf clamps to the bounds).

    ``cells``: int64 (converted to doubles in place at the end), or float64 for a table of
    one block (:data:`_BIN_BLOCK` rows: its counts are exact in doubles, and the cells are
    then read once less)."""

    def __init__(self, bins: Any, n_groups: int, block_rows: int,
                 cells: type[np.int64] | type[np.float64] = np.int64) -> None:
        self.bins = bins
        self.stride = bins.count + 1
        self.n_groups = n_groups
        self.cells = np.zeros(n_groups * self.stride, dtype=cells)
        self.one = cells(1)  # (1.0 in float cells: their sums exact below 2^53)
        self.buffer = np.empty(block_rows, dtype=np.float64)
        self.index = np.empty(block_rows, dtype=np.int64)

    def add(self, block: np.ndarray, missing: Any, policy: Any,
            codes: np.ndarray | None) -> None:
        """Count one block (``missing``: as :func:`_read_block` returns it)."""
        block, codes = present_values(block, missing, policy, codes)
        j = self._bin_index(block)
        if codes is not None:
            j += codes.astype(np.int64) * self.stride
        np.add.at(self.cells, j, self.one)  # (ufunc.at's fast loop: the cells' own type)

    def block_index(self, block: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``⌊B·t⌋ // 1024`` of each value of a block of :func:`present_values` (the block of
        :meth:`_bin_index`'s cell), written into ``out`` (uint16). With ``B`` a multiple of
        1,024 as ``⌊(B/1024)·t⌋``: scaling by the power of two 1,024 is exact, so
        ``fl(t·B) = 1024·fl(t·B/1024)`` and ``⌊⌊x⌋/1024⌋ = ⌊x/1024⌋``: the same block,
        one operation less."""
        bins = self.bins
        y = np.clip(block, bins.lower, bins.upper, out=self.buffer[: block.size])
        y *= 0.5
        y -= bins.half_lower
        y /= bins.half_width
        if bins.count % _FINE == 0:
            y *= bins.count // _FINE
            out[...] = y  # truncation toward zero: the floor, as y ≥ 0
        else:
            y *= bins.count
            j = self.index[: block.size]
            j[...] = y
            j >>= 10
            out[...] = j
        return out

    def _bin_index(self, block: np.ndarray) -> np.ndarray:
        """The cell ``⌊B·t⌋ ∈ [0, B]`` of each value of a block of :func:`present_values`
        (in a buffer reused by the next block)."""
        bins = self.bins
        y = np.clip(block, bins.lower, bins.upper, out=self.buffer[: block.size])
        y *= 0.5
        y -= bins.half_lower
        y /= bins.half_width
        y *= bins.count
        j = self.index[: block.size]
        j[...] = y  # truncation toward zero: the floor, as y ≥ 0
        return j

    def counts(self) -> np.ndarray:
        """The ``(G, B)`` counts as integer-valued doubles, converted in place in the count
        array's own memory (:func:`_as_doubles_in_place`): no second ``G·(B + 1)`` array."""
        b = self.bins.count
        cells = self.cells.reshape(self.n_groups, self.stride)
        cells[:, b - 1] += cells[:, b]
        if self.cells.dtype == np.float64:
            return cells[:, :b]
        return _as_doubles_in_place(self.cells).reshape(self.n_groups, self.stride)[:, :b]


def present_values(block: np.ndarray, missing: Any, policy: Any, codes: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """The values of one block that are counted, as float64 (integers cast, as the narwhals
    path casts them), with their group codes: missing values (``missing`` as
    :func:`_read_block` returns it) dropped or replaced by the public fill value ``policy``,
    rows of undeclared keys (code −1) dropped."""
    if block.dtype != np.float64:
        block = block.astype(np.float64)
    if missing is _UNCHECKED:
        missing = np.isnan(block)
    keep = None if codes is None else codes >= 0
    if missing is not None and missing.any():
        if policy == DROP:
            keep = ~missing if keep is None else keep & ~missing
        else:
            block = np.where(missing, float(policy), block)
    if keep is not None and not keep.all():
        block = block[keep]
        codes = None if codes is None else codes[keep]
    return block, codes


def _as_doubles_in_place(cells: np.ndarray) -> np.ndarray:
    """The int64 array ``cells`` as doubles in its own buffer (which it then no longer holds
    as integers), converted in cache-sized slices: each slice is read as int64 and written
    back as float64 over the same 8 bytes per cell (numpy copies an overlapping source before
    writing). Exact for counts below 2^53 (every count is at most the number of rows). At 2²²
    cells this saves a fresh 32 MB array and its first-touch page faults."""
    doubles = cells.view(np.float64)
    for start in range(0, cells.size, _BIN_BLOCK):
        stop = start + _BIN_BLOCK
        doubles[start:stop] = cells[start:stop]
    return doubles


def two_pass_counts(values: Any, bins: Bins, policy: Any) -> np.ndarray | None:
    """The ``(1, B)`` counts the draws of ungrouped quantiles read, in two passes; None when
    the dense count is used instead (no recorded draws, few bins or rows). Several quantile
    queries of one column and grid in a release are one aggregate here, whose window is the
    union of theirs (:func:`dpframe.query.merged_reads`): the column is read by one count.

    *What the draws read.* A draw of the run sampler
    (:func:`dpframe.mechanisms.quantiles.race_over_runs`) reads the totals of the 1,024-bin
    blocks, ``c_0``, ``c_{B−1}`` and exact counts only inside the blocks ``k₁ … k₂`` that
    :func:`~dpframe.mechanisms.quantiles.fine_blocks_read` names from those totals and the
    draw's public parameters (level, offset, padding, λ: recorded on ``bins.window`` when
    each mechanism was built). Counts that agree with the exact ones there give every draw
    the same bin for the same random bits (tests/mechanisms/test_quantile_run_reads.py), so
    the released law, the seeded outputs and the privacy guarantee are those of the dense
    count.

    *Pass 1* computes every counted row's block (:func:`present_values` and the dense
    count's formula, :meth:`_BlockBinning.block_index`), keeps it (two bytes a row) and
    counts the rows per block (``B/1,024 + 1`` cells, in cache). *Pass 2* counts fine bins
    only for the rows whose block is *read*: in some recorded draw's ``k₁ … k₂``, or the
    first or last block (which hold ``c_0`` and ``c_{B−1}``); their bins are computed by the
    same formula. The result is an ordinary count vector: exact in every read block; in every
    other block the block's total sits in its first bin, so every block total is exact. (An
    audit reading these counts elsewhere than the sampler does sees that arrangement, not
    the fine counts.)

    *Timing.* Pass 2's time grows with the rows whose value lies in the read blocks, as every
    aggregation's time depends on the data (timing side channels are out of scope:
    docs/audit.md); the values read and the output distribution are those of the dense count.
    Memory: the ``B`` doubles of the result, two bytes a row for the blocks (a quarter of a
    float column) and cache-sized buffers."""
    draws = None if bins.window is None else bins.window.draws()
    b = bins.count
    if (draws is None or b < max(TWO_PASS_MIN_BINS, 2 * _FINE)
            or values.size < TWO_PASS_MIN_ROWS):
        return None
    n_blocks = -(-b // _FINE)
    parts, step = _split(values)
    binnings = [_BlockBinning(bins, 1, min(values.size, step)) for _ in parts]
    # cell n_blocks: index B when B % 1024 = 0
    coarse = [np.zeros(n_blocks + 1, dtype=np.int64) for _ in parts]
    block_of = np.empty(values.size, dtype=np.uint16)  # each row's block (≤ 4,096)
    # row blocks not counted as they are (missing values, integers)
    recount = [False] * -(-values.size // step)
    _run_parts(parts, step, functools.partial(_coarse_pass, values, policy, binnings, coarse,
                                              block_of, recount))
    for counts in coarse[1:]:  # int64 counts: exact in any order (fixed all the same)
        coarse[0] += counts
    totals = coarse[0][:n_blocks]
    totals[-1] += coarse[0][n_blocks]
    read = _read_blocks(totals, b, draws)
    out = np.zeros(b, dtype=np.float64)
    _place_unread(out, totals, np.nonzero(~read[:n_blocks] & (totals > 0))[0])
    if (read[:n_blocks] & (totals > 0)).any():
        runs = _runs(read)
        fine = [out] + [np.zeros(b, dtype=np.float64) for _ in parts[1:]]
        _run_parts(parts, step, functools.partial(_fine_counts, fine, values, block_of, runs,
                                                  read, policy, recount, binnings))
        _add_parts([f.reshape(1, b) for f in fine], [runs])
    return out.reshape(1, b)


def _add_parts(fine: list[np.ndarray], runs: list[list[tuple[int, int]]]) -> None:
    """Add the fine counts of the other parts to ``fine[0]`` (each ``(G, B)``), in part
    order, over group ``g``'s read blocks ``runs[g]`` only: the only bins a part writes (every
    other page of its array is never touched). Counts below 2⁵³ in doubles: exact."""
    b = fine[0].shape[1]
    for other in fine[1:]:
        for g, group_runs in enumerate(runs):
            for k1, k2 in group_runs:
                rows = slice(k1 * _FINE, min((k2 + 1) * _FINE, b))
                fine[0][g, rows] += other[g, rows]


def _coarse_pass(values: Any, policy: Any, binnings: list[_BlockBinning],
                 coarse: list[np.ndarray], block_of: np.ndarray, recount: list[bool],
                 part: int, lo: int, hi: int, step: int) -> None:
    """Pass 1 of :func:`two_pass_counts` over rows ``lo:hi`` (whole blocks): each counted
    row's block into its rows of ``block_of``, the rows per block into ``coarse[part]``,
    and for each row block whether pass 2 reads it again (``recount``)."""
    binning, counts = binnings[part], coarse[part]
    for start in range(lo, hi, step):
        block, missing = _read_block(values, start, min(start + step, hi))
        present, _ = present_values(block, missing, policy, None)
        recount[start // step] = present is not block
        ids = binning.block_index(present, block_of[start:start + present.size])
        counts += np.bincount(ids, minlength=counts.size)


def _runs(read: np.ndarray) -> list[tuple[int, int]]:
    """The runs ``[k₁, k₂]`` of consecutive read blocks."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], read, [False]]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), (edges[1::2] - 1).tolist(), strict=True))


def _place_unread(out: np.ndarray, totals: np.ndarray, unread: np.ndarray) -> None:
    """Each unread non-empty block's total in its first bin (empty blocks: their pages of
    ``out`` stay untouched)."""
    out[unread * _FINE] = totals[unread]


def _read_blocks(totals: np.ndarray, b: int, draws: Any) -> np.ndarray:
    """Which blocks are counted bin by bin (cell ``n_blocks``: the block of index ``B``, the
    last): the union of every draw's ``k₁ … k₂``, and the first and the last block."""
    n_blocks = totals.size
    read = np.zeros(n_blocks + 1, dtype=bool)
    for d in draws:
        k1, k2 = fine_blocks_read(totals, b, d.q, d.offset, d.padding, d.coefficient)
        read[k1:k2 + 1] = True
    read[0] = read[n_blocks - 1] = True
    read[n_blocks] = read[n_blocks - 1]
    return read


def _fine_counts(fine: list[np.ndarray], values: Any, block_of: np.ndarray,
                 runs: list[tuple[int, int]], read: np.ndarray, policy: Any,
                 recount: list[bool], binnings: list[_BlockBinning], part: int, lo: int,
                 hi: int, step: int) -> None:
    """Pass 2 over rows ``lo:hi`` (whole blocks): add the rows of the read blocks (``runs``
    of ``read``) to their bins of ``fine[part]`` (exact: integers below 2^53 in doubles),
    selected by two comparisons per run of read blocks on the two-byte blocks of pass 1. A
    row block whose values pass 1 did not count as they are is read again as pass 1 read it
    and binned whole."""
    out, binning = fine[part], binnings[part]
    b = binning.bins.count
    for start in range(lo, hi, step):
        block, missing = _read_block(values, start, min(start + step, hi))
        if recount[start // step]:
            block, _ = present_values(block, missing, policy, None)
            j = binning._bin_index(block)
            rows = j[read[j >> 10]]
        else:
            rows = binning._bin_index(block[_in_runs(block_of[start:start + block.size],
                                                     runs, read.size - 1)])
        if rows.size:
            np.minimum(rows, b - 1, out=rows)  # (index B: values at u, in the last bin)
            np.add.at(out, rows, 1.0)


def _in_runs(ids: np.ndarray, runs: list[tuple[int, int]], top: int) -> np.ndarray:
    """Which rows' blocks lie in one of the ``runs`` ``[k₁, k₂]`` (``top``: the largest
    block a row can have; a run's bound at 0 or ``top`` needs no comparison)."""
    keep: np.ndarray | None = None
    for k1, k2 in runs:
        if k1 > 0 and k2 < top:
            in_run = ids >= k1
            in_run &= ids <= k2
        else:
            in_run = ids >= k1 if k1 > 0 else ids <= k2
        if keep is None:
            keep = in_run
        else:
            keep |= in_run
    return np.zeros(ids.size, dtype=bool) if keep is None else keep


def grouped_two_pass_counts(values: Any, codes: np.ndarray, bins: Bins, policy: Any,
                            n_groups: int) -> np.ndarray | None:
    """:func:`two_pass_counts` per group (``codes``: each row's group, −1 for none): the
    ``(G, B)`` counts, exact in every block some recorded draw reads in that group (from the
    group's own block totals) and in each group's first and last block, each other block's
    total in its first bin. Pass 1 keeps each row's cell ``g·(B/1024 + 1) + block`` (two
    bytes; the dense count when the ``G·(B/1024 + 1)`` cells do not fit), pass 2 selects the
    rows of read cells by a lookup in the ``G·(B/1024 + 1)`` read flags."""
    draws = None if bins.window is None else bins.window.draws()
    b = bins.count
    stride = -(-b // _FINE) + 1  # blocks per group and the cell of index B
    if (draws is None or b < max(TWO_PASS_MIN_BINS, 2 * _FINE)
            or values.size < TWO_PASS_MIN_ROWS or not 0 < n_groups * stride < 1 << 16):
        return None
    parts, step = _split(values)
    binnings = [_BlockBinning(bins, 1, min(values.size, step)) for _ in parts]
    coarse = [np.zeros(n_groups * stride, dtype=np.int64) for _ in parts]
    cell_of = np.empty(values.size, dtype=np.uint16)
    recount = [False] * -(-values.size // step)
    _run_parts(parts, step, functools.partial(_grouped_coarse_pass, values, codes, policy,
                                              stride, binnings, coarse, cell_of, recount))
    for counts in coarse[1:]:  # int64 counts: exact in any order (fixed all the same)
        coarse[0] += counts
    totals = coarse[0].reshape(n_groups, stride)
    totals[:, -2] += totals[:, -1]
    read = np.stack([_read_blocks(totals[g, :-1], b, draws) for g in range(n_groups)])
    out = np.zeros((n_groups, b), dtype=np.float64)
    for g in range(n_groups):
        _place_unread(out[g], totals[g, :-1],
                      np.nonzero(~read[g, :-1] & (totals[g, :-1] > 0))[0])
    fine = [out] + [np.zeros((n_groups, b), dtype=np.float64) for _ in parts[1:]]
    _run_parts(parts, step, functools.partial(_grouped_fine_counts, fine, values, codes,
                                              cell_of, read.reshape(-1), policy, recount,
                                              binnings))
    if len(fine) > 1:
        _add_parts(fine, [_runs(read[g]) for g in range(n_groups)])
    return out


def _grouped_coarse_pass(values: Any, codes: np.ndarray, policy: Any, stride: int,
                         binnings: list[_BlockBinning], coarse: list[np.ndarray],
                         cell_of: np.ndarray, recount: list[bool], part: int, lo: int,
                         hi: int, step: int) -> None:
    """Pass 1 of :func:`grouped_two_pass_counts` over rows ``lo:hi`` (whole blocks): each
    counted row's cell ``g·stride + block`` into its rows of ``cell_of`` (row blocks counted
    as they are), the rows per cell into ``coarse[part]``, which row blocks pass 2 reads
    again into ``recount``."""
    binning, counts = binnings[part], coarse[part]
    ids = np.empty(min(hi - lo, step), dtype=np.uint16)
    for start in range(lo, hi, step):
        stop = min(start + step, hi)
        block, missing = _read_block(values, start, stop)
        present, kept = present_values(block, missing, policy, codes[start:stop])
        assert kept is not None
        again = recount[start // step] = present is not block
        cells = binning.block_index(present, ids[:present.size]) + kept * stride
        counts += np.bincount(cells, minlength=counts.size)
        if not again:
            cell_of[start:start + present.size] = cells


def _grouped_fine_counts(fine: list[np.ndarray], values: Any, codes: np.ndarray,
                         cell_of: np.ndarray, flags: np.ndarray, policy: Any,
                         recount: list[bool], binnings: list[_BlockBinning], part: int,
                         lo: int, hi: int, step: int) -> None:
    """Pass 2 of :func:`grouped_two_pass_counts` over rows ``lo:hi`` (whole blocks): add the
    rows of read cells (``flags``, by ``g·stride + block``) to their bins of ``fine[part]``
    (``(G, B)``); a row block pass 1 did not count as it is, read again as pass 1 read it."""
    out, binning = fine[part], binnings[part]
    b = binning.bins.count
    stride = flags.size // out.shape[0]
    for start in range(lo, hi, step):
        block, missing = _read_block(values, start, min(start + step, hi))
        row_codes = codes[start:start + block.size]
        if recount[start // step]:
            present, kept = present_values(block, missing, policy, row_codes)
            assert kept is not None
            j = binning._bin_index(present)
            keep = flags[(j >> 10) + kept * stride]
            j, kept = j[keep], kept[keep]
        else:
            keep = flags.take(cell_of[start:start + block.size])
            j, kept = binning._bin_index(block[keep]), row_codes[keep]
        if j.size:
            np.minimum(j, b - 1, out=j)
            np.add.at(out.reshape(-1), kept.astype(np.int64) * b + j, 1.0)
