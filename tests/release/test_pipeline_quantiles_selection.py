"""Quantiles and private key selection through the release pipeline, adversarially.

First written as the twelfth adversarial review.

Every ``test_finding_*`` reproduces a confirmed violation and fails on the reviewed code
(commits cc69a65..ff03627); every ``test_held_*`` pins down a probed behaviour that is correct.

The promise checked throughout: after the checks (public facts only), nothing the user sees —
value, exception, log, shape, key values — depends on the data except through the noise, no
exception follows a read, and no budget is spent without a log entry (nor the reverse).
"""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.engine import _aggregation as engine
from dpframe.errors import BudgetExceededError, ParameterError
from dpframe.release import _pipeline as release


class _ReadSpy:
    """Records whether a release read the data (key counts or aggregates)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[str] = []
        for module, name in ((release, "observed_keys"), (engine, "aggregate")):
            orig = getattr(module, name)

            def spy(*a: Any, __orig: Any = orig, __name: str = name, **k: Any) -> Any:
                self.reads.append(__name)
                return __orig(*a, **k)

            monkeypatch.setattr(module, name, spy)

    @property
    def read(self) -> bool:
        return bool(self.reads)


def _entries(pf: Any) -> list[dict[str, Any]]:
    return pf.dp.session.ledger.snapshot_document()["entries"]


def _col(table: Any, name: str) -> list[Any]:
    if isinstance(table, pl.LazyFrame):
        table = table.collect()
    return list(table[name])


# ---------------------------------------------------------------------------------------------
# Finding 1 (high): an empty key selection makes proportions raise after the read, before the
# commit: nothing spent, nothing logged, so the event "no key passed" is a free, repeatable
# oracle on the key counts (each try draws fresh noise).
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["rescale", "all_but_one"])
def test_finding_proportions_on_an_empty_key_selection_is_a_total_release(method):
    rare = pd.DataFrame({"g": ["a", "b", "c"]})  # every key held by one row: none passes
    pf = dpf.protect(rare, epsilon=100, delta=0.5, bounds={})
    table = pf.dp.proportions("g", epsilon=1.0, delta=1e-6, method=method, random_state=1)
    assert len(table) == 0
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)
    assert _entries(pf)  # spent and logged


def test_finding_value_counts_total_on_an_empty_key_selection_returns_a_table():
    """Here the release was committed (ε spent, logged), then apportion() raises: the user pays
    and gets an exception instead of a result, and only when the selection is empty."""
    pf = dpf.protect(pd.DataFrame({"g": ["a", "b", "c"]}), epsilon=100, delta=0.5, bounds={})
    table = pf.dp.value_counts("g", epsilon=1.0, delta=1e-6, total=5, random_state=1)
    assert len(table) == 0


# ---------------------------------------------------------------------------------------------
# Finding 2 (high): the public bin factor s = B/(u − l) is computed without checking that
# u − l and s are finite. Then (x − l)·s is NaN for some values only (x near u when u − l
# overflows; x = l when s overflows), the NaN bin index makes np.bincount / Polars' strict
# cast raise after the read — on one data set and not on its neighbour — and the reservation
# is cancelled, so the failure is again free and repeatable.
# ---------------------------------------------------------------------------------------------
_WIDE = (-1e308, 1e308)  # u − l = inf, s = 0: (x − l)·s = inf·0 = NaN for x ≥ about 8e307
_NARROW = (0.0, 1e-306)  # s = 65536/1e-306 = inf: (x − l)·s = 0·inf = NaN for x = l


def _median_of(make: Any, values: list[float], bounds: tuple[float, float]) -> float:
    pf = dpf.protect(make({"x": values}), epsilon=10, bounds={"x": bounds})
    return pf.dp.median("x", epsilon=1.0, random_state=3)


@pytest.mark.parametrize("make", [pd.DataFrame, pl.DataFrame, lambda d: pl.DataFrame(d).lazy()],
                         ids=["pandas", "polars", "polars-lazy"])
@pytest.mark.parametrize(("bounds", "base", "replaced"), [
    (_WIDE, 0.0, 1e308),
    (_NARROW, 1e-306, 0.0),
], ids=["wide-bounds", "subnormal-width"])
def test_finding_quantile_bins_overflow_is_a_data_dependent_failure(make, bounds, base,
                                                                    replaced):
    d = [base] * 10
    d_prime = [replaced] + [base] * 9  # neighbours: one row replaced
    outs = [_median_of(make, d, bounds), _median_of(make, d_prime, bounds)]
    assert all(bounds[0] <= v <= bounds[1] for v in outs)


def test_finding_quantile_bins_overflow_grouped_too():
    df = pd.DataFrame({"g": ["a"] * 10, "x": [0.0] * 9 + [1e308]})
    pf = dpf.protect(df, epsilon=10, bounds={"x": _WIDE}, keys={"g": ["a"]})
    table = pf.dp.groupby("g").median("x", epsilon=1.0, random_state=3)
    assert len(table) == 1


# ---------------------------------------------------------------------------------------------
# Finding 3 (medium): the released key is whichever representative the engine met first in
# its group. -0.0 and 0.0 are one group, so the key shown (and logged) is "-0.0" or "0.0"
# depending on the first row: the output differs between neighbours, not through the noise.
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [pd.DataFrame, pl.DataFrame, lambda d: pl.DataFrame(d).lazy()],
                         ids=["pandas", "polars", "polars-lazy"])
def test_finding_selected_float_key_sign_of_zero_depends_on_the_first_row(make):
    outs = []
    for first in (0.0, -0.0):  # neighbours: only the first row differs (its sign of zero)
        g = [first] + [0.0] * 300 + [1.0] * 300
        pf = dpf.protect(make({"g": g, "x": [0.5] * len(g)}), epsilon=10, delta=1e-3,
                         bounds={"x": (0, 1)})
        table = pf.dp.groupby("g").count(epsilon=1.0, delta=1e-6, random_state=1)
        keys = _col(table, "g")
        outs.append(([math.copysign(1.0, k) for k in keys], _entries(pf)[0]["group_keys"]))
    assert outs[0] == outs[1]


def test_finding_selected_object_key_representative_depends_on_the_first_row(monkeypatch):
    """Same root cause in an object column: True, 1 and 1.0 hash and compare equal, so the
    released key would be whichever came first. Fixed: keys are not selected from object
    columns; refused from the schema, before anything is read or spent, whatever the rows."""
    calls: list[Any] = []
    monkeypatch.setattr(release, "observed_keys", lambda *a, **k: calls.append(a))
    for first in (1, True, 1.0):
        g = pd.Series([first] + [1] * 300 + [2] * 300, dtype=object)
        pf = dpf.protect(pd.DataFrame({"g": g}), epsilon=10, delta=1e-3, bounds={})
        with pytest.raises(dpf.ParameterError, match="cannot be selected"):
            pf.dp.groupby("g").count(epsilon=1.0, delta=1e-6, random_state=1)
        assert pf.dp.budget.epsilon_spent == 0
    assert calls == []


# ---------------------------------------------------------------------------------------------
# Finding 4 (high): keys read from the data are re-checked by _check_keys_match after the
# selection. Columns whose values are not of the "declared key" type the check expects
# (pandas categoricals with non-string categories, Polars Decimal) raise ParameterError after
# the read — and only when at least one key passed, before the commit, so for free.
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("column", [
    pd.Categorical([1.5] * 400 + [2.5] * 400),
    pd.Categorical([1] * 400 + [2] * 400),
    pd.Categorical([True] * 400 + [False] * 400),
], ids=["category-float", "category-int", "category-bool"])
def test_finding_selected_keys_of_a_non_string_categorical_are_refused_after_the_read(column):
    pf = dpf.protect(pd.DataFrame({"g": column, "x": np.linspace(0, 1, 800)}), epsilon=10,
                     delta=1e-3, bounds={"x": (0, 1)})
    table = pf.dp.groupby("g").median("x", epsilon=1.0, delta=1e-6, random_state=1)
    assert len(table) == 2
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)


def test_finding_selected_decimal_keys_are_refused_after_the_read():
    g = pl.Series([decimal.Decimal("1.5")] * 400 + [decimal.Decimal("2.5")] * 400,
                  dtype=pl.Decimal(10, 2))
    pf = dpf.protect(pl.DataFrame({"g": g, "x": np.linspace(0, 1, 800)}), epsilon=10,
                     delta=1e-3, bounds={"x": (0, 1)})
    table = pf.dp.groupby("g").count(epsilon=1.0, delta=1e-6, random_state=1)
    assert len(table) == 2


def test_finding_selected_keys_of_mixed_types_fail_after_the_commit():
    """An object column holding 1 and "1" would seal only when one key passed. Fixed: refused
    before the read (object key columns cannot be selected from); a string column works."""
    g = pd.Series([1] * 400 + ["1"] * 400, dtype=object)
    pf = dpf.protect(pd.DataFrame({"g": g}), epsilon=10, delta=1e-3, bounds={})
    with pytest.raises(dpf.ParameterError, match="cannot be selected"):
        pf.dp.groupby("g").count(epsilon=1.0, delta=1e-6, random_state=1)
    assert pf.dp.budget.epsilon_spent == 0
    pf2 = dpf.protect(pd.DataFrame({"g": g.astype(str)}), epsilon=10, delta=1e-3, bounds={})
    table = pf2.dp.groupby("g").count(epsilon=1.0, delta=1e-6, random_state=1)
    assert list(table["g"]) == ["1"]


# ---------------------------------------------------------------------------------------------
# Finding 5 (medium): the selection's own parameters (ε_sel/2 per key) and the re-plan of the
# queries at ε − ε_sel are validated only after observed_keys read the data: small ε
# or an extreme selection_share is refused after the read (the pre-read plan used the full ε).
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("epsilon", "share", "query"), [
    (1e-12, 0.5, "count"),  # ε_sel/2 = 2.5e-13: the selection's Laplace refuses it
    (1.0, 1e-12, "count"),  # tiny selection share
    (1.0, 1 - 1e-12, "median"),  # the queries get ~1e-12: the quantile mechanism refuses
    (1.0, 1 - 1e-12, "mean"),
])
def test_finding_selection_parameters_refused_only_after_the_read(monkeypatch, epsilon, share,
                                                                   query):
    df = pd.DataFrame({"g": ["a"] * 300 + ["b"] * 300, "x": np.linspace(0, 1, 600)})
    pf = dpf.protect(df, epsilon=100, delta=0.5, bounds={"x": (0, 1)})
    spy = _ReadSpy(monkeypatch)
    gb = pf.dp.groupby("g", selection_share=share)
    try:
        if query == "count":
            gb.count(epsilon=epsilon, delta=1e-6, random_state=1)
        else:
            getattr(gb, query)("x", epsilon=epsilon, delta=1e-6, random_state=1)
    except ParameterError:
        assert not spy.read, "refused after the data was read"


# ---------------------------------------------------------------------------------------------
# Finding 6 (low, accuracy not privacy): accuracy() for a group-by that selects its keys reports
# the accuracy at the full ε with δ, but the queries get ε·(1 − selection_share) and δ = 0.
# ---------------------------------------------------------------------------------------------
def test_finding_accuracy_with_key_selection_reports_the_epsilon_the_queries_get():
    df = pd.DataFrame({"g": ["a"] * 400 + ["b"] * 400, "x": np.linspace(0, 1, 800)})
    selecting = dpf.protect(df.copy(), epsilon=100, delta=0.5, bounds={"x": (0, 1)})
    declared = dpf.protect(df.copy(), epsilon=100, delta=0.5, bounds={"x": (0, 1)},
                           keys={"g": ["a", "b"]})
    got = selecting.dp.groupby("g").accuracy({"c": dpf.count()}, epsilon=1.0, delta=1e-6)
    spent_on_queries = declared.dp.groupby("g").accuracy({"c": dpf.count()}, epsilon=0.5)
    assert list(got["name"]) == ["keys", "c"]  # the selection's row first (its own ε)
    assert float(got["half_width"][1]) >= 0.99 * float(spent_on_queries["half_width"][0])


# ---------------------------------------------------------------------------------------------
# Finding 7 (low, correctness): output names of several levels are f"{q:g}" (6 digits). Two
# distinct levels, or a level and another query's name, collide and one answer silently
# overwrites the other (ε was still spent on both).
# ---------------------------------------------------------------------------------------------
def test_finding_quantile_level_labels_collide():
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 500)}), epsilon=10,
                     bounds={"x": (0, 1)})
    try:
        table = pf.dp.release({"q": dpf.quantile("x", [0.1, 0.1000001])}, epsilon=1.0,
                              random_state=1)
    except ParameterError:
        return  # refusing before anything is read is fine
    assert len([c for c in table.columns if c.startswith("q")]) == 2


def test_finding_quantile_label_collides_with_another_query_name():
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 500)}), epsilon=10,
                     bounds={"x": (0, 1)})
    try:
        table = pf.dp.release({"q": dpf.quantile("x", [0.1, 0.9]), "q[0.1]": dpf.mean("x")},
                              epsilon=1.0, random_state=1)
    except ParameterError:
        return
    assert len(table.columns) == 3


# ---------------------------------------------------------------------------------------------
# Probed and held.
# ---------------------------------------------------------------------------------------------
def test_held_delta_exhaustion_is_refused_before_the_read(monkeypatch):
    pf = dpf.protect(pd.DataFrame({"g": ["a"] * 50}), epsilon=10, delta=1e-6, bounds={})
    spy = _ReadSpy(monkeypatch)
    with pytest.raises(BudgetExceededError):
        pf.dp.groupby("g").count(epsilon=1.0, delta=1e-5)
    assert not spy.read
    assert pf.dp.budget.epsilon_spent == 0


def test_held_missing_keys_and_unobserved_categories_are_never_selected():
    n = 400
    cases = [
        pl.DataFrame({"g": pl.Series(["a"] * n + ["b"] * n, dtype=pl.Enum(["a", "b", "z"]))}),
        pd.DataFrame({"g": pd.Categorical(["a"] * n + ["b"] * n, categories=["a", "b", "z"])}),
        pl.DataFrame({"g": [1.0] * n + [float("nan")] * n + [None] * n}),
        pd.DataFrame({"g": pd.array(["a"] * n + [None] * n, dtype="string")}),
    ]
    expected = [["a", "b"], ["a", "b"], [1.0], ["a"]]
    for frame, keys in zip(cases, expected, strict=True):
        pf = dpf.protect(frame, epsilon=10, delta=1e-3, bounds={})
        table = pf.dp.groupby("g").count(epsilon=2.0, delta=1e-6, random_state=2)
        assert _col(table, "g") == keys


def test_held_bool_and_big_integer_keys_are_selected_exactly():
    n = 400
    for g in ([True] * n + [False] * n, [2**53 + 1] * n + [2**53] * n):
        for make in (pd.DataFrame, pl.DataFrame):
            pf = dpf.protect(make({"g": g, "x": np.linspace(0, 1, 2 * n)}), epsilon=10,
                             delta=1e-3, bounds={"x": (0, 1)})
            table = pf.dp.groupby("g").median("x", epsilon=2.0, delta=1e-6, random_state=2)
            assert _col(table, "g") == sorted(set(g))
            # the median of each group's own rows: the key lookups did not mix them up
            med = _col(table, "median")
            first = g[0]
            i = sorted(set(g)).index(first)
            assert med[i] < 0.5 < med[1 - i]


def test_held_multi_column_selection_ignores_rows_with_a_null_key():
    n = 300
    data = {"a": ["u"] * n + ["v"] * n + [None] * n, "b": ["F", None, "M"] * n,
            "x": list(np.linspace(0, 1, 3 * n))}
    for make in (pd.DataFrame, pl.DataFrame):
        pf = dpf.protect(make(data), epsilon=100, delta=0.5, bounds={"x": (0, 1)})
        table = pf.dp.groupby(["a", "b"]).release(
            {"c": dpf.count(), "q": dpf.quantile("x", [0.2, 0.8])}, epsilon=4.0, delta=1e-6,
            random_state=3)
        assert list(zip(_col(table, "a"), _col(table, "b"), strict=True)) == [
            ("u", "F"), ("u", "M"), ("v", "F"), ("v", "M")]
        assert all(0 <= v <= 1 for c in ("q[0.2]", "q[0.8]") for v in _col(table, c))


def test_held_weights_and_quantile_accounting_add_up():
    df = pd.DataFrame({"x": np.linspace(0, 1, 400), "g": ["a", "b"] * 200})
    pf = dpf.protect(df, epsilon=10, bounds={"x": (0, 1)}, keys={"g": ["a", "b"]})
    pf.dp.release({"m": dpf.mean("x"), "q": dpf.quantile("x", [0.25, 0.75])}, epsilon=1.0,
                  weights=[1, 3], random_state=1)
    pf.dp.groupby("g").release({"m": dpf.mean("x"), "q": dpf.median("x")}, epsilon=1.0,
                               random_state=1)
    log = _entries(pf)
    assert math.fsum(e["epsilon"] for e in log) == pytest.approx(2.0)
    q_entries = [e for e in log if e["name"] == "q"]
    assert q_entries[0]["epsilon"] == pytest.approx(0.75)
    assert q_entries[0]["mechanism_epsilon"] == pytest.approx(0.75)
    assert q_entries[1]["mechanism_epsilon"] == pytest.approx(q_entries[1]["epsilon"] / 2)
    assert pf.dp.budget.epsilon_spent == pytest.approx(2.0)


def test_held_selection_accounting_sums_to_the_request():
    df = pd.DataFrame({"g": ["a"] * 400 + ["b"] * 400, "x": np.linspace(0, 1, 800)})
    pf = dpf.protect(df, epsilon=10, delta=1e-3, bounds={"x": (0, 1)})
    pf.dp.groupby("g", selection_share=0.3).release(
        {"c": dpf.count(), "q": dpf.quantile("x", [0.1, 0.9])}, epsilon=0.7, delta=1e-6,
        random_state=1)
    log = _entries(pf)
    assert log[0]["name"] == "keys" and log[0]["epsilon"] == pytest.approx(0.21)
    assert math.fsum(e["epsilon"] for e in log) == pytest.approx(0.7)
    assert math.fsum(e["delta"] for e in log) == pytest.approx(1e-6)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.7)


@pytest.mark.parametrize("levels", [0.0, 1.0, [0.0, 0.5, 1.0]])
def test_held_quantile_extremes_stay_inside_the_bounds(levels):
    vals = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 0.5, None]
    for make in (pd.DataFrame, pl.DataFrame):
        pf = dpf.protect(make({"x": vals * 5}), epsilon=10, bounds={"x": (0.0, 1.0)})
        out = pf.dp.quantile("x", levels, epsilon=1.0, bins=2, random_state=4)
        got = [out] if np.ndim(levels) == 0 else _col(out, "quantile")
        assert all(0.0 <= v <= 1.0 for v in got)
        assert got == sorted(got)


def test_held_empty_selection_gives_an_empty_table_spent_and_logged():
    pf = dpf.protect(pd.DataFrame({"g": ["a", "b", "c"], "x": [0.1, 0.2, 0.3]}), epsilon=100,
                     delta=0.5, bounds={"x": (0, 1)})
    table = pf.dp.groupby("g").release({"m": dpf.mean("x"), "q": dpf.median("x")},
                                       epsilon=1.0, delta=1e-6, ci=0.9, random_state=1)
    assert len(table) == 0
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)
    assert _entries(pf)[0]["name"] == "keys"
