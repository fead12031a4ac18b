"""The boundary harness's data and frames, shared by the privacy tests (tests/privacy) and the
quantile pipeline's neighbour tests (tests/mechanisms/test_quantiles_frames.py): a small data
set, its protected form on any backend, pairs of first rows that make neighbouring data sets,
and the derived frames (views) queries run on."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import narwhals as nw
import numpy as np
import pandas as pd

import dpframe as dpf

BOUNDS = {"age": (0.0, 100.0), "income": (0.0, 1000.0)}
KEYS = {"g": ["a", "b", "c"]}


def protect(make: Any, data: dict[str, list[Any]], **kw: Any) -> Any:
    """Protect ``data`` built by ``make``: the ``constructor`` fixture (any backend), or the
    name of an in-memory backend for tests that are about one library."""
    from conftest import Constructor

    kw.setdefault("bounds", BOUNDS)
    kw.setdefault("keys", KEYS)
    build = Constructor(make) if isinstance(make, str) else make
    return dpf.protect(build(pd.DataFrame(data)), epsilon=1e6, **kw)


def base_data(n: int = 20) -> dict[str, list[Any]]:
    rng = np.random.default_rng(5)
    return {
        "age": rng.uniform(0, 100, n).round(1).tolist(),
        "income": rng.uniform(0, 1000, n).round(0).tolist(),
        "g": [["a", "b", "c"][i % 3] for i in range(n)],
    }


def with_row(data: dict[str, list[Any]], **values: Any) -> dict[str, list[Any]]:
    out = {k: list(v) for k, v in data.items()}
    for k, v in values.items():
        out[k][0] = v
    return out


#: neighbour pairs: the first row of base_data() set to each side
NEIGHBOURS = {
    "null vs value": ({"age": math.nan}, {"age": 30.0}),
    "extreme finite": ({"age": 1.7e308}, {"age": -1.7e308}),
    "infinite vs value": ({"age": math.inf}, {"age": 50.0}),
    "crosses the filter": ({"age": 40.0}, {"age": 60.0}),
    "changes group": ({"g": "a"}, {"g": "b"}),
    "leaves the declared keys": ({"g": "a"}, {"g": "zzz"}),
}


def views() -> dict[str, Callable[[Any], Any]]:
    """Frames the queries run on: the root, a filter, a row-wise new column, a rename."""
    return {
        "root": lambda f: f,
        "filter": lambda f: f.dp.filter(nw.col("age") >= 50),
        "with_columns": lambda f: f.dp.with_columns(
            (nw.col("age") * 2).alias("age2"), bounds={"age2": (0.0, 200.0)}),
        "rename": lambda f: f.dp.rename({"age": "years"}),
    }
