"""One measurement process: ``python -m benchmarks.worker SPEC_JSON`` prints one JSON line.

Protocol: load the data (untimed), ``gc.collect()``, note the resident set size (RSS), reset
the kernel's peak-RSS counter (``/proc/self/clear_refs``), run the warm-up(s), then time
``repeats`` runs with ``time.perf_counter``. The peak memory of the operation is the peak RSS
during the runs minus the RSS before them; RSS (not tracemalloc) because Polars allocates
outside Python's allocator. ``ru_maxrss`` of the whole process is reported too. With
``"profile": true`` the worker instead runs the operation under cProfile after the warm-up and
returns the top functions.
"""

from __future__ import annotations

import cProfile
import gc
import io
import json
import os
import pstats
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

MB = 1024.0 * 1024.0
_REPO = str(Path(__file__).resolve().parent.parent)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _short(filename: str) -> str:
    for marker in ("site-packages/", _REPO + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def profile_op(op: Any, runs: int, top: int = 30) -> dict[str, Any]:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        op()
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{_short(filename)}:{line}({name})",
                "ncalls": ncalls,
                "tottime_ms": 1e3 * tottime / runs,
                "cumtime_ms": 1e3 * cumtime / runs,
            }
        )
    by_cum = sorted(rows, key=lambda r: -r["cumtime_ms"])[:top]
    by_tot = sorted(rows, key=lambda r: -r["tottime_ms"])[:top]
    return {"total_ms": 1e3 * total / runs, "by_cumtime": by_cum, "by_tottime": by_tot}


def measure_paired(spec: dict[str, Any]) -> dict[str, Any]:
    """dp and floor of one scenario in one process, alternating (dp, floor), (floor, dp), ...
    so both see the same machine state; the verdict uses the median of the pair ratios."""
    from benchmarks.scenarios import UnavailableError, build

    result: dict[str, Any] = {"spec": spec}
    try:
        ops = {v: build({**spec, "variant": v}).op for v in ("dp", "floor")}
    except UnavailableError as exc:
        result.update(status="unavailable", reason=str(exc))
        return result
    for op in ops.values():
        for _ in range(max(1, int(spec.get("warmup", 1)))):
            op()
    times: dict[str, list[float]] = {"dp": [], "floor": []}
    ratios = []
    for i in range(int(spec.get("pairs", 15))):
        pair = {}
        for v in (("dp", "floor") if i % 2 == 0 else ("floor", "dp")):
            t0 = time.perf_counter()
            ops[v]()
            pair[v] = time.perf_counter() - t0
            times[v].append(pair[v])
        ratios.append(pair["dp"] / pair["floor"])
    result.update(status="ok", dp_median_s=statistics.median(times["dp"]),
                  floor_median_s=statistics.median(times["floor"]),
                  pair_ratio=statistics.median(ratios), ratios=ratios)
    return result


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.scenarios import UnavailableError, build

    if spec.get("paired"):
        return measure_paired(spec)

    result: dict[str, Any] = {"spec": spec}
    try:
        setup = build(spec)
    except UnavailableError as exc:
        result.update(status="unavailable", reason=str(exc))
        return result
    gc.collect()
    base = rss_bytes()
    can_reset = reset_peak_rss()
    warmup = max(1, int(spec.get("warmup", 1)))
    for _ in range(warmup):
        setup.op()
    if spec.get("profile"):
        result.update(status="ok", profile=profile_op(setup.op, int(spec.get("profile_runs", 3))))
        return result
    times = []
    for _ in range(int(spec["repeats"])):
        t0 = time.perf_counter()
        setup.op()
        times.append(time.perf_counter() - t0)
    peak = peak_rss_bytes() if can_reset else None
    per_op = [t / setup.inner for t in times]
    median = statistics.median(per_op)
    result.update(
        status="ok",
        times_s=per_op,
        median_s=median,
        min_s=min(per_op),
        inner=setup.inner,
        items=setup.items,
        throughput_per_s=(setup.items / median) if setup.items else None,
        input_mb=setup.input_bytes / MB,
        base_rss_mb=base / MB,
        peak_extra_mb=None if peak is None else max(0, peak - base) / MB,
        maxrss_mb=maxrss_bytes() / MB,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    specs = json.loads(args[0])
    if isinstance(specs, dict):
        specs = [specs]
    for spec in specs:
        try:
            out = measure(spec)
        except Exception as exc:  # report, do not crash the whole run
            out = {
                "spec": spec,
                "status": "error",
                "reason": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
        print("@@RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
