"""What every engine's reader of a spec's input file shares: the declared CSV column types and
the CSV header.

A release spec (``dpframe release``) names an input file, its format, the engine that reads it
and, for CSV, each column's type; each engine's folder turns that into a lazy frame
(``Backend.read_file``) by rules that cannot fail on any value: a value that does not parse as
its declared type is missing. Nothing is inferred from the data.
"""

from __future__ import annotations

import csv
import glob

__all__ = ["CSV_POLARS", "CSV_SQL", "csv_header", "quote"]

#: Each declared CSV type as a Polars dtype's name, and as an SQL type.
CSV_POLARS = {"float64": "Float64", "int64": "Int64", "string": "String", "bool": "Boolean",
              "date": "Date"}
CSV_SQL = {"float64": "DOUBLE", "int64": "BIGINT", "string": "VARCHAR", "bool": "BOOLEAN",
           "date": "DATE"}


def csv_header(path: str) -> list[str]:
    """The column names on the first line of ``path`` (the first file a glob matches)."""
    files = sorted(glob.glob(path, recursive=True)) if glob.has_magic(path) else [path]
    with open(files[0], "rb") as fh:
        first = fh.readline(1 << 20)
    return next(csv.reader([first.decode("utf-8-sig").rstrip("\r\n")]), [])


def quote(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
