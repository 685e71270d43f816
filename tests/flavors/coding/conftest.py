"""The calc task (tests/coding_task.py) as the coding-env test modules share it: its repo and
its image from Dockerfile.hud, each built once per module, and started workspaces of it."""

from __future__ import annotations

import uuid

import coding_task as ct
import pytest

from engine.runtimes.docker.runtime import DockerRuntime


@pytest.fixture(scope="module")
def repo(request, tmp_path_factory) -> ct.TaskRepo:
    return ct.build_repo(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "repo")


@pytest.fixture(scope="module")
def image(docker_client, base_image, repo, tmp_path_factory) -> str:
    return ct.build_image(docker_client, base_image, repo, tmp_path_factory.mktemp("calc-ctx"))


@pytest.fixture
def workspace(image, run):
    """A factory of started workspaces (of ``image`` unless another is named), all removed
    when the test ends."""
    runtime, started = DockerRuntime(), []

    def make(purpose: str = "agent", image: str = image):
        ws = runtime.provision(image, run_id=f"calc-{uuid.uuid4().hex[:8]}", network=False, purpose=purpose)
        run(ws.__aenter__())
        started.append(ws)
        return ws

    yield make
    for ws in started:
        run(ws.close())
