"""`crucible export-task` (envs/harbor/export.py): every sample task written as a Harbor task
folder ships back through crucible's own harbor flavor with the verdicts its original gets; the
folders are what Harbor's format asks for; a task of another flavor is refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import harbor_tasks
import pytest

from envs.harbor import folder

ROOT = Path(__file__).resolve().parents[3]


def crucible(*args: str, conf: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"CRUCIBLE_CONFIG_PATH": str(conf)} if conf else {})}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900
    )


def gate(stdout: str, prefix: str) -> dict[str, list[str]]:
    """task name -> [golden, baseline] from ``crucible check``'s table."""
    return {
        line.split()[0].rsplit("/", 1)[-1]: line.split()[1:3] for line in stdout.splitlines() if line.startswith(prefix)
    }


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    """Every sample task exported; the conf dir whose harbor/exported set reads them."""
    base = tmp_path_factory.mktemp("export")
    proc = crucible("export-task", "task=glob(sample/*)", str(base / "tasks"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("exported sample/") == 4, proc.stdout
    harbor_tasks.source_conf(base / "conf", "exported", base / "tasks")
    return base / "tasks", base / "conf"


def test_an_exported_task_is_a_harbor_folder(exported):
    tasks, _ = exported
    read = folder.read(tasks / "last_page")
    assert read.workdir == "/app" and read.shape == "dockerfile" and "45 items" in read.instruction
    assert (tasks / "last_page" / "tests" / "hidden" / "tests" / "test_hidden_last_page.py").is_file()
    assert (tasks / "last_page" / "solution" / "solve.sh").stat().st_mode & 0o111
    assert (tasks / "last_page" / "environment" / "Dockerfile").read_text().startswith("FROM debian:bookworm\n")
    assert not (tasks / "last_page" / "environment" / "repo" / "tests" / "test_hidden_last_page.py").exists()
    assert "/logs/verifier/reward.txt" in (tasks / "last_page" / "tests" / "test.sh").read_text()


@pytest.mark.docker
@pytest.mark.slow
def test_exported_sample_tasks_ship_back_with_the_verdicts_of_the_originals(docker_client, exported):
    _, conf = exported
    original = crucible("check", "task=glob(sample/*)", "integrity=strict")
    assert original.returncode == 0, original.stdout + original.stderr
    back = crucible("check", "task=glob(harbor/exported/*)", "integrity=strict", conf=conf)
    assert back.returncode == 0, back.stdout + back.stderr
    expected = gate(original.stdout, "sample/")
    assert len(expected) == 4 and gate(back.stdout, "harbor/exported/") == expected, (original.stdout, back.stdout)


def test_an_existing_folder_is_never_overwritten(exported):
    tasks, _ = exported
    proc = crucible("export-task", "task=sample/last_page", str(tasks))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and f"{tasks / 'last_page'} exists" in lines[0], proc.stderr
    assert (tasks / "last_page" / "task.toml").is_file()


def test_a_task_of_a_flavor_that_cannot_be_exported_is_one_line(tmp_path):
    harbor_tasks.source_conf(tmp_path / "conf", "gen", harbor_tasks.dataset(tmp_path / "gen"))
    proc = crucible("export-task", "task=harbor/gen/py-mean", str(tmp_path / "out"), conf=tmp_path / "conf")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "flavor harbor cannot be exported to a Harbor folder (only coding, sdlc)" in lines[0]
