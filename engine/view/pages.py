"""The viewer's pages, as (template, context) pairs that the server and the static bundle share.

A page does not know where it is served from: its links come from a ``Urls``, which gives
server routes (``/runs/ID``) to the web app and relative file names (``../runs/ID.html``) to the
bundle, so ``crucible view --bundle`` writes the very pages the server shows.
The sweep pages get their numbers from ``engine.report.compute.build_report``, the code
behind ``crucible report``, so the viewer and the report never disagree.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from engine.errors import UserError
from engine.report.query import Filters
from engine.view import queries
from engine.view.queries import ReadStore, RunFilters, ViewError

if TYPE_CHECKING:
    import jinja2

    from engine.report.compute import Report

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")


def file_name(ident: str) -> str:
    """A run or sweep id as a file name in the bundle: kept when plain, else made plain and
    told apart by a short hash."""
    if re.fullmatch(r"[A-Za-z0-9._-]{1,100}", ident) and not ident.startswith("."):
        return ident
    return re.sub(r"[^A-Za-z0-9._-]", "_", ident)[:80] + "-" + hashlib.sha256(ident.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Urls:
    """Where a page's links lead: server routes, or (``static``) files relative to a page
    ``depth`` folders below the bundle's root."""

    static: bool = False
    depth: int = 0

    @property
    def _up(self) -> str:
        return "../" * self.depth

    def runs(self, page: int = 1, **filters: str) -> str:
        if self.static:
            return self._up + ("index.html" if page == 1 else f"runs/page-{page}.html")
        query = {**{k: v for k, v in filters.items() if v}, **({"page": str(page)} if page > 1 else {})}
        return "/runs" + (f"?{urlencode(query)}" if query else "")

    def run(self, run_id: str) -> str:
        return f"{self._up}runs/{file_name(run_id)}.html" if self.static else f"/runs/{quote(run_id, safe='')}"

    def step(self, run_id: str, position: int, part: str = "result") -> str:
        if self.static:
            return f"{self._up}runs/{file_name(run_id)}/step-{position}-{part}.txt"
        return f"/runs/{quote(run_id, safe='')}/steps/{position}/{part}"

    def diff(self, run_id: str) -> str:
        if self.static:
            return f"{self._up}runs/{file_name(run_id)}/diff.txt"
        return f"/runs/{quote(run_id, safe='')}/diff"

    def file(self, run_id: str, run_dir: str, relative: str) -> str:
        if self.static:  # the bundle opens from this file system: the run's own file
            return (Path(run_dir) / relative).as_uri()
        return f"/runs/{quote(run_id, safe='')}/files/{quote(relative)}"

    def sweeps(self) -> str:
        return self._up + "sweeps/index.html" if self.static else "/sweeps"

    def sweep(self, sweep_id: str) -> str:
        return f"{self._up}sweeps/{file_name(sweep_id)}.html" if self.static else f"/sweeps/{quote(sweep_id, safe='')}"

    def compare(self, a: str, b: str) -> str:
        if self.static:
            return f"{self._up}compare/{file_name(a)}__{file_name(b)}.html"
        return "/compare?" + urlencode({"a": a, "b": b})

    def builds(self, page: int = 1) -> str:
        if self.static:
            return self._up + ("builds.html" if page == 1 else f"builds/page-{page}.html")
        return "/builds" + (f"?page={page}" if page > 1 else "")

    def asset(self, name: str) -> str:
        return f"{self._up}static/{name}" if self.static else f"/static/{name}"


_ENV: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    """The Jinja2 environment (autoescaped), made on first use: ``crucible query`` never pays
    for Jinja2's import."""
    global _ENV
    if _ENV is None:
        import jinja2

        _ENV = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATES)),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        _ENV.filters["num"] = _num
        _ENV.filters["size"] = _size
    return _ENV


def render(template: str, context: dict[str, Any], urls: Urls) -> str:
    return environment().get_template(template).render(**context, u=urls)


# ---------------------------------------------------------------- the pages


def runs_context(store: ReadStore, filters: RunFilters, page: int) -> dict[str, Any]:
    return {
        "page": queries.runs_page(store, filters, page),
        "filters": filters,
        "choices": queries.filter_choices(store),
        "statuses": ("completed", "error", "timeout", "canceled", "running"),
    }


def run_context(store: ReadStore, run_id: str) -> dict[str, Any]:
    detail = queries.run_detail(store, run_id)
    if detail is None:
        raise ViewError(404, f"no run {run_id!r} in the store")
    spec = detail["run"]["spec"]
    task = spec.get("task") if isinstance(spec.get("task"), dict) else {}
    return {
        **detail,
        "prompt": task.get("prompt") or "",
        "pins": task.get("pins") or {},
        "shown_chars": queries.SHOWN_CHARS,
    }


def sweeps_context(store: ReadStore) -> dict[str, Any]:
    listed = queries.sweeps(store)
    ordered = list(reversed(listed))  # oldest first: each sweep beside the one after it
    return {"sweeps": listed, "pairs": [(a["sweep_id"], b["sweep_id"]) for a, b in zip(ordered, ordered[1:])]}


def sweep_context(store: ReadStore, sweep_id: str) -> dict[str, Any]:
    from engine.report.compute import build_report

    if not store.query(f"SELECT 1 FROM {queries.SWEEP_MEMBERS} WHERE sweep_id = ? LIMIT 1", [sweep_id])[1]:
        raise ViewError(404, f"no sweep {sweep_id!r} in the store")
    report = build_report(store, Filters(sweeps=(sweep_id,)))
    return {"sweep_id": sweep_id, "report": report, "plots": _plots(report), "others": queries.sweeps(store)}


def compare_context(store: ReadStore, a: str, b: str) -> dict[str, Any]:
    from engine.report.compute import build_report

    if not a or not b:
        raise ViewError(400, "compare: give two sweeps, as ?a=SWEEP&b=SWEEP")
    try:
        report = build_report(store, Filters(), compare=(a, b))
    except UserError as exc:
        raise ViewError(404, str(exc).replace("--compare ", "sweep ")) from exc
    return {"comparison": report.comparison, "notes": report.notes}


def builds_context(store: ReadStore, page: int) -> dict[str, Any]:
    return {"page": queries.builds(store, page)}


def _plots(report: Report) -> dict[str, str]:
    """The sweep's plots as inline SVG, drawn by ``engine.report.plots`` (matplotlib, imported
    only here)."""
    if not report.groups:
        return {}
    from engine.report import plots

    return {
        "pass rate per agent and model (95% intervals)": _inline(plots.pass_rate_plot(report, fmt="svg")),
        "cost against pass rate": _inline(plots.cost_plot(report, fmt="svg")),
    }


def _inline(svg: bytes) -> str:
    text = svg.decode()
    return text[text.find("<svg") :] if "<svg" in text else text


# ---------------------------------------------------------------- template filters


def _num(value: object, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    return f"{value:.{digits}f}"


def _size(value: float | None) -> str:
    if value is None:
        return "–"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)
