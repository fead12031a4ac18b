"""SHA-256 against BLAKE2b (and BLAKE3, when installed) on one core (docs/engines.md, the
content check's cost).

dpframe binds a local file's content with SHA-256 (``hashlib``). This script hashes the same
in-memory buffer with SHA-256 and with BLAKE2b (the baseline: the other hash in the standard
library one would pick for speed) in interleaved rounds, the order rotating, feeding 1 MiB
blocks as a file read would, and prints each one's GB/s: the median and the fastest round
(the fastest is the least disturbed by other jobs on a shared machine), with the median
per-round ratio. BLAKE3 (the ``blake3`` package, not a dependency of dpframe) joins the rounds
on one thread when it can be imported, as the candidate a faster content check would use.
Prints the commit, the CPU's SHA extension flag and ``uptime`` before and after.

Run: ``python -m benchmarks.file_hash_speed [--mib 256] [--rounds 7]`` (about 10 s).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import time
from collections.abc import Sequence
from typing import Any

BLOCK = 1 << 20


def _shell(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


def _hasher(name: str) -> Any:
    if name == "blake3":
        import blake3  # type: ignore[import-not-found]

        return blake3.blake3(max_threads=1)
    return hashlib.new(name)


def _names() -> list[str]:
    try:
        import blake3  # noqa: F401
    except ImportError:
        return ["sha256", "blake2b"]
    return ["sha256", "blake2b", "blake3"]


def seconds(name: str, data: memoryview) -> float:
    h = _hasher(name)
    start = time.perf_counter()
    for i in range(0, len(data), BLOCK):
        h.update(data[i:i + BLOCK])
    h.digest()
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    data = memoryview(bytes(range(256)) * (args.mib * BLOCK // 256))
    sha_ni = "yes" if " sha_ni" in _shell("grep -m1 '^flags' /proc/cpuinfo") else "no"
    print(f"commit {_shell('git rev-parse --short HEAD')}; SHA extensions: {sha_ni}; "
          f"load before: {_shell('uptime')}")
    names = _names()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(seconds(name, data))
    gb = len(data) / 1e9
    for name, t in times.items():
        print(f"{name}: {gb / statistics.median(t):.2f} GB/s median, {gb / min(t):.2f} GB/s "
              f"fastest of {args.rounds} rounds ({args.mib} MiB)")
    ratio = statistics.median(b / s for s, b in zip(times["sha256"], times["blake2b"],
                                                           strict=True))
    print(f"sha256 speed / blake2b speed, median per round: {ratio:.2f}")
    if "blake3" in times:
        ratio = statistics.median(s / b for s, b in zip(times["sha256"], times["blake3"],
                                                        strict=True))
        print(f"blake3 speed / sha256 speed, median per round: {ratio:.2f}")
    print(f"load after: {_shell('uptime')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
