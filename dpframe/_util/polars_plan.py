"""Reading a Polars LazyFrame's logical plan (through Polars' node visitor, the interface its GPU
engine uses): nothing is collected or serialised. The lowest layer of plan reading, shared by
derivation verification, source checks, the snapshot taken at protect and the memory registry."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable, Iterator
from typing import Any

from dpframe.errors import DerivationError, UnsupportedInputError

__all__ = ["FILE_FORMATS", "all_nodes", "held_memory", "in_memory_rows", "plan_sources",
           "reads_only_files", "scan_nodes", "scanned_frames", "visitor"]


def visitor(lazy: Any) -> Any:
    import polars as pl

    try:
        ldf = lazy._ldf.with_optimizations(pl.QueryOptFlags.none()._pyoptflags)
        return ldf.visit()
    except Exception as exc:  # an unexpected Polars version: refuse rather than guess
        raise DerivationError(
            "this Polars version does not expose its query plan to dpframe "
            f"({type(exc).__name__}: {exc}); derive frames with frame.dp.filter / "
            "frame.dp.with_columns, or use a supported Polars version"
        ) from None


def all_nodes(lazy: Any) -> Iterable[tuple[Any, Any]]:
    """Every node of ``lazy``'s plan (depth first) with the visitor positioned on it.

    A node Polars does not show (a scan of in-memory bytes or of a file object, a
    ``LazyFrame.map_batches`` Python function) is refused with :class:`UnsupportedInputError`:
    dpframe cannot tell what it reads (a protected frame?), nor bind it."""
    nt = visitor(lazy)
    stack = [nt.get_node()]
    while stack:
        nt.set_node(stack.pop())
        try:
            node = nt.view_current_node()
        except Exception as exc:
            raise UnsupportedInputError(
                "this LazyFrame's plan holds a step Polars does not show to dpframe "
                f"({type(exc).__name__}: {str(exc)[:80]}), e.g. a scan of in-memory bytes or "
                "of a file object, or LazyFrame.map_batches with a Python function, so dpframe "
                "cannot tell what it reads. Write the bytes to a file and scan that file "
                "(pl.scan_parquet(path)), or read them eagerly (pl.read_parquet(buffer), "
                "lazy_frame.collect()) and protect the DataFrame. Nothing was read or spent."
            ) from None
        yield nt, node
        stack.extend(nt.get_inputs())


def scan_nodes(lazy: Any) -> list[Any]:
    """Every file-scan node of ``lazy``'s plan (their ``scan_type`` holds the reader's
    options)."""
    return [node for _nt, node in all_nodes(lazy) if type(node).__name__ == "Scan"]


def plan_sources(lazy: Any) -> tuple[list[str], bool]:
    """The file paths (or glob patterns) ``lazy`` scans, and whether it also reads a source
    that is neither a file nor an in-memory frame (e.g. a Python or pyarrow-dataset scan)."""
    paths: list[str] = []
    other = False
    for _nt, node in all_nodes(lazy):
        kind = type(node).__name__
        if kind == "Scan":
            paths.extend(str(p) for p in (node.paths or []))
        elif kind == "PythonScan":
            other = True
    return paths, other


def scanned_frames(lazy: Any) -> list[Any]:
    """The in-memory frames (``PyDataFrame``s) a LazyFrame's plan scans."""
    return [node.df for _nt, node in all_nodes(lazy)
            if type(node).__name__ == "DataFrameScan"]


def in_memory_rows(lazy: Any) -> int | None:
    """The rows of the in-memory frames ``lazy``'s plan reads, or None when it reads any other
    source (a file, a Python or pyarrow-dataset scan)."""
    rows = 0
    for _nt, node in all_nodes(lazy):
        kind = type(node).__name__
        if kind == "DataFrameScan":
            rows += int(node.df.height())
        elif kind in ("Scan", "PythonScan"):
            return None
    return rows


# -- what a plan holds besides its structure ---------------------------------------------------
#: The file formats whose scans dpframe binds by content (``provenance.SourceBinding``).
FILE_FORMATS = frozenset({"parquet", "csv", "ipc", "ndjson"})

#: Plan nodes made of expressions, input ids and plain options only (anything else in them is
#: looked at value by value below); any other kind (a Python scan, an in-memory frame, a sink,
#: a kind a newer Polars adds) holds something dpframe does not bind.
_STRUCTURAL_NODES = frozenset({"Filter", "HStack", "Select", "SimpleProjection", "Join",
                               "Union", "HConcat", "GroupBy", "Distinct", "Sort", "Slice",
                               "MapFunction", "Cache", "MergeSorted", "Reduce"})
#: Attributes of plan nodes that name other plan nodes (not expressions).
_NODE_INPUTS = frozenset({"input", "input_left", "input_right", "inputs"})
#: Scan attributes that are Polars' own reader structures (options, file metadata, hive
#: partition values read from the paths): no Python object of the user's.
_SCAN_OPTIONS = frozenset({"file_info", "file_options", "hive_parts", "source_sizes"})

#: Expression kinds (Polars' ``_expr_nodes``) and their attributes that name child expressions;
#: every other attribute must be a plain value. A kind not listed is not read (conservative).
_EXPRESSION_CHILDREN: dict[str, tuple[str, ...]] = {
    "Agg": ("arguments",), "Alias": ("expr",), "BinaryExpr": ("left", "right"),
    "Cast": ("expr",), "Column": (), "Explode": ("expr",), "Filter": ("by", "input"),
    "Function": ("input",), "Gather": ("expr", "idx"), "Len": (), "Literal": (),
    "Rolling": ("function", "index_column"), "Slice": ("input", "offset", "length"),
    "Sort": ("expr",), "SortBy": ("by", "expr"), "Ternary": ("predicate", "truthy", "falsy"),
    "Window": ("function", "partition_by", "order_by"),
}
#: Polars' own enums and option records in expression and plan nodes (no user object).
_POLARS_OPTIONS = frozenset({
    "Operator", "BooleanFunction", "StringFunction", "TemporalFunction", "ListFunction",
    "ArrayFunction", "StructFunction", "RollingFunction", "RollingFunctionBy", "EwmFunction",
    "WindowMapping", "GroupbyOptions", "RollingGroupOptions"})
#: Python types of a plain scalar (an immutable value that holds no memory anyone can write).
_SCALARS = (type(None), bool, int, float, str, bytes, decimal.Decimal, datetime.date,
            datetime.time, datetime.timedelta)


def _plain(value: Any) -> bool:
    """A plain option value: scalars, Polars data types and enums, tuples and lists of them."""
    import polars as pl

    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, pl.DataType) or (isinstance(value, type)
                                          and issubclass(value, pl.DataType)):
        return True
    kind = type(value)
    return kind.__module__ == "builtins" and kind.__name__ in _POLARS_OPTIONS


def _expression_findings(nt: Any, node_id: int) -> Iterator[tuple[str, Any]]:
    """What expression ``node_id`` holds besides plain structure (see :func:`_findings`)."""
    stack = [node_id]
    while stack:
        current = stack.pop()
        try:
            e = nt.view_expression(current)
        except Exception:  # a Python function (map_batches, map_elements) has no view
            yield "python", "a Python function"
            continue
        kind = type(e).__name__
        children = _EXPRESSION_CHILDREN.get(kind)
        if children is None:
            yield "python", f"a {kind} expression"
            continue
        if kind == "Literal":
            value = e.value
            if type(value).__name__ == "PySeries":
                yield "series", value
            elif not isinstance(value, _SCALARS):
                yield "python", "a literal that is not a scalar"
            continue
        for attr in (a for a in dir(e) if not a.startswith("_")):
            value = getattr(e, attr)
            if attr in children:
                ids = value if isinstance(value, list) else [value]
                stack.extend(i for i in ids if isinstance(i, int) and not isinstance(i, bool))
                if any(not (i is None or isinstance(i, int | str)) for i in ids):
                    yield "python", f"a {kind} expression"
            elif not _plain(value):
                yield "python", f"a {kind} expression"


def _findings(lazy: Any) -> Iterator[tuple[str, Any]]:
    """Everything ``lazy``'s plan reads or holds other than files dpframe binds and plain
    structure, from the plan's structure alone (nothing is collected): ``("frame", PyDataFrame)``
    an in-memory frame, ``("series", PySeries)`` a Series literal, ``("dataset", obj)`` a
    pyarrow dataset under a Python scan, ``("python", what)`` any other Python object or
    unread part (a Python scan or function, a non-scalar literal, a node or expression kind
    dpframe does not know, a scan of another source than a local file format it binds)."""
    for nt, node in all_nodes(lazy):
        kind = type(node).__name__
        if kind == "DataFrameScan":
            yield "frame", node.df
            continue
        if kind == "PythonScan":
            yield from _python_scan(node)
            continue
        if kind == "Scan":
            scan_type = node.scan_type
            paths = node.paths
            if not (scan_type and str(scan_type[0]) in FILE_FORMATS and paths
                    and all(isinstance(p, str) for p in paths)):
                yield "python", "a scan dpframe does not bind"
        elif kind not in _STRUCTURAL_NODES:
            yield "python", f"a {kind} step"
            continue
        for attr in (a for a in dir(node) if not a.startswith("_")):
            if attr in _NODE_INPUTS or (kind == "Scan" and attr in _SCAN_OPTIONS):
                continue
            value = getattr(node, attr)
            for item in value if isinstance(value, list) else [value]:
                if type(item).__name__ == "PyExprIR":
                    yield from _expression_findings(nt, item.node)
                elif not _plain(item):
                    yield "python", f"a {kind} step"


def _python_scan(node: Any) -> Iterator[tuple[str, Any]]:
    """A Python scan: always a Python object; a pyarrow dataset it reads is named too."""
    import functools

    yield "python", "a Python scan"
    options = node.options if isinstance(node.options, tuple) else ()
    for option in options:
        if isinstance(option, functools.partial):
            for arg in (*option.args, *option.keywords.values()):
                if type(arg).__module__.startswith("pyarrow") and hasattr(arg, "to_batches"):
                    yield "dataset", arg


def reads_only_files(lazy: Any) -> bool:
    """Whether ``lazy``'s plan, read structurally, reads nothing but local files of the
    formats dpframe binds by content (:data:`FILE_FORMATS`) and holds no Python object: no
    in-memory frame, no Python scan (``scan_pyarrow_dataset``, ``register_io_source``,
    ``pl.defer``), no Python function (``map_batches``, ``map_elements``), no literal that is
    not a plain scalar (a Series, a list), no step or expression of a kind dpframe does not
    know. Only such a plan may stay lazy after protect: anything else can read memory the
    user still writes."""
    return next(iter(_findings(lazy)), None) is None


def held_memory(lazy: Any) -> Iterator[Any]:
    """The in-memory data ``lazy``'s plan holds and dpframe can reach without running it, for
    the memory registry: Polars DataFrames (scanned frames, and Series literals as one-column
    frames) and the record batches of in-memory pyarrow datasets under a Python scan. What a
    Python function returns is not known before it runs."""
    import polars as pl

    for what, value in _findings(lazy):
        if what == "frame":
            yield pl.DataFrame._from_pydf(value)
        elif what == "series":
            yield pl.Series._from_pyseries(value).to_frame()
        elif what == "dataset":
            import pyarrow.dataset as ds

            if isinstance(value, ds.InMemoryDataset):  # (to_batches of a file dataset reads)
                yield from value.to_batches()
