"""Step 2 of a release (:mod:`dpframe.release._pipeline`), the arguments: ε, δ, mechanism,
weights, random state, group keys — checked from public facts only; reads no data and spends
nothing (docs/architecture.md, "Module by module", step 5).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe._validation import check_ci, check_delta, check_epsilon, check_number, check_seed
from dpframe.errors import (
    ParameterError,
)
from dpframe.provenance import FrameFacts, check_key_list
from dpframe.query import checked_keys
from dpframe.query.statistics import Query
from dpframe.release._key_checks import declared_keys
from dpframe.release._records import GroupBy, Request

MECHANISMS = ("bounded", "truncated", "laplace", "auto")


_number = check_number


def _check_epsilon(epsilon: Any) -> float:
    return check_epsilon(epsilon, allow_zero=True)


def _check_delta(delta: Any, mechanism: str) -> float:
    d = check_delta(delta)
    if d > 0 and mechanism not in ("bounded", "auto"):
        raise ParameterError(
            f"mechanism={mechanism!r} does not use delta; pass delta=0 (or use "
            "mechanism='bounded', the only one that takes a delta)"
        )
    return d


def _check_mechanism(mechanism: Any) -> str:
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise ParameterError(
            f"unknown mechanism {mechanism!r}; choose one of 'auto' (default: the smaller "
            "worst-case error, chosen from public facts), 'bounded', 'truncated', 'laplace'"
        )
    return mechanism


_check_ci = check_ci


def _check_weights(names: list[str], weights: Any) -> tuple[float, ...]:
    if weights is None:
        return (1.0 / len(names),) * len(names)
    if isinstance(weights, Mapping):
        missing = [n for n in names if n not in weights]
        extra = [k for k in weights if k not in names]
        if missing or extra:
            raise ParameterError(
                f"weights must name exactly the queries {names}; missing {missing}, "
                f"unknown {extra}"
            )
        raw = [weights[n] for n in names]
    else:
        try:
            raw = list(weights)
        except TypeError:
            raise ParameterError(f"weights must be a list or a dict, got {weights!r}") from None
        if len(raw) != len(names):
            raise ParameterError(f"weights has {len(raw)} entries for {len(names)} queries")
    vals = [_number("weights", w) for w in raw]
    if any(not math.isfinite(w) or w <= 0 for w in vals):
        raise ParameterError(f"weights must be finite and > 0, got {raw!r}")
    total = sum(vals)
    if not math.isfinite(total):  # e.g. [1e308, 1e308]: the same shares, scaled down first
        top = max(vals)
        vals = [w / top for w in vals]
        total = sum(vals)
    shares = tuple(w / total for w in vals)
    zero = [n for n, share in zip(names, shares, strict=True) if not share > 0.0]
    if zero:
        raise ParameterError(
            f"weights {raw!r} give {zero} a share of epsilon that is 0 in floating point; "
            "use weights within a factor of about 1e300 of each other")
    return shares


def _check_random_state(random_state: Any) -> tuple[np.random.Generator | None, str]:
    """One generator for the whole release (seeded runs never reuse a stream)."""
    if random_state is None:
        return None, "secure"
    if isinstance(random_state, np.random.Generator):
        return random_state, "seeded"
    if isinstance(random_state, int | np.integer) and not isinstance(random_state, bool):
        return np.random.default_rng(check_seed("random_state", random_state)), "seeded"
    raise ParameterError(
        "random_state must be None (secure, the default), an int seed or a numpy Generator "
        f"(seeded randomness is for tests and simulations); got {type(random_state).__name__}"
    )


def check_request(
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any,
    weights: Any,
    mechanism: Any,
    random_state: Any,
    group_by: GroupBy | None,
    keys: Sequence[Any] | None,
    facts: FrameFacts,
    ci: Any = None,
    selection_share: Any = 0.5,
) -> Request:
    """Check every argument of a release; reads no data and spends nothing."""
    if not isinstance(queries, Mapping) or not queries:
        raise ParameterError(
            "release() takes a non-empty dict name -> query, e.g. {'n': dpf.count()}"
        )
    names = []
    for name, q in queries.items():
        if not isinstance(name, str) or not name:
            raise ParameterError(f"query names must be non-empty strings, got {name!r}")
        if not isinstance(q, Query):
            raise ParameterError(
                f"query {name!r} must be built with dpf.count(), dpf.mean(col), ...; got {q!r}"
            )
        names.append(name)
    mech = _check_mechanism(mechanism)
    eps = _check_epsilon(epsilon)
    dlt_raw = _number("delta", delta)
    selecting = group_by is not None and keys is None and any(
        c not in facts.keys for c in _columns_of(group_by))
    dlt = _check_delta(delta, "bounded" if selecting else mech)
    shares = _check_weights(names, weights)
    rng, source = _check_random_state(random_state)
    level = _check_ci(ci)
    key_tuple = None
    selection = None
    if selecting:
        if not dlt_raw > 0:
            raise ParameterError(_NO_KEYS.format(col=next(
                c for c in _columns_of(group_by) if c not in facts.keys)) + _NO_DELTA)
        selection = _number("selection_share", selection_share)
        if not 0.0 < selection < 1.0:
            raise ParameterError(f"selection_share must be in (0, 1) (the share of ε spent "
                                 f"selecting keys), got {selection_share!r}")
        group_by = _check_group_columns(group_by, names)
        group_by = group_by[0] if len(group_by) == 1 else group_by
    elif group_by is not None:
        group_by, key_tuple = _group_request(group_by, keys, names, facts)
    return Request(eps, dlt, mech, shares, rng, source, group_by, key_tuple, level, selection)


def _columns_of(group_by: Any) -> list[Any]:
    return [group_by] if isinstance(group_by, str) else list(group_by) if isinstance(
        group_by, Sequence) else [group_by]


def _check_group_columns(group_by: Any, names: list[str]) -> tuple[str, ...]:
    if type(group_by) is str and group_by not in names:  # (one column: every check passes)
        return (group_by,)
    cols = _columns_of(group_by)
    if not cols or not all(isinstance(c, str) for c in cols) or len(set(cols)) != len(cols):
        raise ParameterError(f"group-by must be a column name or a list of distinct column "
                             f"names, got {group_by!r}")
    clash = [c for c in cols if c in names]
    if clash:
        raise ParameterError(f"query names {clash} collide with the group-by columns")
    return tuple(cols)


def _group_request(group_by: Any, keys: Any, names: list[str], facts: FrameFacts
                   ) -> tuple[GroupBy, tuple[Any, ...]]:
    """The group-by column(s) and their public keys: one column with its keys, or several with
    key tuples (the product of each column's declared keys unless given explicitly)."""
    cols = list(_check_group_columns(group_by, names))
    if len(cols) == 1:
        declared = facts.keys.get(cols[0]) if keys is None else keys
        if declared is None:
            raise ParameterError(_NO_KEYS.format(col=cols[0]))
        return cols[0], declared_keys(cols[0], declared)
    if keys is None:
        missing = [c for c in cols if c not in facts.keys]
        if missing:
            raise ParameterError(_NO_KEYS.format(col=missing[0]))
        combos: tuple[Any, ...] = tuple(itertools.product(*(facts.keys[c] for c in cols)))
    else:
        combos = tuple(tuple(k) if isinstance(k, Sequence) and not isinstance(k, str) else
                       (k,) for k in check_key_list(tuple(cols), keys))
        if any(len(k) != len(cols) for k in combos):
            raise ParameterError(f"keys for a group-by on {cols} must be tuples of "
                                 f"{len(cols)} values, e.g. keys=[{tuple('…' for _ in cols)}]")
        for i, c in enumerate(cols):
            check_key_list(c, sorted({k[i] for k in combos}, key=repr))
    return tuple(cols), checked_keys(combos)


_NO_KEYS = (
    "group key column {col!r} has no declared keys: pass them, frame.dp.groupby({col!r}, "
    "keys=[...]), or declare them at protect time with keys={{{col!r}: [...]}}. Keys must be "
    "public; dpframe never reads them from the data"
)
_NO_DELTA = (
    " without selecting them privately: a release with delta > 0 (e.g. delta=1e-6, from a "
    "budget protected with a delta) selects the keys from the data with noisy counts and a "
    "threshold, publishing a key only one person holds with probability at most delta"
)
