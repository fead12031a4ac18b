"""Provenance: which protected data set a frame's rows come from, and what is public about it.

* :class:`Dataset` — one protected data set: its ledger, its public size ``n`` (read once by
  :func:`protect`), declared group keys, and for lazy sources the files read, bound by content.
* :class:`FrameFacts` — the public facts of one *verified* frame: its data set, whether its size
  is the public ``n``, and each column's declared bounds and missing-value policy.
* :func:`protect` — attach a budget to a frame. Refuses a frame that already carries a live
  budget (protected itself, or derived from a protected frame).
* :func:`resolve` — frame → :class:`FrameFacts`, *by provenance only*. A frame draws from the
  ledger its rows came from and from no other: ``session=`` or an enclosing ``with`` block may
  only name that same ledger, and a frame with no protected root is refused (never charged to
  the current session).

How a frame is recognised (no data is read, no lengths or values are compared):

* pandas: the frame returned by :func:`protect` or a ``.dp`` derivation carries a handle in
  ``attrs``; the handle knows the one frame object it belongs to. pandas copies ``attrs`` into
  frames it derives (``pf[pf.age > 40]``, ``pd.concat``, ``fillna`` ...): such a frame has the
  handle but is not its owner, so it is refused as an unverified derivation.
* Polars ``DataFrame``: the exact objects returned by :func:`protect` and ``.dp`` derivations
  are registered by identity; any other eager frame has no protected root.
* Polars ``LazyFrame``: the plan is walked (:mod:`dpframe.provenance._derivations`) down to the
  nearest
  dpframe marker, verifying every step above it, so native ``lf.filter(...).with_columns(...)``
  chains work.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from dpframe._util.identity import IdentityMap
from dpframe._util.memory import LIVE_BUDGET, PROTECTED_MEMORY
from dpframe._util.polars_plan import plan_sources
from dpframe._validation import is_real_number
from dpframe.accounting.ledger import Budget, Ledger
from dpframe.backends import Backend, backend_of
from dpframe.backends.pandas._memory import pandas_ranges
from dpframe.backends.polars._memory import anchored_series
from dpframe.engine._bounding import UnitBound
from dpframe.errors import (
    BoundsError,
    DerivationError,
    DPFrameError,
    LedgerError,
    NoLedgerError,
    ParameterError,
    PrivateSizeWarning,
    SourceChangedError,
    UnsupportedInputError,
    warn_user,
)
from dpframe.provenance import _derivations as derivations
from dpframe.provenance._sources import (
    check_readers,
    check_strings,
    expand_paths,
    file_digest,
    parse_in_full,
)
from dpframe.query._keys import Keys, checked_keys
from dpframe.rowwise.engines import apply_steps

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

ATTRS_KEY = "dpframe"
DROP = "drop"

#: A column's missing-value policy: ``"drop"`` (rows missing the column are left out of
#: statistics of that column; the size becomes private) or a public fill value (given as a
#: number or as a fill word, :data:`FILL_WORDS`, which :func:`validate_missing` resolves).
Missing = str | float

F = TypeVar("F")


# -- validation of public facts -----------------------------------------------------------
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


# -- data sets, facts, sessions -------------------------------------------------------------
@dataclass(eq=False)
class SourceBinding:
    """The files a lazy source reads, bound by their content: path → (size, mtime, device,
    inode) and path → SHA-256 of every byte (:func:`dpframe.provenance._sources.file_digest`),
    recorded
    at protect time and checked before every release. ``recount``: the source is not made of
    files dpframe can identify, so its row count is re-read instead. ``lister``: for engines
    that fix their file list in the plan (Spark), asks the engine for the list it will read
    now (None: it no longer can), compared with the recorded one; ``patterns`` (globs and
    folders expanded) are used otherwise.

    What is checked, and when (``docs/engines.md``, "Is the source still the protected
    one?"): before every release, the list of files, each file's metadata, and the digest of
    each file's whole content, re-read from disk. Metadata alone is not enough: a same-size
    rewrite with its modification time put back (``os.utime``) keeps it. If the engine reads
    exactly the listed files and each still has the digest taken at protect, the bytes read
    — hence the ``n`` rows — are those counted at protect. The check reads file bytes, never
    parses a row, and runs before any budget is reserved; a refusal depends only on the
    files, which the data's steward controls and sees anyway. A rewrite *during* a running
    release (after this check) is the curator's to prevent.
    """

    files: dict[str, tuple[int, int, int, int]]
    patterns: tuple[str, ...]
    recount: bool
    lister: Callable[[], tuple[str, ...] | None] | None = field(default=None, repr=False)
    digests: dict[str, bytes | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.digests:
            self.digests = _digests(self.files)

    @classmethod
    def of(cls, lazy: Any) -> SourceBinding:
        paths, other = plan_sources(lazy)
        patterns = tuple(paths)
        files = _stat_all(patterns)
        # a remote or URI source (s3://, https://, file://) or a file dpframe cannot stat
        # cannot be bound by identity: its row count is re-read before every release instead
        unbound = any(not _is_local(p) for p in patterns) or any(
            st[0] < 0 for st in files.values())
        return cls(files, patterns, other or unbound)

    @classmethod
    def of_engine(cls, frame: Any, backend: Backend) -> SourceBinding:
        """The binding of an engine frame whose plan dpframe cannot read: the engine's own
        fixed file list where it gives one (no re-count needed), else the files it names, if
        any, plus a re-count before each release."""
        listed = backend.bound_files(frame)
        if listed is not None:
            files = _stat_paths(listed)
            if all(st[0] >= 0 for st in files.values()):
                return cls(files, listed, recount=False,
                           lister=lambda: backend.bound_files(frame))
        patterns = tuple(backend.source_paths(frame))
        return cls(_stat_all(patterns), patterns, recount=True)

    def changed(self) -> bool:
        """Whether the files differ from those bound at protect: another list, other
        metadata, or other content (every file's digest is recomputed: a cost of about
        0.7 ms per MB, measured in ``docs/engines.md``)."""
        if self.lister is None:
            now = _stat_all(self.patterns)
        else:
            listed = self.lister()
            if listed is None:
                return True
            now = _stat_paths(listed)
        return now != self.files or _digests(now) != self.digests


def _digests(files: Mapping[str, tuple[int, int, int, int]]) -> dict[str, bytes | None]:
    """Path → digest of its content (None for a file that cannot be read)."""
    return {path: file_digest(path) if st[0] >= 0 else None for path, st in files.items()}


def _is_local(path: str) -> bool:
    return "://" not in path


def _stat_all(patterns: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
    """Path → (size, mtime, device, inode) of every file the patterns name (globs and
    folders expanded: :func:`dpframe.provenance._sources.expand_paths`)."""
    return _stat_paths(expand_paths(patterns))


def _stat_paths(paths: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
    """Path → (size, mtime, device, inode) of each path as given; (-1, -1, -1, -1) if it
    cannot be read."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out[path] = (-1, -1, -1, -1)
            continue
        out[path] = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)
    return out


@dataclass(eq=False)
class Dataset:
    """One protected data set: its ledger and the public facts read at protect time."""

    ledger: Ledger
    n: int
    backend: Backend
    session: Session
    root_ref: Any = field(default=None, repr=False)  # weakref to the protected frame
    source: SourceBinding | None = None  # lazy roots
    root_strong: Any = field(default=None, repr=False)  # dpframe's own root, for re-counting
    #: the fill word given at protect for every column (``missing="lower"``...), which
    #: columns bounded later on a derivation take too; None: no word given
    fill_word: str | None = None

    def check_unchanged(self) -> None:
        """Refuse (before anything is spent) if a lazy root's files were replaced, added,
        removed or rewritten since ``protect`` — their list, metadata and content digest
        (:class:`SourceBinding`), and for sources dpframe cannot bind a re-count of rows.
        In-memory data needs no check: releases read dpframe's private snapshot, never the
        object the user holds, so an in-place edit of that object cannot reach a release and
        is not looked at."""
        if self.source is None:
            return
        if self.source.changed():
            raise SourceChangedError(
                "the files behind this protected frame changed after dpf.protect() (added, "
                "removed, replaced, or their content rewritten); the rows it counted are no "
                "longer what a release would read. Queries on it are refused. Nothing was read "
                "or spent."
            )
        if self.source.recount and self.backend.count_rows(self.root_strong,
                                                            fresh=True) != self.n:
            raise SourceChangedError(
                "the source of this protected frame now has a different number of rows than "
                "at dpf.protect(); its public size no longer holds. Queries on it are refused. "
                "Nothing was spent."
            )


@dataclass(frozen=True, eq=False)
class FrameFacts:
    """Public facts of one verified frame (the root or a verified derivation of it)."""

    dataset: Dataset
    size_public: bool
    bounds: dict[str, tuple[float, float]]
    missing: dict[str, Missing]
    keys: dict[str, Keys]
    derivation: tuple[str, ...] = ("protect",)
    #: the data releases read: dpframe's private object for this frame (a snapshot of an
    #: in-memory frame, the protected plan with the verified steps compiled on it, a private
    #: Dask collection or DuckDB copy; :meth:`Backend.snapshot`), so editing the object a
    #: user holds can never reach a release. None only while a frame is being registered.
    data: Any = field(default=None, repr=False)
    #: the privacy unit (``dpf.protect(..., privacy_unit=...)``), its column as named in this
    #: frame; None: one row per unit
    unit: UnitBound | None = None
    #: bounded columns this derivation declared with the default rule ``"drop"`` (no
    #: ``missing=`` naming them, no fill word at protect): :func:`derive` names those whose
    #: dtype can hold a missing value in one :class:`PrivateSizeWarning`, as protect does
    notice: tuple[str, ...] = ()

    def after(self, steps: Sequence[derivations.Step]) -> FrameFacts:
        """The facts of the frame these verified steps produce from this one."""
        facts = self
        for step in steps:
            facts = facts._apply(step)
        return facts

    def _apply(self, step: derivations.Step) -> FrameFacts:
        if step.kind == "filter":
            return replace(self, size_public=False, derivation=(*self.derivation, "filter"),
                       data=None)
        keep = step.kind != "select"
        return replace(
            self,
            bounds=_carry(self.bounds, step.outputs, keep),
            missing=_carry(self.missing, step.outputs, keep),
            keys=_carry(self.keys, step.outputs, keep),
            derivation=(*self.derivation, step.kind),
            data=None,
            unit=_carry_unit(self.unit, step, keep),
        )


def _carry_unit(unit: UnitBound | None, step: derivations.Step, keep: bool
                ) -> UnitBound | None:
    """The privacy-unit column after a step: it must reach the output value for value (a bare
    reference, possibly renamed); a step that drops it, replaces it or casts it is refused,
    before any data is read (a cast can merge two persons' ids, and without the column rows
    could not be bounded per person)."""
    if unit is None:
        return None
    col = unit.column
    same = [name for name, src in step.outputs.items() if src == col and name not in step.casts]
    if keep and col not in step.outputs:
        return unit  # with_columns that leaves the unit column alone
    if col in same:
        return unit
    if not keep and same:
        return unit.renamed(same[0])
    raise DerivationError(
        f"this {step.kind} " + ("replaces or casts" if keep or col in step.outputs else "drops")
        + f" the privacy-unit column {col!r}; every derived frame must keep it unchanged "
        "(renaming it is fine) so each person's rows can be bounded. Keep the column (e.g. "
        f"select it too) and add a new column instead of changing it. Nothing was read or spent."
    )


V = TypeVar("V")


def _carry(own: Mapping[str, V], outputs: Mapping[str, str | None], keep: bool) -> dict[str, V]:
    """A per-column table after a step: outputs that copy a column take its entry, computed
    outputs lose theirs; other columns stay (``keep``, for ``with_columns``) or go (select)."""
    table = dict(own) if keep else {}
    for name, source in outputs.items():
        table.pop(name, None)
        if source is not None and source in own:
            table[name] = own[source]
    return table


_current: contextvars.ContextVar[tuple[Session, ...]] = contextvars.ContextVar(
    "dpframe_sessions", default=()
)
_named: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
#: re-entrant: garbage collection can run a registry weakref callback (which takes this lock)
#: in the middle of a block that already holds it, on the same thread
_registry_lock = threading.RLock()


class Session:
    """The ledger of one protected data set, as an object you can name.

    ``path=``: keep the ledger in a durable, append-only file (:mod:`dpframe.accounting.durable`).
    ``expect_head=``: a head digest of that ledger archived earlier (``dpframe inspect LEDGER
    --head``); the ledger is refused (:class:`LedgerError`, here and when :func:`protect` opens
    it) unless its history contains that head — a ledger rolled back to an older copy,
    deleted, or a copy that spent separately is not used.
    :func:`protect` binds a session to its data (the one passed as ``session=``, else the
    current ``with`` block's, else a new one). Queries find their ledger by provenance; naming
    a session (``session=s``) or querying inside ``with s:`` only *asserts* which ledger is
    meant, and a mismatch is an error.
    """

    def __init__(self, name: str | None = None, *, path: str | os.PathLike[str] | None = None,
                 expect_head: str | None = None) -> None:
        if path is not None:
            from dpframe.accounting.durable import check_location

            check_location(path)  # a clear error now, not at the first protect
        if expect_head is not None:
            _check_expected_head(path, expect_head)
        self.name = name
        self.path = path
        self.expect_head = expect_head
        self.dataset: Dataset | None = None
        self._lock = threading.Lock()
        self._tokens: list[contextvars.Token[tuple[Session, ...]]] = []
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

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:
        return self

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


def _check_expected_head(path: str | os.PathLike[str] | None, expect_head: str) -> None:
    """``Session(path, expect_head=...)``: the ledger at ``path`` exists and its history
    contains ``expect_head`` (:func:`dpframe.accounting.durable.check_expected_head`), read without
    modifying it."""
    from dpframe._validation import check_head
    from dpframe.accounting.durable import check_ledger_head

    check_head(expect_head)
    if path is None:
        raise ParameterError("expect_head= checks a durable ledger: pass path= too")
    check_ledger_head(path, expect_head)


def current_session() -> Session | None:
    """The innermost session entered with ``with``, or None."""
    stack = _current.get()
    return stack[-1] if stack else None


def lookup_session(session: Session | str | None) -> Session | None:
    """A session given as an object or by name."""
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


# -- registry: which frame objects are verified ---------------------------------------------
class _Handle(dict[str, str]):
    """What a verified pandas frame keeps in ``attrs["dpframe"]``.

    It serialises (``to_parquet`` writes ``attrs``) as a short notice, never as a log. It knows
    the one frame it belongs to; pandas copies it (deep copies return the same handle) into
    every frame derived with pandas operations, which are thereby recognised as unverified.
    """

    def __init__(self, facts: FrameFacts, owner: Any) -> None:
        super().__init__(dpframe_handle="live privacy-budget handle; not a release log")
        self.facts = facts
        self.owner = weakref.ref(owner)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Handle:
        return self

    def __copy__(self) -> _Handle:
        return self

    def __reduce__(self) -> Any:  # pickling drops the live budget
        return (dict, (dict(self),))


_frames: IdentityMap[FrameFacts] = IdentityMap()  # verified Polars and engine frames


class _MarkerRecord:
    """What dpframe knows about one marker: the facts it vouches for, the signature of the plan
    beneath it, and that plan. Held only by the marker itself (the plan's anchored literal,
    :func:`backends.polars._memory.anchored_series`), so it lives exactly as long as some plan that
    carries the marker: holding the plan beneath keeps the in-memory frames it scans alive, so
    their buffer addresses (part of the signature) cannot be reused by other data while the
    marker can be presented, and once the last such plan is freed the record (and every byte
    it held) goes with it; a marker whose record is gone is unknown, never someone else's."""

    __slots__ = ("__weakref__", "beneath", "facts", "signature")

    def __init__(self, facts: FrameFacts, signature: str, beneath: Any) -> None:
        self.facts, self.signature, self.beneath = facts, signature, beneath


#: marker -> its record, while a plan carrying the marker lives
_markers: weakref.WeakValueDictionary[str, _MarkerRecord] = weakref.WeakValueDictionary()
#: records no plan can hold (a pyarrow / Polars pair that cannot share an anchored value):
#: kept for the life of the process, as before anchors existed
_unanchored: list[_MarkerRecord] = []


def _register(frame: Any, facts: FrameFacts, data: Any = None) -> Any:
    """Make ``frame`` (the object handed to the user) a verified frame with ``facts``;
    ``data``: the private object its releases read (default: a snapshot of ``frame``).
    Returns the frame to hand out (a LazyFrame gains its marker)."""
    backend = facts.dataset.backend
    facts = replace(facts, data=backend.snapshot(frame) if data is None else data)
    if backend.carries_handle:
        frame.attrs = {**{k: v for k, v in frame.attrs.items() if k != ATTRS_KEY},
                       ATTRS_KEY: _Handle(facts, frame)}
        return frame
    if backend.readable_plans:
        marker = derivations.new_marker()
        record = _MarkerRecord(facts, derivations.plan_signature(frame), frame)
        try:
            anchor = anchored_series(marker, record)
        except (RuntimeError, AttributeError, TypeError):  # pragma: no cover - old pyarrow
            anchor = None  # (no string_view, or a copy on import): kept for good instead
            _unanchored.append(record)
        frame = derivations.add_marker(frame, marker, anchor)
        with _registry_lock:
            _markers[marker] = record
    if facts.data is frame:  # (an immutable engine frame read as is: a value holding its own
        # key would keep both alive for ever)
        facts = replace(facts, data=_SELF)
    _frames.set(frame, facts)
    return frame


#: stands for "the registered frame itself" as a registered frame's data
_SELF: Any = object()


def _registered(frame: Any) -> FrameFacts | None:
    facts = _frames.get(frame)
    if facts is not None and facts.data is _SELF:
        return replace(facts, data=frame)
    return facts


_UNVERIFIED_PANDAS = (
    "this pandas frame was derived from a protected frame with a pandas operation (indexing, "
    "fillna, concat, merge, assign, copy, ...), which dpframe cannot verify to be row-wise. "
    "Derive it through dpframe instead, with narwhals expressions: "
    "pf.dp.filter(nw.col('age') >= 65), pf.dp.with_columns((nw.col('income') / 1000)"
    ".alias('income_k'), bounds={'income_k': (0, 250)}), pf.dp.select(...), pf.dp.drop(...), "
    "pf.dp.rename({...}) (import narwhals as nw). Nothing was read or spent."
)
_NO_ROOT_PANDAS = (
    "this pandas frame has no privacy budget: it is neither a frame returned by dpf.protect "
    "nor a .dp derivation of one (pandas operations such as merge, concat, indexing or "
    "to_numpy produce frames dpframe cannot trace). A frame computed from protected data must "
    "be derived from the protected frame: frame.dp.filter(nw.col('age') >= 65), "
    "frame.dp.with_columns(...), .dp.select / .dp.drop / .dp.rename (import narwhals as nw). "
    "Nothing was read or spent."
)


def _facts_of(frame: Any, backend: Backend) -> FrameFacts:
    if backend.carries_handle:
        handle = frame.attrs.get(ATTRS_KEY)
        if isinstance(handle, _Handle):
            if handle.owner() is frame:
                return handle.facts
            raise DerivationError(_UNVERIFIED_PANDAS)
        raise NoLedgerError(_NO_ROOT_PANDAS)
    facts = _registered(frame)
    if facts is not None:
        return facts
    if not backend.readable_plans:
        raise NoLedgerError(backend.no_root_message())
    marker, steps, beneath = derivations.walk_lazy_plan(frame)
    with _registry_lock:
        found = _markers.get(marker)
    if found is None:
        raise NoLedgerError(
            "this LazyFrame's plan carries a dpframe marker that this process does not know "
            "(a plan from another process, or serialized and read back), so it has no "
            "privacy budget here. Query the protected LazyFrame of this process, or continue "
            "its budget across processes with a durable dpf.Session(path=...). Nothing was "
            "read or spent."
        )
    base, signature = found.facts, found.signature
    if beneath != signature:
        raise DerivationError(
            "the plan beneath this LazyFrame's dpframe marker is not the plan that was "
            "protected (a marker copied onto other data, or a protected plan changed); "
            "derive frames from the protected LazyFrame itself. Nothing was read or spent."
        )
    if not steps:
        return base
    # what releases read: the protected plan with the verified steps compiled by dpframe,
    # never the plan the user built
    return replace(base.after(steps), data=apply_steps(base.data, steps, backend.rowwise))


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
        if facts.unit is None:  # (with a privacy unit the row count is private anyway)
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


#: objects passed to protect, while they live (a flag only: a value that referred to the data
#: set would keep its frames, hence the key itself, alive)
_originals: IdentityMap[bool] = IdentityMap()
#: (device, inode) of files protected lazy sources read (identities only, no data set)
_files: set[tuple[int, int]] = set()


#: names in the structure of protected engine frames that identify what they read (DuckDB's
#: registered objects and generated relation aliases: ``Backend.lineage``); a frame whose
#: structure names one of them derives from a protected frame
_lineages: set[str] = set()


def _lineage(frame: Any, backend: Backend) -> set[str]:
    return set(backend.lineage(frame))


def _engine_paths(frame: Any, backend: Backend) -> list[str]:
    """The files an engine frame reads, as far as the engine names them without reading."""
    listed = backend.bound_files(frame)
    return list(listed) if listed is not None else backend.source_paths(frame)


#: the memory of protected frames (the objects passed to protect, and dpframe's snapshots)
_memory = PROTECTED_MEMORY


def _refuse_live(frame: Any, backend: Backend) -> None:
    """Refuse to open a second budget on data that already has one in this process: a frame
    that is protected or derived from a protected one, the very object protected before (a
    re-run notebook cell), a Polars frame or plan over the buffers of a protected frame
    (``clone()``, ``lazy()``, ``select(pl.all())``), a lazy source (any engine) over files a
    protected frame already reads, or an engine frame whose structure names what a protected
    one reads (a DuckDB ``rel.project(...)``, ``filter``, ``order`` of a protected relation,
    or SQL over it: :meth:`DuckDBBackend.lineage`). Structure only: no value is compared."""
    if backend.carries_handle:
        # a live handle, or its notice after a pickle / Parquet round trip (a public fact)
        handle = frame.attrs.get(ATTRS_KEY)
        live = isinstance(handle, _Handle) or (
            isinstance(handle, Mapping) and "dpframe_handle" in handle)
    elif backend.readable_plans:
        live = _registered(frame) is not None or bool(derivations.plan_markers(frame))
    else:
        live = _registered(frame) is not None
    if _originals.get(frame) is not None:
        live = True
    if not live:
        live = _memory.overlaps(backend.buffer_ranges(frame))
    if not live:  # (an engine plan over in-memory pandas objects: Dask's from_pandas)
        live = _memory.overlaps(r for part in _memory_leaves(frame, backend)
                                for r in _pandas_ranges_of(part))
    if not live and backend.lazy:
        paths = plan_sources(frame)[0] if backend.readable_plans else _engine_paths(
            frame, backend)
        with _registry_lock:
            live = any(st[2:] in _files for st in _stat_all(paths).values() if st[0] >= 0)
    if not live:
        names = _lineage(frame, backend)
        with _registry_lock:
            live = not names.isdisjoint(_lineages)
    if live:
        raise LedgerError(LIVE_BUDGET)


def _remember_original(frame: Any, dataset: Dataset, data: Any) -> None:
    try:
        _originals.set(frame, True)
    except TypeError:  # pragma: no cover - every supported frame type is weak-referenceable
        return
    with _registry_lock:
        if dataset.source is not None:
            for st in dataset.source.files.values():
                if st[0] >= 0:
                    _files.add((st[2], st[3]))  # the file itself, whatever its name
        _lineages.update(_lineage(frame, dataset.backend))
        if data is not frame:
            _lineages.update(_lineage(data, dataset.backend))
    ranges_of = dataset.backend.buffer_ranges
    # the memory of the object protected (what copies of it share) while it lives, and of
    # dpframe's snapshot while that lives
    _memory.add(ranges_of(frame), frame, ranges_of)
    if data is not frame:
        _memory.add(ranges_of(data), data, ranges_of)
    for part in _memory_leaves(frame, dataset.backend):
        _memory.add(_pandas_ranges_of(part), part, _pandas_ranges_of)
    dataset.backend.protected(frame)  # (Dask: a frame built later over equal values gets its
    # own expression)


def _pandas_ranges_of(obj: Any) -> list[tuple[int, int]]:
    """The buffer ranges of a pandas DataFrame or Series."""
    return pandas_ranges(obj.to_frame() if obj.ndim == 1 else obj)


def _memory_leaves(frame: Any, backend: Backend) -> list[Any]:
    """The pandas objects an engine plan reads from memory (``Backend.memory_leaves``)."""
    return list(backend.memory_leaves(frame))


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
    keys: Mapping[str, Sequence[Any]] | None = None,
    missing: Missing | Mapping[str, Missing] | None = None,
    session: Session | str | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    max_groups_per_unit: int | None = None,
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
    backend = backend_of(frame)
    backend.check_usable()  # (a fork child of a process that ran Polars would hang)
    _refuse_live(frame, backend)
    for hook in _ON_PROTECT:  # (the frames layer registers the engine's .dp namespace)
        hook(backend)
    clean_bounds = validate_bounds(bounds)
    clean_keys = validate_keys(keys)
    clean_missing = validate_missing(DROP if missing is None else missing, clean_bounds)
    check_readers(frame, backend)
    schema = backend.schema(frame)
    bad_names = [c for c in schema if not isinstance(c, str)]
    if bad_names:
        raise UnsupportedInputError(
            f"column names must be strings; got {bad_names[:5]!r}: rename them first "
            "(e.g. frame.columns = frame.columns.astype(str))"
        )
    for col in [*clean_bounds, *clean_keys]:
        if col not in schema:
            raise UnsupportedInputError(
                f"column {col!r} named in bounds/keys is not in the frame; "
                f"available: {', '.join(map(repr, list(schema)[:20]))}"
            )
    from dpframe.engine import _aggregation as engine

    for col in clean_bounds:
        engine.validate_column(frame, col)
    from dpframe.provenance import _units as units

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
        from dpframe.accounting.durable import open_ledger

        ledger: Ledger = open_ledger(epsilon, delta, path=sess.path,
                                     expect_head=sess.expect_head)
    else:
        ledger = Ledger(epsilon, delta)
    dataset = Dataset(ledger, n, backend, sess, fill_word=fill_word(missing))
    facts = FrameFacts(dataset, True, clean_bounds, clean_missing, clean_keys, unit=unit)
    sess._bind(dataset)
    protected = _register(protected, facts, data=data)
    dataset.root_ref = weakref.ref(protected)
    dataset.source = source
    if dataset.source is not None and dataset.source.recount:
        dataset.root_strong = data  # (only to re-count a source not bound by file identity)
    _remember_original(frame, dataset, data)
    if unit is None:  # (with a privacy unit the row count is private anyway)
        _notice_private_sizes(schema, backend, clean_bounds, missing)
    return protected  # the same type as ``frame``


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
