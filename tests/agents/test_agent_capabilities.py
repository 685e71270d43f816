"""Agents declare the run's capabilities they connect to; a run serves only those
(engine/capabilities ``capabilities_used``; the run itself: tests/build/test_agent_image.py,
whose probe agent declares none and is given none)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from engine.agents.integration_test import IntegrationTestAgent
from engine.agents.noop import NoopAgent
from engine.capabilities import CAPABILITIES, capabilities_used
from engine.errors import AgentError
from engine.models import RunSpec


def _spec(validation) -> RunSpec:
    """What the agents read of a run's spec: its task's golden steps (the rest is not needed)."""
    return cast(RunSpec, SimpleNamespace(task=SimpleNamespace(validation=validation)))


def test_noop_connects_to_nothing_and_the_integration_test_agent_to_what_the_golden_steps_use():
    assert capabilities_used(NoopAgent(), _spec([])) == frozenset()
    over_mcp = [{"name": "edit", "arguments": {"path": "x"}}]
    assert capabilities_used(IntegrationTestAgent(), _spec(over_mcp)) == frozenset({"mcp"})
    over_ssh = [*over_mcp, {"name": "bash", "capability": "ssh", "arguments": {"command": "true"}}]
    assert capabilities_used(IntegrationTestAgent(), _spec(over_ssh)) == frozenset({"mcp", "ssh"})


def test_a_plug_in_that_declares_nothing_is_served_everything():
    class Older:
        takes_model = False
        deterministic = True

    assert capabilities_used(Older(), _spec([])) == frozenset(CAPABILITIES)


def test_a_capability_no_run_serves_is_refused_in_one_line_naming_the_agent():
    class Asks:
        name = "asks"
        capabilities = ("mcp", "telepathy")

    with pytest.raises(AgentError) as caught:
        capabilities_used(Asks(), _spec([]))
    message = str(caught.value)
    assert "'asks'" in message and "telepathy" in message and "\n" not in message


@pytest.mark.docker
@pytest.mark.slow
def test_a_golden_step_over_ssh_gets_its_ssh_server_and_runs_through_the_pipeline(docker_client, base_image, tmp_path):
    """The other side of serving only what is declared: integration_test on a task whose golden
    steps include one over ssh is given ssh (imported and served for that run) and the step runs
    in the workspace, as the agent's uid; its MCP steps still fix the task."""
    import asyncio
    import dataclasses

    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import session_for

    cfg = to_typed(compose_config(["task=sample/last_page", "agent=integration_test", "integrity=strict"]))
    session = session_for(cfg)
    planned = plan(cfg, builder=session.builder)
    golden = list(planned.spec.task.validation or [])
    probe = {"name": "bash", "capability": "ssh", "arguments": {"command": "id -u && pwd"}}
    spec = dataclasses.replace(planned.spec, task=dataclasses.replace(planned.spec.task, validation=[*golden, probe]))
    planned = dataclasses.replace(planned, spec=spec)
    record = asyncio.run(run_one(planned, session, run_dir=tmp_path / "run"))

    assert record.status == "completed", (record.error_phase, record.error)
    assert record.reward == 1.0
    over_ssh = [step for step in record.steps if step.capability == "ssh"]
    assert len(over_ssh) == 1 and not over_ssh[0].is_error, over_ssh
    assert over_ssh[0].result.split() == ["1000", planned.spec.task.workdir], over_ssh[0].result
    assert all(step.capability == "mcp" and not step.is_error for step in record.steps if step is not over_ssh[0])
