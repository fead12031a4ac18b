"""What ``mechanism="auto"`` gives up by choosing on the worst case (issue 33, item 7).

``auto`` runs, per measurement, the mechanism with the smaller certified worst-case MSE over
the output domain D = [0, w] (:func:`dpframe.mechanisms.accuracy.choose_mechanism`): a choice
from public facts (ε, Δ, δ, D), never from the true value. At a given true value x the other
mechanism can be the more accurate one. This script measures by how much, from the closed-form
MSEs (``mechanism.mse(x)``, exact; no sampling, snapping excluded as in the choice itself):

    loss(x) = RMSE_auto(x) / RMSE_other(x),   reported: max over x in D, and where,

for Δ = 1 (the scale-free case: only w/Δ and ε matter), δ = 0, over a grid of widths and ε.
A loss of 1.00 means auto is pointwise no worse; above 1, auto is worse for true values near
the reported position (x/w: 0 = a bound, 0.5 = the middle).

Run: ``python -m benchmarks.auto_worst_case [--sweep]`` (a few seconds; prints a Markdown
table; ``--sweep`` adds the largest loss over a finer grid). Deterministic: closed forms.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np

from dpframe.mechanisms.accuracy import choose_mechanism
from dpframe.mechanisms.laplace import make_mechanism

WIDTHS = (1.0, 2.0, 5.0, 10.0, 30.0, 100.0, 1000.0)
EPSILONS = (0.1, 0.5, 1.0, 2.0)
POINTS = 2001
#: the sweep for the largest loss: widths from Δ to 1000Δ, ε from 0.05 to 4
SWEEP_WIDTHS = tuple(float(w) for w in np.geomspace(1.0, 1000.0, 31))
SWEEP_EPSILONS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0)


def loss(width: float, epsilon: float, points: int = POINTS) -> dict[str, float | str]:
    """auto's choice on [0, width] at Δ = 1 and the largest RMSE ratio against the other
    mechanism over ``points`` true values, with where it is attained (as x / width)."""
    choice = choose_mechanism(epsilon, 1.0, 0.0, width).name
    other = "truncated" if choice == "bounded" else "bounded"
    x = np.linspace(0.0, width, points)
    mse = {name: np.asarray(make_mechanism(name, epsilon=epsilon, sensitivity=1.0, lower=0.0,
                                           upper=width).mse(x), dtype=float)
           for name in (choice, other)}
    ratio = np.sqrt(mse[choice] / mse[other])
    i = int(np.argmax(ratio))
    worst = {name: math.sqrt(float(v.max())) for name, v in mse.items()}
    return {"auto": choice, "max_loss": float(ratio[i]), "at": float(x[i] / width),
            "worst_case_gain": worst[other] / worst[choice]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=POINTS)
    parser.add_argument("--sweep", action="store_true",
                        help="also search a finer grid for the largest loss (about 20 s)")
    args = parser.parse_args(argv)
    print("| w/Δ | ε | auto picks | largest RMSE ratio to the other | at x/w | "
          "worst-case RMSE ratio (other / auto) |")
    print("|---|---|---|---|---|---|")
    for width in WIDTHS:
        for eps in EPSILONS:
            r = loss(width, eps, args.points)
            print(f"| {width:g} | {eps:g} | {r['auto']} | {r['max_loss']:.3f} | "
                  f"{r['at']:.2f} | {r['worst_case_gain']:.3f} |")
    if args.sweep:
        cells = [(loss(w, e, args.points), w, e) for w in SWEEP_WIDTHS for e in SWEEP_EPSILONS]
        r, w, e = max(cells, key=lambda c: float(c[0]["max_loss"]))
        losing = sum(float(c[0]["max_loss"]) > 1.0 for c in cells)
        print(f"\nsweep ({len(SWEEP_WIDTHS)} widths in [1, 1000]·Δ × ε in {SWEEP_EPSILONS}): "
              f"auto is pointwise worse somewhere in {losing} of {len(cells)} cells; the "
              f"largest RMSE ratio is {float(r['max_loss']):.3f} (w/Δ = {w:.3g}, ε = {e:g}, "
              f"auto = {r['auto']}, at x/w = {float(r['at']):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
