"""A repeated release reuses its plan (dpframe.release._pipeline._plan_repeated) only where every
argument the plan depends on is the same, with the same types."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe.provenance._protect import resolve
from dpframe.release import _pipeline as release


def _protected(kind: str = "pandas") -> object:
    rng = np.random.default_rng(3)
    data = {"x": rng.uniform(0, 10, 200), "y": rng.uniform(-5, 5, 200),
            "g": rng.integers(0, 3, 200)}
    frame = pd.DataFrame(data) if kind == "pandas" else pl.DataFrame(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(frame, epsilon=1e6, delta=1e-3, bounds={"x": (0, 10), "y": (-5, 5)},
                           keys={"g": [0, 1, 2]}, missing={"x": 5.0})


def _summary(planned: list[release.Planned]) -> list[tuple]:
    """What a release does with a plan: shares, ε, mechanisms and their calibration."""
    return [(p.name, p.share, p.epsilon, p.pure, dict(p.choices), p.plan.formulation,
             [(m.name, m.sensitivity, m.lower, m.upper, m.weight) for m in p.plan.measurements],
             [_described(mech) for mech in p.mechanisms])
            for p in planned]


def _described(mech: object) -> object:
    if mech is None:
        return None
    describe = getattr(mech, "describe", None)
    return describe() if callable(describe) else (type(mech).__name__, sorted(vars(mech)))


def _fresh(frame: object, queries: dict, **arguments: object) -> list[release.Planned]:
    facts = resolve(frame, None)
    request = release.check_request(queries, facts=facts, random_state=None,
                                    **{"delta": 0.0, "weights": None, "mechanism": "auto",
                                       "group_by": None, "keys": None, **arguments})
    return release._plan_all(facts.data, facts, request, queries)


QUERY_SETS = [
    {"m": dpf.mean("x")},
    {"m": dpf.mean("x"), "v": dpf.variance("y"), "n": dpf.count()},
    {"s": dpf.sum("y"), "h": dpf.histogram("x", bins=3)},
    {"q": dpf.quantile("x", 0.5)},
]


@settings(max_examples=60)
@given(which=st.integers(0, len(QUERY_SETS) - 1),
       epsilon=st.sampled_from([0.001, 0.1, 0.1 + 1e-12, 1.0, 30.0]),
       delta=st.sampled_from([0.0, 1e-7, 1e-6]),
       mechanism=st.sampled_from(["auto", "bounded", "truncated"]),
       grouped=st.booleans(), weighted=st.booleans())
def test_a_reused_plan_is_the_plan_made_afresh(which: int, epsilon: float, delta: float,
                                               mechanism: str, grouped: bool,
                                               weighted: bool) -> None:
    frame = PROTECTED
    queries = QUERY_SETS[which]
    arguments = {"epsilon": epsilon, "delta": delta if mechanism != "truncated" else 0.0,
                 "mechanism": mechanism,
                 "weights": list(range(1, len(queries) + 1)) if weighted else None,
                 "group_by": "g" if grouped else None}
    try:
        expected = _fresh(frame, queries, **arguments)
    except dpf.DPFrameError as exc:
        with pytest.raises(type(exc)):
            release.plan(frame, queries, **arguments)
        return
    for _ in range(2):  # the first call may make the plan, the second reuses it
        assert _summary(release.plan(frame, queries, **arguments)) == _summary(expected)


def test_keys_of_another_type_are_not_the_same_request() -> None:
    frame = _protected("polars")
    release.plan(frame, {"m": dpf.mean("x")}, epsilon=1.0, group_by="g", keys=[0, 1, 2])
    with pytest.raises(dpf.DPFrameError):  # booleans for an integer column: refused again
        release.plan(frame, {"m": dpf.mean("x")}, epsilon=1.0, group_by="g",
                     keys=[False, True, 2])


def test_copies_do_not_share_what_a_draw_may_change() -> None:
    frame = _protected()
    first = release.plan(frame, {"m": dpf.mean("x")}, epsilon=1.0)
    first[0].choices["m"] = "changed by a caller"
    first[0].mechanisms.append(None)
    again = release.plan(frame, {"m": dpf.mean("x")}, epsilon=1.0)
    assert "m" not in again[0].choices or again[0].choices["m"] != "changed by a caller"
    assert len(again[0].mechanisms) == len(again[0].plan.measurements)


def test_a_repeated_release_on_neighbours_gives_the_same_log_fields() -> None:
    logs = []
    for change in (None, 9.5):
        rng = np.random.default_rng(5)
        df = pd.DataFrame({"x": rng.uniform(0, 10, 100)})
        if change is not None:
            df.loc[0, "x"] = change
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = dpf.protect(df, epsilon=100, bounds={"x": (0, 10)}, missing={"x": 5.0})
        for _ in range(3):
            p.dp.mean("x", epsilon=0.5)
        log = p.dp.log
        logs.append(log.drop(columns=["time", "ledger_id"]).to_dict("list"))
    assert logs[0] == logs[1]


PROTECTED = _protected()
