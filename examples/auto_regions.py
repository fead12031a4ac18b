"""Where ``mechanism="auto"`` picks the bounded or the truncated Laplace mechanism
(docs/privacy.md, "The choice"; Holohan et al. 2019, Fig. 3).

For Δ = 1, δ = 0 and the domain [0, w], prints every candidate's certified worst-case RMSE
``sqrt(sup_x mse(x))`` (the upper end of :func:`dpframe.mechanisms.accuracy.worst_case_mse`'s
bracket, from the closed-form MSEs; no sampling) and the mechanism ``choose_mechanism``
returns. Deterministic; under a second.

Run: ``python examples/auto_regions.py``.
"""

from __future__ import annotations

import math

from dpframe.mechanisms.accuracy import choose_mechanism

#: (ε, widths) rows of the table quoted in docs/privacy.md
GRID = ((1.0, (1.0, 1.5, 10.0, 30.0, 100.0)), (0.1, (1.0, 4.0, 10.0)), (4.0, (1.0, 10.0)))


def main() -> int:
    print("| ε | width | worst-case RMSE bounded | truncated | auto picks |")
    print("|---|---|---|---|---|")
    for epsilon, widths in GRID:
        for width in widths:
            choice = choose_mechanism(epsilon, 1.0, 0.0, width)
            rmse = {name: math.sqrt(bracket.upper)
                    for name, bracket in choice.worst_case_mse.items()}
            print(f"| {epsilon:g} | {width:g} | {rmse.get('bounded', math.nan):.3g} | "
                  f"{rmse.get('truncated', math.nan):.3g} | {choice.name} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
