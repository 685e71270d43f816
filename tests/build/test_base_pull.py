"""A base image that is not here is pulled from its registry (engine/build/images.py, ``_pull``),
and where no registry gives it the error says so plainly, in one line.

The registry is a real one: Debian's ``docker-registry`` (the distribution project's server),
served on 127.0.0.1 for this module, which the Docker engine pulls from over plain HTTP as it
does for any loopback registry.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import docker
import pytest

from engine.build.images import ContentAddressedBuilder
from engine.errors import BaseImageMissing

pytestmark = [pytest.mark.docker]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """``127.0.0.1:PORT`` of a registry of our own, stopped at the module's end."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed (scripts/setup.sh installs Debian's package)")
    root = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    server = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # until it answers (a loaded machine starts it late)
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"docker-registry exited: {server.stderr.read().decode()[-500:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        else:
            pytest.fail("docker-registry did not answer")
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _pushed(docker_client, base_image: str, registry: str) -> str:
    """A small image of ours pushed to ``registry`` and removed here: only the registry has it."""
    name = f"{registry}/crucible-test/pulled"
    tag = uuid.uuid4().hex[:12]
    image = docker_client.images.get(base_image)
    image.tag(name, tag)
    for line in docker_client.images.push(name, tag=tag, stream=True, decode=True):
        assert "error" not in line, line
    docker_client.images.remove(f"{name}:{tag}")
    return f"{name}:{tag}"


@pytest.mark.slow
def test_a_base_image_only_the_registry_has_is_pulled(docker_client, base_image, registry, tmp_path):
    ref = _pushed(docker_client, base_image, registry)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(ref)
    (tmp_path / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nRUN true\n")
    planned = ContentAddressedBuilder(docker_client, ca_bundle=None).plan(
        tmp_path / "Dockerfile", tmp_path, {"BASE": ref}, "test"
    )
    assert docker_client.images.get(ref).id == docker_client.images.get(base_image).id
    assert planned.base == docker_client.images.get(ref).id or planned.base.startswith("inputs:")


def test_an_image_no_registry_gives_is_one_plain_line(docker_client, registry, tmp_path):
    (tmp_path / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\n")
    missing = f"{registry}/crucible-test/never-pushed:1"
    with pytest.raises(BaseImageMissing) as caught:
        ContentAddressedBuilder(docker_client, ca_bundle=None).plan(
            tmp_path / "Dockerfile", tmp_path, {"BASE": missing}, "test"
        )
    said = str(caught.value)
    assert "\n" not in said
    assert said.startswith(f"base image {missing} is not present and could not be pulled from its registry (")
    unreachable = "127.0.0.1:1/crucible-test/nowhere:1"  # nothing listens on port 1
    with pytest.raises(BaseImageMissing, match=r"could not be pulled from its registry \(.*connection refused"):
        ContentAddressedBuilder(docker_client, ca_bundle=None).plan(
            tmp_path / "Dockerfile", tmp_path, {"BASE": unreachable}, "test"
        )


def test_the_offline_base_is_not_looked_for_in_a_registry(docker_client):
    """The debootstrapped base is made here, never published: where it is missing, the way to
    have it is `crucible doctor --fix`, and no pull is tried (``_pull`` is what a missing base
    reaches)."""
    from engine.build.baseimage import BaseRecipe

    with pytest.raises(BaseImageMissing, match=r"is not present: `crucible doctor --fix` bootstraps it$"):
        ContentAddressedBuilder(docker_client, ca_bundle=None)._pull(BaseRecipe().tag)
