"""What the releases of a test hand to the result-table builder, for the tests comparing a
fast table path with the general one (tests/frames/test_results_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dpframe.frames import results


def recorded_outcomes(monkeypatch: pytest.MonkeyPatch,
                      releases: Callable[[], object]) -> list[tuple[Any, Any]]:
    """The ``(outcome, edges)`` pairs ``releases()`` passes to ``results.to_frame`` or
    ``results.release_table`` (once per table: not again to the ``to_frame`` that
    ``release_table`` may call), in order, recorded while the real builders build the tables
    (restored afterwards)."""
    outcomes: list[tuple[Any, Any]] = []
    to_frame, release_table = results.to_frame, results.release_table
    inside = [0]

    def keep(out: Any, edges: Any = None) -> Any:
        if not inside[0]:
            outcomes.append((out, edges))
        return to_frame(out, edges)

    def keep_release(out: Any, edges: Any = None) -> Any:
        outcomes.append((out, edges))
        inside[0] += 1
        try:
            return release_table(out, edges)
        finally:
            inside[0] -= 1

    with monkeypatch.context() as patched:
        patched.setattr(results, "to_frame", keep)
        patched.setattr(results, "release_table", keep_release)
        releases()
    return outcomes
