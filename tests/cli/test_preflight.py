"""Mistakes found before work starts: a store that cannot be one is one line, nothing runs,
nothing is lost; and the read-only commands (query, show, report) start cheaply."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import docker
import pytest

from engine.models import RunRecord

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "mcp",
    "docker",
    "hydra",
    "omegaconf",
    "asyncssh",
    "httpx",
    "uvicorn",
    "starlette",
    "pydantic",
    "duckdb",
    "asyncio",
)
"""Packages query/show/report must not import when there is nothing to reap (``duckdb``: its
Python layer; the store uses the C extension ``_duckdb``)."""


def crucible(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "CRUCIBLE_STORE"}
    full.update({"CRUCIBLE_HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT, env=full, timeout=300
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bad_stores(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of bad store path, with the words its one line must contain."""
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    return {
        "missing-dir": (tmp_path / "no-such-dir" / "x.duckdb", "does not exist"),
        "text-file": (text, "not a DuckDB database file"),
        "empty-file": (empty, "not a DuckDB database file"),
        "directory": (tmp_path, "is a directory"),
    }


def assert_one_line(proc: subprocess.CompletedProcess, command: str, path: Path, words: str) -> None:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"crucible {command}: store {path}: "), lines[0]
    assert words in lines[0], lines[0]


def store_a_run(home: Path, monkeypatch) -> str:
    """One completed run in ``home``'s default store, recorded the way a run records it."""
    from engine.store.duckdb import DuckDBStore

    monkeypatch.setenv("CRUCIBLE_HOME", str(home))  # its spool too: never the session's
    run_id = f"preflight-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC).isoformat()
    DuckDBStore(home / "store.duckdb").record_run(
        RunRecord(
            run_id=run_id,
            spec_hash="0" * 64,
            spec={},
            status="completed",
            task_id="sample/last_page",
            agent="noop",
            model=None,
            flavor="coding",
            runtime="docker",
            integrity_requested="strict",
            integrity_obtained="strict",
            attempt=0,
            seed=0,
            sweep_id=None,
            started_at=now,
            ended_at=now,
            reward=0.0,
            image_tag="crucible/task:x",
        )
    )
    return run_id


@pytest.mark.parametrize("kind", ["text-file", "empty-file"])
@pytest.mark.parametrize("command", [["run", "agent=noop"], ["check"]], ids=["run", "check"])
def test_a_bad_default_store_opened_while_the_command_composes_is_the_same_one_line(tmp_path, command, kind):
    """The default store is opened in a thread beside the compose (engine/cli/run.py): what it
    raises is raised where the store is taken, as the same one line, and nothing runs."""
    path, words = bad_stores(tmp_path)[kind]
    before = digest(path)
    proc = crucible(tmp_path / "home", *command, "task=sample/last_page", env={"CRUCIBLE_STORE": str(path)})
    assert_one_line(proc, command[0], path, words)
    assert digest(path) == before
    assert not (tmp_path / "home" / "runs").exists(), "no run directory is made"


@pytest.mark.parametrize("kind", ["missing-dir", "text-file", "empty-file", "directory"])
@pytest.mark.parametrize("command", ["query", "show", "report"])
def test_a_bad_crucible_store_is_one_line_for_the_read_commands(tmp_path, command, kind):
    path, words = bad_stores(tmp_path)[kind]
    before = digest(path) if path.is_file() else None
    args = {"query": ["select 1"], "show": ["some-run"], "report": []}[command]
    proc = crucible(tmp_path / "home", command, *args, env={"CRUCIBLE_STORE": str(path)})
    assert_one_line(proc, command, path, words)
    if before is not None:
        assert digest(path) == before
        assert not Path(f"{path}.crucible-lock").exists(), "nothing is written beside a file that is not a store"
    if kind == "missing-dir":
        assert not path.parent.exists(), "a store's directory is never made up"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["missing-dir", "text-file", "directory"])
@pytest.mark.parametrize(
    "command",
    [["run", "agent=noop"], ["check"], ["run", "-m", "agent=noop,integration_test"]],
    ids=["run", "check", "sweep"],
)
def test_a_bad_store_override_stops_run_and_check_before_anything_starts(tmp_path, monkeypatch, command, kind):
    home = tmp_path / "home"
    home.mkdir()
    kept = store_a_run(home, monkeypatch)
    good_store = home / "store.duckdb"
    good_before = digest(good_store)
    path, words = bad_stores(tmp_path)[kind]
    before = digest(path) if path.is_file() else None
    started = time.monotonic()
    proc = crucible(home, command[0], *command[1:], "task=sample/last_page", f"store={path}")
    assert_one_line(proc, command[0], path, words)
    assert time.monotonic() - started < 60, "failed only after work was done"
    assert not (home / "runs").exists(), "no run directory is made"
    if before is not None:
        assert digest(path) == before
    # The good store (the default one here) is untouched and still has its run.
    assert digest(good_store) == good_before
    listed = crucible(home, "query", "select run_id from runs", "--csv")
    assert listed.returncode == 0, listed.stderr
    assert kept in listed.stdout


def test_a_new_store_file_in_an_existing_directory_is_created(tmp_path):
    path = tmp_path / "stores" / "fresh.duckdb"
    path.parent.mkdir()
    proc = crucible(
        tmp_path / "home", "query", "select count(*) AS n from runs", "--csv", env={"CRUCIBLE_STORE": str(path)}
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["n", "0"] and path.is_file()


@pytest.mark.slow
@pytest.mark.parametrize("command", [["query", "select count(*) from runs"], ["show", "RUN"], ["report"]])
def test_read_commands_import_no_heavy_stack_when_there_is_nothing_to_reap(tmp_path, monkeypatch, command):
    home = tmp_path / "home"
    home.mkdir()
    run_id = store_a_run(home, monkeypatch)
    argv = [run_id if arg == "RUN" else arg for arg in command]
    probe = (
        "import sys\n"
        "from engine.cli.main import main\n"
        f"code = main({argv!r})\n"
        # engine/util/deferred.py's stand-ins (httpx._main) are names, not imports: left out.
        "loaded = {m for m, module in sys.modules.items() if type(module).__name__ != 'DeferredModule'}\n"
        f"heavy = sorted({{m.split('.')[0] for m in loaded}} & set({HEAVY!r}))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    # No engine at this socket: nothing to reap there, as on a machine without Docker.
    env = {**os.environ, "CRUCIBLE_HOME": str(home), "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    env.pop("CRUCIBLE_STORE", None)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr, proc.stderr


def test_a_run_left_running_by_a_dead_process_is_marked_by_the_next_query(tmp_path, monkeypatch):
    from engine.store.duckdb import DuckDBStore

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CRUCIBLE_HOME", str(home))
    dead = subprocess.Popen(["true"])
    dead.wait()
    now = datetime.now(UTC).isoformat()
    DuckDBStore(home / "store.duckdb").record_run(
        RunRecord(
            run_id="killed-run",
            spec_hash="1" * 64,
            spec={},
            status="running",
            task_id="sample/last_page",
            agent="noop",
            model=None,
            flavor="coding",
            runtime="docker",
            integrity_requested="strict",
            integrity_obtained=None,
            attempt=0,
            seed=0,
            sweep_id=None,
            started_at=now,
            image_tag="crucible/task:x",
            owner_pid=dead.pid,
            owner_host=socket.gethostname(),
        )
    )
    proc = crucible(
        home,
        "query",
        "select status, error from runs",
        "--csv",
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "error,owner process died" in proc.stdout, proc.stdout


# ---------------------------------------------------------------- with a Docker engine


def created_containers(docker_client, since: float, owner_pid: int) -> list[str]:
    events = docker_client.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "event": "create", "label": f"crucible.owner_pid={owner_pid}"},
    )
    return [event.get("id", "")[:12] for event in events]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("command", [["run", "agent=noop"], ["check"]], ids=["run", "check"])
def test_a_bad_store_starts_no_container(tmp_path, docker_client, command):
    home = tmp_path / "home"
    path, words = bad_stores(tmp_path)["text-file"]
    since = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", command[0], *command[1:], "task=sample/last_page", f"store={path}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CRUCIBLE_HOME": str(home)},
    )
    stdout, stderr = proc.communicate(timeout=300)
    assert_one_line(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), command[0], path, words)
    assert created_containers(docker_client, since, proc.pid) == []
    assert not (home / "runs").exists()


@pytest.mark.slow
@pytest.mark.docker
def test_the_next_query_removes_a_dead_owners_container(tmp_path, docker_client, base_image):
    """The cheap pre-check (one request on the engine's socket) still leads to the reaper."""
    from engine.runtimes.docker.reaper import LABEL_RUN_ID
    from engine.runtimes.owner import owner_labels

    dead = subprocess.Popen(["true"])
    dead.wait()
    container = docker_client.containers.create(
        base_image,
        ["sleep", "infinity"],
        network_mode="none",
        labels={
            LABEL_RUN_ID: f"preflight-{uuid.uuid4().hex[:8]}",
            **owner_labels(),
            "crucible.owner_pid": str(dead.pid),
        },
    )
    try:
        proc = crucible(tmp_path / "home", "query", "select 1")
        assert proc.returncode == 0, proc.stderr
        with pytest.raises(docker.errors.NotFound):
            docker_client.api.inspect_container(container.id)
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(container.id, force=True)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("command", [["run", "-m", "agent=noop,integration_test"], ["check"]], ids=["sweep", "check"])
def test_a_missing_ref_in_one_task_of_a_selection_is_one_line_before_any_container_starts(
    tmp_path, docker_client, command
):
    """A sweep or a check over several tasks, one of which names a ref its repo lacks: one line
    naming the task and the ref, and not one container started for the good tasks either."""
    conf = tmp_path / "conf" / "task" / "mixed"
    conf.mkdir(parents=True)
    good = (ROOT / "conf" / "task" / "sample" / "last_page.yaml").read_text()
    (conf / "a_good.yaml").write_text(
        good.replace(
            "name: last_page",
            "name: last_page\nrefs: {baseline: last_page_baseline, test: last_page_test, golden: last_page_golden}",
        ).replace("set: sample", "set: mixed")
    )
    (conf / "b_bad.yaml").write_text(
        good.replace("name: last_page", "name: last_page\nrefs: {golden: no_such_branch}").replace(
            "set: sample", "set: mixed"
        )
    )
    since = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", command[0], *command[1:], "task=glob(mixed/*)"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf")},
    )
    stdout, stderr = proc.communicate(timeout=300)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "Traceback" not in stdout + stderr, stdout + stderr
    assert len(lines) == 1 and "task 'mixed/last_page'" in lines[0] and "'no_such_branch' not found" in lines[0], lines
    assert created_containers(docker_client, since, proc.pid) == []
