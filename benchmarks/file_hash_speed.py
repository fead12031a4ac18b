"""The content check's hash: speed of each candidate, and its effect on a ``scan_parquet``
release (docs/engines.md, "Is the source still the protected one?").

dpframe binds a protected file's content with BLAKE3 when the ``blake3`` package is installed
(the ``fast-content-check`` extra), else with SHA-256 (``hashlib``):
``dpframe/provenance/_digests.py``. This script measures

* **hash speed**: the same in-memory buffer hashed with SHA-256, BLAKE2b (the other fast hash
  of the standard library), BLAKE3 on one thread (what dpframe uses) and on every core, in
  interleaved rounds, the order rotating, fed in 1 MiB blocks as a file read feeds them; each
  one's GB/s (median and fastest round: the fastest is the least disturbed on a shared
  machine) and CPU ms per round, and the median per-round speed ratio against SHA-256;
* **the release** (``--scan``): the DP mean and the 1,000-key group-by mean on a protected
  ``scan_parquet`` of the 10 M-row file of ``python -m benchmarks``, bound once with SHA-256
  and once with BLAKE3 (two copies of the file: a file is protected once) — each BLAKE3 check
  on one thread (as dpframe runs it) and on every core (``blake3-all-cores``) — against the
  native lazy query (streaming engine), all interleaved in each round, the order rotating; the
  median per-round ratio to native (IQR) of wall time and of process CPU time (all threads).

Prints the commit, the CPU's SHA extension flag and ``uptime`` before and after.

Run: ``python -m benchmarks.file_hash_speed [--mib 256] [--rounds 7] [--scan] [--scan-rounds
15]`` (about 10 s; with ``--scan`` about a minute more, and the two 88 MB files written once to
``benchmarks/.data/``).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

BLOCK = 1 << 20


def _shell(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


def _hasher(name: str) -> Any:
    if name.startswith("blake3"):
        import blake3

        return blake3.blake3(max_threads=blake3.blake3.AUTO if name == "blake3-all-cores" else 1)
    return hashlib.new(name)


def _names() -> list[str]:
    try:
        import blake3  # noqa: F401
    except ImportError:
        return ["sha256", "blake2b"]
    return ["sha256", "blake2b", "blake3", "blake3-all-cores"]


def seconds(name: str, data: memoryview) -> tuple[float, float]:
    """Wall and process CPU seconds to hash ``data`` with ``name`` in 1 MiB blocks."""
    h = _hasher(name)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(data), BLOCK):
        h.update(data[i:i + BLOCK])
    h.digest()
    return time.perf_counter() - start, time.process_time() - cpu


def hash_speed(mib: int, rounds: int) -> None:
    data = memoryview(bytes(range(256)) * (mib * BLOCK // 256))
    names = _names()
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            w, c = seconds(name, data)
            wall[name].append(w)
            cpu[name].append(c)
    gb = len(data) / 1e9
    for name in names:
        t = wall[name]
        ratio = statistics.median(s / b for s, b in zip(wall["sha256"], t, strict=True))
        cpu_ms = statistics.median(cpu[name]) * 1e3
        print(f"{name}: {gb / statistics.median(t):.2f} GB/s median, {gb / min(t):.2f} GB/s "
              f"fastest of {rounds} rounds ({mib} MiB); CPU {cpu_ms:.0f} ms median; "
              f"speed / sha256's, median per round: {ratio:.2f}")


def _scan_calls() -> dict[str, Callable[[], Any]]:
    """The DP mean and group-by on the 10 M-row file bound with each algorithm, and the
    native lazy queries."""
    import polars as pl

    from benchmarks import figures_data as data
    from benchmarks.figures_headline import _scan_native
    from benchmarks.figures_native import dp_call
    from dpframe.provenance import _digests

    chosen = _digests.DIGEST
    calls: dict[str, Callable[[], Any]] = {}
    path = ""
    try:
        for name in [n for n in _names() if n in ("sha256", "blake3")]:
            path = str(data.parquet(10_000_000, 1000, tag=f"hash-{name}"))
            _digests.DIGEST = name  # (this process only: the binding records it)
            pf = data.protect(pl.scan_parquet(path), 1000)
            for family in ("mean", "groupby"):
                calls[f"{family} {name}"] = dp_call(pf, family)
                if name == "blake3":
                    calls[f"{family} blake3-all-cores"] = _all_cores(dp_call(pf, family))
    finally:
        _digests.DIGEST = chosen
    for family in ("mean", "groupby"):
        calls[f"{family} native"] = _scan_native(path, family, 1000)
    return calls


def _all_cores(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with dpframe's BLAKE3 checks on every core (patched for the call only)."""
    from dpframe.provenance import _digests

    def run() -> Any:
        one_thread = _digests.new_hasher
        _digests.new_hasher = lambda algorithm: _hasher("blake3-all-cores")
        try:
            return call()
        finally:
            _digests.new_hasher = one_thread
    return run


def scan(rounds: int) -> None:
    calls = _scan_calls()
    for fn in calls.values():  # warm-up
        fn()
    names = list(calls)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            w, c = time.perf_counter(), time.process_time()
            calls[name]()
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    for name in names:
        family = name.split()[0]
        line = f"scan {name}: wall {statistics.median(wall[name]) * 1e3:.0f} ms, CPU " \
               f"{statistics.median(cpu[name]) * 1e3:.0f} ms"
        if not name.endswith("native"):
            for label, times in (("wall", wall), ("CPU", cpu)):
                ratios = [d / n for d, n in zip(times[name], times[f"{family} native"],
                                                strict=True)]
                q = statistics.quantiles(ratios, n=4, method="inclusive")
                line += f"; {label} / native {statistics.median(ratios):.2f}x " \
                        f"(IQR {q[0]:.2f}-{q[2]:.2f})"
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scan", action="store_true",
                        help="also the scan_parquet mean and group-by with each hash")
    parser.add_argument("--scan-rounds", type=int, default=15)
    args = parser.parse_args(argv)
    sha_ni = "yes" if " sha_ni" in _shell("grep -m1 '^flags' /proc/cpuinfo") else "no"
    print(f"commit {_shell('git rev-parse --short HEAD')}; SHA extensions: {sha_ni}; "
          f"load before: {_shell('uptime')}")
    hash_speed(args.mib, args.rounds)
    if args.scan:
        scan(args.scan_rounds)
    print(f"load after: {_shell('uptime')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
