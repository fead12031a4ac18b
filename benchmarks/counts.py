"""What histograms and value counts cost (issue 34): at 1,000 rows against dpframe's own scalar
mean (the fixed cost of one release), at 10 M rows against the engine's native ``cut`` and
``value_counts``.

``python -m benchmarks.counts [--small 1000] [--large 10000000] [--engines pandas,polars]
[--rounds 15] [--cold-rounds 3] [--no-record]``. Cases (paired rounds, see
:mod:`benchmarks.paired`; in-memory ledger):

* ``histogram / mean``: ``frame.dp.histogram("x", edges=11 edges, epsilon=1)`` against
  ``frame.dp.mean("x", epsilon=1)`` on the same protected frame (target ≤ 2×);
* ``value_counts / mean``: ``frame.dp.value_counts("k", epsilon=1)`` over 10 declared keys,
  the same way (target ≤ 2×);
* ``histogram / native cut``: pandas ``pd.cut(x, edges, include_lowest=True)
  .value_counts(sort=False)``, Polars ``x.cut(inner edges).value_counts()`` (target ≤ 1.3×);
* ``value_counts / native``: ``k.value_counts()`` (target ≤ 1.3×);
* ``DP mean / diffprivlib``: ``frame.dp.mean("x", epsilon=1)`` against diffprivlib's
  ``tools.mean`` on the same 1,000 values (same bounds and ε), timed in its own venv
  (:mod:`benchmarks.peers`; ``--peers``, warm only): a persistent process of that venv runs
  the same number of calls per round on request, so each round's time includes one pipe
  round trip (tens of µs against milliseconds of calls); the peer's CPU column is the CPU
  time the peer's process measured for its calls (target ≤ 1×).

``--calls N`` (default 20): each warm 1,000-row variant makes N calls per round (one call of a
fraction of a millisecond is below the timer's and the scheduler's resolution on a loaded
machine); cold rounds make one. ``--ledger memory,durable``: also every 1,000-row case with the
frame protected under a durable ledger (``dpf.Session(path=...)``, fsync on), reported beside
the in-memory one.

Warm: repeated calls on one protected frame; cold: the first call on a new frame protected as
a user would (protect not timed), against the native call on a new frame of its own.
Results: ``benchmarks/reports/raw/results-counts.json``,
``benchmarks/reports/RESULTS-counts.md``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import warnings
from collections.abc import Callable
from typing import Any

from benchmarks.paired import (
    bench_session,
    fixed_cost_parser,
    fixed_cost_run,
    record,
    repeat,
    run_cases,
)

EDGES = [float(e) for e in range(0, 101, 10)]  # 10 bins of [0, 100]
N_KEYS = 10


def _frame(engine: str, rows: int) -> Any:
    import numpy as np
    import pandas as pd
    import polars as pl

    rng = np.random.default_rng(0)
    data = {"x": rng.uniform(0.0, 100.0, rows), "k": rng.integers(0, N_KEYS, rows)}
    return pd.DataFrame(data) if engine == "pandas" else pl.DataFrame(data)


def _protected(engine: str, rows: int, ledger: str = "memory") -> Any:
    import dpframe as dpf

    session = bench_session(ledger)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(_frame(engine, rows), epsilon=1e15, bounds={"x": (0.0, 100.0)},
                           missing={"x": 0.0}, keys={"k": list(range(N_KEYS))},
                           session=session)


#: The peer's side of :class:`_Peer`: diffprivlib's tools.mean on the same 1,000 values,
#: ``n`` calls per request line.
_PEER_SCRIPT = """
import sys, time, warnings
import numpy as np
from diffprivlib.tools import mean
warnings.simplefilter("ignore")
x = np.random.default_rng(0).uniform(0.0, 100.0, int(sys.argv[1]))
for _ in range(20):
    mean(x, epsilon=1.0, bounds=(0.0, 100.0))
print("ready", flush=True)
for line in sys.stdin:
    c = time.process_time()
    for _ in range(int(line)):
        mean(x, epsilon=1.0, bounds=(0.0, 100.0))
    print("done", time.process_time() - c, flush=True)
"""


class _Peer:
    """diffprivlib in its own venv's process, answering ``n`` calls per request."""

    def __init__(self, rows: int) -> None:
        from benchmarks.peers import ensure_venv

        python = ensure_venv("diffprivlib")
        self.proc = subprocess.Popen([str(python), "-c", _PEER_SCRIPT, str(rows)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.cpu: list[float] = []  # the peer's own CPU seconds per request, this case

    def calls(self, n: int) -> Callable[[], None]:
        self.cpu = []

        def run() -> None:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(f"{n}\n")
            self.proc.stdin.flush()
            self.cpu.append(float(self.proc.stdout.readline().split()[1]))

        return run

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _native(engine: str, frame: Any, what: str) -> Callable[[], Any]:
    import pandas as pd
    import polars as pl

    if engine == "pandas":
        if what == "histogram":
            return lambda: pd.cut(frame["x"], EDGES, include_lowest=True).value_counts(
                sort=False)
        return lambda: frame["k"].value_counts()
    if what == "histogram":
        return lambda: frame.select(pl.col("x").cut(EDGES[1:-1]).value_counts())
    return lambda: frame.get_column("k").value_counts()


def _dp(pf: Any, what: str) -> Callable[[], Any]:
    if what == "histogram":
        return lambda: pf.dp.histogram("x", edges=EDGES, epsilon=1.0)
    if what == "value_counts":
        return lambda: pf.dp.value_counts("k", epsilon=1.0)
    return lambda: pf.dp.mean("x", epsilon=1.0)


def cases(engines: list[str], small: int, large: int, calls: int = 20,
          ledgers: tuple[str, ...] = ("memory",), peer: _Peer | None = None) -> list[Any]:
    out: list[Any] = []
    for engine in engines:
        for ledger in ledgers:
            suffix = "" if ledger == "memory" else ", durable ledger"
            for what in ("histogram", "value_counts"):
                def warm_small(engine: str = engine, what: str = what,
                               ledger: str = ledger) -> dict[str, Any]:
                    pf = _protected(engine, small, ledger)
                    return {"dp": repeat(_dp(pf, what), calls),
                            "native": repeat(_dp(pf, "mean"), calls)}

                def cold_small(engine: str = engine, what: str = what,
                               ledger: str = ledger) -> dict[str, Any]:
                    pf, other = _protected(engine, small, ledger), _protected(engine, small,
                                                                              ledger)
                    return {"dp": _dp(pf, what), "native": _dp(other, "mean")}

                out.append((f"{engine} {what} / DP mean, {small:,} rows{suffix}", warm_small,
                            cold_small))
            if peer is not None:
                def warm_peer(engine: str = engine, ledger: str = ledger) -> dict[str, Any]:
                    assert peer is not None
                    return {"dp": repeat(_dp(_protected(engine, small, ledger), "mean"),
                                          calls),
                            "native": peer.calls(calls)}

                out.append((f"{engine} DP mean / diffprivlib tools.mean, {small:,} rows"
                            f"{suffix}", warm_peer, None))
        if large <= 0:
            continue
        for what in ("histogram", "value_counts"):
            def warm_large(engine: str = engine, what: str = what) -> dict[str, Any]:
                return {"dp": _dp(_protected(engine, large), what),
                        "native": _native(engine, _frame(engine, large), what)}

            out.append((f"{engine} {what} / native "
                        f"{'cut' if what == 'histogram' else 'value_counts'}, {large:,} rows",
                        warm_large, warm_large))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = fixed_cost_parser(__doc__.splitlines()[0], calls=20)
    parser.add_argument("--peers", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # (Polars' cut: renamed)
    ledgers = tuple(args.ledger.split(","))
    run = fixed_cost_run(args, ledgers)
    peer = _Peer(args.small) if args.peers else None
    try:
        run["cases"] = []
        for case in cases(args.engines.split(","), args.small, args.large, args.calls,
                          ledgers, peer):
            row = run_cases([case], args.rounds, args.cold_rounds)[0]
            if peer is not None and "diffprivlib" in row["case"]:
                # the peer's own CPU time (its process), not this process's wait for it
                row["warm"]["native_cpu_ms"] = statistics.median(peer.cpu[1:]) * 1e3
            run["cases"].append(row)
    finally:
        if peer is not None:
            peer.close()
    run["header"]["load_after"] = round(os.getloadavg()[0], 2)
    print(record("counts", "Histograms and value counts: fixed cost and cost at scale",
                 "`python -m benchmarks.counts` (see its docstring). Paired rounds, medians "
                 "(lowest–highest per-round ratio); warm 1,000-row rounds make `--calls` calls "
                 "of each side (default 20), cold ones one. Targets (issue 34): at "
                 "1,000 rows ≤ 2× the DP scalar mean and a DP mean ≤ 1× diffprivlib's "
                 "tools.mean; at 10 M rows ≤ 1.3× the native cut / value_counts.",
                 run, not args.no_record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
