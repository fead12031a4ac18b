"""The kept bad-input matrix: every parameter of every public call × values chosen to break it.

Each cell calls one public entry point (a `.dp` method of a frame or a group-by, a query builder,
or `protect`) with one argument replaced by a hostile value, the others valid. The call must
either answer or raise a `DPFrameError` — never a generic Python, numpy, narwhals or engine
exception — and a refused call must spend nothing. The parameters are read from the methods'
signatures, so a parameter added later is in the matrix without an edit here.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf

HOSTILE: list[Any] = [
    None, True, False, "0.5", "x", b"1", Decimal("0.5"), complex(1, 1), math.nan, math.inf,
    -math.inf, -1, 0, 5e-324, 1e-300, 1e308, 10**400, -(10**400), [], [0.5], ["x", "x"], {},
    {"x": 1}, object(), np.float64("nan"), np.array([1.0, 2.0]), Fraction(1, 3), (0, 1),
]

# (entry point, positional arguments, keyword arguments) that answer on the base frame
FRAME_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "count": ((), {"epsilon": 0.1}),
    "mean": (("x",), {"epsilon": 0.1}),
    "sum": (("x",), {"epsilon": 0.1}),
    "std": (("x",), {"epsilon": 0.1}),
    "var": (("x",), {"epsilon": 0.1}),
    "variance": (("x",), {"epsilon": 0.1}),
    "median": (("x",), {"epsilon": 0.1}),
    "quantile": (("x", 0.25), {"epsilon": 0.1}),
    "histogram": (("x",), {"edges": [0.0, 2.0, 5.0], "epsilon": 0.1}),
    "value_counts": (("g",), {"keys": ["u", "v"], "epsilon": 0.1}),
    "proportions": (("g",), {"keys": ["u", "v"], "epsilon": 0.1}),
    "corr": ((["x", "y"],), {"epsilon": 0.1}),
    "cov": ((["x", "y"],), {"epsilon": 0.1}),
    "describe": ((), {"columns": ["x"], "epsilon": 0.1}),
    "release": (({"m": dpf.mean("x"), "n": dpf.count()},), {"epsilon": 0.1}),
    "accuracy": (({"m": dpf.mean("x")},), {"epsilon": 0.1}),
    "epsilon_for": ((dpf.mean("x"), 0.5), {}),
    "split": (({"m": (dpf.mean("x"), 0.5)},), {"epsilon": 0.1}),
}
GROUP_CALLS = {name: FRAME_CALLS[name] for name in (
    "count", "mean", "sum", "std", "var", "variance", "median", "quantile", "release",
    "accuracy")}
BUILDER_CALLS: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {
    "dpf.mean": (dpf.mean, ("x",), {}),
    "dpf.sum": (dpf.sum, ("x",), {}),
    "dpf.std": (dpf.std, ("x",), {}),
    "dpf.variance": (dpf.variance, ("x",), {}),
    "dpf.median": (dpf.median, ("x",), {}),
    "dpf.quantile": (dpf.quantile, ("x", 0.5), {}),
    "dpf.histogram": (dpf.histogram, ("x",), {"bins": 3}),
    "dpf.value_counts": (dpf.value_counts, ("g",), {"keys": ["u", "v"]}),
    "dpf.proportions": (dpf.proportions, ("g",), {"keys": ["u", "v"]}),
    "dpf.cov": (dpf.cov, (["x", "y"],), {}),
    "dpf.corr": (dpf.corr, (["x", "y"],), {}),
}
PROTECT_KW: dict[str, Any] = {"epsilon": 100.0, "delta": 1e-6,
                              "bounds": {"x": (0, 5), "y": (0, 1)},
                              "keys": {"g": ["u", "v"]}}


def _base_frame() -> pd.DataFrame:
    return pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 0.5, 4.5], "y": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0],
                         "g": ["u", "v", "u", "v", "u", "v"]})


def _protected() -> tuple[Any, dpf.Session]:
    session = dpf.Session()
    return dpf.protect(_base_frame(), session=session, **PROTECT_KW), session


def _cells(method: Callable[..., Any], args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every (args, kwargs) with one parameter of `method` replaced by one hostile value."""
    cells = []
    params = [p for p in inspect.signature(method).parameters.values()
              if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    for index, param in enumerate(params):
        for value in HOSTILE:
            if param.kind is inspect.Parameter.KEYWORD_ONLY or index >= len(args):
                if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                    continue
                cells.append((args, {**kwargs, param.name: value}))
            else:
                cells.append(((*args[:index], value, *args[index + 1:]), kwargs))
    return cells


def _run_cell(call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
              session: dpf.Session | None) -> str | None:
    """None if the cell behaved (answered, or refused with a DPFrameError spending nothing)."""
    before = session.budget.epsilon_remaining if session is not None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(*args, **kwargs)
    except dpf.DPFrameError:
        if session is not None and session.budget.epsilon_remaining != before:
            return "refused after spending"
        return None
    except Exception as exc:  # the point: no generic exception may escape
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


def _failures(cells: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]],
              session: dpf.Session | None) -> list[str]:
    out = []
    for label, call, args, kwargs in cells:
        problem = _run_cell(call, args, kwargs, session)
        if problem is not None:
            out.append(f"{label}{args!r:.60} {kwargs!r:.80}: {problem}")
    return out


def _namespace_cells(group: bool) -> tuple[list[Any], dpf.Session]:
    frame, session = _protected()
    table = GROUP_CALLS if group else FRAME_CALLS
    cells = []
    for name, (args, kwargs) in table.items():
        target = frame.dp.groupby("g", keys=["u", "v"]) if group else frame.dp
        method = getattr(target, name)
        cells += [(name, method, a, k) for a, k in _cells(method, args, kwargs)]
    return cells, session


def test_frame_methods_answer_or_refuse_with_dpframe_errors() -> None:
    cells, session = _namespace_cells(group=False)
    assert len(cells) >= 1500
    assert _failures(cells, session) == []


def test_group_by_methods_answer_or_refuse_with_dpframe_errors() -> None:
    cells, session = _namespace_cells(group=True)
    assert len(cells) >= 800
    assert _failures(cells, session) == []


def test_builders_and_protect_answer_or_refuse_with_dpframe_errors() -> None:
    cells = []
    for name, (builder, args, kwargs) in BUILDER_CALLS.items():
        cells += [(name, builder, a, k) for a, k in _cells(builder, args, kwargs)]
    protect_args = (_base_frame(),)
    cells += [("protect", dpf.protect, a, {"session": dpf.Session(), **k})
              for a, k in _cells(dpf.protect, protect_args, PROTECT_KW)
              if "session" not in k]
    assert len(cells) >= 300
    assert _failures(cells, None) == []


@pytest.mark.parametrize("bad_session", HOSTILE[:8], ids=repr)
def test_session_argument_answers_or_refuses(bad_session: Any) -> None:
    frame, session = _protected()
    problem = _run_cell(frame.dp.mean, ("x",), {"epsilon": 0.1, "session": bad_session}, session)
    assert problem is None
