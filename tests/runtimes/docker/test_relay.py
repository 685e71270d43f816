"""The bridge relayed over the exec channel (``runtime.bridge=relay``, what a remote Docker host
always gets): real containers on this machine's engine, with the bind mount replaced by the
relay's volume and sidecar, so nothing of the host's bridge directory is mounted.

One module workspace serves the connection tests; the lifecycle tests make their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid

import docker
import pytest

from engine.interfaces import AGENT_UID, BRIDGE_PATH
from engine.runtimes.docker.relay import BridgeRelay
from engine.runtimes.docker.runtime import DockerRuntime
from engine.runtimes.owner import LABEL_OWNER_PID, LABEL_OWNER_STARTED, owner_labels

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# perl-base's IO::Socket::UNIX, as the agent: send $ARGV[1] bytes, half-close, read to EOF, and
# say how much came back and whether it is what was sent, upper-cased (``upper_echo``).
CLIENT = r"""
use IO::Socket::UNIX; use Socket qw(SHUT_WR);
my ($path, $size) = @ARGV;
my $s = IO::Socket::UNIX->new(Peer => $path) or die "connect $path: $!\n";
my $out = substr("0123456789abcdef" x ($size / 16 + 1), 0, $size);
print $s $out; $s->flush; shutdown($s, SHUT_WR);
my ($in, $buf) = ('', '');
while (sysread($s, $buf, 65536)) { $in .= $buf }
print length($in), " ", $in eq uc($out) ? "upper" : "other", "\n";
"""
# One try, no retry: the socket must be there when the command starts.
ONE_SHOT = (
    'use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!\\n";'
    ' print $s "now\\n"; print scalar <$s>;'
)
# Waits for a socket that is not there yet (its path reappearing is the condition), then talks.
LATE_CLIENT = r"""
use IO::Socket::UNIX;
my $s;
for (1 .. 600) { last if $s = IO::Socket::UNIX->new(Peer => $ARGV[0]); select(undef, undef, undef, 0.05) }
$s or die "no socket at $ARGV[0]: $!\n";
print $s "late\n"; print scalar <$s>;
"""


async def upper_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads to the client's EOF, answers it all upper-cased, closes."""
    data = await reader.read(-1)
    writer.write(data.upper())
    await writer.drain()
    writer.close()


async def line_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"host got " + await reader.readline())
    await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def serving(path: str, handler):
    server = await asyncio.start_unix_server(handler, path=path)
    os.chmod(path, 0o666)
    try:
        yield server
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def new_bridge() -> str:
    bridge = tempfile.mkdtemp(prefix="crucible-bridge-", dir="/tmp")
    os.chmod(bridge, 0o755)
    return bridge


def leftovers(client: docker.DockerClient, run_id: str) -> list[str]:
    """Containers and volumes of ``run_id`` still on the engine."""
    label = f"crucible.run_id={run_id}"
    containers = [c["Names"][0] for c in client.api.containers(all=True, filters={"label": label})]
    volumes = [v["Name"] for v in client.api.volumes(filters={"label": label}).get("Volumes") or []]
    return containers + volumes


@pytest.fixture(scope="module")
def bridge():
    path = new_bridge()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def ws(base_image, bridge, run):
    """A relayed workspace, started before anything is in its bridge."""
    workspace = DockerRuntime(bridge="relay").provision(
        base_image, run_id=f"relay-{uuid.uuid4().hex[:8]}", network=False, purpose="agent", bridge=bridge
    )
    run(workspace.__aenter__())
    yield workspace
    run(workspace.close())


def test_a_socket_made_after_the_workspace_started_answers_the_agent_inside(ws, bridge, run):
    async def scenario():
        async with serving(f"{bridge}/echo.sock", line_echo):
            got = await ws.exec(["perl", "-e", ONE_SHOT, f"{BRIDGE_PATH}/echo.sock"], user=AGENT_UID, timeout=60)
        listing = await ws.exec(["ls", BRIDGE_PATH])
        return got, listing

    got, listing = run(scenario())
    assert (got.exit_code, got.stdout) == (0, b"host got now\n"), got
    assert b"echo.sock" not in listing.stdout  # the host's socket went, so did its mirror


def test_a_socket_made_while_a_command_waits_for_it_is_picked_up(ws, bridge, run):
    """The command starts before the socket exists; the host's watch on its bridge mirrors it."""

    async def scenario():
        process = await ws.open_process(["perl", "-e", LATE_CLIENT, f"{BRIDGE_PATH}/watched.sock"], user=AGENT_UID)
        async with serving(f"{bridge}/watched.sock", line_echo):
            output = b""
            while chunk := await process.read():
                output += chunk
            return await process.wait(timeout=60), output

    code, output = run(scenario())
    assert (code, output) == (0, b"host got late\n")


def test_concurrent_connections_carry_a_megabyte_each_way(ws, bridge, run):
    size = 1 << 20

    async def scenario():
        async with serving(f"{bridge}/big.sock", upper_echo):
            return await asyncio.gather(
                *(
                    ws.exec(["perl", "-e", CLIENT, f"{BRIDGE_PATH}/big.sock", str(size)], user=AGENT_UID, timeout=120)
                    for _ in range(6)
                )
            )

    for got in run(scenario()):
        assert (got.exit_code, got.stdout) == (0, f"{size} upper\n".encode()), got


# Connects, says so, reads nothing until a line comes on stdin, then reads to EOF and counts.
STALLED_CLIENT = r"""
use IO::Socket::UNIX; $| = 1;
my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!\n";
print "connected\n"; my $go = <STDIN>;
my ($total, $buf) = (0, '');
while (my $n = sysread($s, $buf, 65536)) { $total += $n }
print "$total\n";
"""


def test_a_client_that_stops_reading_holds_back_only_its_own_connection(ws, bridge, run):
    """A connection's bytes in flight are bounded (the relay's window): the host's server of a
    stalled client is held back at about a megabyte, while another connection works."""
    flood, sent = 8 << 20, []

    async def flooder(reader, writer):
        for _ in range(flood // 65536):
            writer.write(b"f" * 65536)
            await writer.drain()
            sent.append(65536)
        writer.close()

    async def scenario():
        async with serving(f"{bridge}/flood.sock", flooder), serving(f"{bridge}/echo2.sock", line_echo):
            stalled = await ws.open_process(["perl", "-e", STALLED_CLIENT, f"{BRIDGE_PATH}/flood.sock"], user=AGENT_UID)
            first = await stalled.read()
            other = await ws.exec(["perl", "-e", ONE_SHOT, f"{BRIDGE_PATH}/echo2.sock"], user=AGENT_UID, timeout=60)
            held_at = sum(sent)
            await stalled.write(b"go\n")
            rest = b""
            while chunk := await stalled.read():
                rest += chunk
            return first, other, held_at, rest, await stalled.wait(timeout=60)

    first, other, held_at, rest, code = run(scenario())
    assert first == b"connected\n" and other.stdout == b"host got now\n", (first, other)
    assert held_at <= 3 << 20, f"the stalled client's server got {held_at} bytes out"
    assert (code, rest) == (0, f"{flood}\n".encode())


def test_files_in_the_bridge_are_copied_in_and_follow_the_host(ws, bridge, run):
    path = f"{bridge}/git-relay.py"
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho first\n")
    os.chmod(path, 0o755)
    first = run(ws.exec([f"{BRIDGE_PATH}/git-relay.py"], user=AGENT_UID))
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho second, longer\n")
    second = run(ws.exec([f"{BRIDGE_PATH}/git-relay.py"], user=AGENT_UID))
    os.unlink(path)
    gone = run(ws.exec(["test", "-e", f"{BRIDGE_PATH}/git-relay.py"]))
    assert (first.stdout, second.stdout, gone.exit_code) == (b"first\n", b"second, longer\n", 1)


def test_nobody_inside_can_write_into_the_bridge_and_there_is_still_no_network(ws, bridge, run):
    async def scenario():
        async with serving(f"{bridge}/kept.sock", line_echo):
            return [
                await ws.exec(["sh", "-c", f"echo x > {BRIDGE_PATH}/planted"], user=user) for user in (0, AGENT_UID)
            ] + [
                await ws.exec(["rm", "-f", f"{BRIDGE_PATH}/kept.sock"]),
                await ws.exec(["cat", "/proc/net/dev"]),
            ]

    *writes, remove, net = run(scenario())
    assert all(w.exit_code != 0 and b"Read-only file system" in w.stderr for w in writes), writes
    assert remove.exit_code != 0, remove
    assert [line.split(":")[0].strip() for line in net.stdout.decode().splitlines()[2:]] == ["lo"]


def test_teardown_and_a_cancelled_start_leave_no_sidecar_or_volume(base_image, docker_client, run, monkeypatch):
    runtime = DockerRuntime(bridge="relay")
    bridge = new_bridge()
    closed, cancelled = f"relay-closed-{uuid.uuid4().hex[:8]}", f"relay-cancel-{uuid.uuid4().hex[:8]}"

    async def closed_run():
        async with runtime.provision(base_image, run_id=closed, network=False, purpose="agent", bridge=bridge) as ws:
            assert ws.bridge == BRIDGE_PATH
            return len(leftovers(docker_client, closed))

    in_sync = asyncio.Event()
    synced = BridgeRelay.sync

    async def stuck_sync(self):  # the relay is up (sidecar, volume, exec stream): cancel now
        in_sync.set()
        await asyncio.Event().wait()

    async def cancelled_run():
        ws = runtime.provision(base_image, run_id=cancelled, network=False, purpose="agent", bridge=bridge)
        monkeypatch.setattr(BridgeRelay, "sync", stuck_sync)
        starting = asyncio.ensure_future(ws.__aenter__())
        await in_sync.wait()
        made = len(leftovers(docker_client, cancelled))
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        monkeypatch.setattr(BridgeRelay, "sync", synced)
        return made

    try:
        made = run(closed_run())
        made_before_cancel = run(cancelled_run())
    finally:
        shutil.rmtree(bridge, ignore_errors=True)
    assert made == made_before_cancel == 3  # the workspace, its sidecar, their volume
    assert leftovers(docker_client, closed) == leftovers(docker_client, cancelled) == []


def test_the_reaper_removes_a_dead_owners_bridge_volume(docker_client):
    from engine.runtimes.docker.reaper import reap_orphans

    dead = {**owner_labels(), LABEL_OWNER_STARTED: "1"}  # this pid, another start: a dead owner
    alive = owner_labels()
    names = [f"crucible-reaper-vol-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for name, labels in zip(names, (dead, alive), strict=True):
        docker_client.volumes.create(name=name, labels=labels)
    try:
        reaped = reap_orphans(docker_client)
        left = {v.name for v in docker_client.volumes.list(filters={"label": LABEL_OWNER_PID})}
    finally:
        for name in names:
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.volumes.get(name).remove(force=True)
    assert names[0] in reaped and names[0] not in left
    assert names[1] in left  # its owner (this process) lives


def test_a_workspace_on_a_listed_docker_host_relays_its_bridge(base_image, docker_client, run):
    """A listed host (``runtime.hosts``; here this machine's own engine by its socket) gets no
    bind mount at all: its bridge is the relay's, whatever ``runtime.bridge`` says."""
    runtime = DockerRuntime(hosts=[{"url": "unix:///var/run/docker.sock"}])
    bridge = new_bridge()

    async def scenario():
        async with runtime.provision(
            base_image, run_id=f"relay-host-{uuid.uuid4().hex[:8]}", network=False, purpose="agent", bridge=bridge
        ) as ws:
            async with serving(f"{bridge}/echo.sock", line_echo):
                got = await ws.exec(["perl", "-e", ONE_SHOT, f"{BRIDGE_PATH}/echo.sock"], user=AGENT_UID, timeout=60)
            mounts = docker_client.api.inspect_container(ws.container_id)["Mounts"]
            return ws.remote, got, mounts

    try:
        remote, got, mounts = run(scenario())
    finally:
        shutil.rmtree(bridge, ignore_errors=True)
    assert remote and (got.exit_code, got.stdout) == (0, b"host got now\n"), got
    assert [(m["Type"], m["Destination"], m["RW"]) for m in mounts] == [("volume", BRIDGE_PATH, False)]


def test_a_relay_lost_mid_run_fails_the_next_command_as_infrastructure(base_image, docker_client, run):
    """Its sidecar gone (as with a remote host's engine), the next command that needs the bridge
    raises ``InfrastructureError`` naming the relay, never hangs; closing still cleans up."""
    from engine.errors import InfrastructureError

    bridge, run_id = new_bridge(), f"relay-lost-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with DockerRuntime(bridge="relay").provision(
            base_image, run_id=run_id, network=False, purpose="agent", bridge=bridge
        ) as ws:
            sidecar = f"{ws.name}-bridge"
            docker_client.api.remove_container(sidecar, force=True)
            async with serving(f"{bridge}/late.sock", line_echo):
                with pytest.raises(InfrastructureError, match=sidecar) as raised:
                    await ws.exec(["true"])
            return raised.value

    try:
        error = run(scenario())
    finally:
        shutil.rmtree(bridge, ignore_errors=True)
    assert error.phase == "agent"
    assert leftovers(docker_client, run_id) == []
