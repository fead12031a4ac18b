"""A table's log is the ledger's log as of that table's release: the snapshot is taken in the
commit's critical section, so a release another thread commits right after it is never in it
(review of 2026-11-29: table A's sealed log held B's release when A's snapshot came after B's
commit). The window is widened by a pause after the commit in thread A."""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.accounting.seals import check_seal, release_log_of
from dpframe.release import _pipeline


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "durable"])
def test_a_release_committed_after_a_table_is_not_in_its_log(
        durable: bool, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    session = dpf.Session(path=tmp_path / "ledger.jsonl") if durable else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = pd.DataFrame({"x": np.linspace(0, 1, 50)})
        pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0.0, 1.0)}, missing="lower",
                         session=session)
    after_commit = _pipeline.released_selection

    def paused(*args: Any) -> Any:
        if threading.current_thread().name == "A":
            time.sleep(0.2)  # B commits now
        return after_commit(*args)

    monkeypatch.setattr(_pipeline, "released_selection", paused)
    out: dict[str, Any] = {}

    def release(name: str, bins: int) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[name] = pf.dp.histogram("x", bins=bins, epsilon=0.5, random_state=1)

    a = threading.Thread(target=release, args=("A", 3), name="A")
    b = threading.Thread(target=release, args=("B", 5), name="B")
    a.start()
    time.sleep(0.05)
    b.start()
    a.join()
    b.join()
    for name in ("A", "B"):
        log = release_log_of(out[name])
        assert max(e["release_id"] for e in log["entries"]) == max(log["release_ids"])
        check_seal(log, out[name])
