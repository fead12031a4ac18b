"""A spec's input file as a Polars LazyFrame (``Backend.read_file``): Parquet scanned as it is;
CSV read as text and parsed non-strictly into the declared types (``ignore_errors``: a value
that does not parse is missing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpframe.backends._file_inputs import CSV_POLARS

__all__ = ["read_file"]


def read_file(path: str, fmt: str, declared: Mapping[str, str]) -> Any:
    """The lazy frame reading ``path`` (``fmt``: "parquet" or "csv"; ``declared``: a CSV
    column's declared type)."""
    import polars as pl

    if fmt != "csv":
        return pl.scan_parquet(path)
    return pl.scan_csv(path, infer_schema=False, ignore_errors=True,
                       truncate_ragged_lines=True,
                       schema_overrides={c: getattr(pl, CSV_POLARS[t])
                                         for c, t in declared.items()})
