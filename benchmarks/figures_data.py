"""The data every figure of ``python -m benchmarks`` runs on: a column ``x`` uniform on the
public bounds [0, 100] and an integer key ``k`` uniform on ``range(n_keys)``, seeded, so that
two runs measure the same numbers; frames with their own buffers (dpframe refuses a second
budget on memory a protected frame already reads) and protected with a budget large enough
for every round (each query spends ε = 1, in-memory ledger)."""

from __future__ import annotations

import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

LOWER, UPPER = 0.0, 100.0
BOUNDS = {"x": (LOWER, UPPER)}
EDGES = [float(e) for e in range(0, 101, 10)]  # 10 bins of [0, 100]
EPS = 1.0
DATA_DIR = Path(__file__).resolve().parent / ".data"


@lru_cache(maxsize=4)
def columns(rows: int, n_keys: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.uniform(LOWER, UPPER, rows), rng.integers(0, n_keys, rows)


def frame(engine: str, rows: int, n_keys: int = 10) -> Any:
    """A new pandas or Polars (eager, or ``polars-lazy``: its ``.lazy()``) frame."""
    import pandas as pd
    import polars as pl

    x, k = columns(rows, n_keys)
    data = {"x": x.copy(), "k": k.copy()}
    if engine == "pandas":
        return pd.DataFrame(data)
    df = pl.DataFrame(data)
    return df.lazy() if engine == "polars-lazy" else df


def protect(obj: Any, n_keys: int | None = 10) -> Any:
    import dpframe as dpf

    keys = None if n_keys is None else {"k": list(range(n_keys))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(obj, epsilon=1e15, bounds=BOUNDS, missing={"x": LOWER}, keys=keys)


def protected(engine: str, rows: int, n_keys: int = 10) -> Any:
    return protect(frame(engine, rows, n_keys), n_keys)


def parquet(rows: int, n_keys: int, tag: str = "") -> Path:
    """The columns written once to ``benchmarks/.data/figures-<rows>-<keys>[-tag].parquet``
    (one file per engine: a file a protected frame reads cannot be protected again)."""
    import polars as pl

    path = DATA_DIR / f"figures-{rows}-{n_keys}{'-' + tag if tag else ''}.parquet"
    if not path.exists():
        DATA_DIR.mkdir(exist_ok=True)
        x, k = columns(rows, n_keys)
        tmp = path.with_suffix(".tmp")
        pl.DataFrame({"x": x, "k": k}).write_parquet(tmp)
        tmp.rename(path)
    return path
