"""The neighbour definition a ledger accounts under (issue 33).

* ``"replace"`` (the default; the papers' *bounded* DP): two data sets are neighbours when one
  row of one is replaced by another row. The number of rows ``n`` is public.
* ``"add_remove"`` (*unbounded* DP, the definition of most other DP libraries): one data set is
  the other with one row added or removed. ``n`` is then private: nothing released may depend
  on it except through noise.

A ledger accounts under one definition for its whole life (ε spent under one is not ε under
the other: a replacement is an add and a remove, so ``ε`` under add/remove is at most ``2ε``
under replace, and a ledger that mixed them would state neither). The definition is written in
the ledger's document, in every log entry of an add/remove ledger and in the durable ledger's
header only when it is ``"add_remove"``: documents, entries, headers and sealed files that have
no such field (all those written before the choice existed, and every replace-one ledger's)
read as ``"replace"``, so they keep their digests and still verify.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from dpframe.errors import LedgerError, ParameterError

__all__ = ["ADD_REMOVE", "NEIGHBOURS", "REPLACE", "Neighbours", "check_neighbours",
           "check_same", "neighbours_of"]

Neighbours = Literal["replace", "add_remove"]
REPLACE: Neighbours = "replace"
ADD_REMOVE: Neighbours = "add_remove"
NEIGHBOURS: tuple[Neighbours, ...] = (REPLACE, ADD_REMOVE)
#: the field's name in a ledger document, a log entry and a durable ledger's header
FIELD = "neighbours"


def check_neighbours(value: Any) -> Neighbours:
    """``value`` if it names a definition, else a :class:`ParameterError` (public argument)."""
    if isinstance(value, str) and value in NEIGHBOURS:
        return REPLACE if value == REPLACE else ADD_REMOVE
    raise ParameterError(
        f"neighbours must be 'replace' (the default: one row replaced, the row count public) "
        f"or 'add_remove' (one row added or removed, the row count private), got {value!r}"
    )


def neighbours_of(record: Mapping[str, Any] | None) -> Neighbours:
    """The definition a ledger document, log entry or ledger header states; one without the
    field (written before the choice existed, or by a replace-one ledger) is ``"replace"``."""
    value = None if record is None else record.get(FIELD)
    return ADD_REMOVE if value == ADD_REMOVE else REPLACE


def check_same(held: Neighbours, asked: Neighbours, where: str) -> None:
    """Refuse to account under ``asked`` a ledger that already accounts under ``held``."""
    if held != asked:
        raise LedgerError(
            f"{where} accounts under neighbours={held!r}, and this protect asks for "
            f"neighbours={asked!r}; one ledger never mixes the two definitions (their ε are "
            f"not the same guarantee). Protect with neighbours={held!r}, or use a new "
            "session/ledger file for the other definition. Nothing was read or spent."
        )
