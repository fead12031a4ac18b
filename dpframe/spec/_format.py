"""The dry run's report as text (``dpframe release spec.toml --dry-run``): the plan of
:func:`dpframe.spec._plan.plan_release`, query by query — its measurements (ε, Δ, domain,
scale, ± of each noisy number), the ± of every answer (the API's accuracy planner), and the
numbers released exactly at no ε (the public n)."""

from __future__ import annotations

import math

from dpframe.spec._plan import SAMPLE_N, QueryPlan, ReleasePlan, _num

__all__ = ["format_plan"]


def _interval(lo: float | None, hi: float | None) -> str:
    left = "(" if lo is not None and math.isinf(lo) else "["
    right = ")" if hi is not None and math.isinf(hi) else "]"
    return f"{left}{_num(lo)}, {_num(hi)}{right}"


def _header(plan: ReleasePlan) -> list[str]:
    s, f = plan.spec, plan.facts
    neighbours = ("adding or removing one row (n private)" if s.neighbours == "add_remove"
                  else "replacing one row")
    lines = [
        "dpframe release plan (dry run: no data was read)",
        f"  spec      {s.source}",
        f"  input     {s.input.path}  ({s.input.format}, {len(f.files)} file"
        f"{'' if len(f.files) == 1 else 's'}, engine {s.input.engine})",
        f"  rows n    {f'{f.n:,}' if f.n is not None else 'unknown'}  ({f.n_source})"
        + ("; the releases treat it as private (add/remove) and plan with max_rows"
           if s.neighbours == "add_remove" else ""),
        f"  unit      one {s.unit}: neighbouring data sets differ by {neighbours}"
        + ("" if s.max_rows is None else f"; public bound max_rows = {s.max_rows:,}"),
        f"  budget    data set total ε = {s.epsilon:g}, δ = {s.delta:g}; durable ledger "
        f"{s.ledger}",
        f"  this run  ε = {s.run_epsilon:g}, δ = {s.run_delta:g}, split by the queries' "
        "shares (δ only to queries using the 'bounded' or 'auto' mechanism)",
        f"  output    {s.output}",
        f"  accuracy  ±{100 * (1 - plan.alpha):g}% = half-width h with P(|release − true| ≤ h)"
        f" ≥ {1 - plan.alpha:g}; {plan.accuracy_method}",
    ]
    if s.derived:
        lines.append("  derived   " + "; ".join(
            f"{d.name} = {d.expr}" + ("" if d.bounds is None else
                                      f" in [{d.bounds[0]:g}, {d.bounds[1]:g}]")
            for d in s.derived) + " (frame.dp.with_columns)")
    if f.n is None:
        sizes = " | ".join(f"{n:,}" for n in SAMPLE_N)
        lines += ["            n is unknown, so quantities that depend on it are shown as "
                  "formulas in n (pass --rows N to evaluate them at an assumed n),",
                  f"            read off the library's plans at n = {sizes}: ≈ where they "
                  "agree to 0.1% (the value at the largest n), a | b | c where no formula "
                  "fits"]
    return lines


def _title(q: QueryPlan, neighbours: str | None = None) -> str:
    """The query's header line; a group-by spends ε/2 per group under replace-one neighbours
    (a replaced row can move between two groups) and ε per group under add/remove."""
    extra = []
    if q.group_by is not None:
        assert q.keys is not None or not isinstance(q.group_by, str)
        columns = q.group_by if isinstance(q.group_by, str) else ", ".join(q.group_by)
        count = (f"{len(q.keys)} public keys" if q.keys is not None
                 else "every combination of their [keys]")
        share = "ε per group" if neighbours == "add_remove" else "ε/2 per group"
        extra.append(f"group_by {columns} ({count}: {share})")
    if q.filter is not None:
        extra.append(f"filter {q.filter}")
    if q.ci is not None:
        extra.append(f"intervals at level {q.ci:g} (lower/upper in the output)")
    how = (f"target accuracies at level {q.measurements[0].level:g}" if q.targeted
           and q.measurements else f"share {q.share:g}")
    return (f"query {q.name!r}: {how} → ε = {q.epsilon:.6g}, δ = {q.delta:.3g}, mechanism "
            f"{q.mechanism}" + ("; " + "; ".join(extra) if extra else ""))


def _measurement_table(q: QueryPlan) -> list[str]:
    header = ("statistic", "part", "size", "ε", "ε mech", "δ", "Δ", "domain", "scale", "±95%")
    rows = []
    for m in q.measurements:
        what = f"{m.statistic} = {m.call or m.kind}"
        if m.formula is not None:
            rows.append((what, m.part, m.size, f"{m.epsilon:.4g}",
                         f"{m.mechanism_epsilon:.4g}", f"{m.delta:.3g}", m.formula, "", "", ""))
            continue
        rows.append((what, m.part, m.size, f"{m.epsilon:.4g}", f"{m.mechanism_epsilon:.4g}",
                     f"{m.delta:.3g}", _num(m.sensitivity), _interval(m.lower, m.upper),
                     _num(m.scale), _num(m.half_width)))
    if not rows:
        return []
    # a formula (n unknown, or a domain set by earlier noisy values) spans the last four
    # columns; they are aligned over the other rows
    numeric = [r for r in rows if r[7:] != ("", "", "")] or [header]
    widths = [max(len(h), *(len(r[i]) for r in (rows if i < 6 else numeric)))
              for i, h in enumerate(header)]
    if all(m.formula is not None for m in q.measurements):
        widths[6:] = [0, 0, 0, 0]
        header = (*header[:6], "Δ, domain, scale, ±95% (formulas in n)", "", "", "")
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in (header, *rows)]


def _answer_lines(q: QueryPlan, n: int | None) -> list[str]:
    """The ± of every answer (and the notes where it is not one number), then the answers
    released exactly at no ε."""
    lines = []
    free = set(q.free)
    shown = [a for a in q.answers if a.statistic not in free]
    if shown:
        lines.append("  answers (±95%, the API's accuracy planner: frame.dp.accuracy):")
        width = max(len(a.statistic) for a in shown)
        for a in shown:
            if a.shown == "-":  # (a quantile's values: the planner's note says what it knows)
                text = a.note
            elif "N ≥" in a.shown:
                text = f"±{a.shown} (a private size N: declare min_rows = ... for one ±)"
            else:
                text = f"±{a.shown}"
            lines.append(f"    {a.statistic.ljust(width)}  {text}")
    for name in q.free:
        value = f"{n:,}" if n is not None else "counted by the run"
        lines.append(f"  free: {name} = the public n = {value} (released exactly, at no ε)")
    return lines


def format_plan(plan: ReleasePlan) -> str:
    """The dry run's report, as text."""
    s, f = plan.spec, plan.facts
    lines = _header(plan)
    for q in plan.queries:
        lines += ["", _title(q, s.neighbours), *_measurement_table(q), *_answer_lines(q, f.n)]
        for m in q.measurements:
            if m.target is not None:
                reached = ("" if m.target_half_width is None else
                           f": reaches ±{_num(m.target_half_width)} at ε = {m.epsilon:.4g}")
                lines.append(f"  target {m.statistic}: ±{m.target:g} with probability ≥ "
                             f"{m.level:g}{reached}")
    total = math.fsum(q.epsilon for q in plan.queries)
    free = [f"{q.name}: {name}" for q in plan.queries for name in q.free]
    if free:
        lines += ["", f"free public n (released at no ε): {', '.join(free)}"
                  + ("" if f.n is None else f" = {f.n:,}")]
    lines += ["", f"total: ε = {total:.6g} of this run's {s.run_epsilon:g}"
              + ("" if total >= s.run_epsilon * (1 - 1e-9) else " (the rest stays unspent: "
                 "every query has a target accuracy)") + "; Δ and the domain "
              "are in the mechanism's coordinates (public-size sums and means are released "
              "shifted by the lower bound); ε mech = the ε each group's mechanism gets "
              "(ungrouped histograms and key counts: each cell's)."]
    return "\n".join(lines)
