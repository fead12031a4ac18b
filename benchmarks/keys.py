"""What a group-by over many declared keys costs: dpframe's DP mean per key against the engine's
own group-by joined to the declared key frame (issue 34).

``python -m benchmarks.keys [--cases polars-int:1000000:100000,...] [--rounds 7]
[--cold-rounds 3]`` times, in paired rounds (both variants once per round, the order
alternating; the ratio is the median of the per-round ratios, with their lowest and highest
as the spread), ``frame.dp.groupby("k").mean("x", epsilon=1)``
on a frame protected with ``keys={"k": keys}`` (in-memory ledger) against the native
"clamp, sum and count per key, joined to the key frame" (empty keys included):

* Polars (``polars-int``: Int64 keys, ``polars-str``: String keys):
  ``keys_frame.join(df.group_by("k").agg(x.clip(l, u).sum(), pl.len()), on="k", how="left")``;
* pandas (``pandas``, int64 keys): ``x.clip(l, u).groupby(k).agg(["sum", "count"])``
  ``.reindex(key_index)``.

*Warm* is a repeated query on one protected frame; *cold* is the first query on a new frame
built and protected as a user would (protect itself is not timed; the native side of a cold
round is the first group-by on its own new frame). Each run is appended to
``benchmarks/reports/raw/results-keys.json`` with its commit, load (``os.getloadavg``) and machine;
``benchmarks/reports/RESULTS-keys.md`` shows the last two runs side by side and whether they agree
within 20 %.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import warnings
from collections.abc import Callable
from typing import Any

from benchmarks.paired import agree, header, paired
from benchmarks.paths import RAW, REPORTS

DEFAULT_CASES = ("polars-int:1000000:100000,polars-str:1000000:100000,pandas:1000000:100000,"
                 "polars-int:10000000:100000,polars-int:10000000:1000000,"
                 "polars-str:10000000:1000000,pandas:10000000:1000000")
LOWER, UPPER = 0.0, 100.0


def _data(rows: int, n_keys: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.integers(0, n_keys, rows), rng.uniform(LOWER, UPPER, rows)


def _frame(engine: str, k: Any, x: Any) -> Any:
    """A new frame with its own buffers (dpframe refuses a second budget on shared ones)."""
    import pandas as pd
    import polars as pl

    if engine == "pandas":
        return pd.DataFrame({"k": k.copy(), "x": x.copy()})
    frame = pl.DataFrame({"k": k.copy(), "x": x.copy()})
    return frame.with_columns(pl.col("k").cast(pl.String)) if engine == "polars-str" else frame


def _keys(engine: str, n_keys: int) -> list[Any]:
    return [str(i) for i in range(n_keys)] if engine == "polars-str" else list(range(n_keys))


def _native(engine: str, frame: Any, keys: list[Any]) -> Callable[[], Any]:
    import pandas as pd
    import polars as pl

    if engine == "pandas":
        index = pd.Index(keys)
        s, g = frame["x"], frame["k"]
        return lambda: s.clip(LOWER, UPPER).groupby(g).agg(["sum", "count"]).reindex(index)
    key_frame = pl.DataFrame({"k": keys}, schema={"k": frame.schema["k"]})
    aggs = [pl.col("x").clip(LOWER, UPPER).sum(), pl.len()]
    return lambda: key_frame.join(frame.group_by("k").agg(aggs), on="k", how="left")


def _protected(engine: str, k: Any, x: Any, keys: list[Any]) -> Any:
    import dpframe as dpf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(_frame(engine, k, x), epsilon=1e15, bounds={"x": (LOWER, UPPER)},
                           missing={"x": 0.0}, keys={"k": keys})


def measure_case(engine: str, rows: int, n_keys: int, rounds: int, cold_rounds: int
                 ) -> dict[str, Any]:
    k, x = _data(rows, n_keys)
    keys = _keys(engine, n_keys)
    pf = _protected(engine, k, x, keys)
    grouped = pf.dp.groupby("k")
    warm_variants = {"dp": lambda: grouped.mean("x", epsilon=1.0),
                     "native": _native(engine, _frame(engine, k, x), keys)}
    for fn in warm_variants.values():  # warm-up
        fn()
    warm = paired(dict(warm_variants).copy, rounds)
    warm_variants.clear()  # (the protected frame's memory goes before the cold rounds)
    gc.collect()

    def fresh() -> dict[str, Callable[[], Any]]:
        gc.collect()
        new = _protected(engine, k, x, _keys(engine, n_keys))
        return {"dp": lambda: new.dp.groupby("k").mean("x", epsilon=1.0),
                "native": _native(engine, _frame(engine, k, x), _keys(engine, n_keys))}

    cold = paired(fresh, cold_rounds)
    return {"engine": engine, "rows": rows, "keys": n_keys, "warm": warm, "cold": cold}


def render(runs: list[dict[str, Any]]) -> str:
    """The last two runs side by side (dpframe ms / native ms, ratio), warm and cold."""
    last = runs[-2:]
    lines = ["# Many declared keys: DP mean per key against the native group-by joined to the "
             "key frame", "",
             "`python -m benchmarks.keys` (see its docstring). Paired rounds, medians; "
             "in-memory ledger. Targets (issue 34): 100,000 keys ≤ 1.3× native, 1,000,000 "
             "keys ≤ 2× native.", ""]
    first = len(runs) - len(last) + 1  # (runs are numbered from the first recorded)
    for i, run in enumerate(last, first):
        h = run["header"]
        lines.append(f"- run {i}: {h['time']}, commit {h['commit']}, {h['machine']}, load "
                     f"{h['load_before']} before / {h.get('load_after', '?')} after, "
                     f"{h['rounds']} warm and {h['cold_rounds']} cold rounds")
    lines += ["", "| engine | rows | keys | " + " | ".join(
        f"run {i}: {w}" for i in range(first, first + len(last)) for w in ("warm", "cold"))
        + (" | runs agree within 20 % |" if len(last) == 2 else " |"),
        "|---|---|---|" + "---|" * (2 * len(last)) + ("---|" if len(last) == 2 else "")]
    for j, case in enumerate(last[-1]["cases"]):
        cells = []
        for run in last:
            c = run["cases"][j] if j < len(run["cases"]) else None
            for w in ("warm", "cold"):
                cells.append("—" if c is None else
                             f"{c[w]['dp_ms']:.1f} / {c[w]['native_ms']:.1f} ms, "
                             f"{c[w]['ratio']:.2f}× ({c[w]['ratio_low']:.2f}–"
                             f"{c[w]['ratio_high']:.2f})")
        row = f"| {case['engine']} | {case['rows']:,} | {case['keys']:,} | " + " | ".join(cells)
        if len(last) == 2 and j < len(last[0]["cases"]):
            a, b = last[0]["cases"][j], case
            row += " | " + ", ".join(
                f"{w} {'yes' if agree(a[w]['ratio'], b[w]['ratio']) else 'no'}"
                for w in ("warm", "cold"))
        lines.append(row + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=DEFAULT_CASES,
                        help="engine:rows:keys, comma-separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args(argv)
    run: dict[str, Any] = {"header": header(args.rounds, args.cold_rounds), "cases": []}
    for spec in args.cases.split(","):
        engine, rows, n_keys = spec.split(":")
        result = measure_case(engine, int(rows), int(n_keys), args.rounds, args.cold_rounds)
        run["cases"].append(result)
        print(json.dumps(result), flush=True)
        gc.collect()
    run["header"]["load_after"] = round(os.getloadavg()[0], 2)
    path = RAW / "results-keys.json"
    runs = [] if args.no_record or not path.exists() else json.loads(path.read_text())["runs"]
    runs.append(run)
    if not args.no_record:
        path.write_text(json.dumps({"runs": runs}, indent=1))
        (REPORTS / "RESULTS-keys.md").write_text(render(runs))
    print(render(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
