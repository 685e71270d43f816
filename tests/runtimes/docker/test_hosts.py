"""``runtime.hosts``: runs placed on remote Docker hosts within their slots, images moved to the
host that runs them, a host that goes away turned into ``InfrastructureError``.

Two hosts simulated on this machine (``two_hosts.py``): a second dockerd on its own socket,
data root and bridge ("d2"), and an ``ssh://`` host reached through the real OpenSSH client
(an asyncssh server on loopback in front of this machine's engine). The host-failure test
stops d2, so it runs last.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import pytest

from engine.config.compose import compose_config, to_typed
from engine.errors import ConfigError, InfrastructureError
from engine.runtimes.docker import placement, stream
from engine.runtimes.docker.runtime import DockerRuntime, DockerWorkspace
from engine.runtimes.owner import LABEL_OWNER_PID, owner_labels

PROJECT = Path(__file__).resolve().parents[3]


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _run_id() -> str:
    return f"hosts-{uuid.uuid4().hex[:8]}"


async def _wait_until(condition, what: str, timeout: float = 60) -> None:
    """Poll a cheap in-process condition (not a guess at how long something takes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


# -- config --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("{url:'http://h:2375',slots:1}", "runtime.hosts[0].url: unknown scheme"),
        ("{url:'unix:///x.sock',slots:0}", "runtime.hosts[0].slots must be an integer >= 1"),
        ("{slots:2}", "runtime.hosts[0].url is missing"),
        ("{url:'ssh://u@h',tls_verify:true}", "runtime.hosts[0].tls_verify: TLS settings apply to tcp://"),
        ("{url:'unix:///x.sock',slot:2}", "unknown config key 'runtime.hosts[0].slot'"),
    ],
)
def test_bad_hosts_entry_fails_at_compose_time_naming_the_key(entry, named):
    with pytest.raises(ConfigError) as caught:
        to_typed(compose_config(["task=sample/last_page", f"runtime.hosts=[{entry}]"]))
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


def test_bad_hosts_entry_is_one_line_on_stderr_from_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli.conformance", "runtime=docker", "runtime.hosts=[{url:'ftp://h',slots:1}]"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "runtime.hosts[0].url" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# -- hosts ---------------------------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.slow
def test_missing_image_is_moved_to_a_host_once_and_then_reused(d2, base_image, run, caplog):
    remote = docker.DockerClient(base_url=d2.url, timeout=120)
    if any(base_image in image.tags for image in remote.images.list()):
        remote.images.remove(base_image, force=True)
    caplog.set_level(logging.INFO, logger="engine.runtimes.docker.placement")

    async def two_runs_at_once(runtime: DockerRuntime) -> list[str | None]:
        workspaces = [runtime.provision(base_image, run_id=_run_id(), network=False, purpose="test") for _ in "ab"]
        try:
            await asyncio.gather(*(ws.__aenter__() for ws in workspaces))
            return [ws.host for ws in workspaces]
        finally:
            await asyncio.gather(*(ws.close() for ws in workspaces))

    assert run(two_runs_at_once(DockerRuntime(hosts=[{"url": d2.url, "slots": 2}]))) == [d2.url, d2.url]
    moves = [r.getMessage() for r in caplog.records if r.getMessage().startswith("moved image")]
    assert len(moves) == 1 and base_image in moves[0] and d2.url in moves[0], moves
    assert remote.images.get(base_image)
    caplog.clear()
    run(two_runs_at_once(DockerRuntime(hosts=[{"url": d2.url, "slots": 2}])))  # a fresh pool: asks the host
    assert not [r for r in caplog.records if r.getMessage().startswith("moved image")]


@pytest.mark.docker
@pytest.mark.slow
def test_a_listed_host_is_rid_of_dead_owners_containers_when_first_used(d2, base_image):
    remote = docker.DockerClient(base_url=d2.url, timeout=120)
    orphan = remote.containers.create(  # the image is there: the test above moved it
        base_image, ["true"], labels={**owner_labels(), LABEL_OWNER_PID: str(dead_pid())}
    )
    runtime = DockerRuntime(hosts=[{"url": d2.url, "slots": 1}])
    assert runtime.pool is not None
    runtime.pool.client(0)
    with pytest.raises(docker.errors.NotFound):
        remote.containers.get(orphan.id)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("which", ["unix", "tcp+tls", "ssh"])
def test_workspace_on_each_host_runs_exec_and_files_with_no_bind_mounts(which, request, base_image, run):
    if which == "ssh":
        entry = {"url": request.getfixturevalue("ssh").url}
    else:
        d2 = request.getfixturevalue("d2")
        entry = {"url": d2.url} if which == "unix" else {"url": d2.tcp_url, **d2.tls}
    runtime = DockerRuntime(hosts=[{**entry, "slots": 1}])

    async def use() -> None:
        async with runtime.provision(base_image, run_id=_run_id(), network=False, purpose="test") as ws:
            assert ws.remote and ws.host == entry["url"]
            piped = await ws.exec(["cat"], stdin=b"through " + which.encode())
            assert (piped.exit_code, piped.stdout) == (0, b"through " + which.encode())
            await ws.write_file("/tmp/made/here.txt", b"written")
            assert await ws.read_file("/tmp/made/here.txt") == b"written"
            with pytest.raises(FileNotFoundError):
                await ws.read_file("/tmp/not-there")
            hosts_file = await ws.read_file("/etc/hosts")  # written in, as no host file can be bound
            assert hosts_file.startswith(b"127.0.0.1\tlocalhost")
            attrs = await asyncio.to_thread(ws.client.api.inspect_container, ws.container_id)
            assert attrs["Mounts"] == []
            late = await ws.exec(["sleep", "30"], timeout=0.5)
            assert late.timed_out and late.exit_code == 124

    run(use())


@pytest.mark.docker
@pytest.mark.slow
def test_runs_spread_over_hosts_within_their_slots_and_a_fourth_waits_for_a_free_one(d2, ssh, base_image, run):
    runtime = DockerRuntime(hosts=[{"url": d2.url, "slots": 1}, {"url": ssh.url, "slots": 2}])
    pool = runtime.pool
    assert pool is not None
    first = _run_id()

    async def scenario() -> None:
        # Run ``first`` has two workspaces (agent and grading): one slot, one host.
        workspaces = [runtime.provision(base_image, run_id=first, network=False, purpose=p) for p in ("agent", "grade")]
        workspaces += [runtime.provision(base_image, run_id=_run_id(), network=False, purpose="agent") for _ in "ab"]
        started = await asyncio.gather(*(ws.__aenter__() for ws in workspaces))
        try:
            assert started[0].host == started[1].host
            runs_on = {url: {ws.run_id for ws in started if ws.host == url} for url in (d2.url, ssh.url)}
            assert [len(runs_on[d2.url]), len(runs_on[ssh.url])] == [1, 2], runs_on
            fourth = runtime.provision(base_image, run_id=_run_id(), network=False, purpose="agent")
            starting = asyncio.ensure_future(fourth.__aenter__())
            await _wait_until(lambda: pool.waiting == 1, "the fourth run to wait for a slot")
            assert not starting.done() and fourth.host is None
            on_d2 = [ws for ws in started if ws.host == d2.url]
            await asyncio.gather(*(ws.close() for ws in on_d2))  # the run on d2 ends: its slot frees
            await asyncio.wait_for(starting, 120)
            assert fourth.host == d2.url
            await fourth.close()
        finally:
            await asyncio.gather(*(ws.close() for ws in started))

    run(scenario())


@pytest.mark.docker
@pytest.mark.slow
def test_a_wait_for_a_slot_ends_at_once_on_cancel(ssh, base_image, run):
    runtime = DockerRuntime(hosts=[{"url": ssh.url, "slots": 1}])
    assert runtime.pool is not None

    async def scenario() -> None:
        async with runtime.provision(base_image, run_id=_run_id(), network=False, purpose="agent"):
            waiting = runtime.provision(base_image, run_id=_run_id(), network=False, purpose="agent")
            starting = asyncio.ensure_future(waiting.__aenter__())
            await _wait_until(lambda: runtime.pool.waiting == 1, "the second run to wait")
            starting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(starting, 30)
            assert waiting._state == "closed" and waiting.container_id is None
        assert runtime.pool._used == [0]  # both slots given back

    run(scenario())


@pytest.mark.docker
@pytest.mark.slow
def test_an_exec_stream_to_a_tcp_host_that_goes_silent_ends_and_a_quiet_live_one_does_not(
    d2, base_image, run, monkeypatch
):
    """A host lost without a word (a power cut, a partition: its packets dropped here, on its TCP
    port, by iptables) ends a long-lived exec stream by TCP keepalive, made 1 s idle, 1 s apart,
    2 probes here; a quiet stream to a live host outlives several probes."""
    monkeypatch.setattr(stream, "KEEPALIVE", (1, 1, 2))
    port = d2.tcp_url.rsplit(":", 1)[1]
    drop = ["INPUT", "-i", "lo", "-p", "tcp", "--dport", port, "-j", "DROP"]
    runtime = DockerRuntime(hosts=[{"url": d2.tcp_url, **d2.tls, "slots": 1}])

    async def scenario() -> None:
        async with runtime.provision(base_image, run_id=_run_id(), network=False, purpose="test") as ws:
            quiet = await ws.open_process(["sh", "-c", "sleep 5; echo still here"])
            assert await asyncio.wait_for(quiet.read(), 60) == b"still here\n"  # ~3 probes answered
            held = await ws.open_process(["cat"])
            await held.write(b"ping\n")
            assert await asyncio.wait_for(held.read(), 60) == b"ping\n"
            subprocess.run(["iptables", "-I", *drop], check=True)
            try:
                # Without keepalive this read would wait for the kernel's two hours.
                assert await asyncio.wait_for(held.read(), 60) == b""
            finally:
                subprocess.run(["iptables", "-D", *drop], check=True)

    run(scenario())


@pytest.mark.docker
@pytest.mark.slow
def test_stopped_host_turns_the_next_exec_into_an_infrastructure_error_and_new_runs_go_elsewhere(
    d2, ssh, base_image, run, monkeypatch
):
    runtime = DockerRuntime(hosts=[{"url": d2.url, "slots": 1}, {"url": ssh.url, "slots": 1}])

    async def scenario() -> None:
        doomed: DockerWorkspace = await runtime.provision(
            base_image, run_id=_run_id(), network=False, purpose="agent"
        ).__aenter__()
        try:
            assert doomed.host == d2.url  # a tie goes to the first listed
            assert (await doomed.exec(["true"])).exit_code == 0
            await asyncio.to_thread(d2.stop)
            with pytest.raises(InfrastructureError) as caught:
                await doomed.exec(["true"])
            assert caught.value.host == d2.url and "unreachable" in str(caught.value)
            with pytest.raises(InfrastructureError):
                await doomed.read_file("/etc/hostname")
            async with runtime.provision(base_image, run_id=_run_id(), network=False, purpose="agent") as moved:
                assert moved.host == ssh.url
                assert (await moved.exec(["true"])).exit_code == 0
        finally:
            await doomed.close()  # its host is gone: a warning, not an error
        only_d2 = DockerRuntime(hosts=[{"url": d2.url, "slots": 1}])
        with pytest.raises(InfrastructureError) as caught:
            async with only_d2.provision(base_image, run_id=_run_id(), network=False, purpose="agent"):
                pass
        assert caught.value.host == d2.url and caught.value.phase == "provision"
        # Restarted, it is pinged back in once its retry time has passed (made 0 here).
        await asyncio.to_thread(d2.start)
        monkeypatch.setattr(placement, "DOWN_RETRY", 0.0)
        runtime.pool.mark_down(0, "still counted down")
        async with runtime.provision(base_image, run_id=_run_id(), network=False, purpose="agent") as back:
            assert back.host == d2.url

    run(scenario())
