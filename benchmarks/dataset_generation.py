"""Generation time and size of ``dpframe.datasets.census`` (docs/datasets.md, "Speed and memory").

For each backend: the median wall time of ``census(rows, seed=0, backend=...)`` over
``--rounds`` rounds (backends interleaved, order alternating), with the lowest–highest, and the
table's bytes per row (pandas ``memory_usage(deep=True)``, Polars ``estimated_size()``).
There is no native baseline: the generator is dpframe's own. Prints ``uptime`` before and
after and the commit, as every benchmark here.

Run: ``python -m benchmarks.dataset_generation [--rows 10000000] [--rounds 3]``
(about 30 s at 10 M rows).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Sequence

from dpframe.datasets import Backend, census

BACKENDS: tuple[Backend, ...] = ("pandas", "polars")


def table_bytes(frame: object, backend: Backend) -> int:
    if backend == "pandas":
        return int(frame.memory_usage(deep=True).sum())  # type: ignore[attr-defined]
    return int(frame.estimated_size())  # type: ignore[attr-defined]


def _shell(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"commit {_shell('git rev-parse --short HEAD')}; load before: {_shell('uptime')}")
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    size: dict[str, int] = {}
    for r in range(args.rounds):
        for backend in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
            start = time.perf_counter()
            frame = census(args.rows, seed=0, backend=backend)
            times[backend].append(time.perf_counter() - start)
            size[backend] = table_bytes(frame, backend)
            del frame
    for backend in BACKENDS:
        t = times[backend]
        print(f"{backend}: {args.rows:,} rows in {statistics.median(t):.2f} s "
              f"(lowest–highest {min(t):.2f}–{max(t):.2f}, {args.rounds} rounds); "
              f"{size[backend] / args.rows:.1f} bytes per row")
    print(f"load after: {_shell('uptime')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
