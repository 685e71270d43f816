"""``crucible warm``: commands started from a warm server's fork behave as the command run in
its own process would: output, exit status, the environment it reads, Ctrl-C, a killed client,
a server gone stale (engine/cli/warm.py, engine/cli/warm_server.py). Real processes, a real
Unix socket, real runs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "engine.cli.main"]
MISTAKE = ["run", "task=sample/no_such_task", "seed=3"]


def crucible(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def served(env: dict[str, str] | None = None) -> int | None:
    """How many commands the server has taken; None where none answers."""
    status = crucible("warm", "status", env=env)
    found = re.search(r"running, pid \d+, (\d+) command", status.stdout)
    return int(found.group(1)) if found else None


def start(env: dict[str, str] | None = None) -> int:
    started = crucible("warm", "start", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    return int(re.search(r"pid (\d+)", started.stdout).group(1))


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    pid = start()
    yield pid
    crucible("warm", "stop")


def test_a_user_mistake_is_the_same_line_and_status_from_the_server(server):
    before = served()
    warm = crucible(*MISTAKE)
    assert served() == before + 1  # the server ran it
    cold = crucible(*MISTAKE, env={**os.environ, "CRUCIBLE_WARM": "off"})
    assert served() == before + 1  # this one it did not
    assert warm.returncode == cold.returncode == 2
    assert warm.stderr == cold.stderr and len(warm.stderr.splitlines()) == 1, warm.stderr
    assert "unknown task 'sample/no_such_task'" in warm.stderr


def test_the_fork_takes_the_clients_environment_directory_and_streams(server, tmp_path):
    """The fork reads the client's variables and working directory and writes to its pipes;
    a read command never goes through the server."""
    before = served()
    env = {**os.environ, "ELSEWHERE": str(tmp_path / "elsewhere.duckdb")}
    shown = crucible("run", "--cfg", "job", "--resolve", "task=sample/last_page", "store=${oc.env:ELSEWHERE}", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"store: {tmp_path / 'elsewhere.duckdb'}" in shown.stdout.splitlines()
    hydra = crucible("run", "--cfg", "hydra", "task=sample/last_page", cwd=tmp_path)
    assert hydra.returncode == 0, hydra.stderr
    assert f"cwd: {tmp_path}" in [line.strip() for line in hydra.stdout.splitlines()]
    assert served() == before + 2
    crucible("query", "SELECT 1")
    assert served() == before + 2


@pytest.mark.docker
@pytest.mark.slow
def test_a_golden_run_from_the_server_is_stored_as_one_run_of_its_own(server, docker_client, base_image):
    warm = crucible("run", "task=sample/last_page", "agent=integration_test", "seed=7101")
    assert warm.returncode == 0, warm.stdout[-2000:] + warm.stderr[-2000:]
    assert "completed reward=1.0 sample/last_page" in warm.stdout
    run_id = re.search(r"run (\S+)", warm.stdout).group(1)
    _, rows = DuckDBStore().query(f"SELECT status, reward, owner_pid FROM runs WHERE run_id = '{run_id}'")
    assert len(rows) == 1 and rows[0][:2] == ("completed", 1.0)
    assert _parent_of(rows[0][2]) in (server, None)  # the server's fork (gone by now, or reaped)
    assert rows[0][2] != server


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "client killed"])
def test_a_run_whose_client_is_interrupted_or_killed_ends_canceled(server, docker_client, base_image, how):
    """Ctrl-C reaches the fork through its client; a client killed outright closes its end of the
    socket, and the fork ends the run as SIGTERM would. Either way: canceled, no container left."""
    seed = 7200 + (how == "client killed")
    client = subprocess.Popen(
        [
            *COMMAND,
            "run",
            "task=sample/last_page",
            "agent=integration_test",
            "+task.validation=[{name: bash, arguments: {command: 'sleep 20'}}]",
            "timeouts.setup=300",
            f"seed={seed}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    fork = _the_forks_container_owner(docker_client, server)
    client.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
    client.wait(timeout=120)
    if how == "ctrl-c":
        assert client.returncode == 130 and "interrupted" in client.stderr.read()
    _until_gone(fork)
    label = {"label": f"crucible.owner_pid={fork}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    _, rows = DuckDBStore().query(f"SELECT status FROM runs WHERE owner_pid = {fork} AND seed = {seed}")
    assert rows == [("canceled",)]


def test_a_stale_server_leaves_the_command_to_its_client_and_starts_again(tmp_path):
    """A module the server imported changed on disk: the client runs the command itself (the
    same answer), and the server starts again on the new code once its forks are done."""
    (tmp_path / "sitecustomize.py").write_text("")  # imported by the server at its start
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(tmp_path)}
    pid = start(env)
    try:
        assert crucible(*MISTAKE, env=env).returncode == 2
        assert served(env) == 1
        later = time.time() + 5
        os.utime(tmp_path / "sitecustomize.py", (later, later))
        stale = crucible(*MISTAKE, env=env)
        assert stale.returncode == 2 and "unknown task" in stale.stderr
        deadline = time.monotonic() + 120
        while served(env) != 0 and time.monotonic() < deadline:  # the new code's server: none served yet
            time.sleep(0.1)
        assert served(env) == 0
        assert crucible(*MISTAKE, env=env).returncode == 2
        assert served(env) == 1
        assert f"pid {pid}," in crucible("warm", "status", env=env).stdout  # started again in place
    finally:
        crucible("warm", "stop", env=env)
    assert crucible("warm", "status", env=env).returncode == 1


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _the_forks_container_owner(docker_client, server: int) -> int:
    """The pid of the server's fork running the run, once the run has a container."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for container in docker_client.containers.list(ignore_removed=True):
            owner = container.labels.get("crucible.owner_pid")
            if owner and _parent_of(int(owner)) == server:
                return int(owner)
        time.sleep(0.05)
    raise AssertionError("the run never started a container")


def _until_gone(pid: int) -> None:
    deadline = time.monotonic() + 120
    while Path(f"/proc/{pid}").exists() and _parent_of(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
