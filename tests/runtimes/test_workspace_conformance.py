"""The ``Workspace`` contract (engine/interfaces.py), proven against every backend.

The checks are product code (``engine.runtimes.conformance``: any runtime can run them on
itself, ``python -m engine.cli.conformance runtime=...``); here each registered check
is one test per backend, parametrized over ``BACKENDS``. A new backend (``runtime=local``)
joins by adding one class there whose ``target`` is its runtime, an image and the runtime's
probe. Checks that need no fresh workspace share one per module (``workspace``); those about
lifecycle provision their own. A check the backend's probe lacks a capability for is skipped
(the Docker-only ones on local).
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from engine.cli.conformance import report
from engine.errors import EngineUnavailable
from engine.runtimes.conformance import (
    CHECKS,
    DOCKER_CONTAINER,
    BlindProbe,
    Check,
    ConformanceFailure,
    Target,
    probe_for,
    run_conformance,
)
from engine.runtimes.docker.runtime import DockerRuntime
from engine.util import paths

# -- backends ---------------------------------------------------------------------------------


class DockerBackend:
    name = "docker"
    marks = (pytest.mark.docker,)

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.client = request.getfixturevalue("docker_client")
        runtime = DockerRuntime()
        self.target = Target(runtime, request.getfixturevalue("base_image"), probe_for(runtime), purpose="test")


class SparingDockerRuntime(DockerRuntime):
    """runtime=docker without its spawner (engine/runtimes/docker/spawner.py): every command a
    ``docker exec``, and each of the agent's (any uid but root) handed to a spare exec
    (engine/runtimes/docker/spares.py): the contract holds for a command run either way too."""

    def provision(self, image, **kwargs):
        from engine.runtimes.docker.runtime import DockerWorkspace

        class SparingWorkspace(DockerWorkspace):
            async def exec(self, argv, *, user=0, cwd=None, env=None, **rest):
                if self._state == "running":
                    self.keep_spare_exec(user=user, cwd=cwd, env=env)
                return await super().exec(argv, user=user, cwd=cwd, env=env, **rest)

        workspace = super().provision(image, **kwargs)
        workspace.__class__ = SparingWorkspace
        return workspace

    def conformance_probe(self):
        from engine.runtimes.docker.conformance import probe

        return probe(self)


class SparingDockerBackend(DockerBackend):
    name = "docker-spares"

    def __init__(self, request: pytest.FixtureRequest) -> None:
        super().__init__(request)
        runtime = SparingDockerRuntime(spare_execs=True, spawner=False)
        self.target = Target(runtime, request.getfixturevalue("base_image"), probe_for(runtime), purpose="test")


class LocalBackend:
    """runtime=local: a per-run host dir behind a bubblewrap sandbox, from a tiny repo's template."""

    name = "local"
    marks = ()

    def __init__(self, request: pytest.FixtureRequest) -> None:
        from test_local_runtime import require_sandbox, tiny_image

        from engine.runtimes.local.runtime import LocalRuntime

        runtime = LocalRuntime()
        require_sandbox(runtime)
        image = tiny_image(request.getfixturevalue("tmp_path_factory").mktemp("conformance-local"))
        self.target = Target(runtime, image, probe_for(runtime), purpose="test")


BACKENDS = {backend.name: backend for backend in (DockerBackend, SparingDockerBackend, LocalBackend)}


@pytest.fixture(scope="module", params=[pytest.param(n, marks=b.marks) for n, b in BACKENDS.items()])
def backend(request):
    return BACKENDS[request.param](request)


@pytest.fixture(scope="module")
def workspace(backend, run):
    ws = backend.target.provision(f"conformance-{uuid.uuid4().hex[:8]}")
    run(ws.__aenter__())
    yield ws
    run(ws.__aexit__(None, None, None))


# -- every check, on every backend -------------------------------------------------------------


def test_the_registry_names_each_check_once_and_says_what_it_proves():
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names)) and len(names) >= 33
    assert all(check.doc and check.doc != check.name.replace("_", " ") for check in CHECKS)


@pytest.mark.slow
@pytest.mark.parametrize("check", CHECKS, ids=[check.name for check in CHECKS])
def test_conformance(backend, check, request, run):
    target = backend.target
    missing = check.missing(target.probe)
    if missing:
        pytest.skip(f"{backend.name} lacks {', '.join(sorted(missing))}")
    shared = None if check.fresh else request.getfixturevalue("workspace")
    run(check.run(target, shared))


def test_probes_are_found_beside_their_runtimes():
    from engine.runtimes.docker.conformance import DockerProbe
    from engine.runtimes.local.conformance import LocalProbe
    from engine.runtimes.local.runtime import LocalRuntime

    assert isinstance(probe_for(DockerRuntime()), DockerProbe)
    assert isinstance(probe_for(LocalRuntime()), LocalProbe)


class _FakeWorkspace:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None


class _FakeRuntime:
    def provision(self, image, *, run_id, network, purpose, bridge=None):
        return _FakeWorkspace()


def test_run_conformance_reports_a_failure_with_its_message_and_skips_what_the_probe_lacks(run):
    async def check_always_fails(ws):
        """Fails."""
        raise ConformanceFailure("the reason, in one line")

    async def check_passes(ws):
        """Passes."""

    checks = [
        Check("always_fails", check_always_fails),
        Check("passes", check_passes),
        Check("needs_a_container", check_passes, needs=frozenset({DOCKER_CONTAINER})),
    ]
    results = run(run_conformance(_FakeRuntime(), "image", checks=checks))
    assert isinstance(probe_for(_FakeRuntime()), BlindProbe)
    assert [(r.name, r.passed, r.skipped, r.message) for r in results] == [
        ("always_fails", False, False, "the reason, in one line"),
        ("passes", True, False, ""),
        ("needs_a_container", False, True, "needs docker_container"),
    ]
    assert report(results).splitlines()[-1] == "1 passed, 1 failed, 1 skipped"


# -- Docker only ------------------------------------------------------------------------------


def test_unreachable_engine_is_one_actionable_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    runtime = DockerRuntime(api_timeout=5)
    with pytest.raises(EngineUnavailable) as caught:
        _ = runtime.client  # the property connects
    message = str(caught.value)
    assert "\n" not in message and "crucible doctor --fix" in message


@pytest.mark.docker
@pytest.mark.slow
def test_the_module_entry_runs_every_check_on_docker_and_prints_a_table(docker_client):
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli.conformance", "runtime=docker"],
        cwd=paths.PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()[2:] if len(line.split()) > 1}
    assert {check.name: rows.get(check.name) for check in CHECKS} == {check.name: "passed" for check in CHECKS}
    assert f"{len(CHECKS)} passed, 0 failed, 0 skipped" in done.stdout
