"""Quantile resolution that follows n: median absolute error of the median at n = 10³…10⁶.

    python -m benchmarks.quantile_bins [--runs 50] [--opendp-runs 20] [--rows 1000 ...]

For each size ``n`` (ε = 1, q = 0.5) and two columns — census ``income`` (bounds 0…250 000,
skewed, 17% zeros; :func:`dpframe.datasets.census`) and ``normal`` (N(50, 12²) clipped to
0…100) — this reports the median over releases of ``|release − true median|`` for

* dpframe with the old fixed default of 2^16 bins and with the new rule
  (:func:`dpframe.mechanisms.quantiles.default_bins`): the *exact* median of the output law
  of :class:`~dpframe.mechanisms.QuantileMechanism` on the exact bin counts (no Monte Carlo
  error; replacement neighbours, the protected frame);
* diffprivlib 0.6.6 (``tools.quantile``) and OpenDP 0.16 (``dp.quantile`` over the
  midpoints of 4096 candidates, add/remove of one row), each in its own venv
  (:mod:`benchmarks.peers`), ``runs`` / ``opendp-runs`` seeded-by-OS releases.

Also the seconds of one dpframe release at the rule's bins (binning with numpy + sampling):
the rule keeps time linear in n (bins ≤ 8·ε·n, at most 2^22).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quantile_accuracy import _peer_pythons, _run_peer


def _columns(rows: int) -> dict[str, tuple[np.ndarray, tuple[float, float]]]:
    from dpframe.datasets import CENSUS_BOUNDS, census

    lo, hi = (float(v) for v in CENSUS_BOUNDS["income"])
    income = np.clip(census(rows, seed=0)["income"].to_numpy(dtype=float), lo, hi)
    normal = np.clip(np.random.default_rng(1).normal(50.0, 12.0, rows), 0.0, 100.0)
    return {"income": (income, (lo, hi)), "normal": (normal, (0.0, 100.0))}


def exact_mae(x: np.ndarray, bounds: tuple[float, float], eps: float, bins: int,
              truth: float) -> tuple[float, float]:
    """Median of |midpoint − truth| under the exact output law, and seconds of one release."""
    from dpframe.mechanisms.quantiles import QuantileMechanism, bin_counts

    t0 = time.perf_counter()
    counts = bin_counts(x, bounds[0], bounds[1], bins)
    mech = QuantileMechanism(eps, bounds[0], bounds[1], 0.5, bins=bins)
    mech.sample(counts)
    seconds = time.perf_counter() - t0
    p = mech.probabilities(counts)
    err = np.abs(mech.edges[:-1] + (bounds[1] - bounds[0]) / bins / 2 - truth)
    order = np.argsort(err, kind="stable")
    cdf = np.cumsum(p[order])
    return float(err[order][np.searchsorted(cdf, 0.5)]), seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[10**3, 10**4, 10**5, 10**6])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--opendp-runs", type=int, default=20)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--sweep", action="store_true",
                    help="instead: dpframe's exact error for 2^14 … 2^22 bins at each n")
    ap.add_argument("--product", action="store_true",
                    help="instead: seconds of frame.dp.median on a protected pandas frame")
    args = ap.parse_args(argv)
    if args.sweep:
        return _sweep(args.rows, args.epsilon)
    if args.product:
        return _product(args.rows, args.epsilon)
    from dpframe.mechanisms.quantiles import DEFAULT_QUANTILE_BINS, default_bins

    peers = _peer_pythons([], not args.no_peers)
    eps = args.epsilon
    print(f"median |error| of the median, ε = {eps:g} (dpframe: exact law; peers: runs)")
    print("| column | n | dpframe 2^16 | dpframe rule (bins) | s/release | diffprivlib | "
          "OpenDP (4096) |")
    print("|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            for name, (x, bounds) in _columns(n).items():
                truth = float(np.quantile(x, 0.5))
                old, _ = exact_mae(x, bounds, eps, DEFAULT_QUANTILE_BINS, truth)
                bins = default_bins(n, eps)
                new, secs = exact_mae(x, bounds, eps, bins, truth)
                npy = str(Path(tmp) / f"{name}{n}.npy")
                np.save(npy, x)
                cells = []
                for peer, runs in (("diffprivlib", args.runs), ("opendp", args.opendp_runs)):
                    if peer not in peers:
                        cells.append("not run")
                        continue
                    spec = {"peer": peer, "npy": npy, "bounds": list(bounds), "q": 0.5,
                            "epsilon": eps, "runs": runs, "bins": 4096}
                    res = _run_peer(peers[peer], spec)
                    cells.append(res["error"][:40] if "error" in res else
                                 f"{statistics.median(abs(v - truth) for v in res['values']):.4g}")
                print(f"| {name} | {n} | {old:.4g} | {new:.4g} (2^{bins.bit_length() - 1}) | "
                      f"{secs:.2f} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


def _sweep(rows: list[int], eps: float) -> int:
    """The exact error as a function of the bins: it converges (to the continuous mechanism)
    as the grid becomes finer than the rank noise; a coarse grid can be luckier or worse
    depending on how the bins align with the data."""
    from dpframe.mechanisms.quantiles import default_bins

    exps = list(range(14, 23, 2))
    print("| column | n | " + " | ".join(f"2^{k}" for k in exps) + " | rule |")
    print("|---|---|" + "---|" * (len(exps) + 1), flush=True)
    for n in rows:
        for name, (x, bounds) in _columns(n).items():
            truth = float(np.quantile(x, 0.5))
            errs = [exact_mae(x, bounds, eps, 2**k, truth)[0] for k in exps]
            rule = default_bins(n, eps).bit_length() - 1
            print(f"| {name} | {n} | " + " | ".join(f"{e:.4g}" for e in errs)
                  + f" | 2^{rule} |", flush=True)
    return 0


def _product(rows: list[int], eps: float) -> int:
    """Seconds of one ``frame.dp.median`` (binning in pandas + the release pipeline) with the
    rule's bins: the rule keeps the time linear in n."""
    import pandas as pd

    import dpframe as dpf

    print("| n | bins | seconds | seconds per 10^6 rows |")
    print("|---|---|---|---|", flush=True)
    for n in rows:
        x, bounds = _columns(n)["income"]
        pf = dpf.protect(pd.DataFrame({"x": x}), epsilon=1e6, bounds={"x": bounds},
                         missing={"x": bounds[0]})
        pf.dp.median("x", epsilon=eps)  # warm-up
        t0 = time.perf_counter()
        pf.dp.median("x", epsilon=eps)  # secure randomness, as users get it
        secs = time.perf_counter() - t0
        bins = pf.dp.session.ledger.snapshot_document()["entries"][-1]["grid"]
        print(f"| {n} | {round((bounds[1] - bounds[0]) / bins)} | {secs:.3f} | "
              f"{secs / n * 1e6:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
