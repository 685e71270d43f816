"""Shared fixtures. Docker tests never skip silently in CI: with CI=true a missing engine fails."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest


def _engine_reachable() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session", autouse=True)
def crucible_home(tmp_path_factory):
    """Each test session gets its own CRUCIBLE_HOME (store, runs, spool); images are shared."""
    if "CRUCIBLE_TEST_HOME" in os.environ:
        home = os.environ["CRUCIBLE_TEST_HOME"]
    else:
        home = str(tmp_path_factory.mktemp("crucible_home"))
    os.environ["CRUCIBLE_HOME"] = home
    os.environ.pop("CRUCIBLE_STORE", None)
    return home


@pytest.fixture(autouse=True)
def own_untouched_captures(crucible_home, monkeypatch):
    """Each test keeps its own baseline captures (engine/run/untouched.py), in this process: whether
    a baseline run starts its agent's workspace never depends on the tests that ran before it."""
    from engine.run.untouched import UntouchedCaptures

    own = os.path.join(crucible_home, "cache", f"untouched-{os.urandom(8).hex()}")
    monkeypatch.setattr(
        UntouchedCaptures, "root", property(lambda self: self._root if self._root is not None else Path(own))
    )


@pytest.fixture(scope="session")
def docker_client():
    if not _engine_reachable():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Docker engine is reachable (run `crucible doctor --fix`)")
        pytest.skip("no Docker engine reachable")
    import docker

    return docker.from_env(timeout=600)


@pytest.fixture(scope="session")
def base_image(docker_client) -> str:
    """The bootstrapped offline base image (debootstrap + docker import), built once."""
    from engine.build.baseimage import ensure_base_image

    return ensure_base_image(docker_client).tag


@pytest.fixture(scope="module")
def loop():
    """One event loop per test module, for fixtures that keep async things (a workspace, a
    server) open across that module's tests."""
    loop = asyncio.new_event_loop()
    yield loop
    leftover = asyncio.all_tasks(loop)  # e.g. sse-starlette's per-loop shutdown watcher
    for task in leftover:
        task.cancel()
    if leftover:
        loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
    loop.close()


@pytest.fixture(scope="module")
def run(loop):
    """``run(coroutine)``: run it to completion on the module's loop."""
    return loop.run_until_complete
