"""What total derivations cost: dpframe's compiled derivation against the engine's own.

``python -m benchmarks.derivations [--rows 1000000] [--rounds 15] [--engines ...]
[--compare PATH]`` times, in paired rounds (every variant once per round, the order
rotating; the ratio is the median of per-round ratios), each derivation dpframe builds from a
verified expression (checked integer arithmetic, exact division, the pandas evaluation in
Polars, DuckDB's guarded SQL) against the same engine computing the same expression natively
(which is not total: it wraps, raises or divides by a reciprocal on some values). ``--compare``
runs the same cases against another checkout of dpframe (e.g. the commit before), in its own
process, and reports both. Results: ``benchmarks/reports/raw/results-derivations.json`` and
``benchmarks/reports/RESULTS-derivations.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _cases(rows: int, engines: list[str]) -> dict[str, dict[str, Callable[[], Any]]]:
    import narwhals as nw
    import numpy as np
    import pandas as pd
    import polars as pl

    import dpframe as dpf

    rng = np.random.default_rng(0)
    base = {"age": rng.integers(16, 95, rows), "income": rng.uniform(0, 250_000, rows)}

    def fresh() -> dict[str, Any]:  # own buffers: dpframe refuses a second budget on shared ones
        return {k: v.copy() for k, v in base.items()}

    data = fresh()
    bounds = {"age": (0.0, 120.0), "income": (0.0, 250_000.0)}
    cases: dict[str, dict[str, Callable[[], Any]]] = {}
    if "pandas" in engines:
        df = pd.DataFrame(data)
        pf = dpf.protect(pd.DataFrame(fresh()), epsilon=1e9, bounds=bounds)
        cases["pandas with_columns (/ literal, + literal)"] = {
            "dp": lambda: pf.dp.with_columns((nw.col("income") / 1000).alias("k"),
                                             (nw.col("age") + 1).alias("a1")),
            "native": lambda: df.assign(k=df["income"] / 1000, a1=df["age"] + 1),
        }
        cases["pandas filter (age >= 65)"] = {
            "dp": lambda: pf.dp.filter(nw.col("age") >= 65),
            "native": lambda: df[df["age"] >= 65],
        }
    if "polars" in engines:
        frame = pl.DataFrame(data)
        pl_pf = dpf.protect(pl.DataFrame(fresh()), epsilon=1e9, bounds=bounds)
        cases["polars with_columns (/ literal, + literal)"] = {
            "dp": lambda: pl_pf.dp.with_columns((pl.col("income") / 1000).alias("k"),
                                                (pl.col("age") + 1).alias("a1")),
            "native": lambda: frame.with_columns((pl.col("income") / 1000).alias("k"),
                                                 (pl.col("age") + 1).alias("a1")),
        }
        cases["polars with_columns (column * column)"] = {
            "dp": lambda: pl_pf.dp.with_columns((pl.col("age") * pl.col("age")).alias("s")),
            "native": lambda: frame.with_columns((pl.col("age") * pl.col("age")).alias("s")),
        }
        lazy = pl.DataFrame(data).lazy()
        lf = dpf.protect(pl.DataFrame(fresh()).lazy(), epsilon=1e9, bounds=bounds)
        derived = lf.filter(pl.col("age") >= 65).with_columns(
            (pl.col("income") / 1000).alias("k"))
        native = lazy.filter(pl.col("age") >= 65).with_columns(
            (pl.col("income") / 1000).alias("k"))
        cases["LazyFrame filter + new column, DP mean"] = {
            "dp": lambda: derived.dp.mean("income", epsilon=1.0),
            "native": lambda: native.select(
                pl.col("income").clip(0, 250_000).sum(), pl.len()).collect(),
        }
    if "duckdb" in engines:
        import duckdb

        rel_data = pd.DataFrame(data)
        con = duckdb.connect()
        rel = con.from_df(rel_data)
        dpr = dpf.protect(duckdb.connect().from_df(pd.DataFrame(fresh())), epsilon=1e9,
                          bounds=bounds)
        ddr = dpr.dp.filter(nw.col("age") * 100_000 > 5_000_000).dp.with_columns(
            (nw.col("income") / 1000).alias("k"), bounds={"k": (0.0, 250.0)})
        cases["DuckDB filter (checked *) + new column, DP mean"] = {
            "dp": lambda: ddr.dp.mean("k", epsilon=1.0),
            "native": lambda: rel.filter("age * 100000 > 5000000").aggregate(
                "sum(least(greatest(income / 1000, 0), 250)), count(*)").fetchall(),
        }
    return cases


def measure(rows: int, rounds: int, engines: list[str]) -> dict[str, Any]:
    return {name: paired_rounds(variants, rounds)
            for name, variants in _cases(rows, engines).items()}


def paired_rounds(variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """``variants["dp"]`` against ``variants["native"]``: each run once to warm up, then
    ``rounds`` rounds alternating which runs first; medians of each and of the per-round ratio.
    (Self-contained: this module also runs inside another checkout, see ``_worker``.)"""
    for fn in variants.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {"dp": [], "native": []}
    for r in range(rounds):
        for key in (("dp", "native") if r % 2 == 0 else ("native", "dp")):
            t = time.perf_counter()
            variants[key]()
            times[key].append(time.perf_counter() - t)
    ratios = [d / n for d, n in zip(times["dp"], times["native"], strict=True)]
    return {"dp_ms": statistics.median(times["dp"]) * 1e3,
            "native_ms": statistics.median(times["native"]) * 1e3,
            "ratio": statistics.median(ratios)}


def _worker(path: str, rows: int, rounds: int, engines: list[str]) -> dict[str, Any]:
    # dpframe from ``path``; this module from here (another checkout may not have it)
    code = ("import importlib.util, json, sys; "
            f"sys.path.insert(0, {str(path)!r}); "
            "spec = importlib.util.spec_from_file_location("
            f"'derivations_bench', {str(Path(__file__).resolve())!r}); "
            "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); "
            f"print(json.dumps(mod.measure({rows}, {rounds}, {engines!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def render(result: dict[str, Any]) -> str:
    head = result["header"]
    lines = [
        "# Derivations: dpframe's total compilation against the engine's own",
        "",
        f"{head['rows']:,} rows, {head['rounds']} paired rounds, medians; "
        f"machine: {head['machine']}; commit {head['commit']}"
        + (f"; compared with {head['compare']}" if head.get("compare") else "") + ".",
        "`python -m benchmarks.derivations` (see its docstring).",
        "",
        "| case | dpframe (ms) | native (ms) | dp / native |"
        + (" before: dpframe (ms) | before: dp / native |" if head.get("compare") else ""),
        "|---|---|---|---|" + ("---|---|" if head.get("compare") else ""),
    ]
    before = result.get("before", {})
    for name, r in result["after"].items():
        row = f"| {name} | {r['dp_ms']:.2f} | {r['native_ms']:.2f} | {r['ratio']:.2f}x |"
        if head.get("compare"):
            b = before.get(name)
            row += (f" {b['dp_ms']:.2f} | {b['ratio']:.2f}x |" if b else " — (fails) | — |")
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--engines", default="pandas,polars,duckdb")
    parser.add_argument("--compare", default=None, help="another dpframe checkout to time too")
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    import platform

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE.parent, check=False).stdout.strip()
    compare = None
    if args.compare:  # named by its commit: the path is this machine's business
        compare = "commit " + (subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            cwd=args.compare, check=False).stdout.strip() or "?")
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "dpframe"],
                           capture_output=True, text=True, cwd=HERE.parent,
                           check=False).stdout.strip()
    result: dict[str, Any] = {"header": {
        "rows": args.rows, "rounds": args.rounds,
        "commit": (commit or "?") + (" + uncommitted changes" if dirty else ""),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "compare": compare}}
    result["after"] = _worker(str(HERE.parent), args.rows, args.rounds, engines)
    if args.compare:
        before: dict[str, Any] = {}
        for engine in engines:  # one engine at a time: a case the old code fails is skipped
            try:
                before.update(_worker(args.compare, args.rows, args.rounds, [engine]))
            except RuntimeError:
                continue
        result["before"] = before
    from benchmarks.paths import RAW, REPORTS  # (not at the top: see _worker)

    (RAW / "results-derivations.json").write_text(json.dumps(result, indent=2))
    (REPORTS / "RESULTS-derivations.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
