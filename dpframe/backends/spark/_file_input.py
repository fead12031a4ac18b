"""A spec's input file as a Spark DataFrame (``Backend.read_file``), in a local session the
reader starts if none is running: Parquet read as it is; CSV read with the declared schema in
Spark's permissive mode (a value that does not parse is NULL)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpframe.backends._file_inputs import csv_header

__all__ = ["read_file"]


def _session() -> Any:
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[1]").appName("dpframe-release")
            .config("spark.ui.enabled", "false").getOrCreate())


def read_file(path: str, fmt: str, declared: Mapping[str, str]) -> Any:
    """The DataFrame reading ``path`` (``fmt``: "parquet" or "csv"; ``declared``: a CSV
    column's declared type; an undeclared column is text)."""
    if fmt != "csv":
        return _session().read.parquet(path)
    from pyspark.sql import types as spark_types

    kinds = {"float64": spark_types.DoubleType(), "int64": spark_types.LongType(),
             "string": spark_types.StringType(), "bool": spark_types.BooleanType(),
             "date": spark_types.DateType()}
    schema = spark_types.StructType([
        spark_types.StructField(c, kinds[declared.get(c, "string")], True)
        for c in csv_header(path)])
    return _session().read.csv(path, header=True, schema=schema, mode="PERMISSIVE")
