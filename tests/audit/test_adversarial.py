"""Adversarial input matrix: every query × every bad input of the frames issue (item 9).

Each cell asserts the error type, that the message names the fix, and that the ledger is
unchanged (budget and log length). The same matrix is a table in ``docs/audit.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
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
BACKENDS = ["pandas", "polars"]
N = 30


def _frame(backend: str, x: Any = None, **extra: Any) -> Any:
    data = {"x": np.linspace(0.0, 10.0, N) if x is None else x,
            "s": ["a"] * N, "g": ["u", "v", "w"] * (N // 3), "y": np.ones(N)}
    data.update(extra)
    df = pd.DataFrame(data)
    return df if backend == "pandas" else pl.from_pandas(df)


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
    Bad("NaN in column", UnsupportedInputError, "nulls='drop'", "raise", False),
    Bad("None/null in column", UnsupportedInputError, "nulls='drop'", "raise", False),
    Bad("+inf in column", UnsupportedInputError, "nulls='drop'", "raise", False),
    Bad("-inf in column", UnsupportedInputError, "nulls='drop'", "raise", False),
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


def _scenario(bad: Bad, backend: str, query: str) -> tuple[Any, Any, Any]:
    """Return (ledger-holder session or None, callable that triggers the case, checker)."""
    name = bad.name
    if "at protect" in name:
        s = dpf.Session()
        if "reversed" in name:
            frame, bounds = _frame(backend), {"x": (10.0, 0.0)}
        elif "non-finite" in name:
            frame, bounds = _frame(backend), {"x": (0.0, math.inf)}
        else:
            frame, bounds = _frame(backend).head(0), {"x": (0.0, 10.0)}
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
    frame = _frame(backend, x)
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
        _ask(pf, "count", epsilon=0.95, session=s)
    elif name.startswith("delta > 0"):
        kw.update(delta=1e-6, mechanism=name.split("'")[1])
        # the budget has δ so that only the mechanism can refuse it
    elif name == "unknown mechanism name":
        kw["mechanism"] = "gaussian"
    elif name == "empty derived frame":
        target = pf[pf["x"] > 100] if backend == "pandas" else pf.filter(pl.col("x") > 100)

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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.name)
def test_adversarial_matrix(bad: Bad, query: str, backend: str):
    if query == "count" and not bad.count_applies:
        pytest.skip("count reads no column")
    session, call, _pf = _scenario(bad, backend, query)
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
    assert after.epsilon_spent == pytest.approx(before[0].epsilon_spent + 0.1, rel=1e-12)
    entries = session.ledger.entries[before[1]:]
    assert entries
    if bad.name == "values outside bounds":
        if query != "count":
            assert all("clamped" in e["clamping"] for e in entries)
        if query == "mean":
            assert 0.0 <= float(out) <= 10.0
    elif bad.name == "empty derived frame":
        assert all(e["size"] == "private" for e in entries)
        assert math.isfinite(float(out))
    else:  # undeclared key never revealed
        keys = out["g"].to_list() if backend == "polars" else out["g"].tolist()
        assert keys == ["u", "v"]


# -- the analyses (proportions, cov, corr, describe) ------------------------------------------
ANALYSES = {
    "proportions": lambda ns, **kw: ns.proportions("g", keys=["u", "v", "w"], **kw),
    "cov": lambda ns, **kw: ns.cov(["x", "y"], **kw),
    "corr": lambda ns, **kw: ns.corr(["x", "y"], **kw),
    "describe": lambda ns, **kw: ns.describe(columns=["x", "y"], **kw),
}
NOT_FOR = {  # cases that do not apply: proportions reads no numeric column
    "proportions": {"NaN in column", "missing bounds for the column", "derived frame (cov/corr)"},
    "describe": {"derived frame (cov/corr)"},
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
    ("NaN in column", {}, "nan", UnsupportedInputError, "clean them"),
    ("missing bounds for the column", {}, "unbounded", BoundsError, "bounds="),
    ("derived frame (cov/corr)", {}, "derived", PrivateSizeError, "protected frame"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("query", list(ANALYSES))
@pytest.mark.parametrize("case", ANALYSIS_BAD, ids=lambda c: c[0])
def test_adversarial_matrix_analyses(case, query: str, backend: str, request):
    name, kwargs, tweak, error, fix = case
    if name in NOT_FOR.get(query, set()):
        pytest.skip("does not apply")
    x = np.r_[np.nan, np.linspace(0, 10, N - 1)] if tweak == "nan" else None
    frame = _frame(backend, x, z=np.linspace(-1, 1, N))
    bounds = {"x": (0.0, 10.0), "z": (-1.0, 1.0)}
    pf, s = _protect(frame, bounds=bounds, keys={"g": ["u", "v", "w"]})
    target = pf
    if tweak == "derived":
        target = pf[pf["x"] > 3] if backend == "pandas" else pf.filter(pl.col("x") > 3)
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
