"""Every Polars path in a forked child of a process that ran Polars gives the clear fork error
(:class:`dpframe.UnsupportedProcessError`) instead of hanging (issue 30, item 6), including
when dpframe is imported for the first time *in the child* (the parent, which ran Polars, had
not imported dpframe, so no fork hook told the child: :func:`dpframe._util.forking._inherited_pool`
finds the pool built in the memory it inherited). A spawned (exec'd) child of a process
running Polars is not refused.

Each case runs a fresh interpreter (``subprocess``, hard timeout) that runs Polars, then forks;
the child arms ``signal.alarm`` and reports what the call did: ``ok``, an error class, or
``hang`` (killed by the alarm).

``rename_release``, ``concat_releases`` and ``write_parquet`` on a Polars table are refused
where the table is exported to Arrow for its seal
(:func:`dpframe.accounting.seals.table_digest`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
ALARM = 6  # seconds a forked child may take before it counts as hung

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir() or sys.platform != "linux",
                                reason="fork and /proc: Linux only")

PARENT = """
import os, signal, sys
import polars as pl
{import_dpframe}
pl.DataFrame({{"x": [1.0, 2.0] * 500, "g": ["a", "b"] * 500}}).group_by("g").agg(
    pl.col("x").sum())  # the parent's Polars thread pool now runs
path = sys.argv[1]
pl.DataFrame({{"x": [1.0, 2.0, 3.0] * 100}}).write_parquet(path)
{setup}

def child(call):
    signal.alarm({alarm})
    try:
        import dpframe as dpf
        call(dpf)
        print("ok", flush=True)
    except Exception as exc:
        print(type(exc).__name__, flush=True)
    os._exit(0)

pid = os.fork()
if pid == 0:
    child({call})
_, status = os.waitpid(pid, 0)
if os.WIFSIGNALED(status):
    print("hang", flush=True)
"""

SCAN = ("lambda dpf: dpf.protect(pl.scan_parquet(path), epsilon=1.0, bounds={'x': (0.0, 5.0)}, "
        "missing={'x': 1.0}, session=dpf.Session())")

GROUP_TABLE = """
import dpframe as dpf
pf = dpf.protect(pl.DataFrame({"x": [1.0, 2.0, 3.0] * 100, "g": ["a", "b", "c"] * 100}),
                 epsilon=2.0, bounds={"x": (0.0, 5.0)}, keys={"g": ["a", "b", "c"]},
                 missing={"x": 1.0}, session=dpf.Session())
table = pf.dp.groupby("g").mean("x", epsilon=0.5, random_state=1)
"""


def run_case(tmp_path: Path, call: str, *, import_dpframe: bool, setup: str = "") -> str:
    script = PARENT.format(import_dpframe="import dpframe" if import_dpframe else "",
                           setup=textwrap.dedent(setup), alarm=ALARM, call=call)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "x.parquet")],
                         capture_output=True, text=True, timeout=ALARM + 60, cwd=ROOT, env=ENV)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("import_dpframe", [True, False], ids=["imported", "first-import"])
def test_protect_scan_parquet_in_a_fork_child_is_refused(tmp_path, import_dpframe):
    """The parent ran Polars; dpframe imported in the parent (its fork hook tells the child)
    or for the first time in the child (no hook ran: the child probes the memory it inherited)."""
    assert run_case(tmp_path, SCAN, import_dpframe=import_dpframe) == "UnsupportedProcessError"


def test_a_process_exec_d_by_a_polars_process_is_not_refused(tmp_path):
    """A new program (here ``python -c``; ``spawn`` children too) started while this process
    runs Polars imports Polars, then dpframe: its own pool is fine, dpframe works."""
    pl.DataFrame({"x": [1.0, 2.0] * 500, "g": ["a", "b"] * 500}).group_by("g").agg(
        pl.col("x").sum())
    code = textwrap.dedent("""
        import polars as pl
        import dpframe as dpf
        pf = dpf.protect(pl.DataFrame({"x": [0.5, 0.25]}), epsilon=1.0,
                         bounds={"x": (0.0, 1.0)}, session=dpf.Session())
        print(pf.dp.sum("x", epsilon=0.5, random_state=1) is not None)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=ENV)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"


EXPORTS = {
    "rename_release": "lambda dpf: dpf.rename_release(table, {'mean': 'm'})",
    "concat_releases": "lambda dpf: dpf.concat_releases([table])",
    "write_parquet": "lambda dpf: dpf.write_parquet(table, path + '.out')",
}


def test_release_table_exports_of_polars_tables_in_a_fork_child_are_refused(tmp_path):
    """rename_release, concat_releases and write_parquet on a Polars group-by table (several
    rows: its digest runs on Polars' pool) in a fork child; run side by side to bound the
    time a hang costs."""
    procs = {}
    for name, call in EXPORTS.items():
        folder = tmp_path / name
        folder.mkdir()
        script = PARENT.format(import_dpframe="import dpframe", setup=GROUP_TABLE, alarm=ALARM,
                               call=call)
        procs[name] = subprocess.Popen([sys.executable, "-c", script, str(folder / "x.parquet")],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, cwd=ROOT, env=ENV)
    got = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=ALARM + 60)
        assert proc.returncode == 0, err[-2000:]
        got[name] = out.strip().splitlines()[-1]
    assert got == dict.fromkeys(EXPORTS, "UnsupportedProcessError")
