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
from dpframe.query import DROP, Agg

__all__: list[str] = []

#: Rows per block of the bin-count kernel: 64 K doubles (512 KB) and their indices stay in the
#: CPU cache between the steps of the bin formula.
_BIN_BLOCK = 1 << 16


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
        if block.dtype != np.float64:
            block = block.astype(np.float64)  # (as the narwhals path casts integers)
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
        j = self._bin_index(block)
        if codes is not None:
            j += codes.astype(np.int64) * self.stride
        np.add.at(self.cells, j, 1)

    def _bin_index(self, block: np.ndarray) -> np.ndarray:
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
