"""The engine's hook for a flavor's per-run services (``RunServices``), as the sdlc flavor
uses it: up for the whole run and taken down after it whatever happened; a service that
cannot start ends the run as an error of its setup phase, never as a score."""

from __future__ import annotations

from pathlib import Path

import pytest
from sdlc_runs import real_run

from engine.errors import SetupError

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "sdlc/last_page"


@pytest.fixture
def spied(monkeypatch) -> list[Path]:
    """The host directories this test's runs use: each remote's root and each bridge."""
    from envs.sdlc import remote
    from envs.sdlc.flavor import SdlcFlavor

    seen: list[Path] = []
    init, services = remote.Remote.__init__, SdlcFlavor.services

    def remote_init(self, root):
        seen.append(Path(root))
        init(self, root)

    def spy_services(self, spec, bridge_dir):
        seen.append(Path(bridge_dir))
        return services(self, spec, bridge_dir)

    monkeypatch.setattr(remote.Remote, "__init__", remote_init)
    monkeypatch.setattr(SdlcFlavor, "services", spy_services)
    return seen


def test_the_remote_lives_through_grading_and_is_gone_after_the_run(docker_client, base_image, tmp_path, spied):
    record = real_run(tmp_path / "run", TASK, "agent=integration_test")
    assert (record.status, record.reward) == ("completed", 1.0), record.error  # graded from the remote
    assert len(spied) == 2 and not any(path.exists() for path in spied), spied


def test_a_service_that_cannot_start_is_a_setup_error_and_leaves_nothing(
    docker_client, base_image, tmp_path, monkeypatch, spied
):
    from envs.sdlc import remote

    def broken(*args, **kwargs):
        raise SetupError("no room for a remote")

    monkeypatch.setattr(remote.Remote, "seed", broken)
    record = real_run(tmp_path / "run", TASK, "agent=integration_test")
    assert (record.status, record.error_phase, record.reward) == ("error", "setup", None), record
    assert "could not be seeded: no room for a remote" in record.error
    assert len(spied) == 2 and not any(path.exists() for path in spied), spied
