"""``query``, ``show`` and ``report`` answered by the warm server's reader (engine/cli/warm_reader.py):
one long-lived process, one command after another, each answered exactly as the command in its
own process answers it, with nothing of one command left for the next. Real processes, a real
Unix socket, a real DuckDB store."""

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store_writer import make_record  # noqa: E402

from engine.store.duckdb import DuckDBStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "engine.cli.main"]
ENDLESS = "SELECT count(*) FROM range(1000000000000000) t(x) WHERE x % 7 = 3"
"""A statement that runs for hours: only an interrupt ends it."""
WITHIN = 120.0
"""Seconds to wait for an event before the test fails (never a time the event must beat)."""


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A home of its own (so its own server) with three runs stored, and its server started."""
    home = tmp_path_factory.mktemp("reader-home")
    env = {k: v for k, v in os.environ.items() if k not in ("CRUCIBLE_STORE", "CRUCIBLE_WARM")}
    env["CRUCIBLE_HOME"] = str(home)
    _store_with(home / "store.duckdb", runs=3)
    subprocess.run(
        [*COMMAND, "query", "SELECT 1"], env={**env, "CRUCIBLE_WARM": "off"}, cwd=ROOT, check=True, capture_output=True
    )
    started = crucible("warm", "start", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    yield env
    crucible("warm", "stop", env=env)


def _store_with(path: Path, runs: int, writer: int = 0) -> None:
    store = DuckDBStore(path)
    for i in range(runs):
        store.write_run_record(make_record(writer, i, "completed", os.getpid(), "test", None), None)
    store.ingest_pending()


def crucible(*args: str, env: dict[str, str], cwd: Path = ROOT, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600, **kwargs)


def status(env: dict[str, str]) -> dict[str, object]:
    """What ``crucible warm status`` says of the server and its reader."""
    said = crucible("warm", "status", env=env).stdout
    served = re.search(r"running, pid (\d+), (\d+) command", said)
    reader = re.search(r"reader pid (\d+), (\d+) read\(s\), (busy|idle)", said)
    assert served, said
    return {
        "served": int(served.group(2)),
        "reader": int(reader.group(1)) if reader else None,
        "reads": int(reader.group(2)) if reader else 0,
        "busy": bool(reader) and reader.group(3) == "busy",
    }


def until(condition, what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {WITHIN} s"
        time.sleep(0.05)


def following(pid: int) -> bool:
    """Whether a client has its command started and follows it: it catches SIGWINCH (to pass it
    on) only from then (engine/cli/warm.py's ``_follow``); a bare interpreter does not."""
    try:
        caught = re.search(r"^SigCgt:\s*([0-9a-f]+)", Path(f"/proc/{pid}/status").read_text(), re.M)
    except OSError:
        return False
    return bool(caught) and bool(int(caught.group(1), 16) & (1 << (signal.SIGWINCH - 1)))


def the_reader(env: dict[str, str]) -> int:
    """The reader's pid, after a read that starts it if none has yet."""
    assert crucible("query", "SELECT 1", env=env).returncode == 0
    reader = status(env)["reader"]
    assert isinstance(reader, int)
    return reader


def endless(env: dict[str, str]) -> subprocess.Popen:
    client = subprocess.Popen(
        [*COMMAND, "query", ENDLESS], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    until(lambda: following(client.pid) or client.poll() is not None, "client following its read")
    assert client.poll() is None, client.communicate()
    return client


READS = [
    ["query", "SELECT run_id, status FROM runs ORDER BY run_id"],
    ["query", "SELECT count(*) AS n FROM runs", "--json"],
    ["query", "SELECT count(*) FROM runs", "--csv"],
    ["query", "SELECT no_such_column FROM runs"],
    ["query", ""],
    ["show", "w0-run001"],
    ["show", "w0-run002", "--json"],
    ["show", "no-such-run"],
    ["report"],
    ["report", "--no-such-option"],
    ["query", "--help"],
]


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a)[:40] for a in READS])
def test_a_read_from_the_reader_is_the_command_in_its_own_process(env, argv):
    before = status(env)
    warm = crucible(*argv, env=env)
    after = status(env)
    assert after["reads"] == before["reads"] + 1 and after["reader"] is not None  # the reader answered
    cold = crucible(*argv, env={**env, "CRUCIBLE_WARM": "off"})
    assert status(env)["served"] == after["served"]  # this one ran in its own process
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_one_reader_answers_each_client_in_its_own_directory_and_environment(env, tmp_path):
    """The same process, command after command: a relative --store is the client's directory's,
    CRUCIBLE_STORE the client's environment's, and neither is left for the next command."""
    for name, runs in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        _store_with(tmp_path / name / "runs.duckdb", runs, writer=1)
    count = "SELECT count(*) AS n FROM runs"
    readers = set()
    answers = []
    for cwd, extra in (
        (tmp_path / "a", ["--store", "runs.duckdb"]),
        (tmp_path / "b", ["--store", "runs.duckdb"]),
        (tmp_path, []),
        (ROOT, []),
    ):
        run_env = {**env, "CRUCIBLE_STORE": str(tmp_path / "b" / "runs.duckdb")} if cwd == tmp_path else env
        answer = crucible("query", count, "--csv", *extra, env=run_env, cwd=cwd)
        assert answer.returncode == 0, answer.stderr
        answers.append(answer.stdout.splitlines()[-1])
        readers.add(status(env)["reader"])
    assert answers == ["1", "2", "2", "3"]  # a's, b's, CRUCIBLE_STORE's (b), then the home's own again
    assert len(readers) == 1 and None not in readers


@pytest.mark.slow
def test_ctrl_c_interrupts_a_read_in_the_reader_as_in_its_own_process(env):
    """A statement that would run for hours ends at Ctrl-C (the command's own process only sees
    it once DuckDB returns); the reader then answers the next read."""
    reader = the_reader(env)
    client = endless(env)
    assert status(env)["busy"]
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=WITHIN)
    assert client.returncode == 130 and err == "crucible query: interrupted\n" and out == ""
    until(lambda: not status(env)["busy"], "idle reader")
    again = crucible("query", "SELECT 41 + 1 AS answer", "--csv", env=env)
    assert again.stdout == "answer\n42\n" and status(env)["reader"] == reader


@pytest.mark.slow
@pytest.mark.parametrize("how", ["client killed", "hangup"])
def test_a_read_whose_client_dies_or_hangs_up_stops_and_the_reader_serves_on(env, how):
    """Nobody waits for the answer any more: the statement is interrupted, not left to burn a
    core for hours. A hang-up ends the client by SIGHUP, as it ends the command's own process."""
    reader = the_reader(env)
    client = endless(env)
    client.send_signal(signal.SIGKILL if how == "client killed" else signal.SIGHUP)
    client.communicate(timeout=WITHIN)
    assert client.returncode == -(signal.SIGKILL if how == "client killed" else signal.SIGHUP)
    until(lambda: not status(env)["busy"], "idle reader")
    before = status(env)["reads"]
    again = crucible("query", "SELECT 6 * 7 AS answer", "--csv", env=env)
    assert again.stdout == "answer\n42\n"
    assert status(env) | {"served": 0} == {"served": 0, "reader": reader, "reads": before + 1, "busy": False}


@pytest.mark.slow
def test_a_read_while_the_reader_is_busy_or_with_other_limits_gets_a_fork_of_its_own(env):
    client = endless(env)
    before = status(env)
    busy = crucible("query", "SELECT count(*) AS n FROM runs", "--csv", env=env)
    assert busy.stdout == "n\n3\n"
    after = status(env)
    assert after["served"] == before["served"] + 1 and after["reads"] == before["reads"]  # a fork's
    client.send_signal(signal.SIGINT)
    client.communicate(timeout=WITHIN)
    until(lambda: not status(env)["busy"], "idle reader")

    def fewer_files() -> None:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))

    limited = crucible("query", "SELECT count(*) AS n FROM runs", "--csv", env=env, preexec_fn=fewer_files)
    assert limited.stdout == "n\n3\n"
    last = status(env)
    assert last["served"] == after["served"] + 1 and last["reads"] == after["reads"]  # not lowered in the reader


def test_a_reader_that_died_is_replaced_and_no_read_is_lost(env):
    old = the_reader(env)
    os.kill(old, signal.SIGKILL)
    answers = [crucible("query", "SELECT 5 AS five", "--csv", env=env).stdout for _ in range(3)]
    assert answers == ["five\n5\n"] * 3  # the first may have met the dead one: then its own process
    new = status(env)["reader"]
    assert new is not None and new != old


@pytest.mark.parametrize(
    "first, then",
    [
        (
            ["query", "CREATE TEMP VIEW runs AS SELECT 'forged' AS run_id; SELECT 1"],
            ["query", "SELECT run_id FROM runs"],
        ),
        (["query", "SET memory_limit = '2MB'; SELECT 1"], ["report"]),
        (["query", "SET GLOBAL threads = 1; SELECT 1"], ["query", "SELECT current_setting('threads') > 0 AS set"]),
        (
            ["query", "ATTACH ':memory:' AS elsewhere; SELECT 1"],
            ["query", "SELECT database_name FROM duckdb_databases()"],
        ),
        (["query", "SELECT 1; SELECT no_such_column FROM runs"], ["show", "w0-run000"]),
        (["query", "SELECT * FROM enable_profiling()"], ["query", "SELECT 1 AS one"]),
    ],
    ids=["temp view", "memory limit", "global setting", "attached", "a failed statement", "profiling on"],
)
def test_what_one_reads_sql_changes_in_duckdb_is_not_there_for_the_next(env, first, then):
    """A read's statements may change DuckDB's instance (the reader keeps it): whatever is not a
    plain SELECT makes it afresh before the next read, which sees what a new process sees."""
    reader = the_reader(env)
    crucible(*first, env=env)
    warm = crucible(*then, env=env)
    cold = crucible(*then, env={**env, "CRUCIBLE_WARM": "off"})
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert "forged" not in warm.stdout and status(env)["reader"] == reader


def test_each_read_has_its_clients_time_zone(env):
    zone = "SELECT current_setting('TimeZone') AS zone"
    for tz in ("Asia/Tokyo", None, "America/Lima"):
        run_env = {**env, "TZ": tz} if tz else {k: v for k, v in env.items() if k != "TZ"}
        warm = crucible("query", zone, "--csv", env=run_env)
        cold = crucible("query", zone, "--csv", env={**run_env, "CRUCIBLE_WARM": "off"})
        assert warm.stdout == cold.stdout and (tz is None or warm.stdout == f"zone\n{tz}\n")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "client killed"])
def test_an_interrupt_that_comes_as_the_read_starts_still_stops_it(env, how):
    """DuckDB keeps no interrupt that came before its statement: the reader interrupts until the
    command ends, so no early Ctrl-C or death is lost, whenever it lands."""
    for delay in (0.0, 0.005, 0.01, 0.02, 0.04, 0.08):
        client = endless(env)
        time.sleep(delay)  # where the interrupt lands, not how long anything may take
        client.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        out, err = client.communicate(timeout=WITHIN)
        if how == "ctrl-c":  # (landing in the store's open, the interrupt may be named there first)
            assert client.returncode == 130 and err.endswith("crucible query: interrupted\n"), (delay, err)
        until(lambda: not status(env)["busy"], "idle reader")


@pytest.mark.slow
def test_ctrl_c_while_a_read_waits_for_the_stores_lock_ends_it_and_the_next_read_is_answered(env):
    """Outside a DuckDB statement nothing stops a read without raising into it: an interrupted
    read still going a moment later ends the reader, its client told as its own process would
    have said, and the next read has a reader of its own again."""
    import fcntl

    old = the_reader(env)
    lock = os.open(Path(env["CRUCIBLE_HOME"]) / "store.duckdb.crucible-lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a writer's turn, held: the read waits for it
        client = subprocess.Popen(
            [*COMMAND, "query", "SELECT 1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        until(lambda: following(client.pid) or client.poll() is not None, "client following its read")
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=WITHIN)
        assert client.returncode == 130 and err.strip().endswith("crucible query: interrupted"), err
    finally:
        os.close(lock)
    again = crucible("query", "SELECT 6 * 7 AS answer", "--csv", env=env)
    assert again.stdout == "answer\n42\n", again.stderr
    assert status(env)["reader"] not in (None, old)
