"""Entry point: ``python -m benchmarks``.

Without the older harness's options this regenerates every figure the README and docs cite
(:mod:`benchmarks.figures`); with any of them (``--rows``, ``--scenarios``, ``--peers``,
``--output``, ...) it runs the per-process harness :mod:`benchmarks.run`, also reachable as
``python -m benchmarks.run``.
"""

from __future__ import annotations

import sys

_HARNESS_OPTIONS = ("--rows", "--keys", "--scenarios", "--repeats", "--warmup", "--output",
                    "--json", "--data-dir", "--no-profile", "--timeout", "--peers")


def _harness(argv: list[str]) -> bool:
    return any(a.split("=", 1)[0] in _HARNESS_OPTIONS for a in argv)


if _harness(sys.argv[1:]):
    from benchmarks.run import main
else:
    from benchmarks.figures import main

raise SystemExit(main())
