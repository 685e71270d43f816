"""A run's SSH endpoint as OpenSSH's own client sees it (/usr/bin/ssh, scp, sftp), on both runtimes.

Each backend gets one network-less workspace and one ``serve_ssh`` endpoint (as uid 1000, in a
directory it owns) for the whole module; the clients are the real binaries, pinned to the
endpoint's host key and using its client key, never any ~/.ssh of this machine.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import secrets
import shutil
import struct
import subprocess
import sys
import termios
import uuid
from pathlib import Path

import pytest

from engine.capabilities.ssh_client import open_ssh
from engine.capabilities.ssh_server import serve_ssh
from engine.interfaces import AGENT_UID

sys.path.insert(0, str(Path(__file__).parents[1] / "runtimes"))  # the local runtime's tiny template
from test_local_runtime import require_sandbox, tiny_image  # noqa: E402

CWD = "/app/ssh"
SECRET = "/app/ssh/root-only.txt"
CLIENT_TIMEOUT = 60


def _require_openssh() -> None:
    missing = [tool for tool in ("ssh", "scp", "sftp") if shutil.which(tool) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but OpenSSH's {missing} are missing (apt-get install openssh-client)")
        pytest.skip(f"OpenSSH's {missing} are not installed")


FULL_SCREEN_PACKAGES = ("tmux", "procps")
"""What the full-screen programs need; the offline base has neither, the host (runtime=local) has both."""


def _docker(request):
    from engine.runtimes.docker.runtime import DockerRuntime

    return DockerRuntime(), _with_full_screen_programs(
        request.getfixturevalue("docker_client"), request.getfixturevalue("base_image")
    )


def _with_full_screen_programs(client, base: str) -> str:
    """The base image with tmux and top added (apt, over the host's network, as builds get it
    here), tagged by the base's id so that it is built once per base."""
    import io

    import docker.errors

    tag = f"crucible-test/ssh-tty:{client.images.get(base).id.split(':')[-1][:16]}"
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        dockerfile = (
            f"FROM {base}\nRUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            f"--no-install-recommends {' '.join(FULL_SCREEN_PACKAGES)} && rm -rf /var/lib/apt/lists/*\n"
        )
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, network_mode="host", rm=True)
    return tag


def _local(request):
    from engine.runtimes.local.runtime import LocalRuntime

    runtime = LocalRuntime()
    require_sandbox(runtime)
    return runtime, tiny_image(request.getfixturevalue("tmp_path_factory").mktemp("ssh-local"))


@pytest.fixture(scope="module", params=[pytest.param("docker", marks=pytest.mark.docker), "local"])
def server(request, loop, run, tmp_path_factory):
    """(workspace, client options, steps): a workspace served over SSH, and OpenSSH's options for it."""
    _require_openssh()
    runtime, image = (_docker if request.param == "docker" else _local)(request)
    ready, stop, steps = loop.create_future(), asyncio.Event(), []

    async def hold():
        async with runtime.provision(
            image, run_id=f"ssh-openssh-{uuid.uuid4().hex[:8]}", network=False, purpose="agent"
        ) as ws:
            prepared = await ws.exec(
                [
                    "sh",
                    "-c",
                    f"mkdir -p {CWD} && chown {AGENT_UID}:{AGENT_UID} {CWD} && "
                    f"echo root only > {SECRET} && chmod 600 {SECRET}",
                ]
            )
            assert prepared.ok, prepared.text
            async with serve_ssh(ws, user=AGENT_UID, cwd=CWD, on_step=steps.append) as endpoint:
                ready.set_result((ws, endpoint))
                await stop.wait()

    holder = loop.create_task(hold())
    ws, endpoint = run(ready)
    home = tmp_path_factory.mktemp("openssh")
    key = home / "id_ed25519"
    key.write_text(endpoint.client_key)
    key.chmod(0o600)
    (home / "known_hosts").write_text(f"[{endpoint.host}]:{endpoint.port} {endpoint.host_key}\n")
    options = [
        "-F",
        "/dev/null",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        f"UserKnownHostsFile={home / 'known_hosts'}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "LogLevel=ERROR",
        "-o",
        f"User={endpoint.username}",
    ]
    client = {
        "options": options,
        "host": endpoint.host,
        "port": str(endpoint.port),
        "home": home,
        "endpoint": endpoint,
        # the server lives on the module's loop: a client runs in a thread while that loop serves
        "call": lambda fn, *args, **kwargs: run(asyncio.to_thread(fn, *args, **kwargs)),
    }
    yield ws, client, steps
    stop.set()
    run(holder)


def ssh(client, *args, env=None, **kwargs) -> subprocess.CompletedProcess:
    return client["call"](
        subprocess.run,
        ["ssh", *client["options"], "-p", client["port"], *args],
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
        env=env,
        **kwargs,
    )


def client_run(client, argv) -> subprocess.CompletedProcess:
    return client["call"](subprocess.run, argv, capture_output=True, timeout=CLIENT_TIMEOUT, stdin=subprocess.DEVNULL)


def ssh_on_a_terminal(client, args, size, **kwargs) -> tuple[bytes, int]:
    return client["call"](_ssh_on_a_terminal, client, args, size, **kwargs)


def _ssh_on_a_terminal(client, args, size, *, resize_to=None, typed=b"") -> tuple[bytes, int]:
    """Run ssh on a pty of ``size`` (cols, rows) that is its controlling terminal, as a user's
    would be. With ``resize_to``: once the remote says "waiting", resize the pty (ssh sends the
    change when it notices its SIGWINCH) and type "again" until the remote's ``stty size`` shows
    the new size, then "stop". ``typed`` is typed ahead, at once."""
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    process = subprocess.Popen(
        ["ssh", *client["options"], "-p", client["port"], *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        env={**os.environ, "TERM": "xterm-256color"},
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    os.write(master, typed)
    seen, resized, stopped = b"", False, False
    expected = b"" if resize_to is None else f"{resize_to[1]} {resize_to[0]}\r\n".encode()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: ssh has exited and closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if resize_to is not None and not resized and b"waiting" in seen:
                resized = True
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", resize_to[1], resize_to[0], 0, 0))
                os.write(master, b"again\r")
            elif resized and not stopped and seen.endswith(b"ready\r\n"):
                stopped = expected in seen
                os.write(master, b"stop\r" if stopped else b"again\r")
        return seen, process.wait(timeout=CLIENT_TIMEOUT)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()


def test_ssh_t_runs_the_command_on_a_terminal_of_the_clients_size_and_type(server):
    _, client, _ = server
    shown, code = ssh_on_a_terminal(client, ["-t", client["host"], 'tty; stty size; echo "TERM=$TERM"'], (101, 33))
    lines = shown.decode(errors="replace").splitlines()
    assert code == 0, shown
    assert lines[0].startswith("/dev/pts/"), shown
    assert "33 101" in lines and "TERM=xterm-256color" in lines, shown
    assert b"PTY allocation request failed" not in shown


def test_a_resized_client_terminal_resizes_the_remote_one(server):
    _, client, _ = server
    script = 'stty size; echo waiting; while read line; do stty size; [ "$line" = stop ] && break; echo ready; done'
    shown, code = ssh_on_a_terminal(client, ["-tt", client["host"], script], (80, 24), resize_to=(132, 43))
    assert code == 0, shown
    assert shown.startswith(b"24 80\r\n") and b"43 132\r\n" in shown and b"stop\r\n" in shown, shown


FULL_SCREEN = {
    "top": ("top", "top -n 1", b"load average"),
    "tmux": ("tmux", "tmux -S /tmp/ssh-test.tmux -f /dev/null new-session 'echo inside-tmux; sleep 0.3'", b"[exited]"),
}


@pytest.mark.slow
@pytest.mark.parametrize("program", sorted(FULL_SCREEN))
def test_full_screen_programs_run_over_ssh_t(server, run, program):
    ws, client, _ = server
    binary, command, shows = FULL_SCREEN[program]
    assert run(ws.exec(["sh", "-c", f"command -v {binary}"])).ok, f"the workspace's image has no {binary}"
    shown, code = ssh_on_a_terminal(client, ["-t", client["host"], command], (100, 30))
    assert code == 0 and shows in shown, shown[-2000:]


def test_a_login_shell_on_a_terminal_is_interactive(server):
    _, client, _ = server
    shown, code = ssh_on_a_terminal(client, [client["host"]], (80, 24), typed=b"echo $((6 * 7)) $-\rexit 4\r")
    assert code == 4, shown
    answer = re.search(rb"\r42 (\S+)\r", shown)
    assert answer is not None and b"i" in answer[1], shown  # bash says it is interactive ($- holds i)
    assert not re.search(rb"^\d+\r$", shown, re.M), shown  # the wrapper's pid line never shows


def test_forced_tty_without_a_local_terminal_still_gets_one(server):
    _, client, _ = server
    result = ssh(client, "-tt", client["host"], "test -t 0 && test -t 1 && echo on-a-tty", stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and b"on-a-tty" in result.stdout, result


def test_without_t_there_is_no_terminal_and_stderr_has_its_own_channel(server):
    _, client, _ = server
    result = ssh(
        client, client["host"], "test -t 0 || echo no-tty; echo out; echo err >&2; exit 3", stdin=subprocess.DEVNULL
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, b"no-tty\nout\n", b"err\n")


def test_a_command_killed_by_a_signal_is_reported_as_that_signal(server):
    _, client, steps = server
    killed = ssh(client, client["host"], "echo before; kill -TERM $$", stdin=subprocess.DEVNULL)
    plain = ssh(client, client["host"], "exit 143", stdin=subprocess.DEVNULL)
    # OpenSSH's client has no exit status to give for a signal: it exits 255 (and says nothing
    # at LogLevel=ERROR; at the default level it prints which signal, see the next test).
    assert (killed.returncode, killed.stdout) == (255, b"before\n"), killed
    assert plain.returncode == 143, plain
    assert [(step.note, step.is_error) for step in steps[-2:]] == [("killed by signal TERM", True), (None, True)]


def test_the_signal_travels_as_an_exit_signal_naming_it(server, run):
    _, client, _ = server
    # OpenSSH 9.2's client takes an exit-signal without a word (only -v logs it) and exits 255.
    at = client["options"].index("LogLevel=ERROR")
    options = client["options"][: at - 1] + client["options"][at + 1 :]  # OpenSSH keeps an option's first value
    killed = client_run(client, ["ssh", *options, "-v", "-p", client["port"], client["host"], "kill -INT $$"])
    assert killed.returncode == 255 and b"rtype exit-signal" in killed.stderr, killed
    endpoint = client["endpoint"]

    async def signal_seen_by_asyncssh():
        async with open_ssh(endpoint) as conn:
            return (await conn.run("kill -USR1 $$")).exit_signal

    assert run(signal_seen_by_asyncssh())[0] == "USR1"


def test_only_safe_environment_variables_pass(server):
    _, client, _ = server
    env = {**os.environ, "LC_CRUCIBLE": "passed", "LANG": "C.UTF-8"}
    result = ssh(
        client,
        "-o",
        "SendEnv=LC_* LANG",
        "-o",
        "SetEnv=BASH_ENV=/tmp/evil PATH=/evil",
        client["host"],
        'echo "$LC_CRUCIBLE|$LANG|${BASH_ENV-unset}|$PATH"',
        env=env,
        stdin=subprocess.DEVNULL,
    )
    fields = result.stdout.decode().strip().split("|")
    assert result.returncode == 0, result
    assert fields[:3] == ["passed", "C.UTF-8", "unset"] and "/evil" not in fields[3], fields


@pytest.mark.slow
@pytest.mark.parametrize("legacy", [False, True], ids=["sftp-protocol", "scp-protocol"])
def test_scp_copies_both_ways_as_the_workspace_user(server, run, tmp_path, legacy):
    ws, client, steps = server
    payload = secrets.token_bytes(200_000)
    local = tmp_path / "up.bin"
    local.write_bytes(payload)
    flags = ["-O"] if legacy else []
    scp = ["scp", *flags, *client["options"], "-P", client["port"]]
    name = f"up-{'legacy' if legacy else 'sftp'}.bin"
    up = client_run(client, [*scp, str(local), f"{client['host']}:{name}"])
    assert up.returncode == 0, up
    assert run(ws.read_file(f"{CWD}/{name}")) == payload
    owner = run(ws.exec(["stat", "-c", "%u", f"{CWD}/{name}"]))
    assert owner.stdout.strip() == str(AGENT_UID).encode()
    down = client_run(client, [*scp, f"{client['host']}:{name}", str(tmp_path / "down.bin")])
    assert down.returncode == 0 and (tmp_path / "down.bin").read_bytes() == payload, down
    refused = client_run(client, [*scp, f"{client['host']}:{SECRET}", str(tmp_path / "secret")])
    assert refused.returncode != 0 and b"denied" in refused.stderr.lower(), refused
    assert not (tmp_path / "secret").exists() or (tmp_path / "secret").read_bytes() == b""
    # legacy scp runs `scp -t`/`scp -f` as a command; modern scp is an SFTP session
    tool = "scp" if legacy else "sftp"
    assert any(step.tool == tool and f"write {CWD}/{name} (200000 bytes)" in (step.result or "") for step in steps), (
        steps
    )


@pytest.mark.slow  # every SFTP operation is a command in the workspace: ~25 of them
def test_an_sftp_session_sees_the_workspace_not_the_host(server, run, tmp_path):
    ws, client, steps = server
    host_only = tmp_path / f"host-only-{secrets.token_hex(4)}.txt"
    host_only.write_text("on the host\n")
    (tmp_path / "put.txt").write_text("sent over sftp\n")
    batch = tmp_path / "batch"
    batch.write_text(
        "\n".join(
            [
                "pwd",
                "mkdir d",
                f"put {tmp_path / 'put.txt'} d/f.txt",
                "rename d/f.txt d/g.txt",
                "ls -l d",
                f"get d/g.txt {tmp_path / 'got.txt'}",
                f"-get {SECRET} {tmp_path / 'secret.txt'}",
                f"-get {host_only} {tmp_path / 'leak.txt'}",
                "rm d/g.txt",
                "rmdir d",
                "ls",
            ]
        )
        + "\n"
    )
    result = client_run(client, ["sftp", *client["options"], "-P", client["port"], "-b", str(batch), client["host"]])
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, (out, err)
    assert f"Remote working directory: {CWD}" in out
    assert (tmp_path / "got.txt").read_text() == "sent over sftp\n"
    assert "g.txt" in out and f" {AGENT_UID} " in out, out
    assert "Permission denied" in err and not (tmp_path / "secret.txt").exists(), err
    assert "No such file" in err or "not found" in err, err
    assert not (tmp_path / "leak.txt").exists()
    gone = run(ws.exec(["test", "-e", f"{CWD}/d"]))
    assert gone.exit_code == 1
    sftp_steps = [step for step in steps if step.tool == "sftp"]
    assert sftp_steps and any(f"write {CWD}/d/f.txt" in (step.result or "") for step in sftp_steps), steps


def test_every_session_becomes_a_step_of_the_run(server):
    _, client, steps = server
    before = len(steps)
    ssh(client, client["host"], "echo stepped; exit 2", stdin=subprocess.DEVNULL)
    step = steps[before]
    assert (step.kind, step.capability, step.tool) == ("tool_call", "ssh", "exec")
    assert step.arguments == {"command": "echo stepped; exit 2"}
    assert (step.result, step.is_error) == ("stepped\n", True)
    assert step.started_at and step.seconds >= 0


@pytest.mark.slow
@pytest.mark.docker
def test_a_session_command_gets_default_signals_whatever_the_engine_ignores():
    """A signal the engine's process ignores (SIG_IGN survives exec) is not passed on to a
    session's command: the signal test above, in a pytest whose process ignores SIGINT, as an
    earlier test or an embedding program may leave it."""
    program = (
        "import signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nimport pytest\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
        "'tests/capabilities/test_ssh_openssh.py::test_the_signal_travels_as_an_exit_signal_naming_it']))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", program], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
