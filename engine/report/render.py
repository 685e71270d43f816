"""A ``Report`` as text: an aligned terminal table, Markdown, CSV or JSON.

Tables and Markdown are for people: compact cells ("2/3", "0.667 [0.21, 0.94] wilson"),
and columns that would be empty for every row (running, canceled, tokens, cost) left
out. CSV and JSON are for programs: every field, always, as numbers. CSV holds one
block per section, each after a ``# section`` line (``pandas.read_csv(comment="#")``
reads one block; ``--format json`` gives everything in one document).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.report.compute import Cell, Report
from engine.util.tables import format_float, format_table, to_csv

FORMATS = ("table", "markdown", "csv", "json")


def render(report: Report, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (one of {', '.join(FORMATS)})")
    sections = _display_sections(report) if fmt in ("table", "markdown") else _data_sections(report)
    if fmt == "json":
        document = {"filters": _filters(report), "ks": report.ks, "notes": report.notes}
        document.update({name: [dict(zip(cols, row, strict=True)) for row in rows] for name, _, cols, rows in sections})
        return json.dumps(document, indent=2, ensure_ascii=False)
    if fmt == "csv":
        return "\n".join(f"# {name}\n{to_csv(cols, rows)}" for name, _, cols, rows in sections)
    out = []
    for _, title, cols, rows in sections:
        if fmt == "table":
            out.append(f"{title}\n{format_table(cols, rows)}")
        else:
            out.append(f"## {title}\n\n{_markdown(cols, rows)}")
    bullet = "- " if fmt == "markdown" else "note: "
    if report.notes:
        out.append("\n".join(bullet + n for n in report.notes))
    return "\n\n".join(out)


Section = tuple[str, str, list[str], list[list[Any]]]


# ---------------------------------------------------------------- for people


def _display_sections(report: Report) -> list[Section]:
    sections: list[Section] = []
    if report.groups:
        sections.append(("summary", "By agent and model" + _filter_text(report), *_summary_display(report)))
    if report.matrix is not None and report.matrix.tasks:
        sections.append(
            ("matrix", "Tasks solved (solved/attempts; ! = an attempt errored or timed out)", *_matrix_display(report))
        )
    if report.comparison is not None:
        c = report.comparison
        sections.append(
            ("compare", f"Sweep {c.sweep_a} (a) vs {c.sweep_b} (b): tasks solved in any attempt", *_tallies(report))
        )
        cols = ["agent", "model", "task", "a", "b", "change"]
        rows = [[f.agent, f.model or "-", f.task_id, _fraction(f.a), _fraction(f.b), f.change] for f in c.flips]
        sections.append(("flips", "Tasks that flipped", cols, rows))
    return sections


def _summary_display(report: Report) -> tuple[list[str], list[list[Any]]]:
    groups = report.groups
    optional = {
        "running": any(g.running for g in groups),
        "canceled": any(g.canceled for g in groups),
        "infrastructure": any(g.infrastructure for g in groups),
        "spend": any(
            g.tokens_in is not None or g.tokens_out is not None or g.cost_usd is not None or g.unpriced_steps
            for g in groups
        ),
        "unpriced": any(g.unpriced_steps for g in groups),
    }
    cols = ["agent", "model", "runs", "attempts", "completed", "errors", "timeouts"]
    cols += [name for name in ("running", "canceled", "infrastructure") if optional[name]]
    cols += ["solved", "mean_reward", "95% interval"] + [f"pass@{k}" for k in report.ks] + ["median_s"]
    if optional["spend"]:
        cols += ["tokens_in", "tokens_out", "cost_usd"] + (["unpriced_steps"] if optional["unpriced"] else [])
    rows = []
    for g in groups:
        row = [g.agent, g.model or "-", g.runs, g.attempts, g.completed, g.errors, g.timeouts]
        row += [getattr(g, name) for name in ("running", "canceled", "infrastructure") if optional[name]]
        interval = (
            f"[{format_float(g.interval.low)}, {format_float(g.interval.high)}] {g.interval.method}"
            if g.interval
            else ""
        )
        row += [g.solved, g.mean_reward, interval] + [g.pass_at.get(k) for k in report.ks] + [g.median_wall_s]
        if optional["spend"]:
            row += [g.tokens_in, g.tokens_out, g.cost_usd] + ([g.unpriced_steps] if optional["unpriced"] else [])
        rows.append(row)
    return cols, rows


def _matrix_display(report: Report) -> tuple[list[str], list[list[Any]]]:
    m = report.matrix
    assert m is not None  # callers check
    cols = ["task"] + [_label(g) for g in m.groups]
    rows = [[task] + [_fraction(m.cells.get((task, g))) for g in m.groups] for task in m.tasks]
    totals = ["tasks solved"]
    for g in m.groups:
        attempted = [m.cells[(t, g)] for t in m.tasks if (t, g) in m.cells]
        totals.append(f"{sum(c.solved > 0 for c in attempted)}/{len(attempted)}")
    return cols, rows + [totals]


def _tallies(report: Report) -> tuple[list[str], list[list[Any]]]:
    assert report.comparison is not None  # callers check
    cols = ["agent", "model", "tasks", "solved_a", "solved_b", "gained", "lost", "only_a", "only_b"]
    rows = [
        [t.agent, t.model or "-", t.tasks, t.solved_a, t.solved_b, t.gained, t.lost, t.only_a, t.only_b]
        for t in report.comparison.tallies
    ]
    return cols, rows


def _fraction(cell: Cell | None) -> str:
    if cell is None:
        return ""
    return f"{cell.solved}/{cell.attempts}" + ("!" if cell.failed else "")


def _label(group: tuple[str, str]) -> str:
    return f"{group[0]}/{group[1]}" if group[1] else group[0]


def _filter_text(report: Report) -> str:
    parts = [f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in _filters(report).items()]
    return f" ({'; '.join(parts)})" if parts else ""


def _markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return ""
        text = format_float(float(value)) if isinstance(value, float) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "|".join(" --- " for _ in columns) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- for programs

SUMMARY_FIELDS = [
    "agent",
    "model",
    "runs",
    "running",
    "canceled",
    "infrastructure",
    "superseded",
    "attempts",
    "completed",
    "errors",
    "timeouts",
    "solved",
    "mean_reward",
    "ci95_low",
    "ci95_high",
    "ci_method",
]
SPEND_FIELDS = ["median_wall_s", "tokens_in", "tokens_out", "cost_usd", "unpriced_steps"]


def _data_sections(report: Report) -> list[Section]:
    sections: list[Section] = []
    if report.comparison is None:
        cols = SUMMARY_FIELDS + [f"pass@{k}" for k in report.ks] + SPEND_FIELDS
        rows = []
        for g in report.groups:
            iv = g.interval
            rows.append(
                [
                    g.agent,
                    g.model,
                    g.runs,
                    g.running,
                    g.canceled,
                    g.infrastructure,
                    g.superseded,
                    g.attempts,
                    g.completed,
                    g.errors,
                    g.timeouts,
                    g.solved,
                    g.mean_reward,
                    iv and iv.low,
                    iv and iv.high,
                    iv and iv.method,
                ]
                + [g.pass_at.get(k) for k in report.ks]
                + [g.median_wall_s, g.tokens_in, g.tokens_out, g.cost_usd, g.unpriced_steps]
            )
        sections.append(("summary", "", cols, rows))
        m = report.matrix
        cells = sorted(m.cells.items()) if m else []
        sections.append(
            (
                "matrix",
                "",
                ["task_id", "agent", "model", "solved", "attempts", "failed"],
                [[t, g[0], g[1], c.solved, c.attempts, c.failed] for (t, g), c in cells],
            )
        )
        return sections
    c = report.comparison
    cols, _ = _tallies(report)
    sections.append(
        (
            "compare",
            "",
            ["sweep_a", "sweep_b"] + cols,
            [
                [
                    c.sweep_a,
                    c.sweep_b,
                    t.agent,
                    t.model,
                    t.tasks,
                    t.solved_a,
                    t.solved_b,
                    t.gained,
                    t.lost,
                    t.only_a,
                    t.only_b,
                ]
                for t in c.tallies
            ],
        )
    )
    sections.append(
        (
            "flips",
            "",
            ["agent", "model", "task_id", "solved_a", "attempts_a", "solved_b", "attempts_b", "change"],
            [
                [f.agent, f.model, f.task_id, f.a.solved, f.a.attempts, f.b.solved, f.b.attempts, f.change]
                for f in c.flips
            ],
        )
    )
    return sections


def _filters(report: Report) -> dict[str, Any]:
    f = report.filters
    out: dict[str, Any] = {}
    for name, values in (("sweep", f.sweeps), ("agent", f.agents), ("model", f.models), ("task", f.tasks)):
        if values:
            out[name] = list(values)
    if f.since is not None:
        out["since"] = f.since.isoformat() + "Z"
    return out
