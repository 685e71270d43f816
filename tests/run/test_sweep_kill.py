"""A sweep killed with ``kill -9`` loses nothing: no container outlives it, no run stays
"running", and ``resume=true`` finishes exactly the runs that had not completed.

The sweep runs in its own session (process group): the CLI, whose runs share its process
(the default launcher), or with ``hydra/launcher=joblib`` its loky workers too. Each test uses its own CRUCIBLE_HOME, so resume sees only its runs. The
kill is tried on two sweeps: the deterministic agents' (8 runs), and the model agents' of
issue 5 (2 models x 4 tasks x 3 attempts) against the model STAND-IN (tests/standin: a
hosted model API is unreachable here; everything else is real).
"""

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
from standin.process import standin_server

from engine.run.sweep_guard import OWNER_ENV, claim_sweep, sweep_owner
from engine.runtimes.owner import LABEL_OWNER_PID, LABEL_OWNER_STARTED, owner_alive, process_start_time
from engine.util.codehash import _content_hash, engine_version

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ["run", "-m", "task=glob(sample/*)", "agent=noop,integration_test", "hydra.launcher.n_jobs=2"]
MODEL_SWEEP = [
    "run",
    "-m",
    "agent=tool_calling",
    "model=openai-compatible/standin-a,openai-compatible/standin-b",
    "task=glob(sample/*)",
    "attempt=range(0,3)",
    "hydra.launcher.n_jobs=2",
]
# Mixed outcomes, so both passing and failing verdicts are among what the kill interrupts.
MODEL_SCRIPT = (
    "from tests.standin.script import outcome_table\n"
    "script = outcome_table({('standin-a', '*'): ['fix', 'give_up', 'fix']}, default='give_up')\n"
)


@pytest.fixture
def home(tmp_path, docker_client, base_image):
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    env.pop("CRUCIBLE_STORE", None)
    env.pop("CI", None)  # the progress line's cadence is not under test here
    return env


def crucible(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


@pytest.fixture(params=["deterministic", "model-standin"])
def sweep_args(request, tmp_path, home) -> tuple[list[str], int]:
    """The sweep's command line and its number of jobs."""
    if request.param == "deterministic":
        yield SWEEP, 8
        return
    home["OPENAI_API_KEY"] = "unused-by-the-stand-in"
    with standin_server(tmp_path / "standin", MODEL_SCRIPT) as url:
        yield [*MODEL_SWEEP, f"agent.base_url={url}"], 24


def start_sweep(env: dict, log: Path, args: list[str] = SWEEP) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def records(env: dict) -> dict[str, dict]:
    """record.json of every job of every sweep in this home, by path."""
    found = {}
    for path in Path(env["CRUCIBLE_HOME"], "runs", "sweeps").glob("*/*/record.json"):
        try:
            found[str(path)] = json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # replaced while read: the next poll sees it
    return found


def group_pids(pgid: int) -> set[int]:
    """Live (non-zombie) processes of a process group."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] not in "ZX":
                pids.add(int(entry.name))
    return pids


def owned_containers(docker_client, pids: set[int]) -> list[str]:
    """Containers (any state) whose crucible owner is one of ``pids``."""
    listed = docker_client.api.containers(all=True, filters={"label": "crucible.owner_pid"})
    return [c["Id"][:12] for c in listed if int(c["Labels"]["crucible.owner_pid"]) in pids]


def wait_for(condition, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def query(env: dict, sql: str) -> list[tuple]:
    proc = crucible(env, "query", sql, "--json")
    assert proc.returncode == 0, proc.stderr
    return [tuple(row.values()) for row in json.loads(proc.stdout)]


@pytest.mark.docker
@pytest.mark.slow
def test_kill_9_of_a_sweep_leaves_no_container_no_running_run_and_resume_finishes_the_rest(
    home, docker_client, tmp_path, sweep_args
):
    args, jobs = sweep_args
    version = engine_version()
    sweep = start_sweep(home, tmp_path / "sweep.log", args)
    everyone: set[int] = set()

    def mid_sweep():
        everyone.update(group_pids(sweep.pid))
        statuses = Counter(r["status"] for r in records(home).values())
        return statuses["completed"] >= 1 and statuses["running"] >= 1 and owned_containers(docker_client, everyone)

    def frozen_mid_sweep():
        """Mid-sweep, checked again with the sweep stopped (SIGSTOP), so a run cannot end
        between the look and the kill; let go again when the moment has passed."""
        if not mid_sweep():
            return False
        os.killpg(sweep.pid, signal.SIGSTOP)
        if mid_sweep():
            return True
        os.killpg(sweep.pid, signal.SIGCONT)
        return False

    try:
        wait_for(frozen_mid_sweep, 180, "one run completed while another runs in a container")
        everyone.update(group_pids(sweep.pid))
    finally:
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=30)
    wait_for(lambda: not group_pids(sweep.pid), 30, "every process of the sweep to die")
    assert sweep.pid in everyone
    killed = {r["run_id"] for r in records(home).values() if r["status"] == "running"}
    completed_before = {r["spec_hash"] for r in records(home).values() if r["status"] == "completed"}
    assert killed and completed_before
    assert owned_containers(docker_client, everyone), "the kill should have left containers to reap"

    # The next command, whatever it is, cleans up after the dead sweep.
    rows = query(home, "SELECT run_id, status, error FROM runs")
    assert owned_containers(docker_client, everyone) == []
    # Nor does any run's bridge directory (the host side of its sockets) stay behind.
    assert [p for pid in everyone for p in Path("/tmp").glob(f"crucible-bridge-{pid}.*")] == []
    by_id = {run_id: (status, error) for run_id, status, error in rows}
    assert [s for s, _ in by_id.values()].count("running") == 0
    for run_id in killed:
        status, error = by_id[run_id]
        assert status == "error" and "owner process died" in error, (run_id, status, error)

    resumed = crucible(home, *args, "resume=true")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    # The engine's code is part of every spec: an edit to it mid-test makes every spec new.
    _content_hash.cache_clear()  # hashed again from the files, not this process's memo of them
    assert engine_version() == version, "engine code changed during the test; rerun it"
    assert resumed.stdout.count("(resume=true)") == len(completed_before), resumed.stdout
    rows = query(home, "SELECT spec_hash, status, count(*) FROM runs GROUP BY ALL")
    completed = Counter({spec: n for spec, status, n in rows if status == "completed"})
    assert len(completed) == jobs and set(completed.values()) == {1}, rows
    assert not any(status == "running" for _, status, _ in rows)
    # The progress display's last line, on stderr: every job accounted for.
    assert (
        f"{jobs}/{jobs} done, {jobs - len(completed_before)} completed, 0 failed, {len(completed_before)} skipped"
        in resumed.stderr
    ), resumed.stderr[-2000:]


@pytest.mark.docker
@pytest.mark.slow
def test_when_only_the_sweep_process_dies_its_workers_exit_and_the_next_command_cleans_up(
    home, docker_client, tmp_path
):
    log = tmp_path / "sweep.log"
    sweep = start_sweep(home, log, [*SWEEP, "hydra/launcher=joblib"])  # the guard is for a launcher's workers
    workers: set[int] = set()

    def running_in_a_container():
        workers.update(group_pids(sweep.pid) - {sweep.pid})
        running = any(r["status"] == "running" for r in records(home).values())
        return running and owned_containers(docker_client, workers)

    try:
        wait_for(running_in_a_container, 180, "a run working in a container")
        workers.update(group_pids(sweep.pid) - {sweep.pid})
        sweep.kill()  # the CLI alone, not its group
        sweep.wait(timeout=30)
        # Workers notice within a second or so; without the guard they idle for minutes.
        wait_for(lambda: not group_pids(sweep.pid), 20, "the orphaned workers to exit")
    finally:
        if group_pids(sweep.pid):  # the test failed: leave nothing behind
            os.killpg(sweep.pid, signal.SIGKILL)

    rows = query(home, "SELECT status, count(*) FROM runs GROUP BY ALL")
    assert "running" not in dict(rows), rows
    assert owned_containers(docker_client, workers) == []
    assert len(records(home)) < 8, "the sweep went on without its process"


def test_a_dead_owner_not_yet_waited_for_counts_as_dead():
    """A killed worker re-parented to an init that reaps slowly is a zombie: its containers must go."""
    child = subprocess.Popen(["true"])
    labels = {LABEL_OWNER_PID: str(child.pid), LABEL_OWNER_STARTED: process_start_time(child.pid) or ""}
    try:
        wait_for(
            lambda: Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
            10,
            "the child to become a zombie",
            interval=0.01,
        )
        assert owner_alive(labels) is False
    finally:
        child.wait()
    me = {LABEL_OWNER_PID: str(os.getpid()), LABEL_OWNER_STARTED: process_start_time(os.getpid())}
    assert owner_alive(me) is True


def test_only_workers_of_a_sweep_on_this_host_watch_its_owner(monkeypatch):
    monkeypatch.delenv(OWNER_ENV, raising=False)
    assert sweep_owner() is None  # a plain `crucible run`
    claim_sweep()
    assert sweep_owner() is None  # the owner does not watch itself
    host, pid, started = os.environ[OWNER_ENV].split(":")
    monkeypatch.setenv(OWNER_ENV, f"{host}:{os.getppid()}:{process_start_time(os.getppid())}")
    assert sweep_owner() == {LABEL_OWNER_PID: str(os.getppid()), LABEL_OWNER_STARTED: process_start_time(os.getppid())}
    monkeypatch.setenv(OWNER_ENV, f"elsewhere:{os.getppid()}:1")
    assert sweep_owner() is None  # another host's process cannot be checked from here
