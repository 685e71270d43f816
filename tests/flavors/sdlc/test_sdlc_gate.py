"""The sdlc sample tasks ship through ``crucible check`` under every integrity mode on both
runtimes: the golden (which reads the issue, makes the fix, pushes a branch and opens a PR,
all through the run's own tools) scores 1.0, the untouched baseline (no PR) 0.0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
TASKS = sorted(f"sdlc/{p.stem}" for p in (ROOT / "conf" / "task" / "sdlc").glob("*.yaml"))


def test_there_are_sdlc_samples_a_bug_report_and_a_feature_request_with_a_discussion():
    assert TASKS == ["sdlc/last_page", "sdlc/query_ops"]


@pytest.mark.parametrize("runtime", ["docker", "local"])
@pytest.mark.parametrize("mode", ["none", "vault", "strict"])
def test_the_sdlc_samples_ship_golden_1_baseline_0(docker_client, base_image, mode, runtime):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "check",
            f"task={','.join(TASKS)}",
            f"integrity={mode}",
            f"runtime={runtime}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("sdlc/")}
    assert rows == {task: ["1", "0"] for task in TASKS}, proc.stdout
    assert f"all {len(TASKS)} task(s) ship: golden 1, baseline 0" in proc.stdout
