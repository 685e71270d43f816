"""What one run has started and must take down, whatever happens: its workspaces, its bridge,
its tools' servers, its flavor's services, and the tasks still working on them.

A run's resources are one object (``RunResources``), started ahead of the run's turn
(``Runner.start_ahead``: a batch does it while the run waits for its slot); the run
(``Runner.execute``) takes them over and ``close`` takes them down. A run that never began
(cancelled while it waited) has them ``discard``-ed instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from engine.interfaces import Flavor, Workspace
from engine.models import CapturedSubmission
from engine.run.bridges import BRIDGE_ROOT, bridge_prefix

if TYPE_CHECKING:
    from engine.capabilities.mcp_server import McpService

log = logging.getLogger(__name__)


@runtime_checkable
class Placed(Protocol):
    """A workspace whose start first waits for a place: a slot on one of a bounded set of hosts
    (``runtime.hosts``). Optional. A run takes its running slot only once its workspaces have
    their places (``RunResources.placed``): one that held a running slot while it waited for a
    host's slot, those slots held by runs started ahead that wait for running slots, would
    wait for ever (a listed host with fewer slots than the runs run at once)."""

    async def until_placed(self) -> None:
        """Returns once the workspace holds its place, or will never get one (closed)."""


@dataclass
class RunResources:
    """What a run has started and must take down, whatever happens."""

    bridge: str
    """The host side of the agent workspace's bridge (``new_bridge``): a host directory the
    agent's workspace sees read-only at BRIDGE_PATH, where the run's MCP server listens on a
    unix socket too, for agents working inside a workspace that has no network."""
    agent: Workspace | None = None
    agent_started: asyncio.Future[Workspace] | None = None
    """The agent's workspace and its start, until the run takes it (``Runner._agent_side``)."""
    grading: Workspace | None = None
    grading_started: asyncio.Future[Workspace] | None = None
    """The fresh grading workspace and its start: None until the run's workspaces start."""
    extra: list[tuple[Workspace, asyncio.Future[Workspace]]] = field(default_factory=list)
    """The further fresh grading workspaces of a ``GradesInMany`` flavor, with their starts."""
    flavor: Flavor | None = None
    """The flavor the workspaces were started for (the run goes on with the same one); None
    when it could not be made ahead: the run itself says why, in its plan phase."""
    untouched: CapturedSubmission | None = None
    """The agent works alone and its image's untouched capture is kept (engine/run/untouched.py):
    then it gets no workspace (``agent`` stays None), and this is its capture."""
    untouched_key: str | None = None
    """The key its untouched capture is kept under, where the agent works alone; None otherwise."""
    script_done: bool = False
    """The agent's workspace starts from its flavor's setup layer (``engine/plan/setup_layer.py``)."""
    set_up: asyncio.Future[float] | None = None
    """The task's setup in the agent's workspace, started as soon as it is up, until the run
    takes it; None for a flavor with per-run services, set up by the run itself."""
    preparing: asyncio.Future[None] | None = None
    preparing_extra: list[asyncio.Future[None]] = field(default_factory=list)
    """The grading workspaces' ``prepare_grading`` (None: not started yet)."""
    mcp: McpService | None = None
    """The run's tools' server, from the start of its pipeline."""
    uses: frozenset[str] = frozenset()
    """The capabilities the run's agent connects to (``capabilities_used``): only these are served."""
    ssh: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    services: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    """The flavor's per-run services (``RunServices``), closed after everything that may use them."""
    agent_closed: asyncio.Future[None] | None = None
    grading_removed: asyncio.Future[None] | None = None
    """The grading container's removal: started by ``close``, awaited beside the final store
    write (``Runner._finish``)."""
    handed_over: bool = False
    """Taken over by a run (``Runner.execute``), which then closes it; until then ``discard``
    takes it down."""

    @classmethod
    def with_new_bridge(cls) -> RunResources:
        return cls(bridge=new_bridge())

    async def close(self) -> None:
        """Take everything down; the grading container's removal is left running. Every part is
        closed even when closing another one failed: an exit stack runs each callback whatever
        the ones before it raised, cancellation included."""
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(shutil.rmtree, self.bridge, True)
            stack.push_async_callback(self.services.aclose)
            if self.mcp is not None:
                stack.push_async_callback(self.mcp.close)
            stack.push_async_callback(self.ssh.aclose)
            if self.agent_closed is not None:
                stack.push_async_callback(_finished, self.agent_closed)
            if self.agent is not None and self.agent_started is not None:  # never taken: the run failed first
                stack.push_async_callback(close_started, self.agent, self.agent_started)
            if self.set_up is not None:  # never taken: ended before the workspace goes
                stack.push_async_callback(cancel_and_wait, self.set_up)
            if self.grading_started is not None:
                stack.callback(self._start_grading_removal)
            if self.preparing is not None:  # first: its exec is killed before the container goes
                stack.push_async_callback(cancel_and_wait, self.preparing, *self.preparing_extra)

    def _start_grading_removal(self) -> None:
        assert self.grading_started is not None  # registered only once it is set
        assert self.grading is not None  # set together with its start
        removals = [(self.grading, self.grading_started), *self.extra]

        self.grading_removed = asyncio.ensure_future(
            _all_done(*(close_started(ws, started) for ws, started in removals))
        )

    def _starts(self) -> list[tuple[Workspace, asyncio.Future[Workspace]]]:
        """Each workspace started ahead, with its start (a workspace is set with its start)."""
        pairs = [(self.agent, self.agent_started), (self.grading, self.grading_started), *self.extra]
        return [(ws, starting) for ws, starting in pairs if ws is not None and starting is not None]

    async def placed(self) -> None:
        """Until each workspace started ahead holds its place (``Placed``), or its start has
        ended without one (failed, cancelled): that start's outcome is the run's to read."""
        for workspace, starting in self._starts():
            if isinstance(workspace, Placed) and not starting.done():
                waiting: asyncio.Future[Any] = asyncio.ensure_future(workspace.until_placed())
                try:
                    await asyncio.wait([waiting, starting], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiting.cancel()

    async def discard(self) -> None:
        """Take down what was started for a run that never began (a cancel while it waited);
        nothing once a run took it over."""
        if self.handed_over:
            return
        self.handed_over = True
        # All at once, and finished even through another cancel (a batch being torn down
        # cancels its waiting runs more than once).
        started = self._starts()

        async def close_all() -> list[None | BaseException]:
            await cancel_and_wait(self.set_up, self.preparing, *self.preparing_extra)  # before their containers go
            return await asyncio.gather(
                *(close_started(ws, starting) for ws, starting in started), return_exceptions=True
            )

        closing = asyncio.ensure_future(close_all())
        try:
            cancelled = await through_cancel(closing)
        finally:
            shutil.rmtree(self.bridge, True)
        for failed in closing.result():
            if isinstance(failed, BaseException):
                log.warning("could not remove a workspace started ahead: %s", failed)
        if cancelled:
            raise asyncio.CancelledError


def new_bridge() -> str:
    """A run's bridge directory on the host (``RunResources`` removes it). Short, under /tmp:
    socket paths are limited to 108 bytes."""
    bridge = tempfile.mkdtemp(prefix=bridge_prefix(), dir=str(BRIDGE_ROOT))
    os.chmod(bridge, 0o755)
    return bridge


async def close_started(workspace: Workspace, starting: asyncio.Future[Workspace]) -> None:
    """Close a workspace whose start may still be in flight (its start cleans up on cancel)."""
    if not starting.done():
        starting.cancel()
    try:
        await starting
    except BaseException:  # a start that failed or was cancelled removed its own container
        return
    await workspace.close()


async def cancel_and_wait(*futures: asyncio.Future[Any] | None) -> None:
    """Cancel what is still running among ``futures`` and wait until it has ended."""
    pending = [f for f in futures if f is not None and not f.done()]
    for fut in pending:
        fut.cancel()
    for fut in pending:
        with contextlib.suppress(BaseException):
            await fut


async def through_cancel(fut: asyncio.Future[Any] | None) -> bool:
    """Wait until ``fut`` has ended, even if we are cancelled meanwhile; whether we were."""
    cancelled = False
    while fut is not None and not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = cancelled or not fut.done()
        except Exception:
            pass  # read by the caller
    return cancelled


def failure(fut: asyncio.Future[Any] | None) -> BaseException | None:
    """How ``fut`` failed; None for one absent, cancelled or that succeeded."""
    if fut is None or fut.cancelled():
        return None
    return fut.exception()


async def _finished(fut: Awaitable[None]) -> None:
    await fut


async def _all_done(*closing: Awaitable[None]) -> None:
    """Wait for every one of ``closing``, each to its end, whatever the others did; then
    raise the first failure (a workspace left behind is an error, as for one workspace)."""
    outcomes = await asyncio.gather(*closing, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
