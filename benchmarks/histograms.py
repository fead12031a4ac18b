"""What a histogram over many public edges costs: dpframe's release against the engine binning
and counting natively.

``python -m benchmarks.histograms [--rows 100000,1000000] [--edges 10000] [--rounds 7]
[--engines pandas,polars,polars-lazy,duckdb,dask,spark]`` times, in paired rounds (both
variants once per round, the order alternating; the ratio is the median of the per-round
ratios, as in ``benchmarks/derivations.py``), ``frame.dp.histogram(col, edges=..., epsilon=1)``
(bin index, one count per bin, noise, log) against the same engine's own way to count rows per
bin over the same sorted edges: numpy ``searchsorted`` + ``bincount`` (pandas; per partition
for Dask), Polars ``search_sorted`` + ``group_by().len()``, a DuckDB ``ASOF JOIN`` on a table
of the edges, Spark MLlib's ``Bucketizer`` + ``groupBy().count()``. The per-edge expression
dpframe used before hit Python's recursion limit at 250 edges. Results:
``benchmarks/reports/raw/results-histograms.json`` and
``benchmarks/reports/RESULTS-histograms.md`` (its sections below the table are kept).

``python -m benchmarks.histograms --fixed-cost [--rounds 25] [--large 10000000]`` (pandas
and Polars) measures issue 34's targets instead, with the cases of :mod:`benchmarks.counts`
(paired rounds, the order alternating, wall and process CPU time per
side, warm and cold): a histogram (11 edges) and a value count (10 keys) at 1,000 rows
against the DP scalar mean on the same frame (target ≤ 2×), and at ``--large`` rows against
the native ``cut`` / ``value_counts`` (target ≤ 1.3×). Each run is appended to
``benchmarks/reports/raw/results-histograms-fixed.json``; the last two are rendered into the
section between the ``fixed-cost`` markers of ``RESULTS-histograms.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.derivations import paired_rounds
from benchmarks.paths import RAW, REPORTS

HERE = Path(__file__).resolve().parent
ENGINES = ("pandas", "polars", "polars-lazy", "duckdb", "dask", "spark")


def _cases(rows: int, n_edges: int, engines: list[str]
           ) -> dict[str, dict[str, Callable[[], Any]]]:
    import numpy as np
    import pandas as pd
    import polars as pl

    import dpframe as dpf

    rng = np.random.default_rng(0)
    x = rng.normal(size=rows)
    edges = np.linspace(-4.0, 4.0, n_edges)
    count = n_edges - 1  # bins
    inner = edges[1:-1]
    bounds = {"x": (-4.0, 4.0)}

    def protect(frame: Any) -> Any:
        return dpf.protect(frame, epsilon=1e12, bounds=bounds)

    def dp(pf: Any) -> Callable[[], Any]:
        return lambda: pf.dp.histogram("x", edges=edges, epsilon=1.0)

    cases: dict[str, dict[str, Callable[[], Any]]] = {}
    if "pandas" in engines:
        df = pd.DataFrame({"x": x.copy()})
        cases["pandas"] = {"dp": dp(protect(pd.DataFrame({"x": x.copy()}))), "native": lambda: (
            np.bincount(np.searchsorted(inner, df["x"].to_numpy(), side="right"),
                        minlength=count))}
    table = pl.lit(pl.Series(inner))
    if "polars" in engines:
        frame = pl.DataFrame({"x": x.copy()})
        cases["polars"] = {"dp": dp(protect(pl.DataFrame({"x": x.copy()}))), "native": lambda: (
            frame.group_by(table.search_sorted(pl.col("x"), side="right").alias("j")).len())}
    if "polars-lazy" in engines:
        lazy = pl.DataFrame({"x": x.copy()}).lazy()
        cases["polars-lazy"] = {
            "dp": dp(protect(pl.DataFrame({"x": x.copy()}).lazy())),
            "native": lambda: lazy.group_by(
                table.search_sorted(pl.col("x"), side="right").alias("j")).len().collect()}
    if "duckdb" in engines:
        import duckdb

        con = duckdb.connect()
        rel = con.from_df(pd.DataFrame({"x": x.copy()}))
        rel.create_view("t")
        con.from_df(pd.DataFrame({"e": inner, "j": np.arange(1, count)})).create_view("e")
        sql = ("SELECT coalesce(e.j, 0) AS j, count(*) FROM t ASOF LEFT JOIN e ON t.x >= e.e "
               "GROUP BY 1")
        cases["duckdb"] = {"dp": dp(protect(duckdb.connect().from_df(pd.DataFrame(
            {"x": x.copy()})))), "native": lambda: con.sql(sql).fetchall()}
    if "dask" in engines:
        import dask.dataframe as dd

        ddf = dd.from_pandas(pd.DataFrame({"x": x.copy()}), npartitions=2)

        def part(p: pd.DataFrame) -> pd.DataFrame:
            j = np.bincount(np.searchsorted(inner, p["x"].to_numpy(), side="right"),
                            minlength=count)
            return pd.DataFrame({"n": j})

        cases["dask"] = {
            "dp": dp(protect(dd.from_pandas(pd.DataFrame({"x": x.copy()}), npartitions=2))),
            "native": lambda: ddf.map_partitions(part, meta={"n": "int64"}).compute()}
    if "spark" in engines:
        from pyspark.ml.feature import Bucketizer
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        sdf = spark.createDataFrame(pd.DataFrame({"x": x.copy()})).cache()
        sdf.count()
        bucketizer = Bucketizer(splits=[-np.inf, *inner.tolist(), np.inf], inputCol="x",
                                outputCol="j", handleInvalid="keep")
        pf = protect(spark.createDataFrame(pd.DataFrame({"x": x.copy()})).cache())
        cases["spark"] = {"dp": dp(pf), "native": lambda: bucketizer.transform(sdf).groupBy(
            "j").count().collect()}
    return cases


def measure(rows: int, n_edges: int, rounds: int, engines: list[str]) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # engines' FutureWarnings about pandas 3
        return _measure(rows, n_edges, rounds, engines)


def _measure(rows: int, n_edges: int, rounds: int, engines: list[str]) -> dict[str, Any]:
    return {name: paired_rounds(variants, rounds)
            for name, variants in _cases(rows, n_edges, engines).items()}


def render(result: dict[str, Any]) -> str:
    head = result["header"]
    lines = [
        "# Histograms over many public edges: dpframe against the engine's own binning",
        "",
        f"{head['edges']:,} edges, {head['rounds']} paired rounds, medians; machine: "
        f"{head['machine']}; commit {head['commit']}. `python -m benchmarks.histograms` "
        "(see its docstring).",
        "",
        "| engine | rows | dpframe (ms) | native (ms) | dp / native |",
        "|---|---|---|---|---|",
    ]
    for rows, by_engine in result["runs"].items():
        for name, r in by_engine.items():
            lines.append(f"| {name} | {int(rows):,} | {r['dp_ms']:.1f} | {r['native_ms']:.1f} "
                         f"| {r['ratio']:.2f}x |")
    return "\n".join(lines) + "\n"


FIXED_START, FIXED_END = "<!-- fixed-cost -->", "<!-- /fixed-cost -->"
#: The engines ``--fixed-cost`` measures (others given are left out).
FIXED_COST_ENGINES = ("pandas", "polars")


def fixed_cost(engines: list[str], rounds: int, large: int) -> int:
    """``--fixed-cost`` (see the module docstring)."""
    from benchmarks.counts import cases
    from benchmarks.paired import header, render_runs, run_cases

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # (Polars' cut: renamed)
    run: dict[str, Any] = {"header": header(rounds, 3)}
    run["header"]["calls"] = 20
    run["cases"] = run_cases(cases(engines, 1000, large), rounds, 3)
    run["header"]["load_after"] = round(os.getloadavg()[0], 2)
    path = RAW / "results-histograms-fixed.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs.append(run)
    path.write_text(json.dumps({"runs": runs}, indent=1))
    text = render_runs(runs, "", "").split("\n", 3)[3]  # (without the empty title and note)
    results = REPORTS / "RESULTS-histograms.md"
    old = results.read_text() if results.exists() else ""
    before, _, rest = old.partition(FIXED_START)
    after = rest.partition(FIXED_END)[2] if FIXED_END in rest else ""
    results.write_text(f"{before}{FIXED_START}\n{text}{FIXED_END}{after}")
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000")
    parser.add_argument("--edges", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--fixed-cost", action="store_true")
    parser.add_argument("--large", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if args.fixed_cost:  # (the counts benchmark's frames: pandas and Polars only)
        engines = [e for e in engines if e in FIXED_COST_ENGINES] or list(FIXED_COST_ENGINES)
        return fixed_cost(engines, args.rounds, args.large)
    import platform

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE.parent, check=False).stdout.strip()
    result: dict[str, Any] = {"header": {
        "edges": args.edges, "rounds": args.rounds, "commit": commit or "?",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores"}, "runs": {}}
    for rows in (int(r) for r in args.rows.split(",")):
        result["runs"][str(rows)] = measure(rows, args.edges, args.rounds, engines)
        print(render(result), flush=True)
    (RAW / "results-histograms.json").write_text(json.dumps(result, indent=2))
    results = REPORTS / "RESULTS-histograms.md"
    kept = results.read_text().partition("\n## ")[1:] if results.exists() else ("", "")
    results.write_text(render(result) + "".join(kept))  # (the sections below the table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
