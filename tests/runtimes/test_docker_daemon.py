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
