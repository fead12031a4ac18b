"""Engine scenarios (issue 14) and the issue-15 scenarios, as paired ratios.

``python -m benchmarks.extra [--groups engines,issue15] [--rows 10000000] [--engines ...]``
runs every measurement in its own process (``python -m benchmarks.extra --worker SPEC``):
load (untimed), protect (untimed, large budget), one warm-up of every variant, then
``pairs`` rounds in which every variant runs once, the order rotating each round so that
every variant sees the same machine state. The ratio of a variant is the median over rounds
of variant / floor (the same engine's clamp + sum + count, or the stated reference). A
measurement whose dp/floor ratio misses its target is then profiled in the same process
(cProfile, 3 runs of the dp call; the top entries by cumulative time are kept).

Variants besides ``dp`` and ``floor``:

* ``dp_norecount`` (engines): the same dp call with dpframe's public-size re-count before
  every release replaced by the public ``n`` (an ablation: the library is patched in this
  benchmark process only, after ``protect``); ``count`` is that re-count on its own.
* ``dp_peak``: not timed; the peak RSS above the loaded data of one dp call.

Results go to ``benchmarks/reports/raw/results-extra.json``; ``--render`` prints the Markdown
section that ``reports/RESULTS-harness.md`` carries ("After the pipeline rewrite").
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.paths import RAW

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUDGET = 1.0e6
EPS = 1.0
BOUNDS = {"income": (0.0, 250_000.0), "age": (0.0, 120.0), "hours_worked": (0.0, 100.0)}
NULL_SHARE = 0.05


# -- data -----------------------------------------------------------------------------------------

def _table(path: str, columns: list[str], rows: int | None = None) -> Any:
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=columns)
    return t.slice(0, rows) if rows is not None and rows < t.num_rows else t


def _null_mask(n: int) -> Any:
    import numpy as np

    return np.random.default_rng(12345).random(n) < NULL_SHARE


def _bounds(columns: list[str]) -> dict[str, tuple[float, float]]:
    from benchmarks.data import census_bounds

    b = census_bounds()
    return {c: tuple(b[c]) for c in columns if c in b}  # type: ignore[misc]


def _fill(bounds: dict[str, tuple[float, float]]) -> dict[str, float]:
    return {c: lo for c, (lo, _hi) in bounds.items()}


def _release10_queries() -> dict[str, Any]:
    from benchmarks.scenarios import _query_builders, _release10

    return _release10(_query_builders())


# -- engines (issue 14) ---------------------------------------------------------------------------

_SPARK: list[Any] = []


def spark_session() -> Any:
    if not _SPARK:
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").appName("dpframe-bench")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "6g")
                 .config("spark.sql.shuffle.partitions", "4")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        _SPARK.append(spark)
    return _SPARK[0]


def _engine_frame(engine: str, path: str) -> Any:
    if engine == "duckdb":
        import duckdb

        return duckdb.connect().read_parquet(path)
    if engine == "duckdb-table":
        import duckdb

        con = duckdb.connect()
        con.execute(f"create table t as select * from read_parquet('{path}')")
        return con.table("t")
    if engine == "spark":
        return spark_session().read.parquet(path)
    if engine == "dask":
        import dask.dataframe as dd

        return dd.read_parquet(path)
    raise ValueError(engine)


def _engine_floor(engine: str, frame: Any, scenario: str) -> Callable[[], Any]:
    b = BOUNDS
    if engine.startswith("duckdb"):
        def cl(c: str) -> str:
            lo, hi = b[c]
            return f"least(greatest({c}, {lo}), {hi})"

        if scenario == "mean":
            sql = f"sum({cl('income')}), count(income)"
            return lambda: frame.aggregate(sql).fetchall()
        if scenario == "release10":
            sql = ", ".join([
                "count(*)", f"avg({cl('age')})", f"avg({cl('hours_worked')})",
                f"avg({cl('income')})", f"sum({cl('hours_worked')})", f"sum({cl('income')})",
                f"var_samp({cl('age')})", f"var_samp({cl('income')})",
                f"stddev_samp({cl('hours_worked')})", f"stddev_samp({cl('income')})"])
            return lambda: frame.aggregate(sql).fetchall()
        sql = f"key1000, sum({cl('income')}), count(*)"
        return lambda: frame.aggregate(sql, "key1000").fetchall()
    if engine == "spark":
        from pyspark.sql import functions as F  # noqa: N812

        def c(name: str) -> Any:
            lo, hi = b[name]
            return F.least(F.greatest(F.col(name), F.lit(lo)), F.lit(hi))

        if scenario == "mean":
            return lambda: frame.agg(F.sum(c("income")), F.count("income")).collect()
        if scenario == "release10":
            aggs = [F.count(F.lit(1)), F.avg(c("age")), F.avg(c("hours_worked")),
                    F.avg(c("income")), F.sum(c("hours_worked")), F.sum(c("income")),
                    F.var_samp(c("age")), F.var_samp(c("income")),
                    F.stddev_samp(c("hours_worked")), F.stddev_samp(c("income"))]
            return lambda: frame.agg(*aggs).collect()
        return lambda: (frame.groupBy("key1000")
                        .agg(F.sum(c("income")), F.count(F.lit(1))).collect())
    if engine == "dask":
        import dask

        def cd(name: str) -> Any:
            return frame[name].clip(*b[name])

        if scenario == "mean":
            return lambda: dask.compute(cd("income").sum(), frame["income"].count())
        if scenario == "release10":
            return lambda: dask.compute(
                frame.shape[0], cd("age").mean(), cd("hours_worked").mean(),
                cd("income").mean(), cd("hours_worked").sum(), cd("income").sum(),
                cd("age").var(), cd("income").var(), cd("hours_worked").std(),
                cd("income").std())
        return lambda: (frame.assign(v=cd("income")).groupby("key1000")["v"]
                        .agg(["sum", "count"]).compute())
    raise ValueError(engine)


def _dp_call(pf: Any, scenario: str, keys: list[Any] | None = None,
             by: str = "key1000") -> Callable[[], Any]:
    ns = pf.dp
    if scenario == "mean":
        return lambda: ns.mean("income", epsilon=EPS)
    if scenario == "release10":
        queries = _release10_queries()
        return lambda: ns.release(queries, epsilon=EPS)
    if scenario == "groupby_mean":
        grouped = ns.groupby(by, keys=keys)
        return lambda: grouped.mean("income", epsilon=EPS)
    raise ValueError(scenario)


def _columns(scenario: str) -> list[str]:
    return {"mean": ["income"], "release10": ["age", "hours_worked", "income"],
            "groupby_mean": ["key1000", "income"]}[scenario]


def build_engine(spec: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    import dpframe as dpf
    from dpframe import backends as _backends

    engine, scenario = spec["engine"], spec["scenario"]
    frame = _engine_frame(engine, spec["data"])
    bounds = _bounds(_columns(scenario))
    keys = {"key1000": list(range(1000))} if scenario == "groupby_mean" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(frame, epsilon=BUDGET, bounds=bounds, keys=keys, missing=_fill(bounds))
    dp = _dp_call(pf, scenario, list(range(1000)))
    floor = _engine_floor(engine, frame, scenario)
    backend_cls = _backends.Backend
    real_count = backend_cls.count_rows
    n = spec["rows"]

    def count() -> int:
        return real_count(_backend_of(pf), pf)

    def dp_norecount() -> Any:
        backend_cls.count_rows = lambda self, f: n  # type: ignore[method-assign]
        try:
            return dp()
        finally:
            backend_cls.count_rows = real_count  # type: ignore[method-assign]

    return {"dp": dp, "floor": floor, "dp_norecount": dp_norecount, "count": count}


def _backend_of(pf: Any) -> Any:
    from dpframe import backends as _backends

    for name in ("backend_for", "backend_of", "detect", "get_backend"):
        fn = getattr(_backends, name, None)
        if fn is not None:
            return fn(pf)
    raise RuntimeError("no backend lookup in dpframe.backends")


# -- issue 15 scenarios ---------------------------------------------------------------------------

def build_issue15(spec: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    import numpy as np
    import pandas as pd
    import polars as pl

    import dpframe as dpf

    case, path, rows = spec["case"], spec["data"], spec["rows"]
    lo, hi = BOUNDS["income"]
    inc = {"income": (lo, hi)}

    def protect(frame: Any, bounds: dict, missing: Any = "drop", keys: Any = None) -> Any:
        kw = {"keys": keys} if keys else {}
        return dpf.protect(frame, epsilon=BUDGET, bounds=bounds, missing=missing, **kw)

    if case in ("pandas_Float64_na", "pandas_float64_nan", "polars_Float64_null"):
        t = _table(path, ["income"], rows)
        x = t.column("income").to_numpy()
        mask = _null_mask(len(x))
        if case == "polars_Float64_null":
            df = pl.DataFrame({"income": x}).with_columns(
                pl.when(pl.Series(mask)).then(None).otherwise(pl.col("income")).alias("income"))
            pf = protect(df, inc)
            floor_expr = [pl.col("income").clip(lo, hi).sum().alias("s"),
                          pl.col("income").count().alias("n")]
            return {"dp": lambda: pf.dp.mean("income", epsilon=EPS),
                    "floor": lambda: df.select(floor_expr)}
        if case == "pandas_Float64_na":
            s = pd.array(x, dtype="Float64")
            s[mask] = pd.NA
            df = pd.DataFrame({"income": s})
        else:
            y = x.copy()
            y[mask] = np.nan
            df = pd.DataFrame({"income": y})
        pf = protect(df, inc)
        col = df["income"]
        return {"dp": lambda: pf.dp.mean("income", epsilon=EPS),
                "floor": lambda: (col.clip(lo, hi).sum(), col.count())}
    if case == "pandas_mean_numpy_floor":
        # the physical floor: numpy's clip + sum + count on the very array pandas holds
        x = _table(path, ["income"], rows).column("income").to_numpy()
        df = pd.DataFrame({"income": x})
        pf = protect(df, inc, missing=_fill(inc))
        arr = df["income"].to_numpy()
        return {"dp": lambda: pf.dp.mean("income", epsilon=EPS),
                "floor": lambda: (float(np.clip(arr, lo, hi).sum()),
                                  int(np.count_nonzero(~np.isnan(arr))))}
    if case == "pandas_str_keys":
        t = _table(path, ["key1000", "income"], rows)
        df = t.to_pandas()
        df["key1000"] = df["key1000"].astype("str")
        keys = [str(i) for i in range(1000)]
        pf = protect(df, inc, missing=_fill(inc), keys={"key1000": keys})
        s, k = df["income"], df["key1000"]
        return {"dp": _dp_call(pf, "groupby_mean", keys),
                "floor": lambda: s.clip(lo, hi).groupby(k).agg(["sum", "count"])}
    if case in ("pandas_100k_keys", "polars_100k_keys", "polars_100k_str_keys"):
        t = _table(path, ["key100000", "income"], rows)
        keys = list(range(100_000))
        if case == "polars_100k_str_keys":  # Polars String keys (matched in Arrow)
            df = pl.from_arrow(t).rechunk().with_columns(pl.col("key100000").cast(pl.String))
            skeys = [str(k) for k in keys]
            pf = protect(df, inc, missing=_fill(inc), keys={"key100000": skeys})
            exprs = [pl.col("income").clip(lo, hi).sum(), pl.len()]
            return {"dp": _dp_call(pf, "groupby_mean", skeys, by="key100000"),
                    "floor": lambda: df.group_by("key100000").agg(exprs)}
        if case == "pandas_100k_keys":
            df = t.to_pandas()
            pf = protect(df, inc, missing=_fill(inc), keys={"key100000": keys})
            s, k = df["income"], df["key100000"]
            floor = lambda: s.clip(lo, hi).groupby(k).agg(["sum", "count"])  # noqa: E731
        else:
            df = pl.from_arrow(t).rechunk()
            pf = protect(df, inc, missing=_fill(inc), keys={"key100000": keys})
            exprs = [pl.col("income").clip(lo, hi).sum(), pl.len()]
            floor = lambda: df.group_by("key100000").agg(exprs)  # noqa: E731
        return {"dp": _dp_call(pf, "groupby_mean", keys, by="key100000"), "floor": floor}
    if case == "polars_release10":
        cols = ["age", "hours_worked", "income"]
        df = pl.from_arrow(_table(path, cols, rows)).rechunk()
        b = _bounds(cols)
        pf = protect(df, b, missing=_fill(b))
        from benchmarks.scenarios import _polars_op

        return {"dp": _dp_call(pf, "release10"),
                "floor": _polars_op("release10", "floor", df, b, None)}
    if case.startswith("fixed_"):
        # per-query fixed cost at 1,000 rows; each call runs the query INNER times
        engine = case.removeprefix("fixed_")
        x = _table(path, ["income"], rows).column("income").to_numpy()
        inner = int(spec.get("inner", 20))
        if engine == "pandas":
            frame: Any = pd.DataFrame({"income": x})
        elif engine == "polars":
            frame = pl.DataFrame({"income": x})
        else:
            frame = pl.DataFrame({"income": x}).lazy()
        pf = protect(frame, inc, missing=_fill(inc))
        ns = pf.dp

        def dp() -> None:
            for _ in range(inner):
                ns.mean("income", epsilon=EPS)

        def numpy_floor() -> None:  # diffprivlib's tools.mean does clip + mean + noise
            for _ in range(inner):
                float(np.clip(x, lo, hi).mean())

        ops = {"dp": dp, "floor": numpy_floor}
        if engine == "polars-lazy":
            def plain_lazy() -> None:
                for _ in range(inner):
                    frame.select(pl.col("income").mean()).collect()

            ops["plain_lazy"] = plain_lazy
        return ops
    if case.startswith("wide_"):
        # the same DP mean on a 201-column and a 3-column frame (both protected)
        engine = case.removeprefix("wide_")
        x = _table(path, ["income"], rows).column("income").to_numpy()
        inner = int(spec.get("inner", 20))
        rng = np.random.default_rng(7)
        narrow = {"income": x, "a": rng.random(len(x)), "b": rng.random(len(x))}
        wide = {"income": x, **{f"c{i}": rng.random(len(x)) for i in range(200)}}
        mk = pd.DataFrame if engine == "pandas" else pl.DataFrame
        pw = protect(mk(wide), inc, missing=_fill(inc))
        pn = protect(mk(narrow), inc, missing=_fill(inc))

        def loop(ns: Any) -> Callable[[], None]:
            def run() -> None:
                for _ in range(inner):
                    ns.mean("income", epsilon=EPS)
            return run

        return {"dp": loop(pw.dp), "floor": loop(pn.dp)}
    raise ValueError(case)


# -- one measurement process ---------------------------------------------------------------------

def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_extra(op: Callable[[], Any]) -> float | None:
    from benchmarks.worker import peak_rss_bytes, reset_peak_rss

    gc.collect()
    base = _rss()
    if not reset_peak_rss():
        return None
    op()
    peak = peak_rss_bytes()
    return None if peak is None else max(0, peak - base) / 2**20


def _profile(op: Callable[[], Any], runs: int = 3, top: int = 8) -> list[dict[str, Any]]:
    from benchmarks.worker import _short

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        op()
    prof.disable()
    st = pstats.Stats(prof, stream=io.StringIO())
    rows = []
    for (fn, line, name), (_cc, nc, tt, ct, _c) in st.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{_short(fn)}:{line}({name})", "ncalls": nc,
                     "tottime_ms": 1e3 * tt / runs, "cumtime_ms": 1e3 * ct / runs})
    rows.sort(key=lambda r: -r["cumtime_ms"])
    # skip the benchmark's own lambdas/loops, keep dpframe and engine entries
    keep = [r for r in rows if "benchmarks/" not in r["function"]
            and "{built-in method builtins.exec}" not in r["function"]
            and "disable" not in r["function"]]
    return keep[:top]


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        ops = build_engine(spec) if spec["group"] == "engines" else build_issue15(spec)
        setup_s = time.perf_counter() - t0
        for op in ops.values():
            for _ in range(int(spec.get("warmup", 1))):
                op()
        names = list(ops)
        times: dict[str, list[float]] = {v: [] for v in names}
        ratios: dict[str, list[float]] = {v: [] for v in names if v != "floor"}
        for i in range(int(spec.get("pairs", 15))):
            order = names[i % len(names):] + names[:i % len(names)]
            if i % 2:
                order = order[::-1]
            got = {}
            for v in order:
                t = time.perf_counter()
                ops[v]()
                got[v] = time.perf_counter() - t
                times[v].append(got[v])
            for v in ratios:
                ratios[v].append(got[v] / got["floor"])
        inner = int(spec.get("inner", 1)) if spec.get("case", "").startswith(("fixed_", "wide_")) \
            else 1
        out: dict[str, Any] = {
            "spec": spec, "status": "ok", "setup_s": setup_s, "inner": inner,
            "median_ms": {v: 1e3 * statistics.median(ts) / inner for v, ts in times.items()},
            "ratio": {v: statistics.median(r) for v, r in ratios.items()},
            "times_ms": {v: [1e3 * t / inner for t in ts] for v, ts in times.items()},
        }
        if "plain_lazy" in times:  # the LazyFrame's own plain mean, per round
            out["ratio_vs"] = {"plain_lazy": statistics.median(
                a / b for a, b in zip(times["dp"], times["plain_lazy"], strict=True))}
        if spec.get("peak"):
            out["dp_peak_mb"] = _peak_extra(ops["dp"])
        target = spec.get("target")
        if target is not None and out["ratio"]["dp"] > target and spec.get("profile", True):
            out["profile"] = _profile(ops["dp"])
        if spec.get("always_profile"):
            out["profile"] = _profile(ops["dp"])
    return out


def worker_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    try:
        out = measure(spec)
    except Exception as exc:  # report, do not crash the run
        import traceback

        out = {"spec": spec, "status": "error", "reason": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc(limit=10)}
    print("@@RESULT " + json.dumps(out), flush=True)
    return 0


# -- the plan -------------------------------------------------------------------------------------

TARGETS = {"mean": 1.2, "release10": 1.2, "groupby_mean": 1.5}


def engine_specs(rows: int, path: str, engines: list[str], pairs: int) -> list[dict[str, Any]]:
    out = []
    for engine in engines:
        for scenario in ("mean", "release10", "groupby_mean"):
            out.append({"group": "engines", "engine": engine, "scenario": scenario,
                        "rows": rows, "data": path, "target": TARGETS[scenario],
                        "pairs": pairs if engine != "spark" else min(pairs, 7)})
    return out


def issue15_specs(path10m: str, pairs: int) -> list[dict[str, Any]]:
    m10, m1 = 10_000_000, 1_000_000
    s: list[dict[str, Any]] = []

    def add(case: str, rows: int, target: float | None, **kw: Any) -> None:
        s.append({"group": "issue15", "case": case, "rows": rows, "data": path10m,
                  "target": target, "pairs": pairs, **kw})

    add("pandas_Float64_na", m10, 1.3, peak=True)
    add("pandas_float64_nan", m10, 1.3, peak=True)
    add("polars_Float64_null", m10, 1.3, peak=True)
    add("pandas_str_keys", m10, 1.3, peak=True)
    add("pandas_mean_numpy_floor", m10, 1.2)
    add("pandas_mean_numpy_floor", m1, 1.2)
    add("pandas_100k_keys", m1, 2.0)
    add("polars_100k_keys", m1, 2.0)
    add("polars_100k_str_keys", m1, 2.0)
    add("polars_release10", m10, 1.2)
    add("polars_release10", m1, 1.2)
    for e in ("pandas", "polars", "polars-lazy"):
        add(f"fixed_{e}", 1000, None, inner=50, always_profile=True)
    for e in ("pandas", "polars"):
        add(f"wide_{e}", 1000, 1.1, inner=50)
    return s


def run(specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    results = []
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PYTHONWARNINGS": "ignore"}
    for spec in specs:
        label = spec.get("engine") or spec.get("case")
        label = f"{label} {spec.get('scenario', '')} n={spec['rows']:,}"
        try:
            proc = subprocess.run([sys.executable, "-m", "benchmarks.extra", "--worker",
                                   json.dumps(spec)], capture_output=True, text=True,
                                  timeout=timeout, cwd=REPO, env=env)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT ")]
            r = json.loads(lines[-1][9:]) if lines else {
                "spec": spec, "status": "error", "reason": proc.stderr[-2000:]}
        except subprocess.TimeoutExpired:
            r = {"spec": spec, "status": "timeout", "reason": f"> {timeout:.0f} s"}
        results.append(r)
        if r["status"] == "ok":
            md = r["median_ms"]
            print(f"{label:45s} " + ", ".join(f"{k} {v:.4g} ms" for k, v in md.items())
                  + " | " + ", ".join(f"{k}/floor {v:.3f}" for k, v in r["ratio"].items()),
                  flush=True)
        else:
            print(f"{label:45s} {r['status']}: {r.get('reason', '')[:300]}", flush=True)
    return results


_DIFFPRIVLIB_FIXED = """
import json, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
from diffprivlib.tools import mean
x = np.array(np.load(sys.argv[1], mmap_mode="r")[:1000])
f = lambda: mean(x, epsilon=0.1, bounds=(0.0, 250000.0))
for _ in range(200):
    f()
best = []
for _ in range(7):
    t = time.perf_counter()
    for _ in range(300):
        f()
    best.append((time.perf_counter() - t) / 300 * 1e3)
print(json.dumps({"min_ms": min(best), "median_ms": float(np.median(best))}))
"""


def diffprivlib_fixed_cost(path10m: str) -> dict[str, Any] | None:
    """diffprivlib's ``tools.mean`` on 1,000 rows in its own venv (the per-query fixed-cost
    reference of issue 15), or None without that venv (``python -m benchmarks --peers``
    creates it)."""
    from benchmarks.data import npy_path
    from benchmarks.peers import venv_python

    python = venv_python("diffprivlib")
    npy = npy_path(10_000_000, "income", Path(path10m).parent)
    if not python.exists() or not npy.exists():
        return None
    proc = subprocess.run([str(python), "-c", _DIFFPRIVLIB_FIXED, str(npy)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": ""})
    if proc.returncode != 0:
        return None
    timing = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"diffprivlib tools.mean, 1,000 rows: {timing['min_ms'] * 1e3:.0f} µs", flush=True)
    return {"spec": {"group": "issue15", "case": "diffprivlib_fixed", "rows": 1000},
            "status": "ok", "peer_ms": timing}


def _git_state() -> str:
    """HEAD, the dpframe/ tree and whether dpframe/ has uncommitted changes (other sessions
    edit the same checkout; a measurement is of the working tree)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO).stdout.strip()

    dirty = git("status", "--short", "--", "dpframe")
    head = git("rev-parse", "--short", "HEAD")
    tree = git("rev-parse", "--short", "HEAD:dpframe")
    return f"{head} (dpframe/ tree {tree}" + (
        f", + uncommitted: {' '.join(ln.split()[-1] for ln in dirty.splitlines())})" if dirty
        else ", clean)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.extra",
                                description=__doc__.split("\n")[0])
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--groups", default="engines,issue15")
    p.add_argument("--engines", default="duckdb,spark,dask")
    p.add_argument("--rows", type=int, default=10_000_000, help="engine scenarios' size")
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--cases", default=None, help="issue-15 cases to run (default all)")
    p.add_argument("--timeout", type=float, default=1200.0)
    p.add_argument("--json", type=Path, default=RAW / "results-extra.json")
    p.add_argument("--append", action="store_true", help="merge into an existing --json")
    p.add_argument("--smoke", action="store_true", help="10,000 rows, 3 rounds (checks only)")
    args = p.parse_args(argv)
    if args.worker is not None:
        return worker_main(args.worker)
    from benchmarks.data import ensure_dataset

    groups = set(args.groups.split(","))
    if args.smoke:
        args.rows, args.pairs = 10_000, 3
    specs: list[dict[str, Any]] = []
    data_dir = HERE / ".data"
    data_dir.mkdir(exist_ok=True)
    if "engines" in groups:
        path = str(ensure_dataset(args.rows, data_dir))
        specs += engine_specs(args.rows, path, args.engines.split(","), args.pairs)
    if "issue15" in groups:
        path10 = str(ensure_dataset(10_000 if args.smoke else 10_000_000, data_dir))
        cases = set(args.cases.split(",")) if args.cases else None
        specs += [s for s in issue15_specs(path10, args.pairs)
                  if cases is None or s["case"] in cases]
        if args.smoke:
            for s in specs:
                s["rows"] = min(s["rows"], 10_000)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    state_start = _git_state()
    results = run(specs, args.timeout)
    if "issue15" in groups and not args.smoke:
        peer = diffprivlib_fixed_cost(path10)
        if peer is not None:
            results.append(peer)
    for r in results:
        r["git_start"], r["git_end"], r["started"] = state_start, _git_state(), started
    old: list[dict[str, Any]] = []
    if args.append and args.json.exists():
        old = json.loads(args.json.read_text())["results"]
    args.json.write_text(json.dumps({"started": started, "results": old + results}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
