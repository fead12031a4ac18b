"""The privacy-budget ledger: sequential composition, atomic spending, the accounting log.

One :class:`Ledger` exists per protected dataset. Every frame derived from that dataset draws
from it. Spending follows a three-step protocol so that a query which fails, or which would
exceed the budget, spends nothing:

1. :meth:`Ledger.reserve` checks ``spent + pending + ε ≤ budget`` (and the same for δ) under a
   lock and, if it fits, holds the amount as *pending*;
2. the caller computes the aggregate and samples the noise, outside the lock;
3. :meth:`Ledger.commit` turns the pending amount into spent ε/δ and appends the log entries
   atomically; :meth:`Ledger.cancel` (on any exception) drops the reservation.

Composition is sequential (basic composition, Dwork & Roth 2014, Thm 3.14): ε and δ of
successive releases add. Parallel composition over the disjoint groups of a group-by is
accounted by the query layer, which charges the group-by once (see :mod:`dpframe.query.statistics`).

**Float tolerance.** Shares are accumulated exactly (as the rational values of the given
floats: integers in units of 2^-1074 while the amounts are sums of doubles, :mod:`._dyadic`,
else :class:`fractions.Fraction`), so the order of spending never matters. Decimal shares
such as 0.1 + 0.2 + 0.2 + 0.2 + 0.3 are, as binary floats, 2.8e-17 *above* 1.0, so an exact
comparison would refuse the last share of a budget the user split exactly. The ledger therefore
accepts a total up to ``budget · (1 + 1e-9)``: the cumulative privacy loss is at most
ε(1 + 1e-9), a difference no attacker can measure, while any share that exceeds the budget by
more than one part in a billion (e.g. 1.0 + 1e-6 against 1.0) is refused.
"""

from __future__ import annotations

import functools
import itertools
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from dpframe._validation import check_delta, check_epsilon
from dpframe.accounting._dyadic import floor_units, to_float, to_fraction, units
from dpframe.accounting._log_entries import (
    KEYS_CHAIN_START,
    EntryChain,
    LogEntry,
    chain_keys,
    frozen_entries,
)
from dpframe.accounting._log_snapshot import EntriesAsOf, KeysAsOf, LogDocument
from dpframe.accounting.neighbours import ADD_REMOVE, FIELD, REPLACE, Neighbours, check_neighbours
from dpframe.errors import BudgetExceededError, LedgerError, ParameterError

__all__ = [
    "LOG_VERSION", "RELATIVE_TOLERANCE", "Budget", "Ledger", "Reservation", "new_ledger_id",
]

#: 2: group keys by reference (``"keys"`` table, ``group_keys`` = ``"sha256:<hex>"``)
LOG_VERSION = 2
RELATIVE_TOLERANCE = 1e-9
_ZERO = Fraction(0)


@functools.lru_cache(maxsize=1024)
def _exact(x: float) -> Fraction:
    """The exact rational value of a double (cached: a session asks the same ε again and
    again, and building the Fraction is most of a reservation's arithmetic)."""
    return Fraction(x)


def _exact_share(name: str, value: Any) -> tuple[Fraction, int | None]:
    """``value`` checked as a share of ε or δ (:func:`_check_budget_value`, zero allowed), as
    its exact rational value and its units of 2^-1074 (:mod:`._dyadic`)."""
    exact = _exact(_check_budget_value(name, value, allow_zero=True))
    return exact, units(exact)


_checked_share = functools.lru_cache(maxsize=1024, typed=True)(_exact_share)
""":func:`_exact_share` cached on the value *and its type* (``typed``: ``True``, ``1`` and
``1.0`` are separate entries, so a boolean is still refused); a value the check refuses raises
and is not cached. The amounts are public parameters of the query."""


def _share(name: str, value: Any) -> tuple[Fraction, int | None]:
    """:func:`_checked_share`, uncached for a value that cannot be a cache key."""
    try:
        return _checked_share(name, value)
    except TypeError:  # unhashable: checked (and refused, or converted) without the cache
        return _exact_share(name, value)


@functools.lru_cache(maxsize=64)
def _limit(total: Fraction) -> Fraction:
    """The most a ledger of ``total`` may spend: ``total·(1 + RELATIVE_TOLERANCE)``."""
    return total * (1 + Fraction(RELATIVE_TOLERANCE))



def _float(x: Fraction) -> float:
    """``float(x)``, computed as Python computes it (numerator / denominator, correctly
    rounded) without the abstract base class's dispatch."""
    return x.numerator / x.denominator


def new_ledger_id() -> str:
    """A random ledger id: 128 bits from the OS's secure source, as 32 hex digits. Two ledgers
    (in any process, on any machine) share an id with probability about n²/2¹²⁹."""
    return secrets.token_hex(16)


def _check_budget_value(name: str, value: Any, *, allow_zero: bool) -> float:
    """A ledger's total ε (> 0) or δ (≥ 0), checked as everywhere else
    (:mod:`dpframe._validation`)."""
    if name == "epsilon":
        return check_epsilon(value, allow_zero=allow_zero)
    return check_delta(value)


@dataclass(frozen=True)
class Budget:
    """A snapshot of a ledger: total, spent and remaining ε and δ."""

    epsilon: float
    delta: float
    epsilon_spent: float
    delta_spent: float

    @property
    def epsilon_remaining(self) -> float:
        return max(0.0, self.epsilon - self.epsilon_spent)

    @property
    def delta_remaining(self) -> float:
        return max(0.0, self.delta - self.delta_spent)

    def as_dict(self) -> dict[str, float]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "epsilon_spent": self.epsilon_spent,
            "delta_spent": self.delta_spent,
            "epsilon_remaining": self.epsilon_remaining,
            "delta_remaining": self.delta_remaining,
        }

    def __repr__(self) -> str:
        return (
            f"Budget(epsilon: spent {self.epsilon_spent:.6g} of {self.epsilon:.6g}, "
            f"remaining {self.epsilon_remaining:.6g}; delta: spent {self.delta_spent:.3g} of "
            f"{self.delta:.3g}, remaining {self.delta_remaining:.3g})"
        )


@dataclass(frozen=True)
class Reservation:
    """Pending ε/δ held by :meth:`Ledger.reserve` until commit or cancel."""

    ledger_id: str
    token: int
    epsilon: Fraction
    delta: Fraction
    #: ``epsilon`` in units of 2^-1074 (:mod:`._dyadic`), None when not known
    epsilon_units: int | None = None


class Ledger:
    """Budget and log of one protected dataset; thread-safe.

    ``id`` is a random ledger id (:func:`new_ledger_id`); release ids are 1, 2, 3, ... per
    ledger (for a :class:`~dpframe.accounting.durable.DurableLedger`, across processes and
    restarts). ``document`` is the live, JSON-serialisable log: ``{"version", "ledger_id",
    "budget", "entries", "keys"}``; release tables carry a sealed copy of it
    (:mod:`dpframe.accounting.seals`).
    ``keys`` stores each list of group keys once per ledger, ``{reference: JSON of the key
    list}``: an entry's ``group_keys`` is the reference (``"sha256:"`` + the SHA-256 of that
    JSON), so a session of group-by releases over many keys stores the keys once, not once per
    release and measurement.
    """

    def __init__(self, epsilon: float, delta: float = 0.0, *,
                 neighbours: Neighbours = REPLACE) -> None:
        #: the neighbour definition this ledger accounts under, for its whole life
        #: (:mod:`dpframe.accounting.neighbours`)
        self.neighbours: Neighbours = check_neighbours(neighbours)
        eps = _check_budget_value("epsilon", epsilon, allow_zero=False)
        dlt = _check_budget_value("delta", delta, allow_zero=True)
        if dlt >= 1:
            raise ParameterError(f"delta must be < 1, got {dlt!r}; typical values are ≤ 1e-6")
        self.id: str = new_ledger_id()
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._eps_total = Fraction(eps)
        self._delta_total = Fraction(dlt)
        #: ε spent, exactly: as units of 2^-1074 (``_eps_units``, :mod:`._dyadic`) while it is
        #: a sum of doubles, which every in-memory spend is; as a Fraction otherwise, or when
        #: read (built from the units on demand)
        self._eps_units: int | None = 0
        self._eps_exact: Fraction | None = Fraction(0)
        #: ``(total, ⌊total·(1 + RELATIVE_TOLERANCE)⌋ in units)`` for the ε total it was
        #: computed for (compared by identity: a durable ledger replaces its total)
        self._eps_limit: tuple[Fraction, int] | None = None
        #: (the Fractions, their floats) of :meth:`_fractions_as_floats`
        self._floats: tuple[tuple[Fraction, Fraction, Fraction],
                            tuple[float, float, float]] | None = None
        self._delta_spent = Fraction(0)
        self._pending: dict[int, Reservation] = {}
        self._tokens = itertools.count(1)
        self._releases = itertools.count(1)
        self.entries: list[dict[str, Any]] = []  # committed: LogEntry (immutable)
        #: set once a release (or a derivation) failed after reading this data set: every
        #: later reservation is refused (dpframe.release._safety_net)
        self.locked = False
        self.keys: dict[str, str] = {}
        #: the key lists of ``keys`` in the order added (an append-only list: a snapshot is a
        #: prefix of it, :class:`~dpframe.accounting._log_snapshot.KeysAsOf`)
        self._key_items: list[tuple[str, str]] = []
        #: chained digests of ``entries`` (extended lazily, when a snapshot's digest is read)
        #: and ``keys`` (dpframe.accounting._log_entries), so sealing a release costs O(1) in the
        # history
        self._entries_chain = EntryChain()
        self._keys_digest = KEYS_CHAIN_START
        self.budget_doc: dict[str, float] = {}
        self.document: dict[str, Any] = {
            "version": LOG_VERSION,
            "ledger_id": self.id,
            "budget": self.budget_doc,
            "entries": self.entries,
            "keys": self.keys,
        }
        if self.neighbours == ADD_REMOVE:  # (absent: replace, as in every older document)
            self.document[FIELD] = ADD_REMOVE
        self._refresh_budget_doc()

    # -- state ---------------------------------------------------------------------------
    @property
    def budget(self) -> Budget:
        with self._lock:
            return self._snapshot()

    @property
    def _eps_spent(self) -> Fraction:
        """The ε spent, exactly."""
        if self._eps_exact is None:
            assert self._eps_units is not None
            self._eps_exact = to_fraction(self._eps_units)
        return self._eps_exact

    @_eps_spent.setter
    def _eps_spent(self, value: Fraction) -> None:
        self._eps_exact = value
        self._eps_units = units(value)

    def _eps_spent_float(self) -> float:
        """``float(self._eps_spent)``, from the units where they are kept."""
        if self._eps_units is not None:
            return to_float(self._eps_units)
        return float(self._eps_spent)

    def _snapshot(self) -> Budget:
        return Budget(
            float(self._eps_total),
            float(self._delta_total),
            self._eps_spent_float(),
            float(self._delta_spent),
        )

    def _refresh_budget_doc(self) -> None:
        """The live document's budget: :meth:`Budget.as_dict` of :meth:`_snapshot`, the same
        values computed without building the snapshot (this runs on every commit)."""
        eps, dlt, dlt_spent = self._fractions_as_floats()
        eps_spent = self._eps_spent_float()
        self.budget_doc.clear()
        self.budget_doc.update({
            "epsilon": eps,
            "delta": dlt,
            "epsilon_spent": eps_spent,
            "delta_spent": dlt_spent,
            "epsilon_remaining": max(0.0, eps - eps_spent),
            "delta_remaining": max(0.0, dlt - dlt_spent),
        })

    def _fractions_as_floats(self) -> tuple[float, float, float]:
        """``float`` of the ε total, the δ total and the δ spent, converted again only when
        one of them is replaced (they are immutable ``Fraction`` objects, compared by
        identity; the cache holds them, so an identity cannot be reused while it is kept)."""
        eps, dlt, dlt_spent = self._eps_total, self._delta_total, self._delta_spent
        cached = getattr(self, "_floats", None)
        if (cached is None or cached[0][0] is not eps or cached[0][1] is not dlt
                or cached[0][2] is not dlt_spent):
            cached = ((eps, dlt, dlt_spent), (_float(eps), _float(dlt), _float(dlt_spent)))
            self._floats = cached
        return cached[1]

    def _fits(self, spent: Fraction, pending: Fraction, extra: Fraction, total: Fraction) -> bool:
        return spent + pending + extra <= _limit(total)

    def _eps_fits(self, pending: Fraction, extra: Fraction, extra_units: int | None) -> bool:
        """:meth:`_fits` for ε: in integer units when nothing is pending and both the spent
        ε and ``extra`` are sums of doubles (:mod:`._dyadic`; the same exact comparison),
        else in fractions."""
        if not self._pending and self._eps_units is not None and extra_units is not None:
            return self._eps_units + extra_units <= self._eps_limit_units()
        return self._fits(self._eps_spent, pending, extra, self._eps_total)

    def _eps_limit_units(self) -> int:
        """``⌊_limit(total ε)⌋`` in units, computed once per total."""
        total = self._eps_total
        if self._eps_limit is None or self._eps_limit[0] is not total:
            self._eps_limit = (total, floor_units(_limit(total)))
        return self._eps_limit[1]

    # -- protocol ------------------------------------------------------------------------
    def check(self, epsilon: float, delta: float = 0.0) -> None:
        """Raise :class:`BudgetExceededError` now if ε/δ cannot fit (a cheap early refusal;
        only :meth:`reserve` is binding)."""
        self.cancel(self.reserve(epsilon, delta))

    def note(self, entries: list[dict[str, Any]]) -> None:
        """Take note of committed entries: a failed release or derivation locks the ledger."""
        if any(str(e.get("query", "")).startswith("failed ") for e in entries):
            self.locked = True

    def reserve(self, epsilon: float, delta: float = 0.0) -> Reservation:
        """Hold ε and δ for one release, or raise :class:`BudgetExceededError`."""
        self._check_process()
        if self.locked:
            raise LedgerError(
                "a release or derivation on this data failed inside dpframe after reading "
                "it (a bug; its log entry names the exception's class): the failure itself "
                "revealed one bit about the data, so this budget answers nothing more. "
                "Report the bug; nothing was read or spent now."
            )
        # ε = 0: a release answered from public facts only (e.g. the public size), logged
        eps, eps_units = _share("epsilon", epsilon)
        dlt, _ = _share("delta", delta)
        with self._lock:
            pend_eps = pend_dlt = _ZERO
            if self._pending:
                pend_eps = sum((r.epsilon for r in self._pending.values()), _ZERO)
                pend_dlt = sum((r.delta for r in self._pending.values()), _ZERO)
            if not self._eps_fits(pend_eps, eps, eps_units):
                left = max(Fraction(0), self._eps_total - self._eps_spent - pend_eps)
                raise BudgetExceededError(
                    f"this query needs epsilon={float(eps):.6g} but only {float(left):.6g} of "
                    f"{float(self._eps_total):.6g} is left; ask for a smaller epsilon or "
                    "protect the data with a larger budget. Nothing was spent."
                )
            if dlt and not self._fits(self._delta_spent, pend_dlt, dlt, self._delta_total):
                left = max(Fraction(0), self._delta_total - self._delta_spent - pend_dlt)
                raise BudgetExceededError(
                    f"this query needs delta={float(dlt):.3g} but only {float(left):.3g} of "
                    f"{float(self._delta_total):.3g} is left; pass a smaller delta (or "
                    "delta=0 with mechanism='truncated'). Nothing was spent."
                )
            res = Reservation(self.id, next(self._tokens), eps, dlt, eps_units)
            self._pending[res.token] = res
            return res

    def _check_process(self) -> None:
        """An in-memory budget lives in one process: a forked child holds a *copy*, and
        children spending copies would each spend the whole remaining budget. Refuse."""
        if os.getpid() != self._pid:
            raise LedgerError(
                "this privacy budget is held in the memory of another process (this process "
                "was forked from it), so spending here would not be seen there. Share a budget "
                "between processes with a durable ledger: dpf.Session(path=...). Nothing was "
                "spent."
            )

    def cancel(self, reservation: Reservation) -> None:
        """Drop a reservation: nothing is spent."""
        with self._lock:
            self._pending.pop(reservation.token, None)

    def commit(self, reservation: Reservation, entries: list[dict[str, Any]],
               keys: Mapping[str, str] | None = None) -> int:
        """Spend a reservation and append its log entries, atomically; return the release id.

        The ledger assigns the release id and stamps ``release_id`` and ``ledger_id`` into
        every entry: callers never number releases themselves. ``keys``: the key lists the
        entries' ``group_keys`` refer to (``{reference: JSON}``), added to the ledger's table
        of keys unless it holds them already."""
        return self._committed(reservation, entries, keys, snapshot=False)[0]

    def commit_and_snapshot(self, reservation: Reservation, entries: list[dict[str, Any]],
                            keys: Mapping[str, str] | None = None
                            ) -> tuple[int, dict[str, Any]]:
        """:meth:`commit`, and the log document as of this release (:meth:`snapshot_document`)
        taken in the same critical section: a release another thread commits between the two
        is never in a table's log (it was, when the table took its snapshot afterwards)."""
        release_id, document = self._committed(reservation, entries, keys, snapshot=True)
        return release_id, cast(dict[str, Any], document)  # (snapshot=True: never None)

    def _committed(self, reservation: Reservation, entries: list[dict[str, Any]],
                   keys: Mapping[str, str] | None, *, snapshot: bool
                   ) -> tuple[int, dict[str, Any] | None]:
        self._check_process()
        with self._lock:
            if self._pending.pop(reservation.token, None) is None:
                raise LedgerError("reservation was already committed or cancelled")
            release_id = next(self._releases)
            _stamp(entries, self.id, release_id)
            self._spend_eps(reservation.epsilon, reservation.epsilon_units)
            if reservation.delta:
                self._delta_spent += reservation.delta
            self._append_log(frozen_entries(entries), keys or {})  # immutable from now on
            self.note(entries)
            self._refresh_budget_doc()
            return release_id, (self._snapshot_locked() if snapshot else None)

    def _spend_eps(self, amount: Fraction, amount_units: int | None) -> None:
        """Add ``amount`` (``amount_units`` in units, None if not known) to the ε spent (the
        caller holds ``_lock``): in units when both are sums of doubles, else as fractions."""
        if not amount:  # (adding an exact zero changes nothing)
            return
        if self._eps_units is not None and amount_units is not None:
            self._eps_units += amount_units
            self._eps_exact = None  # (rebuilt from the units when read)
        else:
            self._eps_spent = self._eps_spent + amount

    def _append_log(self, entries: list[LogEntry], keys: Mapping[str, str]) -> None:
        """Append committed entries and new key lists, extending the chained digests by the
        new items only (the caller holds ``_lock``)."""
        self.entries.extend(entries)  # the entries chain extends when it is read
        new = [(ref, text) for ref, text in keys.items() if ref not in self.keys]
        if new:  # (no new key list: the chain is unchanged)
            self.keys.update(new)
            self._key_items.extend(new)
            self._keys_digest = chain_keys(self._keys_digest, new)

    def _clear_log(self) -> None:
        """Forget every entry and key list (the caller holds ``_lock``): new, empty lists
        replace them, so a snapshot taken before keeps the prefix it holds of the old ones."""
        self.entries = []
        self.keys = {}
        self._key_items = []
        self.document["entries"], self.document["keys"] = self.entries, self.keys
        self._entries_chain = EntryChain()  # older snapshots keep the chain of their list
        self._keys_digest = KEYS_CHAIN_START

    def snapshot_document(self) -> dict[str, Any]:
        """The log document as it is now, in O(1) of the history: a
        :class:`~dpframe.accounting._log_snapshot.LogDocument` holding the ledger's lists
        and how many items each has now (both are append-only), whose entries and key
        table are copied out when it is first read, as exactly what a copy made now holds."""
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> dict[str, Any]:
        """:meth:`snapshot_document`'s document (the caller holds ``_lock``)."""
        return LogDocument(self._fields())

    def _fields(self) -> dict[str, Any]:
        """The log document's fields as they are now, the entries and key table as their
        lazy parts (:mod:`dpframe.accounting._log_snapshot`); the caller holds ``_lock``."""
        doc = {
            "version": LOG_VERSION,
            "ledger_id": self.id,
            "budget": dict(self.budget_doc),
            "entries": EntriesAsOf(self.entries, self._entries_chain),
            "keys": KeysAsOf(self._key_items, self._keys_digest),
        }
        if self.neighbours == ADD_REMOVE:  # (absent: replace, as in every older document)
            doc[FIELD] = ADD_REMOVE
        return doc


def _stamp(entries: list[dict[str, Any]], ledger_id: Any, release_id: int) -> None:
    """Write the ledger's id and the release's id into each log entry of one release."""
    for entry in entries:
        entry["ledger_id"] = ledger_id
        entry["release_id"] = release_id
