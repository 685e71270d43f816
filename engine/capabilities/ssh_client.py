"""The engine-side SSH client: what agents use to reach a run's ``ssh`` capability (``ssh/2``).

    endpoint = SSHEndpoint.from_capability(ctx.capabilities["ssh"], ctx.capability_auth["ssh"])
    async with open_ssh(endpoint) as conn:
        output, code = await run_bash(conn, "pytest -q", timeout=600)

``run_bash`` sends ONE remote command string, ``shlex.join([...wrapper..., command])``: the
server runs it the way OpenSSH does (``bash -c <string>``), so the command reaches the inner
``bash -lc`` as a single argument, quotes, heredocs and all. Building ``bash -lc {command}``
unquoted re-splits it remotely and stages a different command (seed 000's bugbot finding).
The wrapper (sh/stderr_last.sh) keeps the command's stderr aside and sends it after its
stdout, behind a fresh marker given on stdin, so the result joins them as the MCP bash tool
does (stdout, then stderr): over one merged stream their order would be the workspace's
scheduling, not the command's.

The endpoint pins the server's per-run host key and carries the per-run client key; both
live only in the engine's memory (and in ``AgentContext.capability_auth``), never in the
workspace.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shlex
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncssh

from engine.errors import AgentError
from engine.runtimes.docker.stream import BoundedBuffer
from engine.util import shell
from engine.util.aio import within

CONNECT_TIMEOUT = 30.0
MAX_OUTPUT = 1 << 20
"""Bytes of a command's output kept by ``run_bash`` (head and tail; the middle is dropped)."""
TIMEOUT_EXIT_CODE = 124
NO_STATUS_EXIT_CODE = 255
"""What OpenSSH's client reports when the session ended without an exit status."""


@dataclass(frozen=True)
class SSHEndpoint:
    """How to reach one run's SSH server: address, user, and the run's key pair halves."""

    host: str
    port: int
    username: str
    client_key: str = field(repr=False)
    """The client's private key (OpenSSH format): the run's only authorized key."""
    host_key: str
    """The server's public host key (OpenSSH format), pinned by the client."""

    @property
    def url(self) -> str:
        """What goes into ``AgentContext.capabilities["ssh"]``."""
        return f"ssh://{self.username}@{self.host}:{self.port}"

    def credential(self) -> str:
        """What goes into ``AgentContext.capability_auth["ssh"]``: both keys, as JSON."""
        return json.dumps({"client_key": self.client_key, "host_key": self.host_key})

    @classmethod
    def from_capability(cls, url: str, credential: str) -> SSHEndpoint:
        """The inverse of (``url``, ``credential()``). Raises ``AgentError`` on a malformed pair."""
        try:
            scheme, rest = url.split("://", 1)
            username, address = rest.rstrip("/").rsplit("@", 1)
            host, port = address.rsplit(":", 1)
            keys = json.loads(credential)
            if scheme != "ssh" or not username:
                raise ValueError(f"not an ssh://user@host:port URL: {url!r}")
            return cls(
                host=host.strip("[]"),
                port=int(port),
                username=username,
                client_key=str(keys["client_key"]),
                host_key=str(keys["host_key"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise AgentError(f"malformed ssh capability {url!r}: {exc}") from exc


@contextlib.asynccontextmanager
async def open_ssh(
    endpoint: SSHEndpoint, *, connect_timeout: float = CONNECT_TIMEOUT
) -> AsyncIterator[asyncssh.SSHClientConnection]:
    """An authenticated connection to ``endpoint``; raises ``AgentError`` if it cannot be had."""
    try:
        client_key = asyncssh.import_private_key(endpoint.client_key)
        host_key = asyncssh.import_public_key(endpoint.host_key)
        conn = await asyncssh.connect(
            endpoint.host,
            endpoint.port,
            username=endpoint.username,
            client_keys=[client_key],
            known_hosts=([host_key], [], []),
            # Hermetic: no ~/.ssh/config, no ssh-agent, no password or Kerberos attempts.
            config=None,
            agent_path=None,
            preferred_auth="publickey",
            gss_host=None,
            connect_timeout=connect_timeout,
        )
    except (OSError, asyncssh.Error, asyncssh.KeyImportError) as exc:
        raise AgentError(f"cannot connect to the ssh capability at {endpoint.url}: {exc}") from exc
    async with conn:
        yield conn


async def run_bash(
    conn: asyncssh.SSHClientConnection, command: str, timeout: float | None = None, *, max_output: int = MAX_OUTPUT
) -> tuple[str, int]:
    """Run ``command`` under ``bash -lc`` over ``conn``: (result text, exit code).

        The text is what the MCP bash tool returns for the same command, so a step reads the
        same whichever capability staged it: the output (stdout and stderr merged), then
        ``[exit code N]`` when N is not 0 (128 + N for a session killed by signal N, which the server
    reports as an exit signal). A timeout closes the session (the server then kills
        the command's process group) and returns 124 with a "timed out" note instead. Raises
        ``AgentError`` when no session can be opened.
    """
    remote = shlex.join(["bash", "-c", shell.script(__file__, "stderr_last.sh"), "crucible-ssh", command])
    mark = f"crucible-stderr-{secrets.token_hex(16)}".encode()
    try:
        process = await conn.create_process(remote, encoding=None, stderr=asyncssh.STDOUT)
    except (OSError, asyncssh.Error) as exc:
        raise AgentError(f"cannot open an ssh session: {exc}") from exc
    output = BoundedBuffer(max_output)
    try:
        process.stdin.write(mark + b"\n")
        process.stdin.write_eof()  # like the bash tool: the command's stdin is empty
        code = await within(_collect(process, output), timeout)
    except TimeoutError:
        return _join(
            _text(output, mark, completed=False), f"[command timed out after {timeout:g} s and was killed]"
        ), TIMEOUT_EXIT_CODE
    except (OSError, asyncssh.Error) as exc:
        raise AgentError(f"the ssh session broke: {exc}") from exc
    finally:
        process.close()
    text = _text(output, mark)
    return (text if code == 0 else _join(text, f"[exit code {code}]")), code


async def _collect(process: asyncssh.SSHClientProcess[bytes], output: BoundedBuffer) -> int:
    while chunk := await process.stdout.read(65536):
        output.add(chunk)
    await process.wait_closed()
    status = process.exit_status
    if process.exit_signal is not None:
        return _signal_code(process.exit_signal[0])
    return NO_STATUS_EXIT_CODE if status is None or status < 0 else status


def _signal_code(name: str) -> int:
    """A command killed by signal ``name`` as the MCP bash tool reports it: 128 + its number."""
    try:
        return 128 + signal.Signals[f"SIG{name}"].value
    except KeyError:
        return NO_STATUS_EXIT_CODE


def _text(output: BoundedBuffer, mark: bytes, completed: bool = True) -> str:
    """stdout, then stderr (a newline between when stdout does not end with one), as
    ``ExecResult.text`` joins them for the MCP bash tool. The marker is not the command's:
    it counts in no total (a completed command printed it, maybe into the dropped middle)."""
    out, found, err = output.value().partition(mark)
    if found and err and out and not out.endswith(b"\n"):
        out += b"\n"
    text = (out + err).decode("utf-8", "replace")
    if output.truncated:
        total = output.total - (len(mark) if found or completed else 0)
        text += f"\n[output truncated: {total} bytes in all, the middle was dropped]"
    return text


def _join(text: str, note: str) -> str:
    return f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}{note}"
