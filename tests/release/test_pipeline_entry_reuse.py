"""A repeated query copies the log entry its plan wrote the first time
(:meth:`dpframe.release._entries.LogContext.planned_entry`): every field but the time is a
function of public facts, so the copies must be exactly the entries written afresh, in the
same order, and a release whose shared fields differ (seeded randomness, another ε) must not
get another release's entry. Also :func:`dpframe.query._plans.clip_one` against ``np.clip``."""

from __future__ import annotations

import itertools
import math
import struct
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.provenance import resolve
from dpframe.query._plans import clip_one
from dpframe.release import _plan_cache

STAMPS = ("time", "release_id", "ledger_id")


def _protected(change: float | None = None) -> Any:
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"x": rng.uniform(0, 10, 60), "g": rng.integers(0, 3, 60)})
    if change is not None:
        df.loc[0, "x"] = change
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(df, epsilon=100, bounds={"x": (0, 10)}, missing={"x": 5.0},
                           keys={"g": [0, 1, 2]})


def _releases(frame: Any) -> list[list[list[tuple[str, Any]]]]:
    """Each release's entries as ordered (field, value) lists, without time and id."""
    out: dict[int, list[list[tuple[str, Any]]]] = {}
    for entry in resolve(frame, None).dataset.ledger.entries:
        out.setdefault(entry["release_id"], []).append(
            [(k, v) for k, v in entry.items() if k not in STAMPS])
    return list(out.values())


def _ask(frame: Any) -> None:
    frame.dp.mean("x", epsilon=0.5)
    frame.dp.mean("x", epsilon=0.5, random_state=3)  # seeded: another random source
    frame.dp.mean("x", epsilon=0.5)
    frame.dp.sum("x", epsilon=0.25)
    frame.dp.groupby("g").mean("x", epsilon=0.5)
    frame.dp.groupby("g").mean("x", epsilon=0.5)


def test_copied_entries_are_the_entries_written_afresh(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    reused = _protected()
    _ask(reused)
    monkeypatch.setattr(_plan_cache, "_PLANS_PER_FRAME", 0)  # no plan kept: nothing copied
    fresh = _protected()
    _ask(fresh)
    got, expected = _releases(reused), _releases(fresh)
    assert got == expected
    assert got[0] == got[2] and got[4] == got[5]  # the repeats
    sources = [dict(r[0])["random_source"] for r in got[:3]]
    assert sources == ["secure", "seeded", "secure"]


def test_neighbours_get_the_same_copied_entries() -> None:
    logs = []
    for change in (None, 9.9):
        frame = _protected(change)
        _ask(frame)
        logs.append(_releases(frame))
    assert logs[0] == logs[1]


def test_the_entry_of_a_release_is_its_own() -> None:
    frame = _protected()
    frame.dp.mean("x", epsilon=0.5)
    frame.dp.mean("x", epsilon=0.5)
    log = frame.dp.log
    assert list(log["release_id"]) == [1, 2]
    assert log["time"].iloc[0] <= log["time"].iloc[1]


SPECIAL = [-math.inf, -1.5, -0.0, 0.0, 5e-324, -5e-324, 1.0, 100.0, math.inf]


def test_clip_one_is_np_clip_bit_for_bit() -> None:
    for x, lo, hi in itertools.product([*SPECIAL, math.nan], SPECIAL, SPECIAL):
        expected = float(np.clip(np.array([x]), lo, hi)[0])
        assert struct.pack("<d", clip_one(x, lo, hi)) == struct.pack("<d", expected), (x, lo, hi)
