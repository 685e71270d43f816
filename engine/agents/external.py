"""The ``external`` agent: whatever works through the run's endpoints from outside crucible.

An IDE, a desktop client, a hosted product, a script in another language: ``crucible serve``
(engine/cli/serve.py) hands it the run's MCP URL and token and an ``ssh`` command line, and
this agent's turn is simply waiting until the work is declared done — Ctrl-C in the serve
process, ``crucible finish RUN_ID``, or the ``finish`` tool the run serves this agent only —
or until the wall clock (``timeouts.agent``) runs out. The run then captures and grades in a
fresh workspace like any other.

Its steps come from the server side: the run serves its tools through ``served_tools`` (every
MCP call recorded as a ``Step``), and its SSH server reports every command or session to
``record_step``. The serve command talks to the agent through a ``Reception`` set in a context
variable for its run: where to announce the endpoints, and the event that ends the turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.config.schema import AgentConfig
from engine.errors import AgentError
from engine.interfaces import AgentContext, AgentOutcome, ToolSet
from engine.models import Step
from engine.util.aio import within

FINISH_SPEC = {
    "name": "finish",
    "description": (
        "Declare the task done: the run stops serving its tools, captures the repository's "
        "changes and grades them. Call it once, last."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "What you changed, in a few lines."}},
        "required": [],
    },
}
DEADLINE_MARGIN = 2.0
"""Seconds before ``timeouts.agent`` the agent ends its own turn, so that its steps are kept."""


@dataclass
class Endpoints:
    """What an outside agent is handed: the MCP URL and token, the SSH URL and its keys (JSON,
    ``SSHEndpoint.credential``)."""

    mcp_url: str
    mcp_token: str
    ssh_url: str | None
    ssh_credential: str | None


class Reception:
    """The serve command's side of a served run: ``announce`` gets the endpoints once the task
    is set up; ``request_finish`` (a signal handler, the ``finish`` tool) ends the agent's turn."""

    def __init__(self, announce: Callable[[Endpoints], None]) -> None:
        self.announce = announce
        self.finished_by: str | None = None
        self._finish: asyncio.Event | None = None

    @property
    def finish(self) -> asyncio.Event:
        if self._finish is None:  # made on the running loop, on first use
            self._finish = asyncio.Event()
        return self._finish

    def request_finish(self, by: str) -> bool:
        """End the turn; False when it was already asked to end."""
        if self.finished_by is not None:
            return False
        self.finished_by = by
        self.finish.set()
        return True


RECEPTION: contextvars.ContextVar[Reception | None] = contextvars.ContextVar("crucible_reception", default=None)


@dataclass
class ExternalAgentConfig(AgentConfig):
    _target_: str = "engine.agents.external.ExternalAgent"
    name: str = "external"


class ExternalAgent:
    takes_model = False
    deterministic = False
    capabilities = ("mcp", "ssh")
    config_schema = ExternalAgentConfig

    def __init__(self, name: str = "external") -> None:
        self.name = name
        self.reception = RECEPTION.get()
        if self.reception is None:
            raise AgentError("agent=external is an outside agent: start it with `crucible serve task=...`")
        self.steps: list[Step] = []

    def served_tools(self, tools: ToolSet) -> ToolSet:
        """The run's tools as served to this agent: each call recorded, ``finish`` added."""
        return RecordedTools(tools, self)

    def record_step(self, step: Step) -> None:
        """A step the run's servers saw (an SSH command or session, an MCP call), numbered here."""
        self.steps.append(dataclasses.replace(step, idx=len(self.steps)))

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        assert self.reception is not None  # __init__ refused otherwise
        if ctx.setup_done is not None:
            await ctx.setup_done
        self.reception.announce(
            Endpoints(
                mcp_url=ctx.capabilities["mcp"],
                mcp_token=ctx.capability_auth["mcp"],
                ssh_url=ctx.capabilities.get("ssh"),
                ssh_credential=ctx.capability_auth.get("ssh"),
            )
        )
        limit = max(1.0, ctx.spec.timeouts.agent - DEADLINE_MARGIN)
        try:
            await within(self.reception.finish.wait(), limit)
        except TimeoutError:
            return AgentOutcome(
                steps=list(self.steps),
                stop_reason="timeout",
                warnings=[f"the outside agent did not finish within timeouts.agent={limit:g}s"],
            )
        return AgentOutcome(steps=list(self.steps), stop_reason="done", answer=self.answer)

    @property
    def answer(self) -> str:
        finished = [s for s in self.steps if s.tool == "finish" and isinstance(s.arguments, dict)]
        return str(finished[-1].arguments.get("summary") or "") if finished else ""


class RecordedTools:
    """A run's tool set, each call recorded as a step of ``agent`` (capability "mcp"), with the
    ``finish`` tool added. A call the client cancels is recorded as such."""

    def __init__(self, inner: ToolSet, agent: ExternalAgent) -> None:
        self.inner, self.agent = inner, agent
        self.user, self.workdir = inner.user, inner.workdir

    def specs(self) -> list[dict[str, Any]]:
        return [*self.inner.specs(), dict(FINISH_SPEC)]

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        started_at, began = datetime.now(UTC).isoformat(), time.perf_counter()

        def record(result: str | None, is_error: bool, note: str | None = None) -> None:
            self.agent.record_step(
                Step(
                    idx=0,
                    kind="tool_call",
                    capability="mcp",
                    tool=name,
                    arguments=arguments,
                    result=result,
                    is_error=is_error,
                    started_at=started_at,
                    seconds=round(time.perf_counter() - began, 4),
                    note=note,
                )
            )

        if name == "finish":
            text = "finishing: the run now captures your changes and grades them"
            record(text, False)
            assert self.agent.reception is not None
            self.agent.reception.request_finish("the finish tool")
            return text, False
        try:
            text, is_error = await self.inner.call(name, arguments)
        except asyncio.CancelledError:
            record(None, True, note="cancelled before it answered (by the client, or the end of the turn)")
            raise
        record(text, is_error)
        return text, is_error
