"""The containers' spawner (engine/runtimes/docker/spawner.py) on a real engine: a workspace's
commands start without ``docker exec``, each gets what ``docker exec`` gives it (identity,
groups, environment, capabilities, seccomp, cgroup, session), one command's unread output
never holds up another's, the agent's uid cannot reach the spawner, and a spawner killed under
a command ends it with a clear error. The whole Workspace contract on it is the ``docker``
backend of tests/runtimes/test_workspace_conformance.py (``docker-spares`` is docker exec's).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid

import pytest

import engine.runtimes.docker.exec as docker_exec
import engine.runtimes.docker.process as docker_process
from engine.errors import WorkspaceError
from engine.models import TtySize
from engine.runtimes.docker.runtime import DockerRuntime
from engine.runtimes.docker.spawner import STDIN_WINDOW, built
from engine.util.aio import within

pytestmark = [pytest.mark.docker]

AGENT = 1000
# What a command can see of how it was started; the exec's pid and timing aside.
IDENTITY = (
    "id; umask; pwd; env | grep -v '^HOSTNAME=' | sort; "
    "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status; "
    "cat /proc/self/cgroup; readlink /proc/self/ns/pid /proc/self/ns/mnt /proc/self/ns/net; "
    "ulimit -a; readlink /proc/$$/fd/0; "
    # a session of its own, led by the command's first process (GNU timeout, whose child this is)
    'set -- $(cut -d" " -f6 /proc/$$/stat) $PPID; [ "$1" = "$2" ] && echo own-session'
)


def _workspace(run, image: str, *, spawner: bool):
    ws = DockerRuntime(spawner=spawner).provision(
        image, run_id=f"spawner-{uuid.uuid4().hex[:8]}", network=False, purpose="test"
    )
    run(ws.__aenter__())
    return ws


@pytest.fixture
def both(base_image, run):
    """A workspace whose commands the spawner starts, and one whose are docker execs."""
    if built() is None:
        pytest.fail("no spawner could be built here: make setup installs gcc and libc6-dev")
    spawned, execed = _workspace(run, base_image, spawner=True), _workspace(run, base_image, spawner=False)
    yield spawned, execed
    run(spawned.close())
    run(execed.close())


@pytest.fixture
def no_docker_exec(monkeypatch):
    """Every ``docker exec`` the engine starts, recorded."""
    started: list[list[str]] = []
    original = docker_exec.start_exec

    def recording(api, container_id, argv, **kwargs):
        started.append(list(argv))
        return original(api, container_id, argv, **kwargs)

    monkeypatch.setattr(docker_exec, "start_exec", recording)
    monkeypatch.setattr(docker_process, "start_exec", recording)
    return started


def test_commands_and_processes_start_without_docker_exec_but_a_terminal_is_dockers(both, run, no_docker_exec):
    spawned, _ = both

    async def use() -> tuple[bytes, bytes, bytes]:
        done = await spawned.exec(["sh", "-c", "cat; echo err >&2; exit 3"], stdin=b"in", user=AGENT)
        assert (done.exit_code, done.stdout, done.stderr) == (3, b"in", b"err\n")
        process = await spawned.open_process(["sh", "-c", "read x; echo got $x"], user=AGENT)
        await process.write(b"word\n")
        out = await process.read()
        assert await process.wait(30) == 0
        assert no_docker_exec == []  # neither was a docker exec
        terminal = await spawned.open_process(["sh", "-c", "tty; read x"], tty=TtySize(rows=24, cols=80))
        seen = await terminal.read()
        await terminal.write(b"\n")
        await terminal.wait(30)
        return done.stdout, out, seen

    _, out, seen = run(use())
    assert out == b"got word\n"
    assert seen.startswith(b"/dev/pts/") and len(no_docker_exec) == 1  # the terminal's was


@pytest.mark.parametrize("user", [0, AGENT])
def test_a_command_gets_what_docker_exec_gives_it(both, run, user):
    spawned, execed = both

    async def look(ws) -> bytes:
        done = await ws.exec(["sh", "-c", IDENTITY], user=user, cwd="/tmp", env={"PATH": "/usr/bin:/bin", "X": "y z"})
        assert done.exit_code == 0, done
        # each container's own namespaces and cgroup: compared by kind, not by number
        lines = done.stdout.replace(ws.container_id.encode(), b"ID").splitlines()
        return b"\n".join(line.split(b":[")[0] if line[:4] in (b"pid:", b"mnt:", b"net:") else line for line in lines)

    ours, docker = run(look(spawned)), run(look(execed))
    assert b"own-session" in ours and b"Seccomp:\t2" in ours and b"X=y z" in ours
    assert ours == docker


def test_the_groups_and_home_are_those_docker_exec_gives_a_user_the_image_names(both, run):
    setup = (
        "echo 'agent:x:1000:1000:agent:/home/agent:/bin/sh' >> /etc/passwd; "
        "echo 'crew:x:1500:agent,other' >> /etc/group; echo 'agent:x:1000:' >> /etc/group"
    )

    async def look(ws) -> bytes:
        assert (await ws.exec(["sh", "-c", setup])).exit_code == 0
        done = await ws.exec(["sh", "-c", "id; echo $HOME"], user=AGENT, env={"PATH": "/usr/bin:/bin"})
        return done.stdout

    ours, docker = (run(look(ws)) for ws in both)
    assert ours == docker
    # "uid:gid" as docker exec's user: that group alone, whatever /etc/group says; HOME from /etc/passwd
    assert b"groups=1000(agent)\n" in ours and ours.endswith(b"/home/agent\n")


def test_unread_output_holds_up_only_its_own_command(both, run):
    spawned, _ = both

    async def use() -> None:
        # 8 MB the reader does not take yet: the spawner stops reading it past its credit ...
        chatty = await spawned.open_process(
            ["sh", "-c", "head -c 8000000 /dev/zero; echo end >&2"], separate_stderr=True
        )
        # ... and every other command goes on meanwhile
        for _ in range(3):
            assert (await spawned.exec(["echo", "ok"])).stdout == b"ok\n"
        data = bytearray()
        while chunk := await chatty.read():
            data += chunk
        assert await chatty.wait(30) == 0
        assert len(data) == data.count(b"\0") == 8_000_000 and await chatty.read_stderr() == b"end\n"

    run(use())


def test_stdin_and_output_arrive_byte_for_byte(both, run):
    spawned, _ = both
    payload = bytes(range(256)) * 40_000  # 10 MB, every byte value

    async def use() -> None:
        done = await spawned.exec(["sha256sum"], stdin=payload, max_output=1 << 10)
        assert done.stdout.split()[0].decode() == hashlib.sha256(payload).hexdigest()
        echoed = await spawned.exec(["cat"], stdin=payload, max_output=len(payload))
        assert echoed.stdout == payload and echoed.stdout_bytes_total == len(payload)

    run(use())


def test_the_agents_uid_cannot_reach_the_spawner(both, run):
    spawned, _ = both

    async def probe() -> str:
        script = (
            "pid=$(cat /proc/1/task/1/children | cut -d' ' -f1); "  # docker-init's child: the spawner
            "tr '\\0' ' ' < /proc/$pid/cmdline; echo; "
            "kill -9 $pid 2>/dev/null && echo killed; "
            "echo x > /proc/$pid/fd/0 2>/dev/null && echo wrote; "
            "cat /proc/$pid/fd/1 2>/dev/null && echo read; "
            "ls /proc/$pid/fd 2>/dev/null && echo listed; true"
        )
        done = await spawned.exec(["sh", "-c", script], user=AGENT)
        after = await spawned.exec(["echo", "still here"])
        return done.stdout.decode() + after.stdout.decode()

    seen = run(probe())
    assert seen.startswith("/.crucible-spawner/spawner")
    assert not any(word in seen.split() for word in ("killed", "wrote", "read", "listed"))
    assert seen.endswith("still here\n")


def test_a_spawner_killed_under_a_command_ends_it_with_a_clear_error(base_image, run):
    ws = _workspace(run, base_image, spawner=True)

    async def kill_it() -> None:
        waiting = await ws.open_process(["sleep", "600"])
        with contextlib.suppress(WorkspaceError):  # it may go with the spawner it kills
            await ws.exec(["sh", "-c", "kill -9 $(cut -d' ' -f1 /proc/1/task/1/children)"])
        with pytest.raises(WorkspaceError, match="spawner is gone"):
            await asyncio.wait_for(waiting.wait(), 60)
        with pytest.raises(WorkspaceError, match="has stopped|spawner is gone|not running"):
            await ws.exec(["true"])

    try:
        run(kill_it())
    finally:
        run(ws.close())


def test_a_cancelled_wait_leaves_the_process_to_kill(both, run):
    """A relay that gives up on a process cancels its waiter; the process must still be there to kill."""
    spawned, _ = both

    async def use() -> int:
        process = await spawned.open_process(["sh", "-c", "sleep 300 & sleep 300"])
        waiter = asyncio.ensure_future(process.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        await process.kill()
        code = await process.wait(60)
        listing = "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline; echo; done"
        left = await spawned.exec(["sh", "-c", listing])
        assert b"for d in" in left.stdout  # the listing sees itself: it works
        assert b"sleep 300 \n" not in left.stdout
        return code

    assert run(use()) == 137


def test_a_directory_only_root_may_enter_is_entered_as_docker_exec_enters_it(both, run):
    async def look(ws) -> tuple[int, bytes]:
        done = await ws.exec(["pwd"], user=AGENT, cwd="/root")
        return done.exit_code, done.stdout

    assert run(look(both[0])) == run(look(both[1])) == (0, b"/root\n")


def test_a_background_child_outlives_its_exec_and_may_still_write(both, run):
    """docker exec leaves a ``server &`` its output pipes; so does the spawner once the exec has ended."""
    script = "(while [ ! -e /tmp/go ]; do sleep 0.05; done; echo later; echo alive > /tmp/alive) & echo started"

    async def use(ws) -> bytes:
        done = await ws.exec(["sh", "-c", script], user=AGENT, cwd="/tmp")
        assert done.stdout == b"started\n"
        await ws.exec(["touch", "/tmp/go"], user=AGENT)
        waited = await ws.exec(
            ["sh", "-c", "while [ ! -e /tmp/alive ]; do sleep 0.05; done; cat /tmp/alive"], timeout=60
        )
        return waited.stdout

    assert run(use(both[0])) == run(use(both[1])) == b"alive\n"


def test_stdin_a_command_does_not_read_waits_and_is_never_buffered_whole(base_image, run):
    """As a write into a full pipe waits: a process that never reads its stdin holds the writer,
    and the spawner holds at most ``STDIN_WINDOW`` of it, so 256 MB cannot fill a 64 MB container."""
    ws = DockerRuntime(memory="64m").provision(
        base_image, run_id=f"spawner-{uuid.uuid4().hex[:8]}", network=False, purpose="test"
    )
    run(ws.__aenter__())

    async def use() -> None:
        process = await ws.open_process(["sleep", "600"], user=AGENT)
        writing = asyncio.ensure_future(process.write(b"x" * (256 << 20)))
        # a round trip through the spawner: the writer has had every chance to run ahead meanwhile
        assert (await ws.exec(["echo", "ok"])).stdout == b"ok\n"
        assert not writing.done() and process.stdin_unwritten <= STDIN_WINDOW
        await process.kill()
        with pytest.raises(BrokenPipeError):  # its end releases the writer
            await within(writing, 60)
        state = await asyncio.to_thread(ws.client.api.inspect_container, ws.container_id)
        assert state["State"]["Running"] and not state["State"]["OOMKilled"]

    try:
        run(use())
    finally:
        run(ws.close())


@pytest.mark.slow  # ~30 s: tried until a child is caught between its setuid and its exec
def test_the_agents_uid_stopping_every_process_it_may_holds_up_none_of_roots_commands(both, run):
    """A child is the tested uid's between its setuid and its exec: stopped there, its start is
    bounded by its deadline, and nothing else waits on it."""
    spawned, _ = both
    spawned.backstop_grace = 1.0

    async def use() -> None:
        stopper = await spawned.open_process(["sh", "-c", "while :; do kill -STOP -1 2>/dev/null; done"], user=AGENT)
        # the window between a child's setuid and its exec is short: tried until one is caught there
        for _ in range(30):
            late = await spawned.exec(["true"], user=AGENT, timeout=0.3)
            assert late.exit_code == 0 or (late.timed_out and late.exit_code == 124)  # caught or not
            assert (await within(spawned.exec(["echo", "root"], timeout=30), 60)).stdout == b"root\n"
        await stopper.kill()
        assert await stopper.wait(60) == 137

    run(use())


def test_a_closed_workspace_stops_by_itself_before_it_is_removed(both, run, docker_client):
    """Closing asks the spawner to quit: the container stops on its own (what still ran in it
    goes with it) and is removed stopped, so Docker never kills it (removing a running container
    costs ~15 ms of CPU more). One whose commands are docker execs is killed, as before."""
    import datetime

    spawned, execed = both

    async def left_running(ws) -> None:  # a command still running when the workspace closes
        await ws.open_process(["sleep", "600"])

    for ws in (spawned, execed):
        run(left_running(ws))
    since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
    ids = {spawned.container_id: "spawner", execed.container_id: "docker exec"}
    run(spawned.close())
    run(execed.close())
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    actions: dict[str, list[str]] = {how: [] for how in ids.values()}
    for event in docker_client.api.events(since=since, until=until, decode=True, filters={"type": "container"}):
        if event.get("id") in ids:
            actions[ids[event["id"]]].append(event["Action"])
    assert "kill" not in actions["spawner"] and {"die", "destroy"} <= set(actions["spawner"]), actions
    assert "kill" in actions["docker exec"] and "destroy" in actions["docker exec"], actions
    for container_id in ids:
        with pytest.raises(Exception, match="No such container"):
            docker_client.api.inspect_container(container_id)


def test_a_workspace_starts_as_its_container_would_say_without_asking_it(base_image, run, docker_client, monkeypatch):
    """The spawner's commands get the container's hostname and the image's environment; on this
    machine's engine both are known without inspecting the container (its hostname is its ID's
    first 12 digits, its environment the image's, kept from one inspect of the image): what
    the container's own inspect says, and what ``hostname`` says inside it."""
    import docker.api.client

    asked: list[str] = []
    inspect = docker.api.client.APIClient.inspect_container

    def recording(self, container, *args, **kwargs):
        asked.append(container)
        return inspect(self, container, *args, **kwargs)

    monkeypatch.setattr(docker.api.client.APIClient, "inspect_container", recording)
    ws = _workspace(run, base_image, spawner=True)
    try:
        assert asked == [], "the container was inspected to start it"
        done = run(ws.exec(["sh", "-c", 'echo "$HOSTNAME"; hostname; env'], user=AGENT))
        config = inspect(docker_client.api, ws.container_id)["Config"]
    finally:
        run(ws.close())
    named, hostname, *environment = done.stdout.decode().splitlines()
    assert named == hostname == config["Hostname"] == ws.container_id[:12]
    assert config["Env"] and set(config["Env"]) <= set(environment)


def test_a_docker_client_configs_proxies_still_reach_the_spawners_commands(base_image, run, tmp_path, monkeypatch):
    """Where the Docker client's config names proxies, the SDK puts them in each container's
    environment: the container is then inspected, as before, and its commands get them (found
    by review: taken from the image alone, they were lost)."""
    import json

    config = tmp_path / "docker-config"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"proxies": {"default": {"httpProxy": "http://127.0.0.1:9"}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    ws = _workspace(run, base_image, spawner=True)
    try:
        done = run(ws.exec(["sh", "-c", "env"], user=AGENT))
    finally:
        run(ws.close())
    assert {"HTTP_PROXY=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9"} <= set(done.stdout.decode().splitlines())
