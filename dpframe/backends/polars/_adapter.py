"""Polars: eager DataFrames (numpy-backed columns the user may write) and LazyFrames
(plans dpframe reads and verifies)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe import engine
from dpframe._util.forking import check_polars_usable
from dpframe._util.identity import IdentityMap
from dpframe._util.memory import refuse_protected_memory
from dpframe._util.polars_plan import in_memory_rows, reads_only_files, scan_nodes
from dpframe.backends._base import Backend, registered
from dpframe.backends._private import private, private_column
from dpframe.backends._text import valid_arrow
from dpframe.backends.polars import _rowwise as polars_rowwise
from dpframe.backends.polars._batch_route import bare_file_scan, batch_sums
from dpframe.backends.polars._file_input import read_file
from dpframe.backends.polars._kernel_route import bare_scan, in_memory_scan, kernel_sums
from dpframe.backends.polars._memory import own_polars, polars_plan_ranges, polars_ranges
from dpframe.engine import Bounding, bound_polars
from dpframe.errors import UnsupportedInputError
from dpframe.query import Agg

__all__ = ["PolarsBackend", "PolarsLazyBackend", "is_polars_eager", "is_polars_lazy"]


def is_polars_eager(obj: Any) -> bool:
    """True for a ``polars.DataFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.DataFrame)


def is_polars_lazy(obj: Any) -> bool:
    """True for a ``polars.LazyFrame`` (without importing Polars)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.LazyFrame)


class _Polars(Backend):
    """What Polars DataFrames and LazyFrames share: Polars' own expressions (the API the
    narwhals ones mirror, so one builder serves both and a query skips narwhals'
    per-expression translation), bounding, the fork check, string validity."""

    family = "polars"
    rowwise = polars_rowwise.TARGET
    bounds_units = True
    polars_expressions = True

    def read_file(self, path: str, fmt: str, declared: Mapping[str, str]) -> Any:
        """A LazyFrame for either Polars adapter (specs read lazily)."""

        return read_file(path, fmt, declared)

    def check_usable(self) -> None:

        check_polars_usable()  # (a fork child of a process that ran Polars would hang)

    def bound_contributions(self, frame: Any, bounding: Bounding, *, columns: Sequence[str],
                            group_by: str | tuple[str, ...] | None = None,
                            keys: Sequence[Any] | None = None) -> tuple[Any, Backend]:
        """A LazyFrame (of either kind of input)."""
        return bound_polars(frame, bounding, columns=columns, group_by=group_by,
                            keys=keys), registered(PolarsLazyBackend.name)

    def count_units(self, frame: Any, column: str) -> int:
        """The number of distinct non-missing ids of ``column`` (read once, at protect)."""
        import polars as pl

        lazy = frame if self.lazy else frame.lazy()
        return int(lazy.select(pl.col(column).drop_nulls().n_unique()).collect().item())

    def invalid_text(self, frame: Any) -> bool:
        """Arrow strings (``pl.from_arrow`` does not check their UTF-8) that are not UTF-8; a
        LazyFrame over files is parsed in full instead, which validates the text."""
        import polars as pl
        import polars.selectors as cs

        if self.lazy:
            if self.reads_csv(frame) or self.reads_other_files(frame):
                return False  # (parsed in full, which validates the text)
            frame = frame.select(cs.string() | cs.categorical() | cs.enum()).collect()
        for series in frame.iter_columns():
            text = series.dtype == pl.String or isinstance(series.dtype,
                                                           pl.Categorical | pl.Enum)
            if text and not valid_arrow(series.cast(pl.String).to_arrow()):
                return True
        return False


class PolarsBackend(_Polars):
    """Polars ``DataFrame``s; aggregated through their lazy plan (zero-copy), so the per-row
    expressions fuse with the sums, or by the numpy kernel on the columns' buffers."""

    name = "polars"
    lazy = False
    detect = staticmethod(is_polars_eager)

    def no_root_message(self) -> str:
        return (
            "this Polars DataFrame has no protected root: it is not a frame returned by "
            "dpf.protect or by a .dp derivation of one (eager Polars frames keep no plan, so "
            "frames derived with native operations cannot be verified). Derive from the "
            "protected frame with df.dp.filter(pl.col('age') >= 65) / df.dp.with_columns(...) "
            "/ .dp.select(...). Nothing was read or spent."
        )

    def numpy_column(self, frame: Any, column: str) -> Any:
        return private_column(frame, column, "view", lambda: engine.polars_view(frame, column))

    def key_codes(self, frame: Any, column: str, keys: Sequence[Any]) -> np.ndarray | None:
        return engine.polars_codes(frame.get_column(column), keys)

    def leaves_group_by(self, n_keys: int, n_rows: int) -> bool:
        """Few keys for many rows: Polars' parallel group-by is faster than the kernel
        (:data:`dpframe.engine._aggregation.POLARS_ROWS_PER_KEY`)."""
        return n_keys * engine.POLARS_ROWS_PER_KEY < n_rows

    def expressions(self, frame: Any) -> tuple[Any, Any]:
        import polars as pl

        return pl, frame.lazy()

    def engine_frame(self, frame: Any) -> Any:
        import narwhals.stable.v2 as nw

        return nw.from_native(frame.lazy())

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        return int(frame.height)

    def schema(self, frame: Any) -> dict[str, Any]:
        return dict(frame.schema.items())

    def column_dtype(self, frame: Any, column: str) -> Any:
        return private_column(frame, column, "dtype", lambda: frame.get_column(column).dtype)

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        return self.schema(frame)

    def buffer_ranges(self, frame: Any) -> list[tuple[int, int]]:
        """Every chunk's Arrow buffers (:func:`_memory.polars_ranges`)."""

        return polars_ranges(frame)

    def snapshot(self, frame: Any) -> Any:
        """dpframe's byte copy of every column (:func:`_memory.own_polars`): Polars
        takes numpy arrays and Arrow arrays without copying them (``pl.from_numpy``,
        ``pl.from_arrow``, ``pl.from_pandas``), whatever the dtype (Decimal, strings, lists,
        structs as much as numbers), and the user can still write those arrays. The copy is
        in memory Polars allocated, which it hands out read-only."""

        return private(own_polars(frame))

    def private_result(self, frame: Any) -> Any:
        """Another handle only: a verified derivation is computed from the snapshot, so its
        buffers are the snapshot's or new ones Polars allocated, and Polars never writes a
        buffer in place nor lets the user write one (its ``to_numpy`` views and ``to_arrow``
        buffers are read-only)."""
        return private(frame.clone())


#: The most rows of in-memory frames a LazyFrame query collects with Polars' in-memory engine
#: (which materialises each per-row expression: 100,000 doubles are 0.8 MB).
IN_MEMORY_ROWS = 100_000


class PolarsLazyBackend(_Polars):
    """Polars ``LazyFrame``s: immutable plans whose derivations dpframe reads and verifies;
    aggregates are collected with Polars' streaming engine (a scan larger than memory is
    aggregated batch by batch), small in-memory plans with its in-memory engine. The bare
    scan of dpframe's in-memory copy is summed by the numpy kernel on that copy, and the bare
    scan of files by the kernel on each batch the streaming engine reads
    (:meth:`engine_sums`)."""

    name = "polars-lazy"
    lazy = True
    readable_plans = True
    fixed_schema = True
    detect = staticmethod(is_polars_lazy)

    def expressions(self, frame: Any) -> tuple[Any, Any]:
        import polars as pl

        return pl, frame

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """A plan that is the bare scan of dpframe's in-memory copy runs the eager frame's
        numpy kernel on that copy (:mod:`._kernel_route`: chosen from the plan's structure,
        nothing collected, the same exact sums); the bare scan of files, the kernel on each
        batch Polars' streaming engine reads (:mod:`._batch_route`); any other, the Polars
        expressions."""
        eager = registered(PolarsBackend.name)
        # (the copy's route first: known at snapshot, one lookup; a file scan's plan is read
        # once and remembered by both tests)
        if not in_memory_scan(frame) and bare_file_scan(frame):
            return batch_sums(frame, aggs, columns, missing, group_by, keys, eager)
        return kernel_sums(frame, aggs, columns, missing, group_by, keys, eager)

    def buffer_ranges(self, frame: Any) -> list[tuple[int, int]]:
        """The in-memory data the plan holds (:func:`_memory.polars_plan_ranges`)."""

        return polars_plan_ranges(frame)

    def snapshot(self, frame: Any) -> Any:
        """A plan stays lazy (the snapshot is the plan itself; releases re-read its files,
        bound by content at protect) only if its structure shows it reads nothing but local
        files dpframe binds and holds no Python object
        (:func:`dpframe._util.polars_plan.reads_only_files`). Any other plan can read memory the
        user still writes: an in-memory frame (``df.lazy()``, ``pl.from_numpy(...).lazy()``,
        also joined with a file scan), a Python scan (``scan_pyarrow_dataset``,
        ``register_io_source``, ``pl.defer``), a Python function (``map_batches``,
        ``map_elements``), a Series or list literal (``pl.lit(pl.Series(arr))``,
        ``replace_strict``'s mapping) all share buffers with the user's objects or re-run
        the user's code. Such a plan is collected once, here, into dpframe's byte copy
        (:func:`_memory.own_polars`) and releases read that copy's ``.lazy()`` plan.
        What the collection hands back is first checked against protected memory: a Python
        scan or function that returns a protected frame's buffers opens no second budget."""

        if reads_only_files(frame):
            return frame
        collected = frame.collect()  # (a failure: protect's fixed refusal, nothing spent)
        refuse_protected_memory(polars_ranges(collected))
        return bare_scan(own_polars(collected))  # (its kernel route known at once)

    def collect(self, result: Any, source: Any = None) -> Any:
        """Streaming, except for a query on a ``source`` plan that reads only in-memory
        frames of at most :data:`IN_MEMORY_ROWS` rows (a public fact of the plan): Polars'
        in-memory engine answers it without the streaming engine's start-up (about 75 µs of
        a 1,000-row query; the same sums, every partial sum being exact in any order)."""
        small = source is not None and _small_in_memory(source)
        return result.collect(engine="in-memory" if small else "streaming")

    def check_readers(self, frame: Any) -> None:
        for options in _csv_scans(frame):
            if options.get("schema") is None and options.get("infer_schema_length") != 0:
                raise UnsupportedInputError(
                    "this LazyFrame reads a CSV file whose column types Polars would infer from "
                    "its first rows; a later value that does not parse would then fail a "
                    "release. Declare the types: " + _POLARS_FIX + ". Nothing was read."
                )

    def reads_csv(self, frame: Any) -> bool:
        return bool(_csv_scans(frame))

    def reads_other_files(self, frame: Any) -> bool:
        """A scan of files of another format than CSV."""

        return any(node.scan_type and str(node.scan_type[0]) != "csv"
                   for node in scan_nodes(frame))

    def parse_rows(self, frame: Any) -> int:
        import polars as pl

        counts = frame.select(pl.len().alias("__dpframe_rows"),
                              pl.all().null_count()).collect(engine="streaming")
        return int(counts.get_column("__dpframe_rows").item())


    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        """``fresh``: a Polars plan answers a bare ``select(len())`` from the row count it
        cached when it first counted, so the re-count goes through a (no-op) filter that makes
        Polars read the source again."""
        import polars as pl

        if fresh:
            return int(frame.filter(pl.lit(True)).select(pl.len()).collect().item())
        return int(frame.select(pl.len()).collect().item())

    def schema(self, frame: Any) -> dict[str, Any]:
        return dict(frame.collect_schema().items())

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        return self.schema(frame)


_POLARS_FIX = (
    "pl.scan_csv(path, schema={'age': pl.Float64, 'region': pl.String, ...}, "
    "ignore_errors=True, truncate_ragged_lines=True) (values that do not parse become missing)"
)


#: :func:`_small_in_memory`'s answers by plan identity (LazyFrames are not hashable).
_SMALL_IN_MEMORY: IdentityMap[bool] = IdentityMap()


def _small_in_memory(lazy: Any) -> bool:
    """``lazy`` reads only in-memory frames, of at most :data:`IN_MEMORY_ROWS` rows in all;
    remembered per plan (a protected LazyFrame is immutable)."""

    known = _SMALL_IN_MEMORY.get(lazy)
    if known is not None:
        return known
    rows = in_memory_rows(lazy)
    small = rows is not None and rows <= IN_MEMORY_ROWS
    with contextlib.suppress(TypeError):  # not weakly referable: decided again next time
        _SMALL_IN_MEMORY.set(lazy, small)
    return small


def _csv_scans(lazy: Any) -> list[dict[str, Any]]:
    """The options of every CSV scan in a LazyFrame's plan (from Polars' plan visitor)."""

    found = []
    for node in scan_nodes(lazy):
        scan_type = node.scan_type
        if scan_type and str(scan_type[0]) == "csv":
            try:
                found.append(json.loads(scan_type[1]))
            except (TypeError, ValueError, IndexError):  # an unknown layout: refuse as inferred
                found.append({})
    return found
