"""Orchestrator: ``python -m benchmarks [--rows 100000,10000000] [--quick] [--peers]``.

Builds the list of measurements, runs each one in its own subprocess
(:mod:`benchmarks.worker`; ``--quick`` batches a scenario's measurements into one process to
stay fast), optionally runs the peer libraries in their own virtual environments
(:mod:`benchmarks.peers`), profiles the dpframe measurements that miss a target, and writes
``reports/RESULTS-harness.md`` plus the raw ``reports/raw/results-harness.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.data import KEY_COUNTS, data_dir, npy_path, parquet_path
from benchmarks.paths import RAW, REPORTS

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_ROWS = (100_000, 10_000_000)
QUICK_ROWS = (10_000,)
QUICK_KEYS = (10, 1000)
FRAME_SCENARIOS = ("mean", "variance", "count", "release10", "groupby_mean", "protect")
ALL_SCENARIOS = (*FRAME_SCENARIOS, "micro")
MECHANISMS = ("bounded", "truncated", "laplace")


def _parse_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(float(x)) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="dpframe benchmarks: DP statistics vs the native engines and peer libraries.",
    )
    p.add_argument("--rows", type=_parse_ints, default=None,
                   help="comma-separated table sizes (default 100000,10000000; --quick: 20000)")
    p.add_argument("--keys", type=_parse_ints, default=None,
                   help="public key counts for the group-by scenarios (default 10,1000,100000;"
                   " --quick: 10,1000)")
    p.add_argument("--scenarios", default=",".join(ALL_SCENARIOS),
                   help=f"comma-separated subset of {','.join(ALL_SCENARIOS)}")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats (≥ 5; default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 10 000 rows, 5 repeats, two processes in all, no profiles")
    p.add_argument("--peers", action="store_true",
                   help="also run diffprivlib and OpenDP in venvs under benchmarks/.venvs/")
    p.add_argument("--no-profile", action="store_true",
                   help="do not profile the dpframe measurements that miss a target")
    p.add_argument("--output", type=Path, default=REPORTS / "RESULTS-harness.md",
                   help="Markdown report (default benchmarks/reports/RESULTS-harness.md)")
    p.add_argument("--json", type=Path, default=None,
                   help="raw results (default: reports/raw/results-harness.json with the "
                   "default --output, else results.json next to --output)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="where generated tables are cached (default benchmarks/.data)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per subprocess")
    p.add_argument("--render-only", action="store_true",
                   help="re-write --output from the raw --json of an earlier run (e.g. after "
                   "editing benchmarks/reports/ANALYSIS-harness.md); measures nothing")
    args = p.parse_args(argv)
    if args.repeats < 5:
        p.error("--repeats must be at least 5 (the report is a median of ≥ 5 runs)")
    if args.rows is None:
        args.rows = QUICK_ROWS if args.quick else DEFAULT_ROWS
    if args.keys is None:
        args.keys = QUICK_KEYS if args.quick else KEY_COUNTS
    unknown = set(args.scenarios.split(",")) - set(ALL_SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    return args


# -- the plan ------------------------------------------------------------------------------------

def frame_specs(scenarios: Iterable[str], rows: int, keys: Iterable[int], path: Path,
                peers: bool) -> list[dict[str, Any]]:
    """Every (scenario, engine, variant) measurement at one size."""
    specs: list[dict[str, Any]] = []

    def add(scenario: str, engines: Iterable[str], variants: Iterable[str],
            key: int | None = None) -> None:
        for engine in engines:
            for variant in variants:
                specs.append({"scenario": scenario, "engine": engine, "variant": variant,
                              "rows": rows, "keys": key, "data": str(path)})

    wanted = set(scenarios)
    if "mean" in wanted:
        engines = ["pandas", "polars", "polars-lazy-parquet"] + (["polars-lazy"] if peers else [])
        add("mean", engines, ("dp", "floor", "plain"))
    if "variance" in wanted:
        add("variance", ("pandas", "polars"), ("dp", "floor", "plain"))
    if "count" in wanted:
        add("count", ("pandas", "polars"), ("dp", "plain"))
    if "release10" in wanted:
        add("release10", ("pandas", "polars"), ("dp", "floor"))
    if "groupby_mean" in wanted:
        for k in keys:
            add("groupby_mean", ("pandas", "polars"), ("dp", "floor", "plain"), k)
    if "protect" in wanted:
        add("protect", ("pandas", "polars", "polars-lazy-parquet"), ("dp",))
    if peers:
        for k in (10, 1000):
            add("groupby_sum", ("polars-lazy",), ("dp", "floor", "plain"), k)
    return specs


def micro_specs(quick: bool) -> list[dict[str, Any]]:
    draws = 20_000 if quick else 1_000_000
    specs: list[dict[str, Any]] = [
        {"scenario": "scale_cold", "case": "example"},
        {"scenario": "scale_cold", "case": "grid"},
        {"scenario": "scale_cached"},
    ]
    for mech in MECHANISMS:
        specs.append({"scenario": "mechanism_init", "mechanism": mech})
        specs.append({"scenario": "sample", "mechanism": mech, "draws": draws})
        specs.append({"scenario": "scalar_release", "mechanism": mech})
    return specs


# -- running -------------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    return env


def run_specs(specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Run ``specs`` in one subprocess; return one result per spec."""
    cmd = [sys.executable, "-m", "benchmarks.worker", json.dumps(specs)]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [{"spec": s, "status": "error", "reason": f"timed out after {timeout:g} s"}
                for s in specs]
    results = [json.loads(line[len("@@RESULT "):]) for line in proc.stdout.splitlines()
               if line.startswith("@@RESULT ")]
    if len(results) < len(specs):
        tail = (proc.stderr or "").strip().splitlines()[-5:]
        reason = f"worker exited with {proc.returncode}: {' | '.join(tail)}"
        done = len(results)
        results += [{"spec": s, "status": "error", "reason": reason} for s in specs[done:]]
    return results


def _label(spec: dict[str, Any]) -> str:
    parts = [spec["scenario"], spec.get("engine"), spec.get("variant"), spec.get("mechanism"),
             spec.get("case")]
    if spec.get("keys"):
        parts.append(f"k={spec['keys']}")
    if spec.get("rows"):
        parts.append(f"n={spec['rows']:,}")
    return " ".join(str(p) for p in parts if p)


def _progress(result: dict[str, Any], quiet: bool) -> None:
    if quiet:
        return
    spec = result["spec"]
    if result["status"] == "ok" and "median_s" in result:
        extra = result.get("peak_extra_mb")
        mem = f", peak +{extra:.0f} MB" if extra is not None else ""
        print(f"  {_label(spec):60s} {result['median_s'] * 1e3:10.3f} ms{mem}", flush=True)
    else:
        print(f"  {_label(spec):60s} {result['status']}: {result.get('reason', '')[:120]}",
              flush=True)


def execute(specs: list[dict[str, Any]], *, repeats: int, warmup: int, batch: bool,
            timeout: float, quiet: bool = False) -> list[dict[str, Any]]:
    for s in specs:
        s.setdefault("repeats", repeats)
        s.setdefault("warmup", warmup)
    results: list[dict[str, Any]] = []
    if batch:  # smoke runs: one process for the frame scenarios, one for the mechanisms
        groups: dict[str, list[dict[str, Any]]] = {}
        for s in specs:
            groups.setdefault("frames" if "engine" in s else "micro", []).append(s)
        for group in groups.values():
            for r in run_specs(group, timeout):
                _progress(r, quiet)
                results.append(r)
        return results
    for s in specs:  # one process per measurement
        (r,) = run_specs([s], timeout)
        _progress(r, quiet)
        results.append(r)
    return results


def run_ablation(engine: str, rows: int, path: Path, timeout: float,
                 keys: int | None = None) -> dict[str, Any]:
    """Stage-by-stage timing of a DP query's pipeline (:mod:`benchmarks.ablation`)."""
    cmd = [sys.executable, "-m", "benchmarks.ablation", engine, str(rows), str(path), "7"]
    if keys is not None:
        cmd.append(str(keys))
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"engine": engine, "rows": rows, "keys": keys, "error": "timed out"}
    for line in proc.stdout.splitlines():
        if line.startswith("@@ABLATION "):
            return json.loads(line[len("@@ABLATION "):])
    tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
    return {"engine": engine, "rows": rows, "keys": keys,
            "error": f"exit {proc.returncode}: {tail}"}


def prepare_data(rows: Iterable[int], directory: Path, timeout: float) -> dict[int, Path]:
    """Generate (in a subprocess, to keep this process small) and cache each table."""
    paths = {}
    for n in rows:
        path = parquet_path(n, directory)
        if not (path.exists() and npy_path(n, "income", directory).exists()):
            print(f"generating {n:,} rows -> {path}", flush=True)
            subprocess.run([sys.executable, "-m", "benchmarks.data", str(n), str(directory)],
                           cwd=REPO, env=_env(), check=True, timeout=timeout)
        paths[n] = path
    return paths


def _analysis() -> str | None:
    """The section from ``reports/raw/results-extra.json`` (``python -m benchmarks.extra``:
    engines and the issue-15 scenarios) followed by the hand-written
    ``reports/ANALYSIS-harness.md``, if they exist."""
    from benchmarks.extra_report import render_file

    parts = [render_file(RAW / "results-extra.json")]
    analysis = REPORTS / "ANALYSIS-harness.md"
    parts.append(analysis.read_text() if analysis.exists() else None)
    text = "\n".join(p for p in parts if p)
    return text or None


def _json_path(args: argparse.Namespace) -> Path:
    """The raw results file: ``--json``, else ``reports/raw/results-harness.json`` beside the
    default report, else ``results.json`` next to ``--output``."""
    if args.json is not None:
        return Path(args.json)
    if args.output == REPORTS / "RESULTS-harness.md":
        return RAW / "results-harness.json"
    return Path(args.output).with_name("results.json")


def render_only(output: Path, json_path: Path) -> int:
    raw = json.loads(json_path.read_text())
    meta = raw["meta"]
    meta["analysis"] = _analysis()
    rows = report.build_rows(raw["results"], raw.get("peers") or [], raw.get("paired") or [])
    output.write_text(report.render(rows, raw.get("profiles") or [], meta,
                                    raw.get("ablations") or []))
    print(f"re-rendered {output} from {json_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:
        return render_only(args.output, _json_path(args))
    started = time.time()
    load_start = os.getloadavg()
    git_start = report._git_state()
    scenarios = args.scenarios.split(",")
    directory = data_dir(args.data_dir)
    json_path = _json_path(args)
    paths = prepare_data(args.rows, directory, args.timeout)

    specs: list[dict[str, Any]] = []
    for n in args.rows:
        specs += frame_specs(scenarios, n, args.keys, paths[n], args.peers)
    if "micro" in scenarios:
        specs += micro_specs(args.quick)
    print(f"{len(specs)} measurements", flush=True)
    repeats = 5 if args.quick else args.repeats
    results = execute(specs, repeats=repeats, warmup=args.warmup, batch=args.quick,
                      timeout=args.timeout)

    peer_results: list[dict[str, Any]] = []
    peer_env: dict[str, Any] = {}
    if args.peers:
        from benchmarks import peers

        peer_results, peer_env = peers.run_peers(args.rows, directory, repeats=args.repeats,
                                                 warmup=args.warmup, timeout=args.timeout)

    paired: list[dict[str, Any]] = []
    pre_rows = report.build_rows(results, peer_results)
    if not args.quick:
        specs_p = report.paired_specs(pre_rows)
        if specs_p:
            print(f"{len(specs_p)} paired dp/floor checks for the target rows", flush=True)
        for s in specs_p:
            (r,) = run_specs([s], args.timeout)
            if r["status"] == "ok":
                print(f"  paired {_label(s):53s} ratio {r['pair_ratio']:.3f}", flush=True)
            paired.append(r)
    rows = report.build_rows(results, peer_results, paired)
    profiles: list[dict[str, Any]] = []
    if not args.quick and not args.no_profile:
        misses = report.missed_dp_specs(rows)
        if misses:
            print(f"profiling {len(misses)} missed targets", flush=True)
        for label, spec in misses:
            prof_spec = {**spec, "profile": True, "profile_runs": 3}
            (r,) = run_specs([prof_spec], args.timeout)
            profiles.append({"label": label, "result": r})

    ablations: list[dict[str, Any]] = []
    if not args.quick and not args.no_profile:
        for engine, n, keys in report.missed_ablation_targets(rows):
            what = "DP mean" if keys is None else f"group-by mean, {keys:,} keys"
            print(f"stage ablation: {what}, {engine}, {n:,} rows", flush=True)
            ablations.append(run_ablation(engine, n, paths[n], args.timeout, keys))

    elapsed = time.time() - started
    meta = report.machine_info(peer_env)
    meta["elapsed_s"] = elapsed
    meta["loadavg_start"] = load_start
    meta["git_start"] = git_start
    meta["command"] = "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
    meta["repeats"] = repeats
    if not args.quick:  # engine / issue-15 results and the hand-written reading
        meta["analysis"] = _analysis()
    meta["warmup"] = args.warmup
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report.render(rows, profiles, meta, ablations))
    json_path.write_text(json.dumps({"meta": meta, "results": results, "peers": peer_results,
                                     "paired": paired, "profiles": profiles,
                                     "ablations": ablations},
                                    indent=1, default=str))
    print(f"wrote {args.output} and {json_path} in {elapsed:.0f} s", flush=True)
    failed = [r for r in results if r["status"] == "error"]
    for r in failed:
        print(f"ERROR {_label(r['spec'])}: {r.get('reason')}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
