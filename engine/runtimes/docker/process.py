"""``Workspace.open_process`` for Docker: a long-lived exec with streaming stdin and output.

The command runs as ``/bin/sh -c 'echo $$; exec timeout 0 ...'``: the pid line lets
``kill`` reach the process group through another exec, and ``timeout 0`` (no deadline)
is there only because GNU timeout makes itself a process-group leader, so the group
holds the command and everything it spawns.

With a ``tty`` the exec gets Docker's terminal (``tty=True``: one raw stream, no frames) and
the wrapper sets its size with ``stty`` before the command starts, so the first thing the
command sees is the asked size (``exec_resize`` after the start would race it); there
``timeout`` is left out (it would take the command out of the terminal's foreground group)
and the exec's own session is the group. ``separate_stderr`` routes stderr frames to their
own queue (``read_stderr``); both queues share the backpressure credits, so a caller that
asks for it must read both.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.errors import WorkspaceError
from engine.models import TtySize
from engine.runtimes.docker.exec import (
    DockerApi,
    code_at_eof,
    exit_code,
    inspect_exec,
    kill_group,
    sdk_call,
    start_exec,
)
from engine.runtimes.docker.stream import STDERR, STDOUT, Demuxer, HijackedStream, PidLine
from engine.util.aio import within

PROCESS_WRAPPER = ("/bin/sh", "-c", 'echo $$; exec timeout 0 "$@"', "crucible-process")
TTY_WRAPPER = ("/bin/sh", "-c", 'stty rows "$1" cols "$2" 2>/dev/null; shift 2; echo $$; exec "$@"', "crucible-process")
_QUEUED_CHUNKS = 64
"""Output chunks buffered ahead of the reader; past that the daemon connection applies backpressure."""
_EOF = None


class DockerProcess:
    """Implements ``engine.interfaces.Process`` over one exec's hijacked connection."""

    def __init__(
        self,
        api: DockerApi,
        container_id: str,
        exec_id: str,
        stream: HijackedStream,
        *,
        tty: bool = False,
        separate_stderr: bool = False,
    ) -> None:
        self._api, self._container_id, self._exec_id = api, container_id, exec_id
        self._stream = stream
        self._tty, self._separate = tty, separate_stderr and not tty
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._err_chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._err_pending = b""
        self._err_eof = not self._separate
        self._tty_eof = False
        self._credits = threading.Semaphore(_QUEUED_CHUNKS)
        self._pid: asyncio.Future[int | None] = loop.create_future()
        self._eof: asyncio.Future[None] = loop.create_future()
        self._pending = b""
        self._read_eof = False
        self._exit_code: int | None = None
        # The exit code the reader asked for once, right after EOF (None: not recorded yet, or cut).
        self._code_at_eof: asyncio.Future[int | None] = loop.create_future()
        self._aborted = threading.Event()
        self._writes: queue.Queue[tuple[bytes | None, asyncio.Future[None] | None]] = queue.Queue()
        # Why stdin takes nothing more ("closed", "aborted", the send error), once the writer
        # thread has ended: a later write must fail and a later close do nothing, not wait
        # on a queue nobody reads. The lock orders that against putting on the queue.
        self._stdin_lock = threading.Lock()
        self._stdin_ended: str | None = None
        threading.Thread(target=self._read_loop, name="crucible-process-reader", daemon=True).start()
        threading.Thread(target=self._write_loop, name="crucible-process-writer", daemon=True).start()

    @classmethod
    async def start(
        cls,
        api: DockerApi,
        container_id: str,
        argv: Sequence[str],
        *,
        user: int,
        cwd: str | None,
        env: Mapping[str, str],
        tty: TtySize | None = None,
        separate_stderr: bool = False,
    ) -> DockerProcess:
        if not argv:
            raise ValueError("open_process needs a non-empty argv")
        if tty is not None and (tty.cols < 1 or tty.rows < 1):
            raise ValueError(f"a terminal needs at least 1x1 cells, got {tty}")
        wrapped = [*PROCESS_WRAPPER, *argv] if tty is None else [*TTY_WRAPPER, str(tty.rows), str(tty.cols), *argv]
        exec_id, stream = await sdk_call(
            "exec (process)",
            start_exec,
            api,
            container_id,
            wrapped,
            user=user,
            cwd=cwd,
            env=env,
            stdin=True,
            tty=tty is not None,
        )
        process = cls(api, container_id, exec_id, stream, tty=tty is not None, separate_stderr=separate_stderr)
        if tty is not None:
            await process.resize(tty)  # where the image has no stty, the size comes a moment late
        return process

    # -- threads ---------------------------------------------------------------------------

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop is closed; nobody will read

    def _push(self, chunk: bytes | None, queue: asyncio.Queue[bytes | None] | None = None) -> None:
        # Wait for a free slot so an unread process cannot grow host memory without bound.
        while not self._credits.acquire(timeout=0.2):
            if self._aborted.is_set() or self._loop.is_closed():
                return
        self._call((self._chunks if queue is None else queue).put_nowait, chunk)

    def _frames(self, demux: Demuxer, chunk: bytes) -> list[tuple[int, bytes]]:
        """A terminal's stream has no frames: all of it is what the terminal shows."""
        return [(STDOUT, chunk)] if self._tty else list(demux.feed(chunk))

    def _read_loop(self) -> None:
        demux, pid_line = Demuxer(), PidLine()
        # The wrapper's pid line is on stdout; the daemon reads stdout and stderr separately,
        # so stderr the command wrote just after it can arrive first. It waits here, in the
        # order it came, until the pid line is off stdout (else that line would be taken from
        # stderr's text and the pid passed on as output).
        early_stderr: list[bytes] = []
        try:
            while not self._aborted.is_set() and (chunk := self._stream.recv()):
                for stream_id, payload in self._frames(demux, chunk):
                    if self._separate and stream_id == STDERR:
                        self._push(payload, self._err_chunks)
                        continue
                    if not pid_line.done and stream_id == STDERR:
                        early_stderr.append(payload)
                        continue
                    rest = payload if pid_line.done else pid_line.feed(payload)
                    if pid_line.done and not self._pid.done():
                        self._call(_settle, self._pid, pid_line.pid)
                    if pid_line.done and early_stderr:
                        for held in early_stderr:
                            self._push(held)
                        early_stderr.clear()
                    if rest:
                        self._push(rest)
        except (OSError, ValueError):
            pass
        finally:
            for held in early_stderr:  # the stream ended before any pid line: still output
                self._push(held)
            pid_line.finish()
            self._call(_settle, self._pid, pid_line.pid)
            self._call(_settle, self._eof, None)
            self._credits.release()  # the end marker always gets through
            self._call(self._chunks.put_nowait, _EOF)
            if self._separate:
                self._credits.release()
                self._call(self._err_chunks.put_nowait, _EOF)
            self._stream.close()
            # Last, when readers have their EOF: asked here, ``wait`` needs no request (and no
            # hand-off to a thread) of its own.
            code = None if self._aborted.is_set() else code_at_eof(self._api, self._exec_id)
            self._call(_settle, self._code_at_eof, code)

    def _write_loop(self) -> None:
        ended = "closed"
        try:
            while True:
                data, done = self._writes.get()
                if done is None:  # abort(): just stop
                    ended = "aborted"
                    return
                try:
                    if data is None:
                        self._stream.close_write()
                    else:
                        self._stream.send_all(data)
                    self._call(_settle, done, None)
                except (OSError, ValueError) as exc:
                    ended = f"closed: {exc}"
                    self._call(_fail, done, BrokenPipeError(f"process stdin is {ended}"))
                    return
                if data is None:
                    return
        finally:
            self._end_stdin(ended)

    def _end_stdin(self, why: str) -> None:
        with self._stdin_lock:
            self._stdin_ended = why
            left = []
            while not self._writes.empty():
                left.append(self._writes.get_nowait())
        for _, done in left:
            if done is not None:
                self._call(_fail, done, BrokenPipeError(f"process stdin is {why}"))

    def _enqueue(self, data: bytes | None) -> asyncio.Future[None] | None:
        """Hand ``data`` (None: EOF) to the writer thread; None when stdin has ended."""
        done: asyncio.Future[None] = self._loop.create_future()
        with self._stdin_lock:
            if self._stdin_ended is not None:
                return None
            self._writes.put((data, done))
        return done

    # -- Process ---------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        if self._tty and not self._pid.done():
            # The terminal echoes what is typed: typed before the wrapper's pid line, it would come first.
            await asyncio.shield(self._pid)
        if self._exited or self._tty_eof:
            raise BrokenPipeError("the process has exited" if self._exited else "the terminal's input was closed")
        done = self._enqueue(bytes(data))
        if done is None:
            raise BrokenPipeError(f"process stdin is {self._stdin_ended}")
        await done

    async def close_stdin(self) -> None:
        if self._exited:
            return
        if self._tty:  # a terminal's EOF is the EOF character typed (a half-close would hang it up)
            if self._stdin_ended is None and not self._tty_eof:
                with contextlib.suppress(BrokenPipeError):
                    await self.write(b"\x04")
                self._tty_eof = True
            return
        done = self._enqueue(None)
        if done is None:
            return  # closed already (or broken): nothing left to close
        try:
            await done
        except BrokenPipeError:
            pass  # already closed from the other side

    async def read(self, n: int = 65536) -> bytes:
        if not self._pending:
            if self._read_eof:
                return b""
            chunk = await self._chunks.get()
            self._credits.release()
            if chunk is _EOF:
                self._read_eof = True
                return b""
            self._pending = chunk
        out, self._pending = self._pending[:n], self._pending[n:]
        return out

    async def read_stderr(self, n: int = 65536) -> bytes:
        if not self._err_pending:
            if self._err_eof:
                return b""
            chunk = await self._err_chunks.get()
            self._credits.release()
            if chunk is _EOF:
                self._err_eof = True
                return b""
            self._err_pending = chunk
        out, self._err_pending = self._err_pending[:n], self._err_pending[n:]
        return out

    async def resize(self, size: TtySize) -> None:
        if not self._tty or self._exited or size.cols < 1 or size.rows < 1:
            return
        try:
            await sdk_call("exec resize", self._api.exec_resize, self._exec_id, height=size.rows, width=size.cols)
        except WorkspaceError:
            pass  # it exited meanwhile: nothing to resize

    async def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        # Stream EOF usually coincides with exit, so until it comes the exec is inspected only
        # now and then (a child that outlives the process may hold the stream open); after
        # it, briefly, for the daemon to record the exit code. Each inspect is a request the
        # daemon and this process pay for: polled from 20 ms, a run spent ~85 of them.
        open_delay, closed_delay = 0.1, 0.005
        while True:
            code = None
            if self._eof.done():  # the reader's answer first; a request only where it had none
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
                done, _ = await asyncio.wait({self._code_at_eof}, timeout=remaining)
                if not done:
                    raise TimeoutError(f"process did not exit within {timeout} s")
                code = self._code_at_eof.result()
            if code is None:
                code = exit_code(await sdk_call("exec inspect", inspect_exec, self._api, self._exec_id))
            if code is not None:
                self._exit_code = code
                return code
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"process did not exit within {timeout} s")
            if self._eof.done():  # a sleep: waiting on the settled ``_eof`` would return at once
                delay, closed_delay = closed_delay, min(closed_delay * 2, 0.08)
                await asyncio.sleep(delay if remaining is None else min(delay, remaining))
            else:
                delay, open_delay = open_delay, min(open_delay * 2, 0.5)
                await asyncio.wait({self._eof}, timeout=delay if remaining is None else min(delay, remaining))

    async def kill(self) -> None:
        if self._exited:
            return
        try:
            pid = await within(asyncio.shield(self._pid), 10.0)
        except TimeoutError:
            pid = None
        await kill_group(self._api, self._container_id, pid)

    # -- housekeeping ----------------------------------------------------------------------

    @property
    def _exited(self) -> bool:
        return self._exit_code is not None or self._eof.done()

    def abort(self) -> None:
        """Release the reader and writer threads; the workspace calls this when it closes."""
        self._aborted.set()
        self._stream.abort()
        with self._stdin_lock:
            if self._stdin_ended is None:
                self._writes.put((None, None))


def _settle(fut: asyncio.Future[Any], value: object) -> None:
    if not fut.done():
        fut.set_result(value)


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:

    if not fut.done():
        fut.set_exception(exc)
