"""The log entries of a release: one per measurement, one per query answered from public facts
and one per key selection, each a :class:`~dpframe.accounting._log_schema.LogRecord` with the
fields every entry of the release shares (docs/architecture.md, "Module by module", step 11).
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpframe import engine
from dpframe import provenance as units
from dpframe.accounting import LogRecord
from dpframe.mechanisms.protocol import Mechanism
from dpframe.provenance import DROP, FrameFacts
from dpframe.query import keys_reference
from dpframe.query.statistics import Measurement
from dpframe.release._records import GroupBy, Planned, Request, group_columns

#: Log entries kept per planned query (:meth:`LogContext.planned_entry`).
_ENTRIES_PER_PLAN = 16


def _interval_text(level: float | None, p: Planned) -> str | None:
    """The log's ``interval`` field: what ``ci=`` released for this query, truthfully."""
    if level is None:
        return None
    if p.plan.interval_note:  # the plan says what it released (quantiles: brackets, ranks)
        return f"{level:g} {p.plan.interval_note.replace('<name>', p.name)}"
    if p.plan.interval is not None:
        return f"{level:g} confidence interval released (post-processing, no ε)"
    return "none: this statistic has no interval (ci= ignored for it)"


@dataclass(eq=False)
class LogContext:
    """The fields every entry of one release shares (made once per release and never changed:
    not a frozen dataclass only because its ``__init__`` would set each field through
    ``object.__setattr__``, a cost on every release)."""

    time: str
    engine: str
    random_source: str
    group_by: GroupBy | None
    keys_ref: str | None  # the ledger's reference to the key list (keys_reference)
    n_keys: int
    derivation: str
    facts: FrameFacts
    level: float | None

    @classmethod
    def of(cls, frame: Any, facts: FrameFacts, request: Request) -> LogContext:
        return cls(
            time=_dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds"),
            engine=engine.engine_name(frame),
            random_source=request.random_source,
            group_by=None if request.group_by is None else ",".join(
                group_columns(request.group_by)),
            keys_ref=None if request.keys is None else keys_reference(request.keys)[0],
            n_keys=len(request.keys or ()),
            derivation=" > ".join(facts.derivation),
            facts=facts,
            level=request.ci,
        )

    @functools.cached_property
    def _release_fields(self) -> dict[str, Any]:
        """The entry fields every measurement of this release shares, computed once per
        release (public facts and the request only)."""
        facts = self.facts
        grouped = self.group_by is not None
        return {"time": self.time, "group_by": self.group_by, "group_keys": self.keys_ref,
                "random_source": self.random_source, "engine": self.engine,
                "derivation": self.derivation,
                "verification": "verified from the plan structure",
                **units.describe(facts.unit, grouped, facts.dataset.neighbours)}

    @functools.cached_property
    def _per_query(self) -> dict[int, dict[str, Any]]:
        """The shared fields of each query's entries, by the planned query's identity."""
        return {}

    def _query_fields(self, p: Planned) -> dict[str, Any]:
        """The entry fields every measurement of query ``p`` shares (from its plan and the
        frame's public facts)."""
        cols = p.query.columns_read()
        facts = self.facts
        clamping = "; ".join(
            f"{c} clamped to [{facts.bounds[c][0]:g}, {facts.bounds[c][1]:g}]" for c in cols
        ) or "none (row count)"
        missing = "; ".join(f"{c}: {_policy_text(facts.missing.get(c, DROP))}" for c in cols)
        return {
            "name": p.name, "query": p.plan.query, "columns": ",".join(p.query.columns_logged()),
            "clamping": clamping + (" in the engine; how many were clamped is not released"
                                    if cols else ""),
            "missing": missing or "n/a (row count)",
            "size": "public" if p.plan.public_size else "private",
            "formulation": p.plan.formulation,
            "composition": (_composition(self.n_keys, p, facts)
                            if self.group_by is not None else "sequential"),
            "interval": _interval_text(self.level, p),
        }

    def entry(self, p: Planned, m: Measurement | None, mech: Mechanism | None, epsilon: float,
              delta: float, point: tuple[float, float] | None) -> dict[str, Any]:
        if m is None:  # answered exactly from public facts (a public size)
            value = float(p.plan.finalize({})[0])
            point = (value, value)
        lower, upper = (point if point is not None else (m.lower, m.upper))  # type: ignore[union-attr]
        if mech is not None:
            lower, upper = mech.domain.lower, mech.domain.upper
        quanta = sorted({a.fp.q for a in (m.needs if m is not None else ()) if a.fp is not None})
        shared = self._per_query.get(id(p))  # (the planned queries live through the release)
        if shared is None:
            shared = dict(self._release_fields)
            shared.update(self._query_fields(p))
            self._per_query[id(p)] = shared
        fields = dict(shared)
        fields.update({
            "part": m.name if m is not None else p.plan.query,
            "epsilon": float(epsilon),
            "delta": float(delta),
            "mechanism_epsilon": float(mech.epsilon) if mech is not None else 0.0,
            "epsilon_overhead": float(getattr(mech, "epsilon_overhead", 0.0)),
            "sensitivity": float(mech.sensitivity if mech is not None else (
                m.sensitivity if m is not None else 0.0)),
            "mechanism": str(mech.name) if mech is not None else (
                "none (single-point domain)" if m is not None else "none (public size)"),
            "scale": float(mech.scale) if mech is not None else 0.0,
            "grid": _json_num(getattr(mech, "grid", 0.0) or 0.0),
            "domain_lower": _json_num(lower),
            "domain_upper": _json_num(upper),
            "fixed_point_quantum": float(quanta[0]) if len(quanta) == 1 else (
                None if not quanta else ",".join(f"{q:g}" for q in quanta)),
            "mechanism_choice": p.choices.get(m.name, "requested") if m is not None else
            "none needed: the value is public",
        })
        return LogRecord.entry_dict(fields)

    def planned_entry(self, p: Planned, m: Measurement, mech: Mechanism, epsilon: float,
                      delta: float) -> dict[str, Any]:
        """:meth:`entry` of a measurement released by the mechanism built before the read
        (no single-point domain): every field but ``time`` is then a function of public
        facts alone — the plan, the measurement, the mechanism's calibration, the charge and
        this release's shared fields — so a repeated query (whose plan copies share
        ``p.entries``, :mod:`dpframe.release._plan_cache`) copies the entry written the first
        time with this release's time: the same fields, in the same order. Keyed by those
        public facts (never by the data or a result)."""
        table = p.entries
        if table is None:
            return self.entry(p, m, mech, epsilon, delta, None)
        key = (m.name, epsilon, delta, math.copysign(1.0, delta), p.choices.get(m.name),
               self.random_source, self.engine, self.group_by, self.keys_ref, self.n_keys,
               self.derivation, self.level)  # (δ's sign too: -0.0 == 0.0, the log tells them)
        known = table.get(key)
        if known is not None and known[0] is m and known[1] is mech:
            fields = dict(known[2])
            fields["time"] = self.time
            return fields
        out = self.entry(p, m, mech, epsilon, delta, None)
        if len(table) < _ENTRIES_PER_PLAN:
            table[key] = (m, mech, dict(out))  # (a copy: the ledger stamps the one it gets)
        return out

    def selection_entry(self, log: Mapping[str, Any], columns: Sequence[str]
                        ) -> dict[str, Any]:
        """The log entry of a key selection (its released keys are the ``group_keys``)."""
        return LogRecord.from_dict({
            "time": self.time, "name": "keys", "query": "key selection",
            "part": "keys", "columns": ",".join(columns), "group_by": self.group_by,
            "group_keys": self.keys_ref, "epsilon": float(log["epsilon"]),
            "delta": float(log["delta"]),
            "mechanism_epsilon": float(log["epsilon_per_key"]),
            "epsilon_overhead": float(log["epsilon_overhead"]),
            "sensitivity": float(log["max_count_per_key"]), "mechanism": "laplace",
            "scale": float(log["scale"]), "grid": float(log["grid"]),
            "domain_lower": 0.0, "domain_upper": None,
            "clamping": "none (row counts per key)",
            "missing": "rows with a missing key are in no group",
            "random_source": self.random_source, "engine": self.engine, "size": "private",
            "formulation": (
                "private key selection: a noisy count per observed key (" + (
                    f"ε/m each, m = {int(log['max_keys_per_unit'])} keys per unit: an added or "
                    "removed row changes at most m keys' counts by 1"
                    if self.facts.dataset.size_private else
                    f"ε/(2m) each, m = {int(log['max_keys_per_unit'])} keys per unit: a "
                    "replaced unit changes at most 2m keys' counts by 1") +
                "), kept if above the threshold "
                f"{float(log['threshold']):.6g}; a key one unit holds is released with "
                f"probability ≤ {float(log['pass_probability']):.3g} ≤ δ; "
                f"{int(log['released_keys'])} keys kept, sorted; counts not released"),
            "composition": "sequential (before the queries on the kept keys)",
            "derivation": self.derivation,
            "verification": "verified from the plan structure",
            "mechanism_choice": "the Laplace mechanism (used for every key selection)",
            "fixed_point_quantum": None, "interval": None,
            **units.describe(self.facts.unit, False, self.facts.dataset.neighbours),
        }).to_dict()


def _composition(n_keys: int, p: Planned, facts: FrameFacts) -> str:
    """The log's composition text of a group-by release."""
    share = p.plan.group_share or 0.5
    if facts.dataset.size_private:
        why = "an added or removed row touches one group"
    elif facts.unit is None:
        why = "a replaced row can move between two groups"
    else:
        why = f"a replaced unit can reach {2 * facts.unit.touched_groups} groups"
    return f"parallel over {n_keys} declared groups (ε share {share:g} per group: {why})"


def _policy_text(policy: Any) -> str:
    return "rows missing it are dropped (size private)" if policy == DROP else \
        f"missing values filled with the public value {float(policy):g}"


def _json_num(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None
