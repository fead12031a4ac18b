"""Validation of public facts: the declared bounds and group keys of a protected frame,
checked from the arguments alone (never computed from the data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpframe._validation import is_real_number
from dpframe.errors import (
    BoundsError,
    ParameterError,
)
from dpframe.query import Keys, checked_keys

__all__ = ["check_key_list", "validate_bounds", "validate_keys"]


def validate_bounds(bounds: Any) -> dict[str, tuple[float, float]]:
    """Check declared bounds: a mapping column → (lower, upper), finite, lower < upper."""
    if not isinstance(bounds, Mapping):
        raise BoundsError(
            "bounds must be a mapping column -> (lower, upper), e.g. "
            "bounds={'age': (0, 120)}; bounds are public and never computed from the data"
        )
    out: dict[str, tuple[float, float]] = {}
    for col, pair in bounds.items():
        try:
            if isinstance(pair, str | bytes) or not all(is_real_number(v) for v in pair):
                raise TypeError
            lo, hi = (float(v) for v in pair)
        except (TypeError, ValueError, OverflowError):
            raise BoundsError(
                f"bounds for {col!r} must be a (lower, upper) pair of numbers, got {pair!r}"
            ) from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise BoundsError(
                f"bounds for {col!r} must be finite, got ({lo!r}, {hi!r}); declare the "
                "narrowest finite range you know from outside the data"
            )
        if lo > hi:
            raise BoundsError(
                f"bounds for {col!r} are reversed: lower={lo:g} > upper={hi:g}; "
                f"write ({hi:g}, {lo:g})"
            )
        if lo == hi:
            raise BoundsError(
                f"bounds for {col!r} are empty (lower == upper == {lo:g}); a constant column "
                "needs no privacy: widen the bounds or drop the column"
            )
        if not isinstance(col, str):
            raise ParameterError(f"column names must be strings, got {col!r}")
        out[col] = (lo, hi)
    return out


def validate_keys(keys: Any) -> dict[str, Keys]:
    """Check declared group keys: a mapping column → non-empty list of distinct public keys."""
    if keys is None:
        return {}
    if not isinstance(keys, Mapping):
        raise ParameterError("keys must be a mapping column -> list of public group keys")
    return {str(c): checked_keys(check_key_list(c, v)) for c, v in keys.items()}


def check_key_list(column: Any, keys: Any) -> list[Any]:
    """A list of distinct, non-missing public keys for ``column``."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence | set | frozenset):
        raise ParameterError(
            f"keys for {column!r} must be a list of public values, e.g. keys=['north', 'south']"
        )
    out = list(keys)
    if not out:
        raise ParameterError(f"keys for {column!r} is empty; declare at least one public key")
    kinds = set(map(type, out))  # one pass in C; per-key Python only where floats may be NaN
    if type(None) in kinds or (not kinds <= {int, str, bool} and any(
            isinstance(k, float) and k != k for k in out)):
        raise ParameterError(f"keys for {column!r} must not contain None/NaN")
    try:
        distinct = len(set(out)) == len(out)
    except TypeError:
        raise ParameterError(f"keys for {column!r} must be hashable values, got {out!r}") from None
    if not distinct:
        raise ParameterError(f"keys for {column!r} contain duplicates: {out!r}")
    return out
