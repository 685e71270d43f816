"""An API key in the environment leaks nowhere: not the store, the run directories, the
``.hydra/`` outputs, the logs, ``docker inspect`` of the run's containers, nor the
workspace — even when the agent runs ``env`` there.

The run goes through the CLI (``crucible run`` as a subprocess with canary keys in its
environment) against a stand-in for a hosted model API, which is unreachable here. The
stand-in accepts only the canary key (so the key really was read and sent), makes the
agent run ``env`` in its workspace, and holds its next reply until this test has
inspected the run's containers while they are live.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from standin import StandIn, answer, call, reply, wait

from engine.store.duckdb import DuckDBStore
from engine.util import paths

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SNOOP = (
    "env; echo '--- every readable process environment'; "
    "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; done 2>/dev/null; true"
)


def test_an_api_key_in_the_environment_appears_nowhere_even_when_the_agent_runs_env(docker_client, base_image):
    canaries = {
        name: f"sk-canary-{secrets.token_hex(12)}"
        for name in ("CRUCIBLE_CANARY_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    key = canaries["CRUCIBLE_CANARY_KEY"]
    reached, release, seen = threading.Event(), threading.Event(), {}

    def script(turn):
        if turn.turn == 0:
            return reply("", call("bash", command=SNOOP))
        seen["env"] = turn.results[0]["text"]
        reached.set()
        return wait(release, then=answer("done"), timeout=180)

    with StandIn(script, require_key=key) as api:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine.cli.main",
                "run",
                "task=sample/last_page",
                "agent=tool_calling",
                "model=openai-compatible/standin",
                f"agent.base_url={api.base_url}",
                "agent.api_key_env=CRUCIBLE_CANARY_KEY",
            ],
            cwd=ROOT,
            env={**os.environ, **canaries},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert reached.wait(180), "the agent never came back from running env"
            containers = docker_client.containers.list(filters={"label": f"crucible.owner_pid={proc.pid}"})
            inspected = json.dumps([docker_client.api.inspect_container(c.id) for c in containers])
            release.set()
            stdout, stderr = proc.communicate(timeout=180)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]
    assert {e.api_key for e in api.exchanges} == {key}, "the stand-in did not get the key from the named variable"
    assert "PATH=" in seen["env"] and "CRUCIBLE_CANARY_KEY" not in seen["env"]
    assert len(containers) == 2, "expected the agent's and the grading container, live"

    store_rows = []
    for table in ("runs", "steps", "builds", "subscores", "stage_timings", "test_results"):
        store_rows += DuckDBStore().query(f"SELECT * FROM {table}")[1]
    # The run this command printed (its pid alone may be an earlier test's too: pids wrap).
    run_id = re.search(r"\brun (\S+)  \(", stdout).group(1)
    _, runs = DuckDBStore().query(f"SELECT run_dir, spec FROM runs WHERE run_id = '{run_id}'")
    run_dir = Path(runs[0][0])
    assert (run_dir / ".hydra" / "config.yaml").is_file() and run_dir.is_relative_to(paths.home())
    assert json.loads(runs[0][1])["agent"]["api_key_env"] == "CRUCIBLE_CANARY_KEY"  # the name, not the value

    files = [p for p in paths.home().rglob("*") if p.is_file()]
    places = {
        "the workspace's env output": seen["env"],
        "docker inspect": inspected,
        "the CLI's output": stdout + stderr,
        "the store's rows": str(store_rows),
        **{str(p): p.read_bytes().decode("latin-1") for p in files},
    }
    leaks = [(where, name) for where, text in places.items() for name, value in canaries.items() if value in text]
    assert leaks == []
