"""``crucible warm``: commands started from a warm server's fork behave as the command run in
its own process would: output, exit status, the environment it reads, Ctrl-C, a killed client,
a server gone stale (engine/cli/warm.py, engine/cli/warm_server.py). Real processes, a real
Unix socket, real runs."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
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
    a read command goes to the server's reader (tests/cli/test_warm_reader.py), not a fork."""
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
    assert served() == before + 3


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


HOWS = ["ctrl-c", "client killed", "nohup, then ctrl-z, fg and ctrl-c", "ctrl-z, then the client killed"]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("how", HOWS)
def test_a_run_whose_client_is_interrupted_or_killed_ends_canceled(server, docker_client, base_image, how):
    """Ctrl-C reaches the fork through its client; a client killed outright closes its end of the
    socket, and the fork ends the run as SIGTERM would. Either way: canceled, no container left.
    A hangup the client ignores (nohup) is ignored by the fork too; Ctrl-Z stops the fork and
    then the client, and continuing the client continues the fork."""
    seed = 7200 + HOWS.index(how)
    ignored = {signal.SIGHUP} if how.startswith("nohup") else set()
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
        preexec_fn=lambda: [signal.signal(s, signal.SIG_IGN if s in ignored else signal.SIG_DFL) for s in FROM_A_SHELL],
        # A job of its own, as a shell's: in an orphaned process group (this test's, under CI's
        # background shell) the kernel discards a SIGTSTP instead of stopping the process.
        process_group=0,
    )
    fork = _the_forks_container_owner(docker_client, server)
    if ignored:
        assert _ignored_by(fork) & (1 << (signal.SIGHUP - 1))
        client.send_signal(signal.SIGHUP)
        client.send_signal(signal.SIGTSTP)
        _until_state(fork, "T")
        _until_state(client.pid, "T")  # the fork first: the client stops once it has told it
        client.send_signal(signal.SIGCONT)
        _until_state(fork, "S", "R")
        assert client.poll() is None
    if how.startswith("ctrl-z"):  # the fork stopped, its client gone: the server continues it
        client.send_signal(signal.SIGTSTP)
        _until_state(client.pid, "T")
    client.send_signal(signal.SIGKILL if how.endswith("client killed") else signal.SIGINT)
    client.wait(timeout=120)
    if not how.endswith("client killed"):
        assert client.returncode == 130 and "interrupted" in client.stderr.read()
    _until_gone(fork, server)
    label = {"label": f"crucible.owner_pid={fork}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    _, rows = DuckDBStore().query(f"SELECT status FROM runs WHERE owner_pid = {fork} AND seed = {seed}")
    # Continued, a stopped fork ends its run the same way: canceled (never left "running",
    # never stopped for good), even where the cancel lands in the very loop turn a step ends
    # (engine.util.aio.within: Python 3.11's wait_for would return the step's result).
    assert rows == [("canceled",)]


@pytest.mark.docker
@pytest.mark.slow
def test_sigterm_to_a_command_in_its_own_process_cancels_its_run_as_ctrl_c_does(docker_client, base_image):
    """The kill a warm server's fork gets when its client dies, and any `kill`: within the run's
    event loop it cancels the run's task (engine.cli.main._sigterm_as_interrupt)."""
    client = subprocess.Popen(
        [
            *COMMAND,
            "run",
            "task=sample/last_page",
            "agent=integration_test",
            "+task.validation=[{name: bash, arguments: {command: 'sleep 20'}}]",
            "seed=7299",
        ],
        cwd=ROOT,
        env={**os.environ, "CRUCIBLE_WARM": "off"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    label = {"label": f"crucible.owner_pid={client.pid}"}
    deadline = time.monotonic() + 120
    while not docker_client.containers.list(filters=label, ignore_removed=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.send_signal(signal.SIGTERM)
    client.wait(timeout=120)
    assert client.returncode == 130 and "interrupted" in client.stderr.read()
    assert docker_client.containers.list(all=True, filters=label) == []
    _, rows = DuckDBStore().query(f"SELECT status FROM runs WHERE owner_pid = {client.pid} AND seed = 7299")
    # Cancelled and recorded so: never left "running" with its containers, as a KeyboardInterrupt
    # raised in the loop's machinery could leave it, nor run to its end where the cancel landed
    # in the very loop turn an awaited step ended (engine.util.aio.within).
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
        earlier = time.time() - 60  # changed, and long enough ago for the new server to import it
        os.utime(tmp_path / "sitecustomize.py", (earlier, earlier))
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


def test_the_client_uses_no_server_in_a_directory_others_can_write(tmp_path):
    """Another user could have put a server there, for our environment and our terminal: the
    client does not even connect, and runs the command itself."""
    from engine.cli import warm

    runtime = Path(tempfile.mkdtemp(prefix="cw", dir="/tmp"))  # a socket's path has 107 bytes at most
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "CRUCIBLE_HOME": str(tmp_path / "home")}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        path = warm.socket_path()
    finally:
        os.environ.clear()
        os.environ.update(old)
    path.parent.mkdir(parents=True)
    path.parent.chmod(0o777)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    listener.setblocking(False)
    try:
        with listener:
            done = crucible(*MISTAKE, env=env)
            assert done.returncode == 2 and "unknown task" in done.stderr
            with pytest.raises(BlockingIOError):
                listener.accept()  # nothing connected
    finally:
        shutil.rmtree(runtime)


def test_garbage_on_the_socket_is_refused_and_the_server_serves_on(server):
    from engine.cli.warm import socket_path

    before = served()
    for garbage in (struct.pack("!I", 2) + b"[]", struct.pack("!I", 0xFFFFFFF0), b"\0\0\0\5{"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(socket_path()))
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(100) == b""  # dropped, with no answer
    assert crucible(*MISTAKE).returncode == 2
    assert served() == before + 1


def test_a_failed_request_leaves_the_clients_streams_with_the_client(server):
    """Its descriptors came, then a body that is no request: the server holds none of them (a
    pipe's reader would wait for an end of file for ever)."""
    from engine.cli.warm import socket_path

    reader, writer = os.pipe()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path()))
        socket.send_fds(sock, [struct.pack("!I", 5)], [writer, writer, writer])
        sock.sendall(b"[1,2]")
        assert sock.recv(100) == b""
    os.close(writer)
    ready, _, _ = select.select([reader], [], [], 120)
    assert ready and os.read(reader, 10) == b""  # end of file: no one else holds the write end
    os.close(reader)


def test_help_from_the_server_exits_as_the_command_would(server):
    """argparse ends --help with SystemExit(0): the fork ends as the interpreter would."""
    warm = crucible("check", "--help")
    cold = crucible("check", "--help", env={**os.environ, "CRUCIBLE_WARM": "off"})
    assert warm.returncode == cold.returncode == 0
    assert warm.stdout == cold.stdout and "Traceback" not in warm.stderr


def test_a_client_that_trickles_its_request_is_dropped(server):
    """A request has one deadline for the whole of it, whatever arrives meanwhile."""
    from engine.cli.warm import socket_path

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path()))
        sock.settimeout(0.5)
        for _ in range(600):  # a byte every half second (if it is not dropped for five minutes: fail)
            try:
                if sock.recv(1) == b"":
                    break  # dropped
            except TimeoutError:
                sock.send(b"\0")
        else:
            raise AssertionError("a trickling client held the server")
    assert served() is not None


def test_two_starts_at_once_give_one_server_and_an_idle_one_exits(tmp_path):
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home")}
    starts = [
        subprocess.Popen(
            [*COMMAND, "warm", "start", "--idle", "5"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    said = [start.communicate(timeout=300)[0] for start in starts]
    assert [start.returncode for start in starts] == [0, 0], said
    pids = {re.search(r"pid (\d+)", line).group(1) for line in said}
    assert len(pids) == 1, said
    deadline = time.monotonic() + 300
    while served(env) is not None and time.monotonic() < deadline:  # no command in its idle 5 s: it exits
        time.sleep(0.2)
    assert served(env) is None
    assert crucible("warm", "status", env=env).returncode == 1


FROM_A_SHELL = (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP)
"""At their defaults, as a shell starts a command, whatever this test process inherited."""


def _ignored_by(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn for {pid}")


def _until_state(pid: int, *states: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        if state in states:
            return
        time.sleep(0.02)
    raise AssertionError(f"{pid} never reached {states}: {state}")


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


def _until_gone(pid: int, server: int) -> None:
    """Until the server's fork ``pid`` has ended (and been reaped)."""
    deadline = time.monotonic() + 120
    while _parent_of(pid) == server and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _parent_of(pid) != server, f"the fork {pid} is still there"


def test_a_fork_tells_its_client_its_status_itself_and_takes_no_signal_after():
    """The fork says its exit status before its memory is taken down (``tell_client``): as the
    server would read it (the low byte), and from then on no signal can run a handler in it."""
    from engine.cli.warm import recv_message
    from engine.cli.warm_fork import tell_client

    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the fork: says 259, takes a SIGTERM, and is still there to say so
        try:
            ours.close()
            tell_client(theirs, 259)
            os.kill(os.getpid(), signal.SIGTERM)
            theirs.sendall(b"still here")
        finally:
            os._exit(7)
    theirs.close()
    message, _ = recv_message(ours)
    assert message == {"op": "exit", "code": 3}
    rest = b""
    while chunk := ours.recv(64):
        rest += chunk
    assert rest == b"still here"
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7  # its exit, not the SIGTERM
