"""``crucible report --sweep last`` after an interrupted sweep and its ``resume=true`` covers the
whole sweep: the runs the resume ran and the completed ones it reused (``sweep_runs``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SWEEP = ["run", "-m", "task=glob(sample/*)", "agent=integration_test", "hydra.launcher.n_jobs=1"]


def crucible(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def records(env: dict) -> list[dict]:
    """record.json of every job of every sweep in this home."""
    found = []
    for path in Path(env["CRUCIBLE_HOME"], "runs", "sweeps").glob("*/*/record.json"):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass  # replaced while read: the next look sees it
    return found


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.mark.docker
@pytest.mark.slow
def test_report_of_the_last_sweep_after_a_kill_and_resume_counts_every_task_of_the_sweep(
    tmp_path, docker_client, base_image
):
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    env.pop("CRUCIBLE_STORE", None)
    with (tmp_path / "sweep.log").open("w") as log:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", *SWEEP],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def some_but_not_all_completed():
        """Checked with the sweep stopped (SIGSTOP), so no run ends between the look and the kill."""
        os.killpg(sweep.pid, signal.SIGSTOP)
        done = Counter(r["status"] for r in records(env))["completed"]
        if done >= 1 and len(records(env)) > done:
            return True
        os.killpg(sweep.pid, signal.SIGCONT)
        return False

    try:
        wait_for(some_but_not_all_completed, 240, "a run completed while the sweep had more to do")
    finally:
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=30)
    reused = Counter(r["status"] for r in records(env))["completed"]

    resumed = crucible(env, *SWEEP, "resume=true")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.stdout.count("(resume=true)") == reused, resumed.stdout

    report = crucible(env, "report", "--sweep", "last", "--format", "json")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    tasks = {row["task_id"] for row in document["matrix"]}
    assert len(tasks) == 4 and all(t.startswith("sample/") for t in tasks), document["matrix"]
    assert all(row["solved"] == 1 and row["attempts"] == 1 for row in document["matrix"]), document["matrix"]
    # The resume ran only what was left, and its report still counts all four.
    ran = json.loads(
        crucible(
            env,
            "query",
            "--json",
            "SELECT count(*) AS n FROM runs WHERE sweep_id = "
            "(SELECT sweep_id FROM runs ORDER BY started_at DESC LIMIT 1)",
        ).stdout
    )
    assert ran == [{"n": 4 - reused}]
