"""Turn release outcomes and log documents into frames of the caller's library."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe.backends import Backend
from dpframe.release import Outcome

__all__ = ["LOG_COLUMNS", "describe_frame", "log_frame", "matrix_frame", "to_frame"]

LOG_COLUMNS = (
    "ledger_id", "release_id", "time", "name", "query", "part", "columns", "group_by",
    "group_keys", "epsilon", "delta", "mechanism_epsilon", "epsilon_overhead", "sensitivity",
    "mechanism", "scale", "grid", "domain_lower", "domain_upper", "clamping", "missing",
    "random_source", "engine", "size", "formulation", "composition", "fixed_point_quantum",
    "derivation", "verification",
)
_FLOAT_COLUMNS = frozenset({
    "epsilon", "delta", "mechanism_epsilon", "epsilon_overhead", "sensitivity", "scale",
    "grid", "domain_lower", "domain_upper",
})


def to_frame(out: Outcome) -> Any:
    """One row (ungrouped) or one row per declared key (grouped), one column per query."""
    data: dict[str, list[Any]] = {}
    if out.group_by is not None:
        data[out.group_by] = list(out.keys or [])
    for name, vals in out.values.items():
        data[name] = [float(v) for v in np.atleast_1d(vals)]
    return out.backend.table(data)


def matrix_frame(matrix: np.ndarray, columns: Sequence[str], backend: Backend) -> Any:
    """A labelled square matrix: pandas index and columns are the names; Polars has a leading
    ``column`` column."""
    data = {c: [float(v) for v in matrix[:, j]] for j, c in enumerate(columns)}
    if backend.results_in == "pandas":
        return backend.table(data, index=list(columns))
    return backend.table({"column": list(columns), **data})


def describe_frame(out: Outcome, columns: Sequence[str],
                   bounds: Mapping[str, tuple[float, float]]) -> Any:
    """Rows count, mean, std, lower, upper; one column per described column."""
    rows = ["count", "mean", "std", "lower", "upper"]
    count = float(out.values["count"][0])
    data = {
        c: [count, float(out.values[f"mean[{c}]"][0]), float(out.values[f"std[{c}]"][0]),
            float(bounds[c][0]), float(bounds[c][1])]
        for c in columns
    }
    if out.backend.results_in == "pandas":
        return out.backend.table(data, index=rows)
    return out.backend.table({"statistic": rows, **data})


def log_frame(document: dict[str, Any], backend: Backend | str) -> Any:
    """The log's entries as a frame (pandas or Polars), columns in :data:`LOG_COLUMNS`."""
    family = backend if isinstance(backend, str) else backend.results_in
    rows = [{c: e.get(c) for c in LOG_COLUMNS} for e in document.get("entries", [])]
    if family == "pandas":
        import pandas as pd

        return pd.DataFrame(rows, columns=list(LOG_COLUMNS))
    import polars as pl

    schema: dict[str, Any] = {c: pl.Float64 if c in _FLOAT_COLUMNS else pl.String
                              for c in LOG_COLUMNS}
    schema["release_id"] = pl.Int64
    fixed = [{c: (str(v) if v is not None and schema[c] == pl.String else v)
              for c, v in r.items()} for r in rows]
    return pl.DataFrame(fixed, schema=schema) if fixed else pl.DataFrame(schema=schema)


