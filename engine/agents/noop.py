"""The baseline agent: it does nothing, so the task's hidden tests see the untouched repo."""

from __future__ import annotations

from engine.agents import AgentContext, AgentOutcome


class NoopAgent:
    takes_model = False
    deterministic = True
    capabilities = ()

    def __init__(self, name: str = "noop") -> None:
        self.name = name

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome(stop_reason="done")
