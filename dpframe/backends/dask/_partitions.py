"""Dask: the exact aggregates of :mod:`dpframe.engine._aggregation`, partition by partition.

A Dask DataFrame is a sequence of pandas partitions. Each partition is aggregated by
:func:`dpframe.engine._aggregation.aggregate` itself with the pandas adapter (passed in as
``partition_sums`` by :meth:`dpframe.backends.dask._adapter.DaskBackend.engine_sums`) — the
cache-blocked numpy kernel where the columns are plain numpy arrays (the usual case for
numbers read from Parquet), else the narwhals path inside pandas — and the per-partition
results, integers held exactly in doubles, are added in Python. Every partial sum, in any
order, is an integer below 2⁵³ (``|Σk| ≤ n·max|k| < 2⁵³`` for any subset of the ``n`` rows;
:class:`dpframe.query._aggregates.FixedPoint`), so the totals are exact and equal the in-memory
result bit for bit (tested).

Only the needed columns are read (the projection reaches the Parquet reader), partitions run
on the frame's own scheduler (threads locally, workers on a cluster), and only a few numbers
per partition and declared key come back to the driver. Compared with running the narwhals
expressions through Dask (about a dozen whole-column pandas operations per aggregate, and a
shuffle-based group-by), this is one pass over each partition and no shuffle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.query import Agg

#: The in-memory aggregation each partition runs (:func:`dpframe.engine._aggregation.aggregate`,
# pandas).
PartitionSums = Callable[..., dict[Agg, np.ndarray]]

__all__ = ["dask_sums"]


def _partition(part: Any, aggs: Sequence[Agg], missing: Mapping[str, Any],
               group_by: str | tuple[str, ...] | None, keys: Sequence[Any] | None,
               partition_sums: PartitionSums) -> dict[Agg, np.ndarray]:
    return partition_sums(part, aggs, missing=missing, group_by=group_by, keys=keys)


def dask_sums(
    native: Any,
    aggs: Sequence[Agg],
    missing: Mapping[str, Any],
    group_by: str | tuple[str, ...] | None,
    keys: Sequence[Any] | None,
    partition_sums: PartitionSums,
) -> dict[Agg, np.ndarray]:
    """Every aggregate of a Dask DataFrame, exactly: one task per partition, each running
    ``partition_sums`` on its pandas partition."""
    import dask

    cols = [] if group_by is None else [group_by] if isinstance(group_by, str) else list(
        group_by)
    needed = list(dict.fromkeys([*cols, *(c for a in aggs for c in a.columns())]))
    frame = native[needed] if needed else native[list(native.columns[:1])]
    task = dask.delayed(_partition, pure=True)
    parts = dask.compute(*(task(p, list(aggs), dict(missing), group_by, keys, partition_sums)
                           for p in frame.to_delayed()))
    n_groups = len(keys or []) if cols else 1
    out = {a: np.zeros(n_groups, dtype=np.float64) for a in aggs}
    for part in parts:
        for agg in aggs:
            out[agg] += part[agg]
    return out
