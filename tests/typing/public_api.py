"""The public API's types as a type checker sees them, checked by mypy in CI (pyproject's
``[tool.mypy] files``; the code never runs): a scalar statistic is a ``float``, with ``ci=`` an
``Estimate``; mechanism names are a ``Literal``, so an unknown one is a type error (the
``type: ignore`` below would be reported unused if it were not)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    import dpframe as dpf
    from dpframe.frames.results import Estimate

    pf = dpf.protect(pd.DataFrame({"x": [1.0, 2.0]}), epsilon=1.0, bounds={"x": (0, 5)})
    twice: float = dpf.dp(pf).mean("x", epsilon=0.1) * 2
    both: Estimate = dpf.dp(pf).mean("x", epsilon=0.1, ci=0.9)
    shifted: float = both + 1  # an Estimate is a number: arithmetic gives floats
    halved: float = 2 * both / 4
    shown: str = f"{both:.2f}"
    rows: float = dpf.dp(pf).count(epsilon=0.1) + 1
    spread: float = dpf.dp(pf).std("x", epsilon=0.1, mechanism="truncated")
    dpf.dp(pf).mean("x", epsilon=0.1, mechanism="gaussian")  # type: ignore[call-overload]
    # builders of every statistic type as the queries a release takes
    cells: dpf.query.statistics.Query = dpf.histogram("x", bins=4)
    keyed: dpf.query.statistics.ValueCounts = dpf.value_counts("x", keys=[1, 2])
    entries: dpf.query.statistics.CovarianceEntries = dpf.corr(["x", "y"])
    dpf.dp(pf).release({"h": cells, "v": keyed, "c": entries, "s": dpf.cov(["x", "y"])},
                       epsilon=0.1, ci=0.9)
    dpf.dp(pf).groupby("x").histogram("x", bins=3, epsilon=0.1, mechanism="laplace")
    dpf.histogram("x", edges=[0, 1])  # type: ignore[call-arg]
    shares: dpf.query.statistics.KeyProportions = dpf.proportions("x")
