"""``crucible view``'s web app: Starlette routes over ``engine.view.pages``, served by uvicorn.

Every request opens the store read-only for as long as its page's reads take
(``engine.view.queries``), so the viewer never blocks a sweep and shows its runs as they land.
Routes are plain functions: Starlette runs them in its thread pool, and the store's own
process lock serialises their DuckDB turns. A request the viewer cannot answer gets a small
page with one line and the status that says why (400 bad input, 404 unknown id, 503 store busy).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from engine.errors import StoreError, UserError
from engine.view import pages, queries
from engine.view.queries import ReadStore, RunFilters, ViewError

URLS = pages.Urls()


def create_app(store_path: Path, read_timeout: float = queries.READ_TIMEOUT_S) -> Starlette:  # noqa: C901 (one route per page)
    """The viewer over the store file at ``store_path`` (which must exist); a page waits up to
    ``read_timeout`` for its turn while a writer holds the store, then answers 503."""
    store = ReadStore(store_path, read_timeout)

    def page(template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
        return HTMLResponse(pages.render(template, context, URLS), status_code=status)

    def runs(request: Request) -> Response:
        filters = RunFilters.from_params(request.query_params)
        number = queries.parse_page(request.query_params.get("page"))
        return page("runs.html", pages.runs_context(store, filters, number))

    def run(request: Request) -> Response:
        return page("run.html", pages.run_context(store, request.path_params["run_id"]))

    def step(request: Request) -> Response:
        run_id, part = request.path_params["run_id"], request.path_params["part"]
        if part not in ("result", "arguments"):
            raise ViewError(404, f"a step has a result and arguments, not {part!r}")
        text = queries.step_text(store, run_id, request.path_params["position"], part)
        if text is None:
            raise ViewError(404, f"no step {request.path_params['position']} in run {run_id!r}")
        return PlainTextResponse(text)

    def diff(request: Request) -> Response:
        text = queries.whole_diff(store, request.path_params["run_id"])
        if text is None:
            raise ViewError(404, f"no run {request.path_params['run_id']!r} in the store")
        return PlainTextResponse(text)

    def run_file(request: Request) -> Response:
        return FileResponse(_run_file(store, request.path_params["run_id"], request.path_params["path"]))

    def sweeps(request: Request) -> Response:
        return page("sweeps.html", pages.sweeps_context(store))

    def sweep(request: Request) -> Response:
        return page("sweep.html", pages.sweep_context(store, request.path_params["sweep_id"]))

    def compare(request: Request) -> Response:
        params = request.query_params
        return page("compare.html", pages.compare_context(store, params.get("a", ""), params.get("b", "")))

    def builds(request: Request) -> Response:
        return page("builds.html", pages.builds_context(store, queries.parse_page(request.query_params.get("page"))))

    def refused(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ViewError):
            status, line = exc.status, str(exc)
        elif isinstance(exc, HTTPException):
            status, line = exc.status_code, f"{request.url.path}: {exc.detail}"
        else:  # StoreError: the store stayed locked past the read timeout
            status, line = 503, f"the store is busy ({exc}); reload in a moment"
        return page("error.html", {"status": status, "line": line}, status)

    routes = [
        Route("/", lambda request: RedirectResponse("/runs")),
        Route("/runs", runs),
        Route("/runs/{run_id}", run),
        Route("/runs/{run_id}/steps/{position:int}/{part}", step),
        Route("/runs/{run_id}/diff", diff),
        Route("/runs/{run_id}/files/{path:path}", run_file),
        Route("/sweeps", sweeps),
        Route("/sweeps/{sweep_id}", sweep),
        Route("/compare", compare),
        Route("/builds", builds),
        Mount("/static", app=StaticFiles(directory=str(pages.STATIC)), name="static"),
    ]
    handlers = {ViewError: refused, StoreError: refused, HTTPException: refused}
    return Starlette(routes=routes, exception_handlers=handlers)


def _run_file(store: ReadStore, run_id: str, relative: str) -> Path:
    """A file of the run's directory; never one outside it (``..``, a link leading out)."""
    _, rows = store.query("SELECT run_dir FROM runs WHERE run_id = ?", [run_id])
    if not rows:
        raise ViewError(404, f"no run {run_id!r} in the store")
    if not rows[0][0] or not os.path.isdir(rows[0][0]):
        raise ViewError(404, f"run {run_id}: its directory is not on this machine")
    root = Path(rows[0][0]).resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise ViewError(404, f"run {run_id}: no file {relative!r} in its directory")
    return target


def serve(store_path: Path, host: str, port: int) -> None:
    """Serve until Ctrl-C, printing the URL once the socket is bound (``port`` 0: a free one)."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from exc
    sock.listen(2048)  # before the URL is printed: a client that reads it connects at once
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"crucible view: serving {store_path} at http://{shown}:{bound}/ (Ctrl-C ends it)", flush=True)
    config = uvicorn.Config(create_app(store_path), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shut down on Ctrl-C, then raised it again: the end asked for
        pass
    finally:
        sock.close()
    print("crucible view: stopped", flush=True)
