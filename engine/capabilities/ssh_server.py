"""Serve a run's workspace shell over SSH: the run's ``ssh`` capability (``ssh/2``).

An asyncssh server on the host, one per run, bound to 127.0.0.1 (or ``crucible serve --host``) on an ephemeral port (we
bind the socket ourselves, so there is no race for the port). Its sessions run in the
workspace through ``Workspace.open_process``, so the workspace needs no network and no
sshd: the server is the engine, and the workspace is reached through ``docker exec``.

    async with serve_ssh(ws, user=AGENT_UID, cwd="/app") as endpoint:
        ...  # capabilities["ssh"] = endpoint.url; capability_auth["ssh"] = endpoint.credential()

Credentials are per run and exist only in memory: an ed25519 host key (the client pins it)
and an ed25519 client key pair whose public half is the only authorized key, for the one
username. Passwords, keyboard-interactive, host-based and GSS authentication are off, as
are port, agent and X11 forwarding and every subsystem but sftp.

Sessions behave as OpenSSH's client expects of sshd (tested with /usr/bin/ssh, scp, sftp;
docs/ssh.md says what a user sees):
- exec (``ssh host 'command'``) runs ``bash -c <command>``; shell (no command) runs a login
  ``bash -l``. The exit status is passed back.
- A pty request (``ssh -t``) is honoured: the command runs on a terminal of the client's size
  and TERM (``Workspace.open_process(tty=...)``), window changes resize it, and stdin's EOF is
  not passed on (a terminal has none: ^D travels as data). Without one, stdout and stderr
  travel on their own channels (``separate_stderr``).
- Death by a signal is an SSH exit-signal (OpenSSH's client exits 255), not 128+N: sessions
  run under sh/session.sh, which writes the signal's number to a fresh file in the workspace's
  /tmp; a plain ``exit 143`` stays 143. An image without perl gets exit statuses only.
- SFTP, and scp over both protocols (asyncssh's SCP server on the same methods), act inside
  the workspace as the session's uid (``ssh_files.WorkspaceSFTP``), never on the host.
- Of the client's environment only ``SAFE_ENV`` (TERM, LANG, COLORTERM, LC_ALL) and ``LC_*``
  pass; the rest is the session's ``env`` (None = the workspace's minimal default).
- A signal request SIGKILLs the command's process group: the Process interface cannot deliver
  a particular signal (on a terminal ^C is typed, and the terminal sends SIGINT itself).
- When the command exits, what it wrote is still delivered; output its background children
  go on writing is cut after ``DRAIN_GRACE`` quiet seconds, as the MCP bash tool does, and
  the children are left running (a staged ``server &`` survives its step there too).
- A session whose channel closes before its command exits (client gone, timeout) gets its
  process group killed. Leaving the ``serve_ssh`` block closes the listener and every
  connection and kills every still-running session's process group.
- With ``on_step``, every session (exec, shell, sftp, scp) is reported as a step of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import asyncssh

from engine.capabilities.serving import SERVE_OPTIONS, bind_tcp
from engine.capabilities.ssh_client import SSHEndpoint
from engine.capabilities.ssh_files import WorkspaceSFTP
from engine.errors import AgentError, WorkspaceError
from engine.interfaces import Process, Workspace
from engine.models import Step, TtySize
from engine.runtimes.docker.stream import BoundedBuffer
from engine.util import shell
from engine.util.aio import within

USERNAME = "crucible"
DRAIN_GRACE = 0.5
"""Seconds without output after the command exited before its output is cut (background children
may hold it open)."""
DRAIN_LIMIT = 10.0
"""Seconds, at most, of forwarding output after the command exited."""
SHUTDOWN_GRACE = 5.0
READ_CHUNK = 65536
START_FAILED = 255
NOT_STARTED = "not started"
STEP_OUTPUT = 64 << 10
"""Bytes of a session's output kept in its step (head and tail)."""
SAFE_ENV = frozenset({"TERM", "LANG", "COLORTERM", "LC_ALL"})
"""The client's environment variables a session gets (and every ``LC_*``): terminal and
locale, nothing that changes what runs (PATH, LD_PRELOAD, BASH_ENV, ...)."""

log = logging.getLogger(__name__)
if logging.getLogger("asyncssh").level == logging.NOTSET:
    # asyncssh logs every connection, auth and (whole) command at INFO: too chatty for runs.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)


class _KeyOnlyAuth(asyncssh.SSHServer):
    """Accepts exactly one username with exactly one public key; every other method is off."""

    def __init__(
        self, username: str, authorized: asyncssh.SSHKey, connections: set[asyncssh.SSHServerConnection]
    ) -> None:
        self._username = username
        self._authorized = authorized.public_data
        self._connections = connections
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        return True  # authentication is always required

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        # asyncssh verifies the client's signature with this key after we accept it.
        same_user = hmac.compare_digest(username.encode(), self._username.encode())
        return hmac.compare_digest(key.public_data, self._authorized) and same_user


class _Sessions:
    """Runs each SSH session as a workspace process and tracks what must die at shutdown."""

    def __init__(
        self,
        ws: Workspace,
        *,
        user: int,
        cwd: str,
        env: Mapping[str, str] | None,
        ready: asyncio.Future[Any] | None = None,
        on_step: Callable[[Step], None] | None = None,
    ) -> None:
        self.ws, self.user, self.cwd, self.ready, self.on_step = ws, user, cwd, ready, on_step
        self.env = dict(env) if env is not None else None
        self.running: set[Process] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.steps = 0

    async def handle(self, channel: asyncssh.SSHServerProcess[bytes]) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            await self._session(channel)
        finally:
            if task is not None:
                self.tasks.discard(task)

    def argv(self, channel: asyncssh.SSHServerProcess[bytes], status: str) -> list[str]:
        """The session's command under the signal-reporting wrapper, with the client's safe env."""
        command = ["bash", "-l"] if channel.command is None else ["bash", "-c", channel.command]
        passed = client_env(channel.env, channel.get_terminal_type())
        if passed:
            command = ["env", *(f"{name}={value}" for name, value in passed.items()), *command]
        return ["/bin/sh", "-c", shell.script(__file__, "session.sh"), "crucible-ssh", status, *command]

    async def _session(self, channel: asyncssh.SSHServerProcess[bytes]) -> None:
        if channel.subsystem is not None:
            _fail(channel, f"crucible: subsystem {channel.subsystem!r} is not offered", 1)
            return
        started, output = time.time(), BoundedBuffer(STEP_OUTPUT)
        code, note = await self._run(channel, output)
        if note != NOT_STARTED and self.on_step is not None:
            self.steps += 1
            self.on_step(
                Step(
                    idx=self.steps,
                    kind="tool_call",
                    capability="ssh",
                    tool="exec" if channel.command is not None else "shell",
                    arguments={"command": channel.command if channel.command is not None else "bash -l"},
                    result=output.value().decode("utf-8", "replace"),
                    is_error=code != 0,
                    started_at=_iso(started),
                    seconds=time.time() - started,
                    note=note,
                )
            )

    async def _run(
        self, channel: asyncssh.SSHServerProcess[bytes], output: BoundedBuffer
    ) -> tuple[int | None, str | None]:
        """Run the session to its end: (exit code or None, a note for its step: how it ended
        when not by an exit code, ``NOT_STARTED`` when nothing ran)."""
        if self.ready is not None:  # the task is still being set up: a session waits for it
            try:
                await asyncio.shield(self.ready)
            except Exception:
                _fail(channel, "crucible: the task's setup failed; no session can start")
                return None, NOT_STARTED
        width, height = channel.get_terminal_size()[:2]
        tty = TtySize(cols=width or 80, rows=height or 24) if channel.get_terminal_type() is not None else None
        status = f"/tmp/.crucible-ssh-{secrets.token_hex(12)}"
        try:
            process = await self.ws.open_process(
                self.argv(channel, status),
                user=self.user,
                cwd=self.cwd,
                env=self.env,
                tty=tty,
                separate_stderr=tty is None,
            )
        except (WorkspaceError, OSError, ValueError) as exc:
            _fail(channel, f"crucible: could not start the session in the workspace: {exc}")
            return None, NOT_STARTED
        self.running.add(process)
        try:
            code = await _relay(channel, process, output, tty=tty is not None)
        except WorkspaceError as exc:
            await self._kill(process)
            _fail(channel, f"crucible: the workspace failed during the session: {exc}")
            return None, f"the workspace failed: {exc}"
        except BaseException:
            await self._kill(process)  # cancelled (shutdown): the process group goes too
            raise
        if code is None:
            await self._kill(process)  # the channel closed first: nobody is listening any more
            return None, "the client left before the command ended: it was killed"
        self.running.discard(process)
        signal_name = await self._signal(code, status)
        if not channel.is_closing():
            if signal_name is not None:
                channel.exit_with_signal(signal_name)
            else:
                channel.exit(code)
        return code, None if signal_name is None else f"killed by signal {signal_name}"

    async def _signal(self, code: int, status: str) -> str | None:
        """The signal that killed the session's command (its wrapper wrote it down), if one did."""
        if not 128 < code < 128 + 65:
            return None
        try:
            number = int((await self.ws.read_file(status)).strip())
            await self.ws.exec(["rm", "-f", "--", status], timeout=30)
            return signal.Signals(number).name.removeprefix("SIG") if number == code - 128 else None
        except (OSError, ValueError, WorkspaceError):
            return None  # no such file: an ordinary `exit 143`

    async def _kill(self, process: Process) -> None:
        # Shielded: a cancelled session must still take its process group with it.
        try:
            await asyncio.shield(_kill_quietly(process))
        finally:
            self.running.discard(process)

    async def kill_all(self) -> None:
        await asyncio.gather(*(_kill_quietly(p) for p in list(self.running)))
        self.running.clear()

    def files(self, chan: asyncssh.SSHServerChannel[bytes]) -> WorkspaceSFTP:
        """An SFTP server (also behind scp, both protocols) for one session: in the workspace."""
        return WorkspaceSFTP(chan, self.ws, user=self.user, cwd=self.cwd, ready=self.ready, on_exit=self._files_done)

    def _files_done(self, server: WorkspaceSFTP) -> None:
        if self.on_step is None:
            return
        command = server.channel.get_command()
        self.steps += 1
        transfer = server.transfer
        text = "\n".join(transfer.lines)
        self.on_step(
            Step(
                idx=self.steps,
                kind="tool_call",
                capability="ssh",
                tool="scp" if command else "sftp",
                arguments={"command": command or "sftp"},
                result=text[:STEP_OUTPUT],
                is_error=transfer.failed,
                started_at=_iso(transfer.started),
                seconds=time.time() - transfer.started,
            )
        )


def client_env(env: Mapping[str, str], term: str | None) -> dict[str, str]:
    """What of the client's environment reaches a session: ``SAFE_ENV`` names with sane values,
    and the pty request's terminal type as TERM."""
    passed = {
        name: value
        for name, value in env.items()
        if (name in SAFE_ENV or name.startswith("LC_"))
        and name.replace("_", "").isalnum()
        and len(value) <= 256
        and value.isprintable()
    }
    if term:
        passed["TERM"] = term
    return passed


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _fail(channel: asyncssh.SSHServerProcess[bytes], message: str, code: int = START_FAILED) -> None:
    """Tell the client why on its stderr channel, and end the session with ``code``."""
    if channel.is_closing():
        return
    channel.stderr.write(message.encode() + b"\n")
    channel.exit(code)


async def _kill_quietly(process: Process) -> None:
    try:
        await process.kill()
    except (WorkspaceError, OSError) as exc:  # the workspace may already be going away
        log.debug("could not kill an ssh session's process: %s", exc)


async def _relay(
    channel: asyncssh.SSHServerProcess[bytes], process: Process, output: BoundedBuffer, *, tty: bool
) -> int | None:
    """Stream both ways until the command exits (its exit code) or the channel closes (None)."""
    forwarded = _Counter()
    inbound = asyncio.create_task(_pump_in(channel, process, tty=tty))
    outbound = asyncio.create_task(_pump_out(process.read, channel.stdout, forwarded, output))
    errbound = asyncio.create_task(_pump_out(process.read_stderr, channel.stderr, forwarded, output))
    exited = asyncio.create_task(process.wait())
    closed = asyncio.create_task(channel.channel.wait_closed())
    try:
        await asyncio.wait({exited, closed, outbound, errbound}, return_when=asyncio.FIRST_COMPLETED)
        if any(t.done() and t.exception() is not None for t in (outbound, errbound)):
            return None  # the client stopped reading: the channel is gone
        if not exited.done() and not closed.done():
            await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
        if not exited.done():
            return None
        code = exited.result()  # raises WorkspaceError if the backend failed
        await _drain(outbound, errbound, forwarded)
        return code
    finally:
        tasks = (inbound, outbound, errbound, exited, closed)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Counter:
    value = 0


async def _drain(outbound: asyncio.Task[None], errbound: asyncio.Task[None], forwarded: _Counter) -> None:
    """After the command's exit, forward the output still queued, then stop.

    Background children may hold the output open forever, so this ends after DRAIN_GRACE
    seconds without progress (or DRAIN_LIMIT in all); output written before the exit and
    still queued (a slow client) keeps flowing meanwhile, so it is not lost.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_LIMIT
    while not (outbound.done() and errbound.done()) and loop.time() < deadline:
        before = forwarded.value
        await asyncio.wait(
            {outbound, errbound},
            timeout=min(DRAIN_GRACE, max(deadline - loop.time(), 0)),
            return_when=asyncio.ALL_COMPLETED,
        )
        if forwarded.value == before:
            return


async def _pump_in(channel: asyncssh.SSHServerProcess[bytes], process: Process, *, tty: bool) -> None:
    while True:
        try:
            data = await channel.stdin.read(READ_CHUNK)
        except asyncssh.SignalReceived:
            await process.kill()
            return
        except asyncssh.TerminalSizeChanged as change:
            await process.resize(TtySize(cols=max(change.width, 1), rows=max(change.height, 1)))
            continue
        except (asyncssh.BreakReceived, asyncssh.misc.SoftEOFReceived):
            continue
        if not data:
            if not tty:  # a terminal has no EOF to pass on (^D is typed as data): as sshd, leave it be
                await process.close_stdin()
            return
        try:
            await process.write(data)
        except BrokenPipeError:
            return  # the command exited without reading all its input: its business


async def _pump_out(
    read: Callable[[int], Awaitable[bytes]],
    writer: asyncssh.SSHWriter[bytes],
    forwarded: _Counter,
    output: BoundedBuffer,
) -> None:
    while chunk := await read(READ_CHUNK):
        writer.write(chunk)  # raises BrokenPipeError once the channel is closed
        output.add(chunk)
        await writer.drain()  # backpressure: a slow client slows the command, not our memory
        forwarded.value += len(chunk)


@contextlib.asynccontextmanager
async def serve_ssh(
    ws: Workspace,
    *,
    user: int,
    cwd: str,
    env: Mapping[str, str] | None = None,
    ready: asyncio.Future[Any] | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> AsyncIterator[SSHEndpoint]:
    """Serve SSH sessions into ``ws`` (as uid ``user``, in ``cwd``) until the block exits.

    With ``ready``, sessions wait for it first (the run's setup), as MCP tool calls do. With
    ``on_step``, each session is reported once it ends, as a ``tool_call`` step of capability
    "ssh": tool "exec" or "shell" (its output, at most ``STEP_OUTPUT`` bytes, head and tail),
    "sftp" or "scp" (one line per file read or changed)."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    sessions = _Sessions(ws, user=user, cwd=cwd, env=env, ready=ready, on_step=on_step)
    connections: set[asyncssh.SSHServerConnection] = set()
    host = SERVE_OPTIONS.get().host  # loopback, unless `crucible serve --host` binds elsewhere on purpose
    try:
        sock = bind_tcp(host)
    except OSError as exc:
        raise AgentError(f"the SSH server cannot listen on {host}: {exc}") from exc
    try:
        acceptor = await asyncssh.create_server(
            lambda: _KeyOnlyAuth(USERNAME, client_key, connections),
            sock=sock,
            server_host_keys=[host_key],
            process_factory=sessions.handle,
            encoding=None,
            config=None,
            allow_pty=True,
            line_editor=False,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_scp=True,
            sftp_factory=sessions.files,
            gss_host=None,
        )
    except (OSError, asyncssh.Error) as exc:
        sock.close()
        raise AgentError(f"the SSH server failed to start: {exc}") from exc
    endpoint = SSHEndpoint(
        host=host,
        port=sock.getsockname()[1],
        username=USERNAME,
        client_key=client_key.export_private_key("openssh").decode(),
        host_key=host_key.export_public_key("openssh").decode().strip(),
    )
    try:
        yield endpoint
    finally:
        await _shutdown(acceptor, connections, sessions)


async def _shutdown(
    acceptor: asyncssh.SSHAcceptor, connections: set[asyncssh.SSHServerConnection], sessions: _Sessions
) -> None:
    """Stop accepting, kill every running session's process group, close every connection."""
    acceptor.close()
    await sessions.kill_all()
    for task in list(sessions.tasks):
        task.cancel()
    for conn in list(connections):
        conn.close()
    pending = [*sessions.tasks, *(conn.wait_closed() for conn in connections), acceptor.wait_closed()]
    try:
        await within(asyncio.gather(*pending, return_exceptions=True), SHUTDOWN_GRACE)
    except TimeoutError:
        log.warning("the SSH server did not stop within %.0f s", SHUTDOWN_GRACE)
