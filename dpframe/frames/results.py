"""Turn release outcomes and log documents into frames of the caller's library."""

from __future__ import annotations

from typing import Any

from dpframe.frames.release import Outcome

__all__ = ["LOG_COLUMNS", "log_frame", "to_frame"]

LOG_COLUMNS = (
    "release_id", "time", "name", "query", "part", "columns", "group_by", "group_keys",
    "epsilon", "delta", "mechanism_epsilon", "epsilon_overhead", "sensitivity", "mechanism",
    "scale", "grid", "domain_lower", "domain_upper", "clamping", "nulls", "random_source",
    "engine", "size", "formulation", "composition", "fixed_point_quantum",
)


def to_frame(out: Outcome, backend: str) -> Any:
    """One row (ungrouped) or one row per declared key (grouped), one column per query."""
    data: dict[str, list[Any]] = {}
    if out.group_by is not None:
        data[out.group_by] = list(out.keys or [])
    for name, vals in out.values.items():
        data[name] = [float(v) for v in vals]
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame(data)
    import polars as pl

    return pl.DataFrame(data, strict=False)


def log_frame(document: dict[str, Any], backend: str) -> Any:
    """The log's entries as a frame (pandas or Polars), columns in :data:`LOG_COLUMNS`."""
    entries = list(document.get("entries", []))
    rows = [{c: e.get(c) for c in LOG_COLUMNS} for e in entries]
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame(rows, columns=list(LOG_COLUMNS))
    import polars as pl

    schema = {c: _polars_type(c) for c in LOG_COLUMNS}
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(
        schema=schema)


def _polars_type(col: str) -> Any:
    import polars as pl

    if col == "release_id":
        return pl.Int64
    if col in ("epsilon", "delta", "mechanism_epsilon", "epsilon_overhead", "sensitivity",
               "scale", "grid", "domain_lower", "domain_upper", "fixed_point_quantum"):
        return pl.Float64
    return pl.String
