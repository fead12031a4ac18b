"""The catalogue of row-wise functions as a table: what users write, what dpframe computes, and
which SQL engines compile it (``docs/frames.md``, "What each function computes"; a test keeps the
docs equal to :func:`catalogue_markdown`)."""

from __future__ import annotations

from typing import Any

from dpframe.backends.duckdb import _rowwise as duckdb_target
from dpframe.backends.spark import _rowwise as spark_target
from dpframe.rowwise.functions import FUNCTIONS, OPERATORS

__all__ = ["catalogue_markdown"]


def catalogue_markdown() -> str:
    """The table of operators and functions for ``docs/frames.md`` ("What each function
    computes"): what users write, what dpframe computes, and whether DuckDB and Spark compile
    it (every function runs on Polars, pandas and Dask). A test keeps the docs equal to it."""

    def mark(name: str, target: Any) -> str:
        if name not in target.SUPPORTED:
            return "—"
        partial = getattr(target, "PARTIAL", {}).get(name)
        return f"✓ ({partial})" if partial else "✓"

    lines = ["| what you write | what dpframe computes, in every engine | DuckDB | Spark |",
             "|---|---|---|---|"]
    for meaning in OPERATORS.values():
        symbol, _, rest = meaning.partition(":")
        lines.append(f"| {symbol.strip()} | {rest.strip() or 'as written'} | ✓ | ✓ |")
    group = None
    for name, spec in FUNCTIONS.items():
        if spec.group != group:
            group = spec.group
            lines.append(f"| **{group}** | | | |")
        literal = " (literal arguments)" if spec.literal_args else ""
        lines.append(f"| `{spec.api}` | {spec.meaning}{literal} | "
                     f"{mark(name, duckdb_target)} | {mark(name, spark_target)} |")
    return "\n".join(lines)
