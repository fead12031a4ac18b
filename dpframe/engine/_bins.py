"""Exact rows per bin of a column (:class:`Bins`), per declared key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine._expressions import _group_columns, _keep_declared
from dpframe.engine._frame_engine import FrameEngine
from dpframe.engine._kernel import _UNCHECKED, _read_block
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


def _bin_counts(
    native: Any,
    backend: FrameEngine,
    agg: Agg,
    columns: Mapping[str, Any],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    method: str,
) -> np.ndarray:
    """Exact rows per bin of ``agg.column`` (:class:`Bins`), per declared key: a ``(G, B)``
    array of integer-valued doubles (``G = 1`` without a group-by). Rows with undeclared keys
    are left out; missing values follow the column's policy (dropped, or binned at the public
    fill value)."""
    assert agg.column is not None and agg.bins is not None
    cols = _group_columns(group_by)
    tuples = [k if len(cols) > 1 else (k,) for k in (keys or [])]
    n_groups = len(tuples) if cols else 1
    if method != "narwhals":
        counts = _numpy_bin_counts(native, backend, agg, missing.get(agg.column, DROP),
                                   group_by, list(keys or []), n_groups)
        if counts is not None:
            return counts
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
    return out.reshape(n_groups, bins.count)


def _numpy_bin_counts(native: Any, backend: FrameEngine, agg: Agg, policy: Any,
                      group_by: str | tuple[str, ...] | None, keys: list[Any], n_groups: int
                      ) -> np.ndarray | None:
    """The bin counts from a zero-copy numpy view (see :func:`_numpy_sums`), or None.

    One pass over the column in cache-sized blocks (:data:`_BIN_BLOCK` rows), each row added
    to its cell of one int64 count array (:func:`_add_block`); no per-block array of the
    ``G·B`` cells, so the cost is per row, not per block × cell."""
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
    if codes is None:
        counts = two_pass_counts(values, agg.bins, policy)
        if counts is not None:
            return counts
    binning = _BlockBinning(agg.bins, n_groups, min(values.size, _BIN_BLOCK))
    for start in range(0, values.size, _BIN_BLOCK):
        block, missing = _read_block(values, start, start + _BIN_BLOCK)
        block_codes = None if codes is None else codes[start: start + _BIN_BLOCK]
        binning.add(block, missing, policy, block_codes)
    return binning.counts()


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
    formed, so every index is in range for every value (±inf clamps to the bounds)."""

    def __init__(self, bins: Any, n_groups: int, block_rows: int) -> None:
        self.bins = bins
        self.stride = bins.count + 1
        self.n_groups = n_groups
        self.cells = np.zeros(n_groups * self.stride, dtype=np.int64)
        self.buffer = np.empty(block_rows, dtype=np.float64)
        self.index = np.empty(block_rows, dtype=np.int64)

    def add(self, block: np.ndarray, missing: Any, policy: Any,
            codes: np.ndarray | None) -> None:
        """Count one block (``missing``: as :func:`_read_block` returns it)."""
        block, codes = present_values(block, missing, policy, codes)
        j = self._bin_index(block)
        if codes is not None:
            j += codes.astype(np.int64) * self.stride
        np.add.at(self.cells, j, 1)

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
    """The ``(1, B)`` counts one ungrouped quantile's draws read, in two passes; None when
    the dense count is used instead (no recorded draws, few bins or rows).

    *What the draws read.* A draw of the run sampler
    (:func:`dpframe.mechanisms.quantiles.race_over_runs`) reads the totals of the 1,024-bin
    blocks, ``c_0``, ``c_{B−1}`` and exact counts only inside the blocks ``k₁ … k₂`` that
    :func:`~dpframe.mechanisms.quantiles.fine_blocks_read` names from those totals and the
    draw's public parameters (level, offset, padding, λ: recorded on ``bins.window`` when
    each mechanism was built). Counts that agree with the exact ones there give every draw
    the same bin for the same random bits (tests/mechanisms/test_quantile_run_reads.py), so
    the released law, the seeded outputs and the privacy guarantee are those of the dense
    count.

    *Pass 1* bins every counted row (:func:`present_values`, the dense count's formula) into
    ``B/1,024 + 1`` block cells, which stay in cache, and counts the two end bins. *Pass 2*
    counts fine bins only inside the union of every recorded draw's blocks: a row enters
    only if its value lies in a block range's value range (two comparisons, with thresholds
    checked against the bin formula so that no row of the range is missed:
    :func:`_value_range`), and its bin is then computed by the same formula. The result is
    an ordinary count vector: exact in those blocks and at both ends; in every other block
    the block's total sits in its first bin (block 0: ``c_0`` in bin 0 and the rest in bin 1;
    the last block: ``c_{B−1}`` in its last bin and the rest in its first), so every block
    total is exact. (An audit reading these counts elsewhere than the sampler does sees that
    arrangement, not the fine counts.)

    *Timing.* Pass 2's time grows with the rows whose value lies in the read blocks, as every
    aggregation's time depends on the data (timing side channels are out of scope:
    docs/audit.md); the values read and the output distribution are those of the dense count.
    Memory: the ``B`` doubles of the result and two cache-sized buffers; no per-row array."""
    windows = None if bins.window is None else bins.window.draws()
    b = bins.count
    if (windows is None or b < max(TWO_PASS_MIN_BINS, 2 * _FINE)
            or values.size < TWO_PASS_MIN_ROWS):
        return None
    n_blocks = -(-b // _FINE)
    binning = _BlockBinning(bins, 1, min(values.size, _BIN_BLOCK))
    coarse = np.zeros(n_blocks + 1, dtype=np.int64)  # cell n_blocks: index B when B % 1024 = 0
    ends = [0, 0]
    missing_blocks: list[bool] = []
    for start in range(0, values.size, _BIN_BLOCK):
        block, missing = _read_block(values, start, start + _BIN_BLOCK)
        present, _ = present_values(block, missing, policy, None)
        missing_blocks.append(present is not block)
        j = binning._bin_index(present)
        ends[0] += int(np.count_nonzero(j == 0))
        ends[1] += int(np.count_nonzero(j >= b - 1))
        j >>= 10
        coarse += np.bincount(j, minlength=n_blocks + 1)
    coarse[n_blocks - 1] += coarse[n_blocks]
    totals = coarse[:n_blocks]
    ranges = _read_blocks(totals, b, windows)
    out = np.zeros(b, dtype=np.float64)
    unread = np.ones(n_blocks, dtype=bool)
    for k1, k2 in ranges:
        unread[k1:k2 + 1] = False
    _fill_unread(out, totals, ends, unread)
    if ranges:
        _fine_counts(out, values, bins, policy, ranges, missing_blocks, binning)
    return out.reshape(1, b)


def _read_blocks(totals: np.ndarray, b: int, draws: Any) -> list[tuple[int, int]]:
    """The union of every draw's blocks ``[k₁, k₂]``, as sorted disjoint ranges."""
    spans = sorted(fine_blocks_read(totals, b, d.q, d.offset, d.padding, d.coefficient)
                   for d in draws)
    merged: list[tuple[int, int]] = []
    for k1, k2 in spans:
        if k1 > k2:
            continue
        if merged and k1 <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], k2))
        else:
            merged.append((k1, k2))
    return merged


def _fill_unread(out: np.ndarray, totals: np.ndarray, ends: list[int], unread: np.ndarray
                 ) -> None:
    """Every unread block's total in its first bin; the end bins exact (module docstring of
    :func:`two_pass_counts`)."""
    b, last = out.size, totals.size - 1
    first_bins = np.nonzero(unread)[0]
    out[first_bins * _FINE] = totals[first_bins]
    if unread[0]:
        out[0], out[1] = ends[0], totals[0] - ends[0]
    if unread[last] and last * _FINE < b - 1:  # (a last block of one bin is that bin)
        out[last * _FINE] = totals[last] - ends[1]
        out[b - 1] = ends[1]


def _fine_counts(out: np.ndarray, values: Any, bins: Bins, policy: Any,
                 ranges: list[tuple[int, int]], missing_blocks: list[bool],
                 binning: _BlockBinning) -> None:
    """Pass 2: the exact counts of the bins of each block range, written into ``out``."""
    b = bins.count
    spans = []
    for k1, k2 in ranges:
        lo_bin, hi_bin = k1 * _FINE, min((k2 + 1) * _FINE, b)
        cells = np.zeros(hi_bin - lo_bin + 1, dtype=np.int64)  # (+1: index B, values at u)
        spans.append((lo_bin, hi_bin, *_value_range(bins, lo_bin, hi_bin), cells))
    for i, start in enumerate(range(0, values.size, _BIN_BLOCK)):
        block, missing = _read_block(values, start, start + _BIN_BLOCK)
        if missing_blocks[i] or block.dtype != np.float64:
            block, _ = present_values(block, missing, policy, None)
        for lo_bin, _, lo_value, hi_value, cells in spans:
            keep = block >= lo_value  # (NaN: never kept; dropped rows have no value)
            keep &= block <= hi_value
            rows = block[keep]
            if rows.size:
                j = binning._bin_index(rows) - lo_bin
                inside = j >= 0
                inside &= j < cells.size
                np.add.at(cells, j[inside], 1)
    for lo_bin, hi_bin, _, _, cells in spans:
        if hi_bin == b:
            cells[b - 1 - lo_bin] += cells[b - lo_bin]
        out[lo_bin:hi_bin] = cells[:hi_bin - lo_bin]


def _value_range(bins: Bins, lo_bin: int, hi_bin: int) -> tuple[float, float]:
    """Values ``[v₁, v₂]`` holding every value whose bin is in ``[lo_bin, hi_bin)``: the
    bin formula is monotone in the value (clamping, halving and scaling with round-to-nearest
    are), so a value below ``v₁`` has a bin below ``lo_bin`` once the formula's bin of the
    double just below ``v₁`` is below it, which is checked on the formula itself (the
    threshold moved down until it holds); likewise above. ``±inf`` at the ends (every value
    clamped to a bound is then kept), and when no threshold is found (never expected)."""
    lo_value = -np.inf
    if lo_bin > 0:
        lo_value = _threshold(bins, lo_bin, below=True)
    hi_value = np.inf
    if hi_bin < bins.count:
        hi_value = _threshold(bins, hi_bin, below=False)
    return lo_value, hi_value


def _threshold(bins: Bins, edge_bin: int, *, below: bool) -> float:
    """``below``: a value ``v`` with ``bin(nextdown(v)) < edge_bin``; else one with
    ``bin(nextup(v)) ≥ edge_bin``: the edge ``l + (u − l)·edge/B`` moved outward (by
    doubling steps from ``2^-40`` of the bounds' magnitude) until the formula agrees."""
    half = bins.half_lower + bins.half_width * (edge_bin / bins.count)
    edge = 2.0 * half
    step = max(abs(edge), abs(bins.lower), abs(bins.upper)) * 2.0**-40
    for _ in range(64):
        probe = np.nextafter(edge, -np.inf if below else np.inf)
        j = int(bins.index(np.array([probe]))[0])
        if (j < edge_bin) if below else (j >= edge_bin):
            return float(edge)
        edge = edge - step if below else edge + step
        step *= 2.0
        if not np.isfinite(edge):
            break
    return -np.inf if below else np.inf
