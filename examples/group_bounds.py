"""Per-group means and standard deviations on small groups: how often they sit on a bound.

A group's size is private, so ``frame.dp.groupby(g).mean(c)`` is a noisy (centred) sum over
a noisy count, and ``std`` comes from noisy moments; the ratio is clamped into the
statistic's domain ([lower, upper] for a mean, [0, (upper − lower) / 2] for a std).
Small groups and a wide domain make the clamp bite: a std released as exactly 0, a mean
exactly on a bound. This script measures how often, for the two mechanisms.

Data: penguin-sized groups (the species counts of the Palmer penguins table: 152, 68 and 124
rows), with a body mass drawn per group from a normal distribution (means 3700, 3733 and
5076 g, standard deviations 459, 384 and 504 g, rounded to 25 g), on the public bounds
[2500, 6500] g. Synthetic: nothing is downloaded. Each of ``runs`` releases spends ε on the
group-by mean and ε on the group-by std (one statistic per release), with the bounded
(conditioned) and the truncated (clamped) Laplace mechanism.

These are the figures quoted in ``README.md`` ("Which mechanism") and ``docs/frames.md``
("Per-group means and variances put mass on the bounds").

Run: ``python examples/group_bounds.py [--runs 2000] [--epsilon 1] [--seed 0]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import pandas as pd

import dpframe as dpf

GROUPS = {"Adelie": (152, 3700.0, 459.0), "Chinstrap": (68, 3733.0, 384.0),
          "Gentoo": (124, 5076.0, 504.0)}
BOUNDS = (2500.0, 6500.0)
MECHANISMS = ("bounded", "truncated")


def penguins(seed: int = 0) -> pd.DataFrame:
    """The synthetic table: one row per bird, ``species`` and ``body_mass_g``."""
    rng = np.random.default_rng(seed)
    parts = [pd.DataFrame({"species": name,
                           "body_mass_g": (rng.normal(mu, sd, n) / 25).round() * 25})
             for name, (n, mu, sd) in GROUPS.items()]
    return pd.concat(parts, ignore_index=True)


def measure(runs: int = 2000, epsilon: float = 1.0, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per mechanism: the share of (release, group) cells with a std of exactly 0 and with a
    mean exactly on a bound, over ``runs`` releases of each (noise seeded from ``seed``)."""
    lo, hi = BOUNDS
    out: dict[str, dict[str, float]] = {}
    for mech in MECHANISMS:
        pf = dpf.protect(penguins(seed), epsilon=2 * epsilon * runs, missing="lower",
                         bounds={"body_mass_g": BOUNDS}, keys={"species": list(GROUPS)})
        grouped = pf.dp.groupby("species")
        noise = np.random.default_rng([seed, MECHANISMS.index(mech)])
        stds, means = [], []
        for _ in range(runs):
            stds.append(grouped.std("body_mass_g", epsilon=epsilon, mechanism=mech,
                                    random_state=noise)["std"].to_numpy())
            means.append(grouped.mean("body_mass_g", epsilon=epsilon, mechanism=mech,
                                      random_state=noise)["mean"].to_numpy())
        s, m = np.concatenate(stds), np.concatenate(means)
        out[mech] = {"std_zero": float(np.mean(s == 0.0)),
                     "mean_on_bound": float(np.mean((m == lo) | (m == hi)))}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = ", ".join(f"{name} {n}" for name, (n, _, _) in GROUPS.items())
    print(f"groups: {sizes} rows; body mass on [{BOUNDS[0]:g}, {BOUNDS[1]:g}] g; "
          f"ε = {args.epsilon:g} per statistic; {args.runs} releases each")
    for mech, shares in measure(args.runs, args.epsilon, args.seed).items():
        print(f"{mech:<10} std exactly 0: {shares['std_zero']:6.1%}   "
              f"mean on a bound: {shares['mean_on_bound']:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
