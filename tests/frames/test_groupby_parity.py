"""Every query at parity (issue 23): the group-by has the frame's methods (``histogram``,
``value_counts``, ``proportions``, ``describe``, ``epsilon_for``, ``split``), the builders
``dpf.histogram``, ``dpf.value_counts``, ``dpf.proportions``, ``dpf.cov`` and ``dpf.corr``
run inside ``release({...})``, and ``ci=``, ``mechanism=`` and ``delta=`` are taken the same
way everywhere (docs/frames.md, "Every statistic at parity").

Cheap by design: pandas and Polars in memory, one DuckDB case; exact answers are checked at a
very large ε (the noise rounds away), neighbour pairs with the exact measurements a release
would noise (:func:`dpframe.release._pipeline.exact_measurements`).
"""

from __future__ import annotations

import math
from typing import Any

import narwhals as nw
import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.frames import bins as bins_
from dpframe.release._pipeline import exact_measurements

GROUPS = ["a", "b", "c"]  # "c" is declared and empty
SEXES = ["F", "M"]
HUGE = 1e6  # ε at which noise rounds away (scale 2e-6 per cell)


def _data(n: int = 400, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.uniform(0, 100, n),
        "income": rng.uniform(0, 10, n),
        "g": rng.choice(["a", "b"], n),
        "s": rng.choice(SEXES, n),
    })


def _protect(constructor: Any, data: pd.DataFrame | None = None, **kw: Any) -> Any:
    kw.setdefault("bounds", {"age": (0, 100), "income": (0, 10)})
    kw.setdefault("keys", {"g": GROUPS, "s": SEXES})
    kw.setdefault("missing", {"age": 0.0, "income": 0.0})
    return dpf.protect(constructor(_data() if data is None else data), epsilon=1e8, delta=1e-3,
                       **kw)


def _rows(constructor: Any, table: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    cols = [constructor.column(table, c) for c in columns]
    return list(zip(*cols, strict=True))


def _spent(pf: Any) -> tuple[float, float]:
    b = pf.dp.budget
    return b.epsilon_spent, b.delta_spent


# -- group-by histogram and value_counts: exact per group, the frame method per group ---------
@pytest.mark.backends("pandas", "polars")
def test_groupby_histogram_is_the_frame_histogram_of_each_group(constructor):
    data = _data()
    pf = _protect(constructor, data)
    table = pf.dp.groupby("g").histogram("age", bins=4, epsilon=HUGE, random_state=1)
    assert list(table.columns) == ["g", "bin_lower", "bin_upper", "count"]
    rows = _rows(constructor, table, ["g", "bin_lower", "bin_upper", "count"])
    assert [r[0] for r in rows] == [g for g in GROUPS for _ in range(4)]
    assert [r[1:3] for r in rows[:4]] == [(0.0, 25.0), (25.0, 50.0), (50.0, 75.0), (75.0, 100.0)]
    for key in GROUPS:
        exact = np.histogram(data.loc[data.g == key, "age"], bins=4, range=(0, 100))[0]
        got = [r[3] for r in rows if r[0] == key]
        assert got == exact.tolist(), key
        if key != "c":  # the frame method on the group's rows (a filter) agrees
            alone = pf.dp.filter(nw.col("g") == key).dp.histogram(
                "age", bins=4, epsilon=HUGE, random_state=1)
            assert constructor.column(alone, "count") == got


@pytest.mark.backends("pandas", "polars")
def test_groupby_value_counts_is_the_crosstab_with_empty_groups(constructor):
    data = _data()
    pf = _protect(constructor, data)
    table = pf.dp.groupby("g").value_counts("s", epsilon=HUGE, random_state=2)
    assert list(table.columns) == ["g", "s", "count"]
    exact = pd.crosstab(data.g, data.s).reindex(GROUPS, fill_value=0)
    assert _rows(constructor, table, ["g", "s", "count"]) == [
        (g, s, float(exact.loc[g, s])) for g in GROUPS for s in SEXES]
    # given keys on both sides: exactly those cells
    one = pf.dp.groupby("g", keys=["b"]).value_counts("s", keys=["M"], epsilon=1.0)
    assert _rows(constructor, one, ["g", "s"]) == [("b", "M")]


@pytest.mark.backends("pandas", "polars")
def test_several_group_columns_and_edges(constructor):
    data = _data()
    pf = _protect(constructor, data)
    table = pf.dp.groupby(["g", "s"]).histogram("age", edges=[0, 10, 100], epsilon=HUGE)
    rows = _rows(constructor, table, ["g", "s", "bin_lower", "count"])
    assert len(rows) == len(GROUPS) * len(SEXES) * 2
    sub = data[(data.g == "a") & (data.s == "F")]
    assert [r[3] for r in rows[:2]] == [float((sub.age < 10).sum()), float((sub.age >= 10).sum())]


@pytest.mark.backends("duckdb")
def test_groupby_histogram_on_duckdb(constructor):
    data = _data(120)
    pf = _protect(constructor, data)
    table = pf.dp.groupby("g").histogram("age", bins=2, epsilon=HUGE, random_state=1)
    rows = _rows(constructor, table, ["g", "count"])
    assert [r[1] for r in rows if r[0] == "a"] == np.histogram(
        data.loc[data.g == "a", "age"], bins=2, range=(0, 100))[0].tolist()


# -- accounting -----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["histogram", "value_counts"])
def test_groupby_cells_cost_epsilon_once_each_cell_half(method):
    pf = _protect(lambda d: d)
    g = pf.dp.groupby("g")
    table = (g.histogram("age", bins=5, epsilon=0.8) if method == "histogram"
             else g.value_counts("s", epsilon=0.8))
    assert _spent(pf) == (pytest.approx(0.8), 0.0)
    log = table.dp.log
    assert len(log) == 1
    assert log["epsilon"].iloc[0] == pytest.approx(0.8)
    assert log["mechanism_epsilon"].iloc[0] == pytest.approx(0.4)


@pytest.mark.parametrize("grouped", [False, True])
def test_histogram_builder_costs_its_share_each_bin_half(grouped):
    pf = _protect(lambda d: d)
    target = pf.dp.groupby("g") if grouped else pf.dp
    table = target.release({"h": dpf.histogram("age", bins=4), "m": dpf.mean("age")},
                           epsilon=1.0, random_state=5)
    assert _spent(pf)[0] == pytest.approx(1.0)
    log = table.dp.log.set_index("name")
    assert log.loc["h", "epsilon"] == pytest.approx(0.5)
    assert log.loc["h", "mechanism_epsilon"] == pytest.approx(0.25)
    assert log.loc["h", "sensitivity"] == 1.0


# -- keys: declared, given, selected, refused -----------------------------------------------
def test_undeclared_group_keys_without_delta_are_refused_before_spending():
    pf = _protect(lambda d: d, keys={"s": SEXES})
    with pytest.raises(dpf.ParameterError, match="'g' has no declared keys"):
        pf.dp.groupby("g").histogram("age", bins=3, epsilon=1.0)
    assert _spent(pf) == (0.0, 0.0)


def test_undeclared_group_keys_with_delta_select_group_bin_pairs():
    pf = _protect(lambda d: d, keys={"s": SEXES})
    table = pf.dp.groupby("g").histogram("age", bins=2, epsilon=50.0, delta=1e-6,
                                         random_state=4)
    assert set(zip(table["g"], table["bin_lower"], strict=True)) <= {
        (g, e) for g in ("a", "b") for e in (0.0, 50.0)}
    assert len(table) == 4  # ~100 rows per pair: every pair passes the threshold
    assert _spent(pf) == (pytest.approx(50.0), pytest.approx(1e-6))


def test_value_counts_with_neither_side_declared_selects_pairs():
    pf = _protect(lambda d: d, keys={})
    table = pf.dp.groupby("g").value_counts("s", epsilon=50.0, delta=1e-6, random_state=4)
    assert sorted(zip(table["g"], table["s"], strict=True)) == [
        (g, s) for g in ("a", "b") for s in SEXES]


@pytest.mark.parametrize("declared", [{"g": GROUPS}, {"s": SEXES}])
def test_value_counts_with_one_side_declared_is_refused(declared):
    pf = _protect(lambda d: d, keys=declared)
    with pytest.raises(dpf.ParameterError, match="not declared while the other"):
        pf.dp.groupby("g").value_counts("s", epsilon=1.0, delta=1e-6)
    assert _spent(pf) == (0.0, 0.0)


def test_value_counts_of_the_group_column_is_refused():
    pf = _protect(lambda d: d)
    with pytest.raises(dpf.ParameterError, match="other than the group"):
        pf.dp.groupby("g").value_counts("g", epsilon=1.0)


# -- neighbour pairs: differences within the logged sensitivity -----------------------------
NEIGHBOURS = {
    "changes group": ({"g": "a"}, {"g": "b"}),
    "changes bin": ({"age": 10.0}, {"age": 90.0}),
    "changes group and bin": ({"g": "a", "age": 10.0}, {"g": "b", "age": 90.0}),
    "leaves the declared keys": ({"g": "a"}, {"g": "zzz"}),
    "null vs value": ({"age": math.nan}, {"age": 30.0}),
}


def _neighbour(values: dict[str, Any]) -> pd.DataFrame:
    data = _data(30)
    for k, v in values.items():
        data.loc[0, k] = v
    return data


@pytest.mark.parametrize("missing", ["drop", 50.0])
@pytest.mark.parametrize("pair", list(NEIGHBOURS))
def test_groupby_histogram_neighbours_within_the_logged_sensitivity(pair, missing):
    edges = [0.0, 20.0, 50.0, 100.0]
    exact, tables = [], []
    for row in NEIGHBOURS[pair]:
        pf = _protect(lambda d: d, _neighbour(row), missing={"age": missing, "income": 0.0})
        tables.append(pf.dp.groupby("g").histogram("age", edges=edges, epsilon=1.0,
                                                   random_state=9).shape)
        binned = pf.dp._binned("age", edges, None)
        keys = [(g, j) for g in GROUPS for j in range(3)]
        exact.append(exact_measurements(binned, {"n": dpf.count()}, group_by=("g", bins_.BIN),
                                        keys=keys)[("n", "count")])
        builder = exact_measurements(pf, {"h": dpf.histogram("age", bins=4)}, group_by="g",
                                     keys=GROUPS)[("h", "histogram")]
        exact.append(builder)
    assert tables[0] == tables[1]
    for i in (0, 1):  # the group-by histogram, the builder in a grouped release
        (a, sa), (b, sb) = exact[i], exact[i + 2]
        assert sa == sb == 1.0
        diff = np.abs(a - b)
        assert np.all(diff <= sa) and np.count_nonzero(diff) <= 2, (pair, i, a, b)


@pytest.mark.parametrize("pair", ["changes bin", "null vs value"])
def test_histogram_builder_neighbours_ungrouped(pair):
    exact = []
    for row in NEIGHBOURS[pair]:
        pf = _protect(lambda d: d, _neighbour(row), missing={"age": "drop", "income": 0.0})
        exact.append(exact_measurements(pf, {"h": dpf.histogram("age", bins=5)})[
            ("h", "histogram")])
    (a, sa), (b, _) = exact
    diff = np.abs(a - b)
    assert sa == 1.0 and np.all(diff <= 1) and np.count_nonzero(diff) <= 2


# -- builders inside release ----------------------------------------------------------------
@pytest.mark.backends("pandas", "polars")
def test_builders_in_one_release(constructor):
    data = _data()
    pf = _protect(constructor, data)
    table = pf.dp.release({
        "h": dpf.histogram("age", bins=4), "c": dpf.corr(["age", "income"]),
        "v": dpf.cov(["age", "income"]), "m": dpf.mean("age"),
    }, epsilon=HUGE, random_state=7, ci=0.9)
    names = list(table.columns)
    assert names[:3] == ["h[0,25]", "h[0,25]_lower", "h[0,25]_upper"]
    assert {"c[age,income]", "v[age,age]", "v[age,income]", "v[income,income]",
            "c[age,income]_lower", "v[income,income]_upper", "m", "m_lower"} <= set(names)
    assert "c[age,age]" not in names  # a correlation's diagonal is 1
    hist = [constructor.values(table, f"h[{a:g},{b:g}]")[0]
            for a, b in ((0, 25), (25, 50), (50, 75), (75, 100))]
    assert hist == np.histogram(data.age, bins=4, range=(0, 100))[0].tolist()
    corr = constructor.values(table, "c[age,income]")[0]
    assert corr == pytest.approx(np.corrcoef(data.age, data.income)[0, 1], abs=1e-3)
    cov = constructor.values(table, "v[age,income]")[0]
    assert cov == pytest.approx(np.cov(data.age, data.income)[0, 1], abs=1e-2)


@pytest.mark.backends("pandas", "polars")
def test_value_counts_builder_is_the_frame_method(constructor):
    data = _data()
    pf = _protect(constructor, data)
    table = pf.dp.release({"v": dpf.value_counts("s"), "n": dpf.count()}, epsilon=HUGE,
                          random_state=3, ci=0.9)
    assert {"v[F]", "v[F]_lower", "v[M]_upper", "n"} <= set(table.columns)
    frame = pf.dp.value_counts("s", epsilon=HUGE, random_state=3)
    assert [constructor.values(table, f"v[{k}]")[0] for k in SEXES] == constructor.column(
        frame, "count")
    grouped = pf.dp.groupby("g").release({"v": dpf.value_counts("s", keys=["M"])},
                                         epsilon=HUGE)
    exact = pd.crosstab(data.g, data.s).reindex(GROUPS, fill_value=0)["M"]
    assert constructor.column(grouped, "v[M]") == exact.astype(float).tolist()


@pytest.mark.backends("pandas", "polars")
def test_groupby_proportions_sum_to_one_per_group(constructor):
    data = _data()
    pf = _protect(constructor, data)
    table = pf.dp.groupby("g").proportions("s", epsilon=HUGE, random_state=2, ci=0.9)
    exact = pd.crosstab(data.g, data.s, normalize="index")
    for i, g in enumerate(GROUPS[:2]):
        got = [constructor.values(table, f"proportion[{k}]")[i] for k in SEXES]
        assert got == pytest.approx(exact.loc[g].tolist(), abs=1e-6)
        lo = [constructor.values(table, f"proportion[{k}]_lower")[i] for k in SEXES]
        assert all(a <= b + 1e-6 for a, b in zip(lo, got, strict=True))
    empty = [constructor.values(table, f"proportion[{k}]")[2] for k in SEXES]
    assert sum(empty) == pytest.approx(1.0)  # an empty group: noise only, still Σ = 1
    assert pf.dp.budget.epsilon_spent == pytest.approx(HUGE)
    ungrouped = pf.dp.release({"p": dpf.proportions("s")}, epsilon=HUGE)
    assert [constructor.values(ungrouped, f"p[{k}]")[0] for k in SEXES] == pytest.approx(
        (data.s.value_counts(normalize=True)[SEXES]).tolist(), abs=1e-6)


def test_value_counts_builder_keys_are_public_and_of_the_column_type():
    pf = _protect(lambda d: d, keys={"g": GROUPS})
    with pytest.raises(dpf.ParameterError, match="needs public keys"):
        pf.dp.release({"v": dpf.value_counts("s")}, epsilon=1.0)
    with pytest.raises(dpf.ParameterError, match="do not match column 's'"):
        pf.dp.release({"v": dpf.value_counts("s", keys=[1, 2])}, epsilon=1.0)
    with pytest.raises(dpf.ParameterError, match="duplicates"):
        dpf.value_counts("s", keys=["F", "F"])
    assert _spent(pf) == (0.0, 0.0)
    table = pf.dp.release({"v": dpf.value_counts("s", keys=["F", "nobody"])}, epsilon=1.0)
    assert list(table.columns) == ["v[F]", "v[nobody]"]
    log = table.dp.log
    assert log["epsilon"].iloc[0] == pytest.approx(1.0)
    assert log["mechanism_epsilon"].iloc[0] == pytest.approx(0.5)


@pytest.mark.parametrize("pair", ["changes group", "leaves the declared keys"])
def test_value_counts_builder_neighbours(pair):
    rows = {"changes group": ({"s": "F"}, {"s": "M"}),
            "leaves the declared keys": ({"s": "F"}, {"s": "other"})}[pair]
    for group in ({}, {"group_by": "g", "keys": GROUPS}):
        exact = []
        for row in rows:
            pf = _protect(lambda d: d, _neighbour(row))
            exact.append(exact_measurements(pf, {"v": dpf.value_counts("s")}, **group)[
                ("v", "value_counts")])
        (a, sa), (b, _) = exact
        diff = np.abs(a - b)
        assert sa == 1.0 and np.all(diff <= 1) and np.count_nonzero(diff) <= 2


@pytest.mark.parametrize("kind", ["cov", "corr"])
def test_matrix_builders_equal_the_frame_methods_with_a_seed(kind):
    a, b = _protect(lambda d: d.copy()), _protect(lambda d: d.copy())
    cols = ["age", "income"]
    matrix = getattr(a.dp, kind)(cols, epsilon=1.0, random_state=11)
    table = b.dp.release({"x": getattr(dpf, kind)(cols)}, epsilon=1.0, random_state=11)
    assert table["x[age,income]"].iloc[0] == matrix.loc["age", "income"]
    if kind == "cov":
        assert table["x[age,age]"].iloc[0] == matrix.loc["age", "age"]


def test_grouped_histogram_builder_equals_the_groupby_histogram():
    pf = _protect(lambda d: d)
    wide = pf.dp.groupby("g").release({"h": dpf.histogram("age", bins=2)}, epsilon=HUGE)
    long = pf.dp.groupby("g").histogram("age", bins=2, epsilon=HUGE)
    assert wide["h[0,50]"].tolist() == long["count"].iloc[::2].tolist()
    assert wide["h[50,100]"].tolist() == long["count"].iloc[1::2].tolist()


def test_refusals_are_clear_and_spend_nothing():
    pf = _protect(lambda d: d)
    with pytest.raises(dpf.ParameterError, match="not available per group"):
        pf.dp.groupby("g").release({"c": dpf.corr(["age", "income"])}, epsilon=1.0)
    with pytest.raises(dpf.ParameterError, match="bins=<int>"):
        dpf.histogram("age", bins=[0, 50, 100])  # type: ignore[arg-type]
    with pytest.raises(dpf.ParameterError, match="bins=<int>"):
        dpf.histogram("age", bins=0)
    assert _spent(pf) == (0.0, 0.0)
    data = _data(40).assign(pid=np.arange(40) // 2)
    units = dpf.protect(data, epsilon=1.0, bounds={"age": (0, 100)}, privacy_unit="pid",
                        max_rows_per_unit=2)
    with pytest.raises(dpf.UnsupportedInputError, match="privacy_unit"):
        units.dp.release({"h": dpf.histogram("age", bins=3)}, epsilon=1.0)
    with pytest.raises(dpf.UnsupportedInputError, match="privacy_unit"):
        units.dp.release({"v": dpf.value_counts("g", keys=["a"])}, epsilon=1.0)
    assert units.dp.budget.epsilon_spent == 0.0


# -- ci=, mechanism=, delta= taken the same way by the new methods --------------------------
NEW = {
    "groupby.histogram": lambda pf, **kw: pf.dp.groupby("g").histogram("age", bins=3, **kw),
    "groupby.value_counts": lambda pf, **kw: pf.dp.groupby("g").value_counts("s", **kw),
    "groupby.describe": lambda pf, **kw: pf.dp.groupby("g").describe(columns=["age"], **kw),
    "release(histogram)": lambda pf, **kw: pf.dp.release(
        {"h": dpf.histogram("age", bins=3)}, **kw),
    "release(corr)": lambda pf, **kw: pf.dp.release({"c": dpf.corr(["age", "income"])}, **kw),
    "release(value_counts)": lambda pf, **kw: pf.dp.groupby("g").release(
        {"v": dpf.value_counts("s")}, **kw),
    "groupby.proportions": lambda pf, **kw: pf.dp.groupby("g").proportions("s", **kw),
}


@pytest.mark.parametrize("name", list(NEW))
def test_ci_mechanism_delta_accepted_consistently(name):
    pf = _protect(lambda d: d)
    run = NEW[name]
    with_ci = run(pf, epsilon=1.0, ci=0.9, random_state=1)
    assert any(c.endswith("_lower") for c in with_ci.columns)
    run(pf, epsilon=1.0, mechanism="laplace", random_state=1)
    run(pf, epsilon=1.0, mechanism="auto", random_state=1)
    run(pf, epsilon=1.0, delta=1e-6, mechanism="bounded", random_state=1)
    spent = _spent(pf)
    with pytest.raises(dpf.ParameterError, match="does not use delta"):
        run(pf, epsilon=1.0, delta=1e-6, mechanism="laplace")
    with pytest.raises(dpf.ParameterError, match="unknown mechanism"):
        run(pf, epsilon=1.0, mechanism="gaussian")
    assert _spent(pf) == spent


def test_groupby_planning_methods():
    pf = _protect(lambda d: d)
    g = pf.dp.groupby("g")
    eps = g.epsilon_for(dpf.count(), 5.0)
    assert pf.dp.epsilon_for(dpf.count(), 5.0) == 0.0  # the public n: exact (issue 23)
    some = pf.dp.filter(nw.col("age") >= 0)  # a private size: noised
    assert eps == pytest.approx(2 * some.dp.epsilon_for(dpf.count(), 5.0), rel=1e-6)
    plan = g.split({"n": (dpf.count(), 5.0), "k": (dpf.count(), 10.0)}, epsilon=1.0,
                   mechanism="laplace")
    assert plan["epsilon"].sum() == pytest.approx(1.0)
    acc = pf.dp.accuracy({"h": dpf.histogram("age", bins=4)}, epsilon=1.0)
    assert acc["half_width"].iloc[0] > 0 and "each cell" in acc["note"].iloc[0]
    # per group, a cell's ε is the group's: the inverse holds; ungrouped it is refused
    assert g.epsilon_for(dpf.histogram("age", bins=4), 5.0) == pytest.approx(eps, rel=1e-6)
    with pytest.raises(dpf.ParameterError, match="per cell"):
        pf.dp.epsilon_for(dpf.value_counts("s"), 5.0)
    with pytest.raises(dpf.ParameterError, match="keys of a group-by column"):
        g.release({"v": dpf.value_counts("g")}, epsilon=1.0)
    assert _spent(pf) == (0.0, 0.0)


def test_bad_arguments_of_the_new_methods_are_dpframe_errors():
    pf = _protect(lambda d: d)
    g = pf.dp.groupby("g")
    for call in (lambda: g.histogram(["age"], bins=3, epsilon=1.0),  # type: ignore[arg-type]
                 lambda: g.describe(columns=5, epsilon=1.0),  # type: ignore[arg-type]
                 lambda: g.epsilon_for(dpf.count(), "x"),  # type: ignore[arg-type]
                 lambda: pf.dp.split({"n": (dpf.count(), 1.0)}, epsilon="x"),  # type: ignore[arg-type]
                 lambda: g.value_counts("s", keys="F", epsilon=1.0)):
        with pytest.raises(dpf.ParameterError):
            call()
    assert _spent(pf) == (0.0, 0.0)
