"""``crucible check`` answered again while nothing it was computed from has changed
(engine/cli/answers.py, engine/util/inputs.py): real checks of a sample task against the
session's store, repository and engine, each input changed for real in between."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.util.paths import PROJECT_ROOT

pytestmark = pytest.mark.docker

TASK = "task=sample/last_page"
ANSWERED = "check: answered as before"


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory) -> Path:
    """A config dir of this module's (``CRUCIBLE_CONFIG_PATH``): one of the check's inputs it may change."""
    return tmp_path_factory.mktemp("answers-conf")


def check(config_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": str(config_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "check", TASK, *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def settled(config_dir: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """Checks until one is answered as before: the first after a change computes (from the
    store), and keeps its answer unless it wrote beside what it read (an evaluation cache's
    new entry) or read something changed in the last two seconds (``inputs.racy``), when a
    later one keeps it. Ten is far past that window (each check takes 0.5 s and more). Returns
    the check that computed the answer and the one answered with it."""
    computed = check(config_dir)
    for _ in range(10):
        proc = check(config_dir)
        if ANSWERED in proc.stderr:
            return computed, proc
        computed = proc
    raise AssertionError(f"never answered as before: {proc.stdout}{proc.stderr}")


@pytest.fixture(scope="module")
def first(config_dir, docker_client, base_image) -> subprocess.CompletedProcess:
    proc = check(config_dir)
    assert ANSWERED not in proc.stderr
    return proc


def test_an_unchanged_check_is_answered_as_it_was_computed(config_dir, first):
    computed, answered = settled(config_dir)
    assert ANSWERED not in computed.stderr and "store" in computed.stdout
    assert answered.stdout == computed.stdout
    assert ANSWERED in check(config_dir).stderr  # and again


def test_a_new_run_in_the_store_is_a_new_answer(config_dir, first):
    settled(config_dir)
    noop = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "run", TASK, "agent=noop"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "CRUCIBLE_CONFIG_PATH": str(config_dir)},
        timeout=600,
    )
    assert noop.returncode == 0, noop.stdout + noop.stderr
    assert ANSWERED not in check(config_dir).stderr


def test_a_changed_config_dir_is_a_new_answer(config_dir, first):
    settled(config_dir)
    (config_dir / "unrelated.yaml").write_text("# a file the check lists among its configs\n")
    assert ANSWERED not in check(config_dir).stderr
    settled(config_dir)


def test_a_moved_reference_of_the_task_repository_is_a_new_answer(config_dir, first):
    settled(config_dir)
    repos = Path(os.environ["CRUCIBLE_HOME"]) / "cache" / "repos"
    repo = next(p for p in repos.iterdir() if p.name.startswith("sample-"))
    subprocess.run(["git", "-C", str(repo), "update-ref", "refs/heads/answers-test", "HEAD"], check=True)
    try:
        assert ANSWERED not in check(config_dir).stderr
    finally:
        subprocess.run(["git", "-C", str(repo), "update-ref", "-d", "refs/heads/answers-test"], check=True)


def test_rebuild_and_repeats_are_never_answered_as_before(config_dir, first):
    settled(config_dir)
    assert ANSWERED not in check(config_dir, "--check", "1").stderr
