"""The steward's report: ``dpframe report release.parquet -o report.html``.

One self-contained HTML page (inline style and SVG; no script, no URL, nothing fetched) for a
released Parquet file: whether it verifies (the same checks as ``dpframe inspect``: values
match the sealed log, the log is intact, with ``--key``/``--key-file`` the signature, with
``--ledger`` the durable ledger), then the released values with their intervals on the declared
bounds, ε, δ and mechanism per statistic (a whole analysis written by dpf.concat_releases: each
query drawn as it is read, with its own legend), the budget spent (by release or query, by
column) and every measurement with its domain in the statistic's units. A file that does not
verify still gets its page, headed NOT VERIFIED: what the file claims, unverified. Every text
from the file (column names, keys, the log) is HTML-escaped.

Exit status as for ``inspect``: 0 verified, 2 verification failed (the page is written), 1 the
file could not be read as a release (no page written); errors are one line on stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dpframe.accounting.steward import file_kind, inspect_release
from dpframe.cli.inspect import checked
from dpframe.errors import ReleaseFileError
from dpframe.frames.show import columns_of_table, page
from dpframe.report import views
from dpframe.report.svg import el, esc

__all__ = ["add_parser", "build_report", "run"]

_PAGE_STYLE = """
body{margin:24px;background:#fafafa}
body>.dpf-view{max-width:1800px}
.dpf-status{padding:8px 12px;border-radius:4px;font-weight:600;max-width:1100px}
.dpf-view table.dpf-measurements{width:100%;font-size:12px}
.dpf-view table.dpf-measurements td{vertical-align:top}
.dpf-view table.dpf-measurements td:nth-child(-n+5){white-space:nowrap}
.dpf-budget{display:flex;flex-wrap:wrap;gap:8px 32px;align-items:flex-start}
.dpf-verified{background:#e3f4e6;color:#1d6b2c;border:1px solid #9fd3a8}
.dpf-not-verified{background:#fbe5e3;color:#8e2219;border:1px solid #e6a39c}
h1{font-family:system-ui,sans-serif;font-size:20px}
h2{font-family:system-ui,sans-serif;font-size:17px;margin-top:22px}
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``report`` on the subparsers of ``python -m dpframe``."""
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML page for a released Parquet file (values with "
             "intervals, budget, verification status)",
        description=__doc__.split("\n\n")[1].replace("``", ""),
        epilog="examples:\n  python -m dpframe report release.parquet -o report.html\n"
               "  python -m dpframe report release.parquet -o report.html "
               "--key-file steward.key",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, metavar="FILE", help="a Parquet file from a release")
    p.add_argument("-o", "--output", type=Path, default=Path("report.html"), metavar="PATH",
                   help="the HTML page to write (overwritten; default: %(default)s)")
    p.add_argument("--key", default=None, metavar="TEXT",
                   help="the steward's HMAC key as text (prefer --key-file)")
    p.add_argument("--key-file", type=Path, default=None, metavar="PATH",
                   help="read the steward's HMAC key from PATH")
    p.add_argument("--ledger", type=Path, default=None, metavar="LEDGER",
                   help="also check the release against this durable ledger file")
    return p


def _status(report: dict[str, Any]) -> str:
    if report["verified"]:
        sig = {"valid": "signature valid", "unsigned": "not signed",
               "not checked": "signed; signature not checked (no key given)"}
        text = ("VERIFIED: the values match the log and the log is intact; "
                + sig.get(str(report.get("signature")), str(report.get("signature"))))
        return el("p", {"class": "dpf-status dpf-verified", "id": "status"}, esc(text))
    text = (f"NOT VERIFIED: {report.get('error')}. Values match the log: "
            f"{'yes' if report.get('values_match_log') else 'NO'}. What follows is what the "
            "file claims, unverified.")
    return el("p", {"class": "dpf-status dpf-not-verified", "id": "status"}, esc(text))


#: measurements listed on the page (a ledger's log can hold tens of thousands)
MAX_MEASUREMENTS = 1000


def _measurements(report: dict[str, Any], names: dict[int, str]) -> str:
    every = [m for led in report.get("ledgers", []) for m in led["measurements"]]
    shown = every[-MAX_MEASUREMENTS:]
    note = ("" if len(shown) == len(every) else el("p", {"class": "dpf-note"}, esc(
        f"the last {len(shown)} of {len(every)} measurements; `dpframe inspect --json` lists "
        "them all")))
    return note + views.measurements_html(shown, names)


def build_report(path: str | Path, *, key: bytes | str | None = None,
                 ledger: str | Path | None = None) -> tuple[str, dict[str, Any]]:
    """The page for a released Parquet file, and the ``inspect`` report it is built from
    (``report["verified"]``). Raises :class:`~dpframe.errors.DPFrameError` (or OSError) when
    the file cannot be read as a release."""

    path = Path(path)
    if file_kind(path) == "ledger":
        raise ReleaseFileError(f"{str(path)!r} is a ledger file; `dpframe report` reads a "
                               "released Parquet file (`dpframe inspect` reads ledgers)")
    report, file, document = inspect_release(path, key=key, ledger=ledger)
    columns = columns_of_table(file.table)
    names = views.release_names(columns, document)
    body = views.wrap(
        el("h1", None, esc(f"Release report: {path.name}")), _status(report),
        el("h2", None, "Released values"), views.release_html(columns, document),
        views.budget_html(document, heading="h2", names=names),
        el("h2", None, "Measurements"), _measurements(report, names),
        el("p", {"class": "dpf-note"}, esc(
            "Drawn by dpframe from the file's released values and its log only; intervals "
            "are post-processing of the released values. Charts are inline SVG.")))
    style = f"<style>{_PAGE_STYLE}</style>"
    return page(f"dpframe report: {path.name}", style + body), report


def run(args: argparse.Namespace) -> int:
    """Run ``report`` with parsed arguments; return the exit status."""
    def write(key: bytes | str | None) -> dict[str, Any]:
        html, report = build_report(args.file, key=key, ledger=args.ledger)
        args.output.write_text(html, encoding="utf-8")
        return report

    report = checked(args, "reported", write)
    if report is None:
        return 1
    verdict = "VERIFIED" if report["verified"] else f"NOT VERIFIED ({report['error']})"
    print(f"{verdict}; report written to {args.output}")
    return 0 if report["verified"] else 2
