"""A spec's input file as a Dask DataFrame (``Backend.read_file``): Parquet read as it is; CSV
read as text and each partition converted to the declared types by
:func:`typed_partition`, totally (``pd.to_numeric(errors="coerce")`` and friends)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["read_file", "typed_partition"]


def read_file(path: str, fmt: str, declared: Mapping[str, str]) -> Any:
    """The Dask frame reading ``path`` (``fmt``: "parquet" or "csv"; ``declared``: a CSV
    column's declared type)."""
    import dask.dataframe as dd

    if fmt != "csv":
        return dd.read_parquet(path)
    wanted = dict(declared)
    text = dd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    meta = typed_partition(text._meta, wanted)
    return text.map_partitions(typed_partition, wanted, meta=meta)


def typed_partition(part: Any, declared: dict[str, str]) -> Any:
    """One pandas partition of text columns converted to the declared types, totally: a
    value that does not parse (or an integer beyond 2^53) becomes missing."""
    import numpy as np
    import pandas as pd

    out = part.copy()
    for column, kind in declared.items():
        if column not in out.columns:
            continue
        text = out[column].astype("string")
        if kind in ("float64", "int64"):
            number = pd.to_numeric(text, errors="coerce").astype("Float64")
            if kind == "int64":
                whole = number.notna() & (np.floor(number) == number) & (number.abs() < 2.0**53)
                number = number.where(whole).astype("Int64")
            out[column] = number
        elif kind == "bool":
            lowered = text.str.strip().str.lower()
            out[column] = lowered.map({"true": True, "false": False, "1": True, "0": False}
                                      ).astype("boolean")
        elif kind == "date":
            out[column] = pd.to_datetime(text, errors="coerce").dt.normalize()
        else:
            out[column] = text
    return out


