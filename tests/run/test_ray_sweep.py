"""A sweep on a real Ray cluster (``hydra/launcher=ray``) whose workers share no file system
with the store: every run comes back as data and is stored exactly once; a worker killed
mid-run leaves its job an infrastructure error, the sweep ends, and ``resume=true`` runs
exactly what is left.

The cluster is started here on loopback: a head with no CPUs (it runs nothing but the
launcher's job board), and two worker nodes of one CPU each, each in its own working
directory with its own CRUCIBLE_HOME, inside ``bwrap`` with the launcher's home (store,
runs, caches) hidden under an empty tmpfs: a worker that tried to open the store would
find no file there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
SWEEP = ["run", "-m", "agent=noop,integration_test", "hydra/launcher=ray"]
# Each test its own tasks, so specs the other stored do not count as done (resume=true).
STORED_ONCE = "task=sample/last_page,sample/query_ops"
KILLED = "task=sample/negative_money,sample/snapshot_alias"


def _need(what: str, present: bool) -> None:
    if not present:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {what} is missing")
        pytest.skip(f"{what} is missing")


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    """The launcher's environment: its own CRUCIBLE_HOME, hidden from the workers."""
    worker_homes: list[Path]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cpus(address: str, env: dict[str, str]) -> float:
    proc = subprocess.run([str(RAY), "status", f"--address={address}"], capture_output=True, text=True, env=env)
    found = re.search(r"([\d.]+)/([\d.]+) CPU", proc.stdout)
    return float(found.group(2)) if found else 0.0


def wait_for(condition, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, docker_client, base_image):
    _need("the ray extra (hydra-ray-launcher, ray)", RAY.exists())
    _need("bubblewrap (bwrap)", shutil.which("bwrap") is not None)
    root = tmp_path_factory.mktemp("ray")
    launcher_home = root / "launcher"
    launcher_home.mkdir()
    env = {**os.environ, "CRUCIBLE_HOME": str(launcher_home), "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    env["RAY_AUTH_MODE"] = "disabled"  # loopback only; a token would have to reach every node
    env.pop("CRUCIBLE_STORE", None)
    env.pop("CI", None)  # the progress line's cadence is not under test here
    address = f"127.0.0.1:{_free_port()}"
    common = ["--node-ip-address=127.0.0.1", "--object-store-memory=100000000", "--block"]
    started = [
        subprocess.Popen(
            [
                str(RAY),
                "start",
                "--head",
                f"--port={address.split(':')[1]}",
                "--num-cpus=0",
                "--include-dashboard=false",
                *common,
            ],
            env=env,
            cwd=root,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    homes = []
    try:
        wait_for(lambda: "Active" in _status(address, env), 60, "the head node", interval=0.5)
        for n in (1, 2):  # one at a time: two nodes registering at once on one host can time out
            cwd = root / f"worker{n}"
            homes.append(cwd / "home")
            homes[-1].mkdir(parents=True)
            hidden = ["--tmpfs", str(launcher_home)]  # the launcher's home: an empty dir here
            jail = ["bwrap", "--bind", "/", "/", "--dev-bind", "/dev", "/dev", *hidden, "--chdir", str(cwd)]
            log = root / f"worker{n}.log"
            started.append(
                subprocess.Popen(
                    [*jail, str(RAY), "start", f"--address={address}", "--num-cpus=1", *common],
                    env={**env, "CRUCIBLE_HOME": str(homes[-1])},
                    start_new_session=True,
                    stdout=log.open("w"),
                    stderr=subprocess.STDOUT,
                )
            )
            wait_for(lambda n=n: _ray_cpus(address, env) == n or started[-1].poll() is not None, 90, f"worker node {n}")
            assert started[-1].poll() is None, log.read_text()[-3000:]
        yield Cluster(address, env, homes)
    finally:
        # Killed, not stopped: a node told to stop drains for up to 30 s.
        for proc in reversed(started):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _status(address: str, env: dict[str, str]) -> str:
    return subprocess.run([str(RAY), "status", f"--address={address}"], capture_output=True, text=True, env=env).stdout


def crucible(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def query(env: dict, sql: str) -> list[tuple]:
    proc = crucible(env, "query", sql, "--json")
    assert proc.returncode == 0, proc.stderr
    return [tuple(row.values()) for row in json.loads(proc.stdout)]


def _in_a_worker_node(pid: int, cluster: Cluster) -> bool:
    """Whether ``pid`` is a process of one of this cluster's worker nodes (by its CRUCIBLE_HOME)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(f"CRUCIBLE_HOME={home}".encode() in environ for home in cluster.worker_homes)


def sweep_id_of(output: str) -> str:
    found = re.search(r"^sweep (\S+): \d+ run\(s\) stored", output, re.M)
    assert found, output[-3000:]
    return found.group(1)


@pytest.mark.docker
@pytest.mark.slow
def test_a_sweep_on_workers_without_the_store_stores_every_run_once_under_the_launchers_sweep_dir(cluster):
    proc = crucible(cluster.env, *SWEEP, STORED_ONCE, f"hydra.launcher.ray.init.address={cluster.address}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep = sweep_id_of(proc.stdout)
    rows = query(cluster.env, f"SELECT run_id, agent, reward, run_dir, host FROM runs WHERE sweep_id = '{sweep}'")
    assert len(rows) == 4 and len({r[0] for r in rows}) == 4, rows
    assert sorted((agent, reward) for _, agent, reward, _, _ in rows) == [
        ("integration_test", 1.0),
        ("integration_test", 1.0),
        ("noop", 0.0),
        ("noop", 0.0),
    ]
    sweep_dir = Path(cluster.env["CRUCIBLE_HOME"], "runs", "sweeps", sweep)
    for run_id, _, _, run_dir, host in rows:
        assert Path(run_dir).parent == sweep_dir, run_dir
        assert json.loads((Path(run_dir) / "record.json").read_text())["run_id"] == run_id
        assert (Path(run_dir) / "spec.json").is_file()  # the run's files came back with it
        assert host.startswith("ray node "), host  # the worker it ran on
    # The jobs ran in the workers' own homes (Hydra's record of where, which came back with
    # each run) and left nothing there; the launcher's home saw none of it.
    ran_in = {Path(r[3], ".hydra", "hydra.yaml").read_text().split("output_dir: ")[1].split()[0] for r in rows}
    assert {Path(d).parents[2] for d in ran_in} <= set(cluster.worker_homes), ran_in
    assert [p for home in cluster.worker_homes for p in (home / "ray-jobs").rglob("*") if p.is_file()] == []
    assert not (Path(cluster.env["CRUCIBLE_HOME"]) / "ray-jobs").exists()


def sweep_with_a_worker_killed(cluster: Cluster, docker_client, args: list[str], log: Path) -> tuple[str, int, str]:
    """Run the sweep ``args``; kill the worker process of one run while it works in a
    container; wait for the sweep to end. Its output, the pid killed and the run it ran."""
    import docker.errors

    with log.open("w") as out:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", *args], cwd=ROOT, env=cluster.env, stdout=out, stderr=out
        )

    def frozen_worker_mid_run() -> tuple[int, str] | None:
        """A run's container up, its worker process stopped (SIGSTOP) and the container still
        there: the run cannot end between the look and the kill."""
        for container in docker_client.api.containers(filters={"label": "crucible.run_id"}):
            labels = container["Labels"]
            pid = int(labels.get("crucible.owner_pid", "0"))
            if not _in_a_worker_node(pid, cluster):
                continue  # another sweep's on this engine, or the launcher's own
            os.kill(pid, signal.SIGSTOP)
            try:
                docker_client.api.inspect_container(container["Id"])
                return pid, labels["crucible.run_id"]
            except docker.errors.NotFound:
                os.kill(pid, signal.SIGCONT)
        return None

    try:
        pid, run_id = wait_for(frozen_worker_mid_run, 120, "a run working in a container on a worker")
        os.kill(pid, signal.SIGKILL)
        assert sweep.wait(timeout=240) == 0, log.read_text()[-3000:]
    finally:
        if sweep.poll() is None:
            sweep.kill()
    return log.read_text(), pid, run_id


@pytest.mark.docker
@pytest.mark.slow
def test_a_worker_killed_mid_run_leaves_an_infrastructure_error_and_resume_runs_exactly_that_job(
    cluster, docker_client, tmp_path
):
    args = [*SWEEP, KILLED, f"hydra.launcher.ray.init.address={cluster.address}", "retries.infrastructure=0"]
    output, pid, run_id = sweep_with_a_worker_killed(cluster, docker_client, args, tmp_path / "sweep.log")
    sweep_id = sweep_id_of(output)
    rows = query(
        cluster.env, f"SELECT run_id, status, infrastructure, host, error FROM runs WHERE sweep_id = '{sweep_id}'"
    )
    assert len(rows) == 4, rows
    by_id = {r[0]: r[1:] for r in rows}
    status, infrastructure, host, error = by_id[run_id]
    assert (status, infrastructure) == ("error", True), by_id[run_id]
    assert host.startswith("ray node ") and f"pid {pid}" in error, by_id[run_id]
    assert [r[1] for r in rows].count("completed") == 3, rows
    assert docker_client.api.containers(all=True, filters={"label": f"crucible.run_id={run_id}"}) == []

    resumed = crucible(cluster.env, *args, "resume=true")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.stdout.count("(resume=true)") == 3, resumed.stdout
    again = query(cluster.env, f"SELECT status FROM runs WHERE sweep_id = '{sweep_id_of(resumed.stdout)}'")
    assert again == [("completed",)], again


@pytest.mark.docker
@pytest.mark.slow
def test_a_task_repo_only_the_launcher_has_travels_with_its_job(cluster):
    """A task repo at a path in the launcher's home, which the workers cannot see: it goes with
    the job as a git bundle, and the worker's copy plans to the launcher's spec hash."""
    from engine.plan.repos import resolve_repo

    generated = resolve_repo("generated://sample")
    repo = Path(cluster.env["CRUCIBLE_HOME"]) / "only-here.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(generated), str(repo)], check=True)
    args = ["run", "-m", "task=sample/last_page", "agent=noop,integration_test", f"task.repo={repo}"]
    proc = crucible(cluster.env, *args, "hydra/launcher=ray", f"hydra.launcher.ray.init.address={cluster.address}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = query(cluster.env, f"SELECT agent, reward FROM runs WHERE sweep_id = '{sweep_id_of(proc.stdout)}'")
    assert sorted(rows) == [("integration_test", 1.0), ("noop", 0.0)], rows
    copies = [p for home in cluster.worker_homes for p in (home / "sent-repos").glob("*.git")]
    assert copies, "no worker received the repo"


def _module(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.docker
@pytest.mark.slow
def test_a_task_its_repo_and_its_lock_only_the_launcher_has_travel_with_the_job(cluster):
    """A task defined, and locked, in a config dir in the launcher's home, its repo there too
    (tests/plan/test_lock.py's): the worker composes the job from the config Hydra sends, gets
    the repo as a bundle and plans with the launcher's lock (its named tests are in the spec:
    without it the worker's spec hash would differ and the job be refused)."""
    lock_tests = _module(ROOT / "tests" / "plan" / "test_lock.py", "lock_tests")
    where = Path(cluster.env["CRUCIBLE_HOME"]) / "lk"
    where.mkdir()
    repo = lock_tests.task_repo(where, lock_tests.STEADY_SUITE)
    conf = where / "conf" / "task" / "lk"
    conf.mkdir(parents=True)
    (conf / "calc.yaml").write_text(
        f"name: calc\nset: lk\nrepo: {repo}\ntest_command: python3 -m pytest -q -p no:cacheprovider tests\n"
        "prompt: add(1, 1) is 0. Please fix add.\nsystem_packages: [python3, python3-pytest]\n"
    )
    env = {**cluster.env, "CRUCIBLE_CONFIG_PATH": str(where / "conf")}
    locked = crucible(env, "lock", "task=lk/calc")
    assert locked.returncode == 0 and (conf / "calc.lock").is_file(), locked.stdout[-2000:] + locked.stderr[-2000:]
    args = ["run", "-m", "task=lk/calc", "agent=noop,integration_test", "hydra/launcher=ray"]
    proc = crucible(env, *args, f"hydra.launcher.ray.init.address={cluster.address}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = query(env, f"SELECT agent, reward, spec FROM runs WHERE sweep_id = '{sweep_id_of(proc.stdout)}'")
    assert sorted(r[:2] for r in rows) == [("integration_test", 1.0), ("noop", 0.0)], rows
    assert all(json.loads(r[2])["task"]["fail_to_pass"] == lock_tests.F2P for r in rows)  # the lock's


@pytest.mark.docker
@pytest.mark.slow
def test_a_worker_that_lacks_an_input_of_the_launchers_says_so_in_one_line(cluster, tmp_path):
    """A Harbor dataset in the launcher's home, which the workers cannot see (a task folder does
    not travel: docs/scale.md)."""
    harbor_tasks = _module(ROOT / "tests" / "flavors" / "harbor" / "harbor_tasks.py", "harbor_tasks")
    dataset = Path(cluster.env["CRUCIBLE_HOME"]) / "dataset"
    harbor_tasks._sh(dataset, "totals")
    harbor_tasks.source_conf(tmp_path / "conf", "only-here", dataset)
    env = {**cluster.env, "CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf")}
    args = ["run", "-m", "task=harbor/only-here/totals", "agent=noop", "hydra/launcher=ray"]
    proc = crucible(env, *args, f"hydra.launcher.ray.init.address={cluster.address}")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("crucible run: on worker ray node")]
    assert len(said) == 1 and str(dataset) in said[0] and "cannot be read" in said[0], proc.stderr[-3000:]
    assert any(line.startswith("job 0 did not run: on worker ray node") for line in proc.stderr.splitlines())
    assert "Traceback" not in proc.stderr
    assert "0 run(s) stored" in proc.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_a_job_whose_worker_died_is_tried_again_on_the_cluster_as_the_retry_policy_allows(
    cluster, docker_client, tmp_path
):
    args = [*SWEEP, STORED_ONCE, f"hydra.launcher.ray.init.address={cluster.address}", "retries.infrastructure=1"]
    output, _, run_id = sweep_with_a_worker_killed(cluster, docker_client, args, tmp_path / "sweep.log")
    sweep = sweep_id_of(output)
    rows = query(
        cluster.env, f"SELECT run_id, status, infrastructure, retry_of, run_dir FROM runs WHERE sweep_id = '{sweep}'"
    )
    assert len(rows) == 5, rows
    by_id = {r[0]: r[1:] for r in rows}
    assert by_id[run_id][:2] == ("error", True), by_id[run_id]
    (retry,) = [r for r in rows if r[3] == run_id]
    assert retry[1:3] == ("completed", False), retry
    assert Path(retry[4]) == Path(by_id[run_id][3]) / "retry-1", retry
    assert [r[1] for r in rows].count("completed") == 4, rows
    assert "4/4 done, 4 completed, 0 failed" in output, output[-2000:]


@pytest.mark.docker
@pytest.mark.slow
def test_a_sweep_interrupted_while_a_worker_runs_a_job_records_that_run_canceled(cluster, docker_client, tmp_path):
    """Ctrl-C on the launcher: the Ray tasks are cancelled, and the run a worker had started
    (frozen there, so it cannot finish first) is recorded ``canceled`` here, not lost."""
    args = [*SWEEP, STORED_ONCE, "seed=7", f"hydra.launcher.ray.init.address={cluster.address}"]
    log = tmp_path / "sweep.log"
    with log.open("w") as out:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", *args], cwd=ROOT, env=cluster.env, stdout=out, stderr=out
        )

    def frozen_worker_mid_run() -> str | None:
        for container in docker_client.api.containers(filters={"label": "crucible.run_id"}):
            labels = container["Labels"]
            pid = int(labels.get("crucible.owner_pid", "0"))
            if _in_a_worker_node(pid, cluster):
                os.kill(pid, signal.SIGSTOP)
                return labels["crucible.run_id"]
        return None

    try:
        run_id = wait_for(frozen_worker_mid_run, 120, "a run working in a container on a worker")
        sweep.send_signal(signal.SIGINT)
        assert sweep.wait(timeout=120) != 0, log.read_text()[-3000:]
    finally:
        if sweep.poll() is None:
            sweep.kill()
    rows = query(cluster.env, "SELECT run_id, status, host, error FROM runs WHERE seed = 7")
    by_id = {r[0]: r[1:] for r in rows}
    assert run_id in by_id, (rows, log.read_text()[-3000:])
    status, host, error = by_id[run_id]
    assert (status, error) == ("canceled", "canceled by the user") and host.startswith("ray node "), by_id[run_id]
    assert all(r[1] in ("completed", "canceled") for r in rows), rows  # none left "running", none an error
    assert docker_client.api.containers(all=True, filters={"label": f"crucible.run_id={run_id}"}) == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_dataset_row_only_the_launcher_has_travels_with_its_job(cluster, tmp_path_factory, base_image):
    """A SWE-bench Pro instance (tests/swe_synth.py) whose dataset file is in the launcher's home,
    which the workers cannot see: its row is in the config Hydra sends. The benchmark's own
    checkout (run scripts, Dockerfiles) is where every worker has it, as a real cluster would."""
    import swe_synth

    generated = swe_synth.generate(tmp_path_factory.mktemp("swe-ray"), base_image)
    dataset = Path(cluster.env["CRUCIBLE_HOME"]) / "dataset.jsonl"
    shutil.move(generated["dataset"], dataset)
    env = {**cluster.env, **swe_synth.env_for({**generated, "dataset": dataset})}
    instance = generated["instances"][0].instance_id
    args = ["run", "-m", f"task=swebench_pro/{instance}", "agent=noop,integration_test", "hydra/launcher=ray"]
    proc = crucible(env, *args, f"hydra.launcher.ray.init.address={cluster.address}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = query(env, f"SELECT agent, reward, host FROM runs WHERE sweep_id = '{sweep_id_of(proc.stdout)}'")
    assert sorted(r[:2] for r in rows) == [("integration_test", 1.0), ("noop", 0.0)], rows
    assert all(host.startswith("ray node ") for _, _, host in rows)
