"""``exec`` and ``open_process`` for ``runtime=local``: host subprocesses that enter the sandbox.

Each command is ``nsenter ... setpriv ... sh -c WRAPPER argv`` started in a new session,
so its host process group holds nsenter, the command and everything it spawns; a
deadline, a cancel or ``Process.kill`` SIGKILLs that group from the host. Output is read
by the event loop itself (asyncio pipe transports, no threads) into the same bounded
buffers the Docker runtime uses, so a chatty command neither blocks nor fills memory.

The wrapper's first line of stdout (its pid, as the Docker runtime's wrapper prints it)
says the command actually started (``cd`` into ``cwd`` worked): that is what lets a
missing cwd raise ``WorkspaceError`` while a command's own exit code 1 stays an exit
code. The line is taken off the output before anything else sees it.

``open_process(tty=...)`` gives the command a pty of the sandbox's own (``terminal.py``) as
stdin, stdout, stderr and controlling terminal (``setsid`` then ``TIOCSCTTY`` in the child,
before nsenter: the terminal carries over into the sandbox). ``separate_stderr`` reads fd 2
into a queue of its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from engine.errors import WorkspaceError
from engine.models import ExecResult, TtySize
from engine.runtimes.docker.exec import DRAIN_GRACE
from engine.runtimes.docker.stream import BoundedBuffer, PidLine
from engine.runtimes.local.sandbox import enter_argv
from engine.runtimes.local.terminal import PtyMaster, open_pty, set_size, take_terminal
from engine.util.aio import finish_even_if_cancelled, within

log = logging.getLogger(__name__)

_QUEUE_HIGH = 1 << 20
"""Bytes of ``open_process`` output buffered ahead of the reader before the pipe is paused."""


def _settle(fut: asyncio.Future[Any], value: object = None) -> None:
    if not fut.done():
        fut.set_result(value)


def exit_status(returncode: int | None) -> int:
    """A shell-style code: death by signal N is 128 + N (nsenter re-raises its child's signal)."""
    if returncode is None:
        return -1
    return 128 - returncode if returncode < 0 else returncode


def kill_group(pgid: int | None) -> None:
    if pgid is None:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the whole group is already gone


class _Spawned:
    """One entered command: its transport and its host process group."""

    def __init__(self, transport: asyncio.SubprocessTransport) -> None:
        self.transport = transport
        self.pgid = transport.get_pid()

    @classmethod
    async def start(
        cls,
        init_pid: int,
        argv: Sequence[str],
        *,
        user: int,
        cwd: str,
        env: Mapping[str, str],
        protocol: asyncio.SubprocessProtocol,
        stdin: bool,
        merge: bool,
        terminal: int | None = None,
    ) -> _Spawned:
        if not argv:
            raise ValueError("a command needs a non-empty argv")
        loop = asyncio.get_running_loop()
        pipes: dict[str, Any] = dict(
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        )
        if terminal is not None:  # all three are the terminal, which becomes the controlling one
            pipes = dict(stdin=terminal, stdout=terminal, stderr=terminal, preexec_fn=take_terminal)
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: protocol,
                *enter_argv(init_pid, user=user, cwd=cwd, argv=list(argv)),
                env=dict(env),
                cwd="/",
                start_new_session=True,
                **pipes,
            )
        except OSError as exc:
            raise WorkspaceError(f"could not enter the sandbox: {exc}") from exc
        return cls(transport)

    def close(self) -> None:
        self.transport.close()


class _Collector(asyncio.SubprocessProtocol):
    def __init__(self, max_output: int) -> None:
        loop = asyncio.get_running_loop()
        self.stdout, self.stderr = BoundedBuffer(max_output), BoundedBuffer(max_output)
        self.pid_line = PidLine()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.stdout.add(self.pid_line.feed(data))
        else:
            self.stderr.add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open & {1, 2}:
            _settle(self.drained)

    def process_exited(self) -> None:
        _settle(self.exited)


async def run_exec(
    init_pid: int,
    argv: Sequence[str],
    *,
    user: int,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    stdin: bytes | None,
    max_output: int,
) -> ExecResult:
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    started = time.monotonic()
    collector = _Collector(max_output)
    spawned = await _Spawned.start(
        init_pid, argv, user=user, cwd=cwd, env=env, protocol=collector, stdin=stdin is not None, merge=False
    )
    try:
        if stdin is not None:
            pipe = cast(asyncio.WriteTransport, spawned.transport.get_pipe_transport(0))  # stdin=PIPE
            pipe.write(stdin)  # buffered by the loop, written as the command reads
            pipe.write_eof()
        try:
            await within(asyncio.shield(collector.exited), timeout)
            timed_out = False
        except TimeoutError:
            timed_out = True
            kill_group(spawned.pgid)
            await collector.exited
        # A background child may still hold the output pipes: give it a moment, then cut.
        try:
            await within(asyncio.shield(collector.drained), DRAIN_GRACE)
        except TimeoutError:
            pass
    except BaseException:
        # Cancelled: leave nothing running behind us.
        kill_group(spawned.pgid)
        await finish_even_if_cancelled(collector.exited)
        spawned.close()
        raise
    code = exit_status(spawned.transport.get_returncode())
    spawned.close()
    collector.pid_line.finish()
    if timed_out:
        code = 124
    elif collector.pid_line.pid is None:
        why = collector.pid_line.start_error or collector.stderr.value().decode("utf-8", "replace").strip()
        raise WorkspaceError(f"could not start {argv[0]!r} in {cwd}: {why or f'exit code {code}'}")
    return ExecResult(
        exit_code=code,
        stdout=collector.stdout.value(),
        stderr=collector.stderr.value(),
        timed_out=timed_out,
        truncated=collector.stdout.truncated or collector.stderr.truncated,
        stdout_bytes_total=collector.stdout.total,
        stderr_bytes_total=collector.stderr.total,
        seconds=time.monotonic() - started,
    )


class _Stream(asyncio.SubprocessProtocol):
    """Merged output as a queue, with backpressure on the pipe; stdin flow control for write.
    With ``separate_stderr`` fd 2 goes to ``err_chunks`` (no backpressure: stderr is small)."""

    def __init__(self, separate_stderr: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.err_chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.separate_stderr = separate_stderr
        self.output: asyncio.ReadTransport | PtyMaster | None = None
        """What output comes from, to pause: stdout's pipe, or the terminal's master."""
        self.queued = 0
        self.exited: asyncio.Future[None] = loop.create_future()
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.transport: asyncio.SubprocessTransport | None = None
        self._paused = False
        self._pid_line = PidLine()
        self.started: asyncio.Future[None] = loop.create_future()
        """Settled once the wrapper's pid line is off the output (or the output ended)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.SubprocessTransport, transport)  # a subprocess protocol's
        if self.output is None:
            self.output = cast("asyncio.ReadTransport | None", self.transport.get_pipe_transport(1))

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 2 and self.separate_stderr:
            self.err_chunks.put_nowait(data)
            return
        if not self._pid_line.done:
            data = self._pid_line.feed(data)
            if self._pid_line.done:
                _settle(self.started)
            if self._pid_line.done and self._pid_line.start_error is not None:
                data = self._pid_line.start_error.encode() + b"\n" + data  # not a pid: the start error, keep it
            if not data:
                return
        self.chunks.put_nowait(data)
        self.queued += len(data)
        if self.queued > _QUEUE_HIGH and not self._paused and self.output is not None:
            self._paused = True
            self.output.pause_reading()

    def consumed(self, n: int) -> None:
        self.queued -= n
        if self._paused and self.queued <= _QUEUE_HIGH // 2 and self.output is not None:
            self._paused = False
            if not self.output.is_closing():
                self.output.resume_reading()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 2 and self.separate_stderr:
            self.err_chunks.put_nowait(None)
        elif fd == 1:
            if not self._pid_line.done:  # output ended inside the first line: pass it on
                self._pid_line.finish()
                if self._pid_line.start_error:
                    self.chunks.put_nowait(self._pid_line.start_error.encode())
            self.chunks.put_nowait(None)
            _settle(self.started)
        elif fd == 0:
            self.can_write.set()  # wake a blocked writer; it will find stdin gone

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def process_exited(self) -> None:
        _settle(self.exited)


class LocalProcess:
    """Implements ``engine.interfaces.Process`` for a command entered into a local sandbox."""

    def __init__(self, spawned: _Spawned, stream: _Stream, pty: PtyMaster | None = None) -> None:
        self._spawned, self._stream, self._pty = spawned, stream, pty
        self._pending = b""
        self._err_pending = b""
        self._eof = False
        self._err_eof = not stream.separate_stderr
        self._stdin_closed = False

    @classmethod
    async def start(
        cls,
        init_pid: int,
        argv: Sequence[str],
        *,
        user: int,
        cwd: str,
        env: Mapping[str, str],
        tty: TtySize | None = None,
        separate_stderr: bool = False,
    ) -> LocalProcess:
        if tty is None:
            stream = _Stream(separate_stderr)
            spawned = await _Spawned.start(
                init_pid, argv, user=user, cwd=cwd, env=env, protocol=stream, stdin=True, merge=not separate_stderr
            )
            return cls(spawned, stream)
        stream = _Stream()
        try:
            master, slave = open_pty(init_pid, tty, user)
        except OSError as exc:
            raise WorkspaceError(f"could not open a terminal in the sandbox: {exc}") from exc
        pty = PtyMaster(
            master, lambda data: stream.pipe_data_received(1, data), lambda: stream.pipe_connection_lost(1, None)
        )
        stream.output = pty
        try:
            spawned = await _Spawned.start(
                init_pid, argv, user=user, cwd=cwd, env=env, protocol=stream, stdin=True, merge=True, terminal=slave
            )
        except BaseException:
            pty.close()
            raise
        finally:
            os.close(slave)  # the command holds its own copies: the master sees EIO once they are gone
        return cls(spawned, stream, pty)

    @property
    def _exited(self) -> bool:
        return self._stream.exited.done()

    async def write(self, data: bytes) -> None:
        if self._pty is not None:
            # The terminal echoes what is typed: typed before the wrapper's pid line, it would come first.
            await asyncio.shield(self._stream.started)
            if self._exited or self._stdin_closed:
                raise BrokenPipeError("the process's terminal is closed")
            await self._pty.write(bytes(data))
            return
        pipe = cast("asyncio.WriteTransport | None", self._spawned.transport.get_pipe_transport(0))
        if self._exited or self._stdin_closed or pipe is None or pipe.is_closing():
            raise BrokenPipeError("the process's stdin is closed")
        pipe.write(bytes(data))
        await self._stream.can_write.wait()

    async def close_stdin(self) -> None:
        if self._pty is not None:  # a terminal's EOF is the EOF character (^D) at a line's start
            if not self._stdin_closed and not self._exited:
                self._stdin_closed = True
                try:
                    await self._pty.write(b"\x04")
                except BrokenPipeError:
                    pass
            return
        pipe = cast("asyncio.WriteTransport | None", self._spawned.transport.get_pipe_transport(0))
        self._stdin_closed = True
        if pipe is not None and not pipe.is_closing():
            pipe.write_eof()

    async def read(self, n: int = 65536) -> bytes:
        if not self._pending:
            if self._eof:
                return b""
            chunk = await self._stream.chunks.get()
            if chunk is None:
                self._eof = True
                return b""
            self._stream.consumed(len(chunk))
            self._pending = chunk
        out, self._pending = self._pending[:n], self._pending[n:]
        return out

    async def read_stderr(self, n: int = 65536) -> bytes:
        if not self._err_pending:
            if self._err_eof:
                return b""
            chunk = await self._stream.err_chunks.get()
            if chunk is None:
                self._err_eof = True
                return b""
            self._err_pending = chunk
        out, self._err_pending = self._err_pending[:n], self._err_pending[n:]
        return out

    async def resize(self, size: TtySize) -> None:
        if self._pty is not None and not self._pty.is_closing() and size.cols >= 1 and size.rows >= 1:
            set_size(self._pty.fd, size)

    async def wait(self, timeout: float | None = None) -> int:
        try:
            await within(asyncio.shield(self._stream.exited), timeout)
        except TimeoutError:
            raise TimeoutError(f"process did not exit within {timeout} s") from None
        return exit_status(self._spawned.transport.get_returncode())

    async def kill(self) -> None:
        if not self._exited:
            kill_group(self._spawned.pgid)

    def abort(self) -> None:
        """The workspace is closing (its sandbox is gone): kill and release the pipes."""
        if not self._exited:
            kill_group(self._spawned.pgid)
        self._spawned.close()
        if self._pty is not None:
            self._pty.close()
