"""Every code block of README.md and docs/*.md runs (issue 33: "every code block in README and
docs runs in a test").

Per Markdown file, in a fresh temporary directory, its blocks run in order:

* ```` ```python ```` blocks are executed in one namespace shared by the file's blocks;
* ```` ```bash ```` blocks run each command line ``dpframe ...`` / ``python -m dpframe ...``
  through the command line's ``main`` in this process (exit status 0 expected); a bash block
  with any other command must be marked ``<!-- no-run: reason -->``;
* a block whose line above is ``<!-- no-run: reason -->`` is skipped (the reason is required;
  kept for blocks that need minutes or a cluster);
* ``<!-- test-with: OLD => NEW -->`` above a block replaces the text ``OLD`` by ``NEW`` before
  it runs (a smaller size for an example whose point is its size);
* a block marked ``<!-- file: NAME -->`` (a TOML spec, say) is written to ``NAME`` before any
  block of its file runs, so a command above it can use it.

The directory holds what the docs' examples read as "your files" (a user has their own): a
small synthetic census as ``census/part-0.parquet`` and ``data/census-0.parquet``, and
``release.parquet`` signed with ``steward.key`` from the durable ledger ``ledger.jsonl`` (left
out where a block runs ``dpframe release``, which writes its own).
Unlabelled fences are output, diagrams or excerpts; one that holds a dpframe command fails the
check below (label it ``bash``).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

import dpframe as dpf
from dpframe.cli import main as cli_main
from dpframe.datasets import census

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_MARKER = re.compile(r"^<!--\s*(no-run|test-with|file):\s*(.*?)\s*-->$")
_RUNNABLE = ("python", "bash")
#: at most this many skipped blocks in all the docs: skipping stays the exception
MAX_NO_RUN = 3


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    lang: str
    code: str
    markers: tuple[tuple[str, str], ...]

    def marker(self, kind: str) -> list[str]:
        return [value for k, value in self.markers if k == kind]

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, each with the markers on the lines just above it
    (consecutive HTML comments; blank lines end the run)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            i += 1
            continue
        markers: list[tuple[str, str]] = []
        j = i - 1
        while j >= 0 and (m := _MARKER.match(lines[j].strip())):
            markers.insert(0, (m.group(1), m.group(2)))
            j -= 1
        end = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
        blocks.append(Block(path.name, i + 1, fence[3:].strip(), "\n".join(lines[i + 1:end]),
                            tuple(markers)))
        i = end + 1
    return blocks


def _cli_argv(line: str) -> list[str] | None:
    """The arguments after ``dpframe`` / ``python -m dpframe``, or None for another command."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # unbalanced quotes: not a command line
        return None
    if words[:1] == ["dpframe"]:
        return words[1:]
    if words[:3] == ["python", "-m", "dpframe"]:
        return words[3:]
    return None


def _run_bash(block: Block) -> None:
    """Each command of each line (``a && b`` is two); ``pip install`` is what the test's own
    environment already did."""
    commands = [part.strip() for line in block.code.splitlines() for part in line.split("&&")]
    for command in commands:
        if not command or command.startswith("#") or command.startswith("pip install"):
            continue
        argv = _cli_argv(command)
        assert argv is not None, f"{block.where}: not a dpframe command; mark it no-run: {command}"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli_main(argv)
        assert status == 0, f"{block.where}: `{command}` exited {status}: {err.getvalue()}"


def _run(block: Block, namespace: dict) -> None:
    code = block.code
    for replacement in block.marker("test-with"):
        old, new = (part.strip() for part in replacement.split("=>"))
        assert old in code, f"{block.where}: test-with names text not in the block: {old}"
        code = code.replace(old, new)
    if block.lang == "python":
        exec(compile(code, block.where, "exec"), namespace)
    else:
        _run_bash(block)


@pytest.fixture(scope="module")
def your_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the docs' examples read as the user's own (see the module docstring)."""
    base = tmp_path_factory.mktemp("your_files")
    data = census(2_000, seed=1)
    for name in ("census/part-0.parquet", "data/census-0.parquet"):
        (base / name).parent.mkdir()
        data.to_parquet(base / name)
    key = b"a steward's secret key for the docs"
    (base / "steward.key").write_bytes(key)
    session = dpf.Session(path=base / "ledger.jsonl")
    pf = dpf.protect(data, epsilon=1.0, bounds={"age": (16, 90)}, session=session)
    table = pf.dp.release({"n": dpf.count(), "mean_age": dpf.mean("age")}, epsilon=0.2)
    dpf.write_parquet(dpf.sign_release(table, key), base / "release.parquet")
    return base


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_block_runs(doc: Path, your_files: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(your_files, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(doc)
    if any(b.lang == "bash" and "dpframe release " in b.code for b in blocks):
        (tmp_path / "release.parquet").unlink()  # a spec run writes its own (no overwrite)
    for block in blocks:
        for name in block.marker("file"):
            (tmp_path / name).write_text(block.code + "\n", encoding="utf-8")
    namespace: dict = {"__name__": f"doc_{doc.stem}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # notices are the docs' subject, not failures here
        for block in blocks:
            if block.lang in _RUNNABLE and not block.marker("no-run"):
                _run(block, namespace)


def test_markers_are_few_and_give_reasons() -> None:
    blocks = [b for doc in DOCS for b in _blocks(doc)]
    skipped = [b for b in blocks if b.marker("no-run")]
    for block in skipped:
        assert all(len(reason) >= 10 for reason in block.marker("no-run")), block.where
    assert len(skipped) <= MAX_NO_RUN, [b.where for b in skipped]
    for block in blocks:
        if block.lang == "":
            commands = [ln for ln in block.code.splitlines()
                        if ln.strip() and _cli_argv(ln) is not None]
            assert not commands, f"{block.where}: a dpframe command in an unlabelled block"
    assert sum(b.lang == "python" for b in blocks) >= 20
