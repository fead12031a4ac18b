"""The DuckDB engine, everything that speaks its API: the adapter
(:mod:`~dpframe.backends.duckdb._adapter`: ``DuckDBBackend``, ``is_duckdb_relation``), the
row-wise compiler to SQL (:mod:`~dpframe.backends.duckdb._rowwise`, over ``_sql_compiler``,
``_sql_types``, ``_sql_numeric``, ``_sql_strings``, ``_sql_regex``, ``_sql_temporal``) and a
spec's input reader (:mod:`~dpframe.backends.duckdb._file_input`). Not for users; the registry in
:mod:`dpframe.backends` names it."""
