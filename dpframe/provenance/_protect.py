"""Provenance: which protected data set a frame's rows come from, and what is public about it.

* :func:`protect` — attach a budget to a frame. Refuses a frame that already carries a live
  budget (protected itself, or derived from a protected frame).
* :func:`resolve` — frame → :class:`FrameFacts`, *by provenance only*. A frame draws from the
  ledger its rows came from and from no other: ``session=`` or an enclosing ``with`` block may
  only name that same ledger, and a frame with no protected root is refused (never charged to
  the current session).

The pieces they use live in modules of their own: :mod:`~dpframe.provenance._datasets`
(:class:`Dataset`, :class:`Session`), :mod:`~dpframe.provenance._facts` (:class:`FrameFacts`),
:mod:`~dpframe.provenance._declared` and :mod:`~dpframe.provenance._missing` (the declared
bounds, keys and missing-value rules), :mod:`~dpframe.provenance._binding` (lazy sources bound by
content), :mod:`~dpframe.provenance._verified` (how a frame is recognised) and
:mod:`~dpframe.provenance._registry` (data that already has a budget).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from dpframe import engine
from dpframe.accounting.durable import open_ledger, stored_neighbours
from dpframe.accounting.ledger import Ledger
from dpframe.accounting.neighbours import (
    ADD_REMOVE,
    REPLACE,
    Neighbours,
    check_neighbours,
    check_same,
)
from dpframe.backends import Backend, backend_of
from dpframe.engine import UnitBound
from dpframe.errors import (
    DPFrameError,
    LedgerError,
    ParameterError,
    PrivateSizeWarning,
    SourceChangedError,
    UnsupportedInputError,
    warn_user,
)
from dpframe.provenance import _derivations as derivations
from dpframe.provenance import _units as units
from dpframe.provenance._binding import SourceBinding as SourceBinding
from dpframe.provenance._datasets import Dataset as Dataset
from dpframe.provenance._datasets import Session as Session
from dpframe.provenance._datasets import current_session as current_session
from dpframe.provenance._datasets import lookup_session as lookup_session
from dpframe.provenance._declared import check_key_list as check_key_list
from dpframe.provenance._declared import validate_bounds as validate_bounds
from dpframe.provenance._declared import validate_keys as validate_keys
from dpframe.provenance._facts import FrameFacts as FrameFacts
from dpframe.provenance._missing import DROP as DROP
from dpframe.provenance._missing import FILL_WORDS as FILL_WORDS
from dpframe.provenance._missing import Missing as Missing
from dpframe.provenance._missing import fill_word as fill_word
from dpframe.provenance._missing import validate_missing as validate_missing
from dpframe.provenance._registry import _files as _files
from dpframe.provenance._registry import _memory as _memory
from dpframe.provenance._registry import _originals as _originals
from dpframe.provenance._registry import _refuse_live, _remember_original
from dpframe.provenance._sources import (
    check_readers,
    check_strings,
    parse_in_full,
)
from dpframe.provenance._verified import _facts_of, _register
from dpframe.provenance._verified import _frames as _frames
from dpframe.provenance._verified import _markers as _markers

__all__ = [
    "FILL_WORDS",
    "Dataset",
    "FrameFacts",
    "Missing",
    "Session",
    "current_session",
    "declare_derived",
    "derive",
    "protect",
    "resolve",
]

F = TypeVar("F")


def resolve(frame: Any, session: Session | str | None = None) -> FrameFacts:
    """The verified facts of ``frame`` and the ledger its rows came from.

    Raises (reading no data) :class:`DerivationError` for an unverifiable derivation,
    :class:`NoLedgerError` for a frame with no protected root, and :class:`LedgerError` when
    ``session=`` or the enclosing ``with`` block names a different ledger.
    """
    backend = backend_of(frame)
    backend.check_usable()  # (a fork child of a process that ran Polars would hang)
    facts = _facts_of(frame, backend)
    own = facts.dataset.session
    named = lookup_session(session)
    if named is not None and named is not own:
        raise LedgerError(
            "session= names a different ledger than the one this frame's rows come from; a "
            "frame always draws from the ledger of the data it was derived from. Drop "
            "session= or name that frame's own session (frame.dp.session)."
        )
    current = current_session()
    if current is not None and current is not own:
        raise LedgerError(
            "this query runs inside `with` another session than the one this frame's rows "
            "come from; a frame always draws from its own data set's ledger. Run it outside "
            "that block or inside `with frame.dp.session:`."
        )
    return facts


def derive(facts: FrameFacts, result: Any) -> Any:
    """Register ``result`` (a native frame dpframe just built from verified steps) as a
    verified frame with ``facts``; returns the frame to hand to the user. Lazy frames keep
    ``result`` itself as what releases read; eager ones a private object
    (:meth:`~dpframe.backends.Backend.private_result`)."""
    backend = facts.dataset.backend
    if facts.notice:
        if facts.unit is None and not facts.dataset.size_private:  # (else n is private)
            _notice_private_sizes(backend.schema(result), backend, dict.fromkeys(facts.notice),
                                  None, where="with_columns")
        facts = replace(facts, notice=())
    if backend.lazy:
        return _register(backend.handout(result), facts, data=result)
    return _register(result, facts, data=backend.private_result(result))


def declare_derived(facts: FrameFacts, steps: Sequence[derivations.Step],
                    bounds: Mapping[str, tuple[float, float]],
                    missing: Missing | Mapping[str, Missing] | None) -> FrameFacts:
    """``frame.dp.with_columns(..., bounds=..., missing=...)``: the facts after ``steps`` with
    the declared bounds and missing-value rules of the columns the derivation produced.

    A column bounded here gets the same rule as one bounded at :func:`protect`: the rule
    ``missing=`` names, else the fill word given at protect (``missing="lower"`` there fills
    every bounded column, derived ones included, so its size stays public), else ``"drop"``
    with the protect's notice (:func:`derive` issues it from the derived schema). Public
    arguments only; refused before anything is read or spent."""
    produced = {name for s in steps for name in s.outputs}
    clean = validate_bounds(bounds)
    unknown = [c for c in clean if c not in produced]
    if unknown:
        raise ParameterError(
            f"bounds= names columns this with_columns does not produce: {unknown}; bounds of "
            "existing columns are declared at dpf.protect"
        )
    word = facts.dataset.fill_word
    policies = validate_missing(missing, clean, default=word or DROP)
    unnamed: tuple[str, ...] = ()
    if word is None and (missing is None or isinstance(missing, Mapping)):
        unnamed = tuple(c for c in clean if c not in (missing or {}))
    return replace(facts, bounds={**facts.bounds, **clean},
                   missing={**facts.missing, **policies}, notice=unnamed)


#: Called with the backend of every frame about to be protected: the layers above register
#: here what they need (the ``.dp`` namespace of an engine whose library loads lazily), so this
#: layer never imports them.
_ON_PROTECT: list[Callable[[Backend], None]] = []


def on_protect(hook: Callable[[Backend], None]) -> None:
    """Register ``hook`` to run with the backend of every frame about to be protected."""
    if hook not in _ON_PROTECT:
        _ON_PROTECT.append(hook)


# -- protect --------------------------------------------------------------------------------
@contextlib.contextmanager
def _engine_failures(what: str) -> Iterator[None]:
    """At ``protect``, before any budget exists: a failure of the engine or of the copy (a
    source that cannot be read, a user graph that raises, an object cell that cannot be
    copied, a Polars panic) becomes one :class:`UnsupportedInputError` saying ``what`` failed,
    without its own message, which may quote values of data that could already be protected
    elsewhere. dpframe's own errors pass; KeyboardInterrupt and SystemExit are the user's."""
    try:
        yield
    except DPFrameError:
        raise
    except BaseException as exc:
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise UnsupportedInputError(
            f"{what}; nothing was protected or spent. The error's own message is not shown: "
            "it can quote the data"
        ) from None


def _snapshot(frame: Any, backend: Backend) -> Any:
    """dpframe's own copy of ``frame`` (:meth:`Backend.snapshot`), which every release
    reads."""
    with _engine_failures(
            f"protect could not copy this {backend.name} frame into dpframe's own memory (an "
            "object cell that cannot be copied, such as a lock or an open file, or an engine "
            "that failed to compute the frame: run its own collect() or compute() to see what "
            "fails). Keep plain values in the frame (numbers, strings, dates, lists of them)"):
        return backend.snapshot(frame)


def _first_read(data: Any, backend: Backend) -> int:
    """The one read of ``protect``: parse a text source in full, check its strings, count the
    rows."""
    with _engine_failures(
            f"the {backend.name} engine failed while protect read the frame (to count its rows "
            "and check its values): run the frame's own row count (e.g. len(frame), "
            "frame.count()) before protecting it to see what fails"):
        parsed = parse_in_full(data, backend)  # a CSV source: every value once, not later
        check_strings(data, backend)
        return parsed if parsed is not None else backend.count_rows(data)


def protect(
    frame: F,
    *,
    epsilon: float,
    delta: float = 0.0,
    bounds: Mapping[str, tuple[float, float]],
    keys: Mapping[str, Sequence[Hashable]] | None = None,
    missing: Missing | Mapping[str, Missing] | None = None,
    session: Session | str | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    max_groups_per_unit: int | None = None,
    neighbours: Neighbours = REPLACE,
    max_rows: int | None = None,
) -> F:
    """Attach a privacy budget to a frame and return the protected frame.

    Parameters
    ----------
    frame
        A pandas ``DataFrame``, Polars ``DataFrame`` or Polars ``LazyFrame``.
    epsilon, delta
        The total budget of this data set; every release from it and from frames derived from
        it adds up (sequential composition).
    bounds
        Column → ``(lower, upper)``: public, never computed from the data. Values outside are
        clamped before aggregation. Only bounded columns can be aggregated.
    keys
        Column → public group keys for ``frame.dp.groupby(column)``.
    missing
        What a missing value (null or NaN) in a bounded column means, declared from outside
        the data: ``"drop"`` (the default; such rows are left out of that column's statistics,
        like pandas' ``skipna``, which makes the size private for them) or a public fill value
        within the bounds (keeps the size public; on a column without missing values it
        changes nothing). A fill word names one from each column's bounds: ``"lower"``,
        ``"upper"`` or ``"midpoint"`` (:data:`FILL_WORDS`); one word covers every bounded
        column, and columns bounded later by ``frame.dp.with_columns(..., bounds=...)``
        follow it. A mapping sets a rule per column. Left to the default, ``protect``
        issues one :class:`~dpframe.errors.PrivateSizeWarning` naming the bounded columns
        whose dtype can hold a missing value (from the schema: no data is read); passing
        ``missing=`` explicitly, ``"drop"`` included, silences it.
    session
        The :class:`Session` to bind (default: the current ``with`` block's, else a new one).
    privacy_unit
        The column identifying a person (the privacy unit) when one person can own several
        rows. Neighbouring data sets then differ in *all rows of one person*; every release
        keeps at most ``max_rows_per_unit`` rows per person (chosen by a secret per-release
        hash, never by the values) and scales its sensitivities accordingly. The number of
        rows becomes private and the number of persons (distinct non-missing ids) public;
        rows without an id are left out. pandas and Polars only (docs/privacy.md §U).
    max_rows_per_unit
        ``k``: public bound on the rows one person contributes (required with
        ``privacy_unit``). Larger ``k`` keeps more rows but multiplies the noise by ``k``.
    max_groups_per_unit
        ``g``: public bound on the groups one person contributes to in a group-by (default
        ``k``); each group then gets ε/(2·min(g, k)).
    neighbours
        Which data sets count as neighbours, i.e. what the guarantee hides
        (``docs/privacy.md``, "Neighbours: replace or add/remove"). ``"replace"`` (the
        default): one row replaced by another; the row count ``n`` is public, and a count or
        a histogram cell moves by up to 2 per replaced row across cells. ``"add_remove"``: one
        row added or removed (the definition most other DP libraries use); ``n`` is private,
        a histogram or a group-by releases each cell with the whole ε (sensitivity 1), and
        every statistic uses its private-size formulation. Fixed for the life of the ledger:
        a session or ledger file that already accounts under the other definition is refused.
    max_rows
        With ``neighbours="add_remove"`` only: a public bound on the number of rows, declared
        from outside the data. It bounds count domains and sizes the exact fixed-point sums
        (Casacuberta et al.), so it must hold: ``protect`` refuses a frame with more rows,
        once, before any budget exists (as it refuses an empty one); nothing after reads
        ``n``. Sums, means, variances and ``corr``/``cov`` need it; counts, histograms and
        quantiles do not (counts then live on ``[0, 2³¹]``).

    Returns
    -------
    The protected frame, of the type given. Its row count ``n`` is public (read here, once),
    unless a privacy unit is declared (then its number of units is).
    pandas: a shallow copy whose ``attrs`` carry the budget handle. Polars ``DataFrame``: the
    same object, registered. Polars ``LazyFrame``: the same plan with a dpframe marker on top.
    Whatever the type, releases read dpframe's own byte copy taken here (a LazyFrame that
    reads in-memory frames is collected once into it), never the object passed in.

    Raises
    ------
    LedgerError
        The frame already carries a live budget (protected, or derived from a protected one).
    BoundsError, ParameterError, UnsupportedInputError
        Bad bounds, keys, missing policy or columns — all from public facts, before reading.

    Examples
    --------
    >>> import pandas as pd, dpframe as dpf
    >>> pf = dpf.protect(pd.DataFrame({"age": [30, 40, 50]}), epsilon=1.0,
    ...                  bounds={"age": (0, 120)})
    >>> pf.dp.size
    3
    """
    asked = check_neighbours(neighbours)
    cap = _check_max_rows(max_rows, asked)
    if asked == ADD_REMOVE and privacy_unit is not None:
        raise ParameterError(
            "privacy_unit= with neighbours='add_remove' is not available yet: a privacy unit "
            "replaces all rows of one person. Use one of the two. Nothing was read."
        )
    backend = backend_of(frame)
    backend.check_usable()  # (a fork child of a process that ran Polars would hang)
    _refuse_live(frame, backend)
    _refuse_mixed(lookup_session(session) or current_session(), asked)
    for hook in _ON_PROTECT:  # (the frames layer registers the engine's .dp namespace)
        hook(backend)
    clean_bounds = validate_bounds(bounds)
    clean_keys = validate_keys(keys)
    clean_missing = validate_missing(DROP if missing is None else missing, clean_bounds)
    check_readers(frame, backend)
    schema = backend.schema(frame)
    _check_columns(schema, [*clean_bounds, *clean_keys])

    for col in clean_bounds:
        engine.validate_column(frame, col)

    declared_unit = units.validate_unit(privacy_unit, max_rows_per_unit, max_groups_per_unit,
                                        schema, backend)
    original: Any = frame
    protected: Any = backend.user_frame(original)
    data = _snapshot(protected, backend)  # what every release reads from now on
    source = _bind_source(data, backend)  # (before the read: the bytes it is about to count)
    n = _first_read(data, backend)
    if source is not None and source.changed():
        raise SourceChangedError(
            "the files behind this frame changed while dpf.protect() read them (added, "
            "removed, or their content rewritten); protect them when no one writes them. "
            "Nothing was protected or spent."
        )
    if n == 0:
        raise UnsupportedInputError(
            "the frame is empty: there is nothing to protect; protect the full data set"
        )
    if cap is not None and n > cap:
        # (at protect, before any budget exists, like the empty frame above: the declared
        # bound sizes every exact fixed-point sum, so it must hold; nothing later reads n)
        raise UnsupportedInputError(
            "the frame has more rows than the max_rows declared: the declared bound must hold "
            "(it sizes the exact sums). Declare a larger public bound from outside the data, "
            "e.g. the size of the population the data is drawn from. Nothing was protected or "
            "spent."
        )
    unit = None
    if declared_unit is not None:
        column, k, g = declared_unit
        n_units = units.count_distinct_units(data, backend, column)
        if n_units == 0:
            raise UnsupportedInputError(
                f"the privacy_unit column {column!r} holds no id: there is no person to protect"
            )
        unit = UnitBound(column, k, g, n_units)
    sess = lookup_session(session) or current_session() or Session()
    if sess.path is not None:

        ledger: Ledger = open_ledger(epsilon, delta, path=sess.path,
                                     expect_head=sess.expect_head, neighbours=asked)
    else:
        ledger = Ledger(epsilon, delta, neighbours=asked)
    dataset = Dataset(ledger, n, backend, sess, fill_word=fill_word(missing),
                      neighbours=asked, max_rows=cap)
    facts = FrameFacts(dataset, True, clean_bounds, clean_missing, clean_keys, unit=unit)
    sess._bind(dataset)
    protected = _register(protected, facts, data=data)
    dataset.root_ref = weakref.ref(protected)
    dataset.source = source
    if dataset.source is not None and dataset.source.recount:
        dataset.root_strong = data  # (only to re-count a source not bound by file identity)
    _remember_original(frame, dataset, data)
    if unit is None and asked == REPLACE:  # (with a unit or add/remove n is private anyway)
        _notice_private_sizes(schema, backend, clean_bounds, missing)
    return protected  # the same type as ``frame``


def _check_max_rows(max_rows: Any, neighbours: Neighbours) -> int | None:
    """``max_rows=``: a positive integer, and only with ``neighbours="add_remove"`` (under
    replace-one the row count is public: there is nothing to bound)."""
    if max_rows is None:
        return None
    if neighbours != ADD_REMOVE:
        raise ParameterError(
            "max_rows= bounds a private row count: pass it with neighbours='add_remove'. "
            "Under neighbours='replace' (the default) the row count is public and read at "
            "protect. Nothing was read."
        )
    if isinstance(max_rows, bool) or not isinstance(max_rows, int | np.integer) or not (
            1 <= int(max_rows) <= _MAX_ROWS):
        raise ParameterError(f"max_rows must be an integer from 1 to 2**53, got {max_rows!r}")
    return int(max_rows)


_MAX_ROWS = 2**53


def _refuse_mixed(sess: Session | None, asked: Neighbours) -> None:
    """A session or durable ledger that already accounts under another neighbour definition
    is refused here, before anything is read (opening the ledger checks again, under its
    lock)."""
    if sess is None:
        return
    if sess.dataset is not None:
        check_same(sess.dataset.neighbours, asked, "this session")
    if sess.path is not None:
        held = stored_neighbours(sess.path)
        if held is not None:
            check_same(held, asked, f"the ledger file {sess.path}")


def _check_columns(schema: Mapping[str, Any], named: Sequence[str]) -> None:
    """The frame's column names are strings and hold every column ``named`` in bounds/keys
    (from the schema alone)."""
    bad_names = [c for c in schema if not isinstance(c, str)]
    if bad_names:
        raise UnsupportedInputError(
            f"column names must be strings; got {bad_names[:5]!r}: rename them first "
            "(e.g. frame.columns = frame.columns.astype(str))"
        )
    for col in named:
        if col not in schema:
            raise UnsupportedInputError(
                f"column {col!r} named in bounds/keys is not in the frame; "
                f"available: {', '.join(map(repr, list(schema)[:20]))}"
            )


def _bind_source(data: Any, backend: Backend) -> SourceBinding | None:
    """The files a lazy frame reads, bound by content (:class:`SourceBinding`); None for
    in-memory frames (releases read dpframe's snapshot)."""
    if backend.readable_plans:
        return SourceBinding.of(data)
    if backend.lazy:  # a plan dpframe cannot read: bind the files the engine reads
        return SourceBinding.of_engine(data, backend)
    return None


def _notice_private_sizes(schema: Mapping[str, Any], backend: Backend,
                          bounds: Mapping[str, Any], missing: Any,
                          where: str = "protect") -> None:
    """One :class:`PrivateSizeWarning` at ``protect`` (or a ``with_columns`` that bounds new
    columns: ``where``): the bounded columns whose rule is ``"drop"`` by default (``missing``
    not given, or a mapping that does not name them) and whose dtype can hold a missing
    value. From the schema and the arguments alone."""
    if missing is not None and not isinstance(missing, Mapping):
        return  # one rule given for every column: the user chose it
    named = missing or {}
    cols = [c for c in bounds if c not in named and backend.can_hold_missing(schema[c])]
    if not cols:
        return
    listed = ", ".join(repr(c) for c in cols[:8]) + (f" and {len(cols) - 8} more"
                                                     if len(cols) > 8 else "")
    per_column = ", ".join(f"{c!r}: <a value in its bounds>" for c in cols[:2])
    fix = ("missing='lower' at dpf.protect (every bounded column, derived ones included, "
           "takes its lower bound; 'upper' and 'midpoint' work too), or per column "
           f"missing={{{per_column}}}" if where == "protect" else
           "missing='lower' on this with_columns (the column takes its lower bound; "
           "'upper', 'midpoint' or a number within the bounds work too), or once at "
           "dpf.protect, which columns bounded later follow")
    warn_user(PrivateSizeWarning(
        f"missing='drop' (the default) applies to {listed}, whose dtype can hold a missing "
        "value: their statistics leave such rows out and have a private size (means and "
        "variances as noisier sum/count estimates; corr and other statistics that need the "
        "public row count are refused). To keep n public, declare a public fill, e.g. "
        f"{fix}; a fill changes nothing on a column without missing values. "
        "Pass missing='drop' explicitly to silence this notice."))
