"""Every bad input of issue 4 item 9: a deliberate error that names the fix, nothing spent."""

from __future__ import annotations

import contextlib
import math

import narwhals as nw
import numpy as np
import pandas as pd
import pytest

import dpframe as dpf


def _base():
    return {"x": [1.0, 2.0, 3.0, 4.0], "y": [1.0, 0.0, 1.0, 1.0], "s": ["a", "b", "c", "d"],
            "g": ["u", "v", "u", "v"]}


def _protect(constructor, data=None, **kw):
    frame = constructor(data or _base())
    s = dpf.Session()
    kw.setdefault("bounds", {"x": (0, 5)})
    pf = dpf.protect(frame, epsilon=1.0, delta=1e-6, session=s, **kw)
    return pf, s


# (description, call, error type, text the message must contain — the fix)
QUERY_CASES = [
    ("missing bounds", lambda f: f.dp.mean("y", epsilon=0.1), dpf.BoundsError, "bounds="),
    ("column not in frame", lambda f: f.dp.mean("nope", epsilon=0.1),
     dpf.UnsupportedInputError, "available columns"),
    ("non-numeric column", lambda f: f.dp.sum("s", epsilon=0.1),
     dpf.UnsupportedInputError, "cast"),
    # (a count of the protected frame at epsilon=0 is its public size, released exactly)
    ("epsilon zero", lambda f: f.dp.mean("x", epsilon=0), dpf.ParameterError, "> 0"),
    ("epsilon negative", lambda f: f.dp.count(epsilon=-1), dpf.ParameterError, "> 0"),
    ("epsilon nan", lambda f: f.dp.count(epsilon=math.nan), dpf.ParameterError, "finite"),
    ("epsilon inf", lambda f: f.dp.count(epsilon=math.inf), dpf.ParameterError, "finite"),
    ("epsilon not a number", lambda f: f.dp.count(epsilon="x"), dpf.ParameterError, "number"),
    ("epsilon above remaining", lambda f: f.dp.mean("x", epsilon=1.5),
     dpf.BudgetExceededError, "smaller epsilon"),
    ("delta with truncated", lambda f: f.dp.mean("x", epsilon=0.1, delta=1e-7,
                                                  mechanism="truncated"),
     dpf.ParameterError, "delta=0"),
    ("delta with laplace", lambda f: f.dp.mean("x", epsilon=0.1, delta=1e-7,
                                                mechanism="laplace"),
     dpf.ParameterError, "delta=0"),
    # auto spends δ where it buys ≥ 1 % (here the sum's δ/ε = 10 %): it would need 5e-4
    ("delta above budget", lambda f: f.dp.mean("x", epsilon=0.01, delta=1e-3),
     dpf.BudgetExceededError, "smaller delta"),
    ("delta negative", lambda f: f.dp.mean("x", epsilon=0.1, delta=-1e-3),
     dpf.ParameterError, "[0, 1)"),
    ("unknown mechanism", lambda f: f.dp.mean("x", epsilon=0.1, mechanism="gauss"),
     dpf.ParameterError, "'truncated'"),
    ("group keys not declared", lambda f: f.dp.groupby("g").count(epsilon=0.1),
     dpf.ParameterError, "keys=[...]"),
    ("group column missing", lambda f: f.dp.groupby("nope", keys=["u"]).count(epsilon=0.1),
     dpf.UnsupportedInputError, "available"),
    ("per-query nulls= is gone (policy is declared at protect)",
     lambda f: f.dp.mean("x", epsilon=0.1, nulls="drop"), TypeError, "nulls"),
    ("bad weights", lambda f: f.dp.release({"a": dpf.count(), "b": dpf.mean("x")},
                                           epsilon=0.1, weights=[1, -1]),
     dpf.ParameterError, "> 0"),
    ("weights wrong length", lambda f: f.dp.release({"a": dpf.count()}, epsilon=0.1,
                                                    weights=[1, 2]),
     dpf.ParameterError, "entries"),
    ("not a query", lambda f: f.dp.release({"a": "count"}, epsilon=0.1),
     dpf.ParameterError, "dpf.count()"),
    ("empty release", lambda f: f.dp.release({}, epsilon=0.1), dpf.ParameterError, "dict"),
]


@pytest.mark.parametrize(("what", "call", "err", "fix"), QUERY_CASES,
                         ids=[c[0] for c in QUERY_CASES])
def test_bad_query_input_raises_names_fix_spends_nothing(constructor, what, call, err, fix):
    pf, s = _protect(constructor)
    before = s.budget
    with pytest.raises(err) as info:
        call(pf)
    assert fix in str(info.value), (what, str(info.value))
    assert s.budget == before
    assert len(s.ledger.entries) == 0


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), -float("inf")])
def test_null_nan_inf_never_refuse_policy_decides(constructor, bad):
    """Issue 10 item 1: a refusal after reading a missing or infinite value was a free,
    data-dependent channel. Now nothing raises because of a value: missing values follow the
    protect-time policy ("drop" by default: left out, size private), infinities are clamped,
    and the log says which policy applied."""
    data = {"x": [1.0, 2.0, bad, 4.0]}
    pf, s = _protect(constructor, data)
    m = pf.dp.mean("x", epsilon=0.5, random_state=0)
    assert 0 <= m <= 5
    log = s.ledger.entries
    assert {e["size"] for e in log} == {"private"}  # "drop" on a float column: size private
    assert {e["missing"] for e in log} == {"x: rows missing it are dropped (size private)"}
    assert s.budget.epsilon_spent == pytest.approx(0.5)
    assert 0 <= pf.dp.count(epsilon=0.1, random_state=0) <= 4  # count ignores values
    # the same frame without the bad value takes the same path: same log fields
    clean, s2 = _protect(constructor, {"x": [1.0, 2.0, 3.0, 4.0]})
    clean.dp.mean("x", epsilon=0.5, random_state=0)
    fields = ("size", "missing", "sensitivity", "domain_lower", "domain_upper", "formulation")
    assert [[e[f] for f in fields] for e in s2.ledger.entries] == \
        [[e[f] for f in fields] for e in log[: len(s2.ledger.entries)]]


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), -float("inf")])
def test_fill_policy_keeps_the_size_public(constructor, bad):
    pf, s = _protect(constructor, {"x": [1.0, 2.0, bad, 4.0]}, missing={"x": 2.5})
    assert pf.dp.size == 4
    v = pf.dp.variance("x", epsilon=0.5, random_state=0)
    assert 0 <= v <= 25 / 4 * 4 / 3
    entry = s.ledger.entries[-1]
    assert entry["size"] == "public"
    assert entry["missing"] == "x: missing values filled with the public value 2.5"


@pytest.mark.parametrize(("missing", "fix"), [
    ("zero", "a fill word"), ({"x": 9.0}, "outside its bounds"),
    ({"y": 0.0}, "without declared bounds"), ({"x": True}, "a fill word"),
])
def test_bad_missing_policy_at_protect(constructor, missing, fix):
    with pytest.raises(dpf.ParameterError) as info:
        dpf.protect(constructor(_base()), epsilon=1.0, bounds={"x": (0, 5)}, missing=missing)
    assert fix in str(info.value)


def test_values_outside_bounds_are_clamped_and_logged(constructor):
    pf, s = _protect(constructor, {"x": [-100.0, 100.0, 2.0, 3.0]})
    m = pf.dp.mean("x", epsilon=1.0, random_state=0)
    assert 0 <= m <= 5
    entry = s.ledger.entries[-1]
    assert "clamped to [0, 5]" in entry["clamping"]
    assert "not released" in entry["clamping"]  # the count of clamped values is private


@pytest.mark.parametrize(
    ("bounds", "fix"),
    [({"x": (5, 0)}, "write (0, 5)"), ({"x": (0, math.inf)}, "finite"),
     ({"x": (math.nan, 1)}, "finite"), ({"x": (1, 1)}, "widen"), ({"x": 5}, "pair"),
     ([("x", (0, 1))], "mapping"), ({"nope": (0, 1)}, "not in the frame"),
     ({"s": (0, 1)}, "cast")],
)
def test_bad_bounds_at_protect(constructor, bounds, fix):
    with pytest.raises(dpf.ParameterError) as info:
        dpf.protect(constructor(_base()), epsilon=1.0, bounds=bounds)
    assert fix in str(info.value)


@pytest.mark.parametrize("epsilon", [0, -0.5, math.nan, math.inf])
def test_bad_budget_at_protect(constructor, epsilon):
    with pytest.raises(dpf.ParameterError):
        dpf.protect(constructor(_base()), epsilon=epsilon, bounds={"x": (0, 5)})


def test_empty_frame(constructor):
    if constructor.name == "spark":
        pytest.skip("Spark cannot infer a schema for the test constructor's empty columns")
    empty = constructor({"x": np.array([], dtype=float)})
    with pytest.raises(dpf.UnsupportedInputError, match="empty"):
        dpf.protect(empty, epsilon=1.0, bounds={"x": (0, 5)})
    # an empty *derived* frame is not an error (that would reveal its size): valid answers
    pf, s = _protect(constructor)
    sub = pf.dp.filter(nw.col("x") > 100)
    with s:  # the frame's own session may be named; it is found by provenance anyway
        assert 0 <= sub.dp.mean("x", epsilon=0.1, random_state=0) <= 5
        assert 0 <= sub.dp.variance("x", epsilon=0.1, random_state=0) <= 25 / 2
    assert 0 <= sub.dp.count(epsilon=0.1, random_state=0) <= 4  # counts: domain [0, n]
    assert s.budget.epsilon_spent == pytest.approx(0.3)


def test_variance_needs_two_rows_on_public_size():
    """n is public: refusing a variance of one protected row reveals nothing."""
    pf = dpf.protect(pd.DataFrame({"x": [1.0]}), epsilon=1.0, bounds={"x": (0, 5)},
                     missing=0.0)
    with pytest.raises(dpf.UnsupportedInputError, match="at least 2 rows"):
        pf.dp.variance("x", epsilon=0.1)
    assert pf.dp.budget.epsilon_spent == 0
    # under "drop" the size is private: the size-free formulation answers, in its domain
    pf = dpf.protect(pd.DataFrame({"x": [1.0]}), epsilon=1.0, bounds={"x": (0, 5)})
    assert 0 <= pf.dp.variance("x", epsilon=0.1, random_state=0) <= 25 / 2


def test_non_frames_are_refused():
    with pytest.raises(dpf.UnsupportedInputError, match="pandas"):
        dpf.protect([1, 2, 3], epsilon=1.0, bounds={})
    with pytest.raises(dpf.ParameterError, match="column name"):
        dpf.mean(None)


TINY = [1e-11, 1e-13, 1e-15, 1e-300, 5e-324]


@pytest.mark.parametrize("epsilon", TINY)
@pytest.mark.parametrize("mechanism", ["bounded", "truncated", "laplace", "auto"])
@pytest.mark.parametrize("query", ["count", "mean", "variance", "groupby_mean", "accuracy"])
def test_any_epsilon_is_answered_or_a_parameter_error(constructor, epsilon, mechanism, query):
    """The review found IndexError / ZeroDivisionError / 'math domain error' for ε ≤ 1e-11
    (nothing spent, but not dpframe errors). Every ε is now answered or refused with a
    ParameterError before anything is read, and nothing is spent by a refusal."""
    pf, s = _protect(constructor, keys={"g": ["u", "v"]}, missing=0.0)
    calls = {
        "count": lambda: pf.dp.count(epsilon=epsilon, mechanism=mechanism, random_state=0),
        "mean": lambda: pf.dp.mean("x", epsilon=epsilon, mechanism=mechanism, random_state=0),
        "variance": lambda: pf.dp.variance("x", epsilon=epsilon, mechanism=mechanism,
                                           random_state=0),
        "groupby_mean": lambda: pf.dp.groupby("g").mean("x", epsilon=epsilon,
                                                        mechanism=mechanism, random_state=0),
        "accuracy": lambda: pf.dp.accuracy({"m": dpf.mean("x")}, epsilon=epsilon,
                                           mechanism=mechanism),
    }
    try:
        calls[query]()
    except dpf.ParameterError:
        assert s.ledger.budget.epsilon_spent == 0.0
    assert not any(e["query"].startswith("failed") for e in s.ledger.entries)


@pytest.mark.parametrize("call", [
    lambda f: f.dp.mean("x", epsilon=0.5, random_state=-1),
    lambda f: f.dp.release({"a": dpf.mean("x"), "b": dpf.count()}, epsilon=0.5,
                           weights=[1e-300, 1.0], random_state=0),
    lambda f: f.dp.release({"a": dpf.mean("x"), "b": dpf.count()}, epsilon=0.5,
                           weights=[5e-324, 1.0], random_state=0),
])
def test_extreme_parameters_are_parameter_errors(constructor, call):
    pf, s = _protect(constructor, missing=0.0)
    with contextlib.suppress(dpf.ParameterError):
        call(pf)
    assert not any(e["query"].startswith("failed") for e in s.ledger.entries)


@pytest.mark.parametrize("bounds", [(0, 10**400), (0.0, 5e-324), (0.0, 1e-300)])
def test_extreme_bounds_are_bounds_errors_or_answered(bounds):
    frame = pd.DataFrame({"x": np.linspace(0, 1e-300, 50)})
    try:
        pf = dpf.protect(frame, epsilon=1.0, bounds={"x": bounds}, missing=0.0)
        pf.dp.mean("x", epsilon=0.5, random_state=0)
        pf.dp.variance("x", epsilon=0.4, random_state=0)
    except dpf.ParameterError:
        return


# -- strict parameter types (issue 24 item 8): numbers only, the same rule everywhere ---------
NOT_NUMBERS = ["0.5", b"0.5", True, np.True_, __import__("decimal").Decimal("0.5"), None,
               [0.5], complex(0.5, 0)]


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_budget_parameters_take_numbers_only(value):
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    with pytest.raises(dpf.ParameterError, match="number"):
        dpf.protect(frame, epsilon=value, bounds={"x": (0, 5)})
    if value is not None:
        with pytest.raises(dpf.ParameterError, match="number"):
            dpf.protect(frame, epsilon=1.0, delta=value, bounds={"x": (0, 5)})
    pf, s = _protect(lambda d: pd.DataFrame(d))
    with pytest.raises(dpf.ParameterError, match="number"):
        pf.dp.mean("x", epsilon=value)
    assert s.budget.epsilon_spent == 0


@pytest.mark.parametrize("pair", [("0", "1"), (False, True), (0, True),
                                  (__import__("decimal").Decimal(0), 1), "01", (0, 10**400)],
                         ids=repr)
def test_bounds_take_numbers_only(pair):
    with pytest.raises(dpf.BoundsError, match="pair of numbers"):
        dpf.protect(pd.DataFrame({"x": [1.0, 2.0]}), epsilon=1.0, bounds={"x": pair})


def test_numpy_and_fraction_numbers_are_accepted():
    from fractions import Fraction

    pf = dpf.protect(pd.DataFrame({"x": [1.0, 2.0]}), epsilon=np.float32(1.0),
                     bounds={"x": (np.int64(0), Fraction(5))}, missing=0.0)
    assert 0 <= pf.dp.mean("x", epsilon=np.float64(0.5), random_state=0) <= 5


def test_an_uncalibratable_large_epsilon_asks_for_a_smaller_one():
    pf, _ = _protect(lambda d: pd.DataFrame(d), missing=0.0)
    pf = dpf.protect(pd.DataFrame({"x": [1.0, 2.0]}), epsilon=1e301, bounds={"x": (0, 5)},
                     missing=0.0)
    with pytest.raises(dpf.ParameterError) as info:
        pf.dp.mean("x", epsilon=1e300)
    assert "smaller epsilon" in str(info.value) and "too small" not in str(info.value)
    with pytest.raises(dpf.ParameterError, match="larger epsilon"):
        pf.dp.mean("x", epsilon=1e-300)


# -- frame shapes that are public facts --------------------------------------------------------
@pytest.mark.backends("pandas", "duckdb", "spark", "dask")
def test_duplicate_column_names_are_refused_at_protect(constructor):
    """A pandas (or engine) frame may repeat a column name, even one no query names; the
    narwhals error was raw. Names are schema: refused before anything is read."""
    pdf = pd.DataFrame([[1.0, 2.0, 3.0]], columns=["x", "y", "y"])
    frame = pdf if constructor.name == "pandas" else None
    if constructor.name == "duckdb":
        import duckdb

        frame = duckdb.sql("select 1.0 as x, 2.0 as y, 3.0 as y")
    elif constructor.name == "spark":
        from conftest import spark_session

        frame = spark_session().createDataFrame([(1.0, 2.0, 3.0)], ["x", "y", "y"])
    elif constructor.name == "dask":
        import dask.dataframe as dd

        frame = dd.from_pandas(pdf, npartitions=1)
    with pytest.raises(dpf.UnsupportedInputError, match="'y' \\(2 times\\)"):
        dpf.protect(frame, epsilon=1.0, bounds={"x": (0, 5)})


def test_a_frame_without_columns_is_refused_not_counted_as_empty(constructor):
    """Polars gives a frame without columns no rows: ``dp.drop`` of every column answered
    count 0.0 for a frame of 4 rows. Refused from the schema, nothing spent."""
    pf, s = _protect(constructor)
    with pytest.raises(dpf.DerivationError, match="no columns"):
        pf.dp.drop("x", "y", "s", "g").dp.count(epsilon=0.5)
    if constructor.name == "polars-lazy":
        for derived in (pf.select([]), pf.drop("x", "y", "s", "g")):
            with pytest.raises(dpf.DerivationError, match="no columns"):
                derived.dp.count(epsilon=0.5)
    assert s.budget.epsilon_spent == 0


@pytest.mark.backends("dask")
def test_an_engine_failure_at_protect_is_a_dpframe_error_without_the_engine_text(constructor):
    import dask.dataframe as dd

    def fails_on_a_value(part: pd.DataFrame) -> pd.DataFrame:
        if (part["x"] > 2).any():
            raise RuntimeError("value 3.0 is secret")
        return part

    ddf = dd.from_pandas(pd.DataFrame({"x": [1.0, 2.0, 3.0]}), npartitions=1)
    graph = ddf.map_partitions(fails_on_a_value, meta=ddf._meta)
    with pytest.raises(dpf.UnsupportedInputError, match="nothing was protected") as info:
        dpf.protect(graph, epsilon=1.0, bounds={"x": (0, 5)})
    assert "secret" not in str(info.value) and "3.0" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("column", [5, None, 1.5, ["g", 3], b"g"])
def test_groupby_of_something_not_column_names_is_a_parameter_error(column):
    """``groupby`` takes a name or a list of names; anything else is a ParameterError that
    says so, raised before anything is read or spent (it was a bare TypeError)."""
    pf = dpf.protect(pd.DataFrame({"g": ["a", "b"] * 5, "x": np.arange(10.0)}), epsilon=1.0,
                     bounds={"x": (0.0, 10.0)}, keys={"g": ["a", "b"]})
    with pytest.raises(dpf.ParameterError, match="column name or a list of column names"):
        pf.dp.groupby(column)
    assert pf.dp.budget.epsilon_spent == 0 and len(pf.dp.log) == 0
