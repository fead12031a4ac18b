"""Timing and run records shared by the figure groups of ``python -m benchmarks``.

A figure is a paired measurement: both sides (dpframe and its reference) run once per round,
the order alternating, and the figure is the median of the per-round ratios with their
quartiles (IQR) and lowest–highest as its spread, beside the median time of each side. A run
records the commit, the load (``uptime`` before and after), the machine (CPU model, cores,
RAM) and the library versions.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: Two runs agree when their ratios differ by at most this share of the smaller one.
AGREE = 0.20

Variants = dict[str, Callable[[], Any]]


@dataclass(frozen=True)
class Sizes:
    """The sizes one run uses: ``large`` stands for 10 M rows, ``small`` for 1,000; rounds
    of a warm figure (``rounds``; ``large_rounds`` at the largest sizes) and of a cold one."""

    large: int
    small: int
    rows: tuple[int, ...]
    keys: tuple[int, ...]
    key_rows: int
    history: tuple[int, ...]
    rounds: int
    large_rounds: int
    cold_rounds: int

    def rounds_for(self, rows: int) -> int:
        return self.large_rounds if rows >= 5_000_000 else self.rounds


FULL = Sizes(large=10_000_000, small=1000, rows=(1000, 10_000, 100_000, 1_000_000, 10_000_000),
             keys=(10, 1000, 100_000, 1_000_000), key_rows=1_000_000,
             history=(1, 10, 100, 1000, 10_000), rounds=21, large_rounds=9, cold_rounds=9)
QUICK = Sizes(large=20_000, small=1000, rows=(1000, 20_000), keys=(10, 1000), key_rows=20_000,
              history=(1, 20), rounds=3, large_rounds=3, cold_rounds=2)


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


#: Below this wall time (ms, the longer side's median) a figure's ratio is taken from the
#: process CPU time of each side instead of wall time: on a machine loaded to several times
#: its cores, the wall time of a call of a few milliseconds mostly measures how long it
#: waited for a core. Longer calls (parallel engines) keep wall time.
CPU_METRIC_BELOW_MS = 20.0


def _summary(dp: list[float], native: list[float]) -> dict[str, float]:
    ratios = sorted(d / n for d, n in zip(dp, native, strict=True))
    q1, q3 = _quartiles(ratios)
    return {"dp_ms": statistics.median(dp) * 1e3, "native_ms": statistics.median(native) * 1e3,
            "ratio": statistics.median(ratios), "q1": q1, "q3": q3, "low": ratios[0],
            "high": ratios[-1]}


def paired(make: Callable[[], Variants], rounds: int, inner: int = 1) -> dict[str, Any]:
    """``rounds`` interleaved rounds of the two variants ``make()`` returns (``"dp"`` and
    ``"native"``; ``make`` is called once per round: a warm figure returns the same callables,
    a cold one new frames), the order alternating; in each round each side runs ``inner``
    times back to back (a short call is timed over several). Returns the median time per call
    of each side (ms), the median per-round ratio dp / native, its quartiles and its lowest
    and highest — of wall time, or of process CPU time (all threads) when the longer side's
    median wall time is below :data:`CPU_METRIC_BELOW_MS` (``metric`` says which; both are
    kept, under ``wall`` and ``cpu``)."""
    wall: dict[str, list[float]] = {"dp": [], "native": []}
    cpu: dict[str, list[float]] = {"dp": [], "native": []}
    for r in range(rounds):
        variants = make()
        for side in (("dp", "native") if r % 2 == 0 else ("native", "dp")):
            fn = variants[side]
            c, t = time.process_time(), time.perf_counter()
            for _ in range(inner):
                fn()
            wall[side].append((time.perf_counter() - t) / inner)
            cpu[side].append((time.process_time() - c) / inner)
        del variants
    by_wall = _summary(wall["dp"], wall["native"])
    by_cpu = _summary(cpu["dp"], cpu["native"]) if min(cpu["native"]) > 0 else by_wall
    metric = "cpu" if max(by_wall["dp_ms"], by_wall["native_ms"]) < CPU_METRIC_BELOW_MS \
        and by_cpu is not by_wall else "wall"
    chosen = by_cpu if metric == "cpu" else by_wall
    return chosen | {"metric": metric, "rounds": rounds, "inner": inner,
                     "wall": by_wall, "cpu": by_cpu}


#: A warm round of a short call repeats it until the round lasts about this long (seconds).
ROUND_SECONDS = 0.005


def warm(variants: Variants, rounds: int) -> dict[str, Any]:
    """Each variant once untimed (the warm-up, also timing it), then :func:`paired` on the
    same callables, a call repeated within a round when it is shorter than
    :data:`ROUND_SECONDS`."""
    longest = 0.0
    for fn in variants.values():
        t = time.perf_counter()
        fn()
        longest = max(longest, time.perf_counter() - t)
    inner = max(1, min(50, int(ROUND_SECONDS / max(longest, 1e-6))))
    out = paired(lambda: variants, rounds, inner)
    gc.collect()
    return out


def cold(make: Callable[[], Variants], rounds: int) -> dict[str, Any]:
    """:func:`paired` on new variants each round (the first query on a new frame)."""
    out = paired(make, rounds)
    gc.collect()
    return out


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=HERE.parent,
                          check=False).stdout.strip()


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("dpframe", "numpy", "pandas", "polars", "pyarrow", "narwhals", "duckdb",
                 "dask"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def header(mode: str) -> dict[str, Any]:
    """What a run records before it starts."""
    dirty = _git("status", "--porcelain", "--", "dpframe", "benchmarks")
    return {"commit": (_git("rev-parse", "--short", "HEAD") or "?")
            + (" + uncommitted changes" if dirty else ""),
            "mode": mode,
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "uptime_before": _uptime(), "load_before": round(os.getloadavg()[0], 2),
            "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "ram_gb": _ram_gb(),
                        "platform": platform.platform()},
            "versions": _versions(), "ledger": "in-memory"}


def finish(head: dict[str, Any], started: float) -> None:
    head["uptime_after"] = _uptime()
    head["load_after"] = round(os.getloadavg()[0], 2)
    head["seconds"] = round(time.perf_counter() - started, 1)


def agree(a: float, b: float) -> bool:
    """Two values within :data:`AGREE` of the smaller one."""
    return abs(a - b) <= AGREE * min(a, b)
