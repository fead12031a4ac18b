"""Peer measurement process, run by a peer's own venv python (dpframe is not installed there).

``benchmarks/.venvs/<peer>/bin/python benchmarks/peer_worker.py SPECS_JSON`` prints one
``@@RESULT {...}`` line per spec. Standalone on purpose: it imports only numpy, polars and
the peer library, and calls only the peers' public APIs:

* diffprivlib: ``diffprivlib.tools.mean`` / ``diffprivlib.tools.var`` on the income column
  as a numpy array (loaded from ``.npy``: that venv has no Parquet reader).
* OpenDP: ``opendp.prelude.Context.compositor`` over a Polars ``LazyFrame`` and a DP mean
  (``pl.col(...).dp.mean``) or a group-by DP sum with public keys, released and collected.

Timing protocol as in :mod:`benchmarks.worker`: warm-up, then the median of the repeats;
peak memory from the kernel's resident-set high-water mark.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

MB = 1024.0 * 1024.0
QUERY_EPSILON = 1.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _diffprivlib(spec: dict[str, Any]) -> Callable[[], Any]:
    import numpy as np

    x = np.load(spec["npy"])
    lo, hi = spec["bounds"]
    if spec["op"] == "numpy_floor":

        def floor() -> tuple[float, int]:
            c = np.clip(x, lo, hi)
            return float(c.sum()), int(c.size)

        return floor
    from diffprivlib import tools

    fn = {"mean": tools.mean, "var": tools.var}[spec["op"]]
    return lambda: fn(x, epsilon=QUERY_EPSILON, bounds=(lo, hi))


def _opendp(spec: dict[str, Any]) -> Callable[[], Any]:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    n = int(spec["rows"])
    lo, hi = spec["bounds"]
    op = spec["op"]
    key = spec.get("key")
    cols = ["income"] + ([key] if key else [])
    if op == "mean_parquet":
        lf = pl.scan_parquet(spec["parquet"]).select(cols)
    else:
        lf = pl.read_parquet(spec["parquet"], columns=cols).lazy()
    releases = int(spec["warmup"]) + int(spec["repeats"])
    margins = [dp.polars.Margin(max_length=n)]
    if key:
        margins.append(dp.polars.Margin(by=[key], invariant="keys", max_length=n,
                                        max_groups=int(spec["keys"])))

    def context(splits: int) -> Any:
        return dp.Context.compositor(
            data=lf,
            privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=dp.loss_of(epsilon=QUERY_EPSILON * splits),
            split_evenly_over=splits,
            margins=margins,
        )

    if op == "context":
        return lambda: context(releases)
    ctx = context(releases)
    income = pl.col("income").fill_null(0.0)
    if op in ("mean", "mean_parquet"):
        return lambda: ctx.query().select(income.dp.mean(bounds=(lo, hi))).release().collect()
    if op == "groupby_sum":
        return lambda: (
            ctx.query().group_by(key).agg(income.dp.sum(bounds=(lo, hi))).release().collect()
        )
    raise ValueError(f"unknown OpenDP op {op!r}")


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    build = {"diffprivlib": _diffprivlib, "opendp": _opendp}[spec["peer"]]
    op = build(spec)
    gc.collect()
    base = rss_bytes()
    can_reset = reset_peak_rss()
    for _ in range(int(spec["warmup"])):
        op()
    times = []
    for _ in range(int(spec["repeats"])):
        t0 = time.perf_counter()
        op()
        times.append(time.perf_counter() - t0)
    peak = peak_rss_bytes() if can_reset else None
    return {
        "spec": spec,
        "status": "ok",
        "times_s": times,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "base_rss_mb": base / MB,
        "peak_extra_mb": None if peak is None else max(0, peak - base) / MB,
    }


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("diffprivlib", "scikit-learn", "opendp", "polars", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--versions":
        print("@@VERSIONS " + json.dumps(versions()), flush=True)
        return 0
    for spec in json.loads(args[0]):
        try:
            out = measure(spec)
        except Exception as exc:  # report, do not crash the run
            out = {"spec": spec, "status": "error", "reason": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc(limit=6)}
        print("@@RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
