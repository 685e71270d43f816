"""A run cancelled in any phase ends promptly, recorded as ``canceled`` with that phase, and
leaves no container behind — whatever grading's waiting commands were doing at the time.

Each case is a real run of ``sample/last_page`` under ``strict`` whose one slow step is a
marked ``sleep`` (in the agent's tool call, or in the test command), so the test can see,
from inside the container, that the run is in that phase before it cancels.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from attacks.harness import AttackRunner

from engine.run.batch import run_one
from engine.run.records import new_run_id
from engine.runtimes.docker.reaper import LABEL_RUN_ID

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CANCEL_WITHIN = 120.0
"""Seconds a cancelled run may take to record itself and remove its containers: far under the
300 s the cancelled step would take to end by itself, with room for a loaded machine's
``docker rm -f`` of each container."""


@pytest.fixture(scope="module")
def planner(base_image):
    return AttackRunner(modes=("strict",))


def _containers(docker_client, run_id: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"})


def _sleeping(docker_client, run_id: str, seconds: str) -> bool:
    """Whether a container of the run runs ``sleep SECONDS`` (the phase's marker)."""
    import docker

    try:
        containers = _containers(docker_client, run_id)
    except docker.errors.NotFound:  # one went between the SDK's list and its inspect of it
        return False
    for container in containers:
        try:
            processes = container.top(ps_args="-eo pid,args")["Processes"] or []
        except Exception:  # the container is just starting or going
            continue
        # The sleep itself, not a command line that holds it: grading's tester is started
        # early, waiting for "go", with the whole test command (the sleep included) in its args.
        if any(row[-1].strip() == f"sleep {seconds}" for row in processes):
            return True
    return False


def _cancel_when_sleeping(planner, docker_client, tmp_path, plan, seconds: str):
    """Run ``plan``, cancel it once the marked sleep runs; (record, seconds from cancel to end)."""
    run_id = new_run_id()

    async def scenario():
        task = asyncio.ensure_future(run_one(plan, planner.session, run_dir=tmp_path / run_id, run_id=run_id))
        deadline = time.monotonic() + 120
        while not await asyncio.to_thread(_sleeping, docker_client, run_id, seconds):
            assert not task.done(), f"the run ended before its marked step: {task.result()}"
            assert time.monotonic() < deadline, "the marked step never started"
            await asyncio.sleep(0.1)
        task.cancel()
        began = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), CANCEL_WITHIN)
        return time.monotonic() - began

    took = asyncio.run(scenario())
    return run_id, took


def _stored(planner, run_id: str) -> tuple:
    _, rows = planner.session.store.query(f"SELECT status, error_phase, error FROM runs WHERE run_id = '{run_id}'")
    return rows[0] if rows else None


def test_a_run_cancelled_while_the_agent_works_is_recorded_and_leaves_nothing(planner, docker_client, tmp_path):
    seconds = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    plan = planner.plan_for("strict", [{"name": "bash", "arguments": {"command": f"sleep {seconds}"}}])
    run_id, took = _cancel_when_sleeping(planner, docker_client, tmp_path, plan, seconds)
    assert took < CANCEL_WITHIN
    assert _stored(planner, run_id) == ("canceled", "agent", "canceled by the user")
    assert _containers(docker_client, run_id) == []


@pytest.mark.parametrize("where", ["test-command", "scenario"])
def test_a_run_cancelled_while_its_tests_run_is_recorded_and_leaves_nothing(planner, docker_client, tmp_path, where):
    """The stager has been fed and the tester runs: grading's clean-up must not wait on either.
    ``test-command``: the task's own command sleeps (a task without an isolated verdict);
    ``scenario``: the code under test sleeps inside a scenario of the isolated verdict, under
    the launcher, its zygote and pytest."""
    seconds = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    if where == "test-command":
        test_command = f"sleep {seconds}; " + planner.plans["strict"].spec.task.test_command
        plan = planner.plan_for("strict", None, {"test_command": test_command, "isolated_verdict": False})
    else:
        slow_import = f"printf 'import os\\nos.system(\"sleep {seconds}\")\\n' >> stockroom/report.py"
        plan = planner.plan_for("strict", [{"name": "bash", "arguments": {"command": slow_import}}])
    run_id, took = _cancel_when_sleeping(planner, docker_client, tmp_path, plan, seconds)
    assert took < CANCEL_WITHIN
    assert _stored(planner, run_id) == ("canceled", "grade", "canceled by the user")
    assert _containers(docker_client, run_id) == []
