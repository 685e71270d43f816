"""The ``Workspace`` contract (engine/interfaces.py), proven against every backend.

Every test takes the ``backend`` fixture, parametrized over ``BACKENDS``. A new backend
(``runtime=local``) joins by adding one class there: ``provision(run_id, network)``
returning a not-yet-entered workspace, and ``leftovers(run_id)`` naming whatever of
that run's workspaces still exists. Tests that need no fresh workspace share one per
module (``workspace``); those about lifecycle provision their own.

The last section holds Docker-only checks (init process, labels, the host-side backstop).
"""
from __future__ import annotations

import asyncio
import os
import random
import uuid

import pytest

from engine.errors import EngineUnavailable, WorkspaceError
from engine.interfaces import AGENT_UID, Process, Workspace
from engine.run.reaper import LABEL_OWNER_PID, LABEL_OWNER_STARTED, LABEL_RUN_ID, process_start_time
from engine.runtimes.docker.runtime import DockerRuntime

# -- backends ---------------------------------------------------------------------------------


class DockerBackend:
    name = "docker"
    marks = (pytest.mark.docker,)

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.client = request.getfixturevalue("docker_client")
        self.image = request.getfixturevalue("base_image")
        self.runtime = DockerRuntime()

    def provision(self, run_id: str, network: bool = False) -> Workspace:
        return self.runtime.provision(self.image, run_id=run_id, network=network, purpose="test")

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        """Variables a command may see beyond its env: the image's declared ENV (Docker
        always applies it; it is part of the image, not of the engine) and the shell's PWD."""
        declared = (await ws.exec(["cat", "/proc/1/environ"])).stdout.split(b"\0")
        return {item.split(b"=", 1)[0].decode() for item in declared if item} | {"PWD"}

    def leftovers(self, run_id: str) -> list[str]:
        found = self.client.api.containers(all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"})
        return [c["Names"][0] for c in found]


class LocalBackend:
    """runtime=local: a per-run host dir behind a bubblewrap sandbox, from a tiny repo's template."""

    name = "local"
    marks = ()

    def __init__(self, request: pytest.FixtureRequest) -> None:
        from engine.runtimes.local.runtime import LocalRuntime
        from test_local_runtime import require_sandbox, tiny_image

        self.runtime = LocalRuntime()
        require_sandbox(self.runtime)
        self.image = tiny_image(request.getfixturevalue("tmp_path_factory").mktemp("conformance-local"))

    def provision(self, run_id: str, network: bool = False) -> Workspace:
        return self.runtime.provision(self.image, run_id=run_id, network=network, purpose="test")

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        """Beyond its env a command sees only the shell's PWD (the wrapper enters cwd with cd)."""
        return {"PWD"}

    def leftovers(self, run_id: str) -> list[str]:
        """The run's roots still on disk, and any process whose mounts still hold one (a sandbox)."""
        from engine.runtimes.local.template import run_roots
        from test_local_runtime import sandboxes_of

        return [str(root) for root in run_roots(run_id)] + [f"pid {pid}" for pid in sandboxes_of(run_id)]


BACKENDS = {backend.name: backend for backend in (DockerBackend, LocalBackend)}


@pytest.fixture(scope="module", params=[pytest.param(n, marks=b.marks) for n, b in BACKENDS.items()])
def backend(request):
    return BACKENDS[request.param](request)


@pytest.fixture(scope="module")
def loop():
    """One event loop per module, so the shared workspace lives in the loop that made it."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def run(loop):
    return loop.run_until_complete


@pytest.fixture(scope="module")
def workspace(backend, run):
    ws = backend.provision(f"conformance-{uuid.uuid4().hex[:8]}")
    run(ws.__aenter__())
    yield ws
    run(ws.__aexit__(None, None, None))


def fresh_run_id() -> str:
    return f"conformance-{uuid.uuid4().hex[:8]}"


def marker() -> str:
    """A sleep duration no other test uses, so its processes can be found in /proc."""
    return str(random.randint(100_000, 999_999))


async def processes_sleeping(ws: Workspace, seconds: str) -> int:
    """How many processes in the workspace run ``sleep SECONDS`` (read from /proc; no ps needed)."""
    listing = await ws.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null; true"])
    return listing.stdout.count(b"sleep\x00" + seconds.encode() + b"\x00")


async def wait_for_sleepers(ws: Workspace, seconds: str, count: int, limit: float = 20.0) -> None:
    async with asyncio.timeout(limit):
        while await processes_sleeping(ws, seconds) < count:
            await asyncio.sleep(0.05)


async def kill_sleepers(ws: Workspace, seconds: str) -> None:
    script = (f'for p in /proc/[0-9]*; do [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = "sleep {seconds} " ]'
              ' && kill -9 "${p#/proc/}"; done; true')
    await ws.exec(["sh", "-c", script])


# -- exec -------------------------------------------------------------------------------------


def test_workspace_satisfies_the_protocol(workspace):
    assert isinstance(workspace, Workspace)
    assert workspace.network is False


def test_exec_reports_exit_code_and_stdout_stderr_separately(workspace, run):
    result = run(workspace.exec(["sh", "-c", "echo out; echo err >&2; exit 3"]))
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert not result.timed_out and not result.truncated
    assert (result.stdout_bytes_total, result.stderr_bytes_total) == (4, 4)
    assert result.seconds > 0


def test_exec_runs_as_root_by_default_and_as_the_agent_uid_when_asked(workspace, run):
    root = run(workspace.exec(["sh", "-c", "id -u; id -g"]))
    agent = run(workspace.exec(["sh", "-c", "id -u; id -g"], user=AGENT_UID))
    assert root.stdout.split() == [b"0", b"0"]
    assert agent.stdout.split() == [b"1000", b"1000"]  # not root's group either


def test_exec_runs_in_the_given_cwd(workspace, run):
    assert run(workspace.exec(["pwd"], cwd="/tmp")).stdout == b"/tmp\n"
    assert run(workspace.exec(["pwd"], cwd="/usr/share")).stdout == b"/usr/share\n"


def test_exec_env_replaces_the_engine_environment(backend, workspace, run, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_SECRET_CANARY", "leaked")
    default_root = _env(run(workspace.exec(["env"])))
    default_agent = _env(run(workspace.exec(["env"], user=AGENT_UID)))
    given = _env(run(workspace.exec(["env"], env={"PATH": "/usr/bin:/bin", "ONLY_THIS": "1"})))
    assert default_root["HOME"] == "/root" and default_agent["HOME"] == "/tmp"
    assert default_root["LANG"] == "C.UTF-8" and "/usr/bin" in default_root["PATH"].split(":")
    assert given["ONLY_THIS"] == "1" and given["PATH"] == "/usr/bin:/bin"
    baseline = run(backend.baseline_env_names(workspace))
    for listing in (default_root, default_agent, given):
        assert "CRUCIBLE_SECRET_CANARY" not in listing
        assert set(listing) <= baseline | {"PATH", "HOME", "LANG", "ONLY_THIS"}


def _env(result) -> dict[str, str]:
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines())


def test_exec_timeout_kills_the_whole_process_group(workspace, run):
    seconds = marker()
    # A background grandchild and a foreground child: both must die with the deadline.
    result = run(workspace.exec(["bash", "-c", f"sleep {seconds} & sleep {seconds}"], timeout=1))
    assert result.timed_out and result.exit_code == 124
    assert 1 <= result.seconds < 8
    assert run(processes_sleeping(workspace, seconds)) == 0


def test_cancelling_an_exec_kills_its_command(workspace, run):
    seconds = marker()

    async def scenario():
        task = asyncio.ensure_future(workspace.exec(["bash", "-c", f"sleep {seconds} & sleep {seconds}"]))
        await wait_for_sleepers(workspace, seconds, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await processes_sleeping(workspace, seconds)

    assert run(scenario()) == 0


def test_exec_that_finishes_in_time_is_not_timed_out(workspace, run):
    result = run(workspace.exec(["sh", "-c", "exit 124"], timeout=30))
    assert result.exit_code == 124 and not result.timed_out


def test_exec_returns_when_the_command_exits_though_a_background_child_holds_its_output(workspace, run):
    seconds = marker()
    result = run(workspace.exec(["bash", "-c", f"sleep {seconds} & echo started"], timeout=60))
    assert result.ok and result.stdout == b"started\n"
    assert result.seconds < 10  # not the 60 s deadline, nor the child's lifetime
    run(kill_sleepers(workspace, seconds))
    assert run(processes_sleeping(workspace, seconds)) == 0


def test_exec_keeps_head_and_tail_of_huge_output_without_deadlock(workspace, run):
    script = ("echo HEAD; echo head >&2; head -c 20000000 /dev/zero; head -c 20000000 /dev/zero >&2;"
              " echo TAIL; echo tail >&2")
    result = run(workspace.exec(["sh", "-c", script], max_output=64 * 1024, timeout=120))
    assert result.ok and result.truncated
    assert len(result.stdout) == len(result.stderr) == 64 * 1024
    assert result.stdout.startswith(b"HEAD\n\0") and result.stdout.endswith(b"\0TAIL\n")
    assert result.stderr.startswith(b"head\n\0") and result.stderr.endswith(b"\0tail\n")
    assert (result.stdout_bytes_total, result.stderr_bytes_total) == (20_000_010, 20_000_010)


def test_exec_feeds_stdin_while_reading_output(workspace, run):
    data = os.urandom(3 << 20)  # more than any pipe buffers in between: needs concurrent I/O
    result = run(workspace.exec(["cat"], stdin=data, max_output=4 << 20, timeout=120))
    assert result.ok and result.stdout == data and not result.truncated
    assert run(workspace.exec(["wc", "-c"], stdin=b"")).stdout.strip() == b"0"


def test_exec_of_a_missing_program_exits_127(workspace, run):
    assert run(workspace.exec(["no-such-program-here"])).exit_code == 127


def test_exec_in_a_missing_cwd_raises_workspace_error(workspace, run):
    with pytest.raises(WorkspaceError):
        run(workspace.exec(["pwd"], cwd="/no/such/dir"))


def test_exec_leaves_the_event_loop_free(workspace, run):
    async def scenario():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        results = await asyncio.gather(*(workspace.exec(["sleep", "1"]) for _ in range(3)))
        task.cancel()
        return ticks, results

    ticks, results = run(scenario())
    assert all(r.ok for r in results)
    assert ticks >= 10  # ~20 at 50 ms over ~1 s if nothing blocked the loop


# -- files ------------------------------------------------------------------------------------


def test_files_round_trip_binary_bytes_mode_and_owner(workspace, run):
    base = f"/tmp/files-{uuid.uuid4().hex[:8]}"
    path = f"{base}/new/parents/blob.bin"
    data = bytes(range(256)) * 513 + b"\r\n\0no trailing newline"
    run(workspace.write_file(path, data, mode=0o640, owner=AGENT_UID))
    assert run(workspace.read_file(path)) == data
    stat = run(workspace.exec(["stat", "-c", "%a %u %g", path, f"{base}/new/parents", "/tmp"]))
    assert stat.stdout.decode().splitlines() == ["640 1000 1000", "755 0 0", "1777 0 0"]


def test_write_file_replaces_an_existing_file(workspace, run):
    path = f"/tmp/replace-{uuid.uuid4().hex[:8]}"
    run(workspace.write_file(path, b"first version, longer"))
    run(workspace.write_file(path, b"second", mode=0o755))
    assert run(workspace.read_file(path)) == b"second"
    assert run(workspace.exec(["stat", "-c", "%a %u", path])).stdout == b"755 0\n"


def test_read_file_of_a_missing_path_raises_file_not_found(workspace, run):
    with pytest.raises(FileNotFoundError):
        run(workspace.read_file("/no/such/file"))


def test_read_file_of_a_directory_raises_is_a_directory(workspace, run):
    with pytest.raises(IsADirectoryError):
        run(workspace.read_file("/etc"))


def test_read_file_follows_a_symlink(workspace, run):
    target = f"/tmp/target-{uuid.uuid4().hex[:8]}"
    run(workspace.write_file(target, b"through the link"))
    run(workspace.exec(["ln", "-s", target, f"{target}.link"]))
    assert run(workspace.read_file(f"{target}.link")) == b"through the link"


# -- network ----------------------------------------------------------------------------------


def _interfaces(ws, run) -> tuple[set[str], set[str]]:
    sys_net = run(ws.exec(["ls", "/sys/class/net"])).stdout.decode().split()
    dev = run(ws.exec(["cat", "/proc/net/dev"])).stdout.decode().splitlines()[2:]
    return set(sys_net), {line.split(":")[0].strip() for line in dev}


def test_network_false_leaves_only_loopback(workspace, run):
    assert _interfaces(workspace, run) == ({"lo"}, {"lo"})


def test_network_true_has_a_real_interface(backend, run):
    async def scenario():
        async with backend.provision(fresh_run_id(), network=True) as ws:
            assert ws.network is True
            return set((await ws.exec(["ls", "/sys/class/net"])).stdout.decode().split())

    assert run(scenario()) - {"lo"}


# -- open_process -----------------------------------------------------------------------------


async def _read_until(process: Process, needle: bytes, limit: float = 10.0) -> bytes:
    seen = b""
    async with asyncio.timeout(limit):
        while needle not in seen:
            chunk = await process.read()
            if not chunk:
                break
            seen += chunk
    return seen


def test_open_process_streams_stdin_to_merged_output(workspace, run):
    async def scenario():
        process = await workspace.open_process(["sh", "-c", "cat; echo bye >&2; exit 5"], user=AGENT_UID)
        assert isinstance(process, Process)
        await process.write(b"ping\n")
        first = await _read_until(process, b"ping\n")
        await process.write(b"pong\n")
        second = await _read_until(process, b"pong\n")
        await process.close_stdin()
        rest = await _read_until(process, b"bye\n")
        code = await process.wait(timeout=10)
        eof = await process.read()
        with pytest.raises(BrokenPipeError):
            await process.write(b"too late")
        return first, second, rest, code, eof

    first, second, rest, code, eof = run(scenario())
    assert (first, second, rest, code, eof) == (b"ping\n", b"pong\n", b"bye\n", 5, b"")


def test_after_close_stdin_a_write_fails_and_a_second_close_does_nothing(workspace, run):
    """The process still runs with its stdin closed: neither call may hang on it."""
    async def scenario():
        process = await workspace.open_process(["sh", "-c", "cat >/dev/null; echo drained; sleep 30"])
        await process.write(b"some input\n")
        await process.close_stdin()
        await _read_until(process, b"drained\n")
        async with asyncio.timeout(5):
            await process.close_stdin()
            with pytest.raises(BrokenPipeError):
                await process.write(b"too late")
        await process.kill()
        return await process.wait(timeout=10)

    assert run(scenario()) != 0


def test_open_process_kill_ends_the_whole_group(workspace, run):
    seconds = marker()

    async def scenario():
        process = await workspace.open_process(["bash", "-c", f"sleep {seconds} & sleep {seconds}"])
        await wait_for_sleepers(workspace, seconds, 2)
        with pytest.raises(TimeoutError):
            await process.wait(timeout=0.3)  # still running: wait gives up, leaves it be
        assert await processes_sleeping(workspace, seconds) == 2
        await process.kill()
        code = await process.wait(timeout=10)
        await process.kill()  # idempotent
        return code, await processes_sleeping(workspace, seconds)

    code, left = run(scenario())
    assert code != 0 and left == 0


# -- lifecycle --------------------------------------------------------------------------------


def test_close_is_idempotent(backend, run):
    run_id = fresh_run_id()

    async def scenario():
        ws = backend.provision(run_id)
        await ws.__aenter__()
        await ws.close()
        await ws.close()
        await ws.__aexit__(None, None, None)

    run(scenario())
    assert backend.leftovers(run_id) == []


class Boom(Exception):
    pass


@pytest.mark.parametrize("ending", ["normal", "exception", "cancelled"])
def test_workspace_is_destroyed_however_the_block_ends(backend, run, ending):
    run_id = fresh_run_id()
    inside = asyncio.Event()

    async def body():
        async with backend.provision(run_id) as ws:
            assert (await ws.exec(["true"])).ok
            assert backend.leftovers(run_id)  # it really existed
            inside.set()
            if ending == "exception":
                raise Boom
            if ending == "cancelled":
                await asyncio.sleep(3600)

    async def scenario():
        task = asyncio.ensure_future(body())
        if ending == "cancelled":
            await inside.wait()
            task.cancel()
        await task

    expected = {"normal": None, "exception": Boom, "cancelled": asyncio.CancelledError}[ending]
    if expected is None:
        run(scenario())
    else:
        with pytest.raises(expected):
            run(scenario())
    assert backend.leftovers(run_id) == []


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])
def test_cancel_while_provisioning_leaves_nothing_behind(backend, run, delay):
    run_id = fresh_run_id()

    async def scenario():
        async def body():
            async with backend.provision(run_id):
                await asyncio.sleep(3600)

        task = asyncio.ensure_future(body())
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert backend.leftovers(run_id) == []


# -- Docker only ------------------------------------------------------------------------------


@pytest.fixture
def docker_workspace(backend, workspace):
    if backend.name != "docker":
        pytest.skip("Docker-specific")
    return workspace


def test_container_runs_an_init_with_owner_labels(docker_workspace, backend):
    attrs = backend.client.api.inspect_container(docker_workspace.container_id)
    assert attrs["HostConfig"]["Init"] is True  # PID 1 forwards signals: removal is instant
    assert attrs["HostConfig"]["NetworkMode"] == "none"
    labels = attrs["Config"]["Labels"]
    assert labels[LABEL_OWNER_PID] == str(os.getpid())
    assert labels[LABEL_OWNER_STARTED] == process_start_time(os.getpid())
    assert labels[LABEL_RUN_ID] == docker_workspace.run_id


def test_backstop_reports_a_timeout_when_the_in_container_timeout_fails(docker_workspace, run, monkeypatch):
    seconds = marker()
    # A `timeout` that ignores its deadline, found first on the command's PATH.
    run(docker_workspace.write_file("/opt/broken/timeout", b'#!/bin/sh\nshift 3\nexec "$@"\n', mode=0o755))
    monkeypatch.setattr(docker_workspace, "backstop_grace", 1.0)
    result = run(docker_workspace.exec(["sleep", seconds], timeout=0.5,
                                       env={"PATH": "/opt/broken:/usr/bin:/bin"}))
    assert result.timed_out and result.exit_code == 124
    assert 1.5 <= result.seconds < 10
    assert run(processes_sleeping(docker_workspace, seconds)) == 0


def test_unreachable_engine_is_one_actionable_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    runtime = DockerRuntime(api_timeout=5)
    with pytest.raises(EngineUnavailable) as caught:
        runtime.client
    message = str(caught.value)
    assert "\n" not in message and "crucible doctor --fix" in message
