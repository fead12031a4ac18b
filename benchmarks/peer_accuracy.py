"""A whole analysis against the peers at the same guarantee: accuracy, not speed (issue 33).

On the synthetic census of ``--rows`` people (``dpframe.datasets.census(rows, seed=0)``, 6,000
by default: the survey size of issue 33) the same analysis is released ``--seeds`` times by
dpframe and by each peer, every library in pure ε-DP (δ = 0) under the same neighbour
definition — one row added or removed (dpframe: ``protect(..., neighbours="add_remove",
max_rows=10_000)``; OpenDP: ``unit_of(contributions=1)``; diffprivlib: the tools whose
sensitivity is that of add/remove) — at the same ε per statistic:

* counts: all rows; by region (4 public keys); by region × sex (8 cells);
* the mean of income (bounds ``[0, 250 000]``), overall and per region;
* the variance of age (bounds ``[16, 90]``);
* the quartiles of income (one release of the three levels, ε split evenly) and its median
  (alone, the whole ε);
* a histogram of age over 8 public bins (``linspace(16, 90, 9)``; values outside are clamped to
  the bounds first, so every library bins the same numbers);
* the correlation of age and hours worked (dpframe only: neither peer offers one).

Every peer runs in its own venv through its public API (``benchmarks/peer_worker.py``, op
``accuracy``) on the same clamped columns. The error of one run is the absolute error against
the exact statistic of the clamped data, averaged over the cells of a multi-cell statistic
(each quartile is its own row). Per statistic and library: the median error over the seeds with
a 95 % percentile-bootstrap interval, and for dpframe against the best peer (lowest median)
the ratio of the medians with its bootstrap interval: *better* when the interval is below 1,
*tie* when it holds 1, *worse* when it is above 1. dpframe's seeds are ``random_state`` values;
diffprivlib's ``RandomState`` seeds; OpenDP cannot be seeded (its own secure noise).

Run: ``python -m benchmarks.peer_accuracy [--rows 6000] [--seeds 200] [--epsilon 1]
[--seed-offset 0] [--reverse] [--no-peers] [--append]``; results are appended to
``benchmarks/reports/raw/results-peer-accuracy.json`` with ``--append``, and the last run is
printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import dpframe as dpf
from benchmarks.paths import RAW
from dpframe.datasets import CENSUS_BOUNDS, CENSUS_KEYS, census

HERE = Path(__file__).resolve().parent
RESULTS = RAW / "results-peer-accuracy.json"
MAX_ROWS = 10_000
AGE_EDGES = [float(v) for v in np.linspace(16.0, 90.0, 9)]
#: dpframe's default quantile grid under add/remove: 2^⌈log₂(8·ε·max_rows)⌉ equal bins within
#: [2^16, 2^22] (docs/frames.md, "Quantile resolution"); OpenDP's candidates are their midpoints
#: by default (the same grid), or ``--candidates`` evenly spaced values.


def quantile_grid(epsilon: float, candidates: int | None) -> dict[str, Any]:
    """OpenDP's public candidates for the income quantiles (see above)."""
    lo, hi = BOUNDS["income"]
    if candidates is not None:
        return {"lo": lo, "hi": hi, "count": candidates, "midpoints": False}
    bins = 2 ** int(np.ceil(np.log2(8 * epsilon * MAX_ROWS)))
    return {"lo": lo, "hi": hi, "count": min(max(bins, 2**16), 2**22), "midpoints": True}

REGIONS = list(CENSUS_KEYS["region"])
SEXES = list(CENSUS_KEYS["sex"])
LEVELS = (0.25, 0.5, 0.75)
BOUNDS = {k: (float(v[0]), float(v[1])) for k, v in CENSUS_BOUNDS.items()}
PEERS = ("diffprivlib", "opendp")

#: statistic -> row labels of its cells (a quartile release has one row per level).
ROWS: dict[str, list[str]] = {
    "count": ["count of all rows"],
    "count_by_region": ["count by region (4 cells)"],
    "count_by_region_sex": ["count by region × sex (8 cells)"],
    "mean_income": ["mean of income"],
    "mean_income_by_region": ["mean of income by region (4)"],
    "variance_age": ["variance of age"],
    "quartiles_income": [f"quartiles of income: q = {q:g}" for q in LEVELS],
    "median_income": ["median of income (alone)"],
    "histogram_age": ["histogram of age (8 bins)"],
    "corr_age_hours": ["correlation of age and hours worked"],
}


def clamped(df: pd.DataFrame) -> pd.DataFrame:
    """The analysed columns clamped to their public bounds (what every library sees)."""
    out = pd.DataFrame({c: df[c].astype(float).clip(*BOUNDS[c])
                        for c in ("age", "income", "hours_worked")})
    out["region"] = pd.Categorical(df["region"], categories=REGIONS).codes
    out["sex"] = pd.Categorical(df["sex"], categories=SEXES).codes
    bins = np.searchsorted(np.asarray(AGE_EDGES), out["age"].to_numpy(), side="right") - 1
    out["age_bin"] = np.clip(bins, 0, len(AGE_EDGES) - 2)
    return out


def exact(c: pd.DataFrame) -> dict[str, np.ndarray]:
    """The statistics of the clamped data (the target of every library)."""
    by_region = c.groupby("region")
    cells = c.groupby(["region", "sex"]).size()
    return {
        "count": np.array([len(c)], dtype=float),
        "count_by_region": by_region.size().reindex(range(len(REGIONS))).to_numpy(float),
        "count_by_region_sex": np.array([cells.get((r, s), 0) for r in range(len(REGIONS))
                                         for s in range(len(SEXES))], dtype=float),
        "mean_income": np.array([c["income"].mean()]),
        "mean_income_by_region": by_region["income"].mean().reindex(
            range(len(REGIONS))).to_numpy(float),
        "variance_age": np.array([c["age"].var(ddof=1)]),
        "quartiles_income": np.quantile(c["income"], LEVELS),
        "median_income": np.array([c["income"].median()]),
        "histogram_age": np.bincount(c["age_bin"], minlength=len(AGE_EDGES) - 1).astype(float),
        "corr_age_hours": np.array([c["age"].corr(c["hours_worked"])]),
    }


def _aligned(table: pd.DataFrame, keys: list[str], order: list[tuple[str, ...]],
             col: str) -> np.ndarray:
    got = {tuple(str(r[k]) for k in keys): float(r[col]) for _, r in table.iterrows()}
    return np.array([got.get(k, np.nan) for k in order])


_REGION_ORDER = [(r,) for r in REGIONS]
_CELL_ORDER = [(r, s) for r in REGIONS for s in SEXES]

#: statistic -> its release on a frame protected under add/remove, at ε with a seed.
DPFRAME: dict[str, Callable[[Any, float, int], np.ndarray]] = {
    "count": lambda pf, e, s: np.array([pf.dp.count(epsilon=e, random_state=s)]),
    "count_by_region": lambda pf, e, s: _aligned(
        pf.dp.groupby("region").count(epsilon=e, random_state=s), ["region"], _REGION_ORDER,
        "count"),
    "count_by_region_sex": lambda pf, e, s: _aligned(
        pf.dp.groupby(["region", "sex"]).count(epsilon=e, random_state=s), ["region", "sex"],
        _CELL_ORDER, "count"),
    "mean_income": lambda pf, e, s: np.array([pf.dp.mean("income", epsilon=e,
                                                         random_state=s)]),
    "mean_income_by_region": lambda pf, e, s: _aligned(
        pf.dp.groupby("region").mean("income", epsilon=e, random_state=s), ["region"],
        _REGION_ORDER, "mean"),
    "variance_age": lambda pf, e, s: np.array([pf.dp.variance("age", epsilon=e,
                                                              random_state=s)]),
    "quartiles_income": lambda pf, e, s: pf.dp.quantile(
        "income", list(LEVELS), epsilon=e, random_state=s)["quantile"].to_numpy(float),
    "median_income": lambda pf, e, s: np.array([pf.dp.median("income", epsilon=e,
                                                             random_state=s)]),
    "histogram_age": lambda pf, e, s: pf.dp.histogram(
        "age", edges=AGE_EDGES, epsilon=e, random_state=s)["count"].to_numpy(float),
    "corr_age_hours": lambda pf, e, s: np.array([float(pf.dp.corr(
        ["age", "hours_worked"], epsilon=e, random_state=s).iloc[0, 1])]),
}


def dpframe_releases(df: pd.DataFrame, seeds: list[int],
                     epsilon: float) -> dict[str, list[list[float]]]:
    """Each statistic released once per seed, on one frame per statistic (add/remove)."""
    out: dict[str, list[list[float]]] = {}
    for name, release in DPFRAME.items():
        pf = dpf.protect(df.copy(), epsilon=epsilon * (len(seeds) + 1), bounds=BOUNDS,
                         keys={"region": REGIONS, "sex": SEXES}, missing="lower",
                         neighbours="add_remove", max_rows=MAX_ROWS)
        out[name] = [[float(v) for v in release(pf, epsilon, s)] for s in seeds]
    return out


def peer_releases(c: pd.DataFrame, seeds: list[int], epsilon: float, data_dir: Path,
                  timeout: float, grid: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each peer's releases, from its own venv (``peer_worker.py``, op ``accuracy``)."""
    from benchmarks.peers import _run, _versions, ensure_venv

    data_dir.mkdir(parents=True, exist_ok=True)
    npz = data_dir / f"peer-accuracy-{len(c)}.npz"
    np.savez(npz, **{k: c[k].to_numpy() for k in c.columns})
    spec: dict[str, Any] = {
        "op": "accuracy", "data": str(npz), "seeds": seeds, "epsilon": epsilon,
        "bounds": {k: list(v) for k, v in BOUNDS.items()}, "age_edges": AGE_EDGES,
        "income_candidates": grid, "max_rows": MAX_ROWS,
        "n_region": len(REGIONS), "n_sex": len(SEXES), "region_names": REGIONS,
        "sex_names": SEXES,
    }
    results: dict[str, Any] = {}
    versions: dict[str, Any] = {}
    for peer in PEERS:
        python = ensure_venv(peer)
        versions[peer] = _versions(python)
        (r,) = _run(python, [{**spec, "peer": peer}], timeout)
        if r["status"] != "ok":
            raise RuntimeError(f"{peer}: {r.get('reason')}\n{r.get('traceback', '')}")
        results[peer] = r["releases"]
        if r.get("epsilon_at_one_row"):
            versions[peer]["epsilon_at_one_row"] = r["epsilon_at_one_row"]
        print(f"  {peer}: {len(seeds)} runs in {r['seconds']:.1f} s", flush=True)
    return results, versions


def run_errors(releases: list[list[float]], truth: np.ndarray, per_cell: bool) -> np.ndarray:
    """Absolute error per run: per cell (quartile levels), or averaged over the cells."""
    err = np.abs(np.asarray(releases, dtype=float) - truth[None, :])
    return err if per_cell else err.mean(axis=1, keepdims=True)


def bootstrap_median(x: np.ndarray, rng: np.random.Generator,
                     draws: int) -> tuple[float, float, float, np.ndarray]:
    """Median, its 95 % percentile-bootstrap interval, and the bootstrap medians."""
    boot = np.median(rng.choice(x, size=(draws, x.size), replace=True), axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(np.median(x)), float(lo), float(hi), boot


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, with 0 / 0 = 1 and x / 0 = inf (medians of integer errors can be 0)."""
    out = np.full(num.shape, np.inf)
    np.divide(num, den, out=out, where=den > 0)
    out[(den == 0) & (num == 0)] = 1.0
    return out


def summarise(truth: dict[str, np.ndarray], releases: dict[str, dict[str, Any]],
              draws: int = 2_000) -> list[dict[str, Any]]:
    """One row per statistic (per quartile level): medians, intervals, ratio, verdict."""
    rng = np.random.default_rng(20261129)
    rows = []
    for stat, labels in ROWS.items():
        per_cell = stat == "quartiles_income"
        errors = {lib: run_errors(rel[stat], truth[stat], per_cell)
                  for lib, rel in releases.items() if stat in rel}
        for j, label in enumerate(labels):
            row: dict[str, Any] = {"statistic": label, "key": stat}
            boots = {}
            for lib, err in errors.items():
                med, lo, hi, boots[lib] = bootstrap_median(err[:, j], rng, draws)
                row[lib] = {"median": med, "lo": lo, "hi": hi}
            peers = [p for p in PEERS if p in row]
            if peers:
                best = min(peers, key=lambda p: row[p]["median"])
                ratio = _ratio(boots["dpframe"], boots[best])
                rlo, rhi = np.quantile(ratio, [0.025, 0.975], method="inverted_cdf")
                row["best_peer"] = best
                point = _ratio(np.array([row["dpframe"]["median"]]),
                               np.array([row[best]["median"]]))[0]
                row["ratio"] = {"median": float(point), "lo": float(rlo), "hi": float(rhi)}
                row["verdict"] = "better" if rhi < 1 else ("worse" if rlo > 1 else "tie")
            rows.append(row)
    return rows


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"


def render(run: dict[str, Any]) -> str:
    """The run's table in Markdown."""
    libs = ["dpframe", *[p for p in PEERS if p in run["versions"]]]
    head = "| statistic | " + " | ".join(f"{lib} median error [95 % CI]" for lib in libs)
    head += " | dpframe / best peer [95 % CI] | verdict |"
    lines = [head, "|---|" + "---:|" * len(libs) + "---:|---|"]
    for row in run["rows"]:
        cells = []
        for lib in libs:
            m = row.get(lib)
            cells.append("—" if m is None else
                         f"{_fmt(m['median'])} [{_fmt(m['lo'])}, {_fmt(m['hi'])}]")
        if "ratio" in row:
            r = row["ratio"]
            cells.append(f"{r['median']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}] "
                         f"({row['best_peer']})")
            cells.append(row["verdict"])
        else:
            cells += ["no peer offers it", "—"]
        lines.append(f"| {row['statistic']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Two runs' medians side by side with their relative difference (|a − b| / min(a, b)),
    and both verdicts: a figure is quoted only where the runs agree within 20 %."""
    libs = ["dpframe", *[p for p in PEERS if p in a["versions"] and p in b["versions"]]]
    lines = ["| statistic | " + " | ".join(f"{lib}: run A / run B (diff)" for lib in libs)
             + " | verdicts A / B |", "|---|" + "---:|" * len(libs) + "---|"]
    for ra, rb in zip(a["rows"], b["rows"], strict=True):
        cells = []
        for lib in libs:
            if lib not in ra or lib not in rb:
                cells.append("—")
                continue
            x, y = ra[lib]["median"], rb[lib]["median"]
            low = min(x, y)
            diff = abs(x - y) / low if low > 0 else (0.0 if x == y else float("inf"))
            flag = "" if diff <= 0.2 else " **>20 %**"
            cells.append(f"{_fmt(x)} / {_fmt(y)} ({diff:.0%}){flag}")
        cells.append(f"{ra.get('verdict', '—')} / {rb.get('verdict', '—')}")
        lines.append(f"| {ra['statistic']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def measure(rows: int, seeds: list[int], epsilon: float, peers: bool, data_dir: Path,
            candidates: int | None = None, timeout: float = 3_600.0) -> dict[str, Any]:
    """Release the analysis with every library; return the run (header, rows)."""
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    df = census(rows, seed=0)
    c = clamped(df)
    truth = exact(c)
    releases: dict[str, dict[str, Any]] = {"dpframe": dpframe_releases(df, seeds, epsilon)}
    print(f"  dpframe: {len(seeds)} runs in {time.perf_counter() - t0:.1f} s", flush=True)
    versions: dict[str, Any] = {"dpframe": {"commit": _commit(),
                                            "python": platform.python_version()}}
    grid = quantile_grid(epsilon, candidates)
    if peers:
        peer_out, peer_versions = peer_releases(c, seeds, epsilon, data_dir, timeout, grid)
        releases.update(peer_out)
        versions.update(peer_versions)
    return {"rows": summarise(truth, releases), "versions": versions,
            "header": {"n": rows, "seeds": len(seeds), "first_seed": seeds[0],
                       "last_seed": seeds[-1], "epsilon": epsilon, "delta": 0.0,
                       "neighbours": "add_remove", "max_rows": MAX_ROWS,
                       "opendp_quantile_candidates": grid,
                       "load_before": load_before, "load_after": os.getloadavg(),
                       "seconds": time.perf_counter() - t0,
                       "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=6_000)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--seed-offset", type=int, default=0)
    parser.add_argument("--reverse", action="store_true", help="release the seeds in reverse")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--candidates", type=int, default=None,
                        help="OpenDP's income quantile candidates: this many evenly spaced "
                             "values (default: the midpoints of dpframe's grid)")
    parser.add_argument("--append", action="store_true",
                        help=f"append the run to {RESULTS.name}")
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    parser.add_argument("--compare", type=int, nargs=2, metavar=("A", "B"), default=None,
                        help=f"print runs A and B of {RESULTS.name} (list indices) side by "
                             "side and exit")
    args = parser.parse_args(argv)
    if args.compare:
        runs = json.loads(RESULTS.read_text())
        a, b = (runs[i] for i in args.compare)
        print(render(a), render(b), compare(a, b), sep="\n\n")
        return
    if args.rows < 2 or args.seeds < 2:
        parser.error("--rows and --seeds must be at least 2")
    seeds = list(range(args.seed_offset, args.seed_offset + args.seeds))
    if args.reverse:
        seeds.reverse()
    run = measure(args.rows, seeds, args.epsilon, not args.no_peers, args.data_dir,
                  args.candidates)
    if args.append:
        runs = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps([*runs, run], indent=1) + "\n")
    h = run["header"]
    print(f"n = {h['n']:,}, ε = {h['epsilon']:g} per statistic, δ = 0, add/remove, "
          f"{h['seeds']} seeds ({h['first_seed']}..{h['last_seed']}), "
          f"load {h['load_before'][0]:.2f}; OpenDP candidates: {h['opendp_quantile_candidates']}")
    print(render(run))


if __name__ == "__main__":
    main()
