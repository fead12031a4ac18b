"""What δ buys the bounded Laplace mechanism, and where ``mechanism="auto"`` spends it.

δ enters Holohan's bounded mechanism only through ``ε − ln(1 − δ)`` (its scale condition,
Holohan et al., Thm 3.5, eq. 3.1), so at δ ≪ ε it lowers the noise by about δ/ε — less on
narrow domains, where the conditioned law is nearly flat over the domain whatever its scale.
``"auto"`` therefore runs the bounded mechanism at δ only when its certified worst-case RMSE
is at least ``DELTA_MIN_GAIN`` (1 %) below the best pure ε-DP candidate's (truncated, plain
Laplace, or bounded at δ = 0), and otherwise uses and charges no δ
(:func:`dpframe.mechanisms.choose_mechanism`; docs/privacy.md, I.5).

This script prints, for Δ = 1, domains of width Δ and 10Δ and the real line and δ/ε from 10⁻⁵
to 0.1, the relative worst-case RMSE gain of spending δ and auto's choice. Closed forms,
deterministic, no data (a second or two).

Run: ``python examples/auto_delta.py [--epsilon 0.1 1]``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from dpframe.mechanisms import choose_mechanism

#: output domains [0, w] (None: the real line, e.g. the sum inside a private-size mean)
WIDTHS: tuple[float | None, ...] = (1.0, 10.0, None)
RATIOS = (1e-5, 1e-3, 1e-2, 0.1)


def gain(epsilon: float, width: float | None, delta: float) -> tuple[float, str, float]:
    """The relative worst-case RMSE gain of the bounded mechanism at ``delta`` over the best
    pure candidate, and auto's choice (name, δ used)."""
    upper = width
    lower = None if width is None else 0.0
    choice = choose_mechanism(epsilon, 1.0, lower, upper, delta)
    brackets = choice.worst_case_mse
    spent = brackets["bounded"].upper
    best_pure = min(b.lower for n, b in brackets.items() if n != "bounded")
    return 1.0 - math.sqrt(spent / best_pure), choice.name, choice.delta


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[0.1, 1.0])
    args = parser.parse_args(argv)
    print("| ε | domain | δ/ε | RMSE gain of spending δ | auto runs | δ charged |")
    print("|---|---|---|---|---|---|")
    for eps in args.epsilon:
        for width in WIDTHS:
            for ratio in RATIOS:
                g, name, used = gain(eps, width, ratio * eps)
                domain = "ℝ" if width is None else f"[0, {width:g}]"
                shown = f"{100 * g:.3g} %" if g > 0 else "none (a pure one is better)"
                print(f"| {eps:g} | {domain} | {ratio:g} | {shown} | {name} | {used:.3g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
