"""The agent's side of a run, between its workspace's start and the capture: the task set up
while the agent already starts (it connects and lists the tools meanwhile), the tools served
over MCP and ssh/2, and the agent's turn bounded by its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from engine.agents import AgentContext, AgentOutcome
from engine.interfaces import Agent, Flavor, RecordsServedCalls, SetsUpInImage, TerminalSink, Workspace
from engine.models import RunSpec
from engine.run.resources import cancel_and_wait
from engine.util.aio import within

if TYPE_CHECKING:
    from engine.capabilities.mcp_server import McpService

T = TypeVar("T")


async def setup_beside_agent(
    flavor: Flavor,
    agent: Agent,
    ws: Workspace,
    spec: RunSpec,
    mcp: McpService | None,
    ssh: contextlib.AsyncExitStack,
    bridge_host: str | None = None,
    terminals: TerminalSink | None = None,
    set_up: asyncio.Future[float] | None = None,
    *,
    serve_ssh: bool = True,
    script_done: bool = False,
    alone: bool = False,
) -> asyncio.Future[AgentOutcome]:
    """Set the task up while the agent already starts: it connects and lists the tools (a model
    takes its first turn) meanwhile, and a tool call waits until setup is done. Returns the
    agent's running ``run`` once setup succeeded; a failed setup takes the agent down with it.
    ``set_up``: the setup already under way (or done) since the run waited for its slot.
    ``mcp`` None / ``serve_ssh`` False: the agent connects to neither, so neither is served.
    ``script_done``: the workspace started from its flavor's setup layer (``flavor_setup``).
    ``alone``: an agent that works alone (engine/run/untouched.py) is never handed the workspace."""
    tools = flavor.tools(ws, spec)
    keep_spare = getattr(ws, "keep_spare_exec", None)  # a runtime that starts an exec ahead (docker: spares.py)
    if mcp is not None and keep_spare is not None:  # each tool call an exec as the tools' user, in their directory
        keep_spare(user=tools.user, cwd=tools.workdir)
    # An outside agent records no steps itself: the servers record them for it.
    observed = agent if isinstance(agent, RecordsServedCalls) else None
    setup: asyncio.Future[Any] = (
        set_up
        if set_up is not None
        else asyncio.ensure_future(within(flavor_setup(flavor, ws, spec, script_done), spec.timeouts.setup))
    )
    agent_run: asyncio.Future[AgentOutcome] | None = None
    try:
        capabilities: dict[str, str] = {}
        auth: dict[str, str] = {}
        if mcp is not None:
            from engine.capabilities.mcp_server import MCP_SOCKET

            capabilities["mcp"] = await mcp.serve(observed.served_tools(tools) if observed else tools, ready=setup)
            auth["mcp"] = auth["mcp_socket"] = mcp.token
            if ws.bridge is not None:  # the same MCP server, from inside the workspace, with no network
                capabilities["mcp_socket"] = f"{ws.bridge}/{MCP_SOCKET}"
        if serve_ssh:
            # Imported in a thread (asyncssh: ~0.3 s), not on the loop every run shares.
            await asyncio.to_thread(importlib.import_module, "engine.capabilities.ssh_server")
            from engine.capabilities.ssh_server import serve_ssh as ssh_server

            # ssh/2 onto the same workspace shell, as the same uid as the bash tool; its per-run
            # key is handed to the engine-side agent only, never into the workspace.
            endpoint = await ssh.enter_async_context(
                ssh_server(
                    ws,
                    user=tools.user,
                    cwd=tools.workdir,
                    ready=setup,
                    on_step=observed.record_step if observed else None,
                )
            )
            capabilities["ssh"], auth["ssh"] = endpoint.url, endpoint.credential()
        ctx = AgentContext(
            spec=spec,
            capabilities=capabilities,
            capability_auth=auth,
            validation=spec.task.validation or [],
            prompt=spec.task.prompt,
            workspace=None if alone else ws,
            uid=tools.user,
            workdir=tools.workdir,
            bridge_host=bridge_host if ws.bridge is not None and not alone else None,
            setup_done=marked_seen(asyncio.shield(setup)),
            terminals=terminals,
        )
        agent_run = asyncio.ensure_future(agent.run(ctx))
        await setup
        return agent_run
    except BaseException:
        await cancel_and_wait(setup, agent_run)
        raise


def marked_seen(fut: asyncio.Future[T]) -> asyncio.Future[T]:
    """``fut``, its failure marked as seen (an agent that never awaits it leaves no warning)."""
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    return fut


async def agent_outcome(
    agent_run: asyncio.Future[AgentOutcome], timeout: float, mcp: McpService | None, ssh: contextlib.AsyncExitStack
) -> AgentOutcome:
    """The agent's outcome, its turn bounded by ``timeout`` from the end of setup. An agent
    stopped by its timeout says nothing of its steps: the MCP server's calls stand for them,
    the ones still in flight included (their effects may be in the captured diff)."""
    try:
        return await within(asyncio.shield(agent_run), timeout)
    except TimeoutError:
        return AgentOutcome(
            stop_reason="timeout",
            steps=mcp.calls() if mcp is not None else [],
            warnings=[f"agent exceeded timeouts.agent={timeout:g}s"],
        )
    finally:
        await cancel_and_wait(agent_run)
        await ssh.aclose()  # kills any session still running: nothing may change the workspace now
        # The server drains while capture runs (~0.15 s); with a tool call still running
        # (a timed-out agent) this waits until the server is gone, so nothing changes the
        # workspace under the capture.
        if mcp is not None:
            await mcp.stop()


async def set_up_ahead(
    flavor: Flavor, agent_started: asyncio.Future[Workspace], spec: RunSpec, script_done: bool = False
) -> float:
    """The flavor's setup in the agent's workspace as soon as it is up (ahead of the agent, and
    of the run's turn when a batch started it while the run waited for its slot), bounded by
    the setup timeout; the seconds it took."""
    ws = await asyncio.shield(agent_started)
    began = time.perf_counter()
    await within(flavor_setup(flavor, ws, spec, script_done), spec.timeouts.setup)
    return time.perf_counter() - began


def flavor_setup(flavor: Flavor, ws: Workspace, spec: RunSpec, script_done: bool) -> Awaitable[None]:
    """The flavor's setup of ``ws``; told its setup script is done where the workspace started
    from the layer that script made (``SetsUpInImage``, ``engine/plan/setup_layer.py``)."""
    if script_done and isinstance(flavor, SetsUpInImage):
        return flavor.setup(ws, spec, script_done=True)
    return flavor.setup(ws, spec)
