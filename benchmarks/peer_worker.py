"""Peer measurement process, run by a peer's own venv python (dpframe is not installed there).

``benchmarks/.venvs/<peer>/bin/python benchmarks/peer_worker.py SPECS_JSON`` prints one
``@@RESULT {...}`` line per spec. Standalone on purpose: it imports only numpy, polars and
the peer library, and calls only the peers' public APIs:

* diffprivlib: ``diffprivlib.tools.mean`` / ``diffprivlib.tools.var`` on the income column
  as a numpy array (loaded from ``.npy``: that venv has no Parquet reader).
* OpenDP: ``opendp.prelude.Context.compositor`` over a Polars ``LazyFrame`` and a DP mean
  (``pl.col(...).dp.mean``) or a group-by DP sum with public keys, released and collected.

A spec with ``"op": "accuracy"`` (``benchmarks/peer_accuracy.py``) instead releases a whole
analysis once per seed and prints the released values (no timing): see
:func:`accuracy_releases`.

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


def _analysis_data(spec: dict[str, Any]) -> dict[str, Any]:
    """The clamped columns, key codes and precomputed row-wise columns of the analysis."""
    import numpy as np

    with np.load(spec["data"]) as z:
        return {k: z[k] for k in z.files}


def _diffprivlib_analysis(spec: dict[str, Any], seed: int) -> dict[str, list[float]]:
    """One run of the analysis through diffprivlib's public API, in its add/remove forms.

    Its ``tools.count_nonzero``, ``sum``, ``mean`` and ``var`` use the array's size ``n``
    (``mean``/``var`` divide Δ by it; ``sum``/``count_nonzero`` truncate their output to
    ``[lower·n, upper·n]``, so a count never exceeds the true ``n``): ε-DP only where ``n`` is
    public (replace-one), not under add/remove. So a count is ``tools.histogram`` with one bin
    (geometric noise, Δ 1, truncated at the platform's largest integer, not at ``n``); a sum is
    the clipped sum with ``mechanisms.Laplace`` at Δ = max(|lower|, |upper|); a mean is
    sum / count and the variance ``(Q − S²/N)/(N − 1)`` from a count, a sum and a sum of
    squares, ε split evenly. Counts by keys and the histogram are ``tools.histogram`` /
    ``histogramdd`` (ε per cell). Quantiles: ``tools.quantile`` (the exponential mechanism
    over the gaps between the sorted data, a uniform point inside the chosen gap; ε split
    evenly over the levels) and ``tools.median``.
    """
    import numpy as np
    from diffprivlib import tools
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.mechanisms import Laplace

    d = _analysis_data(spec)
    eps = float(spec["epsilon"])
    b = spec["bounds"]
    rng = np.random.RandomState(seed)
    acc = BudgetAccountant()  # unlimited; keeps the default accountant out of the way
    kw: dict[str, Any] = {"random_state": rng, "accountant": acc}
    regions, sexes = int(spec["n_region"]), int(spec["n_sex"])

    def count(size: int, e: float) -> float:
        ones = np.zeros(size)
        return float(tools.histogram(ones, epsilon=e, bins=1, range=(-0.5, 0.5), **kw)[0][0])

    def total(x: Any, lo: float, hi: float, e: float) -> float:
        mech = Laplace(epsilon=e, sensitivity=max(abs(lo), abs(hi)), random_state=rng)
        return float(mech.randomise(float(np.clip(x, lo, hi).sum())))

    def mean(x: Any, lo: float, hi: float, e: float) -> float:
        return total(x, lo, hi, e / 2) / max(count(x.size, e / 2), 1.0)

    out: dict[str, list[float]] = {"count": [count(d["age"].size, eps)]}
    edges = np.arange(regions + 1) - 0.5
    out["count_by_region"] = [float(v) for v in tools.histogram(
        d["region"], epsilon=eps, bins=edges, range=(edges[0], edges[-1]), **kw)[0]]
    edges2 = [np.arange(regions + 1) - 0.5, np.arange(sexes + 1) - 0.5]
    h2 = tools.histogramdd(np.column_stack([d["region"], d["sex"]]), epsilon=eps, bins=edges2,
                           range=[(e[0], e[-1]) for e in edges2], **kw)[0]
    out["count_by_region_sex"] = [float(v) for v in np.asarray(h2).ravel()]
    ilo, ihi = b["income"]
    out["mean_income"] = [mean(d["income"], ilo, ihi, eps)]
    out["mean_income_by_region"] = [mean(d["income"][d["region"] == g], ilo, ihi, eps)
                                    for g in range(regions)]
    alo, ahi = b["age"]
    x = d["age"]
    nn = max(count(x.size, eps / 3), 2.0)
    s = total(x, alo, ahi, eps / 3)
    q = total(x * x, alo * alo, ahi * ahi, eps / 3)
    out["variance_age"] = [(q - s * s / nn) / (nn - 1.0)]
    out["quartiles_income"] = [float(v) for v in tools.quantile(
        d["income"], [0.25, 0.5, 0.75], epsilon=eps, bounds=(ilo, ihi), **kw)]
    out["median_income"] = [float(tools.median(d["income"], epsilon=eps, bounds=(ilo, ihi),
                                               **kw))]
    hist = tools.histogram(d["age"], epsilon=eps, bins=np.asarray(spec["age_edges"]),
                           range=(alo, ahi), **kw)[0]
    out["histogram_age"] = [float(v) for v in hist]
    return out


def _candidates(grid: dict[str, Any]) -> list[float]:
    """Public quantile candidates: ``count`` bin midpoints of equal bins on ``[lo, hi]``, or
    ``count`` evenly spaced values from ``lo`` to ``hi`` (ends included)."""
    import numpy as np

    lo, hi, k = float(grid["lo"]), float(grid["hi"]), int(grid["count"])
    if grid.get("midpoints"):
        return [float(v) for v in lo + (np.arange(k) + 0.5) * (hi - lo) / k]
    return [float(v) for v in np.linspace(lo, hi, k)]


def _opendp_measurements(spec: dict[str, Any]) -> tuple[Any, dict[str, tuple[Any, Any]]]:
    """Each statistic's OpenDP measurement, built once through the Context API and invoked
    once per seed (building one costs seconds; invoking it samples fresh noise).

    A ``Context.compositor`` per statistic with the statistic's ε (``split_evenly_over=1``),
    add/remove of one row (``unit_of(contributions=1)``), ``max_length`` = the declared
    ``max_rows`` and, for a group-by, the public keys (``invariant="keys"``). The query is
    ``resolve()``-d into its measurement; its privacy map at one contribution is recorded.
    OpenDP has no variance, histogram or quantile set of its own: the variance is ``len``, a
    ``sum`` and a ``sum`` of the row-wise square in one query (ε split evenly), the histogram a
    keyed ``len`` over the row-wise bin index, the quartiles three ``dp.quantile`` over public
    candidates in one query.
    """
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    d = _analysis_data(spec)
    regions = [str(r) for r in spec["region_names"]]
    sexes = [str(s) for s in spec["sex_names"]]
    lf = pl.DataFrame({
        "age": d["age"].astype(float), "age_sq": (d["age"] * d["age"]).astype(float),
        "income": d["income"].astype(float),
        "region": [regions[i] for i in d["region"]], "sex": [sexes[i] for i in d["sex"]],
        "age_bin": d["age_bin"].astype("int64"),
    }).lazy()
    max_rows = int(spec["max_rows"])
    eps = float(spec["epsilon"])
    b = spec["bounds"]
    ilo, ihi = b["income"]
    alo, ahi = b["age"]
    cands = _candidates(spec["income_candidates"])
    n_bins = len(spec["age_edges"]) - 1

    def query(by: list[str] | None = None, groups: int = 0) -> Any:
        margins = [dp.polars.Margin(max_length=max_rows)]
        if by:
            margins.append(dp.polars.Margin(by=by, invariant="keys", max_length=max_rows,
                                            max_groups=groups))
        return dp.Context.compositor(data=lf, privacy_unit=dp.unit_of(contributions=1),
                                     privacy_loss=dp.loss_of(epsilon=eps),
                                     split_evenly_over=1, margins=margins).query()

    def keyed(by: list[str], order: list[tuple[Any, ...]], col: str) -> Any:
        def decode(t: Any) -> list[float]:
            got = {tuple(r[k] for k in by): r[col] for r in t.iter_rows(named=True)}
            return [float(got[k]) if got.get(k) is not None else float("nan") for k in order]
        return decode

    def variance(t: Any) -> list[float]:
        nn = max(float(t["len"][0]), 2.0)
        s, q = float(t["age"][0]), float(t["age_sq"][0])
        return [(q - s * s / nn) / (nn - 1.0)]

    def scalar(t: Any) -> list[float]:
        return [float(t.item())]

    income = pl.col("income").fill_null(0.0)
    by_region = [(r,) for r in regions]
    built: dict[str, tuple[Any, Any]] = {
        "count": (query().select(dp.len()), scalar),
        "count_by_region": (query(["region"], len(regions)).group_by(["region"]).agg(
            dp.len()), keyed(["region"], by_region, "len")),
        "count_by_region_sex": (query(["region", "sex"], len(regions) * len(sexes)).group_by(
            ["region", "sex"]).agg(dp.len()), keyed(["region", "sex"], [
                (r, s) for r in regions for s in sexes], "len")),
        "mean_income": (query().select(income.dp.mean(bounds=(ilo, ihi))), scalar),
        "mean_income_by_region": (query(["region"], len(regions)).group_by(["region"]).agg(
            income.dp.mean(bounds=(ilo, ihi))), keyed(["region"], by_region, "income")),
        "variance_age": (query().select(
            dp.len(), pl.col("age").fill_null(alo).dp.sum(bounds=(alo, ahi)),
            pl.col("age_sq").fill_null(alo * alo).dp.sum(bounds=(alo * alo, ahi * ahi))),
            variance),
        "quartiles_income": (query().select(
            income.dp.quantile(0.25, cands).alias("q25"),
            income.dp.quantile(0.5, cands).alias("q50"),
            income.dp.quantile(0.75, cands).alias("q75")),
            lambda t: [float(t[c][0]) for c in ("q25", "q50", "q75")]),
        "median_income": (query().select(income.dp.median(cands)), scalar),
        "histogram_age": (query(["age_bin"], n_bins).group_by(["age_bin"]).agg(dp.len()),
                          keyed(["age_bin"], [(i,) for i in range(n_bins)], "len")),
    }
    return lf, {k: (q.resolve(), decode) for k, (q, decode) in built.items()}


def accuracy_releases(spec: dict[str, Any]) -> dict[str, Any]:
    """Release the analysis once per seed; return the released values per statistic."""
    t0 = time.perf_counter()
    epsilon_map: dict[str, float] = {}
    if spec["peer"] == "diffprivlib":
        runs = [_diffprivlib_analysis(spec, int(s)) for s in spec["seeds"]]
        releases = {k: [r[k] for r in runs] for k in runs[0]}
    else:
        lf, measurements = _opendp_measurements(spec)
        releases = {k: [decode(m(lf).collect()) for _ in spec["seeds"]]
                    for k, (m, decode) in measurements.items()}
        epsilon_map = {k: float(m.map(1)) for k, (m, _) in measurements.items()}
    return {"spec": {k: v for k, v in spec.items() if k != "seeds"},
            "status": "ok", "releases": releases, "epsilon_at_one_row": epsilon_map,
            "seconds": time.perf_counter() - t0}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("op") == "accuracy":
        return accuracy_releases(spec)
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
