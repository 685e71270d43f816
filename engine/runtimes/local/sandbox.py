"""The bubblewrap sandbox behind ``runtime=local``: one per workspace, entered once per command.

A workspace's sandbox is one long-lived ``bwrap`` whose command is a sleeping init. It has
its own mount, PID, IPC, UTS and cgroup namespaces (and network namespace unless the
workspace has network), ``--die-with-parent``, and this filesystem:

    /usr /etc (and /bin /lib* ...)  the host's, read-only (no setuid: every bind is nosuid),
                                    /etc's non-world-readable entries covered (shadow, keys)
    <task workdir>, e.g. /app       <run root>/app, the repo tree (uid 1000)
    /var/lib/crucible               <run root>/crucible, mode 700: vault and scratch (root)
    /tmp                            <run root>/tmp, mode 1777
    /root                           <run root>/root, mode 700 (the host's home stays hidden)
    /proc /dev /sys                 fresh (/proc/sys read-only; sysfs of the sandbox's netns)
    everything else                 absent; "/" itself is a read-only tmpfs

Nothing of crucible's home (store, runs, other workspaces), the project or the host's
home is mounted; where one of those lies under a system dir it is covered with an empty
tmpfs. Commands enter the running sandbox with ``nsenter`` (so every command of a
workspace shares its processes, /tmp and mounts, as in a container) and then pass
through ``setpriv`` by absolute path: uid 1000 gets cleared groups, no capabilities and
no-new-privs (setuid binaries do not elevate); root gets Docker's default capability set
less mknod, net_raw and everything that could reach the host (no sys_admin,
dac_read_search, sys_ptrace, ...).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.interfaces import BRIDGE_PATH
from engine.runtimes.docker.stream import PidLine
from engine.util import paths

NSENTER = "/usr/bin/nsenter"
SETPRIV = "/usr/bin/setpriv"
CRUCIBLE_DIR = "/var/lib/crucible"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
ROOT_CAPS = (
    "chown",
    "dac_override",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "setfcap",
    "net_bind_service",
    "sys_chroot",
    "audit_write",
)
"""Docker's default set less mknod (no device cgroup here) and net_raw (host traffic with network)."""

READY = b"crucible-sandbox-ready\n"
_INIT = (
    f"mount -t sysfs -o ro,nosuid,nodev,noexec sysfs /sys || exit 1; printf '{READY.decode().strip()}\\n'; "
    f"exec {SETPRIV} --bounding-set=-all --inh-caps=-all --no-new-privs -- sleep infinity"
    " </dev/null >/dev/null 2>&1"
)
# Runs as the target user inside the sandbox: the cwd is entered as that user (as runc
# does), then the first line of stdout says the command is starting (its pid, as the
# Docker runtime's wrapper prints it); without that line, nothing started.
# cd exports OLDPWD: restored to what the caller's env said, so env stays exactly as given.
_ENTER = (
    'had=${OLDPWD+1}; old=${OLDPWD-}; cd -- "$1" || exit 1; '
    'if [ -n "$had" ]; then OLDPWD=$old; else unset OLDPWD; fi; shift; echo $$; exec "$@"'
)


@dataclass(frozen=True)
class Layout:
    """One sandbox's host directories and where each appears inside it."""

    root: Path
    workdir: str = "/app"
    bridge: Path | None = None
    """A host directory shown read-only at ``BRIDGE_PATH`` (the run's host-side sockets)."""

    @property
    def app(self) -> Path:
        return self.root / "app"

    @property
    def crucible(self) -> Path:
        return self.root / "crucible"

    @property
    def gitconfig(self) -> Path:
        return self.root / "gitconfig"

    @property
    def empty(self) -> Path:
        """An empty file to cover host files with (/dev/null would be unusable: binds are nodev)."""
        return self.root / "empty"

    def binds(self) -> list[tuple[Path, str]]:
        """(host dir, sandbox path), parents before children so nested binds stack right."""
        binds = [
            (self.root / "tmp", "/tmp"),
            (self.root / "root", "/root"),
            (self.crucible, CRUCIBLE_DIR),
            (self.app, self.workdir),
        ]
        return sorted(binds, key=lambda item: item[1].count("/"))

    def make_private_dirs(self) -> None:
        """The per-run dirs that never come from a template: /tmp and root's home."""
        for name, mode in (("tmp", 0o1777), ("root", 0o700)):
            path = self.root / name
            path.mkdir(exist_ok=True)
            os.chmod(path, mode)
        self.empty.touch(mode=0o444, exist_ok=True)
        # A writable copy of the host's system git config, so setup's `git config --system`
        # (safe.directory for a root agent) lands in this run only. Without one on the host
        # there is no mount point to bind over in the read-only /etc.
        if Path("/etc/gitconfig").is_file() and not self.gitconfig.exists():
            self.gitconfig.write_bytes(Path("/etc/gitconfig").read_bytes())


def bwrap_options(layout: Layout, *, network: bool) -> list[str]:
    """The sandbox's namespaces and mounts, as bwrap options."""
    options = [
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "crucible",
    ]
    if not network:
        options.append("--unshare-net")
    bound = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
            bound.append(path)
    if "/etc" in bound:
        for path, is_dir in private_etc_entries():
            options += ["--tmpfs", path] if is_dir else ["--ro-bind", str(layout.empty), path]
    if layout.gitconfig.is_file():
        options += ["--bind", str(layout.gitconfig), "/etc/gitconfig"]
    for hidden in _covered(bound):
        options += ["--tmpfs", hidden]
    options += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev", "--dir", "/sys"]
    for host, inside in layout.binds():
        options += ["--bind", str(host), inside]
    if layout.bridge is not None:  # its parent made traversable: bwrap makes mount points 0700
        options += [
            "--perms",
            "0755",
            "--dir",
            os.path.dirname(BRIDGE_PATH),
            "--ro-bind",
            str(layout.bridge),
            BRIDGE_PATH,
        ]
    return options + ["--chdir", "/", "--remount-ro", "/"]


def bwrap_command(bwrap: str, *, args_fd: int, info_fd: int) -> list[str]:
    """bwrap reading its options from ``args_fd``: the sandbox's init (its PID 1 is a fork of
    bwrap) then shows nothing of the host's layout in its command line, which the sandbox can read."""
    return [bwrap, "--args", str(args_fd), "--info-fd", str(info_fd), "--", "/bin/sh", "-c", _INIT]


def options_pipe(options: list[str]) -> int:
    """A pipe's read end holding ``options`` NUL-separated (far below a pipe's buffer)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"".join(o.encode() + b"\0" for o in options))
    finally:
        os.close(write_end)
    return read_end


@functools.lru_cache(maxsize=1)
def private_etc_entries() -> tuple[tuple[str, bool], ...]:
    """What in /etc the host keeps from other users (shadow, host keys, daemon keys, ...).

    The sandbox's root could read them through the read-only /etc; they are covered (a file
    with an empty file, a directory with an empty tmpfs) so the host's secrets stay the host's.
    """
    found = []
    for top, dirs, files in os.walk("/etc"):
        for name in list(dirs):
            path = os.path.join(top, name)
            try:
                private = not os.path.islink(path) and os.stat(path).st_mode & 0o005 != 0o005
            except OSError:
                continue
            if private:
                found.append((path, True))
                dirs.remove(name)  # covered whole
        for name in files:
            path = os.path.join(top, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and not info.st_mode & 0o004:
                found.append((path, False))
    return tuple(sorted(found))


def _covered(bound: list[str]) -> list[str]:
    """crucible's own state that would show through a system bind (e.g. CRUCIBLE_HOME under /usr)."""
    secrets = {paths.home(), paths.PROJECT_ROOT.resolve(), Path.home().resolve(), paths.store_path().parent}
    found = []
    for path in sorted(str(p) for p in secrets):
        if any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound) and os.path.isdir(path):
            found.append(path)
    return found


def privileges(user: int) -> list[str]:
    """setpriv's options for running as ``user`` inside the sandbox."""
    if user == 0:
        return ["--inh-caps=-all", "--bounding-set=-all," + ",".join(f"+{c}" for c in ROOT_CAPS), "--no-new-privs"]
    return [
        f"--reuid={user}",
        f"--regid={user}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
    ]


def enter_argv(init_pid: int, *, user: int, cwd: str, argv: list[str]) -> list[str]:
    """Run ``argv`` as ``user`` in ``cwd`` inside the sandbox whose init is ``init_pid``.

    ``--root``/``--wd`` without a value take the init's root and cwd: a value would be
    opened on the HOST before entering, leaving the command a directory outside the sandbox.
    """
    return [
        NSENTER,
        f"--target={init_pid}",
        "--mount",
        "--uts",
        "--ipc",
        "--net",
        "--pid",
        "--cgroup",
        "--root",
        "--wd",
        "--",
        SETPRIV,
        *privileges(user),
        "--",
        "/bin/sh",
        "-c",
        _ENTER,
        "crucible-exec",
        cwd,
        *argv,
    ]


# -- probing what this host can give ---------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """Why each part of the sandbox is unavailable here (None: it works)."""

    sandbox: str | None = None
    netns: str | None = None
    uid_drop: str | None = None


_probes: dict[str, Probe] = {}
_probe_lock = threading.Lock()


def probe(bwrap: str) -> Probe:
    """Try the real thing once per bwrap path: a network-less sandbox, entered as uid 1000."""
    with _probe_lock:
        if bwrap not in _probes:
            _probes[bwrap] = _probe(bwrap)
        return _probes[bwrap]


def _probe(bwrap: str) -> Probe:
    if os.geteuid() != 0:
        reason = "crucible is not running as root (it needs root to run bwrap without a user namespace)"
        return Probe(reason, reason, reason)
    for tool, package in ((bwrap, "bubblewrap"), (NSENTER, "util-linux"), (SETPRIV, "util-linux")):
        if not os.access(tool, os.X_OK):
            reason = f"{tool} is missing (apt-get install -y {package})"
            return Probe(reason, reason, reason)
    failure = _try_sandbox(bwrap, network=False)
    if failure is None:
        return Probe()
    stage, detail = failure
    if stage == "uid":
        return Probe(uid_drop=detail)
    if _try_sandbox(bwrap, network=True) is None:
        return Probe(netns=detail)
    return Probe(detail, detail, detail)


def _try_sandbox(bwrap: str, *, network: bool) -> tuple[str, str] | None:
    """None if a sandbox starts and uid 1000 can be entered; else (stage, one-line detail)."""
    with tempfile.TemporaryDirectory(prefix="crucible-probe-") as tmp:
        layout = Layout(Path(tmp))
        for sub in ("app", "crucible"):
            (layout.root / sub).mkdir()
        layout.make_private_dirs()
        try:
            with BlockingSandbox(bwrap, layout, network=network) as sandbox:
                entered = sandbox.run(["/usr/bin/id", "-u"], user=1000, timeout=30)
        except SandboxError as exc:
            return "sandbox", str(exc)
        except subprocess.TimeoutExpired:
            return "uid", "entering the sandbox as uid 1000 did not finish within 30 s"
        if entered.stdout.strip() != b"1000":
            return "uid", f"cannot enter the sandbox as uid 1000 with {NSENTER} and {SETPRIV}: " + one_line(
                entered.stderr or entered.stdout
            )
        return None


class SandboxError(Exception):
    """The sandbox could not be started or entered (one line: bwrap's own complaint)."""


class BlockingSandbox:
    """A sandbox driven synchronously, for the probe and template installs (run in a thread
    that lives as long as the sandbox: ``--die-with-parent`` follows the starting thread)."""

    def __init__(self, bwrap: str, layout: Layout, *, network: bool) -> None:
        self.bwrap, self.layout, self.network = bwrap, layout, network
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._err = b""

    def __enter__(self) -> BlockingSandbox:
        args_fd = options_pipe(bwrap_options(self.layout, network=self.network))
        read_info, write_info = os.pipe()
        try:
            self._proc = subprocess.Popen(
                bwrap_command(self.bwrap, args_fd=args_fd, info_fd=write_info),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(args_fd, write_info),
                start_new_session=True,
                cwd="/",
            )
        except OSError as exc:
            os.close(read_info)
            raise SandboxError(f"cannot run {self.bwrap}: {exc}") from exc
        finally:
            os.close(write_info)
            os.close(args_fd)
        with os.fdopen(read_info, "rb") as info:
            self.pid = child_pid(info.read())
        assert self._proc.stdout is not None  # stdout=PIPE
        if self._proc.stdout.readline() != READY or self.pid is None:
            self.__exit__()
            raise SandboxError("bwrap failed: " + one_line(self._err))
        return self

    def run(
        self,
        argv: list[str],
        *,
        user: int = 0,
        cwd: str = "/",
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` to completion inside; raises SandboxError if it could not start.

        Output goes to files, not pipes: a daemon the command leaves behind would hold a
        pipe open long after the command itself ended.
        """
        assert self.pid is not None, "the sandbox is not entered"
        with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
            proc = subprocess.Popen(
                enter_argv(self.pid, user=user, cwd=cwd, argv=argv),
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=err_file,
                cwd="/",
                start_new_session=True,
                env=env if env is not None else {"PATH": DEFAULT_PATH},
            )
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            out_file.seek(0)
            err_file.seek(0)
            out, err = out_file.read(), err_file.read()
        line = PidLine()
        out = line.feed(out)
        line.finish()
        if line.pid is None:
            raise SandboxError(f"could not start {argv[0]} in {cwd}: " + one_line(err or out))
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        self._proc.kill()  # the init dies with it (--die-with-parent), and the PID namespace with the init
        _, err = self._proc.communicate()
        self._err = err or b""


def child_pid(info: bytes) -> int | None:
    """The sandbox init's host pid, from bwrap's ``--info-fd`` JSON."""
    try:
        return int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def one_line(data: bytes) -> str:
    text = " ".join(data.decode("utf-8", "replace").split())
    return text[:300] or "no output"
