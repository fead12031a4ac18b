"""Liu (2019), §4.1 and Fig. 1: a sanitised 2×2 covariance matrix, bounded vs truncated.

Settings of the paper: ``(S11, S22, r) ∈ {(1, 2, 0), (1, 2, −0.4), (1, 2, 0.7)}``, data bounds
``[−3, 3]`` and ``[−4.5, 4.5]``, total ε = 1 split equally over the three released elements
(ε/3 each), ``n`` from 50 to 800, 500 independent sanitisations of the *fixed* original matrix
per setting. Elements are released as in :func:`dpframe.mechanisms.matrices.release_covariance` (Liu
Table 1): variances on ``[0, n w²/(4(n−1))]`` with ``Δ = w²/n``, then the covariance on
``[−√(S*11 S*22), √(S*11 S*22)]`` with ``Δ = w1 w2/n``; ``r* = S*12/√(S*11 S*22)``.

Mechanisms (naming: ``docs/papers.md``, "Names"): dpframe's ``bounded`` is Liu's "truncated"
Laplace, but with Holohan's scale ``b*`` (ε-DP) instead of Liu's ``λ = Δ/ε`` (which Holohan
shows is *not* ε-DP for a conditioned Laplace); dpframe's ``truncated`` is Liu's BIT. The script
also prints the closed-form bias (Liu Prop. 1) of the variances at Liu's ``λ`` to separate the
two effects.

The variances are sampled vectorised over the 500 runs (their domain is fixed for a given n);
the covariance, whose domain depends on each run's released variances, is released run by run,
exactly as ``release_covariance`` does.

Run: ``python examples/liu_covariance.py [--out liu_covariance.png] [--quick]``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np

from dpframe.mechanisms import BoundedLaplace, TruncatedLaplace, interval
from dpframe.mechanisms.matrices import (
    covariance_sensitivity,
    variance_domain_upper,
    variance_sensitivity,
)
from dpframe.mechanisms.moments import bounded_moments

SETTINGS = ((1.0, 2.0, 0.0), (1.0, 2.0, -0.4), (1.0, 2.0, 0.7))
BOUNDS = ((-3.0, 3.0), (-4.5, 4.5))
EPSILON = 1.0
N_GRID = (50, 100, 200, 400, 600, 800)
MECHS = {"bounded": BoundedLaplace, "truncated": TruncatedLaplace}
STATS = ("S11", "S22", "S12", "r")
QUANTILES = (2.5, 25.0, 75.0, 97.5)


def simulate(
    setting: tuple[float, float, float],
    n: int,
    mechanism: str,
    runs: int,
    rng: np.random.Generator,
    epsilon: float = EPSILON,
) -> dict[str, np.ndarray]:
    """``runs`` sanitisations of one fixed 2×2 matrix; arrays of S11*, S22*, S12*, r*."""
    s11, s22, r = setting
    s12 = r * math.sqrt(s11 * s22)
    cls = MECHS[mechanism]
    e = epsilon / 3.0
    w = [hi - lo for lo, hi in BOUNDS]
    out: dict[str, np.ndarray] = {}
    for name, true, width in (("S11", s11, w[0]), ("S22", s22, w[1])):
        upper = variance_domain_upper(n, width)
        mech = cls(e, variance_sensitivity(n, width), lower=0.0, upper=upper)
        out[name] = np.asarray(mech.sample(min(true, upper), size=runs, random_state=rng))
    sens = covariance_sensitivity(n, w[0], w[1])
    c = np.sqrt(out["S11"] * out["S22"])
    cov = np.zeros(runs)
    for i in range(runs):
        if c[i] > 0:
            mech = cls(e, min(sens, 2 * c[i]), lower=-c[i], upper=c[i])
            cov[i] = mech.sample(float(np.clip(s12, -c[i], c[i])), random_state=rng)
    out["S12"] = cov
    with np.errstate(divide="ignore", invalid="ignore"):
        out["r"] = np.where(c > 0, cov / np.where(c > 0, c, 1.0), 0.0)
    return out


def run(
    runs: int = 500, n_grid: Sequence[int] = N_GRID, seed: int = 0
) -> dict[tuple[int, str, str], dict[str, np.ndarray]]:
    """Summaries keyed by (setting index, mechanism, statistic): mean, quantiles, truth."""
    rng = np.random.default_rng(seed)
    res: dict[tuple[int, str, str], dict[str, np.ndarray]] = {}
    for si, setting in enumerate(SETTINGS):
        s11, s22, r = setting
        truth = {"S11": s11, "S22": s22, "S12": r * math.sqrt(s11 * s22), "r": r}
        for mech in MECHS:
            sims = [simulate(setting, n, mech, runs, rng) for n in n_grid]
            for st in STATS:
                vals = np.array([s[st] for s in sims])  # (len(n_grid), runs)
                res[(si, mech, st)] = {
                    "n": np.asarray(n_grid),
                    "mean": vals.mean(axis=1),
                    "q": np.percentile(vals, QUANTILES, axis=1),
                    "truth": np.array(truth[st]),
                    "at_bound": _at_bound(st, vals, sims),
                }
    return res


def _at_bound(stat: str, vals: np.ndarray, sims: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Share of releases exactly at an end of the domain (BIT's boundary inflation)."""
    if stat in ("S11", "S22"):
        return (vals == 0).mean(axis=1)
    if stat == "r":
        return (np.abs(vals) == 1).mean(axis=1)
    return np.array([np.nan] * len(sims))


def liu_lambda_variance_bias(n: int, true: float, width: float, epsilon: float = EPSILON) -> float:
    """Closed-form bias (Liu Prop. 1, eq. 6) of a variance conditioned on its domain at Liu's
    scale ``λ = Δ/(ε/3)``, i.e. without Holohan's correction."""
    upper = variance_domain_upper(n, width)
    lam = variance_sensitivity(n, width) / (epsilon / 3)
    b, _ = bounded_moments(np.array([min(true, upper)]), lam, interval(0.0, upper))
    return float(b[0])


def plot(res: dict, out: str, n_settings: int = len(SETTINGS)) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(STATS), n_settings, figsize=(4 * n_settings, 11), sharex=True)
    axes = np.atleast_2d(axes)
    colors = {"bounded": "C0", "truncated": "C3"}
    for si in range(n_settings):
        s11, s22, r = SETTINGS[si]
        for row, st in enumerate(STATS):
            ax = axes[row, si]
            for mech, col in colors.items():
                d = res[(si, mech, st)]
                ax.plot(d["n"], d["mean"], "-", color=col, label=f"{mech}: mean")
                ax.fill_between(d["n"], d["q"][0], d["q"][3], color=col, alpha=0.12)
                ax.plot(d["n"], d["q"][1], ":", color=col, lw=0.9)
                ax.plot(d["n"], d["q"][2], ":", color=col, lw=0.9)
            ax.axhline(float(res[(si, "bounded", st)]["truth"]), color="k", lw=1)
            if row == 0:
                ax.set_title(f"(S11, S22, r) = ({s11:g}, {s22:g}, {r:g})")
            if si == 0:
                ax.set_ylabel(st)
            if row == len(STATS) - 1:
                ax.set_xlabel("n")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Liu Fig. 1: sanitised 2×2 covariance, ε = 1 (ε/3 each); "
                 "band 2.5–97.5%, dotted 25/75%", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="liu_covariance.png", help="PNG to write")
    ap.add_argument("--quick", action="store_true", help="20 runs, 2 sample sizes (for tests)")
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    runs = 20 if args.quick else args.runs
    grid = (50, 800) if args.quick else N_GRID
    res = run(runs=runs, n_grid=grid, seed=args.seed)
    print(f"bias of the mean (and 2.5–97.5% width) over {runs} sanitisations; ε = 1, ε/3 each")
    for si, setting in enumerate(SETTINGS):
        print(f"\n(S11, S22, r) = {setting}")
        print(f"{'stat':>4} {'mech':>9} " + "".join(f"{'n=' + str(n):>18}" for n in grid))
        for st in STATS:
            for mech in MECHS:
                d = res[(si, mech, st)]
                bias = d["mean"] - d["truth"]
                width = d["q"][3] - d["q"][0]
                cells = "".join(f"{b:+9.3f} ({w:6.3f})" for b, w in zip(bias, width, strict=True))
                print(f"{st:>4} {mech:>9} {cells}")
        d = res[(si, "truncated", "S11")]
        print("  BIT share at 0 for S11: " + ", ".join(f"{v:.2f}" for v in d["at_bound"]))
        d = res[(si, "truncated", "r")]
        print("  BIT share at |r| = 1:   " + ", ".join(f"{v:.2f}" for v in d["at_bound"]))
    print("\nclosed-form bias of S11 (true 1) conditioned on its domain (Liu eq. 6):")
    for n in grid:
        b_liu = liu_lambda_variance_bias(n, 1.0, 6.0)
        upper = variance_domain_upper(n, 6.0)
        m = BoundedLaplace(EPSILON / 3, variance_sensitivity(n, 6.0), lower=0.0, upper=upper)
        print(f"  n={n:4d}: Liu λ=Δ/ε {b_liu:+.3f} (λ={variance_sensitivity(n, 6.0) * 3:.3f});"
              f" dpframe b* {m.bias(1.0):+.3f} (b*={m.scale:.3f})")
    plot(res, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
