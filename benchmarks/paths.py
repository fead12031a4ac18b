"""Where the benchmark scripts write (the layout in ``benchmarks/README.md``, "Layout").

``results/`` holds the figure set of ``python -m benchmarks`` (``latest.json`` and its
rendering), which the README and the docs cite; ``reports/`` the per-topic write-ups
(``RESULTS-<topic>.md``), generated or hand-written; ``reports/raw/`` the JSON each script
appends its runs to, which those write-ups are rendered from.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REPORTS = HERE / "reports"
RAW = REPORTS / "raw"
