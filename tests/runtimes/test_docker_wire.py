"""The exec endpoints spoken straight over the engine's unix socket (``wire.ExecWire``).

Against the real engine: the workspace's exec goes this way on a local socket (the
conformance suite proves the behaviour through it); here the wire's own edges: the
daemon's exit code and every output byte, its refusals in its own words, a dropped
kept-alive connection, an engine that is not there.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from engine.errors import WorkspaceError
from engine.runtimes.docker.exec import default_env, run_exec, sdk_call
from engine.runtimes.docker.placement import host_lost
from engine.runtimes.docker.stream import Demuxer
from engine.runtimes.docker.wire import ExecWire, WireLost, wire_for

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def container(docker_client, base_image):
    box = docker_client.containers.run(
        base_image, ["sleep", "infinity"], detach=True, network_disabled=True, name=f"wire-{uuid.uuid4().hex[:8]}"
    )
    yield box.id
    box.remove(force=True)


@pytest.fixture(scope="module")
def wire(docker_client):
    wire = wire_for(docker_client.api)
    assert wire is not None, "a client of the local engine's unix socket gets a wire"
    return wire


def test_an_exec_over_the_wire_streams_every_byte_and_the_daemon_records_its_exit_code(wire, container):
    exec_id = wire.create(
        container,
        {"AttachStdout": True, "AttachStderr": True, "Cmd": ["sh", "-c", "seq 1 20000; echo oops >&2; exit 7"]},
    )
    stream = wire.start(exec_id, tty=False)
    out, err, demux = bytearray(), bytearray(), Demuxer()
    try:
        while chunk := stream.recv():
            for stream_id, payload in demux.feed(chunk):
                (out if stream_id == 1 else err).extend(payload)
    finally:
        stream.close()
    assert out.decode().split() == [str(n) for n in range(1, 20001)] and err == b"oops\n"
    info = wire.inspect(exec_id)
    while info["Running"]:  # the daemon may record the end a moment after EOF
        info = wire.inspect(exec_id)
    assert info["ExitCode"] == 7


def test_a_local_engines_exec_goes_over_the_wire_and_not_through_the_sdk(docker_client, container, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the SDK was asked")

    for name in ("exec_create", "exec_start", "exec_inspect"):
        monkeypatch.setattr(docker_client.api, name, refuse)
    result = asyncio.run(
        run_exec(
            docker_client.api,
            container,
            ["sh", "-c", "echo out; echo err >&2; exit 3"],
            user=0,
            cwd="/tmp",
            env=default_env(0),
            timeout=30,
            stdin=None,
            max_output=1024,
        )
    )
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")


def test_the_engines_refusal_is_a_workspace_error_in_its_own_words(docker_client):
    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorkspaceError, match=f"No such container: {missing}"):
        asyncio.run(
            run_exec(
                docker_client.api,
                missing,
                ["true"],
                user=0,
                cwd=None,
                env=default_env(0),
                timeout=10,
                stdin=None,
                max_output=1024,
            )
        )


def test_a_kept_alive_connection_the_engine_dropped_is_replaced_without_a_failure(wire, container):
    exec_id = wire.create(container, {"AttachStdout": True, "Cmd": ["true"]})
    wire.inspect(exec_id)  # leaves a kept-alive connection behind
    for conn in wire._idle:
        assert conn.sock is not None
        conn.sock.shutdown(2)  # as if the engine had closed it while it sat idle
    assert wire.inspect(exec_id)["ID"] == exec_id


def test_an_engine_that_is_not_there_reads_as_a_lost_host(tmp_path):
    gone = ExecWire(str(tmp_path / "docker.sock"), "1.41", 5, {}, None)
    with pytest.raises(WorkspaceError) as caught:
        asyncio.run(sdk_call("exec inspect", gone.inspect, "0" * 64))
    assert isinstance(caught.value.__cause__, WireLost) and host_lost(caught.value.__cause__)


def test_an_engine_over_tcp_keeps_the_sdk():
    import docker

    assert wire_for(docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41")) is None
