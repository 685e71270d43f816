"""``crucible serve``: a task served to an outside agent, then graded like any other run.

End to end with real clients only: the official TypeScript MCP SDK (tests/mcp_ts) and OpenSSH's
``ssh``, against real containers and the real store. (A served run the agent leaves unfixed
scoring 0, and ``crucible finish``, are in tests/capabilities/test_mcp_spec.py too.)
"""

from __future__ import annotations

import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from serving import crucible, ensure_ts_sdk, serve, ts_client

from engine.store.duckdb import DuckDBStore

FIX = "s|return max(1, total // per_page)|return max(1, -(-total // per_page))|"


@pytest.mark.slow
@pytest.mark.docker
def test_a_task_fixed_by_the_typescript_sdk_client_is_graded_one_with_every_call_a_step(docker_client, base_image):
    ensure_ts_sdk()
    run = serve("task=sample/last_page")
    try:
        assert urlsplit(run.url).hostname == "127.0.0.1" and run.info["ssh"]["host"] == "127.0.0.1"
        printed = run.stdout()
        assert run.url in printed and run.token in printed and run.info["ssh"]["command"] in printed
        assert '"mcpServers"' in printed and run.info["mcp_config"]["mcpServers"]["crucible"]["url"] == run.url
        run_dir = Path(run.info["run_dir"])
        for name in ("serve.json", "ssh_key", "ssh_known_hosts"):
            assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o600, name
        outcome = ts_client("solve", run.url, run.token)
    except BaseException:
        run.interrupt()
        raise
    assert outcome["viewed"] and outcome["edited"] and "passed" in outcome["tests"]["text"], outcome
    assert outcome["tools"] == ["bash", "str_replace_based_edit_tool", "finish"], outcome
    assert run.wait() == 0, run.stdout() + run.stderr()
    record = DuckDBStore().get_run(run.run_id)
    assert record is not None and (record.status, record.reward) == ("completed", 1.0), record
    assert record.agent == "external" and "grade" in record.timings
    assert [(s.capability, s.tool) for s in record.steps] == [
        ("mcp", "str_replace_based_edit_tool"),
        ("mcp", "str_replace_based_edit_tool"),
        ("mcp", "bash"),
        ("mcp", "finish"),
    ]
    assert record.steps[1].arguments["command"] == "str_replace"
    assert record.final_answer == "page_count rounds up"


@pytest.mark.slow
@pytest.mark.docker
def test_a_task_fixed_over_plain_openssh_is_graded_one_after_crucible_finish(docker_client, base_image):
    if shutil.which("ssh") is None:
        pytest.fail("OpenSSH's ssh client is missing (scripts/setup.sh installs openssh-client)")
    run = serve("task=sample/last_page")
    ssh = shlex.split(run.info["ssh"]["command"]) + ["-o", "BatchMode=yes"]
    try:
        fixed = subprocess.run(
            [*ssh, f"sed -i '{FIX}' stockroom/report.py"], capture_output=True, text=True, timeout=120
        )
        assert fixed.returncode == 0, fixed.stderr
        session = subprocess.run(
            [*ssh, "-T"],
            input="python3 -m pytest -q -p no:cacheprovider | tail -n 1\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert session.returncode == 0 and "passed" in session.stdout, session.stdout + session.stderr
        finished = crucible("finish", run.run_id)
        assert finished.returncode == 0 and "asked run" in finished.stdout, finished.stderr
    except BaseException:
        run.interrupt()
        raise
    assert run.wait() == 0, run.stdout() + run.stderr()
    record = DuckDBStore().get_run(run.run_id)
    assert record is not None and (record.status, record.reward) == ("completed", 1.0), record
    assert [(s.idx, s.capability, s.tool) for s in record.steps] == [(0, "ssh", "exec"), (1, "ssh", "shell")]
    assert FIX in record.steps[0].arguments["command"] and "passed" in (record.steps[1].result or "")


def test_serve_mistakes_are_one_line_each():
    for args, says in (
        (["serve"], "task="),
        (["serve", "agent=noop", "task=sample/last_page"], "agent=external"),
        (["serve", "--bogus", "task=sample/last_page"], "--bogus"),
        (["finish", "20990101000000-nosuchrun0"], "no run"),
    ):
        done = crucible(*args)
        assert done.returncode != 0 and says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_agent_external_outside_serve_says_to_use_serve():
    done = crucible("run", "agent=external", "task=sample/last_page")
    assert done.returncode != 0 and "crucible serve" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.docker
def test_a_served_run_nobody_finishes_ends_at_its_wall_clock_and_is_graded(docker_client, base_image):
    run = serve("--host", "127.0.0.2", "task=sample/last_page", "timeouts.agent=5")  # both endpoints move with --host
    assert urlsplit(run.url).hostname == "127.0.0.2" and run.info["ssh"]["host"] == "127.0.0.2", run.info
    assert run.wait() == 0, run.stdout() + run.stderr()
    # Read once the run ended: the note comes after the line ``serve`` waits for.
    assert "listen on 127.0.0.2, not on loopback only" in run.stdout()
    record = DuckDBStore().get_run(run.run_id)
    assert record is not None and (record.status, record.stop_reason, record.reward) == ("completed", "timeout", 0.0)
    assert "did not finish within" in " ".join(record.warnings)
