"""Checks of isolation: no network but loopback, ``network=True``, and the read-only bridge."""

from __future__ import annotations

import asyncio
import os
import shutil

from engine.interfaces import Workspace
from engine.runtimes.conformance._core import Target, check, expect


async def _interfaces(ws: Workspace) -> tuple[set[str], set[str]]:
    sys_net = (await ws.exec(["ls", "/sys/class/net"])).stdout.decode().split()
    dev = (await ws.exec(["cat", "/proc/net/dev"])).stdout.decode().splitlines()[2:]
    return set(sys_net), {line.split(":")[0].strip() for line in dev}


@check()
async def check_network_false_leaves_only_loopback(ws: Workspace) -> None:
    """Without network, /sys/class/net and /proc/net/dev list only lo."""
    found = await _interfaces(ws)
    expect(found == ({"lo"}, {"lo"}), f"interfaces (sysfs, /proc/net/dev) are {found}, expected only lo")


# perl-base's IO::Socket::INET: a listener and a client by the name "localhost", in one process.
_LOOPBACK = (
    'use IO::Socket::INET; my $l = IO::Socket::INET->new(Listen => 1, LocalAddr => "localhost:0")'
    ' or die "listen: $@\\n"; my $c = IO::Socket::INET->new(PeerAddr => "localhost:" . $l->sockport)'
    ' or die "connect: $@\\n"; print $l->accept ? "ok\\n" : "accept: $!\\n";'
)


@check()
async def check_loopback_answers_and_localhost_resolves_without_network(ws: Workspace) -> None:
    """Without network a test suite can still serve and connect on loopback by the name
    localhost (Docker writes no /etc/hosts for a container whose network is disabled)."""
    result = await ws.exec(["perl", "-e", _LOOPBACK], timeout=30)
    expect(
        result.exit_code == 0 and result.stdout == b"ok\n",
        f"a loopback server at localhost: exit {result.exit_code}, {(result.stdout + result.stderr)[-300:]!r}",
    )


@check(fresh=True)
async def check_network_true_has_a_real_interface(target: Target) -> None:
    """With network=True the workspace says so and has an interface besides lo."""
    async with target.provision(network=True) as ws:
        expect(ws.network is True, f"ws.network is {ws.network!r} for network=True")
        found = set((await ws.exec(["ls", "/sys/class/net"])).stdout.decode().split())
    expect(found - {"lo"}, f"network=True, yet the only interfaces are {sorted(found)}")


# perl-base is in every Debian image (and on the host the local runtime shares): a unix-socket
# client that needs nothing installed. Prints what the server answers.
_SOCKET_CLIENT = (
    'use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!\\n";'
    ' print $s "ping\\n"; my $line = <$s>; print $line;'
)


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
            expect(
                wrote.exit_code != 0 and not os.path.exists(f"{host_dir}/planted"),
                "root inside the workspace could write into the bridge",
            )
            expect((await _interfaces(ws)) == ({"lo"}, {"lo"}), "a bridged workspace must still have no network")
    finally:
        server.cancel()
        listener.close()
        shutil.rmtree(host_dir, ignore_errors=True)
