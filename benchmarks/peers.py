"""Peer libraries in their own virtual environments (``--peers``).

Their pins conflict with dpframe's environment, so each gets a venv under
``benchmarks/.venvs/`` (gitignored), created on first use with ``python -m venv`` and pip:

* ``diffprivlib``: ``diffprivlib==0.6.6`` with ``scikit-learn==1.8.0`` (with scikit-learn 1.9
  ``import diffprivlib`` fails: ``cannot import name 'DOUBLE' from 'sklearn.tree._tree'``).
* ``opendp``: ``opendp[polars]==0.16.0``, which pins ``polars==1.36.1``.

A stamp file records the requirements a venv was built with; a venv whose stamp differs is
rebuilt. Every peer measurement runs in its own process (:mod:`benchmarks.peer_worker`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.data import census_bounds, key_column, npy_path, parquet_path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"
PEER_WORKER = HERE / "peer_worker.py"
REQUIREMENTS: dict[str, list[str]] = {
    "diffprivlib": ["diffprivlib==0.6.6", "scikit-learn==1.8.0"],
    "opendp": ["opendp[polars]==0.16.0"],
}
STAMP = ".dpframe-bench-requirements"
OPENDP_GROUP_KEYS = (10, 1000)


def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ensure_venv(name: str, timeout: float = 1800.0) -> Path:
    """Create (or reuse) the venv for peer ``name``; return its python."""
    reqs = REQUIREMENTS[name]
    root = VENVS / name
    stamp = root / STAMP
    python = venv_python(name)
    if python.exists() and stamp.exists() and stamp.read_text() == "\n".join(reqs):
        return python
    if root.exists() and not python.exists():
        shutil.rmtree(root)
    print(f"setting up venv {root} ({', '.join(reqs)})", flush=True)
    VENVS.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=timeout)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *reqs], check=True, timeout=timeout)
    stamp.write_text("\n".join(reqs))
    return python


def _run(python: Path, specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    cmd = [str(python), str(PEER_WORKER), json.dumps(specs)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [{"spec": s, "status": "error", "reason": f"timed out after {timeout:g} s"}
                for s in specs]
    out = [json.loads(line[len("@@RESULT "):]) for line in proc.stdout.splitlines()
           if line.startswith("@@RESULT ")]
    if len(out) < len(specs):
        tail = " | ".join((proc.stderr or "").strip().splitlines()[-4:])
        out += [{"spec": s, "status": "error", "reason": f"exit {proc.returncode}: {tail}"}
                for s in specs[len(out):]]
    return out


def _versions(python: Path) -> dict[str, str]:
    proc = subprocess.run([str(python), str(PEER_WORKER), "--versions"], capture_output=True,
                          text=True, check=False, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("@@VERSIONS "):
            return json.loads(line[len("@@VERSIONS "):])
    return {}


def peer_specs(rows: Iterable[int], directory: Path, repeats: int,
               warmup: int) -> dict[str, list[dict[str, Any]]]:
    bounds = list(census_bounds()["income"])
    specs: dict[str, list[dict[str, Any]]] = {"diffprivlib": [], "opendp": []}
    for n in rows:
        common = {"rows": n, "bounds": bounds, "repeats": repeats, "warmup": warmup}
        for op in ("numpy_floor", "mean", "var"):
            specs["diffprivlib"].append({"peer": "diffprivlib", "op": op,
                                         "npy": str(npy_path(n, "income", directory)), **common})
        pq = str(parquet_path(n, directory))
        for op in ("context", "mean", "mean_parquet"):
            specs["opendp"].append({"peer": "opendp", "op": op, "parquet": pq, **common})
        for k in OPENDP_GROUP_KEYS:
            specs["opendp"].append({"peer": "opendp", "op": "groupby_sum", "parquet": pq,
                                    "keys": k, "key": key_column(k), **common})
    return specs


def run_peers(rows: Iterable[int], directory: Path, *, repeats: int, warmup: int,
              timeout: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every peer measurement, one process each; return results and peer versions."""
    results: list[dict[str, Any]] = []
    env: dict[str, Any] = {}
    for peer, specs in peer_specs(rows, directory, repeats, warmup).items():
        try:
            python = ensure_venv(peer)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            reason = f"could not set up the {peer} venv: {exc}"
            print(reason, flush=True)
            results += [{"spec": s, "status": "error", "reason": reason} for s in specs]
            continue
        env[peer] = _versions(python)
        for spec in specs:
            (r,) = _run(python, [spec], timeout)
            label = f"{peer} {spec['op']} n={spec['rows']:,}"
            if spec.get("keys"):
                label += f" k={spec['keys']}"
            if r["status"] == "ok":
                print(f"  {label:60s} {r['median_s'] * 1e3:10.3f} ms", flush=True)
            else:
                print(f"  {label:60s} {r['status']}: {r.get('reason', '')[:120]}", flush=True)
            results.append(r)
    return results, env
