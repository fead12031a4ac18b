"""The Spark engine: its adapter (:mod:`~dpframe.backends.spark._adapter`: ``SparkBackend``,
``is_spark_frame``) and its sums path as Spark SQL text (:mod:`~dpframe.backends.spark._sql`).
Not for users; the registry in :mod:`dpframe.backends` names it."""
