"""Issue 33, item 4: one word at ``protect`` names a data-independent fill for every bounded
column (``missing="lower"``, ``"upper"``, ``"midpoint"``), so clean data keeps its public size
without a ``missing={col: value}`` per column and without a ``PrivateSizeWarning``; columns
bounded later on a ``with_columns`` follow the word, or get protect's notice without one."""

from __future__ import annotations

import math
import warnings
from typing import Any

import narwhals as nw
import numpy as np
import pytest
from helpers.neighbours import base_data, protect, with_row

import dpframe as dpf
from dpframe.provenance import _protect as provenance
from dpframe.release._pipeline import exact_measurements

BOUNDS = {"age": (0.0, 100.0), "income": (0.0, 1000.0)}


def _notices(call: Any) -> tuple[Any, list[str]]:
    """What ``call`` returns, and the PrivateSizeWarnings it issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught
                    if issubclass(w.category, dpf.PrivateSizeWarning)]


def test_each_word_is_its_public_number():
    rules = provenance.validate_missing({"age": "lower", "income": "midpoint"}, BOUNDS)
    assert rules == {"age": 0.0, "income": 500.0}
    assert provenance.validate_missing("upper", BOUNDS) == {"age": 100.0, "income": 1000.0}
    # a mapping's unnamed columns take the default (a word too)
    assert provenance.validate_missing({"age": 5}, BOUNDS, default="midpoint") == {
        "age": 5.0, "income": 500.0}
    extreme = {"x": (-1.7e308, 1.7e308)}
    assert provenance.validate_missing("midpoint", extreme) == {"x": 0.0}  # no overflow


@pytest.mark.parametrize("backend", ["pandas", "polars-lazy"])
def test_a_word_keeps_n_public_without_a_notice_and_the_default_still_warns(backend):
    data = with_row(base_data(), income=math.nan)
    pf, notes = _notices(lambda: protect(backend, data, missing="lower"))
    assert notes == []
    pf.dp.release({"m": dpf.mean("income"), "r": dpf.corr(["age", "income"])}, epsilon=1.0)
    entries = pf.dp.session.ledger.snapshot_document()["entries"]
    assert {e["size"] for e in entries} == {"public"}  # corr needs the public n: answered
    assert "filled with the public value 0" in entries[0]["missing"]
    _, notes = _notices(lambda: protect(backend, base_data()))
    assert len(notes) == 1 and "'age', 'income'" in notes[0]
    assert "missing='lower' at dpf.protect" in notes[0]


@pytest.mark.parametrize("missing", ["low", {"age": "mid"}, {"zzz": "lower"}, {"g": "lower"}])
def test_a_bad_word_is_refused_before_anything_is_read(monkeypatch, missing):
    def no_read(*args: Any) -> Any:
        raise AssertionError("protect read the frame")

    monkeypatch.setattr(provenance, "_snapshot", no_read)
    with pytest.raises(dpf.ParameterError, match=r"fill word|without declared bounds"):
        protect("pandas", base_data(), missing=missing)


def test_with_columns_follows_the_word_or_warns_like_protect():
    derive = lambda f, **kw: f.dp.with_columns(  # noqa: E731
        (nw.col("age") * 2).alias("age2"), bounds={"age2": (0.0, 200.0)}, **kw)
    pf = protect("pandas", base_data(), missing="midpoint")
    derived, notes = _notices(lambda: derive(pf))
    assert notes == [] and derived.dp.is_size_public
    assert provenance.resolve(derived).missing["age2"] == 100.0
    quiet = protect("pandas", base_data(), missing={"age": 1.0, "income": 1.0})
    derived, notes = _notices(lambda: derive(quiet))
    assert len(notes) == 1 and "'age2'" in notes[0] and "on this with_columns" in notes[0]
    assert provenance.resolve(derived).missing["age2"] == "drop"
    assert _notices(lambda: derive(quiet, missing="drop"))[1] == []
    derived, notes = _notices(lambda: derive(quiet, missing="upper"))
    assert notes == [] and provenance.resolve(derived).missing["age2"] == 200.0
    spent = quiet.dp.budget.epsilon_spent
    for bad in ("mid", {"age": "lower"}):  # unknown word; a column this step does not bound
        with pytest.raises(dpf.ParameterError):
            derive(quiet, missing=bad)
    assert quiet.dp.budget.epsilon_spent == spent


PAIRS = {"null vs value": ({"age": math.nan}, {"age": 30.0}),
         "infinite vs value": ({"age": math.inf}, {"age": 50.0})}


@pytest.mark.parametrize("view", ["root", "with_columns"])
@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("backend", ["pandas", "polars-lazy"])
def test_neighbours_under_a_word_same_outcome_and_within_sensitivity(backend, pair, view):
    """A row missing the value and a row holding one: the same outcome class and log, and
    each exact statistic moves by at most its logged sensitivity (the fill is public)."""
    queries = {"sum": dpf.sum, "mean": dpf.mean, "variance": dpf.variance}
    outcomes, exact = [], []
    for row in PAIRS[pair]:
        root = protect(backend, with_row(base_data(), **row), missing="midpoint")
        frame = root if view == "root" else root.dp.with_columns(
            (nw.col("age") * 2).alias("age"), bounds={"age": (0.0, 200.0)})
        asked = {name: make("age") for name, make in queries.items()}
        try:
            table = frame.dp.release(asked, epsilon=1.0, random_state=3)
            entries = frame.dp.session.ledger.snapshot_document()["entries"]
            log = [{k: v for k, v in e.items() if k not in ("time", "ledger_id", "release_id")}
                   for e in entries]
            outcomes.append(("ok", table.shape, log))
        except dpf.DPFrameError as exc:  # pragma: no cover - would be the bug under test
            outcomes.append(("error", type(exc).__name__))
        exact.append(exact_measurements(frame, asked))
    assert outcomes[0][0] == "ok" and outcomes[0] == outcomes[1]
    assert {e["size"] for e in outcomes[0][2]} == {"public"}
    for key, (values, sensitivity) in exact[0].items():
        other, sensitivity2 = exact[1][key]
        assert sensitivity == sensitivity2
        assert np.all(np.abs(values - other) <= sensitivity), (key, values, other)


def test_a_word_on_a_frame_without_missing_values_changes_no_release():
    clean = {"age": np.linspace(1, 99, 40).tolist(), "income": np.linspace(5, 900, 40).tolist(),
             "g": ["a", "b"] * 20}
    answers = [protect("pandas", clean, missing=m).dp.mean("income", epsilon=1.0,
                                                            random_state=4)
               for m in ("lower", "upper", {"age": 3.0, "income": 7.0})]
    assert answers[0] == answers[1] == answers[2]
