"""The ``Workspace`` contract (engine/interfaces.py) as checks any runtime runs on itself.

Like Inspect's ``util/_sandbox/self_check.py``: every check is an ``async def check_*``
that raises ``ConformanceFailure`` (an ``AssertionError``) saying what broke. ``CHECKS``
lists them; ``run_conformance(runtime, image)`` provisions from a runtime and runs them
all; tests/test_workspace_conformance.py runs each as one pytest test per runtime. By hand:

    python -m engine.runtimes.conformance runtime=docker [task=sample/last_page] [overrides]

A check runs on one shared network-less workspace, or (``fresh``) gets the ``Target`` and
provisions its own. What a check needs from outside the workspace comes from the runtime's
``Probe`` (``<runtime package>.conformance.probe(runtime)``): ``leftovers(run_id)`` and the
env names a command may see beyond its env. A check that only some backends can be held to
names capabilities in ``needs``; a runtime whose probe lacks one has the check skipped.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import random
import shutil
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from engine.errors import CrucibleError, UserError, WorkspaceError
from engine.interfaces import AGENT_UID, Process, Runtime, Workspace

if TYPE_CHECKING:
    from engine.runtimes.docker.runtime import DockerWorkspace

LEFTOVERS = "leftovers"
"""The probe can name what still exists of a run outside its workspaces (containers, dirs, sandboxes)."""
DOCKER_CONTAINER = "docker_container"
"""The workspace is a Docker container (``ws.container_id``, ``ws.runtime.client``)."""
EXEC_BACKSTOP = "exec_backstop"
"""``exec``'s deadline has a host-side backstop past ``ws.backstop_grace`` seconds."""

CHECK_TIMEOUT = 300.0
DEFAULT_TASK = "sample/last_page"


class ConformanceFailure(AssertionError):
    """A workspace broke its contract; the message says how."""


def expect(condition: object, message: str) -> None:
    if not condition:
        raise ConformanceFailure(message)


class _Raises:
    """``with raises(FileNotFoundError, "read_file of a missing path"):`` (not stripped by -O)."""

    def __init__(self, kind: type[BaseException], what: str) -> None:
        self.kind, self.what = kind, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            raise ConformanceFailure(f"{self.what}: expected {self.kind.__name__}, nothing was raised")
        if issubclass(exc_type, self.kind):
            return True
        raise ConformanceFailure(f"{self.what}: expected {self.kind.__name__}, got {exc_type.__name__}: {exc}") from exc


raises = _Raises


# -- what a check runs against -----------------------------------------------------------------


class Probe(Protocol):
    """A runtime's view from outside its workspaces, for the checks that need one."""

    capabilities: frozenset[str]

    def leftovers(self, run_id: str) -> list[str]:
        """Whatever of ``run_id``'s workspaces still exists (empty once all are destroyed)."""

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        """Variables a command may see beyond its env (an image's declared ENV, the shell's PWD)."""


class BlindProbe:
    """For a runtime without a conformance module: no capabilities, only PWD beyond the env."""

    capabilities: frozenset[str] = frozenset()

    def leftovers(self, run_id: str) -> list[str]:
        raise ConformanceFailure("this runtime's probe cannot see leftovers")

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        return {"PWD"}


def probe_for(runtime: Runtime) -> Probe:
    """The runtime's own probe (``runtime.conformance_probe()``, else ``probe(runtime)`` in the
    ``conformance`` module beside the runtime's, inside engine.runtimes), or a ``BlindProbe``."""
    own = getattr(runtime, "conformance_probe", None)
    if callable(own):
        return own()
    package = type(runtime).__module__.rpartition(".")[0]
    if not package.startswith("engine.runtimes."):
        return BlindProbe()
    try:
        module = importlib.import_module(f"{package}.conformance")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.conformance":
            raise
        return BlindProbe()
    return module.probe(runtime)


@dataclass
class Target:
    """A runtime, an image it provisions from, and its probe."""

    runtime: Runtime
    image: object
    probe: Probe
    purpose: str = "conformance"

    def provision(self, run_id: str | None = None, *, network: bool = False, bridge: str | None = None) -> Workspace:
        # image: an ImageRef or a bare tag; each runtime checks what it takes.
        return self.runtime.provision(self.image, run_id=run_id or fresh_run_id(), network=network,  # type: ignore[arg-type]
                                      purpose=self.purpose, bridge=bridge)

    async def leftovers(self, run_id: str) -> list[str]:
        return await asyncio.to_thread(self.probe.leftovers, run_id)


def fresh_run_id() -> str:
    return f"conformance-{uuid.uuid4().hex[:8]}"


# -- the registry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    func: Callable[..., Awaitable[None]]
    fresh: bool = False
    """Gets the ``Target`` and provisions its own workspaces (else: the shared workspace)."""
    needs: frozenset[str] = frozenset()
    uses_probe: bool = False
    kwargs: Mapping[str, object] = field(default_factory=dict)

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or self.name.replace("_", " ")).strip().splitlines()[0]

    def missing(self, probe: Probe) -> frozenset[str]:
        return self.needs - probe.capabilities

    async def run(self, target: Target, shared: Workspace | None) -> None:
        kwargs = {**self.kwargs, **({"probe": target.probe} if self.uses_probe else {})}
        if self.fresh:
            return await self.func(target, **kwargs)
        if shared is None:
            raise ConformanceFailure("no shared workspace to run on (provisioning it failed)")
        return await self.func(shared, **kwargs)


CHECKS: list[Check] = []


def check(*, fresh: bool = False, needs: tuple[str, ...] = (), uses_probe: bool = False,
          variants: Mapping[str, Mapping[str, object]] | None = None):
    """Register ``check_<name>`` (once per variant, as ``<name>-<variant>``)."""
    def register(func):
        name = func.__name__.removeprefix("check_")
        for suffix, kwargs in (variants or {"": {}}).items():
            CHECKS.append(Check(f"{name}-{suffix}" if suffix else name, func, fresh, frozenset(needs),
                                uses_probe, dict(kwargs)))
        return func
    return register


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    seconds: float
    message: str = ""
    skipped: bool = False


async def run_check(check: Check, target: Target, shared: Workspace | None) -> CheckResult:
    missing = check.missing(target.probe)
    if missing:
        return CheckResult(check.name, False, 0.0, f"needs {', '.join(sorted(missing))}", skipped=True)
    started = time.monotonic()
    deadline = asyncio.timeout(CHECK_TIMEOUT)
    try:
        async with deadline:
            await check.run(target, shared)
    except Exception as exc:  # every failure is a result; only a cancel of the whole run ends it
        if deadline.expired():
            message = f"did not finish within {CHECK_TIMEOUT:.0f} s"
        elif isinstance(exc, ConformanceFailure):
            message = str(exc)
        else:
            message = f"{type(exc).__name__}: {exc}"
        return CheckResult(check.name, False, time.monotonic() - started, " ".join(message.split()))
    return CheckResult(check.name, True, time.monotonic() - started)


async def run_conformance(runtime: Runtime, image: object, *, probe: Probe | None = None,
                          checks: list[Check] | None = None, purpose: str = "conformance") -> list[CheckResult]:
    """Run every check (or ``checks``) against ``runtime``, one after the other."""
    target = Target(runtime, image, probe or probe_for(runtime), purpose)
    results = []
    async with contextlib.AsyncExitStack() as stack:
        try:
            shared = await stack.enter_async_context(target.provision())
        except Exception as exc:  # reported; the fresh-workspace checks still run
            shared = None
            results.append(CheckResult("provision_shared_workspace", False, 0.0, f"{type(exc).__name__}: {exc}"))
        for one in CHECKS if checks is None else checks:
            results.append(await run_check(one, target, shared))
    return results


# -- helpers the checks share ------------------------------------------------------------------


def marker() -> str:
    """A sleep duration no other check uses, so its processes can be found in /proc."""
    return str(random.randint(100_000, 999_999))


async def processes_sleeping(ws: Workspace, seconds: str) -> int:
    """How many processes in the workspace run ``sleep SECONDS`` (read from /proc; no ps needed)."""
    listing = await ws.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null; true"])
    return listing.stdout.count(b"sleep\x00" + seconds.encode() + b"\x00")


async def wait_for_sleepers(ws: Workspace, seconds: str, count: int, limit: float = 20.0) -> None:
    try:
        async with asyncio.timeout(limit):
            while await processes_sleeping(ws, seconds) < count:
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise ConformanceFailure(f"{count} `sleep {seconds}` processes did not appear within {limit:.0f} s") from None


async def kill_sleepers(ws: Workspace, seconds: str) -> None:
    script = (f'for p in /proc/[0-9]*; do [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = "sleep {seconds} " ]'
              ' && kill -9 "${p#/proc/}"; done; true')
    await ws.exec(["sh", "-c", script])


async def expect_no_sleepers(ws: Workspace, seconds: str, after: str) -> None:
    left = await processes_sleeping(ws, seconds)
    expect(left == 0, f"{left} `sleep {seconds}` process(es) still running after {after}")


def _env(result) -> dict[str, str]:
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines())


@contextlib.contextmanager
def _engine_env(name: str, value: str):
    """Set a variable in the engine's own environment for the block."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


# -- exec ---------------------------------------------------------------------------------------


@check()
async def check_workspace_satisfies_the_protocol(ws: Workspace) -> None:
    """The workspace is a ``Workspace`` and, provisioned without network, says so."""
    expect(isinstance(ws, Workspace), f"{type(ws).__name__} does not satisfy the Workspace protocol")
    expect(ws.network is False, f"ws.network is {ws.network!r} for a workspace provisioned with network=False")


@check()
async def check_exec_reports_exit_code_and_stdout_stderr_separately(ws: Workspace) -> None:
    """exec reports the exit code, and stdout and stderr apart, with their byte counts."""
    result = await ws.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    got = (result.exit_code, result.stdout, result.stderr)
    expect(got == (3, b"out\n", b"err\n"), f"(exit_code, stdout, stderr) is {got}, expected (3, b'out\\n', b'err\\n')")
    expect(not result.timed_out and not result.truncated, f"timed_out/truncated set on a plain command: {result}")
    totals = (result.stdout_bytes_total, result.stderr_bytes_total)
    expect(totals == (4, 4), f"byte totals are {totals}, expected (4, 4)")
    expect(result.seconds > 0, f"seconds is {result.seconds}, expected > 0")


@check()
async def check_exec_runs_as_root_by_default_and_as_the_agent_uid_when_asked(ws: Workspace) -> None:
    """exec runs as uid/gid 0 by default, as 1000/1000 (not root's group) with user=AGENT_UID."""
    root = (await ws.exec(["sh", "-c", "id -u; id -g"])).stdout.split()
    agent = (await ws.exec(["sh", "-c", "id -u; id -g"], user=AGENT_UID)).stdout.split()
    expect(root == [b"0", b"0"], f"default user has uid/gid {root}, expected 0/0")
    expect(agent == [b"1000", b"1000"], f"user=AGENT_UID has uid/gid {agent}, expected 1000/1000")


@check()
async def check_exec_runs_in_the_given_cwd(ws: Workspace) -> None:
    """exec runs in ``cwd``."""
    for cwd in ("/tmp", "/usr/share"):
        got = (await ws.exec(["pwd"], cwd=cwd)).stdout
        expect(got == f"{cwd}\n".encode(), f"pwd with cwd={cwd} printed {got!r}")


@check(uses_probe=True)
async def check_exec_env_replaces_the_engine_environment(ws: Workspace, *, probe: Probe) -> None:
    """The default env is PATH, HOME, LANG; a given env replaces it; the engine's never leaks."""
    with _engine_env("CRUCIBLE_SECRET_CANARY", "leaked"):
        default_root = _env(await ws.exec(["env"]))
        default_agent = _env(await ws.exec(["env"], user=AGENT_UID))
        given = _env(await ws.exec(["env"], env={"PATH": "/usr/bin:/bin", "ONLY_THIS": "1"}))
    expect(default_root.get("HOME") == "/root", f"root's default HOME is {default_root.get('HOME')!r}")
    expect(default_agent.get("HOME") == "/tmp", f"the agent's default HOME is {default_agent.get('HOME')!r}")
    expect(default_root.get("LANG") == "C.UTF-8", f"default LANG is {default_root.get('LANG')!r}")
    expect("/usr/bin" in default_root.get("PATH", "").split(":"), f"default PATH {default_root.get('PATH')!r} lacks /usr/bin")
    expect(given.get("ONLY_THIS") == "1" and given.get("PATH") == "/usr/bin:/bin", f"the given env was not applied: {given}")
    baseline = await probe.baseline_env_names(ws)
    for who, listing in (("root default", default_root), ("agent default", default_agent), ("given", given)):
        expect("CRUCIBLE_SECRET_CANARY" not in listing, f"the engine's environment leaked into the {who} env")
        extra = set(listing) - baseline - {"PATH", "HOME", "LANG", "ONLY_THIS"}
        expect(not extra, f"the {who} env has unexpected variables: {sorted(extra)}")


@check()
async def check_exec_timeout_kills_the_whole_process_group(ws: Workspace) -> None:
    """A timeout kills the command's background grandchild as well as the child: exit 124."""
    seconds = marker()
    result = await ws.exec(["bash", "-c", f"sleep {seconds} & sleep {seconds}"], timeout=1)
    expect(result.timed_out and result.exit_code == 124,
           f"timed_out={result.timed_out} exit_code={result.exit_code}, expected True and 124")
    expect(1 <= result.seconds < 8, f"a 1 s timeout took {result.seconds:.2f} s")
    await expect_no_sleepers(ws, seconds, "the timeout")


@check()
async def check_cancelling_an_exec_kills_its_command(ws: Workspace) -> None:
    """Cancelling the awaiting task kills the command and its background children."""
    seconds = marker()
    task = asyncio.ensure_future(ws.exec(["bash", "-c", f"sleep {seconds} & sleep {seconds}"]))
    try:
        await wait_for_sleepers(ws, seconds, 2)
    finally:
        task.cancel()
        with raises(asyncio.CancelledError, "awaiting a cancelled exec"):
            await task
    await expect_no_sleepers(ws, seconds, "the exec was cancelled")


@check()
async def check_exec_that_finishes_in_time_is_not_timed_out(ws: Workspace) -> None:
    """A command that exits 124 by itself is not reported as timed out."""
    result = await ws.exec(["sh", "-c", "exit 124"], timeout=30)
    expect(result.exit_code == 124 and not result.timed_out, f"exit 124 within the deadline gave {result}")


@check()
async def check_exec_returns_when_the_command_exits_though_a_background_child_holds_its_output(ws: Workspace) -> None:
    """exec returns when the command exits, not when a background child closes its output."""
    seconds = marker()
    result = await ws.exec(["bash", "-c", f"sleep {seconds} & echo started"], timeout=60)
    try:
        expect(result.ok and result.stdout == b"started\n", f"unexpected result {result}")
        expect(result.seconds < 10, f"took {result.seconds:.1f} s: waited for the background child")
    finally:
        await kill_sleepers(ws, seconds)
    await expect_no_sleepers(ws, seconds, "killing them")


@check()
async def check_exec_keeps_head_and_tail_of_huge_output_without_deadlock(ws: Workspace) -> None:
    """Past max_output, the first and last halves of each stream are kept and totals count all."""
    script = ("echo HEAD; echo head >&2; head -c 20000000 /dev/zero; head -c 20000000 /dev/zero >&2;"
              " echo TAIL; echo tail >&2")
    result = await ws.exec(["sh", "-c", script], max_output=64 * 1024, timeout=120)
    expect(result.ok and result.truncated, f"ok={result.ok} truncated={result.truncated}, expected both")
    sizes = (len(result.stdout), len(result.stderr))
    expect(sizes == (64 * 1024, 64 * 1024), f"kept {sizes} bytes, expected 65536 of each")
    expect(result.stdout.startswith(b"HEAD\n\0") and result.stdout.endswith(b"\0TAIL\n"), "stdout lost its head or tail")
    expect(result.stderr.startswith(b"head\n\0") and result.stderr.endswith(b"\0tail\n"), "stderr lost its head or tail")
    totals = (result.stdout_bytes_total, result.stderr_bytes_total)
    expect(totals == (20_000_010, 20_000_010), f"byte totals are {totals}, expected 20000010 each")


@check()
async def check_exec_feeds_stdin_while_reading_output(ws: Workspace) -> None:
    """stdin larger than any pipe buffer is fed while output is read; empty stdin is EOF."""
    data = os.urandom(3 << 20)
    result = await ws.exec(["cat"], stdin=data, max_output=4 << 20, timeout=120)
    expect(result.ok and not result.truncated, f"cat of 3 MiB stdin: {result.exit_code=} {result.timed_out=} {result.truncated=}")
    expect(result.stdout == data, f"cat gave back {len(result.stdout)} bytes, not the 3 MiB fed")
    count = (await ws.exec(["wc", "-c"], stdin=b"")).stdout.strip()
    expect(count == b"0", f"wc -c of empty stdin printed {count!r}")


@check()
async def check_exec_of_a_missing_program_exits_127(ws: Workspace) -> None:
    """A program not found exits 127 (not an exception)."""
    code = (await ws.exec(["no-such-program-here"])).exit_code
    expect(code == 127, f"exit code {code}, expected 127")


@check()
async def check_exec_in_a_missing_cwd_raises_workspace_error(ws: Workspace) -> None:
    """A cwd that does not exist raises WorkspaceError."""
    with raises(WorkspaceError, "exec in a missing cwd"):
        await ws.exec(["pwd"], cwd="/no/such/dir")


@check()
async def check_exec_leaves_the_event_loop_free(ws: Workspace) -> None:
    """Three concurrent 1 s execs leave the event loop ticking."""
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    task = asyncio.ensure_future(ticker())
    try:
        results = await asyncio.gather(*(ws.exec(["sleep", "1"]) for _ in range(3)))
    finally:
        task.cancel()
    expect(all(r.ok for r in results), f"sleep 1 failed: {results}")
    expect(ticks >= 10, f"the loop ticked {ticks} times in ~1 s (expected ~20 at 50 ms): exec blocked it")


# -- files --------------------------------------------------------------------------------------


@check()
async def check_files_round_trip_binary_bytes_mode_and_owner(ws: Workspace) -> None:
    """write_file/read_file round-trip bytes, mode and owner; parents come root-owned 755."""
    base = f"/tmp/files-{uuid.uuid4().hex[:8]}"
    path = f"{base}/new/parents/blob.bin"
    data = bytes(range(256)) * 513 + b"\r\n\0no trailing newline"
    await ws.write_file(path, data, mode=0o640, owner=AGENT_UID)
    expect(await ws.read_file(path) == data, "read_file did not return the bytes written")
    stat = (await ws.exec(["stat", "-c", "%a %u %g", path, f"{base}/new/parents", "/tmp"])).stdout.decode().splitlines()
    expected = ["640 1000 1000", "755 0 0", "1777 0 0"]
    expect(stat == expected, f"mode/uid/gid of file, new parent, /tmp are {stat}, expected {expected}")


@check()
async def check_write_file_replaces_an_existing_file(ws: Workspace) -> None:
    """write_file over a longer file replaces content and mode."""
    path = f"/tmp/replace-{uuid.uuid4().hex[:8]}"
    await ws.write_file(path, b"first version, longer")
    await ws.write_file(path, b"second", mode=0o755)
    got = await ws.read_file(path)
    expect(got == b"second", f"read back {got!r}, expected b'second'")
    stat = (await ws.exec(["stat", "-c", "%a %u", path])).stdout
    expect(stat == b"755 0\n", f"mode/uid {stat!r}, expected b'755 0\\n'")


@check()
async def check_read_file_of_a_missing_path_raises_file_not_found(ws: Workspace) -> None:
    """read_file of a missing path raises FileNotFoundError."""
    with raises(FileNotFoundError, "read_file of a missing path"):
        await ws.read_file("/no/such/file")


@check()
async def check_read_file_of_a_directory_raises_is_a_directory(ws: Workspace) -> None:
    """read_file of a directory raises IsADirectoryError."""
    with raises(IsADirectoryError, "read_file of /etc"):
        await ws.read_file("/etc")


@check()
async def check_read_file_follows_a_symlink(ws: Workspace) -> None:
    """read_file of a symlink returns its target's content."""
    target = f"/tmp/target-{uuid.uuid4().hex[:8]}"
    await ws.write_file(target, b"through the link")
    await ws.exec(["ln", "-s", target, f"{target}.link"])
    got = await ws.read_file(f"{target}.link")
    expect(got == b"through the link", f"read through the link gave {got!r}")


# -- network ------------------------------------------------------------------------------------


async def _interfaces(ws: Workspace) -> tuple[set[str], set[str]]:
    sys_net = (await ws.exec(["ls", "/sys/class/net"])).stdout.decode().split()
    dev = (await ws.exec(["cat", "/proc/net/dev"])).stdout.decode().splitlines()[2:]
    return set(sys_net), {line.split(":")[0].strip() for line in dev}


@check()
async def check_network_false_leaves_only_loopback(ws: Workspace) -> None:
    """Without network, /sys/class/net and /proc/net/dev list only lo."""
    found = await _interfaces(ws)
    expect(found == ({"lo"}, {"lo"}), f"interfaces (sysfs, /proc/net/dev) are {found}, expected only lo")


@check(fresh=True)
async def check_network_true_has_a_real_interface(target: Target) -> None:
    """With network=True the workspace says so and has an interface besides lo."""
    async with target.provision(network=True) as ws:
        expect(ws.network is True, f"ws.network is {ws.network!r} for network=True")
        found = set((await ws.exec(["ls", "/sys/class/net"])).stdout.decode().split())
    expect(found - {"lo"}, f"network=True, yet the only interfaces are {sorted(found)}")


# perl-base is in every Debian image (and on the host the local runtime shares): a unix-socket
# client that needs nothing installed. Prints what the server answers.
_SOCKET_CLIENT = ("use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die \"connect: $!\\n\";"
                  " print $s \"ping\\n\"; my $line = <$s>; print $line;")


@check(fresh=True)
async def check_a_bridge_is_read_only_inside_and_its_unix_socket_is_reachable_without_network(target: Target) -> None:
    """A host directory given as ``bridge`` appears at BRIDGE_PATH, read-only; a unix socket
    served there from the host answers a client inside, as the agent's uid, with no network."""
    import socket as socketlib
    import tempfile

    from engine.interfaces import AGENT_UID, BRIDGE_PATH

    host_dir = tempfile.mkdtemp(prefix="crucible-bridge-", dir="/tmp")
    os.chmod(host_dir, 0o755)
    listener = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    listener.bind(f"{host_dir}/echo.sock")
    os.chmod(f"{host_dir}/echo.sock", 0o666)
    listener.listen(4)
    listener.setblocking(False)
    loop = asyncio.get_running_loop()

    async def answer() -> None:
        conn, _ = await loop.sock_accept(listener)
        with conn:
            await loop.sock_recv(conn, 64)
            await loop.sock_sendall(conn, b"pong from the host\n")

    server = asyncio.ensure_future(answer())
    try:
        async with target.provision(bridge=host_dir) as ws:
            expect(ws.bridge == BRIDGE_PATH, f"ws.bridge is {ws.bridge!r}, expected {BRIDGE_PATH}")
            got = await ws.exec(["perl", "-e", _SOCKET_CLIENT, f"{BRIDGE_PATH}/echo.sock"], user=AGENT_UID, timeout=30)
            expect(got.stdout == b"pong from the host\n", f"through the bridge: {got.text()!r} (exit {got.exit_code})")
            wrote = await ws.exec(["sh", "-c", f"echo x > {BRIDGE_PATH}/planted"], timeout=30)
            expect(wrote.exit_code != 0 and not os.path.exists(f"{host_dir}/planted"),
                   "root inside the workspace could write into the bridge")
            expect((await _interfaces(ws)) == ({"lo"}, {"lo"}), "a bridged workspace must still have no network")
    finally:
        server.cancel()
        listener.close()
        shutil.rmtree(host_dir, ignore_errors=True)


# -- open_process -------------------------------------------------------------------------------


async def _read_until(process: Process, needle: bytes, limit: float = 10.0) -> bytes:
    seen = b""
    try:
        async with asyncio.timeout(limit):
            while needle not in seen:
                chunk = await process.read()
                if not chunk:
                    break
                seen += chunk
    except TimeoutError:
        raise ConformanceFailure(f"{needle!r} not read within {limit:.0f} s (read so far: {seen[-200:]!r})") from None
    return seen


@check()
async def check_open_process_streams_stdin_to_merged_output(ws: Workspace) -> None:
    """open_process: writes reach stdin, stdout and stderr come merged, then exit code and EOF."""
    process = await ws.open_process(["sh", "-c", "cat; echo bye >&2; exit 5"], user=AGENT_UID)
    try:
        expect(isinstance(process, Process), f"{type(process).__name__} does not satisfy the Process protocol")
        await process.write(b"ping\n")
        first = await _read_until(process, b"ping\n")
        await process.write(b"pong\n")
        second = await _read_until(process, b"pong\n")
        await process.close_stdin()
        rest = await _read_until(process, b"bye\n")
        code = await process.wait(timeout=10)
        eof = await process.read()
        with raises(BrokenPipeError, "write after the process exited"):
            await process.write(b"too late")
    finally:
        await process.kill()
    got = (first, second, rest, code, eof)
    expect(got == (b"ping\n", b"pong\n", b"bye\n", 5, b""), f"(echo, echo, stderr, exit code, eof) were {got}")


@check()
async def check_after_close_stdin_a_write_fails_and_a_second_close_does_nothing(ws: Workspace) -> None:
    """With stdin closed and the process still running, neither a write nor a second close hangs."""
    process = await ws.open_process(["sh", "-c", "cat >/dev/null; echo drained; sleep 30"])
    try:
        await process.write(b"some input\n")
        await process.close_stdin()
        await _read_until(process, b"drained\n")
        try:
            async with asyncio.timeout(5):
                await process.close_stdin()
                with raises(BrokenPipeError, "write after close_stdin"):
                    await process.write(b"too late")
        except TimeoutError:
            raise ConformanceFailure("a second close_stdin or a write after it hung") from None
    finally:
        await process.kill()
    code = await process.wait(timeout=10)
    expect(code != 0, f"a killed process exited {code}")


@check()
async def check_open_process_kill_ends_the_whole_group(ws: Workspace) -> None:
    """wait(timeout) gives up and leaves the process be; kill ends its whole group; kill is idempotent."""
    seconds = marker()
    process = await ws.open_process(["bash", "-c", f"sleep {seconds} & sleep {seconds}"])
    try:
        await wait_for_sleepers(ws, seconds, 2)
        with raises(TimeoutError, "wait(timeout=0.3) on a running process"):
            await process.wait(timeout=0.3)
        running = await processes_sleeping(ws, seconds)
        expect(running == 2, f"after wait gave up {running} sleepers run, expected both")
    finally:
        await process.kill()
    code = await process.wait(timeout=10)
    await process.kill()  # idempotent
    expect(code != 0, f"a killed process exited {code}")
    await expect_no_sleepers(ws, seconds, "kill")


# -- lifecycle ----------------------------------------------------------------------------------


@check(fresh=True, needs=(LEFTOVERS,))
async def check_close_is_idempotent(target: Target) -> None:
    """close twice, then leave the block: no error, nothing left."""
    run_id = fresh_run_id()
    ws = target.provision(run_id)
    await ws.__aenter__()
    await ws.close()
    await ws.close()
    await ws.__aexit__(None, None, None)
    left = await target.leftovers(run_id)
    expect(left == [], f"left behind after close: {left}")


class Boom(Exception):
    pass


@check(fresh=True, needs=(LEFTOVERS,), variants={e: {"ending": e} for e in ("normal", "exception", "cancelled")})
async def check_workspace_is_destroyed_however_the_block_ends(target: Target, *, ending: str) -> None:
    """Leaving the block destroys the workspace: normally, by an exception, by a cancel."""
    run_id = fresh_run_id()
    inside = asyncio.Event()

    async def body():
        async with target.provision(run_id) as ws:
            expect((await ws.exec(["true"])).ok, "`true` failed")
            expect(await target.leftovers(run_id), "the probe sees nothing of a live workspace")
            inside.set()
            if ending == "exception":
                raise Boom
            if ending == "cancelled":
                await asyncio.sleep(3600)

    task = asyncio.ensure_future(body())
    if ending == "cancelled":
        await inside.wait()
        task.cancel()
    expected = {"normal": None, "exception": Boom, "cancelled": asyncio.CancelledError}[ending]
    if expected is None:
        await task
    else:
        with raises(expected, f"the block ending by {ending}"):
            await task
    left = await target.leftovers(run_id)
    expect(left == [], f"left behind after the block ended ({ending}): {left}")


@check(fresh=True, needs=(LEFTOVERS,), variants={str(d): {"delay": d} for d in (0.05, 0.2, 0.5)})
async def check_cancel_while_provisioning_leaves_nothing_behind(target: Target, *, delay: float) -> None:
    """A cancel at any point of provisioning leaves nothing behind."""
    run_id = fresh_run_id()

    async def body():
        async with target.provision(run_id):
            await asyncio.sleep(3600)

    task = asyncio.ensure_future(body())
    await asyncio.sleep(delay)
    task.cancel()
    with raises(asyncio.CancelledError, f"a cancel {delay} s into provisioning"):
        await task
    left = await target.leftovers(run_id)
    expect(left == [], f"left behind after a cancel {delay} s into provisioning: {left}")


# -- only some backends -------------------------------------------------------------------------


@check(needs=(DOCKER_CONTAINER,))
async def check_container_runs_an_init_with_owner_labels(ws: DockerWorkspace) -> None:
    """PID 1 is an init (removal is instant), no network, labels name the owner and the run."""
    from engine.run.reaper import (
        LABEL_OWNER_PID,
        LABEL_OWNER_STARTED,
        LABEL_RUN_ID,
        process_start_time,
    )

    attrs = await asyncio.to_thread(ws.runtime.client.api.inspect_container, ws.container_id)
    expect(attrs["HostConfig"]["Init"] is True, f"HostConfig.Init is {attrs['HostConfig']['Init']!r}")
    expect(attrs["HostConfig"]["NetworkMode"] == "none", f"NetworkMode is {attrs['HostConfig']['NetworkMode']!r}")
    labels = attrs["Config"]["Labels"]
    expected = {LABEL_OWNER_PID: str(os.getpid()), LABEL_OWNER_STARTED: process_start_time(os.getpid()),
                LABEL_RUN_ID: ws.run_id}
    got = {key: labels.get(key) for key in expected}
    expect(got == expected, f"labels are {got}, expected {expected}")


@check(needs=(EXEC_BACKSTOP,))
async def check_backstop_reports_a_timeout_when_the_in_container_timeout_fails(ws: DockerWorkspace) -> None:
    """With a `timeout` that ignores its deadline first on PATH, the host-side backstop still
    kills the command and reports a timeout."""
    seconds = marker()
    await ws.write_file("/opt/broken/timeout", b'#!/bin/sh\nshift 3\nexec "$@"\n', mode=0o755)
    grace, ws.backstop_grace = ws.backstop_grace, 1.0
    try:
        result = await ws.exec(["sleep", seconds], timeout=0.5, env={"PATH": "/opt/broken:/usr/bin:/bin"})
    finally:
        ws.backstop_grace = grace
    expect(result.timed_out and result.exit_code == 124,
           f"timed_out={result.timed_out} exit_code={result.exit_code}, expected True and 124")
    expect(1.5 <= result.seconds < 10, f"took {result.seconds:.2f} s, expected deadline + grace (1.5 s) to 10 s")
    await expect_no_sleepers(ws, seconds, "the backstop fired")


# -- by hand: python -m engine.runtimes.conformance runtime=docker -----------------------------


def prepare(overrides: list[str]) -> tuple[Runtime, object]:
    """The configured runtime and a ready image for the task (planned, built unless cached)."""
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    if not any(o.startswith("task=") for o in overrides):
        overrides = [*overrides, f"task={DEFAULT_TASK}"]
    cfg = to_typed(compose_config(overrides))
    session = session_for(cfg)
    try:
        image = plan(cfg, builder=session.builder).image
        session.builder.ensure(image, session.store)
    finally:
        close = getattr(session.store, "close", None)
        if callable(close):
            close()
    return session.runtime, image


def report(results: list[CheckResult]) -> str:
    from engine.util.tables import format_table

    rows = [(r.name, "skipped" if r.skipped else "passed" if r.passed else "FAILED", round(r.seconds, 2), r.message)
            for r in results]
    failed = sum(1 for r in results if not r.passed and not r.skipped)
    skipped = sum(1 for r in results if r.skipped)
    summary = f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped"
    return format_table(["check", "result", "seconds", "message"], rows, max_cell=120) + "\n" + summary


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__.strip())
        return 0
    try:
        runtime, image = prepare(overrides)
        results = asyncio.run(run_conformance(runtime, image))
    except UserError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return exc.exit_code
    except CrucibleError as exc:
        print(f"conformance: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report(results))
    return 1 if any(not r.passed and not r.skipped for r in results) else 0


if __name__ == "__main__":
    # Through the imported module, so the probes and checks share one registry and one
    # ConformanceFailure with it (this file also runs as __main__).
    from engine.runtimes.conformance import main as _main

    sys.exit(_main())
