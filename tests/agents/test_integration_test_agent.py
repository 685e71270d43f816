"""The integration_test agent (seed 000), driven over a real MCP server (official SDK, HTTP).

The tool set here is a small recording one, so the test can see exactly which calls
were executed; the coding environment's own tools are exercised in test_coding_env.py
and end to end in test_check_gate.py.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest

from engine.agents import AgentContext
from engine.agents.integration_test import IntegrationTestAgent
from engine.capabilities.mcp_server import serve_mcp
from engine.config.compose import compose_config, to_typed
from engine.config.tree import group_options
from engine.errors import ConfigError
from engine.plan.spec import agent_part


class RecordingTools:
    """Two tools; every executed call is appended to ``calls``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def specs(self) -> list[dict]:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return [
            {"name": "echo", "description": "echo text back", "inputSchema": schema},
            {"name": "fail", "description": "always an error", "inputSchema": schema},
        ]

    async def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        self.calls.append((name, arguments))
        if name == "slow":
            await asyncio.sleep(10)
        return (f"echo:{arguments.get('text', '')}", False) if name == "echo" else ("it failed", True)


async def replay(validation, *, capabilities=("mcp",), timeout=30.0):
    tools, token = RecordingTools(), secrets.token_urlsafe(16)
    async with serve_mcp(tools, token=token) as url:
        caps = {name: url for name in capabilities}
        ctx = AgentContext(
            spec=None, capabilities=caps, capability_auth={"mcp": token}, validation=validation, prompt=""
        )
        outcome = await IntegrationTestAgent(timeout_seconds=timeout).run(ctx)
    return outcome, tools.calls


def test_every_validation_call_is_replayed_through_mcp_and_recorded_as_a_step():
    outcome, calls = asyncio.run(
        replay(
            [{"name": "echo", "arguments": {"text": "héllo 'quoted' \"double\""}}, {"name": "fail", "arguments": {}}]
        )
    )
    assert calls == [("echo", {"text": "héllo 'quoted' \"double\""}), ("fail", {})]
    assert [(s.tool, s.is_error) for s in outcome.steps] == [("echo", False), ("fail", True)]
    assert outcome.steps[0].result == "echo:héllo 'quoted' \"double\""
    assert outcome.answer == "" and outcome.stop_reason == "done" and outcome.warnings == []


def test_string_arguments_are_rejected_without_executing():
    outcome, calls = asyncio.run(replay([{"name": "echo", "arguments": '{"text": "x"}'}]))
    assert calls == []
    assert outcome.steps[0].is_error and "not executed" in outcome.steps[0].result
    assert any("string arguments" in w for w in outcome.warnings)


@pytest.mark.parametrize(
    "entry",
    [
        "echo hi",
        42,
        {"arguments": {}},
        {"name": 7},
        {"name": "echo", "arguments": [1, 2]},
        {"name": "no_such_tool", "arguments": {}},
    ],
)
def test_unknown_or_malformed_steps_are_skipped_with_a_warning(entry):
    outcome, calls = asyncio.run(replay([entry, {"name": "echo", "arguments": {"text": "after"}}]))
    assert calls == [("echo", {"text": "after"})], "the bad step was executed or stopped the replay"
    assert len(outcome.warnings) == 1 and "skipped" in outcome.warnings[0]
    assert [s.tool for s in outcome.steps] == ["echo"]


def test_a_call_to_a_capability_the_task_lacks_is_an_error_step():
    outcome, calls = asyncio.run(replay([{"name": "bash", "capability": "ssh", "arguments": {"command": "true"}}]))
    assert calls == []
    assert outcome.steps[0].is_error and "ssh" in outcome.steps[0].result


@pytest.mark.slow
def test_the_staging_pass_is_bounded_by_timeout_seconds():
    class SlowTools(RecordingTools):
        async def call(self, name, arguments):
            await asyncio.sleep(5)
            return await super().call(name, arguments)

    async def run():
        tools, token = SlowTools(), "t"
        async with serve_mcp(tools, token=token) as url:
            ctx = AgentContext(
                spec=None,
                capabilities={"mcp": url},
                capability_auth={"mcp": token},
                validation=[{"name": "echo", "arguments": {}}] * 3,
                prompt="",
            )
            return await IntegrationTestAgent(timeout_seconds=1.0).run(ctx)

    outcome = asyncio.run(run())
    assert outcome.stop_reason == "timeout"
    assert any("timeout_seconds=1" in w for w in outcome.warnings)


def test_integration_test_asked_for_as_a_model_points_to_crucible_check():
    task = group_options("task")[0]
    cfg = to_typed(compose_config([f"task={task}", "agent=noop", "model=integration_test"]))
    with pytest.raises(ConfigError, match="crucible check"):
        agent_part(cfg)
