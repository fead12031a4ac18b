"""The re-count of a DuckDB or Dask file root before each release (docs/engines.md,
"Re-counts"), against the engine's own clamp + sum + count on the same file.

dpframe re-counts such a frame with one narwhals ``select(len())`` (the backends'
``count_rows``); this script runs that same expression on a DuckDB relation and a Dask frame
over the benchmarks' 10 M-row Parquet file (``benchmarks/figures_data.py``, cached under
``benchmarks/.data/``), paired with the native query of ``fig:engine.<engine>.mean.10M``
(``benchmarks/figures_engines.py``) in interleaved rounds (``benchmarks/figures_core.py``:
median time of each side, median per-round ratio with its quartiles; CPU time when both
sides are under 20 ms). Prints the commit and ``uptime`` before and after.

Run: ``python -m benchmarks.engine_recount [--rows 10000000] [--rounds 7]`` (about 30 s,
plus writing the file on the first run).
"""

from __future__ import annotations

import argparse
import subprocess
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import narwhals as nw

from benchmarks import figures_data as data
from benchmarks.figures_core import warm
from benchmarks.figures_engines import N_KEYS, _dask, _duckdb


def recount(frame: Any) -> Callable[[], int]:
    return lambda: int(nw.from_native(frame).select(nw.len()).lazy().collect().item())


def _shell(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # narwhals' notice about Dask
    print(f"commit {_shell('git rev-parse --short HEAD')}; load before: {_shell('uptime')}")
    for engine, build in (("duckdb", _duckdb), ("dask", _dask)):
        path = str(data.parquet(args.rows, N_KEYS, engine))
        frame, native = build(path, "mean")
        out = warm({"dp": recount(frame), "native": native}, args.rounds)
        print(f"{engine}: re-count {out['dp_ms']:.1f} ms, native clamp + sum + count "
              f"{out['native_ms']:.1f} ms ({out['metric']} time); ratio {out['ratio']:.3f} "
              f"(IQR {out['q1']:.3f}–{out['q3']:.3f}, {args.rounds} rounds)")
    print(f"load after: {_shell('uptime')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
