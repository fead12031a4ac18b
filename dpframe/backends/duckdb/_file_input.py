"""A spec's input file as a DuckDB relation (``Backend.read_file``): Parquet read as it is; CSV
read as text (``all_varchar``) and each declared column converted by ``TRY(CAST(...))``, so a
value that does not parse is NULL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpframe.backends._file_inputs import CSV_SQL, csv_header, quote

__all__ = ["read_file"]


def read_file(path: str, fmt: str, declared: Mapping[str, str]) -> Any:
    """The relation reading ``path`` (``fmt``: "parquet" or "csv"; ``declared``: a CSV
    column's declared type)."""
    import duckdb

    if fmt != "csv":
        return duckdb.read_parquet(path)
    names = csv_header(path)
    rel = duckdb.read_csv(path, all_varchar=True)
    # TRY(CAST(...)), not TRY_CAST: DuckDB pushes a TRY_CAST of a CSV column into the reader,
    # which then parses strictly and fails on the value (DuckDB 2.0)
    return rel.project(", ".join(
        f"TRY(CAST({quote(c)} AS {CSV_SQL[declared[c]]})) AS {quote(c)}"
        if c in declared else quote(c) for c in names))
