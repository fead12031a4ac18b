"""How much memory does ``protect`` take? Peak and retained RSS of one ``protect`` call against
the frame's logical bytes (issue 30: dpframe's snapshot is a byte copy of the frame, one copy
and not two).

``python -m benchmarks.protect_memory [--rows 2000000] [--kinds ...]`` runs each scenario in
its own fresh process (so one cannot hide or inherit another's memory). Each process builds a
frame of ``--rows`` rows (a float64, an int64 and a short string column), protects a tiny
frame first (imports, thread pools, first-protect caches), then resets the kernel's peak RSS
(``/proc/self/clear_refs``, Linux) and protects the frame:

* ``peak_ratio``: the peak RSS during ``protect`` minus the RSS just before it, over the
  frame's logical bytes (the issue asks <= 2);
* ``retained_ratio``: the RSS just after ``protect`` (after ``gc.collect()``) minus the RSS
  before it, over the logical bytes (the snapshot, and what the allocators -- glibc, Polars'
  jemalloc, pyarrow's mimalloc -- keep of protect's transient memory for reuse);
* ``snapshot_ratio``: the bytes of the distinct buffers of dpframe's snapshot (what releases
  read), over the logical bytes: the snapshot itself (the issue asks <= 1).

Scenarios: ``pandas-numpy`` (numpy columns, strings as pandas' ``str``), ``pandas-arrow``
(``pd.ArrowDtype`` columns from an Arrow table), ``polars`` (a DataFrame over numpy arrays)
and ``polars-lazy`` (its ``.lazy()``: the plan is collected into the snapshot at protect).
Logical bytes: the bytes of the distinct buffers under the frame's columns (Polars'
``estimated_size()`` leaves out most of a string column's 16-byte views). Results are
printed as JSON lines, one per scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

KINDS = ("pandas-numpy", "pandas-arrow", "polars", "polars-lazy")


def _statm_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _peak_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError("no VmHWM in /proc/self/status")  # pragma: no cover - not Linux


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM to the current RSS


def _frame(kind: str, rows: int) -> tuple[Any, float]:
    import numpy as np
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    rng = np.random.default_rng(0)
    x = rng.random(rows) * 100.0
    i = rng.integers(0, 1000, rows)
    words = pa.array(np.array(["a", "bb", "ccc", "dddd"])[rng.integers(0, 4, rows)])
    if kind == "pandas-numpy":
        frame: Any = pd.DataFrame({"x": x, "i": i, "s": pd.array(words, dtype="str")})
    elif kind == "pandas-arrow":
        frame = pa.table({"x": x, "i": i, "s": words}).to_pandas(types_mapper=pd.ArrowDtype)
    else:
        strings: Any = pl.from_arrow(words)
        frame = pl.DataFrame({"x": x, "i": i}).with_columns(s=strings)
    logical = _buffer_mb(frame)
    if kind == "polars-lazy":
        frame = frame.lazy()
    return frame, logical


def _buffer_mb(data: Any) -> float:
    """The bytes of the distinct buffers under ``data``'s columns."""
    import numpy as np
    import polars as pl

    from dpframe._util.memory import buffer_ranges

    if isinstance(data, pl.LazyFrame):
        ranges = set(buffer_ranges(data, "polars", lazy=True))
    elif isinstance(data, pl.DataFrame):
        ranges = set(buffer_ranges(data, "polars"))
    else:
        ranges = set()
        for _name, series in data.items():
            array = series.array
            chunked = getattr(array, "_pa_array", None)
            if chunked is not None:
                ranges |= {(b.address, b.address + b.size) for c in chunked.chunks
                           for b in c.buffers() if b is not None and b.size}
            else:
                values = series.to_numpy(copy=False)
                if isinstance(values, np.ndarray) and values.nbytes:
                    start = values.__array_interface__["data"][0]
                    ranges.add((start, start + values.nbytes))
    return sum(end - start for start, end in ranges) / 1e6


def _run(kind: str, rows: int) -> dict[str, Any]:
    import gc
    import time
    import warnings

    import polars as pl

    import dpframe as dpf
    from dpframe.provenance import _protect as provenance

    warnings.simplefilter("ignore")
    bounds = {"x": (0.0, 100.0), "i": (0.0, 1000.0)}
    frame, logical_mb = _frame(kind, rows)
    warm, _ = _frame(kind, 10)  # imports, thread pools, first-protect caches
    dpf.protect(warm, epsilon=1.0, bounds=bounds, missing="drop")
    del warm
    gc.collect()
    pl.DataFrame({"x": [1.0]}).sum()
    before = _statm_mb()
    _reset_peak()
    began = time.perf_counter()
    protected = dpf.protect(frame, epsilon=1.0, bounds=bounds, missing="drop")
    seconds = time.perf_counter() - began
    peak = _peak_mb()
    gc.collect()
    after = _statm_mb()
    assert protected.dp.size == rows
    snapshot_mb = _buffer_mb(provenance.resolve(protected).data)
    return {
        "kind": kind, "rows": rows, "logical_mb": round(logical_mb, 1),
        "peak_increase_mb": round(peak - before, 1),
        "peak_ratio": round((peak - before) / logical_mb, 2),
        "retained_mb": round(after - before, 1),
        "retained_ratio": round((after - before) / logical_mb, 2),
        "snapshot_mb": round(snapshot_mb, 1),
        "snapshot_ratio": round(snapshot_mb / logical_mb, 2),
        "protect_seconds": round(seconds, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_run(args.child, args.rows)))
        return
    for kind in args.kinds:
        out = subprocess.run([sys.executable, "-m", "benchmarks.protect_memory",
                              "--rows", str(args.rows), "--child", kind],
                             capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
