"""integration_test: the no-model authoring agent (seed 000).

It opens the task's own MCP capability and replays every ``validation`` tool call
through it, recording each as a step like any other agent's; then it ends with an empty
answer and the graders grade the staged workspace. It never runs a step it cannot trust:

- arguments given as a string are rejected without executing (an error step);
- unknown tools and malformed entries are skipped with a recorded warning;
- a call to a capability the task does not have becomes an error step;
- the whole staging pass is bounded by ``timeout_seconds``.

A run with validation warnings fails the shipping gate (``crucible check``).
"""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any, Mapping

from engine.agents import AgentContext, AgentOutcome
from engine.capabilities.mcp_client import call_tool, open_mcp
from engine.models import Step


class IntegrationTestAgent:
    takes_model = False
    deterministic = True

    def __init__(self, name: str = "integration_test", timeout_seconds: float = 600.0) -> None:
        self.name = name
        self.timeout_seconds = timeout_seconds

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        outcome = AgentOutcome(stop_reason="done", answer="")
        try:
            await asyncio.wait_for(self._stage(ctx, outcome), timeout=self.timeout_seconds)
        except asyncio.TimeoutError:
            outcome.stop_reason = "timeout"
            outcome.warnings.append(f"staging did not finish within timeout_seconds={self.timeout_seconds:g}")
        return outcome

    async def _stage(self, ctx: AgentContext, outcome: AgentOutcome) -> None:
        if "mcp" not in ctx.capabilities:
            outcome.warnings.append("task has no mcp capability; nothing can be staged")
            return
        async with open_mcp(ctx.capabilities["mcp"], ctx.capability_auth.get("mcp", "")) as session:
            known_tools = {tool.name for tool in (await session.list_tools()).tools}
            for position, entry in enumerate(ctx.validation):
                step = await self._replay(session, known_tools, position, entry, ctx, outcome)
                if step is not None:
                    step.idx = len(outcome.steps)
                    outcome.steps.append(step)

    async def _replay(self, session, known_tools: set[str], position: int, entry: Any,
                      ctx: AgentContext, outcome: AgentOutcome) -> Step | None:
        where = f"validation[{position}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            outcome.warnings.append(f"{where}: skipped, not a {{name, arguments}} tool call: {entry!r:.200}")
            return None
        name, arguments = entry["name"], entry.get("arguments", {})
        capability = entry.get("capability", "mcp")
        started = datetime.now(timezone.utc).isoformat()
        step = Step(idx=0, kind="tool_call", capability=capability, tool=name, arguments=arguments, started_at=started)
        if isinstance(arguments, str):
            step.is_error, step.result = True, "rejected: arguments must be an object, not a string (not executed)"
            outcome.warnings.append(f"{where}: {name} has string arguments; rejected without executing")
            return step
        if not isinstance(arguments, Mapping):
            outcome.warnings.append(f"{where}: skipped, arguments of {name} are {type(arguments).__name__}, not an object")
            return None
        if capability not in ctx.capabilities:
            step.is_error, step.result = True, f"capability '{capability}' is not offered by this task"
            return step
        if capability != "mcp":
            step.is_error, step.result = True, f"capability '{capability}' cannot be staged by this agent yet"
            return step
        if name not in known_tools:
            outcome.warnings.append(f"{where}: skipped, unknown tool '{name}' (the task offers {sorted(known_tools)})")
            return None
        began = time.monotonic()
        step.result, step.is_error = await call_tool(session, name, dict(arguments))
        step.seconds = time.monotonic() - began
        return step
