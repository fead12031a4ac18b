"""One check per kind of parameter, used by every layer (protect, the ledger, releases, the
planner): the same value is accepted or refused — with the same message — wherever it is
passed. Each check reads only its argument and raises :class:`~dpframe.errors.ParameterError`
(a ``DPFrameError``) before anything is read or spent.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from dpframe.errors import ParameterError

__all__ = [
    "check_alpha",
    "check_ci",
    "check_column",
    "check_count",
    "check_delta",
    "check_epsilon",
    "check_head",
    "check_labels",
    "check_names",
    "check_number",
    "check_quantile_delta",
    "check_quantile_mechanism",
    "check_seed",
    "is_real_number",
]

#: Mechanism names a quantile accepts: the exponential mechanism is the only one for them.
QUANTILE_MECHANISMS = ("auto", "exponential")
_NOISE_MECHANISMS = ("bounded", "truncated", "laplace")


def is_real_number(value: Any) -> bool:
    """A real number in the sense of :class:`numbers.Real` (int, float, numpy numbers,
    Fraction) that is not a boolean (``True == 1`` in Python): strings, ``Decimal`` (whose
    conversion to float rounds silently) and bools are not."""
    kind = type(value)
    if kind is float or kind is int:  # (the common case, without the ABC's dispatch)
        return True
    import numpy as np

    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def check_number(name: str, value: Any) -> float:
    """``value`` as a float; only real numbers are accepted (:func:`is_real_number`)."""
    if not is_real_number(value):
        raise ParameterError(f"{name} must be a number (int or float), got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(f"{name} must be a number that fits a float, got {value!r}") from None


def check_epsilon(value: Any, *, allow_zero: bool = False) -> float:
    """A privacy budget or charge ε: finite and > 0 (≥ 0 where a zero charge is meaningful,
    e.g. a release answered from public facts)."""
    eps = check_number("epsilon", value)
    if not math.isfinite(eps) or eps < 0 or (eps == 0 and not allow_zero):
        raise ParameterError(
            f"epsilon must be a finite number > 0, got {value!r}; e.g. epsilon=0.1"
        )
    return eps


def check_delta(value: Any) -> float:
    """δ: finite, in [0, 1)."""
    d = check_number("delta", value)
    if not math.isfinite(d) or d < 0 or d >= 1:
        raise ParameterError(f"delta must be in [0, 1), got {value!r}; typical values are "
                             "≤ 1e-6")
    return d


def check_ci(value: Any) -> float | None:
    """A confidence level in (0, 1), or None (no interval)."""
    if value is None:
        return None
    level = check_number("ci", value)
    # 1 − level is the interval's α; a level below 2⁻⁵³ rounds it to 1 (no interval at all)
    if not 0.0 < level < 1.0 or not 1.0 - level < 1.0:
        raise ParameterError(f"ci must be a confidence level in (0, 1), e.g. ci=0.95; got "
                             f"{value!r}")
    return level


def check_alpha(value: Any) -> float:
    """The α of an accuracy statement (the half-width holds with probability 1 − α): in (0, 1)."""
    a = check_number("alpha", value)
    if not 0.0 < a < 1.0:
        raise ParameterError(f"alpha must be in (0, 1), e.g. alpha=0.05; got {value!r}")
    return a


def check_count(name: str, value: Any, *, minimum: int = 0, maximum: int = 2**53) -> int:
    """A whole number of rows (or groups, bins) in [``minimum``, ``maximum``]: ints and numpy
    integers only (the default maximum, 2⁵³, is the largest count every double holds exactly)."""
    import numpy as np

    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) \
            or not minimum <= value <= maximum:
        raise ParameterError(f"{name} must be a whole number in [{minimum}, {maximum}], got "
                             f"{value!r}")
    return int(value)


def check_column(value: Any, name: str = "column") -> str:
    """One column name: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ParameterError(f"{name} must be a column name (a non-empty string), got "
                             f"{type(value).__name__}")
    return value


def check_names(name: str, value: Any, *, what: str = "column names") -> list[Any]:
    """A list or tuple of ``what`` (a single string is one name): any other object —
    a number, a mapping, a set with no order — is refused."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple):
        raise ParameterError(f"{name} must be a list of {what}, e.g. {name}=['a', 'b']; got "
                             f"{type(value).__name__}")
    return list(value)


def check_quantile_mechanism(value: Any) -> str:
    """``mechanism=`` of a quantile: ``"auto"`` or ``"exponential"`` (the same mechanism).
    Quantiles select a bin with the exponential mechanism; the Laplace family adds noise to a
    number and does not apply, so its names are refused rather than ignored."""
    if isinstance(value, str) and value in QUANTILE_MECHANISMS:
        return "exponential"
    if isinstance(value, str) and value in _NOISE_MECHANISMS:
        raise ParameterError(
            f"mechanism={value!r} adds Laplace noise to a number and does not apply to "
            "quantiles, which use the exponential mechanism (a noisy choice of a bin); pass "
            "mechanism='auto' or mechanism='exponential'")
    raise ParameterError(f"unknown mechanism {value!r} for a quantile; choose 'auto' or "
                         "'exponential' (the only mechanism for quantiles)")


def check_quantile_delta(mechanism: Any, delta: Any) -> float:
    """``delta=`` of a quantile: in [0, 1); as for the Laplace family, a δ > 0 with a named
    mechanism that uses none (``"exponential"``, like ``"truncated"``) is refused; under
    ``"auto"`` it is the most the release may spend, charged only where something uses it (a
    key selection; never the quantile itself)."""
    d = check_delta(delta)
    if d > 0 and mechanism == "exponential":
        raise ParameterError(
            "mechanism='exponential' does not use delta; pass delta=0 (or mechanism='auto', "
            "under which a delta is charged only where it is used, e.g. to select keys)")
    return d


def check_seed(name: str, value: Any) -> int:
    """A non-negative integer seed (numpy integers accepted; booleans are not)."""
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ParameterError(f"{name} must be a non-negative int seed, got {value!r}")
    return int(value)


def check_head(value: Any) -> tuple[int, str]:
    """A ledger head digest as ``dpframe inspect LEDGER --head`` prints it,
    ``"<seq>:<hex>"`` (the release number and the first 32, or all 64, hex digits of that
    release line's chained hash, :mod:`dpframe.accounting.durable`); returns ``(seq, hex)``."""
    import re

    m = re.fullmatch(r"([0-9]{1,18}):([0-9a-f]{32}|[0-9a-f]{64})", value.strip().lower()) \
        if isinstance(value, str) else None
    if m is None:
        raise ParameterError(
            f"expect_head must be a ledger head as printed by `dpframe inspect LEDGER --head` "
            f"(\"<release>:<32 hex digits>\", e.g. \"12:3f2a…\"), got {value!r}"
        )
    return int(m.group(1)), m.group(2)

def check_labels(analysis: str, columns: Iterable[Any], labels: Iterable[str]) -> None:
    """The columns an analysis reports next to its own label columns (``describe``: a
    ``statistic`` column; ``cov``/``corr``: ``column``, and ``statistic`` with ``ci=``) in a
    Polars result: a data column of the same name would replace the labels. Refused on every
    backend (pandas labels rows by its index, but one call must behave alike everywhere)."""
    clash = sorted(set(labels) & {c for c in columns if isinstance(c, str)})
    if clash:
        raise ParameterError(
            f"{analysis}: column(s) {clash} have the name of a label column of its result "
            f"table ({', '.join(map(repr, sorted(set(labels))))}); rename them first, e.g. "
            f"frame.dp.rename({{{clash[0]!r}: {clash[0] + '_'!r}}}). Nothing was read or spent."
        )
