"""DuckDB relations: immutable plans; a relation over tables or Python objects reads their
current contents, so it is copied at protect unless it reads files only."""

from __future__ import annotations

import re
import sys
from typing import Any

from dpframe.backends._base import Backend

__all__ = ["DuckDBBackend", "duckdb_parse", "is_duckdb_relation"]


def is_duckdb_relation(obj: Any) -> bool:
    """True for a DuckDB relation (``duckdb.DuckDBPyRelation``)."""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(obj, duckdb.DuckDBPyRelation)


class DuckDBBackend(Backend):
    """DuckDB relations (results in pandas: a few rows)."""

    name = "duckdb"
    family = "duckdb"
    result_family = "pandas"
    detect = staticmethod(is_duckdb_relation)

    def snapshot(self, frame: Any) -> Any:
        """The relation itself when it reads files only (bound by their identity, checked
        before each release), else its rows copied into Arrow and queried on a connection of
        dpframe's own (a relation over a table or a pandas frame reads their current
        contents)."""
        if _duckdb_reads_files_only(frame):
            return frame
        import duckdb

        copy = getattr(frame, "to_arrow_table", None) or frame.fetch_arrow_table
        return duckdb.connect().from_arrow(copy())

    def source_paths(self, frame: Any) -> list[str]:
        """The paths in the file-scanning calls of the relation's SQL."""
        return _duckdb_paths(frame.sql_query())


_DUCKDB_SCANS = re.compile(
    r"\b(?:read_parquet|parquet_scan|read_csv(?:_auto)?|csv_scan|read_json(?:_auto)?)\s*\(\s*"
    r"(\[[^\]]*\]|'(?:[^']|'')*')", re.IGNORECASE)


def _duckdb_paths(sql: str) -> list[str]:
    """File paths (or globs) in the file-scanning calls of a DuckDB relation's SQL."""
    paths = []
    for match in _DUCKDB_SCANS.finditer(sql):
        paths += [p.replace("''", "'") for p in re.findall(r"'((?:[^']|'')*)'", match.group(1))]
    return paths


#: DuckDB table functions that read files (whose identity dpframe binds at protect).
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


