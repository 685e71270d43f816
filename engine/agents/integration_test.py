"""integration_test: the no-model authoring agent (seed 000).

It replays every ``validation`` tool call through the task's own capabilities — MCP by
default, or SSH (``ssh/2``) for a step that says ``capability: ssh`` — recording each as a
step like any other agent's; then it ends with an empty answer and the graders grade the
staged workspace. Each capability is opened once per run, when the first step needs it.
Over SSH only shell commands travel: ``{name: bash, capability: ssh, arguments: {command}}``
runs as one properly quoted ``bash -lc`` argument, its exit code the step's error flag
(``arguments.timeout``, if given, bounds it). It never runs a step it cannot trust:

- arguments given as a string are rejected without executing (an error step);
- unknown tools and malformed entries are skipped with a recorded warning;
- a call to a capability the task does not have becomes an error step, as does any tool
  but ``bash`` over SSH, or a bash step without a non-empty string ``command``;
- the whole staging pass is bounded by ``timeout_seconds``.

A run with validation warnings fails the shipping gate (``crucible check``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.agents import AgentContext, AgentOutcome
from engine.config.schema import AgentConfig
from engine.models import RunSpec, Step
from engine.util.aio import within


@dataclass
class IntegrationTestAgentConfig(AgentConfig):
    _target_: str = "engine.agents.integration_test.IntegrationTestAgent"
    name: str = "integration_test"
    timeout_seconds: float = 600.0


class IntegrationTestAgent:
    takes_model = False
    deterministic = True
    config_schema = IntegrationTestAgentConfig

    def __init__(self, name: str = "integration_test", timeout_seconds: float = 600.0) -> None:
        self.name = name
        self.timeout_seconds = timeout_seconds

    @staticmethod
    def capabilities(spec: RunSpec) -> tuple[str, ...]:
        """MCP (a step's default), and ssh only where a golden step says ``capability: ssh``."""
        steps = spec.task.validation or []
        uses_ssh = any(isinstance(step, Mapping) and step.get("capability") == "ssh" for step in steps)
        return ("mcp", "ssh") if uses_ssh else ("mcp",)

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        outcome = AgentOutcome(stop_reason="done", answer="")
        try:
            await within(self._stage(ctx, outcome), timeout=self.timeout_seconds)
        except TimeoutError:
            outcome.stop_reason = "timeout"
            outcome.warnings.append(f"staging did not finish within timeout_seconds={self.timeout_seconds:g}")
        return outcome

    async def _stage(self, ctx: AgentContext, outcome: AgentOutcome) -> None:
        if not {"mcp", "ssh"} & set(ctx.capabilities):
            outcome.warnings.append("task has no mcp or ssh capability; nothing can be staged")
            return
        async with contextlib.AsyncExitStack() as stack:
            channels = _Channels(ctx, stack)
            for position, entry in enumerate(ctx.validation):
                step = await self._replay(channels, position, entry, ctx, outcome)
                if step is not None:
                    step.idx = len(outcome.steps)
                    outcome.steps.append(step)

    async def _replay(
        self, channels: _Channels, position: int, entry: Any, ctx: AgentContext, outcome: AgentOutcome
    ) -> Step | None:
        where = f"validation[{position}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            outcome.warnings.append(f"{where}: skipped, not a {{name, arguments}} tool call: {entry!r:.200}")
            return None
        name, arguments = entry["name"], entry.get("arguments", {})
        capability = entry.get("capability", "mcp")
        started = datetime.now(UTC).isoformat()
        step = Step(idx=0, kind="tool_call", capability=capability, tool=name, arguments=arguments, started_at=started)
        if isinstance(arguments, str):
            step.is_error, step.result = True, "rejected: arguments must be an object, not a string (not executed)"
            outcome.warnings.append(f"{where}: {name} has string arguments; rejected without executing")
            return step
        if not isinstance(arguments, Mapping):
            outcome.warnings.append(
                f"{where}: skipped, arguments of {name} are {type(arguments).__name__}, not an object"
            )
            return None
        if capability not in ctx.capabilities:
            step.is_error, step.result = True, f"capability '{capability}' is not offered by this task"
            return step
        began = time.monotonic()
        if capability == "ssh":
            step.result, step.is_error = await self._over_ssh(channels, name, arguments)
        elif capability == "mcp":
            session, known_tools = await channels.mcp()
            if name not in known_tools:
                outcome.warnings.append(
                    f"{where}: skipped, unknown tool '{name}' (the task offers {sorted(known_tools)})"
                )
                return None
            from engine.capabilities.mcp_client import call_tool

            step.result, step.is_error = await call_tool(session, name, dict(arguments))
        else:
            step.is_error, step.result = True, f"capability '{capability}' cannot be staged by this agent"
            return step
        step.seconds = time.monotonic() - began
        return step

    async def _over_ssh(self, channels: _Channels, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """A bash step over SSH: (result text, is_error); refused, unexecuted, unless well formed."""
        if name != "bash":
            return f"rejected: ssh carries shell commands only (tool 'bash'), not '{name}' (not executed)", True
        command, timeout = arguments.get("command"), arguments.get("timeout")
        if not isinstance(command, str) or not command.strip():
            return "rejected: bash needs a non-empty string `command` (not executed)", True
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            return f"rejected: `timeout` must be a positive number of seconds, got {timeout!r} (not executed)", True
        from engine.capabilities.ssh_client import run_bash

        text, code = await run_bash(await channels.ssh(), command, timeout)
        return text, code != 0


class _Channels:
    """The run's capability connections, each opened on first use and closed with ``stack``.
    (The MCP SDK and asyncssh are imported on first use: planning a run imports this module,
    and a check answered from the store should not pay ~0.6 s for clients it never opens.)"""

    def __init__(self, ctx: AgentContext, stack: contextlib.AsyncExitStack) -> None:
        self._ctx, self._stack = ctx, stack
        self._mcp: tuple[Any, set[str]] | None = None
        self._ssh: Any = None

    async def mcp(self) -> tuple[Any, set[str]]:
        if self._mcp is None:
            from engine.capabilities.mcp_client import open_mcp

            session = await self._stack.enter_async_context(
                open_mcp(self._ctx.capabilities["mcp"], self._ctx.capability_auth.get("mcp", ""))
            )
            self._mcp = session, {tool.name for tool in (await session.list_tools()).tools}
        return self._mcp

    async def ssh(self) -> Any:
        if self._ssh is None:
            from engine.capabilities.ssh_client import SSHEndpoint, open_ssh

            endpoint = SSHEndpoint.from_capability(
                self._ctx.capabilities["ssh"], self._ctx.capability_auth.get("ssh", "")
            )
            self._ssh = await self._stack.enter_async_context(open_ssh(endpoint))
        return self._ssh
