"""Hydra multirun sweeps through ``crucible run -m``: parallel, stored once, resumable."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SWEEP = ["run", "-m", "task=glob(sample/*)", "agent=noop,integration_test", "hydra.launcher.n_jobs=2"]


def crucible(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def sweep_id_of(stdout: str) -> str:
    match = re.search(r"^sweep (\S+): (\d+) run\(s\) stored", stdout, re.M)
    assert match, stdout
    return match.group(1)


@pytest.fixture(scope="module")
def first_sweep(docker_client, base_image):
    proc = crucible(*SWEEP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_a_parallel_sweep_stores_exactly_one_run_per_job_and_runs_overlap(first_sweep):
    sweep = sweep_id_of(first_sweep.stdout)
    _, rows = DuckDBStore().query(
        "SELECT run_id, task_id, agent, status, reward, epoch(started_at), epoch(ended_at) "
        f"FROM runs WHERE sweep_id = '{sweep}'"
    )
    assert len(rows) == 8 and len({r[0] for r in rows}) == 8
    assert {(r[1], r[2]) for r in rows} == {(t, a) for t in {r[1] for r in rows} for a in ("noop", "integration_test")}
    assert all(r[3] == "completed" for r in rows)
    assert sorted(r[4] for r in rows if r[2] == "integration_test") == [1.0] * 4
    assert sorted(r[4] for r in rows if r[2] == "noop") == [0.0] * 4
    spans = [(r[5], r[6]) for r in rows]
    overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, f"no two runs overlapped: {sorted(spans)}"


def test_resume_skips_every_spec_that_already_has_a_completed_run(first_sweep):
    count = DuckDBStore().query("SELECT count(*) FROM runs")[1][0][0]
    proc = crucible(*SWEEP, "resume=true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("(resume=true)") == 8, proc.stdout
    assert DuckDBStore().query("SELECT count(*) FROM runs")[1][0][0] == count
    assert "0 run(s) stored" in proc.stdout


def test_ctrl_c_mid_run_removes_the_containers_and_records_the_run_canceled(first_sweep, docker_client):
    """A run interrupted while its agent works ends as 'canceled', with no container left. Its
    one step sleeps, so the run is still going when Ctrl-C comes however loaded the machine; a
    step in flight is waited for before the run ends, so the sleep is short."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "run",
            f"task={_a_sample_task()}",
            "agent=integration_test",
            "+task.validation=[{name: bash, arguments: {command: 'sleep 20'}}]",
            "timeouts.setup=300",
            "seed=4242",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_a_terminal_gives_it,
    )
    deadline = time.monotonic() + 120
    label = {"label": f"crucible.owner_pid={proc.pid}"}
    # ignore_removed: a container listed and removed before it is inspected (a step's own) is not a 404
    while time.monotonic() < deadline and not docker_client.containers.list(filters=label, ignore_removed=True):
        time.sleep(0.05)
    assert docker_client.containers.list(filters=label, ignore_removed=True), "the run never started a container"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert docker_client.containers.list(all=True, filters=label) == []
    # This run's own (its pid alone may be an earlier test's run's too: pids wrap at 32768 here).
    _, rows = DuckDBStore().query(f"SELECT status FROM runs WHERE owner_pid = {proc.pid} AND seed = 4242")
    assert rows == [("canceled",)]


def _ctrl_c_as_a_terminal_gives_it() -> None:
    """The command starts as from a terminal, SIGINT at its default and not blocked, whatever
    this test process inherited or was left with (an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _a_sample_task() -> str:
    from engine.config.tree import group_options

    return [t for t in group_options("task") if t.startswith("sample/")][0]
