"""``dpframe inspect FILE``: verify a released Parquet file or a durable ledger and print what
it spent (the checks are :mod:`dpframe.accounting.steward`'s; this module parses the arguments and
prints). Exit status: 0 verified, 2 verification failed, 1 the file could not be read as
either kind; errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dpframe import accounting as logview
from dpframe.accounting import steward as steward
from dpframe.accounting.durable import ledger_head
from dpframe.accounting.steward import inspect_file
from dpframe.errors import DPFrameError, LedgerError
from dpframe.frames.show import columns_of_table
from dpframe.report.queries import is_long, queries_of_long

__all__ = ["add_parser", "checked", "print_head", "queries_of_file", "run"]

T = TypeVar("T")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``inspect`` on the subparsers of ``python -m dpframe``."""
    p = sub.add_parser(
        "inspect",
        help="verify a released Parquet file (or a ledger file) and summarise its spending",
        description=(steward.__doc__ or "").split("\n\n")[1].replace("``", ""),
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
    _print_queries(report, w)
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


def queries_of_file(table: Any, document: dict[str, Any]) -> list[dict[str, Any]]:
    """The queries of a whole-analysis file (a long table, ``dpf.concat_releases``): per query
    its release id(s), ε, δ, and per column the statistic it holds as released (after
    ``dpf.rename_release`` a column's released name); empty for a single release table."""

    if table is None:
        return []
    columns = columns_of_table(table)
    if not is_long(columns):
        return []
    out = []
    for q in queries_of_long(columns, document):
        stats = []
        for s in q.stats:
            entries = q.entries_of(s)
            stats.append({"column": s.name, "released_as": s.source,
                          "statistic": logview.statistic(entries[0]) if entries else None})
        out.append({"query": q.name, "release_ids": q.release_ids, "keys": q.key_names,
                    "epsilon": q.epsilon if q.entries else None,
                    "delta": q.delta if q.entries else None, "columns": stats})
    return out


def _inspect(path: Path, *, key: bytes | str | None, ledger: Path | None) -> dict[str, Any]:
    """``inspect_file``'s report; for a release file also its queries (:func:`queries_of_file`)."""
    if steward.file_kind(path) == "ledger":
        return inspect_file(path, key=key, ledger=ledger)
    report, file, document = steward.inspect_release(path, key=key, ledger=ledger)
    queries = queries_of_file(getattr(file, "table", None), document)
    if queries:
        report["queries"] = queries
    return report


def _keys_text(keys: list[str]) -> str:
    """A query's keys as a reader says them: a histogram's two edge columns are its bins, a
    matrix's ``column``/``statistic`` labels are its rows."""
    names = ["bins" if k == "bin_lower" else "matrix rows" if k == "column" else k
             for k in keys if k not in ("bin_upper", "statistic")]
    return f" by {', '.join(dict.fromkeys(names))}" if names else ""


def _print_queries(report: dict[str, Any], w: Any) -> None:
    """Each query of a whole-analysis file with the statistics its columns hold."""
    queries = report.get("queries") or []
    if not queries:
        return
    w(f"queries in this file ({len(queries)}):\n")
    for q in queries:
        ids = ", ".join(map(str, q["release_ids"])) or "not matched to a release of the log"
        keys = _keys_text(q["keys"])
        w(f"  {q['query']}{keys}: release {ids}, ε={_fmt(q['epsilon'])}\n")
        for c in q["columns"]:
            renamed = (f" (released as {c['released_as']}, renamed)"
                       if c["released_as"] != c["column"] else "")
            w(f"    {c['column']}: {c['statistic'] or '-'}{renamed}\n")


def print_head(path: Path, *, as_json: bool = False, out: Any = None) -> int:
    """``inspect LEDGER --head``: print the ledger's head digest
    (:func:`dpframe.accounting.durable.ledger_head`) and return the exit status: 0 verified, 2 the
    ledger does not verify, 1 not a ledger file."""

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


def checked(args: argparse.Namespace, verb: str, work: Callable[[bytes | str | None], T]
            ) -> T | None:
    """``work(key)`` (the key from ``--key`` or ``--key-file``) as a steward's command runs
    it: a failure is one line on stderr and None, never a traceback (a file that cannot be
    read, a dpframe error, or — said as a bug — anything else)."""
    try:
        key = args.key if args.key_file is None else args.key_file.read_bytes().rstrip(b"\r\n")
        return work(key)
    except (OSError, DPFrameError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except Exception as exc:  # never a traceback for a steward: say what and where
        print(f"error: {args.file} could not be {verb} ({type(exc).__name__}: {exc}); "
              "this is a bug in dpframe, please report it", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``inspect`` with parsed arguments; return the exit status."""
    if getattr(args, "head", False):
        try:
            return print_head(args.file, as_json=args.json)
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    report = checked(args, "inspected",
                     lambda key: _inspect(args.file, key=key, ledger=args.ledger))
    if report is None:
        return 1
    if args.json:
        json.dump(report, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        _print(report, sys.stdout)
    return 0 if report["verified"] else 2
