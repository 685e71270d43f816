"""Whole commands over two Docker hosts simulated on this machine (``two_hosts.py``): a second
dockerd on its own socket and data root ("d2"), and an ``ssh://`` host reached through the real
OpenSSH client (an asyncssh server on loopback in front of this machine's engine).

- A sample task ships on each host (``crucible check``: golden 1, baseline 0), and a coding CLI
  (the real ``claude``; its model a local stand-in, as no hosted API is reachable here) reaches
  the run's MCP server and its model through the bridge relayed to that host, and scores 1.
- A sweep spreads over both hosts within their slots; d2 dying mid-sweep (its dockerd frozen
  while it holds a run, then killed, as a machine that is lost) labels the runs it held as
  infrastructure errors with d2 as their host, the sweep finishes on the other host, and
  ``resume=true`` runs exactly those again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker
import pytest
from standin import StandIn, answer, call, golden_edits, offered, reply

from engine.store.duckdb import DuckDBStore

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[3]
KEY_ENV = "CRUCIBLE_TEST_CLI_KEY"
KEY = "sk-standin-hosts-71f2a9"
MODEL = "anthropic/claude-sonnet-4-6"
SWEEP = ["run", "-m", "task=glob(sample/*)", "agent=noop,integration_test", "hydra.launcher.n_jobs=3"]


@pytest.fixture
def home(tmp_path) -> dict[str, str]:
    """The commands' environment: a home of the test's own (its store, its runs)."""
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    env.pop("CRUCIBLE_STORE", None)
    return env


def hosts(*entries: tuple[str, int]) -> str:
    return "runtime.hosts=[" + ",".join(f"{{url:'{url}',slots:{slots}}}" for url, slots in entries) + "]"


def crucible(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=PROJECT, env=env, timeout=900
    )


def finished(sweep: subprocess.Popen, log: Path, within: float = 480) -> int:
    """The sweep's exit code; one still going after ``within`` seconds is hung: its threads'
    stacks go to its log (``PYTHONFAULTHANDLER``, SIGABRT) and the test fails with the log."""
    try:
        return sweep.wait(timeout=within)
    except subprocess.TimeoutExpired:
        busy = cpu_seconds(sweep.pid)
        time.sleep(2)  # a diagnosis, not a wait: whether its loop spins (a cancel refused) or sleeps
        busy = cpu_seconds(sweep.pid) - busy
        sweep.send_signal(signal.SIGABRT)
        sweep.wait(timeout=60)
        pytest.fail(
            f"the sweep is hung after {within:.0f} s ({busy:.2f} CPU-s in its last 2 s):\n"
            + hang_report(log.read_text())
        )


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user and system), from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    utime, stime = stat[stat.rfind(")") + 2 :].split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def hang_report(log: str, limit: int = 12000) -> str:
    """What a hung sweep's log says, most telling first, within ``limit`` characters (a CI
    report keeps a failure's head and tail only): the stack of the thread that runs the event
    loop (faulthandler's "Current thread", which took the SIGABRT), then the sweep's own lines
    (which runs ended, which were still going), then the other threads' stacks."""
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Current thread ")), None)
    main: list[str] = []
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
        main, lines = lines[start:end], lines[:start] + lines[end:]
    own = [line for line in lines if line and not line.startswith(("  ", "Thread 0x", "Fatal Python", "Extension"))]
    others = [line for line in lines if line.startswith(("  ", "Thread 0x"))]
    report = "\n".join([*main, "", "-- the sweep's lines --", *own[-60:], "", "-- other threads --", *others])
    return report[:limit]


def stored(env: dict[str, str], sql: str) -> list[tuple]:
    return DuckDBStore(Path(env["CRUCIBLE_HOME"]) / "store.duckdb").query(sql)[1]


# -- a sample ships on each host, MCP through the relay ---------------------------------------------


def fixer(turn):
    """The stand-in model: look around (the relayed bridge included), then the golden's edits."""
    if turn.task is None:
        return answer("ok")
    if turn.turn == 0:
        return reply("Looking.", call(offered(turn, "bash"), command="ls /run/crucible"))
    if turn.turn == 1:
        return reply("Fixing.", *golden_edits(turn))
    return answer("Fixed.")


@pytest.mark.parametrize("which", ["d2", "ssh"])
def test_a_sample_ships_on_each_host_and_a_cli_reaches_mcp_through_the_relay(which, request, home, tmp_path):
    url = request.getfixturevalue(which).url
    home = {**home, "PATH": os.environ["PATH"]}  # the ssh host's client set-up, made after ``home``
    check = crucible(home, "check", "task=sample/last_page", hosts((url, 2)))
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    [row] = [line.split() for line in check.stdout.splitlines() if line.startswith("sample/last_page")]
    assert row[1:3] == ["1", "0"], check.stdout
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        json.dumps({"models": {MODEL: {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75, "output": 15.0}}})
    )
    env = {**home, KEY_ENV: KEY, "CRUCIBLE_PRICES": str(prices)}
    with StandIn(fixer, require_key=KEY) as api:
        proc = crucible(
            env,
            "run",
            "task=sample/last_page",
            "agent=claude_code",
            f"model={MODEL}",
            f"agent.api_key_env={KEY_ENV}",
            f"agent.base_url={api.base_url}",
            hosts((url, 1)),
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [(run_id, reward, host)] = stored(
        env, "SELECT run_id, reward, host FROM runs WHERE agent = 'claude_code' ORDER BY started_at DESC LIMIT 1"
    )
    steps = stored(env, f"SELECT tool, is_error, result FROM steps WHERE run_id = '{run_id}'")
    assert (reward, host) == (1.0, url), (proc.stdout[-2000:], steps)
    steps = stored(env, f"SELECT tool, result FROM steps WHERE run_id = '{run_id}' AND capability = 'mcp'")
    # The CLI's first MCP call listed the bridge it reached the server through: the relay's sockets.
    assert steps[0][0] == "bash" and "mcp.sock" in steps[0][1] and "model.sock" in steps[0][1], steps
    assert "str_replace_based_edit_tool" in [tool for tool, _ in steps]


# -- a sweep over both, one dying ----------------------------------------------------------------


class Occupancy:
    """The most runs of one sweep (by its process's owner label) that had containers on each
    host at once, looked at until ``stop``: a container lives within its run's slot, so a run
    seen is a slot held (a look can miss a moment, never invent one)."""

    def __init__(self, urls: list[str], owner_pid: int) -> None:
        self.clients = {url: docker.DockerClient(base_url=url, timeout=10) for url in urls}
        self.owner_pid, self.most = owner_pid, dict.fromkeys(urls, 0)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._look, daemon=True)
        self.thread.start()

    def _look(self) -> None:
        label = f"crucible.owner_pid={self.owner_pid}"
        while not self.done.is_set():
            for url, client in self.clients.items():
                try:
                    held = {
                        c.labels["crucible.run_id"] for c in client.containers.list(all=True, filters={"label": label})
                    }
                except Exception:  # noqa: BLE001 - a host that went away holds nothing we can see
                    continue
                self.most[url] = max(self.most[url], len(held))
            self.done.wait(0.05)

    def stop(self) -> dict[str, int]:
        self.done.set()
        self.thread.join(30)
        return self.most


def test_one_host_with_fewer_slots_than_parallel_runs_runs_the_sweep_one_run_at_a_time(home, tmp_path):
    """Three runs at once, one listed host with one slot: every run ends. (A run used to take
    its running slot before its host's slot, and runs started ahead took the host's slot while
    they waited for a running one: the sweep waited for ever after its first runs.)"""
    local = "unix:///var/run/docker.sock"
    with (tmp_path / "sweep.log").open("w") as log:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", *SWEEP, hosts((local, 1))],
            cwd=PROJECT, env=home, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    occupancy = Occupancy([local], sweep.pid)
    try:
        code = finished(sweep, tmp_path / "sweep.log")
    finally:
        most = occupancy.stop()
        if sweep.poll() is None:
            sweep.kill()
    out = (tmp_path / "sweep.log").read_text()
    assert code == 0, out
    sweep_id = re.search(r"^sweep (\S+): 8 run\(s\) stored", out, re.M)
    assert sweep_id, out
    runs = stored(home, f"SELECT status, host FROM runs WHERE sweep_id = '{sweep_id.group(1)}'")
    assert runs == [("completed", local)] * 8, runs
    assert most[local] == 1, most  # never two runs' containers on the host at once


def _holds_a_run(daemon) -> bool:
    try:
        client = docker.DockerClient(base_url=daemon.url, timeout=10)
        return bool(client.containers.list(filters={"label": "crucible.purpose=agent"}))
    except Exception:  # noqa: BLE001 - not up yet, or between two looks
        return False


def test_a_sweep_spreads_within_slots_survives_a_host_dying_and_resume_completes_it(d2, ssh, home, tmp_path):
    spread = [*SWEEP, hosts((d2.url, 1), (ssh.url, 2)), "retries.infrastructure=0"]
    with (tmp_path / "sweep.log").open("w") as log:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", *spread], cwd=PROJECT, env=home, stdout=log, stderr=subprocess.STDOUT
        )
    occupancy = Occupancy([d2.url, "unix:///var/run/docker.sock"], sweep.pid)  # ssh's engine is this one
    try:
        deadline = time.monotonic() + 600
        while not _holds_a_run(d2):  # d2 has a run of the sweep in hand: it dies now
            assert sweep.poll() is None and time.monotonic() < deadline, (tmp_path / "sweep.log").read_text()
            time.sleep(0.05)
        d2.lose()  # frozen, so the run it holds cannot end first; then gone with all it ran
        assert finished(sweep, tmp_path / "sweep.log") == 0, (
            tmp_path / "sweep.log"
        ).read_text()  # it ran: its runs say the rest
    finally:
        most = occupancy.stop()
        if sweep.poll() is None:
            sweep.kill()
    out = (tmp_path / "sweep.log").read_text()
    sweep_id = re.search(r"^sweep (\S+): 8 run\(s\) stored", out, re.M)
    assert sweep_id, out
    runs = stored(
        home,
        "SELECT status, infrastructure, host, error_phase, task_id, agent FROM runs "
        f"WHERE sweep_id = '{sweep_id.group(1)}'",
    )
    failed = [r for r in runs if r[1]]
    assert failed and all(status == "error" and host == d2.url for status, _, host, *_ in failed), runs
    assert all(
        f"InfrastructureError: Docker host {d2.url} unreachable" in line
        for line in out.splitlines()
        if line.startswith("error ")
    ), out
    assert all(status == "completed" for status, infra, *_ in runs if not infra), runs
    assert {host for _, _, host, *_ in runs} == {d2.url, ssh.url}, runs  # spread over both
    assert 1 <= most[d2.url] <= 1 and 1 <= most["unix:///var/run/docker.sock"] <= 2, most  # within their slots
    assert "error (infrastructure)" in out and "infrastructure" in out.split("pass rate")[1], out
    # d2 comes back; a resume runs exactly what the infrastructure failed, and d2 is rid of the
    # dead sweep's containers when the resume first reaches it.
    d2.start()
    resumed = crucible(home, *spread[:-1], "resume=true")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    skipped = [line for line in resumed.stdout.splitlines() if line.startswith("skip ")]
    ran = [line for line in resumed.stdout.splitlines() if line.startswith("completed")]
    assert (len(skipped), len(ran)) == (8 - len(failed), len(failed)), resumed.stdout
    assert sorted(line.split()[2:4] for line in ran) == sorted([task, agent] for *_, task, agent in failed)
    leftovers = docker.DockerClient(base_url=d2.url, timeout=30).containers.list(
        all=True, filters={"label": f"crucible.owner_pid={sweep.pid}"}
    )
    assert leftovers == []
