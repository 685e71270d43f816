"""Plots of a report: mean reward with its interval, cost against it, and stage times.

Each function returns the image as bytes (``fmt`` "svg" or "png"), so the CLI writes a file
and the web viewer inlines the same picture. matplotlib is imported here, lazily (the
callers import this module only when they plot), and drawn on a bare ``Figure`` with the
Agg canvas: no pyplot state, no display, safe in a server thread.

The bytes are deterministic for the same input: the SVG ids come from a fixed
``svg.hashsalt``, SVG text stays text (searchable, and what tests read), and no date or
software version is written in the metadata, so tests and bundles that hold a plot are stable.
"""

from __future__ import annotations

import functools
import io
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec

from engine.report.compute import GroupSummary, Report
from engine.report.query import Filters, Rows

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

FORMATS = ("svg", "png")
KINDS = ("pass_rate", "cost", "stages")
_RC: dict[RcKeyType, Any] = {"svg.hashsalt": "crucible", "svg.fonttype": "none", "font.size": 9.0, "figure.dpi": 100.0}
_METADATA: dict[str, dict[str, Any]] = {"svg": {"Date": None, "Creator": None}, "png": {"Software": None}}


_P = ParamSpec("_P")


def _styled(func: Callable[_P, bytes]) -> Callable[_P, bytes]:
    """Draw and save under ``_RC``: font size is read when text is made, hashsalt when saved."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> bytes:
        import matplotlib

        with matplotlib.rc_context(_RC):
            return func(*args, **kwargs)

    return wrapper


@_styled
def pass_rate_plot(report: Report, fmt: str = "svg") -> bytes:
    """Mean reward per (agent, model), with its 95% interval as an error bar.

    With 0/1 rewards the mean is the pass rate over completed attempts (the interval is
    Wilson's). A group without a completed attempt has no bar, and says so.
    """
    groups = report.groups
    fig = _figure(width=max(4.0, 1.0 + 0.9 * len(groups)), height=3.6)
    ax = fig.add_subplot()
    if not groups:
        _empty(ax, "no runs match these filters")
        return _save(fig, fmt)
    xs = range(len(groups))
    means = [g.mean_reward if g.mean_reward is not None else 0.0 for g in groups]
    low = [m - g.interval.low if g.interval else 0.0 for m, g in zip(means, groups)]
    high = [g.interval.high - m if g.interval else 0.0 for m, g in zip(means, groups)]
    ax.bar(xs, means, color="#4c72b0", yerr=[low, high], capsize=4, ecolor="#222222")
    for x, g in zip(xs, groups):
        text = "no completed\nattempt" if g.mean_reward is None else f"{g.solved}/{g.attempts}"
        ax.annotate(text, (x, 0.0), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=7)
    ax.set_xticks(list(xs), [_label(g) for g in groups], rotation=30, ha="right")
    ax.set_ylim(0.0, max(1.05, max((g.interval.high for g in groups if g.interval), default=0.0) + 0.05))
    ax.set_ylabel("mean reward (95% interval)")
    ax.set_title("Mean reward (solved/attempts)")
    return _save(fig, fmt)


@_styled
def cost_plot(report: Report, fmt: str = "svg") -> bytes:
    """Cost (USD, known prices only) against mean reward, one point per (agent, model).

    A group whose cost is unknown (no priced step) is not placed on the axes: its name is
    listed under the plot as having no known cost, never drawn at zero.
    """
    groups = report.groups
    fig = _figure(width=6.0, height=4.0)
    ax = fig.add_subplot()
    priced = [g for g in groups if g.cost_usd is not None and g.mean_reward is not None]
    unknown = [_label(g) for g in groups if g not in priced]
    if not priced:
        _empty(ax, "no runs match these filters" if not groups else "no cost is known for any agent and model")
    for g in priced:
        assert g.cost_usd is not None and g.mean_reward is not None
        err = [[g.mean_reward - g.interval.low], [g.interval.high - g.mean_reward]] if g.interval else None
        ax.errorbar([g.cost_usd], [g.mean_reward], yerr=err, fmt="o", capsize=3)
        ax.annotate(
            _label(g) + (" (partly unpriced)" if g.unpriced_steps else ""),
            (g.cost_usd, g.mean_reward),
            xytext=(5, 5),
            textcoords="offset points",
            fontsize=7,
        )
    if priced:
        ax.set_xlim(left=0.0, right=max(g.cost_usd or 0.0 for g in priced) * 1.25 or 1.0)
        ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("cost (USD, sum of known prices)" + ("\nno known cost: " + ", ".join(unknown) if unknown else ""))
    ax.set_ylabel("mean reward")
    ax.set_title("Cost against mean reward")
    return _save(fig, fmt)


@_styled
def stage_times_plot(timings: list[tuple[str, str, float]], fmt: str = "svg") -> bytes:
    """One horizontal bar per label, stacked by stage (in the order the stages first appear)."""
    labels: list[str] = []
    stages: list[str] = []
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    for label, stage, value in timings:
        labels += [label] if label not in labels else []
        stages += [stage] if stage not in stages else []
        seconds[(label, stage)] += float(value)
    fig = _figure(width=7.0, height=max(2.5, 1.2 + 0.4 * len(labels)))
    ax = fig.add_subplot()
    if not labels:
        _empty(ax, "no stage timings recorded")
        return _save(fig, fmt)
    ys = list(range(len(labels)))
    left = [0.0] * len(labels)
    colors = _colors(len(stages))
    for stage, color in zip(stages, colors):
        widths = [seconds.get((label, stage), 0.0) for label in labels]
        ax.barh(ys, widths, left=left, label=stage, color=color)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (stacked)")
    ax.set_title("Time per stage")
    fig.legend(fontsize=7, loc="outside lower center", ncols=min(len(stages), 6))
    return _save(fig, fmt)


PIPELINE = ("build", "provision", "setup_ahead", "setup", "agent", "capture", "grade", "teardown")
"""The stages in the order a run goes through them; a stage not named here comes after, by name."""

_STAGES_SQL = """
SELECT r.agent, coalesce(r.model, '') AS model, t.stage, avg(t.seconds) AS seconds
FROM stage_timings t JOIN runs r USING (run_id)
WHERE r.status = 'completed' AND {where}
GROUP BY r.agent, coalesce(r.model, ''), t.stage
"""


def load_stage_times(store: Rows, filters: Filters) -> list[tuple[str, str, float]]:
    """Mean seconds per stage of the completed runs ``filters`` select, per (agent, model),
    stages in pipeline order."""
    _, rows = store.query(_STAGES_SQL.format(where=filters.where()))
    rank = {stage: i for i, stage in enumerate(PIPELINE)}
    rows = sorted(rows, key=lambda r: (r[0], r[1], rank.get(r[2], len(PIPELINE)), r[2]))
    return [(f"{agent} / {model or '-'}", stage, float(seconds)) for agent, model, stage, seconds in rows]


def plot(kind: str, report: Report, timings: list[tuple[str, str, float]], fmt: str) -> bytes:
    """The ``crucible report --plot-kind`` picture."""
    if kind == "pass_rate":
        return pass_rate_plot(report, fmt)
    if kind == "cost":
        return cost_plot(report, fmt)
    return stage_times_plot(timings, fmt)


# ---------------------------------------------------------------- helpers


def _label(g: GroupSummary) -> str:
    return f"{g.agent} / {g.model or '-'}"


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _colors(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _save(fig: Figure, fmt: str) -> bytes:
    """The figure as ``fmt`` bytes, with the deterministic settings (module doc)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown plot format {fmt!r} (one of {', '.join(FORMATS)})")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, metadata=_METADATA[fmt])
    return buffer.getvalue()
