"""Verified derivations on Dask: the pandas evaluation
(:mod:`dpframe.backends.pandas._rowwise`), partition by partition.

A Dask frame's partitions are pandas frames, so each step runs there exactly as on a pandas
frame (``map_partitions``), with the Polars schema verified on the frame's metadata; the
metadata itself is computed by the same function on the empty ``_meta`` frame, so Dask never
infers it by running the step on made-up values.
"""

from __future__ import annotations

from typing import Any

from dpframe.backends.pandas._rowwise import apply_step, polars_schema
from dpframe.rowwise.engines import RowwiseTarget

__all__ = ["TARGET", "PartitionedPandasTarget"]


class PartitionedPandasTarget(RowwiseTarget):
    """Dask: the pandas evaluation, partition by partition (``map_partitions``)."""

    label = "Dask"

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        args = (step.kind, step.predicate, step.columns)
        frame_schema = schema or polars_schema(native._meta)
        meta = apply_step(native._meta, *args, frame_schema)
        return native.map_partitions(apply_step, *args, frame_schema, meta=meta)


#: the compiler the Dask adapter names (``Backend.rowwise``)
TARGET = PartitionedPandasTarget()
