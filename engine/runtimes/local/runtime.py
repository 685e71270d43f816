"""``runtime=local``: the same environment code over a per-run directory on the host.

A workspace is a per-run root (``engine.runtimes.local.template``) and one bubblewrap
sandbox over it (``engine.runtimes.local.sandbox``) in which the run's dirs appear at
the paths a task image uses — the repo at the task's workdir, the root-only vault at
/var/lib/crucible — so ``envs/coding`` runs unchanged. Every command, the engine's own
included, runs inside the sandbox; nothing of a run executes on the host as root.

Files are read and written by short root commands INSIDE the sandbox rather than through
the host paths behind it: a symlink the agent planted (``/app/x -> /root/.ssh/id_rsa``)
then resolves in the sandbox's view, never in the host's, and paths outside the run's
writable dirs fail as they would in the workspace ("read-only file system").

Integrity: ``supports(integrity)`` says, in one line, why this host cannot give a mode
(``require`` raises ``IntegrityUnavailable`` with it). Every mode needs the sandbox and
a network namespace (grading is always network-less); a uid wall also needs setpriv.
Nothing is weakened to make a mode "work": what cannot be had is refused.

Differences from ``runtime=docker``: no CPU/memory/pids limits (no cgroups are set up);
with ``network=True`` the sandbox shares the host's network, loopback included.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.config.schema import RuntimeConfig
from engine.errors import IntegrityUnavailable, WorkspaceError
from engine.interfaces import BRIDGE_PATH, ROOT_UID
from engine.models import ExecResult, ImageRef, TaskLimits, TtySize
from engine.runtimes.docker.exec import default_env
from engine.runtimes.docker.stream import BoundedBuffer
from engine.runtimes.lifecycle import StartedOnce
from engine.runtimes.local.exec import LocalProcess, run_exec
from engine.runtimes.local.sandbox import (
    READY,
    Layout,
    bwrap_command,
    bwrap_options,
    child_pid,
    one_line,
    options_pipe,
    probe,
)
from engine.runtimes.local.template import (
    LocalTemplateBuilder,
    TemplateInputs,
    ensure_template,
    kill_quietly,
    new_run_root,
    populate,
    reap_local_orphans,
    record_sandbox,
    remove_root,
)
from engine.util import shell
from engine.util.aio import finish_even_if_cancelled, within

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
_FILE_LIMIT = 1 << 62  # read_file returns whole files: the bounded buffer never truncates
_READ = 'if [ -d "$1" ]; then exit 21; fi; if [ ! -e "$1" ]; then exit 2; fi; exec cat -- "$1"'

if TYPE_CHECKING:
    from engine.config.schema import IntegrityConfig


@dataclass
class LocalRuntimeConfig(RuntimeConfig):
    """``runtime=local``: a per-run host directory, every command in a bubblewrap sandbox."""

    _target_: str = "engine.runtimes.local.runtime.LocalRuntime"
    name: str = "local"
    bwrap: str = "/usr/bin/bwrap"
    """The bubblewrap binary; the sandbox probe runs it (a broken one refuses every integrity mode)."""
    default_exec_timeout: float = 1800.0
    install_timeout: float = 1800.0
    """Limit for a task's ``install`` command while its local template is prepared."""


class LocalRuntime:
    """Makes ``LocalWorkspace``s. Instantiated by Hydra from ``conf/runtime/local.yaml``."""

    config_schema = LocalRuntimeConfig

    def __init__(
        self,
        bwrap: str = "/usr/bin/bwrap",
        default_exec_timeout: float = 1800.0,
        install_timeout: float = 1800.0,
        name: str = "local",
    ) -> None:
        self.bwrap = bwrap
        self.default_exec_timeout = float(default_exec_timeout)
        self.install_timeout = float(install_timeout)
        self.name = name

    limits_resources = False
    """A task's cpus and memory (``TaskLimits``) cannot be applied: bubblewrap sets up no
    cgroups (only its network, which planning folds into ``network``); the run's warnings say so."""

    def provision(
        self,
        image: ImageRef,
        *,
        run_id: str,
        network: bool,
        purpose: str,
        bridge: str | None = None,
        limits: TaskLimits | None = None,
    ) -> LocalWorkspace:
        if not isinstance(image, ImageRef):
            raise WorkspaceError(f"runtime=local provisions from a planned ImageRef, got {image!r}")
        return LocalWorkspace(self, image, run_id=run_id, network=network, purpose=purpose, bridge_dir=bridge)

    def supports(self, integrity: IntegrityConfig) -> str | None:
        """None if this host can give ``integrity`` here, else one line: what is missing and the fix."""
        found = probe(self.bwrap)
        mode = integrity.mode
        needs = [
            (found.sandbox, "no bubblewrap sandbox"),
            (found.netns, "no network namespace (grading always runs without network)"),
        ]
        if integrity.uid_wall or mode == "strict":
            needs.append((found.uid_drop, "no uid wall"))
        for reason, what in needs:
            if reason:
                return (
                    f"runtime=local cannot give integrity={mode} here: {what}: {reason}; fix it, or use runtime=docker"
                )
        return None

    def require(self, integrity: IntegrityConfig) -> None:
        """Raise ``IntegrityUnavailable`` unless ``integrity`` can be had (call before provisioning)."""
        reason = self.supports(integrity)
        if reason is not None:
            raise IntegrityUnavailable(reason)

    def image_builder(self, *, ca_bundle: str | None = None) -> LocalTemplateBuilder:
        """What builds this runtime's "images" (templates): no Docker engine involved."""
        return LocalTemplateBuilder(bwrap=self.bwrap, install_timeout=self.install_timeout)

    @staticmethod
    def reap_orphans() -> list[str]:
        return reap_local_orphans()


class LocalWorkspace(StartedOnce):
    """One per-run root and the sandbox over it."""

    def __init__(
        self,
        runtime: LocalRuntime,
        image: ImageRef,
        *,
        run_id: str,
        network: bool,
        purpose: str,
        bridge_dir: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.image = image
        self.run_id = run_id
        self.network = bool(network)
        self.bridge_dir = bridge_dir
        self.bridge = BRIDGE_PATH if bridge_dir else None
        self.purpose = purpose
        self.root: Path | None = None
        self.workdir = "/app"
        self.init_pid: int | None = None
        self._pidfd: int | None = None
        self._pid_only = False
        self._bwrap: asyncio.SubprocessTransport | None = None
        self._boot_log = _BootLog()
        self._state = "new"  # new -> starting -> running -> closing -> closed
        self._closing: asyncio.Future[None] | None = None
        self._processes: list[LocalProcess] = []

    def __repr__(self) -> str:
        return f"LocalWorkspace({self.root}, network={self.network}, {self._state})"

    # -- lifecycle -------------------------------------------------------------------------

    async def _start(self) -> None:
        inputs = TemplateInputs.of(self.image)
        self.workdir = inputs.workdir
        # Not shielded: a cancelled start abandons the (shared, locked) template build to finish alone.
        template, _ = await asyncio.to_thread(
            ensure_template, inputs, bwrap=self.runtime.bwrap, install_timeout=self.runtime.install_timeout
        )
        self.root = new_run_root(self.run_id, self.purpose)
        layout = Layout(self.root, inputs.workdir, bridge=Path(self.bridge_dir) if self.bridge_dir else None)
        # Shielded: close() must find the copy finished, not racing the removal.
        await finish_even_if_cancelled(asyncio.to_thread(_populate, layout, template))
        await self._start_sandbox(layout)

    async def _start_sandbox(self, layout: Layout) -> None:
        # Shielded, so a cancel never leaves a sandbox whose init we do not know: bwrap's
        # PID-1 binds itself to its launcher only once set up, so killing just the launcher
        # early would orphan it. Once the init's pid is known, close() kills it directly.
        boot = within(self._boot(layout), START_TIMEOUT)
        try:
            await finish_even_if_cancelled(boot)
        except TimeoutError as exc:
            raise WorkspaceError(f"the local sandbox did not start within {START_TIMEOUT:g} s") from exc

    async def _boot(self, layout: Layout) -> None:
        loop = asyncio.get_running_loop()
        args_fd = options_pipe(bwrap_options(layout, network=self.network))
        read_info, write_info = os.pipe()
        self._boot_log = _BootLog()
        try:
            # From the event loop's thread: --die-with-parent follows the thread that forked.
            self._bwrap, _ = await loop.subprocess_exec(
                lambda: self._boot_log,
                *bwrap_command(self.runtime.bwrap, args_fd=args_fd, info_fd=write_info),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(args_fd, write_info),
                start_new_session=True,
                cwd="/",
            )
        except OSError as exc:
            os.close(read_info)
            raise WorkspaceError(f"cannot run {self.runtime.bwrap}: {exc}") from exc
        finally:
            os.close(write_info)
            os.close(args_fd)
        info = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(info), os.fdopen(read_info, "rb")
        )
        try:
            self.init_pid = child_pid(await info.read())  # bwrap writes it right after the clone
        finally:
            transport.close()
        if self.init_pid is not None:
            self._watch_init(layout)
        if not await self._boot_log.ready or self.init_pid is None:
            raise WorkspaceError(f"the local sandbox did not start: {one_line(self._boot_log.err.value())}")

    def _watch_init(self, layout: Layout) -> None:
        assert self.init_pid is not None  # the caller checks
        try:
            # A handle on the init that a recycled pid cannot fool, for the kill at close.
            self._pidfd = os.pidfd_open(self.init_pid)
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                return  # already gone: nothing to kill
            self._pid_only = True  # Linux < 5.3: no pidfds, the pid has to do
        record_sandbox(layout.root, self.init_pid)

    async def _teardown(self) -> None:
        self._state = "closing"
        try:
            await self._stop_sandbox()
            for process in self._processes:
                process.abort()
            if self.root is not None:
                await asyncio.to_thread(remove_root, self.root)
        finally:
            self._state = "closed"

    async def _stop_sandbox(self) -> None:
        # Killing the init ends its PID namespace: the kernel kills every process in it,
        # commands entered with nsenter included. The launcher then exits.
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self._pidfd)
            self._pidfd = None
        elif self._pid_only and self._bwrap is not None and self._bwrap.get_returncode() is None:
            assert self.init_pid is not None  # _pid_only is set only once it is known
            kill_quietly(self.init_pid)  # the launcher has not exited, so its child's pid is not recycled
        if self._bwrap is not None:
            if self._bwrap.get_returncode() is None:
                # Not transport.kill(): Popen polls (waitpid) before signalling and can reap
                # the launcher under asyncio's child watcher, which then logs "Unknown child
                # process". Unreaped, its pid is still this launcher's.
                kill_quietly(self._bwrap.get_pid())
            try:
                await within(asyncio.shield(self._boot_log.exited), STOP_TIMEOUT)
            except TimeoutError:
                log.warning("bwrap (pid %s) did not exit after SIGKILL", self._bwrap.get_pid())
            self._bwrap.close()
            self._bwrap = None

    def _running_pid(self) -> int:
        if self._state != "running" or self.init_pid is None:
            raise WorkspaceError(f"{self!r} is not running")
        return self.init_pid

    # -- commands --------------------------------------------------------------------------

    def default_env(self, user: int) -> dict[str, str]:
        """The minimal environment: PATH, HOME, LANG; nothing of the engine's."""
        return default_env(user)

    async def exec(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        max_output: int = 1 << 20,
    ) -> ExecResult:
        if not argv:
            raise ValueError("exec needs a non-empty argv")
        return await run_exec(
            self._running_pid(),
            argv,
            user=int(user),
            cwd=cwd or self.workdir,
            env=self.default_env(user) if env is None else dict(env),
            timeout=self.runtime.default_exec_timeout if timeout is None else timeout,
            stdin=stdin,
            max_output=max_output,
        )

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        tty: TtySize | None = None,
        separate_stderr: bool = False,
    ) -> LocalProcess:
        process = await LocalProcess.start(
            self._running_pid(),
            argv,
            user=int(user),
            cwd=cwd or self.workdir,
            env=self.default_env(user) if env is None else dict(env),
            tty=tty,
            separate_stderr=separate_stderr,
        )
        self._processes.append(process)
        return process

    # -- files -----------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        path = _absolute(path)
        result = await self._file_op(["/bin/sh", "-c", _READ, "crucible-read", path], None)
        if result.exit_code == 2:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if result.exit_code == 21:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if not result.ok:
            raise WorkspaceError(f"could not read {path}: {one_line(result.stderr)}")
        return result.stdout

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o644, owner: int = ROOT_UID) -> None:
        path = _absolute(path)
        if path == "/":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        write = shell.script(__file__, "write.sh")  # replaces the file atomically, never through a symlink
        argv = ["/bin/sh", "-c", write, "crucible-write", path, f"{mode & 0o7777:o}", str(int(owner))]
        result = await self._file_op(argv, bytes(data))
        if result.exit_code == 21:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if b"Read-only file system" in result.stderr:
            raise PermissionError(
                errno.EROFS,
                f"outside the workspace's writable dirs ({self.workdir}, /tmp, /var/lib/crucible, /root)",
                path,
            )
        if not result.ok:
            raise WorkspaceError(f"could not write {path}: {one_line(result.stderr)}")

    async def _file_op(self, argv: list[str], stdin: bytes | None) -> ExecResult:
        return await run_exec(
            self._running_pid(),
            argv,
            user=ROOT_UID,
            cwd="/",
            env=default_env(ROOT_UID),
            timeout=self.runtime.default_exec_timeout,
            stdin=stdin,
            max_output=_FILE_LIMIT,
        )


class _BootLog(asyncio.SubprocessProtocol):
    """bwrap's own output: the init's ready line on stdout, bwrap's complaints on stderr."""

    def __init__(self) -> None:
        self.out = b""
        self.err = BoundedBuffer(8192)
        # Created by connection_made, which the loop calls before anything reads them.
        self.ready: asyncio.Future[bool]
        self.exited: asyncio.Future[None]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        self.ready, self.exited = loop.create_future(), loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 2:
            self.err.add(data)
        elif not self.ready.done():
            self.out = (self.out + data)[-len(READY) * 4 :]
            if READY in self.out:
                self.ready.set_result(True)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1 and not self.ready.done():
            self.ready.set_result(False)

    def process_exited(self) -> None:
        if not self.ready.done():
            self.ready.set_result(False)
        if not self.exited.done():
            self.exited.set_result(None)


def _populate(layout: Layout, template: Path) -> None:
    populate(layout.root, template)
    layout.make_private_dirs()


def _absolute(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"workspace paths must be absolute, got {path!r}")
    return os.path.normpath(path)


__all__ = ["LocalRuntime", "LocalWorkspace", "reap_local_orphans"]
