"""Turn raw measurement results into table rows, target verdicts and the report
(``reports/RESULTS-harness.md``)."""

from __future__ import annotations

import os
import platform
import time
from importlib import metadata
from typing import Any

#: Sizes at which the issue's ratio targets apply (they are stated "at 10 M rows").
TARGET_ROWS = 10_000_000
MEAN_RATIO_TARGET = 1.2
MEAN_MEMORY_TARGET = 1.5
GROUPBY_RATIO_TARGET = 1.5
GROUPBY_TARGET_KEYS = 1000
OPENDP_SPEEDUP_TARGET = 20.0
COLD_SOLVE_TARGET_S = 100e-6
SAMPLING_TARGET_PER_S = 1e6
CACHED_SHARE_TARGET = 0.05

SCENARIO_NAMES = {
    "mean": "DP mean",
    "variance": "DP variance",
    "count": "DP count",
    "release10": "batch release, 10 queries",
    "groupby_mean": "group-by mean",
    "groupby_sum": "group-by sum",
    "protect": "protect()",
}
NATIVE_NAMES = {
    "mean": "clip+sum+count",
    "variance": "clip+var",
    "count": "len",
    "release10": "10 clipped aggregates",
    "groupby_mean": "clip+group sum+count",
    "groupby_sum": "clip+group sum",
    "protect": "—",
}


# -- formatting ------------------------------------------------------------------------------------

def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return f"{r:.3g}×" if r < 100 else f"{r:,.0f}×"


def fmt_mb(mb: float | None) -> str:
    return "—" if mb is None else f"{mb:,.0f}" if mb >= 10 else f"{mb:.1f}"


def fmt_met(met: bool | None) -> str:
    return "—" if met is None else ("yes" if met else "**no**")


def _median(r: dict[str, Any] | None) -> float | None:
    if r is None or r.get("status") != "ok":
        return None
    return r.get("median_s")


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b in (None, 0) else a / b


# -- rows ------------------------------------------------------------------------------------------

def _frame_key(spec: dict[str, Any]) -> tuple:
    return (spec["scenario"], spec["rows"], spec["engine"], spec.get("keys"))


def _frame_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    grouped: dict[tuple, dict[str, Any]] = {}
    for r in results:
        spec = r["spec"]
        if "engine" not in spec:
            continue
        grouped.setdefault(_frame_key(spec), {})[spec["variant"]] = r
    rows = []
    for (scenario, n, engine, keys), variants in grouped.items():
        dp, floor, plain = variants.get("dp"), variants.get("floor"), variants.get("plain")
        native = floor if floor is not None else plain
        t_dp, t_native, t_plain = _median(dp), _median(native), _median(plain)
        row: dict[str, Any] = {
            "section": "frame", "scenario": scenario, "rows": n, "engine": engine,
            "keys": keys, "dp": dp, "native": native, "plain": plain,
            "t_dp": t_dp, "t_native": t_native, "t_plain": t_plain,
            "ratio": _div(t_dp, t_native), "ratio_plain": _div(t_dp, t_plain),
            "mem_dp": (dp or {}).get("peak_extra_mb"),
            "mem_native": (native or {}).get("peak_extra_mb"),
            "input_mb": (dp or native or {}).get("input_mb"),
            "target": "—", "met": None,
        }
        row["mem_ratio"] = _div(row["mem_dp"], row["input_mb"])
        if scenario == "mean" and n >= TARGET_ROWS and engine != "polars-lazy":
            checks = [row["ratio"] is not None and row["ratio"] <= MEAN_RATIO_TARGET]
            row["target"] = f"≤ {MEAN_RATIO_TARGET}×"
            if engine in ("pandas", "polars"):
                row["target"] += f"; peak ≤ {MEAN_MEMORY_TARGET}× column"
                checks.append(row["mem_ratio"] is not None
                              and row["mem_ratio"] <= MEAN_MEMORY_TARGET)
            row["met"] = all(checks)
        if scenario == "groupby_mean" and keys == GROUPBY_TARGET_KEYS and n >= TARGET_ROWS:
            row["target"] = f"≤ {GROUPBY_RATIO_TARGET}×"
            row["met"] = row["ratio"] is not None and row["ratio"] <= GROUPBY_RATIO_TARGET
        if dp is not None and dp.get("status") != "ok":
            row["error"] = dp.get("reason")
        rows.append(row)
    order = {s: i for i, s in enumerate(SCENARIO_NAMES)}
    engines = {"pandas": 0, "polars": 1, "polars-lazy-parquet": 2, "polars-lazy": 3}
    rows.sort(key=lambda r: (order.get(r["scenario"], 99), r["keys"] or 0, r["rows"],
                             engines.get(r["engine"], 9)))
    return rows


MICRO_LABELS = {
    ("scale_cold", "example"): "cold interval scale solve, ε=1, Δ=1, [0, 10]",
    ("scale_cold", "grid"): "cold interval scale solve, mean over 12 (ε, Δ/w) points",
    ("scale_cached", None): "cached interval scale solve",
}


def _micro_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    cold = None
    for r in results:
        spec = r["spec"]
        if spec["scenario"] == "scale_cold" and spec.get("case") == "example":
            cold = _median(r)
    for r in results:
        spec = r["spec"]
        sc = spec["scenario"]
        if "engine" in spec:
            continue
        mech = spec.get("mechanism")
        t = _median(r)
        row: dict[str, Any] = {"section": "micro", "scenario": sc, "result": r, "t": t,
                               "target": "—", "met": None, "value": fmt_time(t)}
        if sc == "scale_cold":
            row["label"] = MICRO_LABELS[(sc, spec.get("case"))]
            row["target"] = "≤ 100 µs"
            row["met"] = t is not None and t <= COLD_SOLVE_TARGET_S
        elif sc == "scale_cached":
            row["label"] = MICRO_LABELS[(sc, None)]
            row["target"] = f"≈ free (≤ {CACHED_SHARE_TARGET:.0%} of cold)"
            row["met"] = None if t is None or cold is None else t <= CACHED_SHARE_TARGET * cold
        elif sc == "mechanism_init":
            row["label"] = f"construct {mech} mechanism, cold (scale + snapping plan)"
        elif sc == "scalar_release":
            row["label"] = f"one scalar release, {mech}, secure source"
        elif sc == "sample":
            per_s = r.get("throughput_per_s") if r.get("status") == "ok" else None
            draws = spec.get("draws") or 0
            row["label"] = f"vectorised sampling, {mech}, secure source ({draws:,} draws)"
            row["value"] = "—" if per_s is None else f"{per_s / 1e6:.2f} M draws/s"
            row["target"] = "≥ 1 M draws/s"
            row["met"] = per_s is not None and per_s >= SAMPLING_TARGET_PER_S
        if r.get("status") != "ok":
            row["value"] = f"{r.get('status')}: {r.get('reason', '')[:80]}"
        rows.append(row)
    return rows


def _find(results: list[dict[str, Any]], **want: Any) -> dict[str, Any] | None:
    for r in results:
        spec = r["spec"]
        if all(spec.get(k) == v for k, v in want.items()):
            return r
    return None


PEER_COMPARISONS = (
    # (peer, peer op, dpframe spec filter, label, target kind)
    ("diffprivlib", "mean", {"scenario": "mean", "engine": "pandas", "variant": "dp"},
     "DP mean: diffprivlib tools.mean (numpy array) vs dpframe pandas", "no_slower"),
    ("diffprivlib", "var", {"scenario": "variance", "engine": "pandas", "variant": "dp"},
     "DP variance: diffprivlib tools.var vs dpframe pandas", None),
    ("opendp", "mean", {"scenario": "mean", "engine": "polars-lazy", "variant": "dp"},
     "DP mean: OpenDP vs dpframe, same in-memory LazyFrame", "opendp20"),
    ("opendp", "mean_parquet", {"scenario": "mean", "engine": "polars-lazy-parquet",
                                "variant": "dp"},
     "DP mean: OpenDP vs dpframe, scan_parquet", None),
    ("opendp", "groupby_sum", {"scenario": "groupby_sum", "engine": "polars-lazy",
                               "variant": "dp"},
     "group-by sum: OpenDP vs dpframe, in-memory LazyFrame", None),
)


PEER_INFO = {
    ("opendp", "context"): "OpenDP context creation (once per dataset, not in the per-release "
                           "times)",
    ("diffprivlib", "numpy_floor"): "numpy clip + sum + count in the diffprivlib venv "
                                    "(reference floor)",
}


def _peer_rows(results: list[dict[str, Any]], peers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for p in peers:
        spec = p["spec"]
        info = PEER_INFO.get((spec["peer"], spec["op"]))
        if info is not None:
            rows.append({"section": "peer", "label": info, "rows": spec["rows"],
                         "peer": spec["peer"], "dp": None, "peer_result": p, "t_dp": None,
                         "t_peer": _median(p), "ratio": None,
                         "mem_peer": p.get("peak_extra_mb"), "mem_dp": None,
                         "target": "—", "met": None})
            continue
        for peer, op, want, label, kind in PEER_COMPARISONS:
            if spec["peer"] != peer or spec["op"] != op:
                continue
            filt = dict(want, rows=spec["rows"])
            if spec.get("keys"):
                filt["keys"] = spec["keys"]
                label = f"{label}, {spec['keys']:,} keys"
            dp = _find(results, **filt)
            t_dp, t_peer = _median(dp), _median(p)
            ratio = _div(t_dp, t_peer)
            row: dict[str, Any] = {
                "section": "peer", "label": label, "rows": spec["rows"], "peer": peer,
                "dp": dp, "peer_result": p, "t_dp": t_dp, "t_peer": t_peer, "ratio": ratio,
                "mem_peer": p.get("peak_extra_mb"), "mem_dp": (dp or {}).get("peak_extra_mb"),
                "target": "—", "met": None,
            }
            if kind == "no_slower":
                row["target"] = "≤ 1×"
                row["met"] = ratio is not None and ratio <= 1.0
            elif kind == "opendp20":
                x = f"{OPENDP_SPEEDUP_TARGET:g}"
                row["target"] = f"≤ 1/{x} (≥ {x}× faster)"
                row["met"] = ratio is not None and ratio <= 1.0 / OPENDP_SPEEDUP_TARGET
            if p.get("status") != "ok":
                row["error"] = f"{p.get('status')}: {p.get('reason', '')[:100]}"
            rows.append(row)
    return rows


def build_rows(results: list[dict[str, Any]], peers: list[dict[str, Any]],
               paired: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    rows = _frame_rows(results) + _micro_rows(results) + _peer_rows(results, peers)
    apply_paired(rows, paired or [])
    return rows


def paired_specs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A paired (same-process, alternating) dp-vs-floor check for every frame target row."""
    out = []
    for r in rows:
        if r["section"] == "frame" and r.get("met") is not None and r.get("dp"):
            spec = {k: v for k, v in r["dp"]["spec"].items() if k not in ("variant",)}
            out.append({**spec, "paired": True, "pairs": 15})
    return out


def apply_paired(rows: list[dict[str, Any]], paired: list[dict[str, Any]]) -> None:
    """Base the time verdict of target rows on the paired ratio, which both variants measure
    under the same machine state (separate processes can see different load)."""
    for p in paired:
        if p.get("status") != "ok":
            continue
        spec = p["spec"]
        for r in rows:
            if r["section"] != "frame" or (r["scenario"], r["rows"], r["engine"], r["keys"]) != (
                    spec["scenario"], spec["rows"], spec["engine"], spec.get("keys")):
                continue
            r["paired_ratio"] = p["pair_ratio"]
            limit = (MEAN_RATIO_TARGET if r["scenario"] == "mean" else GROUPBY_RATIO_TARGET)
            time_ok = p["pair_ratio"] <= limit
            mem_ok = True
            if r["scenario"] == "mean" and r["engine"] in ("pandas", "polars"):
                mem_ok = r["mem_ratio"] is not None and r["mem_ratio"] <= MEAN_MEMORY_TARGET
            r["met"] = time_ok and mem_ok


def _row_label(row: dict[str, Any]) -> str:
    if row["section"] == "frame":
        keys = f", {row['keys']:,} keys" if row.get("keys") else ""
        return f"{SCENARIO_NAMES[row['scenario']]}{keys}, {row['engine']}, {row['rows']:,} rows"
    if row["section"] == "peer":
        return f"{row['label']}, {row['rows']:,} rows"
    return row["label"]


def missed_ablation_targets(rows: list[dict[str, Any]]) -> list[tuple[str, int, int | None]]:
    """(engine, rows, keys) of every missed DP-mean or group-by target on an in-memory
    engine (keys None for the mean)."""
    return [(r["engine"], r["rows"], r["keys"] if r["scenario"] == "groupby_mean" else None)
            for r in rows
            if r["section"] == "frame" and r["scenario"] in ("mean", "groupby_mean")
            and r.get("met") is False and r["engine"] in ("pandas", "polars")]


def missed_dp_specs(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The dpframe measurement behind every missed target (to profile), deduplicated."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen = set()
    for row in rows:
        if row.get("met") is not False:
            continue
        r = row.get("result") if row["section"] == "micro" else row.get("dp")
        if r is None or r.get("status") != "ok":
            continue
        spec = {k: v for k, v in r["spec"].items() if k not in ("profile", "profile_runs")}
        key = repr(sorted(spec.items()))
        if key in seen:
            continue
        seen.add(key)
        out.append((_row_label(row), spec))
    return out


# -- machine ---------------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_state() -> str:
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, text=True,
                              capture_output=True, check=True, timeout=30).stdout.strip()
        tree = subprocess.run(["git", "rev-parse", "--short", "HEAD:dpframe"], cwd=repo,
                              text=True, capture_output=True, check=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "dpframe"], cwd=repo,
                               text=True, capture_output=True, check=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if dirty:
        return (f"{head} (dpframe/ tree {tree}) + uncommitted changes in "
                f"{len(dirty.splitlines())} dpframe file(s)")
    return f"{head} (dpframe/ tree {tree}, clean)"


def machine_info(peer_env: dict[str, Any]) -> dict[str, Any]:
    libs = ("dpframe", "numpy", "pandas", "polars", "narwhals", "pyarrow", "scipy")
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg": os.getloadavg(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": {lib: _version(lib) for lib in libs},
        "git": _git_state(),
        "peers": peer_env,
    }


# -- Markdown --------------------------------------------------------------------------------------

def _table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines


def frame_table(rows: list[dict[str, Any]]) -> list[str]:
    body = []
    for r in rows:
        if r["section"] != "frame":
            continue
        name = SCENARIO_NAMES[r["scenario"]]
        if r.get("keys"):
            name += f", {r['keys']:,} keys"
        dp = fmt_time(r["t_dp"]) if not r.get("error") else f"error: {r['error'][:60]}"
        native = fmt_time(r["t_native"])
        if r["t_native"] is not None:
            native += f" ({NATIVE_NAMES[r['scenario']]})"
        mem = f"{fmt_mb(r['mem_dp'])} / {fmt_mb(r['mem_native'])}"
        body.append([
            name, f"{r['rows']:,}", r["engine"], dp, native, fmt_ratio(r["ratio"]),
            fmt_time(r["t_plain"]) if r["scenario"] not in ("count", "protect") else "—",
            fmt_ratio(r["ratio_plain"]) if r["scenario"] not in ("count", "protect") else "—",
            mem, fmt_ratio(r["mem_ratio"]), r["target"], fmt_ratio(r.get("paired_ratio")),
            fmt_met(r["met"]),
        ])
    header = ["scenario", "rows", "engine", "dpframe", "native", "ratio", "plain", "dp/plain",
              "peak MB dp / native", "dp peak / column", "target", "paired ratio", "met?"]
    return _table(header, body)


def micro_table(rows: list[dict[str, Any]]) -> list[str]:
    body = [[r["label"], r["value"], r["target"], fmt_met(r["met"])]
            for r in rows if r["section"] == "micro"]
    return _table(["measurement", "median", "target", "met?"], body)


def peer_table(rows: list[dict[str, Any]]) -> list[str]:
    body = []
    for r in rows:
        if r["section"] != "peer":
            continue
        peer_t = fmt_time(r["t_peer"]) if not r.get("error") else r["error"]
        body.append([r["label"], f"{r['rows']:,}", fmt_time(r["t_dp"]), peer_t,
                     fmt_ratio(r["ratio"]), f"{fmt_mb(r['mem_dp'])} / {fmt_mb(r['mem_peer'])}",
                     r["target"], fmt_met(r["met"])])
    return _table(["comparison", "rows", "dpframe", "peer", "dpframe / peer",
                   "peak MB dpframe / peer", "target", "met?"], body)


def _profile_section(profiles: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for p in profiles:
        r = p["result"]
        out += ["", f"### {p['label']}", ""]
        if r.get("status") != "ok" or "profile" not in r:
            out.append(f"profile failed: {r.get('reason')}")
            continue
        prof = r["profile"]
        out.append(f"cProfile, mean of 3 runs after a warm-up: {prof['total_ms']:.2f} ms per "
                   "run (profiling overhead included). Top functions by cumulative time "
                   "(dpframe's own and anything ≥ 5 % of the run):")
        out.append("")
        total = prof["total_ms"] or 1.0
        body = []
        for e in prof["by_cumtime"]:
            f = e["function"]
            if "benchmarks/" in f or f.startswith("~:0(<built-in method builtins.exec"):
                continue
            if "dpframe/" not in f and e["cumtime_ms"] < 0.05 * total:
                continue
            body.append([f"`{f}`", str(e["ncalls"]), f"{e['tottime_ms']:.2f}",
                         f"{e['cumtime_ms']:.2f}"])
        out += _table(["function", "calls", "own ms", "cumulative ms"], body[:18])
        out += ["", "Top functions by own time:", ""]
        body = [[f"`{e['function']}`", str(e["ncalls"]), f"{e['tottime_ms']:.2f}",
                 f"{e['cumtime_ms']:.2f}"] for e in prof["by_tottime"][:8]]
        out += _table(["function", "calls", "own ms", "cumulative ms"], body)
    return out


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if r.get("met") is None:
            continue
        if r["section"] == "frame":
            detail = f"ratio {fmt_ratio(r['ratio'])} (separate processes)"
            if r.get("paired_ratio") is not None:
                detail += (f", **{fmt_ratio(r['paired_ratio'])} paired** (median of 15 "
                           "alternating dp/floor pairs in one process; the verdict uses this)")
            if r.get("mem_ratio") is not None and r["scenario"] == "mean":
                detail += f", peak {fmt_ratio(r['mem_ratio'])} column"
        elif r["section"] == "peer":
            detail = f"dpframe/peer {fmt_ratio(r['ratio'])}"
        else:
            detail = r["value"]
        out.append(f"- {'met' if r['met'] else '**missed**'}: {_row_label(r)} — {detail} "
                   f"(target {r['target']})")
    return out


def _ablation_section(ablations: list[dict[str, Any]]) -> list[str]:
    out = ["", "## Where the time goes inside the engine (stage ablation)", "",
           "cProfile sees a Polars query as one `collect` call, so `benchmarks/ablation.py` "
           "rebuilds the per-row pipeline of `dpframe/engine/_aggregation.py::aggregate` "
           "natively, one "
           "cumulative stage at a time (median of 7 runs each, one process per engine), then "
           "times `engine.aggregate` itself and the whole `frame.dp.mean`. The difference "
           "between consecutive lines is the cost of a stage; the `suggested` lines are "
           "cheaper formulations for the owner to evaluate (same sums, not yet reviewed for "
           "privacy)."]
    for a in ablations:
        what = "DP mean" if not a.get("keys") else f"group-by mean, {a['keys']:,} keys"
        out += ["", f"### {what}, {a['engine']}, {a['rows']:,} rows", ""]
        if a.get("error"):
            out.append(f"ablation failed: {a['error']}")
            continue
        fp = a["fixed_point"]
        out.append(f"Fixed point: centre {fp['center']:g}, q = {fp['q']:g}, "
                   f"k ∈ [{fp['k_lo']:,}, {fp['k_hi']:,}].")
        out.append("")
        floor = next((s["median_s"] for s in a["stages"] if "floor" in s["stage"]), None)
        body = [[s["stage"], fmt_time(s["median_s"]), fmt_ratio(_div(s["median_s"], floor))]
                for s in a["stages"]]
        out += _table(["stage (cumulative)", "median", "÷ floor"], body)
    return out


def _tree(state: str | None) -> str | None:
    if not state or "tree " not in state:
        return state
    return state.split("tree ", 1)[1]


def _git_change(meta: dict[str, Any]) -> str:
    start, end = meta.get("git_start"), meta.get("git")
    if start is None or start == end:
        return ""
    if _tree(start) == _tree(end):
        return f" at the end, {start.split()[0]} at the start (same dpframe/ source)"
    return (f" at the end; **{start} at the start** (dpframe/ changed during the run: "
            "compare with care)")


def render(rows: list[dict[str, Any]], profiles: list[dict[str, Any]],
           meta: dict[str, Any], ablations: list[dict[str, Any]] | None = None) -> str:
    v = meta["versions"]
    lines = [
        "# dpframe benchmark results",
        "",
        f"Generated {meta['date_utc']} by `{meta['command'].strip()}` "
        f"({meta['elapsed_s']:.0f} s). Each measurement ran in its own process: "
        f"{meta['warmup']} warm-up run(s), then the median of {meta['repeats']} timed runs. "
        "Peak MB is the peak resident memory during the runs minus the resident memory "
        "before them (data loaded), read from the kernel's high-water mark after resetting "
        "it; the column is the in-memory size of the input column(s).",
        "",
        "## Machine",
        "",
        f"- CPU: {meta['cpu']}, {meta['cores']} cores; RAM {meta['ram_gb']:.1f} GB"
        if meta.get("ram_gb") else f"- CPU: {meta['cpu']}, {meta['cores']} cores",
        f"- {meta['os']}, Python {meta['python']}",
        "- load average (1, 5, 15 min) at the start: "
        + ", ".join(f"{x:.2f}" for x in meta.get("loadavg_start", meta["loadavg"]))
        + "; at the end: " + ", ".join(f"{x:.2f}" for x in meta["loadavg"]),
        "- " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- dpframe source: commit {meta.get('git', 'unknown')}"
        + _git_change(meta),
    ]
    for peer, env in (meta.get("peers") or {}).items():
        lines.append(f"- peer venv `{peer}`: " + ", ".join(f"{k} {val}" for k, val in env.items()))
    lines += [
        "",
        "## Targets",
        "",
        *(summary_lines(rows) or ["- (no target rows in this run)"]),
        "",
        "## Frames: dpframe vs the same engine's native work",
        "",
        "ratio = dpframe / native, where native is the physical floor of the DP answer (clamp "
        "to the public bounds, then sum and count — or the clipped statistic); plain is the "
        "unclamped native statistic. For target rows, *paired ratio* is the median of 15 "
        "dp/floor ratios measured alternately in one process (robust to the load changes that "
        "separate processes see on a shared 2-core machine); the verdict uses it. "
        "Every DP query spends ε = 1 on a frame protected once "
        "(untimed) with a large budget. Income column (float64, bounds [0, 250 000]); "
        "group-by keys are integer columns with k uniform public keys. "
        "`polars-lazy-parquet` reads the Parquet file inside every run (`scan_parquet`).",
        "",
        *frame_table(rows),
        "",
        "## Mechanisms",
        "",
        *micro_table(rows),
    ]
    if any(r["section"] == "peer" for r in rows):
        lines += [
            "",
            "## Peers (each in its own virtual environment, same numbers)",
            "",
            "dpframe / peer < 1 means dpframe is faster. OpenDP timings are per release on a "
            "context created once (its creation is listed separately); diffprivlib runs on "
            "the same income values as a numpy array.",
            "",
            *peer_table(rows),
        ]
    notes = meta.get("analysis")
    if notes:
        lines += ["", notes.strip()]
    if ablations:
        lines += _ablation_section(ablations)
    if profiles:
        lines += ["", "## Where the time goes (missed targets, cProfile)",
                  *_profile_section(profiles)]
    lines.append("")
    return "\n".join(lines)
