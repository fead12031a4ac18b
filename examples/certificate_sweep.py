"""The certificate sweep of docs/audit.md: :func:`dpframe.mechanisms.audit.certify` on every
combination of 8 output domains × ε ∈ {0.01, 0.3, 1, 5} × Δ/width ∈ {0.05, 0.5, 1} ×
δ ∈ {0, 10⁻³} × the three Laplace mechanisms (bounded, truncated, plain).

``certify`` computes each mechanism's worst-case privacy loss analytically and re-checks it by
brute force; the sweep reports how many certificates are consistent (the two computations
agree) and passed, and the largest certified ε / claimed ε (the suite asserts ≤ 1 + 10⁻⁹ on a
third of these cells: ``tests/audit/test_certify.py``). "width" is the domain's extent,
capped at 10 (half-lines: 10). δ > 0 applies to the bounded mechanism only (the others do not
use it), so those cells are run for it alone. Deterministic; about 1–2 minutes on a loaded
core (``--quick``: ε ∈ {1} and Δ/width ∈ {0.5}, a few seconds).

Run: ``python examples/certificate_sweep.py [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Sequence

from dpframe.mechanisms import BoundedLaplace, Laplace, TruncatedLaplace, half_line, interval, union
from dpframe.mechanisms.audit import certify

DOMAINS = {
    "[0, 1]": interval(0.0, 1.0),
    "[-1e6, 1e6]": interval(-1e6, 1e6),
    "[1e9, 1e9 + 10]": interval(1e9, 1e9 + 10.0),
    "[0, inf)": half_line(lower=0.0),
    "(-inf, 0]": half_line(upper=0.0),
    "[0, 3] u [5, 10]": union([(0.0, 3.0), (5.0, 10.0)]),
    "[0, 0.1] u [0.2, 0.3] u [5, 10]": union([(0.0, 0.1), (0.2, 0.3), (5.0, 10.0)]),
    "[0, 1] u [100, 101]": union([(0.0, 1.0), (100.0, 101.0)]),
}
MECHANISMS = {"bounded": BoundedLaplace, "truncated": TruncatedLaplace, "laplace": Laplace}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    epsilons = (1.0,) if args.quick else (0.01, 0.3, 1.0, 5.0)
    ratios = (0.5,) if args.quick else (0.05, 0.5, 1.0)
    start = time.perf_counter()
    runs = consistent = passed = 0
    worst = 0.0
    for (dname, dom), eps, ratio, delta, (mname, cls) in itertools.product(
            DOMAINS.items(), epsilons, ratios, (0.0, 1e-3), MECHANISMS.items()):
        if delta > 0 and mname != "bounded":
            continue
        extent = dom.upper - dom.lower
        sens = ratio * (min(extent, 10.0) if math.isfinite(extent) else 10.0)
        cert = certify(cls(eps, sens, domain=dom, delta=delta) if delta
                       else cls(eps, sens, domain=dom))
        runs += 1
        consistent += cert.consistent
        passed += cert.passed
        worst = max(worst, cert.ratio)
        if not cert.passed:
            print(f"FAIL {mname} on {dname}, ε = {eps}, Δ = {sens:g}, δ = {delta}: {cert}")
    print(f"{runs} certificates: {consistent} consistent, {passed} passed; largest certified ε / "
          f"claimed ε = 1 + {worst - 1:.2e} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
