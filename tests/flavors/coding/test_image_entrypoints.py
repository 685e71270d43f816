"""A coding task whose image comes from someone else's Dockerfile with an ``ENTRYPOINT``: the
runtime owns what its containers run (engine/runtimes/docker/runtime.py), so the task ships
whether the base image's entrypoint is ``/bin/bash`` (which turned ``sleep infinity`` into
``/bin/bash sleep infinity``: the container exited at once) or a script that does its own
set-up and ``exec "$@"`` (its set-up never runs in a workspace: it marks that it ran, and the
check below finds no mark)."""

from __future__ import annotations

import hashlib

import pytest
import swe_synth
import swe_synth_assets

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ENTRYPOINTS = {
    "bash": 'ENTRYPOINT ["/bin/bash"]\n',
    "script": "COPY entrypoint.sh /usr/local/bin/entrypoint.sh\n"
    'ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]\nCMD ["bash"]\n',
}


def _entrypoint_image(kind: str, toolchain: str, work) -> str:
    dockerfile = f"FROM {toolchain}\nUSER 1000\nWORKDIR /nowhere-yet\n" + ENTRYPOINTS[kind]
    tag = (
        "crucible-test/entrypoint-base:"
        + hashlib.sha256((dockerfile + swe_synth_assets.ENTRYPOINT_SCRIPT).encode()).hexdigest()[:16]
    )
    ctx = work / kind
    ctx.mkdir()
    (ctx / "entrypoint.sh").write_text(swe_synth_assets.ENTRYPOINT_SCRIPT)
    (ctx / "entrypoint.sh").chmod(0o755)
    swe_synth_assets.docker_build(tag, dockerfile, ctx, {})
    return tag


@pytest.fixture(scope="module")
def toolchain(base_image, tmp_path_factory):
    return swe_synth_assets.build_toolchain(base_image, tmp_path_factory.mktemp("toolchain"))


@pytest.mark.parametrize("kind", sorted(ENTRYPOINTS))
def test_a_task_whose_base_image_has_an_entrypoint_ships(kind, toolchain, docker_client, tmp_path):
    base = _entrypoint_image(kind, toolchain, tmp_path)
    assert docker_client.images.get(base).attrs["Config"]["Entrypoint"]
    # the toolchain has the sample task's python3 and pytest already: no apt in the task build
    proc = swe_synth.crucible("check", "task=sample/last_page", f"env.base_image={base}", "task.system_packages=[]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 1 task(s) ship: golden 1, baseline 0" in proc.stdout


def test_the_workspace_runs_under_the_runtimes_own_entrypoint(toolchain, docker_client, tmp_path, run):
    from engine.runtimes.docker.runtime import DockerRuntime

    base = _entrypoint_image("script", toolchain, tmp_path)
    ws = DockerRuntime().provision(base, run_id="entrypoint-test", network=False, purpose="test")

    async def look():
        async with ws:
            init = await ws.exec(["cat", "/proc/1/cmdline"])
            mark = await ws.exec(["test", "-e", "/tmp/swe-synth-entrypoint-ran"])
            return init.stdout, mark.exit_code

    cmdline, mark = run(look())
    assert cmdline.split(b"\0")[:3] == [b"/sbin/docker-init", b"--", b"/.crucible-spawner/spawner"]
    assert mark == 1  # the image's entrypoint script never ran
