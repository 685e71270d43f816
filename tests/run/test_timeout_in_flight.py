"""An agent stopped by the runner's timeout while a tool call is in flight: what that call did
reaches the captured diff, so the run records the call as a step (from the MCP server, which
saw it start: the agent, cancelled, says nothing of its steps)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.capabilities.call_journal import IN_FLIGHT_NOTE
from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "conf"
SLOW_EDIT = "echo written-in-flight > in_flight.txt && sleep 300"


@pytest.mark.docker
@pytest.mark.slow
def test_a_call_in_flight_at_the_agents_timeout_is_recorded_as_an_error_step_with_its_arguments(
    tmp_path, monkeypatch, docker_client, base_image
):
    tasks = tmp_path / "conf" / "task" / "fixtures"
    tasks.mkdir(parents=True)
    good = (FIXTURES / "task" / "fixtures" / "good.yaml").read_text()
    (tasks / "in_flight.yaml").write_text(
        good.replace("name: good", "name: in_flight")
        + "refs: {baseline: good_baseline, test: good_test, golden: good_golden}\n"
        + f"validation: [{{name: bash, arguments: {{command: '{SLOW_EDIT}'}}}}]\n"
    )
    env = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_CONFIG_PATH": f"{FIXTURES}:{tmp_path / 'conf'}",
    }
    env.pop("CRUCIBLE_STORE", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "run",
            "task=fixtures/in_flight",
            "agent=integration_test",
            "timeouts.agent=20",  # room for setup and the call's exec to start on a loaded machine
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]

    monkeypatch.setenv("CRUCIBLE_HOME", env["CRUCIBLE_HOME"])
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    store = DuckDBStore()
    ((run_id,),) = store.query("SELECT run_id FROM runs")[1]
    record = store.get_run(run_id)
    assert record is not None and record.stop_reason == "timeout", (record, proc.stdout, proc.stderr[-2000:])
    assert record.status == "completed" and record.reward is not None  # graded: the diff is what it did
    assert "in_flight.txt" in (record.diff or ""), record.diff  # its effect is what is graded
    assert len(record.steps) == 1, record.steps
    step = record.steps[0]
    assert (step.kind, step.capability, step.tool, step.is_error, step.note) == (
        "tool_call",
        "mcp",
        "bash",
        True,
        IN_FLIGHT_NOTE,
    )
    assert step.arguments == {"command": SLOW_EDIT} and step.started_at and step.seconds >= 0
