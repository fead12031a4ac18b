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

#: Rows per block of the bin-count kernel (its per-block cost includes the G·B count cells).
_BIN_BLOCK = 1 << 20


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
    """The bin counts from a zero-copy numpy view (see :func:`_numpy_sums`), or None."""
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
    bins = agg.bins
    cells = n_groups * bins.count
    out = np.zeros(cells, dtype=np.float64)
    for start in range(0, values.size, _BIN_BLOCK):
        block, missing = _read_block(values, start, start + _BIN_BLOCK)
        block = block.astype(np.float64, copy=False)  # (as the narwhals path casts integers)
        if missing is _UNCHECKED:
            missing = np.isnan(block)
        keep = None if codes is None else codes[start : start + _BIN_BLOCK] >= 0
        if missing is not None and missing.any():
            if policy == DROP:
                keep = ~missing if keep is None else keep & ~missing
            else:
                block = np.where(missing, float(policy), block)
        j = bins.index(block)
        if codes is not None:
            j += codes[start : start + _BIN_BLOCK].astype(np.int64) * bins.count
        if keep is not None:
            j = j[keep]
        out += np.bincount(j, minlength=cells)
    return out.reshape(n_groups, bins.count)
