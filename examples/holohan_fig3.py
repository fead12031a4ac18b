"""Holohan et al. (2019), Fig. 3: how much the bounded Laplace mechanism has to weaken its
underlying Laplace distribution.

To be ε-DP on an interval ``[l, u]`` (δ = 0), the bounded Laplace mechanism uses the scale ``b*``
of Holohan's Thm 3.5 / §4 fixed point, ``b* = ΔQ / (ε − ln ΔC(b*))``. The Laplace distribution it
conditions is therefore ``ε'``-DP with ``ε' = ΔQ / b* = ε − ln ΔC(b*) ≤ ε``. The figure plots
``ε/ε'`` against ``ΔQ`` and ``ε`` for ``u − l = 1``: it is 1 when ``ΔQ = u − l`` (Cor. 4.5) and
tends to 2 as ``ΔQ`` and ``ε`` both go to 0 (Holohan §3.2, "2ε' = ε in the limiting case").

Run: ``python examples/holohan_fig3.py [--out holohan_fig3.png] [--quick]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from dpframe.mechanisms.scales import holohan_scale

WIDTH = 1.0  # u - l
DELTA = 0.0


def ratio(epsilon: float, sensitivity: float, width: float = WIDTH) -> float:
    """``ε/ε'`` with ``ε' = ΔQ / b*`` (Holohan §3.2 discussion of Thm 3.5)."""
    b_star = holohan_scale(float(epsilon), DELTA, float(sensitivity), float(width))
    return float(epsilon) / (float(sensitivity) / b_star)


def compute(
    sensitivities: Sequence[float], epsilons: Sequence[float]
) -> np.ndarray:
    """``ratio[i, j] = ε_j / ε'`` at ``ΔQ = sensitivities[i]``."""
    return np.array([[ratio(e, s) for e in epsilons] for s in sensitivities])


def run(quick: bool = False) -> dict[str, np.ndarray]:
    """The grid of the figure (coarse with ``quick``)."""
    k = 8 if quick else 60
    sens = np.linspace(0.01, 1.0, k)
    eps = np.logspace(-2, 1, k)
    return {"sensitivity": sens, "epsilon": eps, "ratio": compute(sens, eps)}


def table() -> tuple[list[float], list[float], np.ndarray]:
    """A few printed values."""
    sens = [0.01, 0.1, 0.25, 0.5, 0.9, 1.0]
    eps = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0]
    return sens, eps, compute(sens, eps)


def plot(res: dict[str, np.ndarray], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    s, e, r = res["sensitivity"], res["epsilon"], res["ratio"]
    cs = ax1.contourf(s, e, r.T, levels=np.linspace(1.0, 2.0, 21), cmap="viridis")
    ax1.set_yscale("log")
    ax1.set_xlabel("ΔQ  (u − l = 1)")
    ax1.set_ylabel("ε")
    ax1.set_title("ε / ε'  (bounded Laplace, δ = 0)")
    fig.colorbar(cs, ax=ax1)
    for eps in (0.01, 0.1, 0.5, 1.0, 2.0, 5.0):
        ax2.plot(s, [ratio(eps, x) for x in s], label=f"ε = {eps:g}")
    ax2.set_xlabel("ΔQ  (u − l = 1)")
    ax2.set_ylabel("ε / ε'")
    ax2.set_ylim(0.95, 2.05)
    ax2.axhline(2.0, color="grey", lw=0.8, ls=":")
    ax2.legend(fontsize=8)
    ax2.set_title("Holohan et al. Fig. 3 (dpframe's b*)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="holohan_fig3.png", help="PNG to write")
    ap.add_argument("--quick", action="store_true", help="coarse grid (for tests)")
    args = ap.parse_args(argv)
    sens, eps, r = table()
    print("ε/ε' for u − l = 1, δ = 0 (rows ΔQ, columns ε)")
    print("ΔQ \\ ε  " + "".join(f"{e:>8g}" for e in eps))
    for i, s in enumerate(sens):
        print(f"{s:<8g} " + "".join(f"{v:8.4f}" for v in r[i]))
    print(f"limit ΔQ = ε = 1e-4: {ratio(1e-4, 1e-4):.5f} (Holohan: → 2)")
    plot(run(args.quick), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
