"""A job that fails before its run starts (its image does not build) ends that job, said in one
line and marked for the summary, never the sweep: the other jobs run and are stored.

Two Harbor task folders generated here: one that builds, one whose Dockerfile's ``RUN false``
fails its build.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARBOR = ROOT / "tests" / "flavors" / "harbor" / "harbor_tasks.py"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _harbor_tasks():
    spec = importlib.util.spec_from_file_location("harbor_tasks", HARBOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_job_whose_image_fails_to_build_ends_alone_and_the_sweep_runs_the_rest(tmp_path, docker_client, base_image):
    harbor_tasks = _harbor_tasks()
    dataset = tmp_path / "dataset"
    harbor_tasks._sh(dataset, "builds")
    harbor_tasks._sh(dataset, "fails-to-build")
    (dataset / "fails-to-build" / "environment" / "Dockerfile").write_text(
        "FROM ubuntu:24.04\nWORKDIR /app\nRUN false\n"
    )
    harbor_tasks.source_conf(tmp_path / "conf", "jobs", dataset)
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf"), "CRUCIBLE_HOME": str(tmp_path / "home")}
    env.pop("CRUCIBLE_STORE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "-m", "task=glob(harbor/jobs/*)", "agent=integration_test"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out, out
    assert "1 run(s) stored" in proc.stdout, out
    [said] = [line for line in proc.stderr.splitlines() if line.startswith("crucible run: harbor/jobs/fails-to-build")]
    assert "build step" in said and "failed with exit code 1" in said, said
    [marked] = [line for line in proc.stderr.splitlines() if line.startswith("job ") and "did not run" in line]
    assert "fails-to-build" in said and marked
    completed = [
        line for line in proc.stdout.splitlines() if line.startswith("completed") and "harbor/jobs/builds" in line
    ]
    assert len(completed) == 1, out
