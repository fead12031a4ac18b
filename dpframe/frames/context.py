"""Protected datasets, sessions, and how a frame finds its budget.

* :class:`Dataset` — the public facts of one protected data set (bounds, keys, public row
  count, row cap) and its one :class:`~dpframe.accounting.Ledger`.
* :class:`Session` — the explicit handle on a dataset's ledger. Polars frames carry no
  metadata, so a query on a Polars frame finds its budget through a session: named with
  ``session=``, made current by a ``with`` block, or — for the very frame returned by
  :func:`protect` — through a registry of protected frames. pandas frames carry the session in
  ``attrs`` (which pandas propagates to derived frames; a deep copy keeps the same session).
* :func:`resolve` — frame → (dataset, is the size public?). **The size is public only for the
  exact object returned by** :func:`protect`. Any other frame, however derived (filter,
  dropna, head, sample, join, concat, and even ``copy()`` or ``assign``), has a private size.
  This is decided by provenance (object identity), never by comparing lengths or indexes:
  pandas returns a copy sharing the index when ``dropna`` finds nothing to drop, so any
  result-based test would make the formulation — which the log reveals — depend on the data.
"""

from __future__ import annotations

import contextvars
import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpframe.accounting import Budget, Ledger
from dpframe.errors import (
    BoundsError,
    LedgerError,
    NoLedgerError,
    ParameterError,
    UnsupportedInputError,
)

__all__ = ["Dataset", "Session", "current_session", "protect", "resolve"]

ATTRS_KEY = "dpframe"
RELEASE_ATTRS_KEY = "dpframe_log"
DERIVED_ROW_FACTOR = 4


def backend_of(frame: Any) -> str:
    """``"pandas"``, ``"polars"`` or ``"polars-lazy"``; raise for anything else."""
    mod = type(frame).__module__.split(".")[0]
    name = type(frame).__name__
    if mod == "pandas" and name == "DataFrame":
        return "pandas"
    if mod == "polars" and name == "DataFrame":
        return "polars"
    if mod == "polars" and name == "LazyFrame":
        return "polars-lazy"
    raise UnsupportedInputError(
        f"dpframe protects pandas DataFrames and Polars DataFrames/LazyFrames, got {type(frame)!r}"
    )


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
            lo, hi = (float(v) for v in pair)
        except (TypeError, ValueError):
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
        out[str(col)] = (lo, hi)
    return out


def validate_keys(keys: Any) -> dict[str, list[Any]]:
    if keys is None:
        return {}
    if not isinstance(keys, Mapping):
        raise ParameterError("keys must be a mapping column -> list of public group keys")
    return {str(c): check_key_list(c, v) for c, v in keys.items()}


def check_key_list(column: Any, keys: Any) -> list[Any]:
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence | set | frozenset):
        raise ParameterError(
            f"keys for {column!r} must be a list of public values, e.g. keys=['north', 'south']"
        )
    out = list(keys)
    if not out:
        raise ParameterError(f"keys for {column!r} is empty; declare at least one public key")
    if len(set(out)) != len(out):
        raise ParameterError(f"keys for {column!r} contain duplicates: {out!r}")
    if any(k is None or (isinstance(k, float) and k != k) for k in out):
        raise ParameterError(f"keys for {column!r} must not contain None/NaN")
    return out


@dataclass(eq=False)
class Dataset:
    """One protected data set: public facts plus its ledger."""

    ledger: Ledger
    bounds: dict[str, tuple[float, float]]
    keys: dict[str, list[Any]]
    n: int
    row_cap: int
    backend: str
    root_ref: Any = field(default=None, repr=False)  # weakref to the protected frame
    session: Any = field(default=None, repr=False)

    def is_root(self, frame: Any) -> bool:
        root = self.root_ref() if self.root_ref is not None else None
        return root is not None and root is frame


_current: contextvars.ContextVar[tuple[Session, ...]] = contextvars.ContextVar(
    "dpframe_sessions", default=()
)
_named: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
_roots: dict[int, tuple[Any, Session]] = {}
_registry_lock = threading.Lock()


class Session:
    """The explicit ledger of one protected dataset (required for Polars).

    ``path=``: keep the ledger in a durable, append-only file (:mod:`dpframe.durable`): spent
    budget survives restarts and is shared by processes opening the same file.

    ``with dpf.Session() as s:`` makes ``s`` current, so queries on any frame derived from the
    protected one draw from it; outside the block name it: ``frame.dp.mean("x", epsilon=0.1,
    session=s)`` (or by its ``name``). A session holds one dataset: :func:`protect` binds it.
    Threads do not inherit the ``with`` block (it is a context variable): name the session.
    """

    def __init__(self, name: str | None = None, *, path: Any = None) -> None:
        self.name = name
        self.path = path  # durable JSON-lines ledger file (dpframe.durable), or None
        self.dataset: Dataset | None = None
        self._lock = threading.Lock()
        self._tokens: list[contextvars.Token] = []
        if name is not None:
            with _registry_lock:
                if name in _named:
                    raise LedgerError(
                        f"a session named {name!r} already exists; choose another name"
                    )
                _named[name] = self

    def __enter__(self) -> Session:
        self._tokens.append(_current.set((*_current.get(), self)))
        return self

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())

    def __deepcopy__(self, memo: dict) -> Session:
        return self  # one dataset, one ledger: copies share it

    def __copy__(self) -> Session:
        return self

    def _bind(self, dataset: Dataset) -> None:
        with self._lock:
            if self.dataset is not None:
                raise LedgerError(
                    "this session already holds a protected dataset (one ledger per dataset); "
                    "open a new dpf.Session() for the other data"
                )
            self.dataset = dataset
            dataset.session = self

    @property
    def ledger(self) -> Ledger:
        if self.dataset is None:
            raise NoLedgerError(
                "this session has no protected data yet: call dpf.protect(frame, epsilon=..., "
                "bounds=..., session=session) first"
            )
        return self.dataset.ledger

    @property
    def budget(self) -> Budget:
        return self.ledger.budget

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        state = repr(self.ledger.budget) if self.dataset else "no data protected yet"
        return f"<dpf.Session{label}: {state}>"


def current_session() -> Session | None:
    stack = _current.get()
    return stack[-1] if stack else None


def lookup_session(session: Session | str | None) -> Session | None:
    if session is None or isinstance(session, Session):
        return session
    if isinstance(session, str):
        found = _named.get(session)
        if found is None:
            raise NoLedgerError(
                f"no session named {session!r}; create it with dpf.Session(name=...)"
            )
        return found
    raise ParameterError(f"session must be a dpf.Session or its name, got {session!r}")


class _Handle(dict):
    """What a protected pandas frame keeps in ``attrs["dpframe"]``.

    Its items are the live, JSON-serialisable log document (so ``to_parquet`` writes the log);
    the session is an attribute. Deep copies return the same object: pandas deep-copies
    ``attrs`` when it derives a frame, and a copy must never become a fresh budget.
    """

    def __init__(self, session: Session) -> None:
        super().__init__(session.ledger.document)
        self.session = session

    def __deepcopy__(self, memo: dict) -> _Handle:
        return self

    def __copy__(self) -> _Handle:
        return self

    def __reduce__(self) -> Any:  # pickling drops the live budget: a plain dict remains
        return (dict, (dict(self),))


def _count_rows(frame: Any, backend: str) -> int:
    if backend == "pandas":
        return len(frame)
    import polars as pl

    if backend == "polars":
        return frame.height
    return int(frame.select(pl.len()).collect().item())


def protect(
    frame: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    bounds: Mapping[str, tuple[float, float]],
    keys: Mapping[str, Sequence[Any]] | None = None,
    session: Session | str | None = None,
    row_cap: int | None = None,
) -> Any:
    """Attach a privacy budget to a frame and return the protected frame.

    ``epsilon``/``delta``: the total budget of this dataset (sequential composition across
    every release from it and from any frame derived from it). ``bounds``: column →
    ``(lower, upper)``, public, never computed from the data; values outside are clamped.
    ``keys``: column → public group keys for ``frame.dp.groupby(column)``. ``session``: bind
    to this :class:`Session` (default: the current ``with`` block's, else a new one).
    ``row_cap``: public cap on the rows a derived frame may have (default
    ``4 × len(frame)``); it sizes the exact fixed-point sums, see :mod:`dpframe.engine`.

    The row count of the returned frame is public (it is read here). pandas: returns a new
    frame (a cheap copy) whose ``attrs`` carry the budget. Polars: returns the same object,
    registered with the session.
    """
    from dpframe import engine

    backend = backend_of(frame)
    clean_bounds = validate_bounds(bounds)
    clean_keys = validate_keys(keys)
    cols = engine.frame_columns(frame)
    for col in [*clean_bounds, *clean_keys]:
        if col not in cols:
            raise UnsupportedInputError(
                f"column {col!r} named in bounds/keys is not in the frame; "
                f"available: {', '.join(map(repr, list(cols)[:20]))}"
            )
    for col in clean_bounds:
        engine.validate_column(frame, col)
    n = _count_rows(frame, backend)
    if n == 0:
        raise UnsupportedInputError(
            "the frame is empty: there is nothing to protect; protect the full data set"
        )
    cap = DERIVED_ROW_FACTOR * n if row_cap is None else int(row_cap)
    if cap < n:
        raise ParameterError(f"row_cap={row_cap} is below the frame's {n} rows")
    sess = lookup_session(session) or current_session() or Session()
    if sess.path is not None:
        from dpframe.durable import open_ledger

        ledger: Ledger = open_ledger(epsilon, delta, path=sess.path)
    else:
        ledger = Ledger(epsilon, delta)
    protected = frame.copy(deep=False) if backend == "pandas" else frame
    dataset = Dataset(ledger, clean_bounds, clean_keys, n, cap, backend,
                      weakref.ref(protected))
    sess._bind(dataset)
    if backend == "pandas":
        protected.attrs = {**{k: v for k, v in frame.attrs.items() if k != ATTRS_KEY},
                           ATTRS_KEY: _Handle(sess)}
    else:
        _register_root(protected, sess)
    return protected


def _register_root(frame: Any, session: Session) -> None:
    key = id(frame)

    def _forget(_: Any, key: int = key) -> None:
        with _registry_lock:
            _roots.pop(key, None)

    with _registry_lock:
        _roots[key] = (weakref.ref(frame, _forget), session)


def _root_session(frame: Any) -> Session | None:
    with _registry_lock:
        found = _roots.get(id(frame))
    if found is not None and found[0]() is frame:
        return found[1]
    return None


_NO_LEDGER_POLARS = (
    "this Polars frame has no privacy budget: Polars frames carry no metadata, so name the "
    "session the protected frame belongs to (frame.dp.mean(..., session=s)) or run the query "
    "inside `with s:`; to start a budget, call dpf.protect(frame, epsilon=..., bounds=...)"
)
_NO_LEDGER_PANDAS = (
    "this pandas frame has no privacy budget: call dpf.protect(frame, epsilon=..., "
    "bounds=...) first; if it was derived from a protected frame by an operation that drops "
    "attrs (e.g. a merge with an unprotected frame), name its session: "
    "frame.dp.mean(..., session=protected.dp.session). (A frame read back from Parquet "
    "carries its log but not a live budget.)"
)


def resolve(frame: Any, session: Session | str | None = None) -> tuple[Dataset, bool]:
    """The dataset a frame draws from and whether its size is public (it is the root)."""
    backend = backend_of(frame)
    named = lookup_session(session)
    if backend == "pandas":
        handle = frame.attrs.get(ATTRS_KEY)
        if isinstance(handle, _Handle):
            sess = handle.session
            if named is not None and named is not sess:
                raise LedgerError("session= names a different session than the frame's own")
        else:
            # pandas drops attrs in some derivations (e.g. a merge with an unprotected
            # frame): the caller may name the session, as for Polars.
            sess = named or current_session()
            if sess is None:
                raise NoLedgerError(_NO_LEDGER_PANDAS)
    else:
        own = _root_session(frame)
        if own is not None and named is not None and named is not own:
            raise LedgerError("session= names a different session than the frame's own")
        sess = named or own or current_session()
        if sess is None:
            raise NoLedgerError(_NO_LEDGER_POLARS)
    dataset = sess.dataset
    if dataset is None:
        raise NoLedgerError("this session has no protected data: call dpf.protect(...) first")
    if dataset.backend.split("-")[0] != backend.split("-")[0]:
        raise LedgerError(
            f"the session protects a {dataset.backend} frame but this is a {backend} frame"
        )
    return dataset, dataset.is_root(frame)
