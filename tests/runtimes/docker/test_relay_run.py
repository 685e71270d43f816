"""Whole runs with their bridge relayed (``runtime.bridge=relay``, as on a remote Docker host):
the REAL ``claude`` CLI inside a workspace without network reaches the model proxy and the run's
MCP server through ``/run/crucible/*.sock``, carried by the relay's exec stream, fixes a sample
task with the run's MCP tools (the golden's edits, scripted by the stand-in model) and scores
1.0; an sdlc golden pushes its fix through the relayed ``git.sock`` (the agent repo's origin runs
the copied-in ``git-relay.py``) and scores 1.0.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from sdlc_runs import real_run
from standin import Call, StandIn, answer, call, golden_edits, reply

from engine.config.compose import compose_config, to_typed
from engine.runtimes.docker.relay import BridgeRelay

pytestmark = [pytest.mark.docker, pytest.mark.slow]

KEY_ENV = "CRUCIBLE_TEST_CLI_KEY"
KEY = "sk-standin-relay-3c9e51d2"
MODEL = "anthropic/claude-sonnet-4-6"
PRICES = {MODEL: {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75, "output": 15.0}}


def tool(turn, name: str) -> str:
    """The CLI's name for the run's MCP tool ``name`` (Claude: mcp__crucible__bash)."""
    for offered in turn.tool_names:
        if offered == name or offered.endswith(f"__{name}"):
            return offered
    raise AssertionError(f"the CLI offers no {name} tool of the run: {turn.tool_names}")


def fixer(turn):
    if turn.task is None:  # a side call of the CLI's own
        return answer("ok")
    if turn.turn == 0:
        return reply("Looking.", call(tool(turn, "bash"), command="git status --short; ls /run/crucible"))
    if turn.turn == 1:
        return reply("Fixing.", *[Call(tool(turn, c.name), c.arguments) for c in golden_edits(turn)])
    return answer("Fixed.")


@pytest.fixture(scope="module")
def relayed_run(docker_client, base_image, tmp_path_factory):
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import session_for

    connected: list[tuple[str, str]] = []
    serve = BridgeRelay._serve

    async def observed(self, cid, name, conn):  # which bridge sockets the agent's side opened
        connected.append((self.labels["crucible.run_id"], name))
        await serve(self, cid, name, conn)

    with pytest.MonkeyPatch.context() as mp:
        prices = tmp_path_factory.mktemp("prices") / "prices.yaml"
        prices.write_text(json.dumps({"models": PRICES}))
        mp.setenv("CRUCIBLE_PRICES", str(prices))
        mp.setenv(KEY_ENV, KEY)
        mp.setattr(BridgeRelay, "_serve", observed)
        with StandIn(fixer, require_key=KEY) as api:
            overrides = [
                "task=sample/last_page",
                "agent=claude_code",
                f"model={MODEL}",
                f"agent.api_key_env={KEY_ENV}",
                f"agent.base_url={api.base_url}",
                "runtime.bridge=relay",
            ]
            typed = to_typed(compose_config(overrides))
            session = session_for(typed)
            planned = plan(typed, builder=session.builder)
            record = asyncio.run(run_one(planned, session, run_dir=tmp_path_factory.mktemp("run")))
        pushed = real_run(
            tmp_path_factory.mktemp("run"), "sdlc/last_page", "agent=integration_test", "runtime.bridge=relay"
        )
    return record, pushed, connected


def left_of(docker_client, run_id: str) -> list:
    """The run's containers (workspaces, sidecars) and volumes still on the engine."""
    label = f"crucible.run_id={run_id}"
    volumes = docker_client.api.volumes(filters={"label": label}).get("Volumes") or []
    return docker_client.api.containers(all=True, filters={"label": label}) + volumes


def test_a_cli_reaches_mcp_and_its_model_through_the_relayed_bridge_and_scores_1(relayed_run, docker_client):
    record, _, connected = relayed_run
    assert (record.status, record.reward, record.stop_reason) == ("completed", 1.0, "done"), (
        record.error,
        record.warnings,
    )
    tools = [s.tool for s in record.steps if s.kind == "tool_call" and s.capability == "mcp"]
    assert tools[0] == "bash" and "str_replace_based_edit_tool" in tools, tools
    assert {(record.run_id, "mcp.sock"), (record.run_id, "model.sock")} <= set(connected), connected
    assert left_of(docker_client, record.run_id) == []


def test_an_sdlc_golden_pushes_through_the_relayed_git_socket_and_scores_1(relayed_run, docker_client):
    _, record, connected = relayed_run
    assert (record.status, record.reward) == ("completed", 1.0), (record.error, record.raw_grade)
    assert [p["exit_code"] for p in record.raw_grade["pushes"]] == [0]
    assert (record.run_id, "git.sock") in connected
    assert left_of(docker_client, record.run_id) == []
