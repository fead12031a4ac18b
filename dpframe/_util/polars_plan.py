"""Reading a Polars LazyFrame's logical plan (through Polars' node visitor, the interface its GPU
engine uses): nothing is collected or serialised. The lowest layer of plan reading, shared by
derivation verification, source checks and the memory registry."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dpframe.errors import DerivationError

__all__ = ["all_nodes", "in_memory_rows", "plan_sources", "scan_nodes", "scanned_frames",
           "visitor"]


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
    """Every node of ``lazy``'s plan (depth first) with the visitor positioned on it."""
    nt = visitor(lazy)
    stack = [nt.get_node()]
    while stack:
        nt.set_node(stack.pop())
        node = nt.view_current_node()
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
