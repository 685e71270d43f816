"""The baseline agent: it does nothing, so the task's hidden tests see the untouched repo."""

from __future__ import annotations

from dataclasses import dataclass

from engine.agents import AgentContext, AgentOutcome
from engine.config.schema import AgentConfig


@dataclass
class NoopAgentConfig(AgentConfig):
    _target_: str = "engine.agents.noop.NoopAgent"
    name: str = "noop"


class NoopAgent:
    takes_model = False
    deterministic = True
    capabilities = ()
    needs_workspace = False
    """It acts on nothing: it is given no workspace, and its capture is that of an untouched one
    (engine/run/untouched.py), kept once per image."""
    config_schema = NoopAgentConfig

    def __init__(self, name: str = "noop") -> None:
        self.name = name

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome(stop_reason="done")
