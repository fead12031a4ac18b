"""Every sensitivity under both neighbour definitions, by brute force (issue 33).

Small data sets and *all* their neighbours under the protected definition — replace-one: each
row replaced by each candidate row; add/remove: each candidate row added, each row removed —
through the real pipeline (:func:`~dpframe.release._pipeline.exact_measurements`: the plan
the release runs, the engine's exact aggregates, the sensitivity the log records). For every
measurement the exact statistic moves by at most the logged sensitivity (quantiles: every
bin's rank distance, the exponential mechanism's score); per group, a replaced row changes at
most two groups and an added or removed one at most one (hence ε/2 and ε per group). Under
add/remove the plan — sensitivities, domains, scales, ε, the whole log but the time — is the
same on data sets of different sizes (n is private), and neighbouring releases have the same
outcome class (same columns, no exception or warning).
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.query.statistics import Query
from dpframe.release._pipeline import exact_measurements, plan, plan_release

BOUNDS = {"x": (-1.0, 3.0), "y": (0.0, 2.0)}  # x straddles 0: max(|l|,|u|) = 3 < w = 4
KEYS = {"g": ["a", "b"]}
#: rows that reach every extreme: each end of each bound, a group change, a missing value
CANDIDATES = [(-1.0, 0.0, "a"), (3.0, 2.0, "b"), (3.0, 0.0, "a"), (-1.0, 2.0, "b"),
              (math.nan, 1.0, "a")]
BASES = [[(-1.0, 0.0, "a"), (1.0, 2.0, "b"), (3.0, 1.0, "a")],
         [(3.0, 2.0, "b"), (3.0, 2.0, "b")]]
QUANTILE_BINS = 4


def _ungrouped() -> dict[str, Query]:
    return {"n": dpf.count(), "s": dpf.sum("x"), "m": dpf.mean("x"), "v": dpf.variance("x"),
            "h": dpf.histogram("x", bins=2), "c": dpf.corr(["x", "y"]),
            "q": dpf.quantile("x", [0.25, 0.5], bins=QUANTILE_BINS)}


def _grouped() -> dict[str, Query]:
    return {"n": dpf.count(), "s": dpf.sum("x"), "m": dpf.mean("x"), "v": dpf.variance("x"),
            "q": dpf.median("x", bins=QUANTILE_BINS)}


def _protect(rows: list[tuple[float, float, str]], neighbours: str, **kw: object) -> object:
    frame = pd.DataFrame(rows, columns=["x", "y", "g"])
    extra = {"max_rows": 16} if neighbours == "add_remove" else {}
    return dpf.protect(frame, epsilon=1e6, delta=1e-3, bounds=BOUNDS, missing="lower",
                       neighbours=neighbours, **{"keys": KEYS, **extra, **kw})


def _neighbours(rows: list, neighbours: str):
    if neighbours == "replace":
        for i, new in itertools.product(range(len(rows)), CANDIDATES):
            yield [*rows[:i], new, *rows[i + 1:]]
    else:
        for new in CANDIDATES:
            yield [*rows, new]
        for i in range(len(rows)):
            yield rows[:i] + rows[i + 1:]


_CACHE: dict = {}


def _exact(rows: list, neighbours: str, grouped: bool) -> dict:
    key = (repr(rows), neighbours, grouped)
    if key not in _CACHE:
        pf = _protect(rows, neighbours)
        _CACHE[key] = (exact_measurements(pf, _grouped(), group_by="g", keys=KEYS["g"])
                       if grouped else exact_measurements(pf, _ungrouped()))
    return _CACHE[key]


def _rank_distances(counts: np.ndarray, levels: list[float]) -> np.ndarray:
    """``d_j = max(L_j − t, t − U_j, 0)`` per level and bin (``t = q·n``), from bin counts."""
    counts = np.rint(counts).astype(int)
    n = int(counts.sum())
    below = np.concatenate([[0], np.cumsum(counts)[:-1]])
    upto = np.cumsum(counts)
    return np.array([[float(max(Fraction(int(lo)) - Fraction(q) * n,
                                Fraction(q) * n - Fraction(int(hi)), Fraction(0)))
                      for lo, hi in zip(below, upto, strict=True)] for q in levels])


def _moved(name: tuple[str, str], a: np.ndarray, b: np.ndarray, levels: list[float],
           sensitivity: float) -> np.ndarray:
    """Per group and cell, how far the measurement moved in units of its sensitivity (a
    quantile's: every level's largest rank-distance move over that level's own Δ, 1 under
    replacement, max(q, 1 − q) under add/remove, which the logged Δ is the largest of)."""
    if name[1] != "quantile":
        return np.abs(a - b).reshape(a.shape[0], -1) / sensitivity
    add_remove = sensitivity < 1.0
    each = np.array([max(q, 1 - q) if add_remove else 1.0 for q in levels])
    return np.array([[(np.abs(_rank_distances(a[g], levels) - _rank_distances(b[g], levels))
                       .max(axis=1) / each).max()] for g in range(a.shape[0])])


def _shares(pf: object, grouped: bool) -> dict:
    """Each measurement's factor of the query's ε: its weight times the per-group (grouped)
    or per-cell (ungrouped) share of the plan."""
    kw = {"group_by": "g", "keys": KEYS["g"]} if grouped else {}
    return {(p.name, m.name): m.weight * p.plan.epsilon_factor(grouped)
            for p in plan(pf, _grouped() if grouped else _ungrouped(), epsilon=1.0, **kw)
            for m in p.plan.measurements}


@pytest.mark.parametrize("grouped", [False, True], ids=["ungrouped", "per group"])
@pytest.mark.parametrize("neighbours", ["replace", "add_remove"])
def test_every_measurement_moves_at_most_its_logged_sensitivity(neighbours, grouped):
    """Each measurement moves by at most its logged Δ in every cell it releases (a per-group
    quantile under replacement: two add/remove steps, at most 2Δ); and the privacy loss of
    the whole query, Σ over measurements, groups and cells of ε-share × move/Δ, is at most its
    ε — the composition each definition claims (ε/2 per group or histogram cell under
    replacement, the whole ε under add/remove)."""
    levels = [0.25, 0.5] if not grouped else [0.5]
    worst: dict = {}
    most_groups = 0
    for base in BASES:
        ref = _exact(base, neighbours, grouped)
        shares = _shares(_protect(base, neighbours), grouped)
        for other in _neighbours(base, neighbours):
            got = _exact(other, neighbours, grouped)
            assert got.keys() == ref.keys()
            changed = np.zeros(2 if grouped else 1, dtype=bool)
            loss: dict[str, float] = {}
            for name, (values, sensitivity) in ref.items():
                assert got[name][1] == sensitivity  # the plan does not depend on the data
                moved = _moved(name, values, got[name][0], levels, sensitivity)
                two_steps = grouped and neighbours == "replace" and name[1] == "quantile"
                assert np.all(moved <= (2.0 if two_steps else 1.0) + 1e-12), (name, moved)
                worst[name] = max(worst.get(name, 0.0), float(moved.max()) * sensitivity)
                loss[name[0]] = loss.get(name[0], 0.0) + shares[name] * float(moved.sum())
                changed |= moved.max(axis=1) > 0
            assert max(loss.values()) <= 1.0 + 1e-9, loss
            most_groups = max(most_groups, int(changed.sum()))
    if grouped:  # a replaced row can change two groups (ε/2 each), an added one one (ε)
        assert most_groups == (2 if neighbours == "replace" else 1)
    sens = {name: s for name, (_, s) in ref.items()}
    if neighbours == "add_remove":  # the add/remove figures, attained
        assert sens[("n", "count")] == worst[("n", "count")] == 1.0
        assert sens[("s", "sum")] == worst[("s", "sum")] == 3.0  # max(|l|, |u|), not w
        assert sens[("m", "sum")] == worst[("m", "sum")] == 2.0  # w/2 (centred)
        assert sens[("v", "sum_sq")] == worst[("v", "sum_sq")] == 4.0  # (w/2)²
        if not grouped:
            assert sens[("h", "histogram")] == worst[("h", "histogram")] == 1.0
            assert sens[("c", "sum_prod[x,y]")] == 2.0 >= worst[("c", "sum_prod[x,y]")]
        assert sens[("q", "quantile")] == (0.75 if not grouped else 0.5)  # max(q, 1 − q)
        assert shares[("n", "count")] == 1.0  # the whole ε per group
        assert grouped or shares[("h", "histogram")] == 1.0  # and per histogram cell
    else:
        assert (("n", "count") in sens) == grouped  # ungrouped, the public n: no noise
        assert sens[("s", "sum")] == 4.0  # w
        assert shares[("n", "count")] == 0.5 if grouped else shares[("h", "histogram")] == 0.5


def _plan_facts(frame: object, queries: dict, **kw: object) -> list:
    out = []
    for p in plan(frame, queries, epsilon=1.0, **kw):
        out.append((p.name, p.epsilon, p.plan.formulation, p.plan.group_share,
                    p.plan.cell_share))
        for m, mech in zip(p.plan.measurements, p.mechanisms, strict=True):
            out.append((m.name, m.sensitivity, m.lower, m.upper, m.weight, m.magnitude,
                        None if mech is None else (mech.name, mech.scale, mech.epsilon,
                                                   mech.domain.lower, mech.domain.upper,
                                                   getattr(mech, "grid", None))))
    return out


def test_add_remove_plans_logs_and_outcomes_do_not_depend_on_n():
    small, large = BASES[1], BASES[0] + [(math.nan, 1.0, "b")] * 5
    frames = [_protect(rows, "add_remove") for rows in (small, large)]
    assert _plan_facts(frames[0], _ungrouped()) == _plan_facts(frames[1], _ungrouped())
    assert (_plan_facts(frames[0], _grouped(), group_by="g", keys=["a", "b"])
            == _plan_facts(frames[1], _grouped(), group_by="g", keys=["a", "b"]))
    rules = [plan_release(_protect(rows, "add_remove", keys=None), {"n": dpf.count()},
                          epsilon=1.0, delta=1e-6, group_by="g")[1]
             for rows in (small, large)]  # keys selected from the data: the threshold
    assert rules[0].threshold == rules[1].threshold and rules[0].neighbours == "add/remove"
    logs, tables = [], []
    for pf in frames:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same outcome class: no warning, no exception
            tables.append(pf.dp.release(_ungrouped(), epsilon=1.0, random_state=3, ci=0.9))
            pf.dp.groupby("g").describe(epsilon=1.0, random_state=3)
            pf.dp.value_counts("g", epsilon=1.0, random_state=3)
        log = pf.dp.log.drop(columns=["time", "ledger_id"])
        logs.append(log)
    assert list(tables[0].columns) == list(tables[1].columns)
    pd.testing.assert_frame_equal(logs[0], logs[1])
    assert set(logs[0]["neighbours"]) == {"add_remove"} and set(logs[0]["size"]) == {"private"}


def test_add_remove_refusals_do_not_depend_on_n_and_name_the_fix():
    for rows in (BASES[1], BASES[0]):
        pf = _protect(rows, "add_remove", max_rows=None)
        pf.dp.count(epsilon=0.5, random_state=1)  # counts need no declared bound
        with pytest.raises(dpf.PrivateSizeError, match="max_rows="):
            pf.dp.mean("x", epsilon=0.5)
        with pytest.raises(dpf.PrivateSizeError, match="add_remove"):
            _ = pf.dp.size
        assert not pf.dp.is_size_public
        assert pf.dp.budget.epsilon_spent == 0.5
