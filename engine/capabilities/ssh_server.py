"""Serve a run's workspace shell over SSH: the run's ``ssh`` capability (``ssh/2``).

An asyncssh server on the host, one per run, bound to 127.0.0.1 on an ephemeral port (we
bind the socket ourselves, so there is no race for the port). Its sessions run in the
workspace through ``Workspace.open_process``, so the workspace needs no network and no
sshd: the server is the engine, and the workspace is reached through ``docker exec``.

    async with serve_ssh(ws, user=AGENT_UID, cwd="/app") as endpoint:
        ...  # capabilities["ssh"] = endpoint.url; capability_auth["ssh"] = endpoint.credential()

Credentials are per run and exist only in memory: an ed25519 host key (the client pins it)
and an ed25519 client key pair whose public half is the only authorized key, for the one
username. Passwords, keyboard-interactive, host-based and GSS authentication are off, as
are port, agent and X11 forwarding, SFTP/SCP and subsystems.

Sessions behave like OpenSSH's:
- exec (``ssh host 'command'``) runs ``bash -c <command>``; shell (no command) runs a login
  ``bash -l`` reading its commands from the channel. The exit status is passed back.
- stdout and stderr arrive merged on the channel's stdout: a workspace ``Process``
  streams them as one (its contract), so nothing comes on the SSH stderr channel except
  the server's own "could not start" messages.
- pty requests are declined: a workspace ``Process`` has no terminal. Clients then carry on
  over pipes (OpenSSH's client says "PTY allocation request failed" and keeps local echo).
- The client's environment variables are ignored: the session gets ``env`` (None = the
  workspace's minimal default), so nothing of the client's side leaks in.
- A signal request (``SIGINT``, ``SIGTERM``, ...) SIGKILLs the command's process group;
  the Process interface cannot deliver a particular signal.
- When the command exits, what it wrote is still delivered; output its background children
  go on writing is cut after ``DRAIN_GRACE`` quiet seconds, as the MCP bash tool does, and
  the children are left running (a staged ``server &`` survives its step there too).
- A session whose channel closes before its command exits (client gone, timeout) gets its
  process group killed. Leaving the ``serve_ssh`` block closes the listener and every
  connection and kills every still-running session's process group.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import socket
from typing import AsyncIterator, Mapping

import asyncssh

from engine.capabilities.ssh_client import SSHEndpoint
from engine.errors import AgentError, WorkspaceError
from engine.interfaces import Process, Workspace

USERNAME = "crucible"
DRAIN_GRACE = 0.5
"""Seconds without output after the command exited before its output is cut (background children
may hold it open)."""
DRAIN_LIMIT = 10.0
"""Seconds, at most, of forwarding output after the command exited."""
SHUTDOWN_GRACE = 5.0
READ_CHUNK = 65536
START_FAILED = 255

log = logging.getLogger(__name__)
if logging.getLogger("asyncssh").level == logging.NOTSET:
    # asyncssh logs every connection, auth and (whole) command at INFO: too chatty for runs.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)


class _KeyOnlyAuth(asyncssh.SSHServer):
    """Accepts exactly one username with exactly one public key; every other method is off."""

    def __init__(self, username: str, authorized: asyncssh.SSHKey, connections: set) -> None:
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

    def __init__(self, ws: Workspace, *, user: int, cwd: str, env: Mapping[str, str] | None,
                 ready: "asyncio.Future | None" = None) -> None:
        self.ws, self.user, self.cwd, self.ready = ws, user, cwd, ready
        self.env = dict(env) if env is not None else None
        self.running: set[Process] = set()
        self.tasks: set[asyncio.Task] = set()

    async def handle(self, channel: asyncssh.SSHServerProcess) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            await self._session(channel)
        finally:
            if task is not None:
                self.tasks.discard(task)

    async def _session(self, channel: asyncssh.SSHServerProcess) -> None:
        if channel.subsystem is not None:
            _fail(channel, f"crucible: subsystem {channel.subsystem!r} is not offered", 1)
            return
        argv = ["bash", "-l"] if channel.command is None else ["bash", "-c", channel.command]
        if self.ready is not None:  # the task is still being set up: a session waits for it
            try:
                await asyncio.shield(self.ready)
            except Exception:
                _fail(channel, "crucible: the task's setup failed; no session can start")
                return
        try:
            process = await self.ws.open_process(argv, user=self.user, cwd=self.cwd, env=self.env)
        except (WorkspaceError, OSError, ValueError) as exc:
            _fail(channel, f"crucible: could not start the session in the workspace: {exc}")
            return
        self.running.add(process)
        try:
            code = await _relay(channel, process)
        except WorkspaceError as exc:
            await self._kill(process)
            _fail(channel, f"crucible: the workspace failed during the session: {exc}")
            return
        except BaseException:
            await self._kill(process)  # cancelled (shutdown): the process group goes too
            raise
        if code is None:
            await self._kill(process)  # the channel closed first: nobody is listening any more
        else:
            self.running.discard(process)
            if not channel.is_closing():
                channel.exit(code)

    async def _kill(self, process: Process) -> None:
        # Shielded: a cancelled session must still take its process group with it.
        try:
            await asyncio.shield(_kill_quietly(process))
        finally:
            self.running.discard(process)

    async def kill_all(self) -> None:
        await asyncio.gather(*(_kill_quietly(p) for p in list(self.running)))
        self.running.clear()


def _fail(channel: asyncssh.SSHServerProcess, message: str, code: int = START_FAILED) -> None:
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


async def _relay(channel: asyncssh.SSHServerProcess, process: Process) -> int | None:
    """Stream both ways until the command exits (its exit code) or the channel closes (None)."""
    forwarded = _Counter()
    inbound = asyncio.create_task(_pump_in(channel, process))
    outbound = asyncio.create_task(_pump_out(process, channel, forwarded))
    exited = asyncio.create_task(process.wait())
    closed = asyncio.create_task(channel.channel.wait_closed())
    try:
        await asyncio.wait({exited, closed, outbound}, return_when=asyncio.FIRST_COMPLETED)
        if outbound.done() and outbound.exception() is not None:
            return None  # the client stopped reading: the channel is gone
        if not exited.done() and not closed.done():
            await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
        if not exited.done():
            return None
        code = exited.result()  # raises WorkspaceError if the backend failed
        await _drain(outbound, forwarded)
        return code
    finally:
        for task in (inbound, outbound, exited, closed):
            task.cancel()
        await asyncio.gather(inbound, outbound, exited, closed, return_exceptions=True)


class _Counter:
    def __init__(self) -> None:
        self.value = 0


async def _drain(outbound: asyncio.Task, forwarded: _Counter) -> None:
    """After the command's exit, forward the output still queued, then stop.

    Background children may hold the output open forever, so this ends after DRAIN_GRACE
    seconds without progress (or DRAIN_LIMIT in all); output written before the exit and
    still queued (a slow client) keeps flowing meanwhile, so it is not lost.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_LIMIT
    while not outbound.done() and loop.time() < deadline:
        before = forwarded.value
        await asyncio.wait({outbound}, timeout=min(DRAIN_GRACE, max(deadline - loop.time(), 0)))
        if forwarded.value == before:
            return


async def _pump_in(channel: asyncssh.SSHServerProcess, process: Process) -> None:
    while True:
        try:
            data = await channel.stdin.read(READ_CHUNK)
        except asyncssh.SignalReceived:
            await process.kill()
            return
        except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged, asyncssh.misc.SoftEOFReceived):
            continue
        if not data:
            await process.close_stdin()
            return
        try:
            await process.write(data)
        except BrokenPipeError:
            return  # the command exited without reading all its input: its business


async def _pump_out(process: Process, channel: asyncssh.SSHServerProcess, forwarded: _Counter) -> None:
    while chunk := await process.read(READ_CHUNK):
        channel.stdout.write(chunk)  # raises BrokenPipeError once the channel is closed
        await channel.stdout.drain()  # backpressure: a slow client slows the command, not our memory
        forwarded.value += len(chunk)


def _bind_loopback() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.asynccontextmanager
async def serve_ssh(ws: Workspace, *, user: int, cwd: str, env: Mapping[str, str] | None = None,
                    ready: "asyncio.Future | None" = None) -> AsyncIterator[SSHEndpoint]:
    """Serve SSH sessions into ``ws`` (as uid ``user``, in ``cwd``) until the block exits.

    With ``ready``, sessions wait for it first (the run's setup), as MCP tool calls do."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    sessions = _Sessions(ws, user=user, cwd=cwd, env=env, ready=ready)
    connections: set[asyncssh.SSHServerConnection] = set()
    sock = _bind_loopback()
    try:
        acceptor = await asyncssh.create_server(
            lambda: _KeyOnlyAuth(USERNAME, client_key, connections), sock=sock,
            server_host_keys=[host_key], process_factory=sessions.handle, encoding=None,
            config=None, allow_pty=False, line_editor=False, agent_forwarding=False,
            x11_forwarding=False, allow_scp=False, sftp_factory=None, gss_host=None,
        )
    except (OSError, asyncssh.Error) as exc:
        sock.close()
        raise AgentError(f"the SSH server failed to start: {exc}") from exc
    endpoint = SSHEndpoint(
        host="127.0.0.1", port=sock.getsockname()[1], username=USERNAME,
        client_key=client_key.export_private_key("openssh").decode(),
        host_key=host_key.export_public_key("openssh").decode().strip(),
    )
    try:
        yield endpoint
    finally:
        await _shutdown(acceptor, connections, sessions)


async def _shutdown(acceptor: asyncssh.SSHAcceptor, connections: set, sessions: _Sessions) -> None:
    """Stop accepting, kill every running session's process group, close every connection."""
    acceptor.close()
    await sessions.kill_all()
    for task in list(sessions.tasks):
        task.cancel()
    for conn in list(connections):
        conn.close()
    pending = [*sessions.tasks, *(conn.wait_closed() for conn in connections), acceptor.wait_closed()]
    try:
        await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), SHUTDOWN_GRACE)
    except asyncio.TimeoutError:
        log.warning("the SSH server did not stop within %.0f s", SHUTDOWN_GRACE)
