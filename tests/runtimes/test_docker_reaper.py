"""Containers outlive no owner: SIGTERM cleans up in-process, SIGKILL is swept by the reaper.

Owners here are real child processes that provision a real workspace; the reaper runs
against the real engine. Other owners' containers (a live process, another host) are
created bare (not started: the reaper sees stopped containers too) and must survive.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import pytest

from engine.runtimes.docker.reaper import LABEL_RUN_ID, reap_orphans
from engine.runtimes.docker.runtime import DockerRuntime
from engine.runtimes.owner import LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_OWNER_STARTED, owner_labels

pytestmark = pytest.mark.docker

PROJECT = Path(__file__).resolve().parents[2]

# The CLI's convention: SIGTERM becomes KeyboardInterrupt, so `finally` blocks run.
OWNER = """
import asyncio, signal, sys
from engine.runtimes.docker.runtime import DockerRuntime

signal.signal(signal.SIGTERM, signal.default_int_handler)

async def main():
    async with DockerRuntime().provision(sys.argv[1], run_id=sys.argv[2], network=False, purpose="test") as ws:
        print(ws.name, flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.api.inspect_container(name)
        return True
    except docker.errors.NotFound:
        return False


@pytest.fixture
def owner(base_image, docker_client):
    """Start a child process that provisions a workspace; yield (process, container name)."""
    children: list[subprocess.Popen] = []
    names: list[str] = []

    def start() -> tuple[subprocess.Popen, str]:
        child = subprocess.Popen(
            [sys.executable, "-c", OWNER, base_image, f"reaper-{uuid.uuid4().hex[:8]}"],
            cwd=PROJECT,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready, "owner process did not report its container within 60 s"
        name = child.stdout.readline().strip()
        assert name and exists(docker_client, name)
        names.append(name)
        return child, name

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()
    for name in names:
        if exists(docker_client, name):
            docker_client.api.remove_container(name, force=True)


@pytest.fixture
def bare_containers(base_image, docker_client):
    """Create (not start) containers with given owner labels; removed at the end."""
    made: list[str] = []

    def create(labels: dict[str, str]) -> str:
        container = docker_client.containers.create(
            base_image,
            ["sleep", "infinity"],
            network_mode="none",
            labels={LABEL_RUN_ID: f"reaper-{uuid.uuid4().hex[:8]}", **labels},
        )
        made.append(container.name)
        return container.name

    yield create
    for name in made:
        if exists(docker_client, name):
            docker_client.api.remove_container(name, force=True)


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_sigterm_to_the_owner_removes_its_container(owner, docker_client):
    child, name = owner()
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=30)
    assert not exists(docker_client, name)


def test_reaper_removes_the_container_of_a_sigkilled_owner(owner, docker_client):
    child, name = owner()
    child.kill()  # SIGKILL: no finally runs, the container stays behind
    child.wait(timeout=30)
    assert exists(docker_client, name)
    reaped = reap_orphans(docker_client)
    assert name in reaped and not exists(docker_client, name)


def test_reaper_leaves_live_owners_and_other_hosts_alone(base_image, docker_client, bare_containers):
    async def scenario():
        async with DockerRuntime().provision(
            base_image, run_id=f"reaper-{uuid.uuid4().hex[:8]}", network=False, purpose="test"
        ) as ws:
            reaped = reap_orphans(docker_client)
            return ws.name, reaped, exists(docker_client, ws.name)

    other_host = bare_containers(
        {**owner_labels(), LABEL_OWNER_HOST: "another-host.invalid", LABEL_OWNER_PID: str(dead_pid())}
    )
    mine, reaped, still_there = asyncio.run(scenario())
    assert mine not in reaped and still_there
    assert other_host not in reaped and exists(docker_client, other_host)


def test_reaper_treats_a_reused_pid_as_a_dead_owner(docker_client, bare_containers):
    # Our own pid, but a start time that is not ours: the recorded owner is gone and
    # this process merely inherited its pid.
    labels = {**owner_labels(), LABEL_OWNER_STARTED: "1"}
    assert labels[LABEL_OWNER_PID] == str(os.getpid()) and labels[LABEL_OWNER_HOST] == socket.gethostname()
    impostor = bare_containers(labels)
    dead = bare_containers({**owner_labels(), LABEL_OWNER_PID: str(dead_pid())})
    reap_orphans(docker_client)
    assert not exists(docker_client, impostor)
    assert not exists(docker_client, dead)


def test_two_reapers_at_once_remove_every_orphan_and_warn_of_none(docker_client, bare_containers, caplog):
    """Commands started together reap together: a removal the other reaper has in progress (409)
    is a container gone, never a warning in a command's output."""
    import threading

    orphans = [bare_containers({**owner_labels(), LABEL_OWNER_PID: str(dead_pid())}) for _ in range(12)]
    together = threading.Barrier(2)
    reaped: list[list[str]] = []

    def reap() -> None:
        together.wait()
        reaped.append(reap_orphans(docker.from_env(timeout=60)))

    threads = [threading.Thread(target=reap) for _ in range(2)]
    with caplog.at_level("WARNING", logger="engine.runtimes.docker.reaper"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert not [r.getMessage() for r in caplog.records if r.name == "engine.runtimes.docker.reaper"]
    # Every orphan gone; most by these two (a command of another test may reap some first).
    assert not any(exists(docker_client, name) for name in orphans)
    assert len(reaped) == 2 and {name for names in reaped for name in names} & set(orphans)
