"""The base dependencies' floors in pyproject.toml are the versions .ci/run-floor tests: its
constraints file pins each base dependency at exactly its `>=` bound, so a floor cannot be
lowered (or a base dependency added) without the floor run covering it. Reads two text files."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _floors() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floors = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)", requirement.strip())
        assert match, f"a base dependency without a plain >= floor: {requirement!r}"
        floors[match.group(1).lower()] = match.group(2)
    return floors


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / ".ci" / "floor-constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def test_every_floor_is_pinned_by_the_floor_run() -> None:
    assert _pins() == _floors()


def test_the_floor_run_installs_with_the_constraints() -> None:
    script = (ROOT / ".ci" / "run-floor").read_text(encoding="utf-8")
    assert "-c .ci/floor-constraints.txt" in script
