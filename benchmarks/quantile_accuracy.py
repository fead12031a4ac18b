"""Quantile accuracy: dpframe's exponential mechanism on bin counts against OpenDP and diffprivlib.

    python -m benchmarks.quantile_accuracy [--runs 200] [--rows 1000 10000] [--no-peers]

Same data, same ε, same bounds, ``runs`` independent releases per setting; the metric is the
median over runs of ``|release − true quantile|`` (true quantile: ``numpy.quantile`` of the
clamped column). dpframe reads only the exact bin counts, computed here with numpy
(:func:`dpframe.mechanisms.bin_counts`, its default 2^16 equal bins); it is measured under
replacement neighbours (the protected frame, public n) and add/remove (private size). For
dpframe the *exact* median absolute error is also computed from its output law (no Monte Carlo
error). The "replace" runs go through the product, ``frame.dp.quantile`` on a protected pandas
frame (binning in the engine, the release pipeline, seeded); for the peers a 95% confidence
interval of the population median from the order
statistics of the ``runs`` draws (binomial). Verdicts compare like with like: dpframe "replace"
with diffprivlib (whose rank utility has sensitivity 1 under replacement and add/remove alike)
and dpframe "add/remove" with OpenDP (``contributions=1`` is add/remove of one row).

Peers run in their own virtual environments (:mod:`benchmarks.peers`; ``--peer-python NAME=PATH``
overrides the interpreter), in a subprocess executing this file with ``--peer-worker``, which
imports only numpy, polars and the peer. They are never imported by dpframe or its tests.

* diffprivlib 0.6.6: ``diffprivlib.tools.quantile(x, q, epsilon, bounds)``.
* OpenDP 0.16.0: ``pl.col(c).dp.quantile(q, candidates)`` in a ``Context.compositor`` with
  ``unit_of(contributions=1)`` (add/remove one row), candidates = the midpoints of 4096 equal
  bins (OpenDP's time grows with the candidates: 2^16 took 2.4 s per release here); releases
  are batched 50 per query, each at ε.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

BINS = 2**16  # dpframe's default (DEFAULT_QUANTILE_BINS)
#: OpenDP's time grows with the candidates: ~1 s per release at 4096, ~2.4 s at 2^16
OPENDP_CANDIDATES = 4096
BATCH = 50


def _datasets(rows: int) -> dict[str, tuple[np.ndarray, tuple[float, float], str]]:
    from dpframe.datasets import CENSUS_BOUNDS, census

    frame = census(rows, seed=0)
    out = {}
    for col, note in (("income", "census income: skewed, 0-inflated"),
                      ("age", "census age: mildly skewed")):
        lo, hi = (float(v) for v in CENSUS_BOUNDS[col])
        out[col] = (np.clip(frame[col].to_numpy(dtype=float), lo, hi), (lo, hi), note)
    x = np.random.default_rng(1).normal(50.0, 12.0, rows)
    out["normal"] = (np.clip(x, 0.0, 100.0), (0.0, 100.0), "N(50, 12²): symmetric")
    return out


def _dpframe(x: np.ndarray, bounds: tuple[float, float], q: float, eps: float, runs: int,
             neighbours: str, seed: int, truth: float) -> tuple[list[float], float, float]:
    """``runs`` releases, seconds per release (binning included), and the exact median
    absolute error of the output law (weighted median of |midpoint − truth|)."""
    from dpframe.mechanisms import QuantileMechanism, bin_counts

    counts = bin_counts(x, bounds[0], bounds[1], BINS)
    mech = QuantileMechanism(eps, bounds[0], bounds[1], q, bins=BINS, neighbours=neighbours)
    t0 = time.perf_counter()
    if neighbours == "replace":  # the product: frame.dp.quantile on a protected frame
        import pandas as pd

        import dpframe as dpf

        frame = dpf.protect(pd.DataFrame({"x": x}), epsilon=1e12,
                            bounds={"x": bounds}, missing={"x": bounds[0]})
        rng = np.random.default_rng(seed)
        values = [frame.dp.quantile("x", q, epsilon=eps, random_state=rng)
                  for _ in range(runs)]
    else:  # add/remove (one group of a group-by): the mechanism on the exact counts
        values = list(mech.sample(np.tile(counts, (runs, 1)), random_state=seed).values[:, 0])
    sec = (time.perf_counter() - t0) / runs
    p = mech.probabilities(counts)
    mids = bounds[0] + (bounds[1] - bounds[0]) * (np.arange(BINS) + 0.5) / BINS
    err = np.abs(mids - truth)
    order = np.argsort(err)
    cum = np.cumsum(p[order])
    exact = float(err[order][np.searchsorted(cum, 0.5)])
    return [float(v) for v in values], sec, exact


def exact_mae(x: np.ndarray, lower: float, upper: float, q: float, eps: float,
              neighbours: str, bins: int, truth: float) -> float:
    """Exact median of |release − truth| under dpframe's output law (midpoint release)."""
    from dpframe.mechanisms import QuantileMechanism, bin_counts

    counts = bin_counts(x, lower, upper, bins)
    p = QuantileMechanism(eps, lower, upper, q, bins=bins, neighbours=neighbours
                          ).probabilities(counts)
    mids = lower + (upper - lower) * (np.arange(bins) + 0.5) / bins
    err = np.abs(mids - truth)
    order = np.argsort(err)
    return float(err[order][np.searchsorted(np.cumsum(p[order]), 0.5)])


def ablation(rows: int) -> None:
    """Exact errors against the number of bins, integer-aligned bins for an integer column
    (bounds [l − ½, u + ½] with u − l + 1 bins: midpoints are the integers l … u), and the exact
    error of diffprivlib's documented algorithm (:func:`smith_exact_mae`)."""
    print("| data | q | ε | neighbours | 1024 | 4096 | 16384 | 65536 | integer bins |"
          " diffprivlib's formula (exact) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (x, (lo, hi), _note) in _datasets(rows).items():
        for q in (0.5, 0.9):
            truth = float(np.quantile(x, q))
            for eps in (0.1, 1.0):
                for nb in ("replace", "add/remove"):
                    vals = [exact_mae(x, lo, hi, q, eps, nb, b, truth)
                            for b in (1024, 4096, 16384, 65536)]
                    integer = "–"
                    if nb == "replace":
                        smith = smith_exact_mae(x, lo, hi, q, eps, truth)
                        smith_txt = f"{smith:.4g}"
                    else:
                        smith_txt = "–"
                    if name == "age":
                        v = exact_mae(x, lo - 0.5, hi + 0.5, q, eps, nb, int(hi - lo) + 1,
                                      truth)
                        integer = f"{v:.4g}"
                    print(f"| {name} | {q:g} | {eps:g} | {nb} | "
                          + " | ".join(f"{v:.4g}" for v in vals)
                          + f" | {integer} | {smith_txt} |")


def smith_exact_mae(x: np.ndarray, lower: float, upper: float, q: float, eps: float,
                    truth: float) -> float:
    """Exact median |error| of the interval exponential mechanism as diffprivlib documents it
    (Smith 2011): sorted data with the bounds appended, interval i (i data points below) chosen
    with probability ∝ length · exp(−ε/2 · |i − q·n|), then a uniform point in it. Evaluated here
    from that formula (not their code) to compare without Monte Carlo error."""
    pts = np.sort(np.concatenate([np.clip(x, lower, upper), [lower, upper]]))
    n = x.size
    length = np.diff(pts)
    logw = -eps / 2 * np.abs(np.arange(n + 1) - q * n)
    w = length * np.exp(logw - logw.max())
    p = w / w.sum()
    a, b = pts[:-1], pts[1:]
    keep = p > 0

    def cdf(e: float) -> float:
        lo, hi = np.maximum(a[keep], truth - e), np.minimum(b[keep], truth + e)
        return float((p[keep] * np.clip(hi - lo, 0, None) / length[keep]).sum())

    lo_e, hi_e = 0.0, upper - lower
    for _ in range(100):
        mid = (lo_e + hi_e) / 2
        lo_e, hi_e = (lo_e, mid) if cdf(mid) >= 0.5 else (mid, hi_e)
    return hi_e


def _median_ci(values: list[float], truth: float) -> tuple[float, float]:
    """95% CI of the population median of |v − truth| (order statistics, binomial)."""
    from scipy import stats

    e = np.sort(np.abs(np.asarray(values) - truth))
    n = e.size
    lo = int(stats.binom.ppf(0.025, n, 0.5))
    hi = int(stats.binom.isf(0.025, n, 0.5))
    return float(e[max(lo - 1, 0)]), float(e[min(hi, n - 1)])


# -- peers (this part runs in the peer's venv: numpy, polars and the peer only) ------------------

def _peer_worker(spec: dict[str, Any]) -> dict[str, Any]:
    x = np.load(spec["npy"])
    lo, hi = spec["bounds"]
    q, eps, runs = spec["q"], spec["epsilon"], spec["runs"]
    t0 = time.perf_counter()
    if spec["peer"] == "diffprivlib":
        import warnings

        import diffprivlib

        warnings.simplefilter("ignore")
        acc = diffprivlib.BudgetAccountant(epsilon=float("inf"))
        vals = [float(diffprivlib.tools.quantile(x, q, epsilon=eps, bounds=(lo, hi),
                                                 accountant=acc)) for _ in range(runs)]
        version = diffprivlib.__version__
    else:
        import opendp.prelude as dp
        import polars as pl

        dp.enable_features("contrib")
        cands = list(lo + (hi - lo) * (np.arange(spec["bins"]) + 0.5) / spec["bins"])
        batch = min(BATCH, runs)
        ctx = dp.Context.compositor(
            data=pl.LazyFrame({"x": x}), privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=dp.loss_of(epsilon=eps * runs), split_evenly_over=runs // batch,
            margins=[dp.polars.Margin(max_length=len(x))],
        )
        vals = []
        for _ in range(runs // batch):
            expr = pl.col("x").fill_nan(lo).fill_null(lo)
            query = ctx.query().select(
                [expr.dp.quantile(q, cands).alias(f"r{k}") for k in range(batch)])
            vals += [float(v) for v in query.release().collect().row(0)]
        from importlib.metadata import version as _version

        version = _version("opendp")
    return {"values": vals, "seconds_per_release": (time.perf_counter() - t0) / runs,
            "version": version}


def _run_peer(python: str, spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run([python, str(Path(__file__).resolve()), "--peer-worker",
                           json.dumps(spec)], capture_output=True, text=True, check=False,
                          timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT "):
            return json.loads(line[len("@@RESULT "):])
    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
    return {"error": f"exit {proc.returncode}: {tail}"}


def _peer_pythons(overrides: list[str], use_peers: bool) -> dict[str, str]:
    if not use_peers:
        return {}
    out = {}
    for item in overrides:
        name, _, path = item.partition("=")
        out[name] = path
    for name in ("diffprivlib", "opendp"):
        if name not in out:
            from benchmarks.peers import ensure_venv

            out[name] = str(ensure_venv(name))
    return out


def _mae(values: list[float], truth: float) -> float:
    return float(statistics.median(abs(v - truth) for v in values))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rows", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--q", type=float, nargs="+", default=[0.5, 0.9])
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peer-python", action="append", default=[],
                    help="NAME=PATH, e.g. opendp=/path/to/venv/bin/python")
    ap.add_argument("--json", type=Path, default=None, help="also write raw results here")
    ap.add_argument("--ablation", action="store_true",
                    help="only print exact dpframe errors against the grid (no peers)")
    args = ap.parse_args(argv)
    if args.ablation:
        ablation(args.rows[0])
        return 0
    peers = _peer_pythons(args.peer_python, not args.no_peers)
    rows_out: list[dict[str, Any]] = []
    print("| data | n | q | ε | true | dpframe replace: runs / exact | diffprivlib [95% CI] |"
          " replace vs diffprivlib | dpframe add/remove: runs / exact | OpenDP [95% CI] |"
          " add/remove vs OpenDP |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            for name, (x, bounds, _note) in _datasets(rows).items():
                npy = Path(tmp) / f"{name}_{rows}.npy"
                np.save(npy, x)
                for q in args.q:
                    truth = float(np.quantile(x, q))
                    for eps in args.epsilons:
                        res: dict[str, Any] = {"data": name, "n": rows, "q": q, "epsilon": eps,
                                               "truth": truth}
                        for nb in ("replace", "add/remove"):
                            seed = zlib.crc32(f"{name}{rows}{q}{eps}{nb}".encode())
                            vals, sec, exact = _dpframe(x, bounds, q, eps, args.runs, nb,
                                                        seed, truth)
                            res[f"dpframe {nb}"] = {"mae": _mae(vals, truth), "sec": sec,
                                                    "exact": exact}
                        for peer, python in peers.items():
                            spec = {"peer": peer, "npy": str(npy), "bounds": list(bounds),
                                    "q": q, "epsilon": eps, "runs": args.runs,
                                    "bins": OPENDP_CANDIDATES}
                            out = _run_peer(python, spec)
                            if "error" in out:
                                res[peer] = {"error": out["error"]}
                            else:
                                res[peer] = {"mae": _mae(out["values"], truth),
                                             "ci": _median_ci(out["values"], truth),
                                             "sec": out["seconds_per_release"],
                                             "version": out["version"]}
                        rows_out.append(res)
                        _print_row(res)
    if args.json is not None:
        args.json.write_text(json.dumps(rows_out, indent=1))
    return 0


def _fmt(v: Any) -> str:
    if not isinstance(v, dict):
        return "–"
    if "error" in v:
        return "error"
    if "exact" in v:
        return f"{v['mae']:.4g} / {v['exact']:.4g}"
    return f"{v['mae']:.4g} [{v['ci'][0]:.4g}, {v['ci'][1]:.4g}]"


def _verdict(ours: dict[str, Any], peer: Any) -> str:
    """Exact dpframe value against the peer's CI: better / on par / worse."""
    if not isinstance(peer, dict) or "ci" not in peer:
        return "–"
    lo, hi = peer["ci"]
    if ours["exact"] < lo:
        return "better"
    if ours["exact"] <= hi:
        return "on par"
    return "**worse**"


def _print_row(res: dict[str, Any]) -> None:
    rep, ar = res["dpframe replace"], res["dpframe add/remove"]
    print(f"| {res['data']} | {res['n']} | {res['q']:g} | {res['epsilon']:g} |"
          f" {res['truth']:.4g} | {_fmt(rep)} | {_fmt(res.get('diffprivlib'))} |"
          f" {_verdict(rep, res.get('diffprivlib'))} | {_fmt(ar)} | {_fmt(res.get('opendp'))} |"
          f" {_verdict(ar, res.get('opendp'))} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--peer-worker":
        print("@@RESULT " + json.dumps(_peer_worker(json.loads(sys.argv[2]))), flush=True)
        sys.exit(0)
    sys.exit(main())
