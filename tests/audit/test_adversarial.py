"""Adversarial input matrix: every query × every bad input of the frames issue (item 9), on
every backend (the ``constructor`` fixture).

Each refused cell asserts the error type, that the message names the fix, and that the ledger
is unchanged (budget and log length). Bad *values* (NaN, null, ±inf, out of bounds) are no
longer refusals (issue 10: a refusal after reading the data is a free channel): those cells
assert the release succeeds, spends its ε, stays in its domain and logs the missing-value
policy and clamping. Only the cells that apply are generated (count reads no column). The same
matrix is a table in ``docs/audit.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import narwhals as nw
import numpy as np
import pytest

import dpframe as dpf
from dpframe.errors import (
    BoundsError,
    BudgetExceededError,
    ParameterError,
    PrivateSizeError,
    UnsupportedInputError,
)

QUERIES = ["count", "sum", "mean", "variance", "std"]
N = 30
DROPPED = "x: rows missing it are dropped (size private)"


def _frame(constructor: Any, x: Any = None, n: int = N, **extra: Any) -> Any:
    data = {"x": np.linspace(0.0, 10.0, n) if x is None else x,
            "s": ["a"] * n, "g": (["u", "v", "w"] * n)[:n], "y": np.ones(n)}
    data.update(extra)
    return constructor(data)


def _protect(frame: Any, **kw: Any) -> tuple[Any, dpf.Session]:
    s = dpf.Session()
    kw.setdefault("bounds", {"x": (0.0, 10.0)})
    kw.setdefault("epsilon", 1.0)
    return dpf.protect(frame, session=s, **kw), s


def _ask(frame: Any, query: str, column: str = "x", session: Any = None, **kw: Any) -> Any:
    kw.setdefault("epsilon", 0.1)
    if session is not None:
        kw["session"] = session
    if query == "count":
        return frame.dp.count(**kw)
    return getattr(frame.dp, query)(column, **kw)


@dataclass(frozen=True)
class Bad:
    name: str
    error: type | None  # None: accepted by design (see ``behaviour``)
    fix: str  # a phrase the message must contain
    behaviour: str
    count_applies: bool = True


BAD = [
    Bad("missing bounds for the column", BoundsError, "bounds=", "raise", False),
    Bad("bounds reversed (at protect)", BoundsError, "write (", "raise at protect"),
    Bad("bounds non-finite (at protect)", BoundsError, "finite", "raise at protect"),
    Bad("column not in frame", UnsupportedInputError, "available columns", "raise", False),
    Bad("non-numeric column", UnsupportedInputError, "cast it to a number", "raise", False),
    Bad("NaN in column", None, DROPPED, "release; dropped under the default policy", False),
    Bad("None/null in column", None, DROPPED, "release; dropped under the default policy",
        False),
    Bad("+inf in column", None, "clamped", "release; clamped to the upper bound", False),
    Bad("-inf in column", None, "clamped", "release; clamped to the lower bound", False),
    Bad("values outside bounds", None, "clamped", "clamp; log says clamping applied"),
    Bad("empty frame (at protect)", UnsupportedInputError, "protect the full data set",
        "raise at protect"),
    Bad("empty derived frame", None, "", "release (private size) inside the domain"),
    Bad("epsilon = 0", ParameterError, "epsilon=0.1", "raise"),
    Bad("epsilon < 0", ParameterError, "epsilon=0.1", "raise"),
    Bad("epsilon NaN", ParameterError, "epsilon=0.1", "raise"),
    Bad("epsilon inf", ParameterError, "epsilon=0.1", "raise"),
    Bad("epsilon > remaining", BudgetExceededError, "smaller epsilon", "raise"),
    Bad("delta > 0 with mechanism='truncated'", ParameterError, "delta=0", "raise"),
    Bad("delta > 0 with mechanism='laplace'", ParameterError, "delta=0", "raise"),
    Bad("unknown mechanism name", ParameterError, "choose one of", "raise"),
    Bad("group-by column without declared keys", ParameterError, "keys=", "raise"),
    Bad("data has a key not declared", None, "", "undeclared key never appears"),
]


def _scenario(bad: Bad, constructor: Any, query: str) -> tuple[Any, Any, Any]:
    """Return (ledger-holder session or None, callable that triggers the case, checker)."""
    name = bad.name
    if "at protect" in name:
        s = dpf.Session()
        if "reversed" in name:
            frame, bounds = _frame(constructor), {"x": (10.0, 0.0)}
        elif "non-finite" in name:
            frame, bounds = _frame(constructor), {"x": (0.0, math.inf)}
        else:
            frame, bounds = _frame(constructor, n=0), {"x": (0.0, 10.0)}
        return s, lambda: dpf.protect(frame, epsilon=1.0, bounds=bounds, session=s), None
    x = None
    if name == "NaN in column":
        x = np.r_[np.nan, np.linspace(0, 10, N - 1)]
    elif name == "None/null in column":
        x = [None, *np.linspace(0, 10, N - 1)]
    elif name == "+inf in column":
        x = np.r_[np.inf, np.linspace(0, 10, N - 1)]
    elif name == "-inf in column":
        x = np.r_[-np.inf, np.linspace(0, 10, N - 1)]
    elif name == "values outside bounds":
        x = np.linspace(-50.0, 50.0, N)
    frame = _frame(constructor, x)
    keys = {"g": ["u", "v"]} if "key not declared" in name else None
    pf, s = _protect(frame, keys=keys)
    kw: dict[str, Any] = {"session": s}
    target, column = pf, "x"
    if name == "missing bounds for the column":
        column = "y"
    elif name == "column not in frame":
        column = "zz"
    elif name == "non-numeric column":
        column = "s"
    elif name == "epsilon = 0":
        kw["epsilon"] = 0.0
    elif name == "epsilon < 0":
        kw["epsilon"] = -1.0
    elif name == "epsilon NaN":
        kw["epsilon"] = math.nan
    elif name == "epsilon inf":
        kw["epsilon"] = math.inf
    elif name == "epsilon > remaining":
        _ask(pf, "mean", "x", epsilon=0.95, session=s)
    elif name.startswith("delta > 0"):
        kw.update(delta=1e-6, mechanism=name.split("'")[1])
        # the budget has δ so that only the mechanism can refuse it
    elif name == "unknown mechanism name":
        kw["mechanism"] = "gaussian"
    elif name == "empty derived frame":
        target = pf.dp.filter(nw.col("x") > 100)
    if query == "count" and target is pf:
        # the count of the protected frame is its public size, released exactly for free:
        # a count that spends (and can be refused) is the count of a derived frame
        target = pf.dp.filter(nw.col("x").is_null() | ~nw.col("x").is_null())

    if name in ("group-by column without declared keys", "data has a key not declared"):
        def call() -> Any:
            gb = target.dp.groupby("g")
            if query == "count":
                return gb.count(epsilon=0.1, session=s)
            return getattr(gb, query)(column, epsilon=0.1, session=s)
    else:
        def call() -> Any:
            return _ask(target, query, column, **kw)
    return s, call, pf


MATRIX = [pytest.param(bad, query, id=f"{bad.name}-{query}")
          for bad in BAD for query in QUERIES if query != "count" or bad.count_applies]


@pytest.mark.parametrize(("bad", "query"), MATRIX)
def test_adversarial_matrix(bad: Bad, query: str, constructor):
    if constructor.name == "spark" and bad.name.startswith("empty frame"):
        pytest.skip("Spark cannot infer a schema for the test constructor's empty columns")
    session, call, _pf = _scenario(bad, constructor, query)
    bound = session.dataset is not None
    before = (session.budget, len(session.ledger.entries)) if bound else None
    if bad.error is not None:
        with pytest.raises(bad.error) as info:
            call()
        assert bad.fix in str(info.value), str(info.value)
        if bound:
            assert (session.budget, len(session.ledger.entries)) == before
        else:
            assert session.dataset is None  # nothing was created, nothing can be spent
        return
    # accepted by design
    out = call()
    after = session.budget
    entries = session.ledger.entries[before[1]:]
    assert entries
    # a count of a frame whose size is public is that public size: released exactly, free
    free = query == "count" and all(e["size"] == "public" for e in entries)
    spent = 0.0 if free else 0.1
    assert after.epsilon_spent == pytest.approx(before[0].epsilon_spent + spent, rel=1e-12)
    if bad.name in ("values outside bounds", "+inf in column", "-inf in column"):
        if query != "count":
            assert all("clamped to [0, 10]" in e["clamping"] for e in entries)
            assert all(e["missing"] == DROPPED for e in entries)
        _in_domain(query, float(out))
    elif bad.name in ("NaN in column", "None/null in column"):
        assert all(e["missing"] == DROPPED for e in entries)
        assert all(e["size"] == "private" for e in entries)  # rows dropped: n is private
        _in_domain(query, float(out))
    elif bad.name == "empty derived frame":
        assert all(e["size"] == "private" for e in entries)
        assert all(e["derivation"] == "protect > filter" for e in entries)
        _in_domain(query, float(out))
    else:  # undeclared key never revealed
        assert constructor.column(out, "g") == ["u", "v"]


def _in_domain(query: str, value: float) -> None:
    """The answer lies in the statistic's domain for values in [0, 10] and n ≤ N."""
    assert math.isfinite(value)
    lo, hi = {"count": (0, N), "sum": (0, 10 * N), "mean": (0, 10), "variance": (0, 25 * N),
              "std": (0, 5 * N)}[query]
    if query == "sum":  # a private-size sum is released on [0, ∞)
        hi = math.inf
    assert lo <= value <= hi, (query, value)


# -- the analyses (proportions, cov, corr, describe) ------------------------------------------
ANALYSES = {
    "proportions": lambda ns, **kw: ns.proportions("g", keys=["u", "v", "w"], **kw),
    "cov": lambda ns, **kw: ns.cov(["x", "y"], **kw),
    "corr": lambda ns, **kw: ns.corr(["x", "y"], **kw),
    "describe": lambda ns, **kw: ns.describe(columns=["x", "y"], **kw),
}
#: cases that do not apply (never generated): proportions reads no numeric column, and
#: describe answers on any verified frame (size-free formulations)
NOT_FOR = {
    "proportions": {"columns that drop missing values (cov/corr)", "missing bounds for the column",
                    "derived frame (cov/corr)"},
    "describe": {"columns that drop missing values (cov/corr)", "derived frame (cov/corr)"},
}
EPS_FIX = "epsilon must be a finite number > 0"
ANALYSIS_BAD = [
    # name, kwargs for the call, frame tweak, error, phrase in message
    ("epsilon = 0", {"epsilon": 0.0}, None, ParameterError, EPS_FIX),
    ("epsilon NaN", {"epsilon": math.nan}, None, ParameterError, EPS_FIX),
    ("epsilon inf", {"epsilon": math.inf}, None, ParameterError, EPS_FIX),
    ("epsilon > remaining", {"epsilon": 5.0}, None, BudgetExceededError, "smaller epsilon"),
    ("unknown mechanism name", {"mechanism": "gaussian"}, None, ParameterError, "'bounded'"),
    ("delta > 0 with mechanism='truncated'", {"delta": 1e-6, "mechanism": "truncated"}, None,
     ParameterError, "delta=0"),
    # cov/corr need the public n: under "drop" a float column's size is private. The refusal
    # reads only the dtype and the declared policy, so a NaN in the data changes nothing.
    ("columns that drop missing values (cov/corr)", {}, "drop", PrivateSizeError,
     "missing='lower'"),
    ("missing bounds for the column", {}, "unbounded", BoundsError, "bounds="),
    ("derived frame (cov/corr)", {}, "derived", PrivateSizeError, "protected frame"),
]
ANALYSIS_MATRIX = [pytest.param(case, query, id=f"{case[0]}-{query}")
                   for case in ANALYSIS_BAD for query in ANALYSES
                   if case[0] not in NOT_FOR.get(query, set())]
FILL = {"x": 5.0, "z": 0.0}  # public fill values: the size stays public for cov/corr


@pytest.mark.parametrize(("case", "query"), ANALYSIS_MATRIX)
def test_adversarial_matrix_analyses(case, query: str, constructor):
    _name, kwargs, tweak, error, fix = case
    x = np.r_[np.nan, np.linspace(0, 10, N - 1)] if tweak == "drop" else None
    frame = _frame(constructor, x, z=np.linspace(-1, 1, N))
    bounds = {"x": (0.0, 10.0), "z": (-1.0, 1.0)}
    pf, s = _protect(frame, bounds=bounds, keys={"g": ["u", "v", "w"]},
                     missing="drop" if tweak == "drop" else FILL)
    target = pf
    if tweak == "derived":
        target = pf.dp.filter(nw.col("x") > 3)
    columns_call = ANALYSES[query]
    if query in ("cov", "corr", "describe"):
        cols = ["x", "y"] if tweak == "unbounded" else ["x", "z"]
        if query == "describe":
            def columns_call(ns, **kw):
                return ns.describe(columns=cols, **kw)
        else:
            def columns_call(ns, **kw):
                return getattr(ns, query)(cols, **kw)
    kw = {"epsilon": 0.1, "session": s, **kwargs}
    before = (s.budget, len(s.ledger.entries))
    with pytest.raises(error) as info:
        columns_call(target.dp, **kw)
    assert fix in str(info.value), str(info.value)
    assert (s.budget, len(s.ledger.entries)) == before


@pytest.mark.parametrize("query", list(ANALYSES))
@pytest.mark.parametrize("x0", [np.nan, None, np.inf, -np.inf, 1e308])
def test_analyses_never_refuse_a_value(query: str, x0, constructor):
    """A NaN, null, ±inf or huge finite value in the data: the analysis is answered, in its
    domain, with the log fields its clean neighbour gets (issue 10 item 1)."""
    logs = []
    for first in (x0, 0.0):
        x = [first, *np.linspace(0, 10, N - 1)]
        pf, s = _protect(_frame(constructor, x, z=np.linspace(-1, 1, N)),
                         bounds={"x": (0.0, 10.0), "z": (-1.0, 1.0)},
                         keys={"g": ["u", "v", "w"]}, missing=FILL)
        cols = ["x", "z"]
        if query == "describe":
            out = pf.dp.describe(columns=cols, epsilon=0.5, random_state=1)
        elif query == "proportions":
            out = pf.dp.proportions("g", keys=["u", "v", "w"], epsilon=0.5, random_state=1)
            assert sum(constructor.values(out, "proportion")) == pytest.approx(1.0)
        else:
            out = getattr(pf.dp, query)(cols, epsilon=0.5, random_state=1)
            m = constructor.values(out, "x")
            assert np.all(np.isfinite(m))
            if query == "corr":
                assert np.all(np.abs(m) <= 1.0)
        assert s.budget.epsilon_spent == pytest.approx(0.5)
        # (a covariance's sensitivity is computed from the released variances: post-processing
        # of noisy values, so it is not compared)
        logs.append([{k: e[k] for k in ("part", "size", "missing", "clamping", "sensitivity",
                                         "epsilon", "formulation")
                      if k != "sensitivity" or not e["part"].startswith("covariance")}
                     for e in s.ledger.entries])
    assert logs[0] == logs[1]
