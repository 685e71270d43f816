"""Serve an env's tools as a real MCP server: the run's ``mcp`` capability.

The official ``mcp`` SDK's low-level ``Server`` (list_tools / call_tool) behind its
streamable-HTTP session manager, in a Starlette app run by uvicorn inside the caller's
event loop. One server per run, bound to 127.0.0.1 on an ephemeral port (we bind the
socket ourselves, so there is no race for the port) or to a unix socket (``uds=``, for
coding CLIs inside a container: bind-mount the socket, no network needed). Every request
must carry ``Authorization: Bearer <token>``, the per-run token (others get 401), and a
foreign ``Host`` or ``Origin`` gets 403 (engine/capabilities/mcp_guard.py).

A tool call whose request carries a progress token gets a progress notification every
``ServeOptions.progress_every`` seconds while it runs, so a client that resets its timeout
on progress waits as long as the call takes. A client's ``notifications/cancelled`` cancels
the call (the SDK cancels its handler), which kills the command in the workspace. Leaving the
block answers every call still in flight ("cancelled: the server is shutting down", its
command killed), ends every session's streams, then stops uvicorn: ~0.2 s, and nothing
printed.

    async with serve_mcp(tools, token=token) as url:
        ...  # agents connect to url with the token

``McpService`` runs the same server in a task of its own, so that a run can start it while
its workspace is still being provisioned and stop it while the next phase already runs
(uvicorn notices a stop request on a 0.1 s tick and then drains: ~0.15 s measured).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import mcp.types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Mount

from engine.capabilities.call_journal import CallJournal
from engine.capabilities.mcp_calls import InFlight, end_sessions, report_progress
from engine.capabilities.mcp_guard import RequestGuard
from engine.capabilities.serving import SERVE_OPTIONS, bind_tcp
from engine.errors import AgentError
from engine.models import Step

MCP_PATH = "/mcp"
MCP_SOCKET = "mcp.sock"
"""The server's unix socket in a workspace's bridge (``BRIDGE_PATH``): HTTP, path ``/mcp/``, the
run's bearer token, for agents working inside a workspace without a network."""
SHUTDOWN_GRACE = 1  # seconds; an int, as uvicorn types timeout_graceful_shutdown
"""What uvicorn gives connections still open once every session was ended (none, normally)."""
STARTUP_TIMEOUT = 10.0


log = logging.getLogger(__name__)


class _DropClosedStreamNoise(logging.Filter):
    """The SDK logs a traceback ("Error in standalone SSE writer") whenever a client ends its
    session while its GET stream is open: a normal disconnect, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (type(exc).__name__ == "ClosedResourceError" and "standalone SSE" in record.getMessage())


logging.getLogger("mcp.server.streamable_http").addFilter(_DropClosedStreamNoise())


class ToolProvider(Protocol):
    def specs(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]: ...


def build_server(
    tools: ToolProvider,
    name: str = "crucible",
    *,
    in_flight: InFlight | None = None,
    progress_every: float | None = None,
) -> Server:
    """The low-level MCP server exposing ``tools``; its calls tracked in ``in_flight``, each
    reporting progress every ``progress_every`` seconds when the client asked for it."""
    server: Server = Server(name)
    calls = in_flight if in_flight is not None else InFlight()
    every = progress_every if progress_every is not None else SERVE_OPTIONS.get().progress_every
    validators = _InputValidators()

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]  # the SDK leaves its decorators unannotated
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=s["name"], description=s.get("description", ""), inputSchema=s["inputSchema"])
            for s in tools.specs()
        ]

    # The SDK's own input check (jsonschema.validate) checks the tool's schema against its
    # meta-schema on every call (~1.2 ms); the same check, its validator made once per schema.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]  # the SDK leaves its decorators unannotated
    async def call_tool(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        invalid = validators.error(tool, tools, arguments)
        if invalid is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=invalid)], isError=True)
        ctx = server.request_context
        token = ctx.meta.progressToken if ctx.meta is not None else None
        ticker = (
            asyncio.ensure_future(report_progress(ctx.session, token, ctx.request_id, every))
            if token is not None and every > 0
            else None
        )
        try:
            text, is_error = await calls.run(tools.call(tool, dict(arguments or {})))
        finally:
            if ticker is not None:
                ticker.cancel()
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=is_error)

    return server


_VALIDATORS: dict[str, Any] = {}
"""Each input schema's validator by the schema's canonical text, made (and the schema checked
against its metaschema: ~3 ms) once a process. A run's server is new, its tools' schemas are
the same in every run of a sweep."""


class _InputValidators:
    """A tool call's arguments checked against its input schema as the SDK checks them (the
    schema's own draft, the best-matching error as "Input validation error: ..."), with each
    schema's validator made, and the schema checked, once a process (``_VALIDATORS``)."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[dict[str, Any], Any]] = {}

    def error(self, tool: str, tools: ToolProvider, arguments: dict[str, Any]) -> str | None:
        import jsonschema  # type: ignore[import-untyped]  # the SDK's own dependency; no stubs here

        schema = next((s["inputSchema"] for s in tools.specs() if s["name"] == tool), None)
        if schema is None:
            return None  # not a tool: the call itself says so
        made = self._made.get(tool)
        if made is None or made[0] != schema:
            text = json.dumps(schema, sort_keys=True)
            validator = _VALIDATORS.get(text)
            if validator is None:
                validator_class = jsonschema.validators.validator_for(schema)
                validator_class.check_schema(schema)
                validator = _VALIDATORS[text] = validator_class(schema)
            made = self._made[tool] = (schema, validator)
        error = jsonschema.exceptions.best_match(made[1].iter_errors(arguments))
        return None if error is None else f"Input validation error: {error.message}"


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the engine, not one run's server, owns Ctrl-C."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(uds: str | None, host: str = "127.0.0.1") -> tuple[socket.socket, str]:
    if uds is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(uds)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(uds)
        os.chmod(uds, 0o666)  # the token, not file permissions, is the gate (uids differ in containers)
        return sock, f"http://localhost{MCP_PATH}/"
    try:
        sock = bind_tcp(host)
    except OSError as exc:
        raise AgentError(f"the MCP server cannot listen on {host}: {exc}") from exc
    shown = f"[{host}]" if ":" in host else host
    return sock, f"http://{shown}:{sock.getsockname()[1]}{MCP_PATH}/"


@contextlib.asynccontextmanager
async def serve_mcp(
    tools: ToolProvider, *, token: str, name: str = "crucible", uds: str | None = None, also_uds: str | None = None
) -> AsyncIterator[str]:
    """Serve ``tools`` until the block exits; yields the URL (with ``uds``, reach it over that
    socket). ``also_uds``: the same server listens on that unix socket too (a workspace's
    bridge: agents inside a workspace without a network reach it there)."""
    options = SERVE_OPTIONS.get()
    in_flight = InFlight()
    manager = StreamableHTTPSessionManager(
        app=build_server(tools, name, in_flight=in_flight), session_idle_timeout=None
    )
    app = Starlette(routes=[Mount(MCP_PATH, app=manager.handle_request)])
    sock, url = _bind(uds, options.host)
    sockets = [sock] + ([_bind(also_uds)[0]] if also_uds else [])
    port = None if uds is not None else sock.getsockname()[1]
    guard = RequestGuard(
        app,
        token,
        bound="localhost" if uds is not None else options.host,
        port=port,
        allowed_origins=options.allowed_origins,
    )
    config = uvicorn.Config(
        guard,
        lifespan="off",
        # MCP's streamable HTTP is plain HTTP: uvicorn's websocket protocol ("auto") is never
        # used, and importing it (wsproto) costs every run ~0.06 s
        ws="none",
        log_level="warning",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
        access_log=False,
    )
    server = _QuietServer(config)
    try:
        async with manager.run():
            task = asyncio.create_task(server.serve(sockets=sockets), name=f"mcp-server-{name}")
            try:
                await _until_started(server, task)
                yield url
            finally:
                await end_sessions(manager, in_flight)
                await _stop(server, task)
    finally:
        for each in sockets:
            each.close()
        for path in (uds, also_uds):
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


async def _stop(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    """Ask uvicorn to stop (it gives open streams SHUTDOWN_GRACE), then insist: a server slow
    to stop must not turn a finished run into a timeout."""
    server.should_exit = True
    try:
        done, _ = await asyncio.wait({task}, timeout=SHUTDOWN_GRACE + 5)
    except asyncio.CancelledError:
        task.cancel()  # cancelled while stopping: leave no server behind
        raise
    if not done:
        log.warning("MCP server did not stop within %.0f s; cancelling it", SHUTDOWN_GRACE + 5)
        server.force_exit = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return
    task.result()  # an error the server stopped with is an error of the run


async def _until_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_TIMEOUT
    while not server.started:
        if task.done():
            try:
                task.result()
            except Exception as exc:
                raise AgentError(f"the MCP server failed to start: {exc}") from exc
            raise AgentError("the MCP server stopped before it started")
        if loop.time() > deadline:
            raise AgentError(f"the MCP server did not start within {STARTUP_TIMEOUT:g} s")
        await asyncio.sleep(0.01)


class McpService:
    """``serve_mcp`` in a background task: started early, told its tools later, stopped in the
    background. The SDK's task groups must be entered and left by one task, hence the task.

        service = McpService(token=token)
        service.start()                  # before the workspace exists
        url = await service.serve(tools)  # binds the tools, waits until it listens
        ...
        await service.stop()             # at once, unless a tool call is still running
        await service.close()            # always, before the run ends (idempotent)
    """

    def __init__(
        self, *, token: str, name: str = "crucible", uds: str | None = None, also_uds: str | None = None
    ) -> None:
        self.token, self.name, self.uds, self.also_uds = token, name, uds, also_uds
        self._tools = _LateTools()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._url: asyncio.Future[str] | None = None

    def start(self) -> None:
        if self._task is None:
            self._url = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._serve(), name=f"mcp-service-{self.name}")

    async def serve(self, tools: ToolProvider, *, ready: asyncio.Future[Any] | None = None) -> str:
        """Bind ``tools`` and return the URL once the server listens. With ``ready``, a tool call
        waits until that future is done, and fails if it failed (the workspace is being set up
        while an agent connects). Raises ``AgentError``."""
        self._tools.bound, self._tools.ready = tools, ready
        self.start()
        assert self._task is not None and self._url is not None
        either: set[asyncio.Future[Any]] = {self._task, self._url}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not self._url.done():
            self._task.result()  # the server's own error (AgentError from serve_mcp)
            raise AgentError("the MCP server stopped before it started")
        return self._url.result()

    def calls(self) -> list[Step]:
        """The tool calls served so far, those still running among them (``CallJournal``)."""
        return self._tools.journal.steps()

    async def stop(self) -> None:
        """Refuse further tool calls and ask the server to stop. Returns at once, the server
        draining in the background, unless a tool call is still running: then it waits until
        the server is gone (its shutdown cancels the call), so nothing acts on the workspace
        after this returns."""
        self._tools.closed = True
        self._stop.set()
        if self._tools.running:
            await self.close()

    async def close(self) -> None:
        """Stop the server and wait until it is gone, even if our caller is cancelled meanwhile.
        Raises what the server stopped with; a failed start was already ``serve``'s to report."""
        self._stop.set()
        if self._task is None:
            return
        cancelled = False
        while not self._task.done():
            try:
                await asyncio.shield(self._task)
            except asyncio.CancelledError:
                cancelled = cancelled or not self._task.done()  # we were cancelled, not the server
            except Exception:
                pass  # the server's error: read below
        if cancelled:
            raise asyncio.CancelledError
        error = None if self._task.cancelled() else self._task.exception()
        if error is not None and self._url is not None and self._url.done():
            raise error

    async def _serve(self) -> None:
        async with serve_mcp(
            self._tools, token=self.token, name=self.name, uds=self.uds, also_uds=self.also_uds
        ) as url:
            assert self._url is not None
            self._url.set_result(url)
            await self._stop.wait()


class _LateTools:
    """A service's tools: bound once the workspace exists (after the server started), usable
    once it is ready, closed when the agent's turn is over; counts the calls running."""

    def __init__(self) -> None:
        self.bound: ToolProvider | None = None
        self.ready: asyncio.Future[Any] | None = None
        self.closed = False
        self.running = 0
        self.journal = CallJournal()

    def specs(self) -> list[dict[str, Any]]:
        return self.bound.specs() if self.bound is not None else []

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        if self.bound is None or self.closed:
            return "Error: the task's tools are not available now (the agent's turn is not on)", True
        self.running += 1
        started = self.journal.started(name, arguments)
        try:
            if self.ready is not None:
                try:
                    await asyncio.shield(self.ready)
                except asyncio.CancelledError:
                    if not self.ready.cancelled():
                        raise  # this call was cancelled, not the setup
                    return "Error: the workspace could not be set up; no tool can run", True
                except Exception:
                    return "Error: the workspace could not be set up; no tool can run", True
            text, is_error = await self.bound.call(name, arguments)
            self.journal.ended(started, text, is_error)
            return text, is_error
        finally:
            self.journal.forget(started)
            self.running -= 1
