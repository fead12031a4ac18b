"""Accounting: what was spent and what was released, kept and sealed.

* :mod:`~dpframe.accounting.ledger` — the in-memory ledger and its ``Budget`` (public as
  ``dpf.Budget``), ``Ledger``, ``Reservation``;
* :mod:`~dpframe.accounting.durable` — the durable ledger on disk: ``DurableLedger``,
  ``open_ledger``, ``read_ledger_file``, ``ledger_head`` (docs/ledger.md), over its file
  format (``_ledger_format``), chain verification (``_ledger_chain``) and file handling
  (``_ledger_files``);
* :mod:`~dpframe.accounting.seals` — seals of release tables: ``sign_release`` (public as
  ``dpf.sign_release``), ``release_log_of``, ``check_seal``;
* :mod:`~dpframe.accounting.steward` — the steward's checks of files and ledgers:
  ``inspect_file``, ``check_against_ledger``, ``spending``;
* internal: the typed log entry and its chains (``_log_entries``), the log frame's columns
  (``_log_schema``), text views of entries (``_log_view``), Parquet I/O (``_parquet``: public as
  ``dpf.write_parquet``, ``dpf.read_log``, ``dpf.read_release``) and release tables'
  post-processing (``_release_tables``: ``dpf.concat_releases``, ``dpf.round_release``,
  ``dpf.rename_release``, ``dpf.sort_release``).
"""

from dpframe.accounting._log_schema import LOG_COLUMNS, LogRecord, log_frame
from dpframe.accounting._log_view import columns_of, declared_bounds, statistic
from dpframe.accounting._parquet import LOG_KEY, read_log, read_release, write_parquet
from dpframe.accounting._release_tables import (
    concat_releases,
    rename_release,
    round_release,
    sort_release,
    tidy_rows,
    tidy_table,
)

__all__ = [
    "LOG_COLUMNS", "LOG_KEY", "LogRecord", "columns_of", "concat_releases", "declared_bounds",
    "log_frame", "read_log", "read_release", "rename_release", "round_release", "sort_release",
    "statistic", "tidy_rows", "tidy_table", "write_parquet",
]
