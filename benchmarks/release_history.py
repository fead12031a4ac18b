"""What a table release costs as the ledger's history grows (issue 24, item 5).

``python -m benchmarks.release_history [--history 0,10000,20000] [--rounds 15]
[--ledger memory,durable,durable-nofsync] [--json PATH]`` fills a ledger with ``history``
log entries (scalar counts, each one entry), then times a table release
(``frame.dp.release`` of a count and a mean: a one-row pandas table with its sealed log) and
a scalar query (``frame.dp.count``), ``rounds`` times each, interleaved, and reports the
medians and the ratio of each history to the first. A table release seals its log: before
the chained entry digest (seal scheme ``dpframe-release-v3``) that sealing was O(history);
the target is flat within 1.5x from 0 to 20,000 entries.

``durable-nofsync`` measures the durable ledger with its two fsyncs per commit turned off
(they dominate and vary with the disk, hiding what dpframe itself costs). The durable ledger
is filled through the ordinary commit path with fsync off; the measured releases then fsync
as usual (``durable``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _fill_memory(pf: Any, n: int) -> None:
    for _ in range(n):
        pf.dp.count(epsilon=1e-9, random_state=0)


def _frame() -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.uniform(0, 10, 1000)})


def _protected(kind: str, history: int, tmp: Path) -> Any:
    import dpframe as dpf

    bounds = {"x": (0.0, 10.0)}
    if kind == "memory":
        pf = dpf.protect(_frame(), epsilon=1e6, bounds=bounds)
        _fill_memory(pf, history)
        return pf
    path = tmp / f"ledger-{history}.jsonl"
    pf = dpf.protect(_frame(), epsilon=1e6, bounds=bounds, session=dpf.Session(path=path))
    ledger = pf.dp.session.ledger
    entry = {"name": "count", "query": "count", "columns": "", "epsilon": 1e-9,
             "delta": 0.0, "mechanism": "bounded", "scale": 1e9}
    fsync = ledger._fsync
    ledger._fsync = False  # filling only: the measured releases below fsync as usual
    try:
        for _ in range(history):
            ledger.commit(ledger.reserve(1e-9), [dict(entry)])
    finally:
        ledger._fsync = fsync and kind == "durable"
    return pf


def measure(kind: str, histories: list[int], rounds: int) -> list[dict[str, Any]]:
    import dpframe as dpf

    out = []
    with tempfile.TemporaryDirectory() as d:
        frames = {h: _protected(kind, h, Path(d)) for h in histories}
        for h in histories:  # warm up
            frames[h].dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=1e-6)
        times: dict[tuple[int, str], list[float]] = {}
        for r in range(rounds):
            order = histories[r % len(histories):] + histories[:r % len(histories)]
            for h in order:
                pf = frames[h]
                t0 = time.perf_counter()
                pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=1e-6,
                              random_state=r)
                t1 = time.perf_counter()
                pf.dp.count(epsilon=1e-6, random_state=r)
                t2 = time.perf_counter()
                times.setdefault((h, "table"), []).append(t1 - t0)
                times.setdefault((h, "scalar"), []).append(t2 - t1)
        base = {w: statistics.median(times[(histories[0], w)]) for w in ("table", "scalar")}
        for h in histories:
            entries = len(frames[h].dp.session.ledger.entries)
            for w in ("table", "scalar"):
                med = statistics.median(times[(h, w)])
                out.append({"ledger": kind, "history": h, "entries_at_end": entries,
                            "what": w, "median_ms": med * 1e3,
                            "ratio_to_first": med / base[w]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--history", default="0,10000,20000")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--ledger", default="memory,durable,durable-nofsync")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    histories = [int(h) for h in args.history.split(",")]
    rows = []
    for kind in args.ledger.split(","):
        rows.extend(measure(kind, histories, args.rounds))
    for r in rows:
        print(f"{r['ledger']:8} history={r['history']:>6} (entries {r['entries_at_end']:>6}) "
              f"{r['what']:6} median {r['median_ms']:8.2f} ms  x{r['ratio_to_first']:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
