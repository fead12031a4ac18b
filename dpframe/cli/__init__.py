"""The command line, ``dpframe …`` / ``python -m dpframe …``: one package.

* ``demo`` — a release on generated data (:mod:`dpframe.cli.main`);
* ``release spec.toml`` — a data steward's release job from a spec file
  (:mod:`dpframe.spec._parse`, :mod:`dpframe.spec._plan`, :mod:`dpframe.spec._run`);
* ``inspect FILE`` — verify a release file or a ledger and summarise its spending
  (:mod:`dpframe.cli.inspect`, over the checks of :mod:`dpframe.accounting.steward`);
* ``report release.parquet -o report.html`` — the same as a self-contained page
  (:mod:`dpframe.cli.report`).
"""

from __future__ import annotations

from dpframe.cli.main import build_parser, main, run_demo

__all__ = ["build_parser", "main", "run_demo"]
