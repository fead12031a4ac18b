"""The release pipeline's own shape (issue 22): small functions a newcomer can read. Complexity
(≤ 12 per function) is held by ruff's C901 in CI; the length is checked here."""

from __future__ import annotations

import ast
from pathlib import Path

import dpframe.release._pipeline

MAX_LINES = 60


def test_no_function_of_the_release_pipeline_is_longer_than_60_lines():
    tree = ast.parse(Path(dpframe.release._pipeline.__file__).read_text())
    long = {node.name: node.end_lineno - node.lineno + 1
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_LINES}
    assert long == {}
