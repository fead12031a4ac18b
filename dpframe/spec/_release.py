"""A run's releases and its output file: each query released by its API call
(:func:`dpframe.spec._calls.release_query`) in order, the tidy rows of every release table
gathered, and the file written with the sealed log (:func:`write_output`); what was released
before a failure goes to ``<output>.partial``."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpframe.accounting import LOG_KEY, tidy_rows, tidy_table
from dpframe.accounting.seals import release_log_of, sealed_document
from dpframe.errors import BudgetExceededError
from dpframe.spec._calls import build_queries, release_query
from dpframe.spec._model import ReleaseSpec

__all__ = ["SPEC_KEY", "check_run_budget", "release_all", "write_output"]

#: Parquet key-value metadata key holding the spec's text.
SPEC_KEY = b"dpframe.cli.spec"


def _output_rows(query: str, table: Any) -> list[dict[str, Any]]:
    """The output file's rows for one query: the tidy table of ``dpf.concat_releases``
    (:func:`dpframe.accounting._release_tables.tidy_rows`, one implementation for both)."""

    return tidy_rows(query, table)


def write_output(folder: Any, name: str, rows: list[dict[str, Any]],
           documents: list[dict[str, Any]], spec_text: str) -> Any:
    """Write the tidy table with a sealed log (:mod:`dpframe.accounting.seals`): the latest of the
    releases' logs, naming all their release ids, sealed to exactly the values written; the
    spec's text goes along under :data:`SPEC_KEY` (``dpframe.cli.spec``), which the seal
    covers too (``dpf.read_release`` reads the file back as a release table). Atomic
    (temporary file, then rename)."""

    table = tidy_table(rows)
    # the spec's text is part of what the seal covers (every metadata key a reader sees)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           SPEC_KEY: spec_text.encode()})
    if documents:
        latest = max(documents, key=lambda d: len(d.get("entries", [])))
        ids: list[int] = []
        for d in documents:  # each table's own release: named by its log, else its last entry
            own = d.get("release_ids") or [max(int(e["release_id"]) for e in d["entries"])]
            ids.extend(int(i) for i in own if int(i) not in ids)
        sealed = sealed_document(table, latest, release_id=ids)
        table = table.replace_schema_metadata({
            **(table.schema.metadata or {}),
            LOG_KEY: json.dumps(sealed, allow_nan=False).encode()})
    folder.write(name, table)
    return table.to_pandas()


def check_run_budget(spec: ReleaseSpec, plan: Any, session: Any, remaining: Any) -> None:
    """The ledger has this run's ε and δ left, so a run never stops half-way for lack of
    budget (checked before the first release; nothing is spent by a refusal)."""
    run_eps = math.fsum(qp.epsilon for qp in plan.queries)
    run_dlt = math.fsum(qp.delta for qp in plan.queries)
    try:
        session.ledger.check(run_eps, run_dlt)
    except BudgetExceededError:
        raise BudgetExceededError(
            f"the ledger {spec.ledger} has ε = {remaining.epsilon_remaining:.6g} and "
            f"δ = {remaining.delta_remaining:.3g} left of its ε = {spec.epsilon:g}, "
            f"δ = {spec.delta:g}; this run needs ε = {run_eps:.6g}, "
            f"δ = {run_dlt:.3g} (privacy.run_epsilon / run_delta, or what the target "
            "accuracies need). No release ran; nothing was spent."
        ) from None


def release_all(spec: ReleaseSpec, frame: Any, by_name: Mapping[str, Any], rng: Any,
                target: Path, folder: Any, out: Any
                ) -> tuple[list[dict[str, Any]], dict[str, float], list[dict[str, Any]]]:
    """Release every query of the spec from ``frame`` (the protected input with the derived
    columns), each by its API call: the long table's rows, the ε spent per query and the
    log documents. If a release fails, what was released before it (and spent) is written to
    ``<output>.partial`` and the failure is raised."""

    rows: list[dict[str, Any]] = []
    spent: dict[str, float] = {}
    documents: list[dict[str, Any]] = []
    try:
        for q in spec.queries:
            qp = by_name[q.name]
            weights = build_queries(q)[1]
            if q.targeted:  # each statistic gets the ε its target needs
                # (a count of the public n needs no ε; the release ignores its weight)
                weights = {m.statistic: m.epsilon or 1.0 for m in qp.measurements}
            table = release_query(q, frame, epsilon=qp.epsilon, delta=qp.requested_delta,
                                  weights=weights, random_state=rng)
            doc = release_log_of(table)
            if doc is not None:
                documents.append(doc)
            spent[q.name] = qp.epsilon
            rows.extend(_output_rows(q.name, table))
            print(f"  released {q.name!r}: ε = {qp.epsilon:.6g}, δ = {qp.delta:.3g}", file=out)
    except BaseException:
        if rows:  # what was released (and spent) is not lost
            partial = target.with_name(target.name + ".partial")
            write_output(folder, partial.name, rows, documents, spec.text)
            print(f"  the queries released so far are in {partial}", file=out)
        raise
    return rows, spent, documents


