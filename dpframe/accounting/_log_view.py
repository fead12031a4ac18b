"""Reading a log entry the way its reader thinks: what statistic it is and in what range.

The log records what the *mechanism* did: a histogram is a count per bin (``query`` count,
grouped by dpframe's hidden bin column), a mean over a public-size frame adds noise to the
shifted mean ``Σ(x − l)/n`` on ``[0, u − l]``. That stays the record. For display (``dpframe
inspect``, the report page, notebook views) this module names the statistic as the user asked
for it and states domains in the user's coordinates:

* :func:`statistic` — ``"histogram of age"``, ``"value counts of sex"``, ``"mean of age by
  region"``, ``"count"``;
* :func:`declared_bounds` — the bounds each read column was clamped to (the ``clamping``
  field, as logged);
* :func:`user_domain` — the mechanism's domain moved back by the shift its formulation
  used: ``[l, u]`` for the public-size mean (noise on ``[0, u − l]``), ``[n·l, n·u]`` for the
  public-size sum (noise on ``[0, n·(u − l)]``, ``n`` read back from that width); every other
  formulation adds its noise in the statistic's own coordinates, shown as logged.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["BIN_COLUMN", "columns_of", "declared_bounds", "domain_text", "statistic", "user_domain"]

#: dpframe's hidden bin column (dpframe.frames.bins.BIN), as a histogram's log names it
BIN_COLUMN = "__dpframe_bin"

_CLAMP = re.compile(r"^(?P<col>.+?) clamped to \[(?P<lo>[^,\]]+), (?P<hi>[^\]]+)\]")
_NAMED = re.compile(r"^(?P<kind>histogram|value_counts)\((?P<col>.*)\)$")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def statistic(entry: Mapping[str, Any]) -> str:
    """The statistic an entry belongs to, as a user would name it."""
    query, name = _text(entry.get("query")), _text(entry.get("name"))
    group = entry.get("group_by")
    if isinstance(group, str) and group.startswith("["):  # a list, as JSON text
        with contextlib.suppress(ValueError):
            group = json.loads(group)
    group_text = (", ".join(map(str, group)) if isinstance(group, list | tuple)
                  else _text(group).replace(",", ", "))
    named = _NAMED.match(name)
    parts = [g.strip() for g in group_text.split(",") if g.strip()]
    if BIN_COLUMN in parts or (named and named["kind"] == "histogram"):
        others = [g for g in parts if g != BIN_COLUMN]
        return ("histogram" + (f" of {named['col']}" if named and named["col"] else "")
                + (f" by {', '.join(others)}" if others else ""))
    if named:  # value_counts(col)
        return f"value counts of {named['col']}"
    cols = _text(entry.get("columns")).replace(",", ", ")
    text = "value counts" if query == "value_counts" else (query or "statistic")
    if cols:
        text += f" of {cols}"
    if group_text:
        text += f" by {group_text}"
    return text


def columns_of(entry: Mapping[str, Any]) -> list[str]:
    """The columns the statistic reads: the logged ``columns``, or for a histogram or value
    counts (a count per bin or key, logged with no column) the column named in ``name``."""
    cols = [c for c in _text(entry.get("columns")).split(",") if c]
    named = _NAMED.match(_text(entry.get("name")))
    return cols or ([named["col"]] if named and named["col"] else [])


def declared_bounds(entry: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """The bounds each column read by the entry was clamped to, from its ``clamping`` field
    (``"age clamped to [18, 95] in the engine; ..."``); empty for a row count. As logged:
    6 significant digits."""
    out: dict[str, tuple[float, float]] = {}
    for part in _text(entry.get("clamping")).split("; "):
        m = _CLAMP.match(part)
        if m:
            try:
                out[m["col"]] = (float(m["lo"]), float(m["hi"]))
            except ValueError:
                continue
    return out


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def user_domain(entry: Mapping[str, Any]) -> tuple[float | None, float | None, float]:
    """``(lower, upper, shift)``: the entry's domain in the statistic's coordinates, and the
    shift added to the mechanism's (``lower = domain_lower + shift``; None is unbounded)."""
    lo, hi = _num(entry.get("domain_lower")), _num(entry.get("domain_upper"))
    formulation = _text(entry.get("formulation"))
    bounds = list(declared_bounds(entry).values())
    shift = 0.0
    if len(bounds) == 1 and formulation.startswith("shifted mean"):
        shift = bounds[0][0]
    elif (len(bounds) == 1 and formulation.startswith("shifted sum") and hi is not None
          and bounds[0][1] > bounds[0][0]):
        n = round(hi / (bounds[0][1] - bounds[0][0]))
        shift = n * bounds[0][0]
    if shift:
        lo = None if lo is None else lo + shift
        hi = None if hi is None else hi + shift
    return lo, hi, shift


def domain_text(entry: Mapping[str, Any]) -> str:
    """``[18, 95]`` (and, where the mechanism worked on shifted values, how)."""
    lo, hi, shift = user_domain(entry)
    text = f"[{_fmt(lo, '−∞')}, {_fmt(hi, '∞')}]"
    if shift:
        raw_lo, raw_hi = _num(entry.get("domain_lower")), _num(entry.get("domain_upper"))
        text += (f" (noise added on [{_fmt(raw_lo, '−∞')}, {_fmt(raw_hi, '∞')}], "
                 f"shifted by {_fmt(shift, '')})")
    return text


def _fmt(x: float | None, unbounded: str) -> str:
    if x is None:
        return unbounded
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.6g}"
