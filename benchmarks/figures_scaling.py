"""The scaling tables of ``python -m benchmarks``: what each statistic family costs against
the number of rows (10³–10⁷), of declared keys (10–10⁶) and of releases already in the
ledger (1–10,000), on Polars (eager DataFrame, in-memory ledger).

* rows: each family (:data:`benchmarks.figures_native.FAMILIES`) against its native Polars
  query on the same frame (10 declared keys);
* keys: the group-by count, mean and variance and ``value_counts`` over ``k`` declared keys
  (10⁶ rows) against the native group-by joined to the key frame;
* history: each family, and a table release (a count and a mean, sealed), at 1,000 rows on a
  frame whose ledger already holds ``h`` releases, against the same query on a new frame
  whose ledger holds one (both built for each ``h``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from benchmarks import figures_data as data
from benchmarks.figures_core import Sizes, warm
from benchmarks.figures_native import FAMILIES, dp_call, polars_call

KEY_FAMILIES = ("groupby_count", "groupby", "groupby_variance", "value_counts")
HISTORY_FAMILIES = (*FAMILIES, "release")


def label(n: int) -> str:
    """10000 → ``1e4``; 20000 → ``2e4``."""
    exp = len(str(n)) - 1
    lead = n / 10**exp
    return f"{lead:g}e{exp}"


def ids(s: Sizes) -> dict[str, str]:
    out = {}
    for f in FAMILIES:
        for n in s.rows:
            out[f"scale.rows.{f}.{label(n)}"] = f"{f}, {n:,} rows (Polars) / native"
    for f in KEY_FAMILIES:
        for k in s.keys:
            out[f"scale.keys.{f}.{label(k)}"] = (f"{f}, {k:,} declared keys, {s.key_rows:,} "
                                                 "rows (Polars) / native joined to the keys")
    for f in HISTORY_FAMILIES:
        for h in s.history:
            out[f"scale.history.{f}.{label(h)}"] = (f"{f}, 1,000 rows, ledger holding {h:,} "
                                                    "releases / the same on a new ledger")
    return out


def _release(pf: Any) -> Callable[[], Any]:
    import dpframe as dpf

    queries = {"n": dpf.count(), "m": dpf.mean("x")}
    return lambda: pf.dp.release(queries, epsilon=data.EPS)


def _history_call(pf: Any, family: str) -> Callable[[], Any]:
    return _release(pf) if family == "release" else dp_call(pf, family)


def rows(s: Sizes, emit: Callable[[str, dict[str, Any]], None]) -> None:
    for n in s.rows:
        pf, df = data.protected("polars", n), data.frame("polars", n)
        for f in FAMILIES:
            out = warm({"dp": dp_call(pf, f), "native": polars_call(df, f)}, s.rounds_for(n))
            emit(f"scale.rows.{f}.{label(n)}", out | {"rows": n})
        del pf, df
        gc.collect()


def keys(s: Sizes, emit: Callable[[str, dict[str, Any]], None]) -> None:
    for k in s.keys:
        pf, df = data.protected("polars", s.key_rows, k), data.frame("polars", s.key_rows, k)
        rounds = s.large_rounds if k >= 100_000 else s.rounds
        for f in KEY_FAMILIES:
            out = warm({"dp": dp_call(pf, f), "native": polars_call(df, f, k)}, rounds)
            emit(f"scale.keys.{f}.{label(k)}", out | {"rows": s.key_rows, "keys": k})
        del pf, df
        gc.collect()


def history(s: Sizes, emit: Callable[[str, dict[str, Any]], None]) -> None:
    for h in s.history:
        filled, fresh = data.protected("polars", s.small), data.protected("polars", s.small)
        fresh.dp.count(epsilon=data.EPS)
        for _ in range(h):
            filled.dp.count(epsilon=data.EPS)
        for f in HISTORY_FAMILIES:
            out = warm({"dp": _history_call(filled, f), "native": _history_call(fresh, f)},
                       s.rounds)
            emit(f"scale.history.{f}.{label(h)}", out | {"rows": s.small, "history": h})
        del filled, fresh
        gc.collect()
