"""The one release pipeline. Every statistic — count, sum, mean, variance, std, proportions,
cov/corr, describe, group-by, batch release — goes through :func:`run`:

1. **provenance** (:func:`dpframe.provenance._protect.resolve`): the verified facts of the frame
   and the
   ledger its rows came from; unverifiable derivations and frames with no protected root are
   refused here;
2. **arguments** (:func:`~dpframe.release._request.check_request`): ε, δ, mechanism, weights,
   random state, group keys;
3. **plan** (:mod:`dpframe.release._planning`, reused by :mod:`dpframe.release._plan_cache`):
   each query's measurements from public facts only (bounds, missing-value policy, the public
   size, dtypes), and every mechanism built (:mod:`dpframe.release._mechanisms`) — bad
   parameters fail here;
4. **source**: the files under a lazy plan have not changed: their list and metadata (and a
   re-count, where one is needed) before the reservation, their content digests in a thread
   beside step 6's read, joined before step 7 — a changed file cancels the reservation and
   drops what was read (:func:`_join_check`); in-memory data needs no check: releases read
   dpframe's private snapshot, never the user's object;
5. **reserve** ε and δ in the ledger;
6. **aggregate**: one pass over the data for all queries
   (:func:`dpframe.engine._aggregation.aggregate`);
7. **noise, post-processing and log entries** (:mod:`dpframe.release._mechanisms`,
   :mod:`dpframe.release._outcome`, :mod:`dpframe.release._entries`);
8. **commit** (the ledger assigns the release id).

Steps 1–5 read public facts only, and an error there spends nothing. After step 5 nothing a
caller sees depends on the data except through the mechanisms' noise: derived columns are
computed by dpframe's total compilation of the verified expressions (:mod:`dpframe.rowwise`),
the engine never refuses a value (missing values follow the declared policy, infinite ones are
clamped), no row count is checked, and the shapes of the results are fixed by the declared
keys. Should anything still fail in steps 6–7, the safety net (:mod:`dpframe.release._safety_net`)
spends the reservation, logs the failure and raises one fixed error with no data in it.
On Dask and Spark, whose workers can all die while the engine waits for them for ever, the
engine's passes (the re-count in step 4, step 6's key selection and aggregation) run under
the engine timeout (:func:`~dpframe.release._engine_pass.engine_pass`,
``DPFRAME_ENGINE_TIMEOUT``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from dpframe import engine
from dpframe import provenance as units
from dpframe.backends import Backend, backend_of
from dpframe.engine import Bounding, release_seed
from dpframe.errors import EngineTimeoutError, SourceChangedError
from dpframe.mechanisms.selection import select_keys
from dpframe.provenance import DROP, FrameFacts, Session, resolve
from dpframe.query import Agg, keys_reference, merged_reads
from dpframe.query.statistics import Query
from dpframe.release._engine_pass import ENGINE_TIMEOUT, engine_pass, engine_timeout
from dpframe.release._entries import LogContext
from dpframe.release._key_checks import declared_keys
from dpframe.release._key_observation import observed_keys
from dpframe.release._mechanisms import draw_all, release_delta
from dpframe.release._outcome import Outcome, record_answer, released_selection
from dpframe.release._plan_cache import _PLANS as _PLANS  # (re-exported for tests)
from dpframe.release._plan_cache import _typed as _typed  # (re-exported for tests)
from dpframe.release._plan_cache import plan_repeated
from dpframe.release._planning import (
    _plan_all,
    immutable,
    key_selection_rule,
    queries_part,
    selection_count_upper,
    selection_neighbours,
)
from dpframe.release._records import GroupBy, Planned, Request, Selected, group_columns
from dpframe.release._request import MECHANISMS, check_request
from dpframe.release._safety_net import charge_failure, failure_entry, failure_error, quiet
from dpframe.rowwise.engines import apply_steps

__all__ = ["ENGINE_TIMEOUT", "MECHANISMS", "Outcome", "Planned", "Request", "check_request",
           "declared_keys", "engine_pass", "engine_timeout", "evaluate_derivation",
           "exact_measurements", "plan", "plan_release", "run"]


def run(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "auto",
    random_state: Any = None,
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
    ci: float | None = None,
    selection_share: float = 0.5,
    document: bool = True,
) -> Outcome:
    """Answer ``queries`` on ``frame`` as one release costing ``epsilon`` (and ``delta``);
    with ``ci`` (a level such as 0.95), also a confidence interval for every answer. A
    group-by without declared keys and with ``delta > 0`` first selects its keys from the
    data with ``selection_share`` of ε and all of δ (:func:`_select_keys`). ``document``:
    include the ledger's log document as of this release (a table carries it, as a snapshot
    taken in constant time whose entries are copied out when the log is first read; a single
    number carries none)."""
    facts, frame, request, planned = _prepare(
        frame, queries, session=session, epsilon=epsilon, delta=delta, weights=weights,
        mechanism=mechanism, random_state=random_state, group_by=group_by, keys=keys, ci=ci,
        selection_share=selection_share)
    dataset = facts.dataset
    backend = backend_of(frame)  # (found once: the read and the outcome use it too)
    cluster = backend.pass_hooks()  # Dask, Spark: each pass under the engine timeout
    timeout = engine_timeout() if cluster is not None else None
    # step 4: list, metadata (and re-count) now; the content digests beside the read
    finish_check = engine_pass(cluster, timeout, functools.partial(
        dataset.begin_check, _columns_read(facts, request, planned), frame), spent=None)
    if request.selection is not None:  # the key selection draws noise inside the read:
        finish_check()  # its source is checked whole before the reservation
    ledger = dataset.ledger
    spends = any(p.plan.measurements for p in planned)
    epsilon, delta = (request.epsilon, release_delta(planned, request)) if spends else (0.0, 0.0)
    reservation = _reserve(ledger, epsilon, delta, finish_check)
    # --- data is read from here on: nothing below may depend on it except through noise ---
    read = functools.partial(_read, frame, facts, request, planned, queries, backend)
    failure, result = _read_checked(read, cluster, timeout, (epsilon, delta), finish_check,
                                    ledger, reservation)
    if failure is None:
        request, planned, selected, aggs = result
        try:
            values, intervals, entries = _measure(frame, facts, request, planned, aggs)
        except BaseException as exc:  # the safety net, as above
            failure = type(exc).__name__
    if failure is not None:
        charge_failure(frame, facts, request, list(queries), failure, reservation, delta,
                       timeout)
    release_id, log_document = _commit(ledger, reservation, selected + entries, request,
                                       document)
    key_dtypes = released_selection(request, facts)  # warns if no key was kept
    return Outcome(values, request.keys, request.group_by, entries, log_document, release_id,
                   backend, intervals, request.ci, key_dtypes)


def _read_checked(read: Callable[[], Any], cluster: Any, timeout: float | None,
                  spent: tuple[float, float], finish_check: Callable[[], None], ledger: Any,
                  reservation: Any) -> tuple[str | None, Any]:
    """The engine's read (step 6) under the engine timeout and :func:`quiet` (an engine's
    warning, a reader's or a numeric one, depends on values), then step 4's content digests
    joined (:func:`_join_check`). Returns ``(failure, result)``: ``failure`` None, or the
    failure's kind — ``"timeout"`` (a function of elapsed time, which the caller sees
    anyway) or the exception's class name for the safety net
    (:mod:`dpframe.release._safety_net`: never its text)."""
    failure: str | None = None
    result = None
    try:
        with quiet():  # (in memory, no engine timeout: the pass runs here, as engine_pass would)
            result = read() if cluster is None else engine_pass(cluster, timeout, read,
                                                                spent=spent)
    except EngineTimeoutError:
        failure = "timeout"
    except BaseException as exc:  # the safety net
        failure = type(exc).__name__
    return _join_check(finish_check, ledger, reservation, failure), result


def _commit(ledger: Any, reservation: Any, entries: list[dict[str, Any]], request: Request,
            document: bool) -> tuple[Any, dict[str, Any]]:
    """Commit the reservation with the release's log entries (and its keys' reference) and
    return the release id with, when ``document``, the log document as of this release (taken
    in the commit's critical section, so no release of another thread follows it there; else
    empty); on any failure the reservation is cancelled (a no-op once committed) and the
    error re-raised."""
    keys = None if request.keys is None else dict([keys_reference(request.keys)])
    try:
        if document:
            return ledger.commit_and_snapshot(reservation, entries, keys=keys)
        return ledger.commit(reservation, entries, keys=keys), {}
    except BaseException:
        ledger.cancel(reservation)
        raise


def _reserve(ledger: Any, epsilon: float, delta: float, finish_check: Callable[[], None]
             ) -> Any:
    """Reserve ε and δ (step 5). If the ledger refuses, the source check is completed first
    and a changed source reported instead, as when the whole check ran before the
    reservation (both outcomes are public: the ledger's state, the files' bytes changing)."""
    try:
        return ledger.reserve(epsilon, delta)
    except BaseException as exc:
        refused = exc
    finish_check()  # (outside the except block: a SourceChangedError chains to nothing)
    raise refused


def _join_check(finish_check: Callable[[], None], ledger: Any, reservation: Any,
                failure: str | None) -> str | None:
    """Step 4's content digests, joined after the read and before any noise is drawn or
    anything committed (:meth:`dpframe.provenance.Dataset.begin_check`; the soundness
    argument is :class:`dpframe.provenance._binding.ContentCheck`'s). A changed file: the
    reservation is cancelled — nothing spent, nothing logged — and
    :class:`~dpframe.errors.SourceChangedError` raised, whatever the read returned or raised
    (its result, or its failure, is dropped unlooked-at). Otherwise the read's ``failure``
    (None if it succeeded) is returned; an interruption while waiting becomes one."""
    try:
        finish_check()
    except SourceChangedError:
        ledger.cancel(reservation)
        raise
    except BaseException as exc:  # (Ctrl-C while waiting: charged like one during the read)
        return failure or type(exc).__name__
    return failure


def _prepare(frame: Any, queries: Mapping[str, Query], *, session: Session | str | None,
             **arguments: Any) -> tuple[FrameFacts, Any, Request, list[Planned]]:
    """Steps 1–3, shared by :func:`run`, :func:`plan` and :func:`exact_measurements`: the
    frame's verified facts, the data releases read (its private snapshot, if any), the checked
    request and the plans with their mechanisms."""
    facts = resolve(frame, session)
    data = facts.data  # dpframe's private object: never the one the user holds
    request = check_request(queries, facts=facts, **arguments)
    if request.selection is not None:  # keys from the data: check the selection's
        key_selection_rule(facts, request)  # calibration and the queries' rest of ε now
        return facts, data, request, _plan_all(data, facts, queries_part(request), queries)
    return facts, data, request, plan_repeated(data, facts, request, queries)


def _columns_read(facts: FrameFacts, request: Request, planned: list[Planned]
                  ) -> set[str] | None:
    """Every column of the release's frame the read can touch (public: the queries, their
    aggregates, the groups and the privacy unit), for the content check of its files; None
    (all of them) where the check cannot use them: no source files (in memory), or files not
    bound column by column (``SourceBinding.by_name``)."""
    source = facts.dataset.source
    if source is None or not source.by_name:
        return None
    read = {c for p in planned for c in p.query.columns_read()}
    read |= {c for p in planned for a in p.plan.aggregates for c in a.columns()}
    read |= set(group_columns(request.group_by))
    if facts.unit is not None:
        read.add(facts.unit.column)
    return read


def _read(frame: Any, facts: FrameFacts, request: Request, planned: list[Planned],
          queries: Mapping[str, Query], backend: Backend
          ) -> tuple[Request, list[Planned], list[dict[str, Any]], Mapping[Any, np.ndarray]]:
    """Every engine pass of a release after the reservation: the key selection, if any, then
    the aggregation (one :func:`engine_pass`: returned whole, or not at all)."""
    selected: list[dict[str, Any]] = []
    if request.selection is not None:
        request, planned, selected = _select_keys(frame, facts, request, queries)
    return request, planned, selected, _aggregate(frame, facts, request, planned, backend)


def _select_keys(frame: Any, facts: FrameFacts, request: Request,
                 queries: Mapping[str, Query]
                 ) -> tuple[Request, list[Planned], list[dict[str, Any]]]:
    """Keys from the data (docs/privacy.md, section K): the exact row count of every observed
    key (rows with a missing key are in no group), one snapped Laplace count per key at
    ``ε_sel/2`` (a replaced row moves one count down and another up; each row holds one key,
    so ``m = 1`` key per unit and ``c = 1`` row per key), and only the keys whose noisy count
    clears the threshold τ (:func:`dpframe.mechanisms.selection.selection_rule`) are kept, in
    sorted order. A key one row holds passes with probability at most δ. The queries then run
    on the kept keys as public keys with the rest of ε (and no δ): sequential composition."""
    assert request.selection is not None and request.group_by is not None
    cols = group_columns(request.group_by)
    per_unit, unit_column, upper, counted = 1, None, selection_count_upper(facts), frame
    if facts.unit is not None:
        # several rows per person: keep k rows per unit (so a unit reaches at most k keys) and
        # count each key's distinct units (a unit adds at most 1 to a key's count)
        counted, _ = backend_of(frame).bound_contributions(
            frame, Bounding(facts.unit, release_seed(request.rng)), columns=list(cols))
        per_unit, unit_column = facts.unit.max_rows, facts.unit.column
        upper = facts.unit.n_units
    observed, counts = observed_keys(counted, cols, distinct=unit_column)
    rule = key_selection_rule(facts, request)  # the one checked before the read
    chosen = select_keys((observed, counts.tolist()), rule.epsilon, rule.delta, per_unit,
                         neighbours=selection_neighbours(facts),
                         count_upper=float(max(upper, 1)),
                         random_state=request.rng)
    columns = engine.frame_columns(frame, immutable=immutable(facts))  # the schema
    rest = replace(queries_part(request), keys=tuple(chosen.keys), selection=None,
                   keys_from_data=True, selected=Selected(
                       {c: columns[c] for c in cols}, rule, request.selection))
    planned = _plan_all(frame, facts, rest, queries)
    context = LogContext.of(frame, facts, rest)
    return rest, planned, [context.selection_entry(chosen.log, cols)]


def _aggregate(frame: Any, facts: FrameFacts, request: Request, planned: list[Planned],
               backend: Backend) -> Mapping[Any, np.ndarray]:
    """Every exact aggregate the planned queries need, in one pass of the frame's engine
    (``backend``, the frame's: the read, which the caller runs under the safety net)."""
    aggs: list[Agg] = []
    missing: dict[str, Any] = {}
    policies = facts.missing
    for p in planned:  # (one loop, not two comprehensions: this runs on every release)
        aggs += p.plan.aggregates
        for c in p.query.columns_read():
            missing[c] = policies.get(c, DROP)
    # several quantiles of one column: one count with the union of their read windows
    merged = merged_reads(aggs)
    counted = backend.aggregate(
        frame, [merged.get(a, a) for a in aggs] if merged else aggs, missing=missing,
        group_by=request.group_by, keys=request.keys,
        columns=engine.frame_columns(frame, immutable=immutable(facts)),
        bounding=None if facts.unit is None else Bounding(facts.unit, release_seed(request.rng)),
    )
    if merged:
        counted = {**counted, **{a: counted[read] for a, read in merged.items()}}
    return counted


def _measure(frame: Any, facts: FrameFacts, request: Request, planned: list[Planned],
             aggs: Mapping[Any, np.ndarray]
             ) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]],
                        list[dict[str, Any]]]:
    """Noise every measurement, post-process every query (and its interval), and build the
    log entries."""
    context = LogContext.of(frame, facts, request)
    values: dict[str, np.ndarray] = {}
    intervals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    entries: list[dict[str, Any]] = []
    for p in planned:
        noisy, used = draw_all(p, request, aggs, context, entries)
        record_answer(p, request, noisy, used, values, intervals)
    return values, intervals, entries


def plan(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "auto",
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
    ci: float | None = None,
) -> list[Planned]:
    """Steps 1–3 of :func:`run` only — provenance, arguments, plans and mechanisms — for the
    accuracy planner (:mod:`dpframe.release._accuracy_planner`): reads no data, spends and logs
    nothing. ``ci``: as the release's (a quantile's interval adds measurements)."""
    return plan_release(frame, queries, epsilon=epsilon, delta=delta, weights=weights,
                        mechanism=mechanism, group_by=group_by, keys=keys,
                        session=session, ci=ci)[0]


def plan_release(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "auto",
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
    selection_share: Any = 0.5,
    ci: float | None = None,
) -> tuple[list[Planned], Any]:
    """:func:`plan` and, for a group-by whose keys are selected from the data, the selection's
    calibration (a :class:`~dpframe.mechanisms.selection.SelectionRule`; None otherwise):
    public facts only, nothing read, spent or logged."""
    facts, _, request, planned = _prepare(
        frame, queries, session=session, epsilon=epsilon, delta=delta, weights=weights,
        mechanism=mechanism, random_state=None, group_by=group_by, keys=keys, ci=ci,
        selection_share=selection_share)
    rule = None if request.selection is None else key_selection_rule(facts, request)
    return planned, rule


def exact_measurements(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    group_by: GroupBy | None = None,
    keys: Sequence[Any] | None = None,
    bounding_seed: int = 0,
) -> dict[tuple[str, str], tuple[np.ndarray, float]]:
    """For audits and tests only: the *exact* value of every measurement a release of
    ``queries`` would noise, with the sensitivity its log entry would record, as
    ``{(query name, part): (values per group, sensitivity)}``. Runs the same plan and
    aggregation pass as :func:`run` but adds no noise, spends nothing and logs nothing — the
    neighbour-pair tests compare these across neighbouring data sets. Measurements whose
    domain depends on earlier noisy values (covariances) are left out. ``bounding_seed``: the
    seed of the contribution bounding on a frame with a privacy unit (a release draws a secret
    one; the bound holds for every seed)."""
    facts, frame, request, planned = _prepare(
        frame, queries, session=None, epsilon=1.0, delta=0.0, weights=None,
        mechanism="bounded", random_state=None, group_by=group_by, keys=keys, ci=None)
    # every bin counted: a quantile's read windows would leave unread blocks lumped
    dense = {a: _every_bin(a) for p in planned for a in p.plan.aggregates}
    counted = backend_of(frame).aggregate(
        frame, list(dict.fromkeys(dense.values())),
        missing={c: facts.missing.get(c, DROP) for p in planned for c in p.query.columns_read()},
        group_by=request.group_by, keys=request.keys,
        bounding=None if facts.unit is None else Bounding(facts.unit, bounding_seed),
    )
    aggs = {a: counted[d] for a, d in dense.items()}
    return {
        (p.name, m.name): (np.asarray(m.statistic(aggs), dtype=float), float(mech.sensitivity))
        for p in planned for m, mech in zip(p.plan.measurements, p.mechanisms, strict=True)
        if mech is not None
    }


def _every_bin(agg: Agg) -> Agg:
    """``agg`` without a quantile's read windows (:class:`~dpframe.query.ReadWindows`): its
    bins all counted exactly, as an audit of the exact measurements needs."""
    if agg.bins is None or agg.bins.window is None:
        return agg
    return replace(agg, bins=replace(agg.bins, window=None))


def evaluate_derivation(facts: FrameFacts, steps: Sequence[Any], schema: Mapping[str, Any]
                        ) -> Any:
    """Compute a verified derivation of an in-memory frame (pandas, Polars) on its private
    data, in dpframe's total compilation (:mod:`dpframe.rowwise`). Under the safety net: a
    failure is logged (ε = 0: no budget was reserved) and raises the one fixed error."""
    backend = facts.dataset.backend
    ledger = facts.dataset.ledger
    ledger.cancel(ledger.reserve(0.0, 0.0))  # a locked ledger (an earlier failure) refuses
    try:
        with quiet():
            return apply_steps(facts.data, steps, backend.rowwise, schema)
    except BaseException:  # the safety net: nothing of the exception is kept
        pass
    entry = failure_entry(
        what="derivation", names=[s.kind for s in steps], epsilon=0.0,
        delta=0.0, engine=engine.engine_name(facts.data), random_source="none",
        derivation=" > ".join(facts.derivation),
        unit_fields=units.describe(facts.unit, False, facts.dataset.neighbours))
    ledger.commit(ledger.reserve(0.0, 0.0), [entry])
    raise failure_error("derivation", [s.kind for s in steps], 0.0, 0.0)
