"""Two checkouts of dpframe, paired: is a refactor (a move of modules, a split of hubs) free?

Each round starts one process per checkout, in turn (A B A B ...), and each process times the
same cases in-process (median of ``--calls`` calls after one warm-up): a scalar mean at 1,000
rows (the fixed cost), means at 1 M rows on pandas and Polars, a 100-key group-by mean at 1 M
rows, and a release of four statistics. The ratio A/B is taken round by round; the median
ratio and its spread are printed, with the machine's load before and after.

Usage::

    python -m benchmarks.trees_paired --a /path/to/new/checkout --b /path/to/old/checkout

Seeded data, in-memory ledger; both checkouts must import with the same Python environment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_WORKER = r"""
import json, time, warnings
import numpy as np, pandas as pd, polars as pl
import dpframe as dpf
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)

def frame(n, lib):
    data = {"x": rng.random(n) * 100, "g": rng.integers(0, 100, n)}
    return pd.DataFrame(data) if lib == "pandas" else pl.DataFrame(data)

def timed(fn, calls):
    fn()
    out = []
    for _ in range(calls):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return float(np.median(out))

calls = CALLS
cases = {}
for lib in ("pandas", "polars"):
    small = dpf.protect(frame(1_000, lib), epsilon=1e9, bounds={"x": (0, 100)},
                        missing="drop")
    big = dpf.protect(frame(1_000_000, lib), epsilon=1e9, bounds={"x": (0, 100)},
                      keys={"g": list(range(100))}, missing="drop")
    cases[f"{lib} mean, 1,000 rows"] = timed(lambda: small.dp.mean("x", epsilon=1.0), calls)
    cases[f"{lib} mean, 1 M rows"] = timed(lambda: big.dp.mean("x", epsilon=1.0), calls)
    cases[f"{lib} 100-key group-by mean, 1 M rows"] = timed(
        lambda: big.dp.groupby("g").mean("x", epsilon=1.0), calls)
    cases[f"{lib} release of 4, 1 M rows"] = timed(lambda: big.dp.release(
        {"n": dpf.count(), "s": dpf.sum("x"), "m": dpf.mean("x"), "v": dpf.variance("x")},
        epsilon=1.0), calls)
print(json.dumps(cases))
"""


def _run(tree: str, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, "-c", _WORKER.replace("CALLS", str(calls))],
                         env=env, capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the checkout measured (new)")
    parser.add_argument("--b", required=True, help="the checkout compared with (old)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    ratios: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        a, b = _run(args.a, args.calls), _run(args.b, args.calls)
        for case, seconds in a.items():
            ratios.setdefault(case, []).append(seconds / b[case])
    print(f"load {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; "
          f"{args.rounds} rounds × {args.calls} calls; A/B per round")
    print("| case | median A/B | lowest–highest |")
    print("|---|---|---|")
    for case, values in ratios.items():
        print(f"| {case} | {statistics.median(values):.2f} | "
              f"{min(values):.2f}–{max(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
