"""``crucible view --bundle DIR``: the viewer's pages written as a static site.

The same templates and the same reads as the server (``engine.view.pages``), with links that
are relative file names, so ``DIR/index.html`` opens from the file system with no server: the
runs table (newest first, paged), every run, every sweep, the side-by-side comparison of each
sweep with the one before it, and the builds. What only a server can do (filters, search, a
comparison of any two sweeps) is left off the bundle's pages rather than shown broken.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.view import pages, queries
from engine.view.queries import ReadStore, RunFilters


def write_bundle(store_path: Path, out: Path) -> int:
    """Write the site into ``out`` (made if missing); the number of pages written."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--bundle {out}: is a file, not a directory")
    store = ReadStore(store_path)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pages.STATIC, out / "static", dirs_exist_ok=True)
    writer = _Writer(out)
    _runs(store, writer)
    _sweeps(store, writer)
    first = queries.builds(store, 1)
    for number in range(1, first.pages + 1):
        depth = 0 if number == 1 else 1
        writer.page(pages.Urls(True, 0).builds(number), "builds.html", pages.builds_context(store, number), depth)
    return writer.count


class _Writer:
    def __init__(self, root: Path):
        self.root, self.count = root, 0

    def page(self, name: str, template: str, context: dict[str, Any], depth: int) -> None:
        self.text(name, pages.render(template, context, pages.Urls(static=True, depth=depth)))
        self.count += 1

    def text(self, name: str, text: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _runs(store: ReadStore, writer: _Writer) -> None:
    top = pages.Urls(static=True)
    first = queries.runs_page(store, RunFilters(), 1)
    for number in range(1, first.pages + 1):
        writer.page(
            top.runs(number), "runs.html", pages.runs_context(store, RunFilters(), number), 0 if number == 1 else 1
        )
    for (run_id,) in store.query("SELECT run_id FROM runs ORDER BY run_id")[1]:
        context = pages.run_context(store, run_id)
        writer.page(top.run(run_id), "run.html", context, 1)
        for step in context["steps"]:  # the whole of what the page shows cut
            for part in ("result", "arguments"):
                if (step[f"{part}_chars"] or 0) > queries.SHOWN_CHARS:
                    writer.text(
                        top.step(run_id, step["position"], part),
                        queries.step_text(store, run_id, step["position"], part) or "",
                    )
        if (context["run"]["diff_chars"] or 0) > queries.SHOWN_CHARS:
            writer.text(top.diff(run_id), queries.whole_diff(store, run_id) or "")


def _sweeps(store: ReadStore, writer: _Writer) -> None:
    top = pages.Urls(static=True)
    listing = pages.sweeps_context(store)
    writer.page(top.sweeps(), "sweeps.html", listing, 1)
    for sweep in listing["sweeps"]:
        writer.page(top.sweep(sweep["sweep_id"]), "sweep.html", pages.sweep_context(store, sweep["sweep_id"]), 1)
    for a, b in listing["pairs"]:
        writer.page(top.compare(a, b), "compare.html", pages.compare_context(store, a, b), 1)
