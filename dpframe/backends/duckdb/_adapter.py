"""DuckDB relations: immutable plans; a relation over tables or Python objects reads their
current contents, so it is copied at protect unless it reads files only."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.backends._base import Backend, registered
from dpframe.backends.duckdb._batch_route import relation_sums
from dpframe.backends.duckdb._file_input import read_file
from dpframe.errors import UnsupportedInputError
from dpframe.query import Agg
from dpframe.rowwise.engines import SQLTarget

__all__ = ["DuckDBBackend", "duckdb_parse", "is_duckdb_relation"]


def is_duckdb_relation(obj: Any) -> bool:
    """True for a DuckDB relation (``duckdb.DuckDBPyRelation``)."""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(obj, duckdb.DuckDBPyRelation)


class DuckDBBackend(Backend):
    """DuckDB relations (results in pandas: a few rows)."""

    name = "duckdb"
    family = "duckdb"
    rowwise = SQLTarget("dpframe.backends.duckdb._rowwise", "duckdb")
    result_family = "pandas"
    fixed_schema = True
    detect = staticmethod(is_duckdb_relation)

    def read_file(self, path: str, fmt: str, declared: Mapping[str, str]) -> Any:

        return read_file(path, fmt, declared)

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """The relation's Arrow batches summed by the numpy kernel where its column types
        allow it (:mod:`._batch_route`: the same exact sums), else None: the SQL."""
        return relation_sums(frame, aggs, missing, group_by, keys, registered("polars"))

    def namespace_target(self) -> tuple[type, Any] | None:
        return sys.modules["duckdb"].DuckDBPyRelation, None

    def snapshot(self, frame: Any) -> Any:
        """The relation itself when it reads files only (bound by their content, checked
        before each release), else its rows copied into Arrow and queried on a connection of
        dpframe's own (a relation over a table or a pandas frame reads their current
        contents)."""
        if _duckdb_reads_files_only(frame):
            return frame
        import duckdb

        copy = getattr(frame, "to_arrow_table", None) or frame.fetch_arrow_table
        return duckdb.connect().from_arrow(copy())

    def lineage(self, frame: Any) -> set[str]:
        """The names in the relation's SQL that identify what it reads, from its structure
        (never its data): DuckDB's registered Python objects (``__duckdb_source_..._<k>``:
        a pandas frame, Arrow table or relation it scans) and generated relation aliases
        (``unnamed_relation_<16 hex>``, ``df_<16 hex>``, ...), including its own. A
        native derivation (``project``, ``filter``, ``order``, ``aggregate``, a query naming
        the relation) keeps the names of the relation it derives from; tables, views and
        hand-written aliases are named by the user and are not lineage."""
        try:
            names = set(_LINEAGE.findall(frame.sql_query()))
        except Exception:  # (a relation without SQL text: no lineage to read)
            return set()
        if _GENERATED_ALIAS.fullmatch(str(frame.alias)):
            names.add(str(frame.alias))
        return names

    def source_paths(self, frame: Any) -> list[str]:
        """The paths in the file-scanning calls of the relation's SQL."""
        return _duckdb_paths(frame.sql_query())

    def check_readers(self, frame: Any) -> None:
        """``read_csv`` must declare its types (``columns=``, ``dtype=`` or
        ``all_varchar=true``) and must not ``ignore_errors``: that drops rows that do not parse
        from what queries read but not from ``count(*)``."""
        for arguments in _csv_scans(frame):
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

    def reads_csv(self, frame: Any) -> bool:
        return bool(_csv_scans(frame))

    def reads_other_files(self, frame: Any) -> bool:
        """A file-reading table function other than CSV (DuckDB's own parse of the query)."""
        return bool(_table_functions(frame) & _OTHER_FILE_READERS)

    def parse_rows(self, frame: Any) -> int:
        # count(COLUMNS(*)) does not decode strings: their byte lengths do
        texts = [f'max(strlen("{c.replace(chr(34), chr(34) * 2)}"))'
                 for c, t in zip(frame.columns, frame.types, strict=True)
                 if str(t) == "VARCHAR"]
        row = frame.aggregate(", ".join(["count(*)", "count(COLUMNS(*))", *texts])
                              ).fetchall()[0]
        return int(row[0])


_DUCKDB_FIX = (
    "duckdb.read_csv(path, dtype={'age': 'DOUBLE', 'region': 'VARCHAR', ...}) or "
    "read_csv(path, columns={...}), or all_varchar=true and casts in a derivation (a cast "
    "that fails gives a missing value)"
)

#: DuckDB table functions that read Parquet, JSON or other files (CSV ones below).
_OTHER_FILE_READERS = frozenset({"read_parquet", "parquet_scan", "read_json", "read_json_auto",
                                 "read_ndjson", "read_ndjson_auto", "read_json_objects",
                                 "read_ndjson_objects", "read_blob", "read_text"})

_CSV_READERS = frozenset({"read_csv", "read_csv_auto", "csv_scan", "sniff_csv"})


def _table_functions(relation: Any) -> set[str]:
    return {str(f.get("function_name", "")).lower() for f in _function_nodes(relation)}


def _function_nodes(relation: Any) -> list[dict[str, Any]]:
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


def _csv_scans(relation: Any) -> list[dict[str, str]]:
    """The named arguments (name -> constant text, ``"columns"`` -> ``"declared"``) of every
    CSV-reading table function in a DuckDB relation's query (DuckDB's own parse)."""
    return [_named_arguments(f) for f in _function_nodes(relation)
            if str(f.get("function_name", "")).lower() in _CSV_READERS]


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


#: a registered Python object, or an alias DuckDB generated, as quoted in a relation's SQL
_LINEAGE = re.compile(r'"(__duckdb_source_[0-9A-Za-z]+_[0-9]+|[A-Za-z_]+_[0-9a-f]{16})"')
_GENERATED_ALIAS = re.compile(r"[A-Za-z_]+_[0-9a-f]{16}")

_DUCKDB_SCANS = re.compile(
    r"\b(?:read_parquet|parquet_scan|read_csv(?:_auto)?|csv_scan|read_json(?:_auto)?)\s*\(\s*"
    r"(\[[^\]]*\]|'(?:[^']|'')*')", re.IGNORECASE)


def _duckdb_paths(sql: str) -> list[str]:
    """File paths (or globs) in the file-scanning calls of a DuckDB relation's SQL."""
    paths = []
    for match in _DUCKDB_SCANS.finditer(sql):
        paths += [p.replace("''", "'") for p in re.findall(r"'((?:[^']|'')*)'", match.group(1))]
    return paths


#: DuckDB table functions that read files (whose content dpframe binds at protect).
_DUCKDB_FILE_READERS = frozenset({
    "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "csv_scan", "read_json",
    "read_json_auto", "read_ndjson", "read_ndjson_auto"})


def _duckdb_reads_files_only(relation: Any) -> bool:
    """Whether a DuckDB relation's query reads nothing but files through file-reading table
    functions (no table, view, replacement scan of a Python object, or other table
    function), from DuckDB's own parse of its SQL. Anything unreadable counts as False."""
    tree = duckdb_parse(relation)
    if tree is None:  # an engine version that answers differently: copy instead
        return False
    ctes: set[str] = set()
    _cte_names(tree, ctes)
    return _only_file_scans(tree["statements"], ctes)


def duckdb_parse(relation: Any) -> dict[str, Any] | None:
    """DuckDB's own parse of a relation's SQL (``json_serialize_sql``), on a throwaway
    connection (no data is read); None when it cannot be had."""
    import json

    import duckdb

    try:
        row = duckdb.connect().execute("SELECT json_serialize_sql(?)",
                                       [relation.sql_query()]).fetchone()
        tree = json.loads(row[0]) if row is not None else None
    except Exception:
        return None
    if not isinstance(tree, dict) or tree.get("error") or not tree.get("statements"):
        return None
    return tree


def _cte_names(node: Any, found: set[str]) -> None:
    """Every common-table-expression name defined anywhere in a parsed query (the relational
    API wraps each step in one; a reference to it is a step of the same query)."""
    if isinstance(node, list):
        for item in node:
            _cte_names(item, found)
    elif isinstance(node, dict):
        for entry in (node.get("cte_map") or {}).get("map", []) if isinstance(
                node.get("cte_map"), dict) else []:
            found.add(str(entry.get("key")))
        for value in node.values():
            _cte_names(value, found)


def _only_file_scans(node: Any, ctes: set[str]) -> bool:
    if isinstance(node, list):
        return all(_only_file_scans(item, ctes) for item in node)
    if not isinstance(node, dict):
        return True
    kind = node.get("type")
    if kind == "BASE_TABLE" and (node.get("schema_name") or node.get("catalog_name")
                                 or node.get("table_name") not in ctes):
        return False
    if kind == "TABLE_FUNCTION":
        function = node.get("function") or {}
        if str(function.get("function_name", "")).lower() not in _DUCKDB_FILE_READERS:
            return False
    return all(_only_file_scans(value, ctes) for value in node.values())


