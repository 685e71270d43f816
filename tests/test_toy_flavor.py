"""A flavor defined entirely inside tests/ (tests/toy_flavor: its own task schema with no repo
or refs, its own tool, its own image, its own grader) ships through `crucible check` with
no line of engine/ written for it. The engine finds it by ``_target_`` alone, and only
because the user allows its package (``CRUCIBLE_PLUGIN_PACKAGES``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def crucible(*args: str, allow: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": str(TESTS / "conf"), "PYTHONPATH": str(TESTS)}
    env.pop("CRUCIBLE_PLUGIN_PACKAGES", None)
    if allow:
        env["CRUCIBLE_PLUGIN_PACKAGES"] = "toy_flavor"
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


@pytest.mark.docker
@pytest.mark.slow
def test_a_flavor_from_tests_ships_through_check_golden_1_baseline_0():
    proc = crucible("check", "task=toy/life", "--rebuild")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("toy/life"))
    assert row.split()[1:3] == ["1", "0"], proc.stdout  # golden, baseline
    assert "all 1 task(s) ship: golden 1, baseline 0" in proc.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_a_wrong_golden_of_the_toy_flavor_fails_with_the_flavors_own_explanation():
    proc = crucible("check", "task=toy/wrong_golden", "--rebuild")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL toy/wrong_golden (golden, agent integration_test): reward 0.0 (expected 1.0)" in proc.stdout
    assert "reason: wrong answer; the comparison exited 1; answer given: '41'" in proc.stdout


def test_a_toy_task_key_the_toy_schema_lacks_is_one_line_naming_it(tmp_path):
    conf = tmp_path / "task" / "toy"
    conf.mkdir(parents=True)
    (conf / "typo.yaml").write_text("defaults:\n  - override /flavor@_global_.flavor: toy\n  - _self_\n"
                                    "name: typo\nset: toy\nprompt: p\nquestion: q\nanswer: a\nanwser: b\n")
    env_conf = f"{TESTS / 'conf'}:{tmp_path}"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "build", "task=toy/typo", "--dry-run"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "CRUCIBLE_CONFIG_PATH": env_conf, "PYTHONPATH": str(TESTS),
                               "CRUCIBLE_PLUGIN_PACKAGES": "toy_flavor"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "task toy/typo (flavor toy)" in lines[0] and "task.anwser" in lines[0], lines


def test_a_flavor_outside_crucibles_packages_is_refused_unless_allowed():
    proc = crucible("build", "task=toy/life", "--dry-run", allow=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "toy_flavor.flavor.ToyFlavor' is outside crucible's packages" in lines[0]
    assert "CRUCIBLE_PLUGIN_PACKAGES" in lines[0]


@pytest.mark.docker
@pytest.mark.slow
def test_a_flavor_that_grades_in_many_workspaces_gets_each_fresh_prepared_and_removed_after(docker_client):
    """The engine's ``GradesInMany`` hook, for any flavor: ``grading_workspaces`` fresh grading
    containers (three here), each prepared while the agent works, all handed to ``grade_many``,
    none of them left behind."""
    import docker.errors

    from engine.store.duckdb import DuckDBStore

    proc = crucible("run", "task=toy/life_many", "agent=integration_test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = DuckDBStore().query("SELECT reward, raw_grade FROM runs WHERE task_id = 'toy/life_many' "
                               "AND status = 'completed'")[1]
    assert len(rows) == 1, rows
    reward, raw = rows[0][0], rows[0][1] if isinstance(rows[0][1], dict) else json.loads(rows[0][1])
    assert reward == 1.0 and raw["rewards"] == [1.0, 1.0, 1.0], raw
    hosts = [g["host"] for g in raw["gradings"]]
    assert len(set(hosts)) == 3 and all(g["fresh"] for g in raw["gradings"]), raw  # three, none shared
    assert raw["prepared"] == hosts  # prepare_grading on the first, prepare_extra_grading on the others
    for host in hosts:
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(host)
