"""The schema of a protected frame is read once, at protect (names and dtypes, public), and the
first release on the frame plans from it: no second conversion of the schema through narwhals,
no second question to the engine for a column's dtype; the same seeded answer and log entries
as a release that reads the schema itself; derived frames and schemas that cannot be read at
protect are left to the release, as before."""

from __future__ import annotations

import warnings
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import engine, release
from dpframe.engine import _schema
from dpframe.provenance import _facts, resolve
from dpframe.release._pipeline import exact_measurements

ENGINES = ["pandas", "polars", "polars-lazy"]


def _frame(kind: str, x: list[float]) -> Any:
    data = {"x": np.array(x), "k": np.arange(len(x)) % 3}
    if kind == "pandas":
        return pd.DataFrame(data)
    df = pl.DataFrame(data)
    return df.lazy() if kind == "polars-lazy" else df


def _protect(kind: str, x: list[float]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(_frame(kind, x), epsilon=10.0, bounds={"x": (0.0, 10.0)},
                           missing="lower")


def _release(pf: Any) -> tuple[list[float], list[dict[str, Any]]]:
    out = release.run(pf, {"m": dpf.mean("x"), "n": dpf.count()}, epsilon=1.0,
                      random_state=11)
    entries = [{k: v for k, v in e.items() if k not in ("time", "ledger_id")} for e in out.entries]
    return [float(out.values[q][0]) for q in ("m", "n")], entries


X = [1.0, 2.5, 9.0, 4.0, 7.5]


@pytest.mark.parametrize("kind", ENGINES)
def test_first_release_plans_from_the_schema_read_at_protect(kind: str, monkeypatch) -> None:
    pf = _protect(kind, X)
    facts = resolve(pf)
    backend = facts.dataset.backend
    assert engine.engine_dtypes(facts.data) == backend.schema(facts.data)
    assert engine.frame_columns(facts.data, immutable=True) == \
        dict(nw.from_native(facts.data).collect_schema().items())

    def asked(*_: Any, **__: Any) -> Any:
        raise AssertionError("the schema was read again on the first release")

    engine.engine_name(facts.data)  # (the log's engine name: once per frame type, not per frame)
    with monkeypatch.context() as m:  # the first release asks neither narwhals nor the engine
        m.setattr(_schema.nw, "from_native", asked)
        m.setattr(type(backend), "column_dtype", asked)
        first = _release(pf)
    with monkeypatch.context() as m:  # the same bits as a frame whose schema the release reads
        m.setattr(_facts, "remember_schema", lambda *_: None)
        unread = _protect(kind, X)
        assert engine.engine_dtypes(resolve(unread).data) is None
        assert _release(unread) == first


@pytest.mark.parametrize("kind", ENGINES)
def test_neighbouring_frames_release_alike(kind: str) -> None:
    """One value replaced: the same outcome class and log (sensitivities included), and the
    exact measurements within the logged sensitivity."""
    x_b = [*X[:-1], 0.0]
    (a, log_a), (b, log_b) = _release(_protect(kind, X)), _release(_protect(kind, x_b))
    assert log_a == log_b and np.isfinite(a).all() and np.isfinite(b).all()
    exact_a, exact_b = (exact_measurements(_protect(kind, x), {"m": dpf.mean("x")})
                        for x in (X, x_b))
    for part, (value, sensitivity) in exact_a.items():
        assert abs(float(value[0]) - float(exact_b[part][0][0])) <= sensitivity


def test_derived_frames_and_unreadable_schemas_are_left_to_the_release(monkeypatch) -> None:
    pf = _protect("polars", X)
    derived = pf.dp.with_columns((nw.col("x") / 2).alias("h"), bounds={"h": (0.0, 5.0)})
    assert engine.engine_dtypes(resolve(derived).data) is None  # (no cost for a derivation)
    assert 0.0 <= derived.dp.mean("h", epsilon=1.0, random_state=1) <= 5.0

    def fails(*_: Any, **__: Any) -> Any:
        raise RuntimeError("no schema now")

    with monkeypatch.context() as m:  # protect does not fail on a schema it cannot read here
        m.setattr(_facts, "remember_schema", fails)
        later = _protect("pandas", X)
    assert engine.engine_dtypes(resolve(later).data) is None
    assert _release(later) == _release(_protect("pandas", X))
