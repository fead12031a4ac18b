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
  their identity (:class:`dpframe.provenance.SourceBinding`), so every release parses the same
  bytes the check parsed and cannot fail.

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

import json
from typing import Any

from dpframe.backends import Backend, duckdb_parse
from dpframe.errors import UnsupportedInputError

__all__ = ["check_readers", "check_strings", "parse_in_full"]

_POLARS_FIX = (
    "pl.scan_csv(path, schema={'age': pl.Float64, 'region': pl.String, ...}, "
    "ignore_errors=True, truncate_ragged_lines=True) (values that do not parse become missing)"
)
_DUCKDB_FIX = (
    "duckdb.read_csv(path, dtype={'age': 'DOUBLE', 'region': 'VARCHAR', ...}) or "
    "read_csv(path, columns={...}), or all_varchar=true and casts in a derivation (a cast "
    "that fails gives a missing value)"
)
_DASK_FIX = (
    "dd.read_csv(path, dtype={'age': 'float64', 'region': 'string', ...}) naming every "
    "column, or dtype=str and casts in a derivation (a cast that fails gives a missing value)"
)


def check_readers(frame: Any, backend: Backend) -> None:
    """Refuse (reading no data) a CSV source whose column types would be inferred from the
    data, or a reader option that makes the rows read differ from the rows counted."""
    if backend.readable_plans:
        for options in _polars_csv_scans(frame):
            if options.get("schema") is None and options.get("infer_schema_length") != 0:
                raise UnsupportedInputError(
                    "this LazyFrame reads a CSV file whose column types Polars would infer from "
                    "its first rows; a later value that does not parse would then fail a "
                    "release. Declare the types: " + _POLARS_FIX + ". Nothing was read."
                )
    elif backend.name == "duckdb":
        for arguments in _duckdb_csv_scans(frame):
            if arguments.get("ignore_errors") == "true":
                raise UnsupportedInputError(
                    "DuckDB's read_csv(ignore_errors=true) drops rows that do not parse from "
                    "what queries read but not from count(*), so the protected size would not "
                    "be the rows the statistics see; declare the types without it: "
                    + _DUCKDB_FIX + ". Nothing was read."
                )
            if "columns" not in arguments and arguments.get("all_varchar") != "true":
                raise UnsupportedInputError(
                    "this DuckDB relation reads a CSV file whose column types DuckDB would "
                    "infer from a sample; a value the sample did not foresee would then fail a "
                    "release. Declare the types: " + _DUCKDB_FIX + ". Nothing was read."
                )
    elif backend.name == "dask":
        for columns, dtype in _dask_csv_reads(frame):
            declared = dtype is not None and (
                not isinstance(dtype, dict) or all(c in dtype for c in columns))
            if not declared:
                raise UnsupportedInputError(
                    "this Dask frame reads a CSV file whose column types Dask infers from its "
                    "first block; a later value that does not parse would then fail a "
                    "release. Declare every column's type: " + _DASK_FIX + ". Nothing was "
                    "read."
                )


def parse_in_full(data: Any, backend: Backend) -> int | None:
    """For a file source (CSV, and Parquet, IPC or JSON in Polars and DuckDB): read every
    value of every column once (at protect, before any budget exists), with the engine
    releases use, so that no release can be the first to meet a value that does not parse;
    returns the number of rows that parse gave (the public size: Polars' fast row count can
    disagree with its parser on a malformed file), None for other sources. A failure, or a
    warning from the reader (a malformed file), is refused with a fixed message: the reader's
    own would quote the data."""
    import warnings

    if not (_reads_csv(data, backend) or _reads_other_files(data, backend)):
        return None
    try:
        # (a reader may warn from its own threads, where a warning cannot become an error:
        # warnings are recorded and refused after the read)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if backend.readable_plans:
                import polars as pl

                counts = data.select(pl.len().alias("__dpframe_rows"),
                                     pl.all().null_count()).collect(engine="streaming")
                rows = int(counts.get_column("__dpframe_rows").item())
            elif backend.name == "duckdb":
                # count(COLUMNS(*)) does not decode strings: their byte lengths do
                texts = [f'max(strlen("{c.replace(chr(34), chr(34) * 2)}"))'
                         for c, t in zip(data.columns, data.types, strict=True)
                         if str(t) == "VARCHAR"]
                row = data.aggregate(", ".join(["count(*)", "count(COLUMNS(*))", *texts])
                                     ).fetchall()[0]
                rows = int(row[0])
            else:
                rows = int(data.map_partitions(
                    lambda part: len(part.notna().sum(axis=1))).compute().sum())
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
    Python's encoder. DuckDB replaces such bytes when it ingests Arrow; files are checked by
    :func:`parse_in_full`."""
    if _invalid_text(data, backend):
        raise UnsupportedInputError(
            "the frame holds strings that are not valid Unicode (bytes that are not UTF-8, or "
            "lone surrogates as decoding with errors='surrogateescape' leaves): engines fail "
            "to compare, group or hash them, so a release would fail on such a row. Repair "
            "them before protecting (decode the bytes with errors='replace'). The values are "
            "not shown. Nothing was spent."
        )


def _invalid_text(data: Any, backend: Backend) -> bool:
    if backend.family == "pandas":
        return any(_invalid_pandas_column(data[name]) for name in data.columns)
    if backend.name == "dask":
        if not any(_text_dtype(d) for d in data.dtypes):
            return False
        flags = data.map_partitions(
            lambda part: bool(any(_invalid_pandas_column(part[c]) for c in part.columns)),
            meta=(None, bool))
        return bool(flags.compute().any())
    if backend.family == "polars":
        import polars as pl
        import polars.selectors as cs

        if backend.lazy:
            if _reads_csv(data, backend) or _reads_other_files(data, backend):
                return False  # (parsed in full, which validates the text)
            data = data.select(cs.string() | cs.categorical() | cs.enum()).collect()
        for series in data.iter_columns():
            text = series.dtype == pl.String or isinstance(series.dtype,
                                                           pl.Categorical | pl.Enum)
            if text and not _valid_arrow(series.cast(pl.String).to_arrow()):
                return True
    return False


def _text_dtype(dtype: Any) -> bool:
    return str(dtype) == "object" or "str" in str(dtype)


def _invalid_pandas_column(column: Any) -> bool:
    """A pandas column holding a string that is not valid Unicode (object and Python-backed
    string columns: Python strings that do not encode; Arrow-backed strings: bytes that are
    not UTF-8)."""
    import pyarrow as pa

    if str(column.dtype) == "object" or getattr(column.dtype, "storage", None) == "python":
        try:
            for value in column.array:
                if isinstance(value, str):
                    value.encode("utf-8")
        except UnicodeError:
            return True
        return False
    if not _text_dtype(column.dtype):
        return False
    try:
        array = pa.array(column, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return False  # (not Arrow-backed text: numpy-held, converted by pandas)
    return not _valid_arrow(array)


def _valid_arrow(array: Any) -> bool:
    import pyarrow as pa

    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _reads_csv(frame: Any, backend: Backend) -> bool:
    if backend.readable_plans:
        return bool(_polars_csv_scans(frame))
    if backend.name == "duckdb":
        return bool(_duckdb_csv_scans(frame))
    if backend.name == "dask":
        return bool(_dask_csv_reads(frame))
    return False


#: DuckDB table functions that read Parquet, JSON or other files (CSV ones are above).
_DUCKDB_FILE_READERS = frozenset({"read_parquet", "parquet_scan", "read_json", "read_json_auto",
                                  "read_ndjson", "read_ndjson_auto", "read_json_objects",
                                  "read_ndjson_objects", "read_blob", "read_text"})


def _reads_other_files(frame: Any, backend: Backend) -> bool:
    """A Polars plan scanning files of another format than CSV, or a DuckDB relation calling
    a file-reading table function (DuckDB's own parse of its query)."""
    if backend.readable_plans:
        from dpframe.polars_plan import scan_nodes

        return any(node.scan_type and str(node.scan_type[0]) != "csv"
                   for node in scan_nodes(frame))
    if backend.name == "duckdb":
        return bool(_duckdb_table_functions(frame) & _DUCKDB_FILE_READERS)
    return False


def _duckdb_table_functions(relation: Any) -> set[str]:
    return {str(f.get("function_name", "")).lower() for f in _duckdb_function_nodes(relation)}


def _duckdb_function_nodes(relation: Any) -> list[dict[str, Any]]:
    """Every table function call in a DuckDB relation's query (DuckDB's own parse)."""
    tree = duckdb_parse(relation)
    found: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
            return
        if not isinstance(node, dict):
            return
        if node.get("type") == "TABLE_FUNCTION":
            found.append(node.get("function") or {})
        for value in node.values():
            visit(value)

    if tree is not None:
        visit(tree.get("statements", []))
    return found


def _polars_csv_scans(lazy: Any) -> list[dict[str, Any]]:
    """The options of every CSV scan in a LazyFrame's plan (from Polars' plan visitor)."""
    from dpframe.polars_plan import scan_nodes

    found = []
    for node in scan_nodes(lazy):
        scan_type = node.scan_type
        if scan_type and str(scan_type[0]) == "csv":
            try:
                found.append(json.loads(scan_type[1]))
            except (TypeError, ValueError, IndexError):  # an unknown layout: refuse as inferred
                found.append({})
    return found


_DUCKDB_CSV_READERS = frozenset({"read_csv", "read_csv_auto", "csv_scan", "sniff_csv"})


def _duckdb_csv_scans(relation: Any) -> list[dict[str, str]]:
    """The named arguments (name -> constant text, ``"columns"`` -> ``"declared"``) of every
    CSV-reading table function in a DuckDB relation's query (DuckDB's own parse)."""
    return [_named_arguments(f) for f in _duckdb_function_nodes(relation)
            if str(f.get("function_name", "")).lower() in _DUCKDB_CSV_READERS]


def _named_arguments(function: dict[str, Any]) -> dict[str, str]:
    """Named arguments, written ``name := value`` (the relational API) or ``name = value``."""
    out: dict[str, str] = {}
    for arg in function.get("arguments") or function.get("children") or []:
        if not isinstance(arg, dict):
            continue
        expr = arg.get("expression", arg)
        if not isinstance(expr, dict):
            continue
        name, value = str(arg.get("name") or ""), expr
        if not name and expr.get("type") == "COMPARE_EQUAL":
            names = (expr.get("left") or {}).get("column_names") or []
            name, value = (str(names[-1]) if names else ""), expr.get("right") or {}
        if not name:
            continue
        literal = value.get("literal") or {}
        out[name.lower()] = str(literal.get("text", "")).lower() if literal else "declared"
    return out


def _dask_csv_reads(frame: Any) -> list[tuple[list[str], Any]]:
    """(columns, dtype argument) of every pandas CSV reader in a Dask expression tree."""
    found: list[tuple[list[str], Any]] = []
    stack = [getattr(frame, "expr", None)]
    seen = 0
    while stack and seen < 10_000:
        expr = stack.pop()
        seen += 1
        if expr is None:
            continue
        parameters = getattr(expr, "_parameters", ())
        if "func" in parameters:
            func = expr.operand("func")
            keywords = getattr(func, "keywords", None) or {}
            reader = keywords.get("reader")
            if getattr(reader, "__name__", "") in ("read_csv", "read_table", "read_fwf"):
                kwargs = keywords.get("kwargs") or {}
                found.append((list(keywords.get("full_columns") or []), kwargs.get("dtype")))
        stack.extend(expr.dependencies())
    return found
