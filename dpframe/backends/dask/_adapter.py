"""Dask DataFrames: mutable collections over a graph (assigning a column rebinds the object),
so dpframe keeps collections of its own."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpframe import engine as tick_keys
from dpframe._util.identity import IdentityMap
from dpframe.backends._base import Backend, registered
from dpframe.backends._text import invalid_pandas_column, text_dtype
from dpframe.backends.dask import _rowwise as dask_rowwise
from dpframe.backends.dask._file_input import read_file
from dpframe.backends.dask._partitions import dask_sums
from dpframe.backends.pandas._memory import own_pandas
from dpframe.backends.pandas._rowwise import polars_schema
from dpframe.engine import _aggregation as engine
from dpframe.errors import UnsupportedInputError
from dpframe.query import ADDITIVE_KINDS, Agg

__all__ = ["DaskBackend", "is_dask_frame"]


def is_dask_frame(obj: Any) -> bool:
    """True for a Dask ``DataFrame``."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(obj, dd.DataFrame)


class DaskBackend(Backend):
    """Dask DataFrames (results in pandas: a few rows)."""

    name = "dask"
    family = "dask"
    rowwise = dask_rowwise.TARGET
    result_family = "pandas"
    ticks_temporal_keys = True
    detect = staticmethod(is_dask_frame)

    def read_file(self, path: str, fmt: str, declared: Mapping[str, str]) -> Any:

        return read_file(path, fmt, declared)

    def pass_hooks(self) -> tuple[Callable[[], None] | None, Callable[[], None] | None] | None:
        """Every pass under the engine timeout (a cluster's workers can all die); abandoned
        tasks are not cancelled (their late results are dropped)."""
        return None, None

    def namespace_target(self) -> tuple[type, Any] | None:
        from dask.dataframe.extensions import register_dataframe_accessor

        return sys.modules["dask.dataframe"].DataFrame, register_dataframe_accessor

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """The in-memory path on each pandas partition (:mod:`dpframe.backends.dask._partitions`),
        for the additive kinds; None for others (the narwhals expressions run)."""
        if not all(a.kind in ADDITIVE_KINDS for a in aggs):
            return None

        in_memory = functools.partial(engine.aggregate, backend=registered("pandas"))
        return dask_sums(frame, aggs, missing, group_by, keys, partition_sums=in_memory)

    def with_ticks(self, frame: Any, columns: Sequence[str], keep: Any = None) -> Any:
        return tick_keys.partitions_with_ticks(frame, columns, keep)

    def tick_kind(self, frame: Any, column: str) -> Any:
        return tick_keys.column_kind(frame._meta, column)

    def check_readers(self, frame: Any) -> None:
        """``read_csv`` must name every column's type in ``dtype=`` (or one type for all)."""
        for columns, dtype in _csv_reads(frame):
            declared = dtype is not None and (
                not isinstance(dtype, dict) or all(c in dtype for c in columns))
            if not declared:
                raise UnsupportedInputError(
                    "this Dask frame reads a CSV file whose column types Dask infers from its "
                    "first block; a later value that does not parse would then fail a "
                    "release. Declare every column's type: " + _DASK_FIX + ". Nothing was "
                    "read."
                )

    def reads_csv(self, frame: Any) -> bool:
        return bool(_csv_reads(frame))

    def parse_rows(self, frame: Any) -> int:
        return int(frame.map_partitions(
            lambda part: len(part.notna().sum(axis=1))).compute().sum())

    def invalid_text(self, frame: Any) -> bool:
        """pandas' check on every partition (Dask's Parquet reader takes Arrow strings
        without checking their UTF-8)."""
        if not any(text_dtype(d) for d in frame.dtypes):
            return False
        flags = frame.map_partitions(
            lambda part: bool(any(invalid_pandas_column(part[c]) for c in part.columns)),
            meta=(None, bool))
        return bool(flags.compute().any())

    def polars_schema(self, frame: Any) -> dict[str, Any]:

        return polars_schema(frame._meta)

    def snapshot(self, frame: Any) -> Any:
        """A collection of dpframe's own whose in-memory data is dpframe's (see
        :func:`owned_snapshot`): the graph above the data stays lazy, file readers stay
        file readers (bound by content, :class:`dpframe.provenance._protect.SourceBinding`), and the
        expression is this snapshot's alone."""
        return owned_snapshot(frame)

    def handout(self, frame: Any) -> Any:
        """A separate collection over the same graph: the user's assignments never reach
        dpframe's, and the data it reads is dpframe's copy."""
        return frame.copy()

    def source_paths(self, frame: Any) -> list[str]:
        """The expression's ``path`` operands (read_parquet, ...) and the local files its CSV
        readers' blocks open."""
        expr = getattr(frame, "expr", None)
        return _dask_paths(expr) + _csv_paths(expr)

    def memory_leaves(self, frame: Any) -> list[Any]:
        """The pandas objects the frame's ``from_pandas`` leaves read (:func:`leaf_frames`)."""
        return leaf_frames(frame)

    def protected(self, frame: Any) -> None:
        """After ``frame`` is protected: its expressions leave Dask's table of live
        expressions (:func:`forget_expressions`)."""
        forget_expressions(frame)

    def bound_files(self, frame: Any) -> tuple[str, ...] | None:
        """No file, for a snapshot that reads dpframe's copies only (nothing to re-count)."""
        return () if _OWNED.get(frame) else None


_DASK_FIX = (
    "dd.read_csv(path, dtype={'age': 'float64', 'region': 'string', ...}) naming every "
    "column, or dtype=str and casts in a derivation (a cast that fails gives a missing value)"
)


#: snapshots whose every leaf is dpframe's own in-memory data (no file, nothing to re-count)
_OWNED: IdentityMap[bool] = IdentityMap()


def owned_snapshot(frame: Any) -> Any:
    """``frame`` rebuilt over data only dpframe holds, with an expression of its own.

    Every leaf of the expression is replaced: ``from_pandas`` (and ``from_dict``) data by a
    deep copy of the pandas object (Arrow-backed columns copied byte for byte too: pandas'
    deep copy keeps the same Arrow arrays), ``from_array`` data by a copy of the array; file
    readers (``read_parquet``, ``read_csv``) are kept. The copies carry a token drawn afresh
    for this snapshot, so the expression's name (Dask deduplicates expressions by name, and
    names hash the values) differs from that of any other frame, whatever its values: two
    data sets never resolve to one graph. An expression with any other leaf (a graph from a
    Dask array or from delayed objects, a generator, a reader dpframe does not know) is
    computed once, here, on the user's scheduler (its partitions come back to this process),
    and each partition copied the same way. The operations above the leaves
    (``map_partitions``, ...) stay lazy and run in every release, on the scheduler the user
    set up."""
    import uuid

    from dask.dataframe.dask_expr._collection import new_collection

    _register_token()
    token = f"dpframe-snapshot-{uuid.uuid4().hex}"
    leaves = {"files": 0, "owned": 0}
    try:
        expr = _rebuilt(frame.expr, token, {}, leaves)
    except _UnknownLeafError:
        snapshot = _materialized(frame, token)
        _OWNED.set(snapshot, True)
        return snapshot
    if not leaves["owned"]:
        return frame.copy()  # files only: read lazily, bound by their content
    snapshot = new_collection(expr)
    if not leaves["files"]:
        _OWNED.set(snapshot, True)
    return snapshot


def leaf_frames(frame: Any) -> list[Any]:
    """The pandas objects the ``from_pandas`` leaves of a Dask collection read (what its
    memory is, for the registry of protected memory); nothing is computed."""
    from dask.dataframe.dask_expr.io.io import FromPandas

    return [expr.operand("frame")._data for expr in _expressions(frame.expr)
            if isinstance(expr, FromPandas)]


def forget_expressions(frame: Any) -> None:
    """Take every expression of ``frame`` out of Dask's table of live expressions (Dask
    returns a live expression of the same name instead of building a new one, and names hash
    the values: a frame built later over other memory holding equal values would read this
    frame's memory). Frames already built keep what they hold."""
    for expr in _expressions(frame.expr):
        table = getattr(type(expr), "_instances", None)
        if table is not None and table.get(expr._name) is expr:
            del table[expr._name]


def _expressions(root: Any) -> list[Any]:
    found: dict[str, Any] = {}
    stack = [root]
    while stack and len(found) < 100_000:
        expr = stack.pop()
        if expr._name in found:
            continue
        found[expr._name] = expr
        stack.extend(expr.dependencies())
    return list(found.values())


class _UnknownLeafError(Exception):
    """A leaf :func:`_rebuilt` cannot copy."""


def _rebuilt(expr: Any, token: str, memo: dict[str, Any], leaves: dict[str, int]) -> Any:
    """``expr`` with every in-memory leaf replaced by an owned, uniquely named copy."""
    if expr._name in memo:
        return memo[expr._name]
    deps = expr.dependencies()
    if not deps:
        out = _owned_leaf(expr, token, leaves)
    else:
        operands = [_rebuilt_operand(op, token, memo, leaves) for op in expr.operands]
        same = all(a is b for a, b in zip(operands, expr.operands, strict=True))
        out = expr if same else type(expr)(*operands)
    memo[expr._name] = out
    return out


def _rebuilt_operand(op: Any, token: str, memo: dict[str, Any], leaves: dict[str, int]
                     ) -> Any:
    from dask._expr import Expr

    if isinstance(op, Expr):
        return _rebuilt(op, token, memo, leaves)
    if isinstance(op, list | tuple) and op and all(isinstance(o, Expr) for o in op):
        return type(op)(_rebuilt(o, token, memo, leaves) for o in op)
    return op


def _owned_leaf(expr: Any, token: str, leaves: dict[str, int]) -> Any:
    from dask.dataframe.dask_expr._util import _BackendData
    from dask.dataframe.dask_expr.io.io import FromArray, FromPandas

    if _reads_files(expr):
        leaves["files"] += 1
        return expr
    if isinstance(expr, FromPandas):
        data = _BackendData(own_pandas(expr.operand("frame")._data))
        data.__dict__["_token"] = f"{token}-{leaves['owned']}"  # (what names hash)
        leaves["owned"] += 1
        return expr.substitute_parameters({"frame": data})
    if isinstance(expr, FromArray) and isinstance(expr.operand("frame"), np.ndarray):
        array = np.array(expr.operand("frame"), copy=True, order="K").view(_OwnedArray)
        array.dpframe_token = f"{token}-{leaves['owned']}"
        leaves["owned"] += 1
        return expr.substitute_parameters({"frame": array})
    raise _UnknownLeafError


def _reads_files(expr: Any) -> bool:
    """A leaf that reads files: Dask's Parquet readers, or a CSV reader."""
    if "path" in getattr(expr, "_parameters", ()) and type(expr).__module__.endswith(
            "io.parquet"):
        return True
    if "func" in getattr(expr, "_parameters", ()):
        keywords = getattr(expr.operand("func"), "keywords", None) or {}
        reader = keywords.get("reader")
        return getattr(reader, "__name__", "") in ("read_csv", "read_table", "read_fwf")
    return False


def _materialized(frame: Any, token: str) -> Any:
    """Every partition of ``frame`` computed (on the user's scheduler) and copied; a collection
    whose partitions are those copies, under keys of this snapshot alone."""
    import dask
    import dask.dataframe as dd

    parts = dask.compute(*frame.to_delayed())
    owned = [dask.delayed(_shallow, name=f"{token}-{i}", pure=False)(own_pandas(part))
             for i, part in enumerate(parts)]
    del parts
    return dd.from_delayed(owned, meta=frame._meta, divisions=frame.divisions,
                           verify_meta=False)


def _shallow(part: Any) -> Any:
    """A new pandas object over dpframe's partition (what a task hands on: an assignment to
    it cannot reach the partition)."""
    return part.copy(deep=False)


class _OwnedArray(np.ndarray):
    """dpframe's copy of a ``from_array`` source: tokenized by its snapshot's token, never by
    its values (see :func:`owned_snapshot`)."""

    dpframe_token: str = ""

    def __array_finalize__(self, obj: Any) -> None:
        self.dpframe_token = getattr(obj, "dpframe_token", "")


def _register_token() -> None:
    from dask.tokenize import normalize_token

    normalize_token.register(_OwnedArray)(lambda a: ("dpframe-owned", a.dpframe_token))


def _csv_paths(expr: Any) -> list[str]:
    """The local files the blocks of a Dask ``read_csv`` open (fsspec ``OpenFile`` operands
    of its tasks); a file on another file system is named by its URL."""
    found: list[str] = []
    for node in _tree(expr):
        if "iterables" in getattr(node, "_parameters", ()) and _reads_files(node):
            for block in _flatten(node.operand("iterables")):
                for arg in getattr(block, "args", ()):
                    path = getattr(arg, "path", None)
                    fs = getattr(arg, "fs", None)
                    if isinstance(path, str) and fs is not None:
                        protocol = fs.protocol if isinstance(fs.protocol, str) else \
                            fs.protocol[0]
                        local = protocol in ("file", "local")
                        name = path if local else f"{protocol}://{path}"
                        if name not in found:
                            found.append(name)
    return found


def _tree(root: Any, limit: int = 10_000) -> Any:
    """The nodes of a Dask expression tree, depth first, at most ``limit`` of them (a bound on
    a walk of the user's graph; a node reached twice is yielded twice)."""
    stack = [root]
    seen = 0
    while stack and seen < limit:
        node = stack.pop()
        seen += 1
        if node is None:
            continue
        yield node
        stack.extend(node.dependencies())


def _flatten(value: Any, depth: int = 0) -> list[Any]:
    if isinstance(value, list | tuple) and depth < 3:
        return [x for v in value for x in _flatten(v, depth + 1)]
    return [value]


def _csv_reads(frame: Any) -> list[tuple[list[str], Any]]:
    """(columns, dtype argument) of every pandas CSV reader in a Dask expression tree."""
    found: list[tuple[list[str], Any]] = []
    for expr in _tree(getattr(frame, "expr", None)):
        parameters = getattr(expr, "_parameters", ())
        if "func" in parameters:
            func = expr.operand("func")
            keywords = getattr(func, "keywords", None) or {}
            reader = keywords.get("reader")
            if getattr(reader, "__name__", "") in ("read_csv", "read_table", "read_fwf"):
                kwargs = keywords.get("kwargs") or {}
                found.append((list(keywords.get("full_columns") or []), kwargs.get("dtype")))
    return found


def _dask_paths(expr: Any, depth: int = 0) -> list[str]:
    """``path`` operands of a Dask expression tree (read_parquet, read_csv, ...)."""
    if expr is None or depth > 50:
        return []
    found: list[str] = []
    path = getattr(expr, "path", None) if "path" in getattr(expr, "_parameters", ()) else None
    if isinstance(path, str):
        found.append(path)
    elif isinstance(path, list | tuple):
        found += [p for p in path if isinstance(p, str)]
    for dep in getattr(expr, "dependencies", lambda: [])():
        found += _dask_paths(dep, depth + 1)
    return found


