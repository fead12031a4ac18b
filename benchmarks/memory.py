"""Is memory returned? Resident memory (RSS) of a process that protects frames and drops them.

``python -m benchmarks.memory [--frames 1000] [--megabytes 10] [--filters 50000] [--kinds ...]``
runs each scenario in its own fresh process (so one cannot hide or inherit another's memory)
and prints the RSS growth in MB from just before the loop to just after it (after
``gc.collect()``):

* ``lazy`` / ``eager`` / ``pandas``: ``--frames`` times, a new frame of ``--megabytes`` MB of
  float64 is protected (a Polars LazyFrame ``df.lazy()``, a Polars DataFrame, a pandas frame),
  queried once (a DP count) and every reference to it dropped;
* ``filter``: ``--filters`` calls of ``lf.dp.filter(pl.col("x") > 0.5)`` on one protected
  LazyFrame, each result dropped (the records of derived frames must not accumulate).

A flat line is the goal: growth within a few tens of MB whatever the number of frames.
``growth_mb`` is measured as the process runs; glibc's allocator keeps some freed memory for
reuse (its mmap threshold rises after large frees, so later 10 MB arrays come from the heap),
so ``trimmed_growth_mb`` is measured again after ``malloc_trim(0)`` hands freed heap memory back
to the system: what is still resident then is held by live objects. ``records`` counts what
dpframe's registries still remember (markers, memory ranges, registered frames, originals):
0 when nothing protected is alive. Results are printed as JSON lines, one per scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

KINDS = ("lazy", "eager", "pandas", "filter")


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _run(kind: str, frames: int, megabytes: float, filters: int) -> dict[str, Any]:
    import gc
    import time

    import numpy as np
    import pandas as pd
    import polars as pl

    import dpframe as dpf

    rows = int(megabytes * 1e6 / 8)
    values = np.random.default_rng(0).random(rows)
    bounds = {"x": (0.0, 1.0)}
    # warm up: imports, Polars' thread pool, first-protect caches
    dpf.protect(pl.DataFrame({"x": np.arange(10.0) / 10}).lazy(), epsilon=1.0, bounds=bounds)
    gc.collect()
    start = _rss_mb()
    peak = start
    began = time.perf_counter()
    if kind == "filter":
        lf = dpf.protect(pl.DataFrame({"x": values.copy()}).lazy(), epsilon=1.0, bounds=bounds)
        start = _rss_mb()
        for i in range(filters):
            lf.dp.filter(pl.col("x") > 0.5)
            if i % 5000 == 0:
                peak = max(peak, _rss_mb())
        count = filters
    else:
        for i in range(frames):
            data = values + i  # a new buffer every time (i is public)
            if kind == "lazy":
                frame: Any = pl.DataFrame({"x": data}).lazy()
            elif kind == "eager":
                frame = pl.DataFrame({"x": data})
            else:
                frame = pd.DataFrame({"x": data})
            protected = dpf.protect(frame, epsilon=1.0, bounds={"x": (0.0, frames + 1.0)})
            protected.dp.count(epsilon=0.1)
            del frame, protected, data
            if i % 50 == 0:
                gc.collect()
                peak = max(peak, _rss_mb())
        count = frames
    seconds = time.perf_counter() - began
    if kind == "filter":
        del lf
    gc.collect()
    end = _rss_mb()
    trimmed = _trimmed_rss_mb()
    from dpframe.provenance import _protect as provenance

    records = (len(provenance._markers) + len(provenance._memory)
               + len(provenance._frames._items) + len(provenance._originals._items))
    return {"kind": kind, "count": count, "megabytes_each": megabytes,
            "rss_start_mb": round(start, 1), "rss_end_mb": round(end, 1),
            "growth_mb": round(end - start, 1), "peak_growth_mb": round(peak - start, 1),
            "trimmed_growth_mb": None if trimmed is None else round(trimmed - start, 1),
            "records": records, "seconds": round(seconds, 1)}


def _trimmed_rss_mb() -> float | None:
    """RSS after glibc returns the free memory it keeps to the system (None elsewhere)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return _rss_mb()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--filters", type=int, default=50_000)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--mmap-threshold", type=int, default=None,
                        help="run the scenarios with glibc's MALLOC_MMAP_THRESHOLD_ set (bytes): "
                             "large buffers are then always mapped and unmapped when freed")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one scenario in this process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_run(args.one, args.frames, args.megabytes, args.filters)))
        return
    env = dict(os.environ)
    if args.mmap_threshold is not None:
        env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    for kind in args.kinds.split(","):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.memory", "--one", kind, "--frames",
             str(args.frames), "--megabytes", str(args.megabytes), "--filters",
             str(args.filters)], capture_output=True, text=True, check=False, env=env)
        print(out.stdout.strip() or json.dumps({"kind": kind, "error": out.stderr[-2000:]}),
              flush=True)


if __name__ == "__main__":
    main()
