"""Readers of protected sources: no type inferred from the data, no value that fails a release.

A CSV reader that infers column types from a sample of the rows (Polars reads 100 rows, DuckDB
samples, Dask reads the first block) fails later, on the first value the sample did not
foresee — inside a release, with a message quoting the value or the line. Whether a release
fails then depends on one row: a leak. So a protected CSV source must

* **declare its types**: Polars ``scan_csv(schema=...)`` (or ``infer_schema=False``: every
  column a string), DuckDB ``read_csv(columns={...})`` (or ``all_varchar=true``), Dask
  ``read_csv(dtype={...})`` covering every column; and
* **parse in full at protect**: :func:`parse_in_full` reads every value of every column once,
  when the data is protected (before any budget exists). A file that does not parse as
  declared is refused there, without the reader's message. Afterwards the files are bound by
  their content (:class:`dpframe.provenance._binding.SourceBinding`: BLAKE3 or SHA-256 digests
  covering every byte, :mod:`dpframe.provenance._digests` — a Parquet file's by footer and
  column chunks — and the bytes a release can read re-checked at each release, beside
  the engine's read and before anything is drawn or spent), so every release that is answered
  parsed the same bytes the check parsed and cannot fail.

Other files are parsed in full at protect too (Polars and DuckDB scans of Parquet, IPC or JSON):
their types are declared by the file, but a value can still fail to decode (a string column
holding bytes that are not UTF-8 fails every read of that column, so a release reading it
would fail on one row's value).

With Polars, ``ignore_errors=True`` (and ``truncate_ragged_lines=True``) make values that do
not parse missing instead, which is what a steward usually wants. DuckDB's ``ignore_errors``
is refused: it drops whole rows from what a query reads but not from ``count(*)``, so the
public size would not be the number of rows the statistics see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpframe.backends import Backend
from dpframe.errors import UnsupportedInputError

__all__ = ["check_readers", "check_strings", "expand_paths", "parse_in_full"]


def expand_paths(patterns: Sequence[str]) -> list[str]:
    """The files named by ``patterns``: a glob expanded (sorted), a folder replaced by every
    file under it (sorted, recursively: what a Parquet or Hive-partitioned folder reader can
    read), any other path as given."""
    import glob
    import os

    paths: list[str] = []
    for pattern in patterns:
        named = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) \
            else [pattern]
        for path in named:
            if os.path.isdir(path):
                paths += sorted(os.path.join(root, name)
                                for root, _dirs, names in os.walk(path) for name in names)
            else:
                paths.append(path)
    return paths


def check_readers(frame: Any, backend: Backend) -> None:
    """Refuse (reading no data) a CSV source whose column types would be inferred from the
    data, or a reader option that makes the rows read differ from the rows counted (each
    engine's rule: :meth:`dpframe.backends.Backend.check_readers`)."""
    backend.check_readers(frame)


def parse_in_full(data: Any, backend: Backend) -> int | None:
    """For a file source (CSV, and Parquet, IPC or JSON in Polars and DuckDB): read every
    value of every column once (at protect, before any budget exists), with the engine
    releases use, so that no release can be the first to meet a value that does not parse;
    returns the number of rows that parse gave (the public size: Polars' fast row count can
    disagree with its parser on a malformed file), None for other sources. A failure, or a
    warning from the reader (a malformed file), is refused with a fixed message: the reader's
    own would quote the data."""
    import warnings

    if not (backend.reads_csv(data) or backend.reads_other_files(data)):
        return None
    try:
        # (a reader may warn from its own threads, where a warning cannot become an error:
        # warnings are recorded and refused after the read)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            rows = backend.parse_rows(data)
        if any(not issubclass(w.category, DeprecationWarning | FutureWarning) for w in seen):
            raise ValueError("the reader warned")
        return rows
    except Exception:
        raise UnsupportedInputError(
            "the file source does not parse cleanly (a CSV with its declared column types; a "
            "Parquet, IPC or JSON file with its own: a string that is not UTF-8, ...; the "
            "reader's message is not shown: it can quote the data). Declare types every value "
            "fits, or let values that do not parse become missing (Polars: ignore_errors=True, "
            "truncate_ragged_lines=True; DuckDB and Dask: read the columns as strings and cast "
            "in a derivation); a malformed file (unbalanced quotes, ...) must be repaired."
        ) from None


def check_strings(data: Any, backend: Backend) -> None:
    """Refuse (at protect, before any budget exists) a frame holding a string that is not
    valid Unicode: Polars and pandas take Arrow strings (``pl.from_arrow``, pandas' Arrow
    dtypes, Dask's Parquet reader) without checking their UTF-8, and a pandas object column
    can hold lone surrogates (``bytes.decode(errors="surrogateescape")``); either fails the
    first comparison, group-by or hash that meets it — in a release, on one row's value.
    Checked with Arrow's full validation (about 15 ns per value) or, for object columns,
    Python's encoder (:meth:`dpframe.backends.Backend.invalid_text`). DuckDB replaces such
    bytes when it ingests Arrow; files are checked by :func:`parse_in_full`."""
    if backend.invalid_text(data):
        raise UnsupportedInputError(
            "the frame holds strings that are not valid Unicode (bytes that are not UTF-8, or "
            "lone surrogates as decoding with errors='surrogateescape' leaves): engines fail "
            "to compare, group or hash them, so a release would fail on such a row. Repair "
            "them before protecting (decode the bytes with errors='replace'). The values are "
            "not shown. Nothing was spent."
        )
