"""The DuckDB engine: its adapter (:mod:`~dpframe.backends.duckdb._adapter`:
``DuckDBBackend``, ``is_duckdb_relation``). Not for users; the registry in
:mod:`dpframe.backends` names it."""
