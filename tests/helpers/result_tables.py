"""What the releases of a test hand to the result-table builder, for the tests comparing a
fast table path with the general one (tests/frames/test_results_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dpframe.frames import results


def recorded_outcomes(monkeypatch: pytest.MonkeyPatch,
                      releases: Callable[[], object]) -> list[tuple[Any, Any]]:
    """The ``(outcome, edges)`` pairs ``releases()`` passes to ``results.to_frame``, in order,
    recorded while the real ``to_frame`` builds the tables (restored afterwards)."""
    outcomes: list[tuple[Any, Any]] = []
    to_frame = results.to_frame

    def keep(out: Any, edges: Any = None) -> Any:
        outcomes.append((out, edges))
        return to_frame(out, edges)

    with monkeypatch.context() as patched:
        patched.setattr(results, "to_frame", keep)
        releases()
    return outcomes
