"""Entry point: ``python -m benchmarks``."""

from __future__ import annotations

from benchmarks.run import main

raise SystemExit(main())
