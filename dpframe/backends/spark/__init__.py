"""The Spark engine, everything that speaks its API: the adapter
(:mod:`~dpframe.backends.spark._adapter`: ``SparkBackend``, ``is_spark_frame``), its sums path as
Spark SQL text (:mod:`~dpframe.backends.spark._sql`), the row-wise compiler to SQL
(:mod:`~dpframe.backends.spark._rowwise`, over ``_sql_compiler``, ``_sql_types``, ``_sql_casts``,
``_sql_numeric``, ``_sql_strings``, ``_sql_temporal``) and a spec's input reader
(:mod:`~dpframe.backends.spark._file_input`). Not for users; the registry in
:mod:`dpframe.backends` names it."""
