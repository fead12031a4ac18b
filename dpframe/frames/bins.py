"""The public bins of ``histogram``: checking edges, equal-width edges over declared bounds, and
the verified row-wise step that gives each row its bin.

Semantics (unchanged since the first histogram): with public, strictly increasing finite edges
``e_0 < e_1 < … < e_B``, bin ``j`` is ``[e_j, e_{j+1})`` and the last bin is closed; a value
below ``e_0`` goes to bin 0 and a value above ``e_B`` (``+inf`` included) to bin ``B − 1``.
Equivalently, the bin of ``x`` is the number of *inner* edges ``e_1 … e_{B−1}`` with ``e ≤ x``
(IEEE comparison: ``-0.0`` equals ``0.0``). Missing values (null or NaN) follow the column's
missing-value rule: dropped (in no bin), or counted in the bin of the public fill value.

The bin is computed by a binary search over the inner edges in every engine
(:data:`dpframe.rowwise.functions.SEARCH_EDGES`), so a histogram over k edges costs
O(log k) per row; the step is an ordinary verified derivation (a new column; no row used
twice), compiled by dpframe for the frame's engine like any other. Its verification depends on
public facts alone (the column's name and dtype, the fill value's bin), so it is made once per
such triple and a new frame's first histogram reuses it (:func:`bin_step`). On a pandas
column of numpy's ``float64``, the pandas backend reads this step from its structure and
computes it with numpy's binary search, the same bins value for value
(:mod:`dpframe.backends.pandas._bins`); every other column goes through the engine's
compilation.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import narwhals as nw
import numpy as np

from dpframe import provenance
from dpframe import provenance as derivations
from dpframe._util.identity import IdentityMap
from dpframe._validation import check_number
from dpframe.errors import ParameterError
from dpframe.rowwise.functions import SEARCH_EDGES
from dpframe.rowwise.nodes import Call, When, walk

__all__ = ["BIN", "CACHED_BINS", "MAX_BINS", "bin_step", "binned_frame", "equal_width_edges",
           "histogram_edges", "public_edges"]

#: The hidden column holding each row's bin.
BIN = "__dpframe_bin"

#: The most bins a histogram takes (a public cap: the result has one row per bin).
MAX_BINS = 1_000_000


def public_edges(edges: Any, name: str = "edges") -> list[float]:
    """``edges`` as a list of floats: at least two finite numbers (booleans and strings are
    refused), strictly increasing, at most :data:`MAX_BINS` bins. ``-0.0`` is read as
    ``0.0`` (they compare equal)."""
    example = f"e.g. {name}=[0, 18, 65, 120]"
    if isinstance(edges, str | bytes | Mapping):
        raise _not_a_list(name, example, edges)
    try:
        items = list(edges)
    except TypeError:
        raise _not_a_list(name, example, edges) from None
    if len(items) - 1 > MAX_BINS:
        raise ParameterError(f"{name}: at most {MAX_BINS:,} bins, got {len(items) - 1:,}")
    values = _float64_array(edges) if type(edges) is np.ndarray else _plain_floats(items)
    if values is None:  # numpy numbers, Fractions, ... (and what is refused): one by one
        values = [check_number(name, e) + 0.0 for e in items]
    if len(values) < 2 or not all(map(math.isfinite, values)) or not all(
            map(operator.lt, values, itertools.islice(values, 1, None))):
        raise ParameterError(f"{name} must be at least two finite, strictly increasing "
                             f"numbers, {example}")
    return values


def _not_a_list(name: str, example: str, edges: Any) -> ParameterError:
    return ParameterError(f"{name} must be a list of numbers (public edges), {example}; "
                          f"got {type(edges).__name__}")


def _float64_array(edges: np.ndarray) -> list[float] | None:
    """A one-dimensional float64 array's values as Python floats (``+ 0.0``: ``-0.0`` read as
    ``0.0``), what the item-by-item check gives for ``np.float64`` items, in one numpy call;
    None for another dtype or shape (checked item by item)."""
    if edges.dtype != np.float64 or edges.ndim != 1:
        return None
    values: list[float] = (edges + 0.0).tolist()
    return values


#: The types whose values :func:`_plain_floats` reads as they are (exact types: not bool).
_PLAIN_NUMBERS = frozenset({float, int})


def _plain_floats(items: list[Any]) -> list[float] | None:
    """``items`` as floats (``+ 0.0``: ``-0.0`` read as ``0.0``) when every item is exactly a
    Python ``float`` or ``int`` (never ``bool``, a subclass of ``int``: the type itself is
    compared, not ``isinstance``), the numbers :func:`check_number` accepts as they are. None
    for any other item, or an int beyond the doubles (then each item is checked, and refused,
    there). The same list the item-by-item check gives, without a call per edge."""
    if not _PLAIN_NUMBERS.issuperset(map(type, items)):
        return None
    try:
        return [e + 0.0 for e in map(float, items)]
    except OverflowError:
        return None


def equal_width_edges(lower: float, upper: float, count: int) -> list[float]:
    """The ``count + 1`` edges of ``count`` equal-width bins of ``[lower, upper]``:
    ``e_j = round(l + (u − l)·j/B)``, the exact rational value rounded once to the nearest
    double (so ``e_0 = l`` and ``e_B = u`` exactly, no overflow even when ``u − l`` exceeds
    the largest double, and the edges are as evenly spaced as doubles allow). Refused
    (:class:`~dpframe.errors.ParameterError`) when two neighbouring edges round to the same
    double: the bins would be narrower than the doubles between the bounds.

    The edges are a function of the three public numbers alone, so up to
    :data:`CACHED_BINS` bins they are computed once per ``(lower, upper, count)``
    (:func:`_cached_edges`, a small table of public facts; no data and no result is kept);
    each call gets its own list."""
    lower, upper, count = float(lower), float(upper), int(count)
    if count <= CACHED_BINS:
        return list(_cached_edges(lower, upper, count))
    return list(_edges(lower, upper, count))


#: The most bins whose equal-width edges are kept (64 sets of them at most).
CACHED_BINS = 4096


@functools.lru_cache(maxsize=64)
def _cached_edges(lower: float, upper: float, count: int) -> tuple[float, ...]:
    return _edges(lower, upper, count)


def _edges(lower: float, upper: float, count: int) -> tuple[float, ...]:
    lo, hi = Fraction(lower), Fraction(upper)
    width = hi - lo
    edges = [float(lo + width * j / count) for j in range(count + 1)]
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise ParameterError(f"bins={count}: equal-width bins of [{lower!r}, {upper!r}] would "
                             "be narrower than the spacing of floating-point numbers there; "
                             "use fewer bins")
    return tuple(e + 0.0 for e in edges)


def histogram_edges(column: str, edges: Any, bins: Any,
                    bounds: Mapping[str, tuple[float, float]]) -> list[float]:
    """The public edges of ``histogram(column, edges=..., bins=...)`` (public facts only):
    ``edges`` as given; ``bins`` an integer ``B`` for ``B`` equal-width bins over the
    column's declared bounds (:func:`equal_width_edges`); ``bins`` a list of edges is the
    former spelling of ``edges`` (a :class:`DeprecationWarning`)."""
    if edges is not None and bins is not None:
        raise ParameterError("pass the bin edges as edges=[...] or a number of equal-width bins "
                             "as bins=<int>, not both")
    if edges is not None:
        return public_edges(edges)
    if bins is None:
        raise ParameterError("histogram needs edges=[...] (public bin edges) or bins=<int> "
                             "(equal-width bins over the column's declared bounds)")
    if isinstance(bins, int | np.integer) and not isinstance(bins, bool | np.bool_):
        count = int(bins)
        if not 1 <= count <= MAX_BINS:
            raise ParameterError(f"bins must be a number of bins from 1 to {MAX_BINS:,}, "
                                 f"got {count}")
        if column not in bounds:
            raise ParameterError(f"bins={count} splits the declared bounds of {column!r}, but "
                                 "it has none; declare bounds={...} at protect (or "
                                 "with_columns), or pass public edges=[...]")
        lower, upper = bounds[column]
        return equal_width_edges(float(lower), float(upper), count)
    if isinstance(bins, bool | float | str | bytes):
        raise ParameterError(f"bins must be an integer number of bins (or pass edges=[...]), "
                             f"got {bins!r}")
    warnings.warn("histogram(bins=[...]) for edges is deprecated; pass edges=[...] (bins=<int> "
                  "now means that many equal-width bins over the declared bounds)",
                  DeprecationWarning, stacklevel=3)
    return public_edges(bins, "bins")


def bin_step(column: str, edges: Sequence[float], facts: provenance.FrameFacts,
             schema: Mapping[str, Any]) -> derivations.Step:
    """The verified ``with_columns`` step adding :data:`BIN`: each row's bin over ``edges``,
    or (missing value, ``"drop"`` rule) a missing bin; under a fill rule, the fill value's
    bin. The frame around the search (the cast to Float64, the test for a missing value, the
    fill) is read from a narwhals expression verified like any derivation
    (:func:`_verified_frame`); the search itself is dpframe's
    :data:`~dpframe.rowwise.functions.SEARCH_EDGES` node over the inner edges, put in the
    verified tree's ``then`` branch."""
    inner = tuple(float(e) + 0.0 for e in edges[1:-1])
    policy = facts.missing.get(column, provenance.DROP)
    fill = None if policy == provenance.DROP else bisect.bisect_right(inner, float(policy))
    step = _verified_frame(column, schema, fill)
    ((name, tree),) = step.columns
    assert isinstance(tree, When), tree
    subject = next(node.args[0] for node in walk(tree.predicate)
                   if isinstance(node, Call) and node.name == "BooleanFunction.IsNull")
    search = Call(tree.then.dtype, SEARCH_EDGES, (subject,), (inner,))
    return dataclasses.replace(step, outputs=dict(step.outputs),
                               columns=((name, dataclasses.replace(tree, then=search)),))


def _verified_frame(column: str, schema: Mapping[str, Any], fill: int | None
                    ) -> derivations.Step:
    """The verified step of ``when(x present).then(0).otherwise(fill)`` (``x`` the column
    cast to Float64; no ``otherwise`` when ``fill`` is None: a missing bin), the frame
    :func:`bin_step` puts its search in.

    The expression is dpframe's own, built from three public facts alone: the column's name,
    its dtype (the schema) and the fill value's bin (the declared missing-value rule and the
    public edges); it reads no other column. Its verification (the plan Polars builds for it
    on an empty frame of that one column, read node by node, type-checked and probed on public
    rows) is therefore a function of ``(column, dtype, fill)``, and is done once per such
    triple (:func:`_verified_once`, at most :data:`VERIFIED_FRAMES` kept): a new frame's
    first histogram over a column already verified with that dtype and rule reuses the
    verified tree instead of building and reading the same plan again. Nothing of the data,
    of a frame or of a result is kept. A column missing from the schema (or a dtype that
    cannot be a key) is verified against the whole schema, which refuses it as before."""
    dtype = schema.get(column)
    try:
        hash(dtype)
    except TypeError:  # pragma: no cover - every Polars dtype hashes
        dtype = None
    if dtype is None:
        return _verify_frame(column, schema, fill)
    # (with whether it is a class: Polars' ``==`` equates a dtype class with its instances,
    # ``pl.Datetime == pl.Datetime("ns", "UTC")``; instances compare every parameter)
    return _verified_once(column, isinstance(dtype, type), dtype, fill)


#: The most verified bin frames kept (one per column, dtype and fill bin).
VERIFIED_FRAMES = 256


@functools.lru_cache(maxsize=VERIFIED_FRAMES)
def _verified_once(column: str, is_class: bool, dtype: Any, fill: int | None
                   ) -> derivations.Step:
    return _verify_frame(column, {column: dtype}, fill)


def _verify_frame(column: str, schema: Mapping[str, Any], fill: int | None
                  ) -> derivations.Step:
    """Build and verify the expression of :func:`_verified_frame` against ``schema``."""
    x = nw.col(column).cast(nw.Float64)
    present = ~(x.is_null() | x.is_nan()).fill_null(False)
    expr: Any = nw.when(present).then(nw.lit(0, dtype=nw.Int64))
    if fill is not None:
        expr = expr.otherwise(nw.lit(fill, dtype=nw.Int64))
    steps, _schema = derivations.verify_expressions(schema, [expr.alias(BIN)], "with_columns")
    (step,) = steps
    return step


#: Binned frames already made, per frame (its facts, by identity) and (column, edges); an entry
#: leaves with its frame's facts. At most :data:`BINNED_PER_FRAME` per frame (an in-memory
#: frame's binned copy holds one more integer column).
_BINNED: IdentityMap[dict[tuple[str, tuple[float, ...]], Any]] = IdentityMap()
BINNED_PER_FRAME = 4


def binned_frame(facts: provenance.FrameFacts, column: str, edges: Sequence[float],
                 build: Callable[[], Any]) -> Any:
    """The frame with the hidden bin column of ``column`` over ``edges``, built by ``build``
    (:func:`bin_step`, verified and compiled like any derivation) once per frame and edges.

    The binned frame is a function of the frame's private data (which never changes after
    protect: releases read dpframe's snapshot) and of public facts (the column, the edges,
    the missing-value rule), so a repeated ``histogram`` reuses it: no second verification
    or evaluation of the step, and its release finds the plan made for the first one. It is
    a derived frame, not a result (it draws from the same ledger; nothing released is
    cached)."""
    key = (column, tuple(edges))
    per_frame = _BINNED.get(facts)
    if per_frame is None:
        per_frame = {}
        _BINNED.set(facts, per_frame)
    found = per_frame.get(key)
    if found is None:
        found = build()
        if len(per_frame) < BINNED_PER_FRAME:
            per_frame[key] = found
    return found
