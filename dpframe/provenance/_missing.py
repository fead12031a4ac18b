"""Missing values: a column's missing-value policy is ``"drop"`` (rows missing the column
are left out of statistics of that column; the size becomes private) or a public fill
value (given as a number or as a fill word, :data:`FILL_WORDS`, which
:func:`validate_missing` resolves).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dpframe.errors import (
    BoundsError,
    ParameterError,
)

__all__ = ["DROP", "FILL_WORDS", "Missing", "fill_word", "validate_missing"]

DROP = "drop"

#: A column's missing-value policy: ``"drop"`` (rows missing the column are left out of
#: statistics of that column; the size becomes private) or a public fill value (given as a
#: number or as a fill word, :data:`FILL_WORDS`, which :func:`validate_missing` resolves).
Missing = str | float


#: The fill words: a public fill value named by the column's declared bounds, never by its
#: data. ``missing="lower"`` fills a missing value with the column's lower bound, ``"upper"``
#: with its upper bound, ``"midpoint"`` with ``(lower + upper) / 2``. Each is a function of
#: public facts only, so a filled column keeps the public size n (a row missing the value and
#: a row holding the fill are then the same row: a neighbour pair differs in one row as
#: before, within the column's bounds, so the sensitivity is unchanged).
FILL_WORDS: dict[str, Callable[[float, float], float]] = {
    "lower": lambda lo, hi: lo,
    "upper": lambda lo, hi: hi,
    "midpoint": lambda lo, hi: lo / 2 + hi / 2,  # (halves first: no overflow near the max)
}


def validate_missing(
    missing: Any, bounds: Mapping[str, tuple[float, float]], default: Missing = DROP
) -> dict[str, Missing]:
    """Per-column missing-value policy for the bounded columns.

    ``missing`` is ``"drop"``, a fill word (:data:`FILL_WORDS`: ``"lower"``, ``"upper"``,
    ``"midpoint"``), a number (fill every column with it), or a mapping column → any of
    those; columns a mapping does not name (and every column when ``missing`` is None) get
    ``default``. A fill value must lie within the column's bounds (it is public and is never
    computed from data); a word is resolved here to its column's number, so everything after
    sees a number. Checks public arguments only.
    """
    if isinstance(missing, Mapping):
        unknown = [c for c in missing if c not in bounds]
        if unknown:
            raise ParameterError(
                f"missing= names columns without declared bounds: {unknown}; declare their "
                "bounds too (a missing-value policy applies to bounded columns, and a fill "
                "word such as 'lower' is read from the bounds)"
            )
        policies = {c: missing.get(c, default) for c in bounds}
    else:
        policies = dict.fromkeys(bounds, default if missing is None else missing)
    return {col: _policy(col, policy, bounds[col]) for col, policy in policies.items()}


def _policy(col: str, policy: Any, bounds: tuple[float, float]) -> Missing:
    """One column's checked policy: ``"drop"`` or a number within ``bounds``."""
    lo, hi = bounds
    if isinstance(policy, str):
        if policy == DROP:
            return DROP
        if policy in FILL_WORDS:
            return FILL_WORDS[policy](lo, hi)
        raise ParameterError(
            f"missing policy for {col!r} must be 'drop', a fill word ("
            + ", ".join(repr(w) for w in FILL_WORDS)
            + f": a bound or the midpoint of the bounds) or a number within the bounds, got "
            f"{policy!r}"
        )
    if isinstance(policy, bool) or not isinstance(policy, int | float):
        raise ParameterError(
            f"missing policy for {col!r} must be 'drop', a fill word ('lower', 'upper', "
            f"'midpoint') or a number, got {policy!r}"
        )
    try:
        value = float(policy)
    except OverflowError:
        raise BoundsError(f"fill value for {col!r} is too large for a float") from None
    if not (lo <= value <= hi):
        raise BoundsError(
            f"fill value {value:g} for {col!r} lies outside its bounds [{lo:g}, {hi:g}]; "
            "missing='lower' (or 'upper', 'midpoint') names a fill inside them"
        )
    return value


def fill_word(missing: Any) -> str | None:
    """The fill word given for every column (``missing="lower"``...), else None."""
    return missing if isinstance(missing, str) and missing in FILL_WORDS else None
