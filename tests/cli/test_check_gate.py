"""``crucible check``, the shipping gate, end to end through the CLI: real images, containers, store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = str(ROOT / "tests" / "conf")

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def crucible(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": FIXTURES}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in stdout.splitlines() if line.startswith(("sample/", "fixtures/"))}


@pytest.fixture(scope="module")
def sample_check(docker_client, base_image):
    return crucible("check", "task=glob(sample/*)")


def test_every_sample_task_ships_golden_one_baseline_zero(sample_check):
    assert sample_check.returncode == 0, sample_check.stdout + sample_check.stderr
    rows = table_rows(sample_check.stdout)
    assert len(rows) == 4
    for task, row in rows.items():
        assert row[1:3] == ["1", "0"], (task, row)
    assert "all 4 task(s) ship" in sample_check.stdout


def test_a_second_check_takes_verdicts_from_the_store_without_running(sample_check):
    runs_before = len(DuckDBStore().query("SELECT run_id FROM runs")[1])
    again = crucible("check", "task=glob(sample/*)")
    assert again.returncode == 0, again.stdout + again.stderr
    assert all(row[4] == "store" for row in table_rows(again.stdout).values()), again.stdout
    assert len(DuckDBStore().query("SELECT run_id FROM runs")[1]) == runs_before


def test_check_n_reruns_deterministic_tasks_and_passes_on_the_sample_set(sample_check):
    proc = crucible("check", "task=glob(sample/*)", "--check", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    per_spec = DuckDBStore().query(
        # The check's 8 specs; a spec's first verdict may come from the store, made by another
        # suite's run of the same spec (the attack suite's controls are the same golden runs).
        "SELECT spec_hash, count(*) FROM runs WHERE status = 'completed' AND spec_hash IN "
        "(SELECT spec_hash FROM runs WHERE task_id LIKE 'sample/%' AND run_dir LIKE '%/runs/check/%') "
        "GROUP BY spec_hash"
    )[1]
    assert len(per_spec) == 8 and all(count >= 4 for _, count in per_spec)
    # The output says what was repeated: per task and side, the runs and that they agreed
    # (the module's first check stored each verdict, so the fourth run comes from the store).
    repeats = sorted(line for line in proc.stdout.splitlines() if line.startswith("repeats "))
    assert repeats == [
        f"repeats {task}: golden 4 runs, the first from the store, all 1.0; "
        "baseline 4 runs, the first from the store, all 0.0"
        for task in sorted(table_rows(proc.stdout))
    ]


@pytest.mark.parametrize(
    "task, problem, raw_grade",
    [
        (
            "fixtures/broken_golden",
            "golden, agent integration_test): reward 0.0 (expected 1.0)",
            # why the golden failed: the test command's exit code and the end of its output
            [
                '"reason": "tests failed"',
                '"test_exit_code": 1',
                "test output (last lines of `python3 -m pytest",
                "FAILED tests/test_hidden_broken_golden.py::test_median_of_even_length_averages_the_middle_pair",
            ],
        ),
        (
            "fixtures/baseline_passes",
            "baseline, agent noop): reward 1.0 (expected 0.0)",
            ['"reason": "tests passed"', "test output (last lines of `python3 -m pytest", " passed"],
        ),
    ],
)
def test_a_task_that_does_not_ship_fails_the_gate_naming_task_reward_and_raw_grade(
    docker_client, task, problem, raw_grade
):
    proc = crucible("check", f"task={task}")
    assert proc.returncode == 1, proc.stdout
    assert f"FAIL {task} ({problem}" in proc.stdout
    failure = proc.stdout[proc.stdout.index(f"FAIL {task}") :]
    for expected in raw_grade:
        assert expected in failure, (expected, failure)
    assert "logs in " in failure and "not shippable" in failure


def test_a_good_fixture_passes_so_the_gate_is_not_just_failing_fixtures(docker_client):
    proc = crucible("check", "task=fixtures/good")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_n_catches_a_flaky_task_and_names_it(docker_client):
    proc = crucible("check", "task=fixtures/flaky", "--check", "3")
    assert proc.returncode == 1, proc.stdout
    assert "FAIL fixtures/flaky" in proc.stdout
    repeats = [line for line in proc.stdout.splitlines() if line.startswith("repeats fixtures/flaky: ")]
    assert len(repeats) == 1 and "golden 4 runs" in repeats[0] and "baseline 4 runs" in repeats[0], proc.stdout
    # The coin may come out constant on a side; the line says the runs differ exactly where the
    # gate found them not reproducible.
    assert ("verdicts differ: [" in repeats[0]) == ("not reproducible" in proc.stdout), proc.stdout


def test_a_broken_validation_fails_the_gate_even_when_the_golden_scores(docker_client, tmp_path):
    """Validation warnings make a task unshippable: its authoring loop is broken."""
    conf = tmp_path / "task" / "fixtures"
    conf.mkdir(parents=True)
    good = (ROOT / "tests" / "conf" / "task" / "fixtures" / "good.yaml").read_text()
    (conf / "bad_validation.yaml").write_text(
        good.replace("name: good", "name: bad_validation")
        + "refs: {baseline: good_baseline, test: good_test, golden: good_golden}\n"
        + "validation:\n  - {name: no_such_tool, arguments: {}}\n"
    )
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": f"{FIXTURES}:{tmp_path}"}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "check", "task=fixtures/bad_validation"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout
    assert "validation warnings" in proc.stdout and "no_such_tool" in proc.stdout


@pytest.mark.parametrize("command", [["check"], ["run", "agent=noop"]])
def test_a_failed_install_step_is_one_line_naming_task_and_step_then_the_builds_last_lines(
    docker_client, base_image, tmp_path, command
):
    conf = tmp_path / "task" / "fixtures"
    conf.mkdir(parents=True)
    good = (ROOT / "tests" / "conf" / "task" / "fixtures" / "good.yaml").read_text()
    (conf / "install_fails.yaml").write_text(
        good.replace("name: good", "name: install_fails")
        + "refs: {baseline: good_baseline, test: good_test, golden: good_golden}\n"
        + 'install: "echo boom >&2; exit 3"\n'
    )
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": f"{FIXTURES}:{tmp_path}"}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *command, "task=fixtures/install_fails"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 2, proc.stderr
    assert (
        "task fixtures/install_fails: the `install:` step `echo boom >&2; exit 3` failed with exit code 3" in lines[0]
    )
    assert "/builds/" in lines[0] and lines[0].endswith("its last lines:")
    assert "set -eu" not in proc.stderr  # not Docker's line, which repeats the step's whole shell text
    assert lines[1] == "    boom"  # what the step printed, which only the build log had
