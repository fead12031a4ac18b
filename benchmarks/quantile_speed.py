"""What a quantile costs: ``frame.dp.median`` against the engine's exact quantile (issue 34).

    python -m benchmarks.quantile_speed [--rows 1000,10000000] [--rounds 7] [--out NAME]

For each size, a column N(50, 12²) protected with bounds (0, 100) and a public fill value, at
ε = 1 with the default bins and one level: paired rounds (both variants once per round, the
order alternating; the ratio is the median of the per-round ratios, its quartiles the spread)
of the warm query — ``pf.dp.median("x", epsilon=1.0)`` on a pandas and a Polars frame, with
the in-memory ledger — against ``Series.quantile(0.5)`` (pandas) and
``select(pl.col("x").quantile(0.5))`` (Polars). Also the cold query (the first median on a
frame just protected, once) and the peak of memory numpy allocates during one warm query
(``tracemalloc``), relative to the column's bytes. The load (``os.getloadavg`` and ``uptime``)
is recorded before and after, with the commit measured: on the shared 2-core machine a figure
is only written after a second run at another load agrees within 20 %. Results:
``benchmarks/reports/raw/results-quantile-speed*.json`` and
``benchmarks/reports/RESULTS-quantile-speed.md``
(rendered from every results file present).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"  # (as benchmarks/paths.py; kept here for --label runs)
RAW = REPORTS / "raw"


def _frames(rows: int) -> dict[str, Any]:
    import numpy as np
    import pandas as pd
    import polars as pl

    x = np.random.default_rng(0).normal(50.0, 12.0, rows)
    return {"pandas": pd.DataFrame({"x": x}), "polars": pl.DataFrame({"x": x})}


def _protect(frame: Any) -> Any:
    import dpframe as dpf

    return dpf.protect(frame, epsilon=1e12, bounds={"x": (0.0, 100.0)}, missing={"x": 0.0})


def _native(engine: str, frame: Any) -> Any:
    if engine == "pandas":
        return lambda: frame["x"].quantile(0.5)
    import polars as pl

    return lambda: frame.select(pl.col("x").quantile(0.5))


def paired_rounds(variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """``variants["dp"]`` against ``variants["native"]``: each once to warm up, then ``rounds``
    rounds alternating which runs first; medians of each, of the per-round ratio, and the
    ratio's quartiles (its spread)."""
    for fn in variants.values():
        fn()
    times: dict[str, list[float]] = {"dp": [], "native": []}
    for r in range(rounds):
        for key in (("dp", "native") if r % 2 == 0 else ("native", "dp")):
            t = time.perf_counter()
            variants[key]()
            times[key].append(time.perf_counter() - t)
    ratios = [d / n for d, n in zip(times["dp"], times["native"], strict=True)]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios * 3)
    return {"dp_ms": statistics.median(times["dp"]) * 1e3,
            "native_ms": statistics.median(times["native"]) * 1e3,
            "ratio": statistics.median(ratios), "ratio_q1": q1, "ratio_q3": q3}


def measure(rows: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for engine, frame in _frames(rows).items():
        t = time.perf_counter()
        pf = _protect(frame)
        pf.dp.median("x", epsilon=1.0)
        cold = time.perf_counter() - t
        def warm(pf: Any = pf) -> Any:
            return pf.dp.median("x", epsilon=1.0)

        timed = paired_rounds({"dp": warm, "native": _native(engine, frame)}, rounds)
        tracemalloc.start()
        pf.dp.median("x", epsilon=1.0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out[engine] = {**timed, "cold_ms": cold * 1e3,
                       "peak_over_column": peak / (8.0 * rows)}
    return out


def _dense_counts(x: Any, bins: Any) -> Any:
    """The engine's one-pass count (2²² int64 cells) of the column ``x``."""
    from dpframe.engine._bins import _BIN_BLOCK, _BlockBinning
    from dpframe.engine._kernel import _read_block

    binning = _BlockBinning(bins, 1, _BIN_BLOCK)
    for start in range(0, x.size, _BIN_BLOCK):
        block, missing = _read_block(x, start, start + _BIN_BLOCK)
        binning.add(block, missing, 0.0, None)
    return binning.counts()[0]


def _two_pass_counts(x: Any, bins: Any, epsilon: float) -> Any:
    """The engine's two-pass count (``dpframe.engine._bins.two_pass_counts``) of the column
    ``x`` for one median draw at ``epsilon`` (the draw recorded as a release records it)."""
    from dpframe.engine._bins import two_pass_counts
    from dpframe.mechanisms.quantiles import QuantileMechanism
    from dpframe.query._aggregates import Bins, ReadWindows

    windows = ReadWindows()
    windows.record(QuantileMechanism(epsilon, bins.lower, bins.upper, 0.5, bins=bins.count))
    return two_pass_counts(x, Bins(bins.lower, bins.upper, bins.count, windows), 0.0)[0]


def probe_two_pass(rows: int, rounds: int) -> dict[str, Any]:
    """Paired rounds of the counting alone, on the benchmark column (Polars frame): the
    engine's one-pass dense count and its two-pass count, each against Polars' exact
    quantile; the two-pass counts are checked first against the dense ones where the draw
    reads them (block totals, end bins, the blocks ``fine_blocks_read`` names)."""
    from fractions import Fraction

    import numpy as np

    from dpframe.mechanisms.quantiles import (
        CumulativeCounts,
        QuantileMechanism,
        default_bins,
        fine_blocks_read,
    )
    from dpframe.query._aggregates import Bins

    frame = _frames(rows)["polars"]
    x = frame.get_column("x").to_numpy()
    bins = Bins(0.0, 100.0, default_bins(rows, 1.0))
    dense = _dense_counts(x, bins)
    two_pass = _two_pass_counts(x, bins, 1.0)
    k = CumulativeCounts.BLOCK
    totals = CumulativeCounts.block_totals(dense)
    assert np.array_equal(CumulativeCounts.block_totals(two_pass), totals)
    assert two_pass[0] == dense[0] and two_pass[-1] == dense[-1]
    lam = QuantileMechanism(1.0, 0.0, 100.0, 0.5, bins=bins.count).coefficients[0]
    k1, k2 = fine_blocks_read(totals, bins.count, 0.5, Fraction(0), 0, lam)
    assert np.array_equal(two_pass[k1 * k:(k2 + 1) * k], dense[k1 * k:(k2 + 1) * k])
    native = _native("polars", frame)
    out = {"bins": bins.count, "first_block": k1, "fine_bins": (k2 - k1 + 1) * k}
    for name, fn in (("dense", lambda: _dense_counts(x, bins)),
                     ("two_pass", lambda: _two_pass_counts(x, bins, 1.0))):
        out[name] = paired_rounds({"dp": fn, "native": native}, rounds)
    return out


#: Levels of the batch of separate quantile queries on one column (``--batch``).
BATCH_LEVELS = (0.5, 0.9, 0.1, 0.25, 0.75)


def _batch(pf: Any, levels: tuple[float, ...]) -> Callable[[], Any]:
    """One ``release()`` of a separate quantile query per level, on the column ``x``."""
    import dpframe as dpf

    queries = {f"q{i}": dpf.quantile("x", q) for i, q in enumerate(levels)}
    return lambda: pf.dp.release(queries, epsilon=1.0)


def batch_rounds(rows: int, rounds: int) -> dict[str, Any]:
    """What several quantiles of one column in one release cost: paired rounds (the three
    variants once per round, the order rotating) of a release of one quantile query, of
    :data:`BATCH_LEVELS`' five separate quantile queries, and the engine's own quantile at
    the five levels (``Series.quantile`` / ``select`` of five ``quantile``). Medians of
    each, of the per-round ratios five/one and five/native, and each ratio's lowest and
    highest round (its spread); and the process CPU time of each (all threads) and the
    medians of its per-round ratios, steadier than wall time on a loaded machine."""
    import polars as pl

    out: dict[str, Any] = {}
    for engine, frame in _frames(rows).items():
        pf = _protect(frame)
        if engine == "pandas":
            def native(frame: Any = frame) -> Any:
                return frame["x"].quantile(list(BATCH_LEVELS))
        else:
            def native(frame: Any = frame) -> Any:
                return frame.select([pl.col("x").quantile(q).alias(str(q))
                                     for q in BATCH_LEVELS])
        variants = {"one": _batch(pf, BATCH_LEVELS[:1]), "five": _batch(pf, BATCH_LEVELS),
                    "native": native}
        for fn in variants.values():
            fn()
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        order = list(variants)
        for r in range(rounds):
            for key in order[r % 3:] + order[:r % 3]:
                c, t = time.process_time(), time.perf_counter()
                variants[key]()
                times[key].append(time.perf_counter() - t)
                cpu[key].append(time.process_time() - c)
        res: dict[str, Any] = {f"{k}_ms": statistics.median(v) * 1e3 for k, v in times.items()}
        res.update({f"{k}_cpu_ms": statistics.median(v) * 1e3 for k, v in cpu.items()})
        for name, den in (("five_over_one", "one"), ("five_over_native", "native")):
            ratios = sorted(a / b for a, b in zip(times["five"], times[den], strict=True))
            res[name] = statistics.median(ratios)
            res[f"{name}_low"], res[f"{name}_high"] = ratios[0], ratios[-1]
            res[f"{name}_cpu"] = statistics.median(
                a / b for a, b in zip(cpu["five"], cpu[den], strict=True))
        out[engine] = res
        print(engine, json.dumps(res), flush=True)
    return out


SUMMARY = ("<!-- summary -->", "<!-- /summary -->")


def kept_summary(path: Path) -> list[str]:
    """The hand-written summary of an existing results file (between the :data:`SUMMARY`
    markers, markers included), kept when the file is regenerated."""
    if not path.exists():
        return []
    text = path.read_text()
    start, end = text.find(SUMMARY[0]), text.find(SUMMARY[1])
    if start < 0 or end < start:
        return []
    return [text[start:end + len(SUMMARY[1])], ""]


def render(results: list[dict[str, Any]], summary: list[str] | None = None) -> str:
    lines = ["# Quantile speed: `frame.dp.median` against the engine's exact quantile", "",
             "Generated by `python -m benchmarks.quantile_speed`. Warm: median of paired "
             "rounds (ratio = median of per-round ratios); cold: the first median on a frame "
             "just protected (protect included), once; peak: numpy's peak allocation during "
             "one warm query / the column's bytes. ε = 1, default bins, one level, in-memory "
             "ledger.", "", *(summary or [])]
    for res in results:
        head = res["header"]
        uptime = f"; `uptime` before: {head['uptime']}" if head.get("uptime") else ""
        lines += [f"## Run at load {head['load_before']:.1f} → {head['load_after']:.1f} "
                  f"(commit {head['commit']}, {head['machine']}, {head['rounds']} rounds)", "",
                  *([uptime[2:], ""] if uptime else []),
                  "| rows | engine | dp warm ms | native ms | ratio | ratio IQR | dp cold ms "
                  "| peak / column |",
                  "|---:|---|---:|---:|---:|---|---:|---:|"]
        for rows, by_engine in res["rows"].items():
            for engine, r in by_engine.items():
                spread = (f"{r['ratio_q1']:.2f}–{r['ratio_q3']:.2f}" if "ratio_q1" in r
                          else "–")
                lines.append(f"| {int(rows):,} | {engine} | {r['dp_ms']:.2f} | "
                             f"{r['native_ms']:.2f} | {r['ratio']:.2f} | {spread} | "
                             f"{r['cold_ms']:.1f} | {r['peak_over_column']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,10000000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default="results-quantile-speed.json",
                        help="results file name in benchmarks/reports/raw/ (one per run)")
    parser.add_argument("--label", default=None,
                        help="what dpframe is measured, when not this checkout's (e.g. the "
                        "commit before, put first on PYTHONPATH)")
    parser.add_argument("--probe", action="store_true",
                        help="time only the counting: one-pass dense against the engine's "
                        "two-pass count, each against Polars (printed, and written to --out)")
    parser.add_argument("--batch", action="store_true",
                        help="one release of 1 against 5 separate quantile queries on one "
                        "column, and the engine's 5 quantiles (printed, written to --out)")
    args = parser.parse_args(argv)
    if args.batch:
        return _batch_main(args)
    if args.probe:
        probe_head: dict[str, Any] = {
            "uptime": subprocess.run(["uptime"], capture_output=True, text=True,
                                     check=False).stdout.strip(),
            "rounds": args.rounds}
        res = {r: probe_two_pass(int(r), args.rounds) for r in args.rows.split(",")}
        probe_head["uptime_after"] = subprocess.run(["uptime"], capture_output=True,
                                                    text=True, check=False).stdout.strip()
        text = json.dumps({"header": probe_head, "probe": res}, indent=2)
        (RAW / args.out).write_text(text)
        print(text)
        return 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE.parent, check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "dpframe"],
                           capture_output=True, text=True, cwd=HERE.parent,
                           check=False).stdout.strip()
    head: dict[str, Any] = {
        "commit": args.label or (commit or "?") + (" + uncommitted changes" if dirty else ""),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "rounds": args.rounds,
        "load_before": os.getloadavg()[0],
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True,
                                 check=False).stdout.strip()}
    sizes = [int(r) for r in args.rows.split(",") if r.strip()]
    rows = {str(n): measure(n, args.rounds) for n in sizes}
    head["load_after"] = os.getloadavg()[0]
    head["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True,
                                          check=False).stdout.strip()
    (RAW / args.out).write_text(json.dumps({"header": head, "rows": rows}, indent=2))
    results = [json.loads(p.read_text())
               for p in sorted(RAW.glob("results-quantile-speed*.json"))]
    out = REPORTS / "RESULTS-quantile-speed.md"
    text = render(results, kept_summary(out))
    out.write_text(text)
    print(text)
    return 0


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True,
                          check=False).stdout.strip()


def _batch_main(args: argparse.Namespace) -> int:
    """``--batch``: :func:`batch_rounds` per size, written to
    ``benchmarks/reports/raw/<--out>`` with the commit (or ``--label``) and the load before
    and after."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE.parent, check=False).stdout.strip()
    head: dict[str, Any] = {"commit": args.label or commit or "?", "rounds": args.rounds,
                            "levels": list(BATCH_LEVELS), "uptime": _uptime(),
                            "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    res = {r: batch_rounds(int(r), args.rounds) for r in args.rows.split(",") if r.strip()}
    head["uptime_after"] = _uptime()
    text = json.dumps({"header": head, "batch": res}, indent=2)
    (RAW / args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
