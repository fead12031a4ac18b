"""Paired rounds and run headers shared by the issue-34 benchmarks (``keys``, ``counts``,
``batches``): both variants once per round, the order alternating, the ratio the median of the
per-round ratios with the lowest and highest as its spread; each run records its commit, load
and machine, and is appended to a results file so that two runs at different loads can be
compared (a figure is written only when they agree within 20 %)."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.paths import RAW, REPORTS

HERE = Path(__file__).resolve().parent

#: Two runs agree when their ratios differ by at most this share of the smaller one.
AGREE = 0.20


_LEDGER_DIR: list[str] = []  # (a temporary folder for durable ledgers, made once per run)


def bench_session(ledger: str) -> Any:
    """The session a benchmark frame is protected in: None for ``"memory"`` (the in-memory
    ledger), else a new durable ledger file in one temporary folder per run."""
    if ledger != "durable":
        return None
    import dpframe as dpf

    if not _LEDGER_DIR:
        _LEDGER_DIR.append(tempfile.mkdtemp(prefix="dpframe-bench-ledger-"))
    return dpf.Session(path=tempfile.mktemp(suffix=".jsonl", dir=_LEDGER_DIR[0]))


def repeat(fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
    """``fn`` called ``calls`` times, as one callable (a warm round of short calls)."""
    def many() -> None:
        for _ in range(calls):
            fn()

    return many


def paired(make: Callable[[], dict[str, Callable[[], Any]]], rounds: int
           ) -> dict[str, Any]:
    """``rounds`` paired rounds of the variants ``make()`` returns (called once per round: a
    warm case returns the same callables, a cold one new frames), the order alternating.
    Wall times decide the ratio; the process CPU time of each side (all threads) is kept
    beside it, since on a loaded machine a call longer than a scheduler slice waits for a
    core several times over (wall ≫ CPU) while a short one rarely does."""
    times: dict[str, list[float]] = {"dp": [], "native": []}
    cpu: dict[str, list[float]] = {"dp": [], "native": []}
    for r in range(rounds):
        variants = make()
        for side in (("dp", "native") if r % 2 == 0 else ("native", "dp")):
            c, t = time.process_time(), time.perf_counter()
            variants[side]()
            times[side].append(time.perf_counter() - t)
            cpu[side].append(time.process_time() - c)
        del variants
    ratios = sorted(d / n for d, n in zip(times["dp"], times["native"], strict=True))
    return {"dp_ms": statistics.median(times["dp"]) * 1e3,
            "native_ms": statistics.median(times["native"]) * 1e3,
            "ratio": statistics.median(ratios), "ratio_low": ratios[0],
            "ratio_high": ratios[-1],
            "dp_cpu_ms": statistics.median(cpu["dp"]) * 1e3,
            "native_cpu_ms": statistics.median(cpu["native"]) * 1e3}


def header(rounds: int, cold_rounds: int) -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE.parent, check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "dpframe"],
                           capture_output=True, text=True, cwd=HERE.parent,
                           check=False).stdout.strip()
    return {"commit": (commit or "?") + (" + uncommitted changes" if dirty else ""),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "load_before": round(os.getloadavg()[0], 2), "rounds": rounds,
            "cold_rounds": cold_rounds, "ledger": "in-memory",
            "time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def fixed_cost_parser(description: str, calls: int) -> argparse.ArgumentParser:
    """The command line the fixed-cost benchmarks share (``counts``, ``batches``): sizes,
    engines, paired rounds, ``--calls`` per warm round (default ``calls``), the ledgers
    (``memory``, ``durable``) and ``--no-record``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--engines", default="pandas,polars")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--ledger", default="memory")
    parser.add_argument("--no-record", action="store_true")
    return parser


def fixed_cost_run(args: argparse.Namespace, ledgers: tuple[str, ...]) -> dict[str, Any]:
    """A run's record before its cases: :func:`header` with the ledgers measured and the
    calls per warm round."""
    run: dict[str, Any] = {"header": header(args.rounds, args.cold_rounds)}
    run["header"]["ledger"] = "in-memory" + (
        "; rows marked 'durable ledger': durable (fsync on)" if "durable" in ledgers else "")
    run["header"]["calls"] = args.calls
    return run




def agree(a: float, b: float) -> bool:
    """Two ratios within :data:`AGREE` of the smaller one."""
    return abs(a - b) <= AGREE * min(a, b)


def cell(r: dict[str, Any]) -> str:
    """``dp / native ms, ratio× (low–high)``."""
    text = (f"{r['dp_ms']:.2f} / {r['native_ms']:.2f} ms, {r['ratio']:.2f}× "
            f"({r['ratio_low']:.2f}–{r['ratio_high']:.2f})")
    if "dp_cpu_ms" in r:
        text += f"; CPU {r['dp_cpu_ms']:.2f} / {r['native_cpu_ms']:.2f} ms"
    return text


def run_cases(cases: list[tuple[str, Callable[[], dict[str, Callable[[], Any]]],
                                Callable[[], dict[str, Callable[[], Any]]] | None]],
              rounds: int, cold_rounds: int) -> list[dict[str, Any]]:
    """Each ``(label, warm, cold)``: ``warm()`` builds the variants once (run once to warm
    up, then ``rounds`` paired rounds); ``cold()`` builds new ones for each of
    ``cold_rounds`` rounds (None: no cold rounds)."""
    import gc

    out = []
    for label, warm, cold in cases:
        variants = warm()
        for fn in variants.values():
            fn()
        row: dict[str, Any] = {"case": label, "warm": paired(dict(variants).copy, rounds)}
        variants.clear()
        gc.collect()
        if cold is not None:
            row["cold"] = paired(cold, cold_rounds)
        gc.collect()
        print(row, flush=True)
        out.append(row)
    return out


def record(name: str, title: str, note: str, run: dict[str, Any], save: bool) -> str:
    """Append ``run`` to ``reports/raw/results-<name>.json`` (if ``save``) and render the last
    two runs into ``reports/RESULTS-<name>.md``: per case and run, warm and cold cells, and
    whether the two runs' ratios agree within :data:`AGREE`."""
    import json

    path = RAW / f"results-{name}.json"
    runs = json.loads(path.read_text())["runs"] if save and path.exists() else []
    runs.append(run)
    text = render_runs(runs, title, note)
    if save:
        path.write_text(json.dumps({"runs": runs}, indent=1))
        (REPORTS / f"RESULTS-{name}.md").write_text(text)
    return text


def render_runs(runs: list[dict[str, Any]], title: str, note: str) -> str:
    """The last two of ``runs`` side by side (see :func:`record`)."""
    last = runs[-2:]
    lines = [f"# {title}", "", note, ""]
    first = len(runs) - len(last) + 1  # (runs are numbered from the first recorded)
    for i, r in enumerate(last, first):
        h = r["header"]
        lines.append(f"- run {i}: {h['time']}, commit {h['commit']}, {h['machine']}, load "
                     f"{h['load_before']} before / {h.get('load_after', '?')} after, "
                     f"{h['rounds']} warm and {h['cold_rounds']} cold rounds, "
                     f"{h['ledger']} ledger")
    cols = [f"run {i}: {w}" for i in range(first, first + len(last))
            for w in ("warm", "cold")]
    lines += ["", "| case | " + " | ".join(cols) + (" | runs agree within 20 % |" if len(last) == 2
                                                    else " |"),
              "|---|" + "---|" * len(cols) + ("---|" if len(last) == 2 else "")]
    for j, row in enumerate(last[-1]["cases"]):
        cells = []
        for r in last:
            c = r["cases"][j] if j < len(r["cases"]) else {}
            cells += [cell(c[w]) if w in c else "—" for w in ("warm", "cold")]
        line = f"| {row['case']} | " + " | ".join(cells)
        if len(last) == 2 and j < len(last[0]["cases"]):
            a = last[0]["cases"][j]
            line += " | " + ", ".join(
                f"{w} {'yes' if agree(a[w]['ratio'], row[w]['ratio']) else 'no'}"
                for w in ("warm", "cold") if w in row and w in a)
        lines.append(line + " |")
    return "\n".join(lines) + "\n"
