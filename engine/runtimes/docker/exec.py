"""``Workspace.exec`` for Docker: one ``docker exec`` per call, bounded and killable (or, for a
kind of command the workspace keeps a spare for, one started ahead: engine/runtimes/docker/spares.py,
``runtime.spare_execs``).

Every command runs under a tiny wrapper, ``/bin/sh -c 'echo $$; exec timeout ...'``:

* ``echo $$`` reports the command's in-container pid first on stdout (then stripped),
  so the host can kill its process group later through another exec. runc makes each
  exec a session leader, so that pid is also the group id.
* GNU ``timeout`` (coreutils, present in every image we support) enforces the deadline
  inside the container: it puts itself in its own process group and, on expiry,
  SIGKILLs the whole group — grandchildren included — then dies itself (exit 137).
* A host-side backstop fires if the exec is still streaming ``BACKSTOP_GRACE`` seconds
  after the deadline (a wedged daemon, a broken ``timeout``): kill the group, stop
  reading, report a timeout.

Output is read in a dedicated thread (never the event loop, never the default executor
pool, which a few long execs would exhaust) into bounded buffers, so a chatty command
can neither block on a full pipe nor fill the host's memory.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from engine.errors import WorkspaceError
from engine.models import ExecResult
from engine.runtimes.docker.spares import SPARE_WRAPPER, Kind, Spares, Started, handed, kind_of
from engine.runtimes.docker.stream import STDERR, STDOUT, BoundedBuffer, Demuxer, HijackedStream, PidLine
from engine.runtimes.docker.wire import WireError, WireLost, wire_for
from engine.util.aio import finish_even_if_cancelled, within

T = TypeVar("T")
DockerApi = Any
"""The Docker SDK's low-level ``APIClient``: the SDK ships no types."""


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TIMEOUT_WRAPPER = ("/bin/sh", "-c", 'echo $$; exec timeout -s KILL "$@"', "crucible-exec")
BACKSTOP_GRACE = 10.0
"""Seconds past the in-container deadline before the host kills the exec itself."""
DRAIN_GRACE = 0.5
"""Seconds to keep reading after the command exited while something still holds its output open."""


class SpareUnused(Exception):
    """A spare exec that never took its command (it printed no pid): run it in an exec of its own."""


def default_env(user: int, path: str = DEFAULT_PATH) -> dict[str, str]:
    return {"PATH": path, "HOME": "/root" if user == 0 else "/tmp", "LANG": "C.UTF-8"}


def docker_user(uid: int) -> str:
    # "uid:gid", not just "uid": an image without a passwd entry for the uid would
    # otherwise run it with gid 0, i.e. in root's group (measured on this engine).
    return f"{uid}:{uid}"


async def sdk_call(what: str, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """A blocking SDK call, off the event loop, with SDK failures turned into WorkspaceError."""
    import docker.errors
    import requests.exceptions

    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except (docker.errors.DockerException, requests.exceptions.RequestException, WireError, WireLost) as exc:
        raise WorkspaceError(f"docker {what} failed: {exc}") from exc


def start_exec(
    api: DockerApi,
    container_id: str,
    argv: Sequence[str],
    *,
    user: int,
    cwd: str | None,
    env: Mapping[str, str],
    stdin: bool,
    tty: bool = False,
) -> tuple[str, HijackedStream]:
    """Create and start an exec; return its id and its hijacked stream (blocking). With ``tty``
    the stream is the terminal's raw bytes, not Docker's multiplexed frames."""
    wire = wire_for(api)
    if wire is not None:
        config = {
            "User": docker_user(user),
            "Privileged": False,
            "Tty": tty,
            "AttachStdin": stdin,
            "AttachStdout": True,
            "AttachStderr": True,
            "Cmd": list(argv),
            "Env": [f"{k}={v}" for k, v in env.items()],
            **({"WorkingDir": cwd} if cwd is not None else {}),
        }
        exec_id = wire.create(container_id, config)
        return exec_id, wire.start(exec_id, tty)
    created = api.exec_create(
        container_id,
        list(argv),
        stdout=True,
        stderr=True,
        stdin=stdin,
        tty=tty,
        user=docker_user(user),
        workdir=cwd,
        environment=[f"{k}={v}" for k, v in env.items()],
    )
    sock = api.exec_start(created["Id"], socket=True, tty=tty)
    return created["Id"], HijackedStream(sock)


def start_spare(api: DockerApi, container_id: str, kind: Kind) -> Started:
    """A spare exec of ``kind`` (engine/runtimes/docker/spares.py), started (blocking)."""
    user, cwd, env = kind
    return start_exec(api, container_id, SPARE_WRAPPER, user=user, cwd=cwd, env=dict(env), stdin=True)


def run_simple(api: DockerApi, container_id: str, argv: Sequence[str], user: int = 0) -> tuple[int, bytes]:
    """Run a short command (root's by default) without wrapper or bounds (blocking); for housekeeping."""
    exec_id, stream = start_exec(api, container_id, argv, user=user, cwd=None, env=default_env(user), stdin=False)
    output, demux = bytearray(), Demuxer()
    try:
        while chunk := stream.recv():
            for _, payload in demux.feed(chunk):
                output += payload
    finally:
        stream.close()
    return wait_exit_code(api, exec_id), bytes(output)


def inspect_exec(api: DockerApi, exec_id: str) -> dict[str, Any]:
    """The daemon's record of an exec (blocking): over the wire where there is one."""
    wire = wire_for(api)
    info: dict[str, Any] = api.exec_inspect(exec_id) if wire is None else wire.inspect(exec_id)
    return info


def exit_code(info: Mapping[str, Any]) -> int | None:
    """The exit code in an exec's record, or None while the daemon has not recorded one."""
    if info.get("Running") or info.get("ExitCode") is None:
        return None
    return int(info["ExitCode"])


def wait_exit_code(api: DockerApi, exec_id: str, patience: float = 5.0) -> int:
    """The exit code of a finished exec; the daemon may record it a moment after EOF (under
    load 0.1 s and more: polled every 10 ms that was ~3.5 inspects an exec, each a request
    the daemon and this process pay for, so the wait doubles from 5 ms up to 80 ms)."""
    deadline = time.monotonic() + patience
    pause = 0.005
    while True:
        code = exit_code(inspect_exec(api, exec_id))
        if code is not None:
            return code
        if time.monotonic() > deadline:
            raise WorkspaceError(f"exec {exec_id[:12]} still running after its output ended")
        time.sleep(pause)
        pause = min(pause * 2, 0.08)


async def kill_group(api: DockerApi, container_id: str, pid: int | None, user: int = 0) -> None:
    """SIGKILL process group ``pid`` inside the container (best effort: it may be gone), with
    ``user``'s rights: a pid a spare reported is its uid's word, and its uid's to kill."""
    if pid is None or pid <= 1:
        return
    # dash's kill rejects "--"; "-9 -PGID" works in dash and bash alike.
    argv = ["/bin/sh", "-c", f"kill -9 -{int(pid)} 2>/dev/null; true"]
    await sdk_call("exec (kill)", run_simple, api, container_id, argv, user)


class OutputPump:
    """Reads one exec's stream to its end in a thread, into bounded stdout/stderr buffers.

    After the stream's end (``done``) the same thread asks the daemon once for the exit code
    (``code``; ``code_at_eof``): that saves every exec a hand-off to another thread on its
    critical path.
    """

    def __init__(
        self, api: DockerApi, exec_id: str, stream: HijackedStream, max_output: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.stream = stream
        self.stdout = BoundedBuffer(max_output)
        self.stderr = BoundedBuffer(max_output)
        self.pid_line = PidLine()
        self.done: asyncio.Future[None] = loop.create_future()
        self.code: asyncio.Future[int | None] = loop.create_future()
        self._api, self._exec_id, self._loop = api, exec_id, loop
        self._aborted = False
        threading.Thread(target=self._run, name="crucible-exec-reader", daemon=True).start()

    def abort(self) -> None:
        """Cut the stream: the reader sees EOF and asks for no exit code."""
        self._aborted = True
        self.stream.abort()

    def _run(self) -> None:
        demux = Demuxer()
        try:
            while chunk := self.stream.recv():
                for stream_id, payload in demux.feed(chunk):
                    if stream_id == STDOUT:
                        self.stdout.add(self.pid_line.feed(payload))
                    elif stream_id == STDERR:
                        self.stderr.add(payload)
        except (OSError, ValueError):
            pass  # aborted by the host side, or the daemon dropped the connection
        finally:
            self.pid_line.finish()
            self.stream.close()
            self._settle(self.done, None)  # first: the end of output waits on no request
            self._settle(self.code, None if self._aborted else code_at_eof(self._api, self._exec_id))

    def _settle(self, fut: asyncio.Future[Any], value: object) -> None:
        try:
            self._loop.call_soon_threadsafe(_resolve, fut, value)
        except RuntimeError:
            pass  # the loop is gone; nobody is waiting any more


def code_at_eof(api: DockerApi, exec_id: str) -> int | None:
    """The exit code, asked once right after the exec's stream ended: the daemon has nearly
    always recorded it by then. None when it has not (or the request failed): the caller polls
    (``wait_exit_code``), and reports what fails."""
    try:
        return exit_code(inspect_exec(api, exec_id))
    except Exception:  # noqa: BLE001 - asked again by the caller, whose error is the one to report
        return None


def _resolve(fut: asyncio.Future[Any], value: object) -> None:
    if not fut.done():
        fut.set_result(value)


def _feed_stdin(stream: HijackedStream, data: bytes) -> None:
    try:
        stream.send_all(data)
        stream.close_write()
    except OSError:
        pass  # the command exited without reading all its input; that is its business


async def run_exec(
    api: DockerApi,
    container_id: str,
    argv: Sequence[str],
    *,
    user: int,
    cwd: str | None,
    env: Mapping[str, str],
    timeout: float,
    stdin: bytes | None,
    max_output: int,
    backstop_grace: float = BACKSTOP_GRACE,
    spare: Started | None = None,
) -> ExecResult:
    """``spare``: an exec of this kind started ahead (engine/runtimes/docker/spares.py), to hand
    the command to; ``SpareUnused`` where it did not take it (then the command never ran)."""
    if not argv:
        raise ValueError("exec needs a non-empty argv")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    started = time.monotonic()
    if spare is not None:
        exec_id, stream = spare
        stdin = handed(cwd, argv, timeout, stdin)
    else:
        # Never "0.000": to GNU timeout a zero duration means no deadline at all.
        wrapped = [*TIMEOUT_WRAPPER, f"{max(timeout, 0.001):.3f}", *argv]
        exec_id, stream = await sdk_call(
            "exec", start_exec, api, container_id, wrapped, user=user, cwd=cwd, env=env, stdin=stdin is not None
        )
    pump = OutputPump(api, exec_id, stream, max_output, asyncio.get_running_loop())
    killer = user if spare is not None else 0  # root kills what a root-made wrapper reported, only that
    if stdin is not None:
        threading.Thread(target=_feed_stdin, args=(stream, stdin), name="crucible-exec-stdin", daemon=True).start()
    try:
        finished = await _until_exit(api, exec_id, pump, deadline=started + timeout + backstop_grace)
    except BaseException:
        # Cancelled (or the daemon failed): leave nothing running behind us.
        await finish_even_if_cancelled(_kill_quietly(api, container_id, pump, killer))
        raise
    if not finished:  # the backstop
        await _kill_quietly(api, container_id, pump, killer)
        return exec_result(pump, 124, True, started)
    if spare is not None and pump.pid_line.pid is None:
        raise SpareUnused(f"the spare exec {exec_id[:12]} took no command")
    code = await pump.code
    if code is None:
        code = await sdk_call("exec inspect", wait_exit_code, api, exec_id)
    if pump.pid_line.pid is None and pump.pid_line.start_error is not None:
        raise WorkspaceError(f"could not start {argv[0]!r}: {pump.pid_line.start_error}")
    timed_out = code in (124, 137) and time.monotonic() - started >= timeout
    return exec_result(pump, 124 if timed_out else code, timed_out, started)


async def _until_exit(api: DockerApi, exec_id: str, pump: OutputPump, *, deadline: float) -> bool:
    """Wait for the exec to end; False if the backstop deadline passed first.

    Usually the stream's EOF says the command ended. But a background child that
    inherited stdout keeps the stream open after the command itself exited (``server &``),
    so the exec's state is polled too, and once the command is gone the stream gets
    ``DRAIN_GRACE`` more seconds before it is cut.
    """
    poll = 0.5
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            await within(asyncio.shield(pump.done), min(poll, remaining))
            return True
        except TimeoutError:
            pass
        info = await sdk_call("exec inspect", inspect_exec, api, exec_id)
        if not info.get("Running"):
            try:
                await within(asyncio.shield(pump.done), DRAIN_GRACE)
            except TimeoutError:
                pump.abort()
                await pump.done
            return True
        poll = min(poll * 2, 2.0)


async def _kill_quietly(api: DockerApi, container_id: str, pump: OutputPump, user: int = 0) -> None:
    try:
        await kill_group(api, container_id, pump.pid_line.pid, user)
    except WorkspaceError:
        pass  # the container may be going away; abort the stream regardless
    finally:
        pump.abort()
    try:
        await within(asyncio.shield(pump.done), 5.0)
    except TimeoutError:
        pass


class Captured(Protocol):
    """What an exec's output went into: ``OutputPump`` here, ``SpawnedExec`` (spawned.py) there."""

    stdout: BoundedBuffer
    stderr: BoundedBuffer


def exec_result(captured: Captured, code: int, timed_out: bool, started: float) -> ExecResult:
    return ExecResult(
        exit_code=code,
        stdout=captured.stdout.value(),
        stderr=captured.stderr.value(),
        timed_out=timed_out,
        truncated=captured.stdout.truncated or captured.stderr.truncated,
        stdout_bytes_total=captured.stdout.total,
        stderr_bytes_total=captured.stderr.total,
        seconds=time.monotonic() - started,
    )


async def run_exec_or_spare(
    spares: Spares, api: DockerApi, container_id: str, argv: Sequence[str], **kw: Any
) -> ExecResult:
    """``run_exec``, in a spare of the command's kind where ``spares`` has one waiting."""
    spare = await spares.take(kind_of(kw["user"], kw["cwd"], kw["env"]))
    if spare is not None:
        try:
            return await run_exec(api, container_id, argv, spare=spare, **kw)
        except SpareUnused:
            pass  # it never ran there: here it runs
    return await run_exec(api, container_id, argv, **kw)
