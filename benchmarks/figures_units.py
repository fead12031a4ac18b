"""The privacy-unit figures of ``python -m benchmarks`` (``docs/frames.md``, *Cost*): a DP mean
and a group-by mean by ``visit_type`` on ``dpframe.datasets.visits(300_000)`` (about 1 M
visits) protected with ``privacy_unit="patient_id", max_rows_per_unit=5,
max_groups_per_unit=2``, against the same query on the same data protected without a privacy
unit (what the per-release bounding — ranking every patient's rows — adds)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Literal

from benchmarks.figures_core import Sizes, warm

EPS = 1.0
Engine = Literal["pandas", "polars"]
ENGINES: tuple[tuple[Engine, str], ...] = (("pandas", "pandas"), ("polars", "Polars eager"))


def _protected(engine: Engine, patients: int, unit: bool) -> Any:
    import dpframe as dpf
    from dpframe.datasets import VISITS_BOUNDS, VISITS_KEYS, visits

    frame = visits(patients, backend=engine)
    extra: dict[str, Any] = {"privacy_unit": "patient_id", "max_rows_per_unit": 5,
                             "max_groups_per_unit": 2} if unit else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(frame, epsilon=1e15, bounds=VISITS_BOUNDS, keys=VISITS_KEYS,
                           missing="drop", **extra)


def _call(pf: Any, family: str) -> Callable[[], Any]:
    if family == "mean":
        return lambda: pf.dp.mean("cost", epsilon=EPS)
    return lambda: pf.dp.groupby("visit_type").mean("cost", epsilon=EPS)


def _unit(engine: Engine, family: str) -> Callable[[Sizes], dict[str, Any]]:
    def measure(s: Sizes) -> dict[str, Any]:
        patients = 300_000 if s.large >= 1_000_000 else 2_000
        with_unit, without = (_protected(engine, patients, u) for u in (True, False))
        out = warm({"dp": _call(with_unit, family), "native": _call(without, family)},
                   s.large_rounds)
        return out | {"patients": patients}
    return measure


def figures() -> dict[str, tuple[str, Callable[[Sizes], dict[str, Any]]]]:
    return {f"unit.{f}.{e}.300k": (f"{what} with a privacy unit (k = 5), {name}, visits("
                                   "300,000) / the same without a privacy unit",
                                   _unit(e, f))
            for e, name in ENGINES
            for f, what in (("mean", "DP mean"), ("groupby", "group-by mean by visit_type"))}
