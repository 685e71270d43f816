"""Reaching the Docker engine (engine/runtimes/docker/daemon.py): one actionable line when none answers."""

from __future__ import annotations

import pytest

from engine.errors import EngineUnavailable
from engine.runtimes.docker.daemon import ensure_engine

UNREACHABLE = "unix:///nonexistent/crucible-test-docker.sock"


def test_ensure_engine_raises_engine_unavailable_in_one_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE)
    with pytest.raises(EngineUnavailable) as caught:
        ensure_engine(client_timeout=5)
    assert "\n" not in str(caught.value) and "crucible doctor --fix" in str(caught.value)
    assert caught.value.__cause__ is not None


def test_the_pre_flight_without_an_sdk_client_says_the_same_one_line(monkeypatch):
    """``require_engine`` pings a local engine's socket itself; where that fails, the SDK's
    attempt gives the one line."""
    from engine.runtimes.docker.daemon import require_engine

    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE)
    with pytest.raises(EngineUnavailable) as caught:
        require_engine()
    assert "\n" not in str(caught.value) and "crucible doctor --fix" in str(caught.value)


@pytest.mark.docker
def test_a_local_engines_client_reads_no_proxy_environment_and_still_answers(monkeypatch):
    """Over the local socket no proxy can carry a request, so the client's session skips the
    environment scan requests makes per request; with a proxy set that would refuse every
    request, the engine still answers."""
    from engine.runtimes.docker.daemon import from_env

    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    client = from_env(timeout=30)
    assert client.api.trust_env is False
    assert client.api.version()["ApiVersion"]


@pytest.mark.docker
def test_a_local_engines_client_takes_its_api_version_from_the_ping(monkeypatch):
    """The SDK would ask ``/version``, for which dockerd starts ``runc --version`` and
    ``docker-init --version``: a client for the local engine is made with the version its
    ``/_ping`` says, and the SDK never asks."""
    import docker.api.client

    from engine.runtimes.docker.daemon import from_env, local_api_version, local_engine_socket

    def asked(self):
        raise AssertionError("the SDK asked the engine for its version")

    monkeypatch.setattr(docker.api.client.APIClient, "_retrieve_server_version", asked)
    socket_path = local_engine_socket()
    assert socket_path is not None
    pinged = local_api_version(socket_path)
    client = from_env(timeout=30)
    assert pinged is not None and client.api._version == pinged
    assert client.api.ping() is True


def test_no_api_version_from_a_socket_that_does_not_answer_a_ping_with_one(tmp_path):
    """Nothing listening, or an answer without a well-formed ``Api-Version``: None, and the
    SDK asks the engine itself (its errors then say what is wrong)."""
    import socket
    import threading

    from engine.runtimes.docker.daemon import local_api_version

    assert local_api_version(str(tmp_path / "none.sock"), timeout=2) is None
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK", b"HTTP/1.1 200 OK\r\nApi-Version: x;rm\r\n\r\n"]
    path = str(tmp_path / "engine.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(2)

    def serve() -> None:
        for answer in answers:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert local_api_version(path, timeout=10) is None  # no header
        assert local_api_version(path, timeout=10) is None  # not a version
    finally:
        thread.join(10)
        server.close()
