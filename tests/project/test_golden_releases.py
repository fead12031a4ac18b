"""The golden set (issue 31): seeded releases of every statistic family on every backend,
recorded before the move into layer packages and asserted **bit-identical** after it (and after
any other change that must not change a released value).

Each backend's releases, its log (without the fields that carry times, ledger ids or library
versions) and a sealed Parquet file's log read back are recorded in ``golden_releases.json``
next to this file; floats are kept exactly (``float.hex``). The spec run (``dpframe release``
through :func:`dpframe.spec._run.run_spec`) is recorded once.

``DPFRAME_RECORD_GOLDEN=1 pytest tests/project/test_golden_releases.py`` rewrites the entries
of the backends it runs (``--all-backends`` adds Spark and Dask); run it serially (``-n 0``)
and only when a change of released values is intended, and say why in the commit.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf

FIXTURE = Path(__file__).with_name("golden_releases.json")
RECORD = os.environ.get("DPFRAME_RECORD_GOLDEN") == "1"
#: log fields that differ between runs or installations, not between releases (the seal's and
#: the ledger chain's digests cover the times and ledger ids)
VOLATILE = frozenset({"time", "ledger_id", "engine", "digest", "chain", "head"})


def _norm(value: Any) -> Any:
    """A JSON-able, exact form of a release's value: floats as ``float.hex``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value.hex()
    if isinstance(value, pd.DataFrame):
        return {"columns": [str(c) for c in value.columns],
                "index": _norm(list(value.index)) if not isinstance(
                    value.index, pd.RangeIndex) else None,
                "data": {str(c): _norm(list(value[c])) for c in value.columns
                         if str(c) not in VOLATILE}}
    if isinstance(value, pd.Series):
        return {"index": _norm(list(value.index)), "values": _norm(list(value))}
    if type(value).__module__.startswith("polars"):
        return _norm(value.to_pandas()) if hasattr(value, "to_pandas") else repr(value)
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items() if str(k) not in VOLATILE}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {"type": type(value).__name__,
                **{f: _norm(getattr(value, f)) for f in value.__dataclass_fields__}}
    if value is pd.NA or value is pd.NaT:
        return "NA"
    return repr(value)


def _data(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "x": rng.uniform(0, 10, n).round(3),
        "y": rng.uniform(-5, 5, n).round(3),
        "g": rng.choice(["a", "b", "c"], n),
        "h": rng.choice(["u", "v", "w", "z"], n),
        "pid": np.repeat(np.arange(n // 2), 2),
    })


def _releases(constructor: Any, tmp_path: Path) -> dict[str, Any]:
    import narwhals as nw

    out: dict[str, Any] = {}
    frame = constructor(_data())
    pf = dpf.protect(frame, epsilon=1e6, delta=1e-3, bounds={"x": (0, 10), "y": (-5, 5)},
                     keys={"g": ["a", "b", "c"]}, missing={"x": 0, "y": 0})
    ns = pf.dp
    seed = iter(range(100, 1000))
    out["count"] = ns.count(epsilon=1.0, random_state=next(seed))
    out["sum"] = ns.sum("x", epsilon=1.0, random_state=next(seed))
    out["mean"] = ns.mean("x", epsilon=1.0, random_state=next(seed))
    out["mean_laplace"] = ns.mean("x", epsilon=1.0, mechanism="laplace",
                                  random_state=next(seed))
    out["variance"] = ns.variance("x", epsilon=1.0, random_state=next(seed))
    out["std"] = ns.std("y", epsilon=1.0, random_state=next(seed))
    out["proportions"] = ns.proportions("g", epsilon=1.0, random_state=next(seed))
    out["value_counts"] = ns.value_counts("g", epsilon=1.0, random_state=next(seed))
    out["histogram"] = ns.histogram("x", edges=[0, 2.5, 5, 7.5, 10], epsilon=1.0,
                                    random_state=next(seed))
    out["quantiles"] = ns.quantile("x", [0.1, 0.5, 0.9], epsilon=1.0, random_state=next(seed))
    out["median"] = ns.median("y", epsilon=1.0, random_state=next(seed))
    out["cov"] = ns.cov(["x", "y"], epsilon=1.0, random_state=next(seed))
    out["corr"] = ns.corr(["x", "y"], epsilon=1.0, random_state=next(seed))
    out["mean_ci"] = ns.mean("x", epsilon=1.0, random_state=next(seed), ci=0.9)
    out["count_ci"] = ns.count(epsilon=1.0, random_state=next(seed), ci=0.95)
    out["quantile_ci"] = ns.quantile("x", 0.5, epsilon=1.0, random_state=next(seed), ci=0.9)
    gb = ns.groupby("g")
    out["by_count"] = gb.count(epsilon=1.0, random_state=next(seed))
    out["by_mean"] = gb.mean("x", epsilon=1.0, random_state=next(seed))
    out["by_sum_ci"] = gb.sum("y", epsilon=1.0, random_state=next(seed), ci=0.9)
    out["by_keys_count"] = ns.groupby("h", keys=["u", "v", "w", "z"]).count(
        epsilon=1.0, random_state=next(seed))
    # key selection: keys not declared, chosen privately
    out["selected_count"] = ns.groupby("h").count(epsilon=2.0, delta=1e-6,
                                                  random_state=next(seed))
    out["batch"] = ns.release({"n": dpf.count(), "m": dpf.mean("x"), "s": dpf.sum("y"),
                               "q": dpf.quantile("x", 0.5)}, epsilon=2.0,
                              random_state=next(seed))
    out["by_batch"] = gb.release({"n": dpf.count(), "v": dpf.variance("y")}, epsilon=2.0,
                                 random_state=next(seed))
    # a derivation: filter (private size) then with_columns
    older = ns.filter(nw.col("x") >= 3.0)
    out["derived_mean"] = older.dp.mean("x", epsilon=1.0, random_state=next(seed))
    scaled = ns.with_columns((nw.col("x") * 2).alias("x2"), bounds={"x2": (0, 20)},
                             missing={"x2": 0})
    out["derived_sum"] = scaled.dp.sum("x2", epsilon=1.0, random_state=next(seed))
    out["log"] = ns.log
    # a sealed Parquet file, its log read back
    table = ns.release({"n": dpf.count(), "m": dpf.mean("y")}, epsilon=1.0,
                       random_state=next(seed))
    path = tmp_path / "release.parquet"
    dpf.write_parquet(table, path)
    out["file_release"] = dpf.read_release(path, as_frame=constructor.family)
    out["file_log"] = dpf.read_log(path)

    # privacy units: several rows per person (pandas and Polars only; engines refuse it)
    try:
        units = dpf.protect(constructor(_data()), epsilon=1e6, bounds={"x": (0, 10)},
                            missing={"x": 0}, keys={"g": ["a", "b", "c"]}, privacy_unit="pid",
                            max_rows_per_unit=2, max_groups_per_unit=2)
    except dpf.UnsupportedInputError:
        out["units"] = "unsupported"
    else:
        out["units_count"] = units.dp.count_units(epsilon=1.0, random_state=next(seed))
        out["units_mean"] = units.dp.mean("x", epsilon=1.0, random_state=next(seed))
        out["units_by_sum"] = units.dp.groupby("g").sum("x", epsilon=1.0,
                                                        random_state=next(seed))
        out["units_log"] = units.dp.log
    return {k: _norm(v) for k, v in out.items()}


SPEC = """\
[input]
path = "data.parquet"
engine = "polars"

[privacy]
epsilon = 10.0
run_epsilon = 2.0
ledger = "ledger.jsonl"

[bounds]
x = [0, 10]
y = [-5, 5]

[missing]
x = 0
y = 0

[keys]
g = ["a", "b", "c"]

[[query]]
name = "n"
share = 0.25
kind = "count"

[[query]]
name = "m"
share = 0.25
kind = "mean"
column = "x"

[[query]]
name = "q"
share = 0.25
kind = "variance"
column = "y"

[[query]]
name = "by"
share = 0.25
kind = "sum"
column = "y"
group_by = "g"

[output]
path = "out.parquet"
"""


def _spec_run(tmp_path: Path) -> dict[str, Any]:
    import io

    import polars as pl

    from dpframe.spec._parse import parse_spec
    from dpframe.spec._run import run_spec

    pl.from_pandas(_data()).write_parquet(tmp_path / "data.parquet")
    spec = parse_spec(SPEC, base=tmp_path)
    run_spec(spec, random_state=11, out=io.StringIO())
    return {"table": _norm(pl.read_parquet(tmp_path / "out.parquet")),
            "log": _norm(dpf.read_log(tmp_path / "out.parquet"))}


def _check(key: str, got: Any) -> None:
    got = json.loads(json.dumps(got))
    golden = json.loads(FIXTURE.read_text(encoding="utf-8")) if FIXTURE.exists() else {}
    if RECORD:
        golden[key] = got
        FIXTURE.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n",
                           encoding="utf-8")
        return
    assert key in golden, (f"{key} is not in {FIXTURE.name}: record it with "
                           "DPFRAME_RECORD_GOLDEN=1 (serially)")
    want = golden[key]
    if got != want:
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        raise AssertionError(f"{key}: released values differ from the golden set in {diff}")


@pytest.mark.default_backends("pandas", "polars", "polars-lazy", "duckdb",
                              reason="the golden set's default backends; Spark and Dask with "
                                     "--all-backends")
def test_golden_releases(constructor, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _releases(constructor, tmp_path)
    _check(constructor.name, got)


def test_golden_spec_run(tmp_path):
    _check("spec-run", _spec_run(tmp_path))
