"""histogram and value_counts (issue 12) through the one pipeline: a verified row-wise bin
index and a group-by count over public bins or keys (ε/2 per bin: parallel composition)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.frames.bins import BIN
from dpframe.release._pipeline import exact_measurements

EDGES = [0.0, 18.0, 65.0, 100.0]


def data(first: float = 30.0) -> dict[str, list]:
    ages = [first, 5.0, 17.9, 18.0, 64.9, 65.0, 99.0, 150.0, -3.0, math.nan]
    return {"age": ages, "g": ["a", "b", "c", "a", "b", "c", "a", "b", "c", "zzz"]}


def test_histogram_counts_bins_with_ends_and_missing(constructor):
    pf = dpf.protect(constructor(data()), epsilon=1e6, bounds={"age": (0.0, 100.0)})
    table = pf.dp.histogram("age", edges=EDGES, epsilon=1e5, random_state=1)
    # -3 -> first bin, 150 -> last bin, NaN dropped (missing rule "drop")
    assert constructor.values(table, "count").tolist() == [3.0, 3.0, 3.0]
    assert constructor.values(table, "bin_lower").tolist() == EDGES[:-1]
    filled = dpf.protect(constructor(data()), epsilon=1e6, bounds={"age": (0.0, 100.0)},
                         missing={"age": 70.0})
    t2 = filled.dp.histogram("age", edges=EDGES, epsilon=1e5, random_state=1)
    assert constructor.values(t2, "count").tolist() == [3.0, 3.0, 4.0]


def test_histogram_counts_are_integers_and_can_add_up_to_a_total(constructor):
    pf = dpf.protect(constructor(data()), epsilon=10.0, bounds={"age": (0.0, 100.0)})
    table = pf.dp.histogram("age", edges=EDGES, epsilon=0.5, total=9)
    counts = constructor.values(table, "count")
    assert counts.sum() == 9 and all(float(c).is_integer() and c >= 0 for c in counts)


@pytest.mark.parametrize(("a", "b"), [(30.0, 70.0), (math.nan, 5.0), (-1e308, 1e308)])
def test_histogram_neighbours_change_at_most_two_bins_by_one(a, b):
    exact = []
    for first in (a, b):
        pf = dpf.protect(pd.DataFrame(data(first)), epsilon=1.0,
                         bounds={"age": (0.0, 100.0)})
        derived = pf
        binned = derived.dp._binned("age", EDGES, None)
        exact.append(exact_measurements(binned, {"c": dpf.count()}, group_by=BIN,
                                        keys=[0, 1, 2]))
    (values, sens), (other, _) = exact[0][("c", "count")], exact[1][("c", "count")]
    diff = np.abs(values - other)
    assert sens == 1.0 and diff.max() <= 1 and np.count_nonzero(diff) <= 2


def test_histogram_and_value_counts_refuse_bad_arguments_before_spending():
    pf = dpf.protect(pd.DataFrame(data()), epsilon=1.0, bounds={"age": (0.0, 100.0)},
                     keys={"g": ["a", "b", "c"]})
    for edges in ([1.0], [0.0, 0.0, 1.0], [0.0, math.inf], "abc", [0, "1"], [0, True]):
        with pytest.raises(dpf.ParameterError, match="edges"):
            pf.dp.histogram("age", edges=edges, epsilon=0.1)
    with pytest.raises(dpf.ParameterError, match="total"):
        pf.dp.value_counts("g", epsilon=0.1, total=-1)
    assert pf.dp.budget.epsilon_spent == 0.0


def test_value_counts_over_declared_keys(constructor):
    pf = dpf.protect(constructor(data()), epsilon=1e6, bounds={"age": (0.0, 100.0)},
                     keys={"g": ["a", "b", "c", "never"]})
    table = pf.dp.value_counts("g", epsilon=1e5, random_state=0, ci=0.9)
    assert constructor.column(table, "g") == ["a", "b", "c", "never"]  # "zzz" never appears
    assert constructor.values(table, "count").tolist() == [3.0, 3.0, 3.0, 0.0]
    assert (constructor.values(table, "count_lower") <= constructor.values(table, "count")).all()


def test_public_edges_read_plain_numbers_as_the_item_check_does():
    """Edges that are all exactly float or int are read without a check per edge; the
    list is the one the item-by-item check gives (numpy numbers, -0.0), and what it refuses
    (a bool, an int beyond the doubles) is still refused. Equal-width edges kept per
    (bounds, bins) are a new list on every call."""
    from fractions import Fraction

    from dpframe.errors import ParameterError
    from dpframe.frames.bins import equal_width_edges, public_edges

    plain = public_edges([-0.0, 1, 2.5])
    assert plain == public_edges(np.array([0.0, 1.0, 2.5])) == [0.0, 1.0, 2.5]
    assert math.copysign(1.0, plain[0]) == 1.0
    assert public_edges([Fraction(1, 2), 1]) == [0.5, 1.0]
    for bad in ([True, 2], [0, 10**400], [0, 0], [1.0], [0.0, math.nan]):
        with pytest.raises(ParameterError):
            public_edges(bad)
    first = equal_width_edges(0, 100, 10)
    first.append(1e9)
    assert equal_width_edges(0.0, 100.0, 10) == [float(e) for e in range(0, 101, 10)]


def test_a_float64_edge_array_reads_as_its_items_one_by_one() -> None:
    """public_edges' one-call path for a float64 array gives the floats (and refusals) the
    item-by-item check gives the same numbers as np.float64 items."""
    import math

    import numpy as np

    from dpframe.errors import ParameterError
    from dpframe.frames.bins import public_edges

    for values in ([-0.0, 5e-324, 1.0, 1.7976931348623157e308], [-1e300, -0.0, 2.5],
                   [0.0, math.nan], [1.0, 0.0], [3.0], [0.0, math.inf]):
        array = np.array(values, dtype=np.float64)
        items = [np.float64(v) for v in values]
        outcomes = []
        for edges in (array, items):
            try:
                got = public_edges(edges)
                outcomes.append([(v, math.copysign(1.0, v), type(v)) for v in got])
            except ParameterError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]


class _Rules:
    """The one fact :func:`~dpframe.frames.bins.bin_step` reads: the missing-value rules."""

    def __init__(self, missing: dict[str, float]) -> None:
        self.missing = missing


@pytest.mark.parametrize("fill", [None, 50.0])
@pytest.mark.parametrize("dtype", ["Float64", "Int64", "Float32"])
def test_the_bin_frame_verified_once_is_the_one_verified_against_the_whole_schema(
        monkeypatch, dtype, fill):
    """bin_step keeps the verified frame of its search per (column, dtype, fill bin), public
    facts only: what it gives is what verifying the expression against the frame's whole
    schema gives, with the search over this call's edges (other edges: the same kept frame)."""
    import polars as pl

    from dpframe.frames import bins as bins_

    schema = {"g": pl.String, "age": getattr(pl, dtype), "k": pl.Int64}
    rules = _Rules({} if fill is None else {"age": fill})
    both = (EDGES, [0.0, 18.0, 99.0])
    kept = [bins_.bin_step("age", edges, rules, schema) for edges in both]
    with monkeypatch.context() as m:
        m.setattr(bins_, "_verified_once",
                  lambda column, _kind, _dtype, fill: bins_._verify_frame(column, schema, fill))
        fresh = [bins_.bin_step("age", edges, rules, schema) for edges in both]
    assert kept == fresh
    assert [repr(s.columns) for s in kept] == [repr(s.columns) for s in fresh]
    assert "(18.0, 65.0)" in repr(kept[0].columns) and "(18.0,)" in repr(kept[1].columns)


def test_a_new_frames_first_histogram_reuses_the_verified_bin_frame_and_refusals_stay(
        monkeypatch):
    """A second frame's first histogram over the same column, dtype and missing rule builds
    no plan to verify (the verified frame is kept; its own binned frame is still made and
    answers from its own data); a column the bins cannot read is refused every time, before
    anything is spent."""
    import polars as pl

    from dpframe.errors import DerivationError
    from dpframe.frames import bins as bins_

    calls: list[int] = []
    original = bins_.derivations.verify_expressions

    def counting(*args: object) -> object:
        calls.append(len(tables))
        return original(*args)

    monkeypatch.setattr(bins_.derivations, "verify_expressions", counting)
    tables: list[list[float]] = []
    for first in (30.0, 70.0):
        pf = dpf.protect(pd.DataFrame(data(first)), epsilon=1e6, bounds={"age": (0.0, 100.0)})
        table = pf.dp.histogram("age", edges=EDGES, epsilon=1e5, random_state=1)
        tables.append(table["count"].tolist())
    assert 1 not in calls and tables == [[3.0, 3.0, 3.0], [3.0, 2.0, 4.0]]
    listed = dpf.protect(pl.DataFrame({"age": [[1.0], [2.0]]}), epsilon=1.0, bounds={})
    for _ in range(2):
        with pytest.raises(DerivationError):
            listed.dp.histogram("age", edges=EDGES, epsilon=0.5)
    assert listed.dp.budget.epsilon_spent == 0.0 and calls.count(2) == 2
