"""``python -m dpframe``: the command line (:mod:`dpframe.cli`)."""

from __future__ import annotations

from dpframe.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
