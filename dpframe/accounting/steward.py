"""The data steward's checks behind ``dpframe inspect FILE`` (:mod:`dpframe.cli.inspect`) and
``dpframe report`` (:mod:`dpframe.cli.report`): :func:`inspect_file`, :func:`spending`,
:func:`check_against_ledger`.

``FILE`` is a released Parquet file or a durable ledger file (``dpf.Session(path=...)``). The
command verifies it — for a release: the values match the sealed log, the log is intact, and
with ``--key``/``--key-file`` the HMAC signature; for a ledger: the hash chain and the head file
(docs/ledger.md) — and prints, per ledger, the ε and δ spent by release and by column, and each
noisy measurement's mechanism, scale and domain. ``--json`` prints one JSON object instead.
``--head`` on a ledger prints only its head digest, to archive elsewhere and pass
later as ``dpf.Session(path, expect_head=...)``.

Exit status: 0 verified, 2 verification failed (the report still says what the file claims,
marked as unverified), 1 the file could not be read as either kind (missing, a directory, no
permission, not Parquet and not a ledger, a Parquet file without a release log, a key file
that cannot be read); errors are one line on stderr, never a traceback.

ε by column: an entry that reads several columns (a covariance) counts toward each of them, a
histogram or value counts toward its column; an entry that reads none (a row count) is listed
under ``(rows)``. ε by release is the sum of its entries' ε as recorded in the log. Statistics
are named as asked ("histogram of age", "mean of age by region") and domains are shown in the
statistic's coordinates (a public-size mean, which the mechanism shifts to ``[0, u − l]``, is
shown on its declared ``[l, u]``; :mod:`dpframe.accounting._log_view`); ``--json`` keeps the logged
fields and adds ``statistic`` and ``domain``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.accounting import _log_view as logview
from dpframe.accounting._parquet import (
    find_log,
    pandas_metadata_of,
    read_release_file,
    verify_release,
)
from dpframe.accounting.durable import FORMAT, head_path, read_ledger_file
from dpframe.accounting.seals import table_digest
from dpframe.errors import IntegrityError, LedgerError, ReleaseFileError

__all__ = ["check_against_ledger", "file_kind", "inspect_file", "inspect_release", "spending"]

_MEASUREMENT_FIELDS = ("release_id", "name", "query", "part", "columns", "group_by", "epsilon",
                       "delta", "mechanism", "scale", "sensitivity", "domain_lower",
                       "domain_upper", "size", "random_source", "formulation", "clamping")


def spending(raw_entries: Any) -> dict[str, Any]:
    """ε and δ by release and by column of a log's entries as stored (malformed ones
    skipped): the summary ``inspect`` prints and the report draws."""
    return _summary(_clean_entries(raw_entries)[0])


def _summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    releases: dict[Any, dict[str, Any]] = {}
    columns: dict[str, dict[str, Fraction]] = {}
    for e in entries:
        eps = Fraction(str(e.get("epsilon") or 0))
        dlt = Fraction(str(e.get("delta") or 0))
        rid = e.get("release_id")
        rel = releases.setdefault(rid, {"release_id": rid, "epsilon": Fraction(0),
                                        "delta": Fraction(0), "statistics": []})
        rel["epsilon"] += eps
        rel["delta"] += dlt
        label = f"{e.get('name')} ({logview.statistic(e)})"
        if label not in rel["statistics"]:
            rel["statistics"].append(label)
        for c in logview.columns_of(e) or ["(rows)"]:
            acc = columns.setdefault(c, {"epsilon": Fraction(0), "delta": Fraction(0)})
            acc["epsilon"] += eps
            acc["delta"] += dlt
    return {
        "releases": [{**r, "epsilon": float(r["epsilon"]), "delta": float(r["delta"])}
                     for r in releases.values()],
        "by_column": {c: {k: float(v) for k, v in a.items()} for c, a in columns.items()},
        "measurements": [_measurement(e) for e in entries],
        "epsilon_in_log": float(sum((Fraction(str(e.get("epsilon") or 0)) for e in entries),
                                    Fraction(0))),
    }


def _measurement(e: dict[str, Any]) -> dict[str, Any]:
    lo, hi, _shift = logview.user_domain(e)
    return {**{f: e.get(f) for f in _MEASUREMENT_FIELDS}, "statistic": logview.statistic(e),
            "domain": [lo, hi], "domain_text": logview.domain_text(e)}


def _by_ledger(entries: list[dict[str, Any]], default_id: Any) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for e in entries:
        out.setdefault(e.get("ledger_id", default_id), []).append(e)
    return out or {default_id: []}


def inspect_file(path: str | Path, *, key: bytes | str | None = None,
                 ledger: str | Path | None = None) -> dict[str, Any]:
    """The report ``inspect`` prints, as a dict (see the module docstring). ``ledger``: a
    durable ledger file to check a release against (:func:`check_against_ledger`)."""
    path = Path(path)
    if file_kind(path) == "ledger":
        return _inspect_ledger(path)
    return inspect_release(path, key=key, ledger=ledger)[0]


def file_kind(path: Path) -> str:
    """``"release"`` (a Parquet file) or ``"ledger"`` (a dpframe ledger file), from the
    file's first bytes; anything else is a :class:`~dpframe.errors.ReleaseFileError`."""

    with open(path, "rb") as fh:
        start = fh.read(4096)
    if start[:4] == b"PAR1":
        return "release"
    first = start.split(b"\n", 1)[0]
    if f'"{FORMAT}"'.encode() in first or head_path(path).exists():
        return "ledger"
    raise ReleaseFileError(
        f"{str(path)!r} is neither a Parquet file nor a dpframe ledger file"
        + (" (it is empty)" if not start else "")
    )


def inspect_release(path: str | Path, *, key: bytes | str | None = None,
                    ledger: str | Path | None = None) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """A released Parquet file read once: the ``inspect`` report, the file as read
    (:func:`dpframe.accounting._parquet.read_release_file`) and the log document the report
    describes (``{}`` if the log is not valid JSON) — so a page drawn from them shows the bytes that
    were verified."""

    path = Path(path)
    file = read_release_file(path)
    report = _inspect_release(path, key, file)
    document = report.pop("_document")
    if ledger is not None:
        report["ledger_check"] = check_against_ledger(document, ledger)
        if not report["ledger_check"]["matches"]:
            report["verified"] = False
            report["error"] = report["error"] or report["ledger_check"]["detail"]
    return report, file, document


def check_against_ledger(document: dict[str, Any], ledger: str | Path) -> dict[str, Any]:
    """Compare a release's log with the durable ledger it names.

    ``matches`` is True when the ledger file verifies, has the same ``ledger_id``, holds the
    release's chain position (``chain.seq``) with the same hash, and its entries up to that
    position equal the log's. Otherwise ``detail`` says what differs: a ledger rolled back to
    an older copy, rewritten, or another ledger."""

    out: dict[str, Any] = {"ledger_file": str(ledger), "matches": False, "detail": None}
    try:
        info = read_ledger_file(ledger)
    except LedgerError as exc:
        out["detail"] = f"the ledger file does not verify: {exc}"
        return out
    chain = document.get("chain")
    if info["ledger_id"] != document.get("ledger_id"):
        out["detail"] = (f"the release names ledger {document.get('ledger_id')!r}, the file "
                         f"holds ledger {info['ledger_id']!r}")
    elif not isinstance(chain, dict) or not isinstance(chain.get("seq"), int):
        out["detail"] = "the release log has no chain position (not from a durable ledger)"
    elif chain["seq"] > len(info["releases"]):
        out["detail"] = (f"the release includes ledger release {chain['seq']}, but the ledger "
                         f"ends at release {len(info['releases'])}: the ledger was rolled back")
    else:
        seq = chain["seq"]
        line_hash = info["header"]["hash"] if seq == 0 else info["releases"][seq - 1]["hash"]
        entries = [e for r in info["releases"][:seq] for e in r.get("entries", [])]
        if line_hash != chain.get("hash"):
            out["detail"] = f"ledger release {seq} differs from the one this release saw"
        elif _canon(entries) != _canon(document.get("entries", [])):
            out["detail"] = "the release log's entries differ from the ledger's"
        else:
            out["matches"] = True
    return out


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _inspect_release(path: Path, key: bytes | str | None, file: Any) -> dict[str, Any]:

    metadata, table = file.metadata, file.table
    report: dict[str, Any] = {"file": str(path), "kind": "release", "verified": False,
                              "error": None, "values_match_log": False, "signature": None}
    try:
        doc = find_log(metadata, str(path), created_by=getattr(file.footer, "created_by", None))
    except IntegrityError as exc:  # a log that is not valid JSON: a failed verification
        report.update(error=str(exc), _document={}, ledgers=[])
        return report
    seal = doc.get("seal")
    try:
        report["values_match_log"] = isinstance(seal, dict) and seal.get(
            "table") == table_digest(table, str(seal.get("scheme")),
                                     pandas_metadata=pandas_metadata_of(metadata, str(path)))
    except IntegrityError:  # an unknown seal scheme: verify_release reports it below
        report["values_match_log"] = False
    try:
        status = verify_release(doc, table, metadata, key=key, where=str(path), file=file)
    except IntegrityError as exc:
        report["error"] = str(exc)
    else:
        report.update(verified=True, signature=status["signature"])
    report["_document"] = doc
    entries, skipped = _clean_entries(doc.get("entries"))
    if skipped:
        report["malformed_entries"] = skipped
    steps = doc.get("postprocessing")
    report["postprocessing"] = [_scalar(x) for x in steps] if isinstance(steps, list) else []
    ids = doc.get("release_ids")
    report["release_ids"] = [_scalar(i) for i in ids] if isinstance(ids, list) else []
    chain = doc.get("chain")
    report["chain"] = ({"seq": _scalar(chain.get("seq")), "hash": _scalar(chain.get("hash"))}
                       if isinstance(chain, dict) else None)
    own_id = _scalar(doc.get("ledger_id"))
    budget = doc.get("budget") if isinstance(doc.get("budget"), dict) else None
    report["ledgers"] = [
        {"ledger_id": lid, "budget": budget if lid == own_id else None, **_summary(es)}
        for lid, es in _by_ledger(entries, own_id).items()
    ]
    return report


def _scalar(value: Any) -> Any:
    """``value`` if it is a JSON scalar, else its JSON text (a report shows what a file
    claims, whatever its shape)."""
    if value is None or isinstance(value, str | int | float):
        return value
    return json.dumps(value, default=str)[:200]


def _number(value: Any) -> Any:
    """A finite ε/δ as recorded, else None (malformed: not a number, a bool, NaN, ±inf)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            Fraction(str(value))
        except (ValueError, OverflowError):
            return None
        return value
    return None


def _clean_entries(raw: Any) -> tuple[list[dict[str, Any]], int]:
    """The log's entries in a shape the report can sum and print, and how many entries were
    skipped as malformed (not objects, or an ε/δ that is not a finite number). Only an
    unverified log can hold such entries: a verified one was written by dpframe."""
    if not isinstance(raw, list):
        return [], 0 if raw is None else 1
    out, skipped = [], 0
    for e in raw:
        if not isinstance(e, dict):
            skipped += 1
            continue
        eps, dlt = _number(e.get("epsilon") or 0), _number(e.get("delta") or 0)
        if eps is None or dlt is None:
            skipped += 1
            continue
        clean = {f: _scalar(e.get(f)) for f in _MEASUREMENT_FIELDS}
        clean.update(epsilon=eps, delta=dlt, ledger_id=_scalar(e.get("ledger_id")))
        for f in ("name", "query", "part", "columns", "mechanism", "formulation", "clamping"):
            if clean[f] is not None:
                clean[f] = str(clean[f])
        out.append(clean)
    return out, skipped


def _inspect_ledger(path: Path) -> dict[str, Any]:

    report: dict[str, Any] = {"file": str(path), "kind": "ledger", "verified": False,
                              "error": None}
    try:
        info = read_ledger_file(path)
    except LedgerError as exc:
        report["error"] = str(exc)
        report["ledgers"] = []
        return report
    header = info["header"]
    entries, skipped = _clean_entries(
        [e for r in info["releases"]
         for e in (r.get("entries") if isinstance(r.get("entries"), list) else [])])
    if skipped:
        report["malformed_entries"] = skipped
    summary = _summary(entries)
    stats = {r["release_id"]: r["statistics"] for r in summary["releases"]}
    summary["releases"] = [
        {"release_id": r["seq"], "epsilon": float(Fraction(r["epsilon"])),
         "delta": float(Fraction(r["delta"])), "statistics": stats.get(r["seq"], [])}
        for r in info["releases"]
    ]
    report.update(
        verified=True,
        torn_tail_bytes=info["torn_tail_bytes"],
        chain={"seq": info["head_seq"], "hash": info["chain_hash"]},
        ledgers=[{
            "ledger_id": info["ledger_id"],
            "budget": {"epsilon": _scalar(header.get("epsilon_float")),
                       "delta": _scalar(header.get("delta_float")),
                       "epsilon_spent": float(info["epsilon_spent"]),
                       "delta_spent": float(info["delta_spent"])},
            **summary,
        }],
    )
    return report
