"""The data steward's command: ``python -m dpframe inspect FILE`` (also ``dpframe inspect``).

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
shown on its declared ``[l, u]``; :mod:`dpframe.report.logview`); ``--json`` keeps the logged
fields and adds ``statistic`` and ``domain``.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.report import logview

__all__ = ["add_parser", "check_against_ledger", "inspect_file", "print_head", "run",
           "spending"]

_MEASUREMENT_FIELDS = ("release_id", "name", "query", "part", "columns", "group_by", "epsilon",
                       "delta", "mechanism", "scale", "sensitivity", "domain_lower",
                       "domain_upper", "size", "random_source", "formulation", "clamping")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``inspect`` on the subparsers of ``python -m dpframe``."""
    p = sub.add_parser(
        "inspect",
        help="verify a released Parquet file (or a ledger file) and summarise its spending",
        description=__doc__.split("\n\n")[1].replace("``", ""),
        epilog="examples:\n  python -m dpframe inspect release.parquet\n"
               "  python -m dpframe inspect release.parquet --json --key-file steward.key\n"
               "  python -m dpframe inspect release.parquet --ledger ledger.jsonl\n"
               "  python -m dpframe inspect ledger.jsonl\n"
               "  python -m dpframe inspect ledger.jsonl --head",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, metavar="FILE",
                   help="a Parquet file written from a release table, or a ledger file")
    p.add_argument("--json", action="store_true", help="print one JSON object (for machines)")
    p.add_argument("--key", default=None, metavar="TEXT",
                   help="the steward's HMAC key as text (visible to other local users in the "
                        "process list; prefer --key-file)")
    p.add_argument("--ledger", type=Path, default=None, metavar="LEDGER",
                   help="also check a release against this durable ledger file: same ledger "
                        "id, and the ledger still holds the release's chain position and "
                        "entries (catches a ledger rolled back or rewritten)")
    p.add_argument("--head", action="store_true",
                   help="with a ledger file: print only its head digest (release number and "
                        "chained hash), to archive elsewhere and pass later as "
                        "dpf.Session(path, expect_head=...), which refuses a ledger rolled "
                        "back behind it or diverged from it")
    p.add_argument("--key-file", type=Path, default=None, metavar="PATH",
                   help="read the steward's HMAC key from PATH (raw bytes; a trailing newline "
                        "is ignored)")
    return p


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
    from dpframe.durable import FORMAT, head_path
    from dpframe.errors import ReleaseFileError

    path = Path(path)
    with open(path, "rb") as fh:
        start = fh.read(4096)
    if start[:4] != b"PAR1":
        first = start.split(b"\n", 1)[0]
        if f'"{FORMAT}"'.encode() in first or head_path(path).exists():
            return _inspect_ledger(path)
        raise ReleaseFileError(
            f"{str(path)!r} is neither a Parquet file nor a dpframe ledger file"
            + (" (it is empty)" if not start else "")
        )
    report = _inspect_release(path, key)
    if ledger is not None:
        report["ledger_check"] = check_against_ledger(report["_document"], ledger)
        if not report["ledger_check"]["matches"]:
            report["verified"] = False
            report["error"] = report["error"] or report["ledger_check"]["detail"]
    del report["_document"]
    return report


def check_against_ledger(document: dict[str, Any], ledger: str | Path) -> dict[str, Any]:
    """Compare a release's log with the durable ledger it names.

    ``matches`` is True when the ledger file verifies, has the same ``ledger_id``, holds the
    release's chain position (``chain.seq``) with the same hash, and its entries up to that
    position equal the log's. Otherwise ``detail`` says what differs: a ledger rolled back to
    an older copy, rewritten, or another ledger."""
    from dpframe.durable import read_ledger_file
    from dpframe.errors import LedgerError

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


def _inspect_release(path: Path, key: bytes | str | None) -> dict[str, Any]:
    from dpframe.errors import IntegrityError
    from dpframe.integrity import table_digest
    from dpframe.io import find_log, pandas_metadata_of, read_release_file, verify_release

    file = read_release_file(path)
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
    from dpframe.durable import read_ledger_file
    from dpframe.errors import LedgerError

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


def _fmt(x: Any) -> str:
    return "-" if x is None else (f"{x:.6g}" if isinstance(x, float) else str(x))


def _print_verdict(report: dict[str, Any], w: Any) -> None:
    """The first lines of the console report: verified or not, and what that means."""
    if report["verified"]:
        if report["kind"] == "release":
            sig = {"valid": "signature valid (HMAC key matches)",
                   "unsigned": "not signed",
                   "not checked": "signed; pass --key/--key-file to check the signature"}
            w(f"VERIFIED: the values match the log and the log is intact; "
              f"{sig[report['signature']]}\n")
        else:
            w("VERIFIED: hash chain and head file agree"
              + (f" (a torn, never returned last release of {report['torn_tail_bytes']} bytes "
                 "will be cut off)" if report.get("torn_tail_bytes") else "") + "\n")
    else:
        w(f"NOT VERIFIED: {report['error']}\n")
        if report["kind"] == "release":
            w("values match the log: "
              f"{'yes' if report['values_match_log'] else 'NO'}; "
              "what follows is what the file claims, unverified\n")


def _print(report: dict[str, Any], out: Any) -> None:
    w = out.write
    w(f"{report['kind']} file: {report['file']}\n")
    _print_verdict(report, w)
    check = report.get("ledger_check")
    if check:
        w(f"ledger file {check['ledger_file']}: "
          + ("holds this release (same id, chain position and entries)\n" if check["matches"]
             else f"DOES NOT MATCH: {check['detail']}\n"))
    if report.get("chain"):
        w(f"ledger chain: release {report['chain']['seq']}, hash {report['chain']['hash']}\n")
    if report.get("malformed_entries"):
        w(f"malformed log entries skipped: {report['malformed_entries']}\n")
    if report.get("release_ids"):
        ids = report["release_ids"]
        in_log = sum(len(led["releases"]) for led in report.get("ledgers", []))
        w(f"values in this table come from release{'s' if len(ids) > 1 else ''} "
          f"{', '.join(map(str, ids))} (the log below lists {in_log} release"
          f"{'s' if in_log != 1 else ''}: the ledger's history up to it)\n")
    if report.get("postprocessing"):  # recorded by dpf.concat_releases / dpf.*_release
        w("post-processing since release (recorded in the seal): "
          f"{'; '.join(map(str, report['postprocessing']))}\n")
    for led in report.get("ledgers", []):
        w(f"\nledger {led['ledger_id']}\n")
        b = led.get("budget")
        if b:
            w(f"  budget ε={_fmt(b.get('epsilon'))} δ={_fmt(b.get('delta'))}; spent "
              f"ε={_fmt(b.get('epsilon_spent'))} δ={_fmt(b.get('delta_spent'))}\n")
        w("  by release:\n")
        for r in led["releases"]:
            w(f"    release {_fmt(r['release_id'])}: ε={_fmt(r['epsilon'])} "
              f"δ={_fmt(r['delta'])}  {', '.join(r['statistics'])}\n")
        w("  by column:\n")
        for c, a in led["by_column"].items():
            w(f"    {c}: ε={_fmt(a['epsilon'])} δ={_fmt(a['delta'])}\n")
        w("  measurements (release, name: statistic / part, mechanism, ε, scale, domain in "
          "the statistic's units):\n")
        for m in led["measurements"]:
            w(f"    {_fmt(m['release_id'])}  {m['name']}: {m['statistic']}"
              f"{' / ' + m['part'] if m.get('part') and m['part'] != m['query'] else ''}  "
              f"{m['mechanism']}  ε={_fmt(m['epsilon'])}  scale={_fmt(m['scale'])}  "
              f"{m['domain_text']}\n")


def print_head(path: Path, *, as_json: bool = False, out: Any = None) -> int:
    """``inspect LEDGER --head``: print the ledger's head digest
    (:func:`dpframe.durable.ledger_head`) and return the exit status: 0 verified, 2 the ledger
    does not verify, 1 not a ledger file."""
    from dpframe.durable import ledger_head
    from dpframe.errors import LedgerError

    out = sys.stdout if out is None else out
    with open(path, "rb") as fh:
        if fh.read(4) == b"PAR1":
            print(f"error: {path} is a released Parquet file; --head reads a ledger file "
                  "(its chain position is shown by `inspect` without --head)", file=sys.stderr)
            return 1
    try:
        head = ledger_head(path)
    except LedgerError as exc:
        print(f"NOT VERIFIED: {exc}", file=sys.stderr)
        return 2
    if as_json:
        json.dump({"file": str(path), "head": head}, out, sort_keys=True)
        out.write("\n")
    else:
        print(head, file=out)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``inspect`` with parsed arguments; return the exit status."""
    from dpframe.errors import DPFrameError

    if getattr(args, "head", False):
        try:
            return print_head(args.file, as_json=args.json)
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    key: bytes | str | None = args.key
    try:
        if args.key_file is not None:
            key = args.key_file.read_bytes().rstrip(b"\r\n")
        report = inspect_file(args.file, key=key, ledger=args.ledger)
    except (OSError, DPFrameError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # never a traceback for a steward: say what and where
        print(f"error: {args.file} could not be inspected ({type(exc).__name__}: {exc}); "
              "this is a bug in dpframe, please report it", file=sys.stderr)
        return 1
    if args.json:
        json.dump(report, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        _print(report, sys.stdout)
    return 0 if report["verified"] else 2
