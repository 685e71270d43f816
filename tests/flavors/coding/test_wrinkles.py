"""Real-task wrinkles through the real pipeline (Docker): each fixture of samples/wrinkles ships
through ``crucible check``, and on the data-driven one the task's test paths hold.

- delete_rename: the hidden change deletes a test that pins the bug and renames another;
- xfail_skip: the suite has skips and an xfail, so the task names its tests (fail_to_pass);
- data_driven: the hidden cases are JSON files a visible test module reads;
- binary_fixture: a binary test file and a mode change in the hidden change;
- go_module: Go, graded by ``go test -json`` (Debian's golang-go in the image).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_repogen_wrinkles import DATA_DRIVEN_ALTERNATIVE

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = str(ROOT / "tests" / "conf")

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ALTERNATIVE_FIX = DATA_DRIVEN_ALTERNATIVE
"""An honest fix that is not the golden: no regular expression, a hand-written scanner."""


def crucible(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": FIXTURES}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def test_every_wrinkle_ships_golden_one_baseline_zero(docker_client, base_image):
    proc = crucible("check", "task=glob(wrinkles/*)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("wrinkles/")}
    assert rows == {
        f"wrinkles/{name}": ["1", "0"]
        for name in ("binary_fixture", "data_driven", "delete_rename", "go_module", "xfail_skip")
    }, proc.stdout
    from engine.store.duckdb import DuckDBStore

    # Named results were read for every one of them, Go's from `go test -json`.
    store = DuckDBStore()
    golden_go = store.query(
        "SELECT t.name, t.status FROM test_results t JOIN runs r USING (run_id) WHERE r.task_id = 'wrinkles/go_module' "
        "AND r.agent = 'integration_test' AND t.name LIKE 'TestFormatAroundTheHour%' ORDER BY t.name"
    )[1]
    assert ("TestFormatAroundTheHour/exactly_one_hour", "PASSED") in golden_go
    # The deleted test is gone from the graded run; the renamed one ran under its new name.
    names = {
        row[0]
        for row in store.query(
            "SELECT t.name FROM test_results t JOIN runs r USING (run_id) WHERE r.task_id = 'wrinkles/delete_rename'"
        )[1]
    }
    assert "tests/test_slugify.py::test_accented_letters_lose_their_accents" in names
    assert not any(name.startswith(("tests/test_slug_ascii.py", "tests/test_slug.py::")) for name in names), names
    # xfail_skip: graded on its lists, with its skips and xfail outside them.
    raw = store.query(
        "SELECT raw_grade->'lists' FROM runs WHERE task_id = 'wrinkles/xfail_skip' AND agent = 'integration_test'"
    )[1][0][0]
    assert '"fail_to_pass":{"failing":[],"passed":2,"total":2}' in raw.replace(" ", "")
    # binary_fixture: its hidden module (under strict, first grading included) under a random
    # name beside the task's, and the data it opens __file__-relatively by name kept: both pass.
    renamed = json.loads(
        store.query(
            "SELECT raw_grade->'renamed' FROM runs WHERE task_id = 'wrinkles/binary_fixture' "
            "AND agent = 'integration_test'"
        )[1][0][0]
    )
    assert list(renamed["names"].values()) == ["test_track_files"] and renamed["seed"] is None, renamed


@pytest.fixture(scope="module")
def data_driven_runs(docker_client, base_image):
    """Three agents on wrinkles/data_driven under every mode: the golden (control), one that
    rewrites the visible test module that reads the hidden cases, one with an honest fix of
    its own."""
    from attacks.harness import AttackRunner
    from attacks.payloads import create

    previous = os.environ.get("CRUCIBLE_CONFIG_PATH")
    os.environ["CRUCIBLE_CONFIG_PATH"] = FIXTURES
    try:
        runner = AttackRunner(task="wrinkles/data_driven")
        agents = {
            "golden": None,
            "rewrite_visible_tests": [create("/app/tests/test_cases.py", "def test_cases():\n    pass\n")],
            "honest_other_fix": [create("/app/hikelog/duration.py", ALTERNATIVE_FIX)],
        }
        jobs = [(name, mode, steps) for name, steps in agents.items() for mode in ("none", "vault", "strict")]
        return asyncio.run(runner.run(jobs))
    finally:
        if previous is None:
            os.environ.pop("CRUCIBLE_CONFIG_PATH", None)
        else:
            os.environ["CRUCIBLE_CONFIG_PATH"] = previous


def test_rewriting_the_visible_tests_that_read_hidden_data_scores_zero(data_driven_runs):
    for mode in ("vault", "strict"):
        record = data_driven_runs[("rewrite_visible_tests", mode)]
        assert (record.status, record.reward) == ("completed", 0.0), (mode, record.raw_grade.get("reason"))
        assert record.violations == ["tests/test_cases.py"], mode  # recorded, and graded as the test ref has it
        failing = {t.name for t in record.tests if t.status == "FAILED"}
        assert failing == {
            "tests/test_cases.py::test_cases[decimal.json]",
            "tests/test_cases.py::test_cases[spaced.json]",
        }
    # `none` measures what no defence gives: there the rewrite wins.
    assert data_driven_runs[("rewrite_visible_tests", "none")].reward == 1.0


def test_an_honest_fix_that_is_not_the_golden_scores_one(data_driven_runs):
    for mode in ("none", "vault", "strict"):
        for agent in ("golden", "honest_other_fix"):
            record = data_driven_runs[(agent, mode)]
            assert (record.status, record.reward) == ("completed", 1.0), (agent, mode, record.raw_grade.get("reason"))
            assert record.violations == []


PARSER = (
    "python3 -c 'import json, re, sys\n"
    "out = open(sys.argv[1]).read()\n"
    'words = {"XFAIL": "SKIPPED", "XPASS": "PASSED"}\n'
    'found = re.finditer(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\\S+)", out, re.M)\n'
    'tests = [{"name": m.group(2), "status": words.get(m.group(1), m.group(1))} for m in found]\n'
    'json.dump({"tests": tests}, open(sys.argv[2], "w"))\' {stdout} {output}'
)
"""A parser in the SWE-bench Pro format, written here: pytest's -rA summary lines -> named results."""


def test_any_command_with_a_parser_is_graded_by_the_parser_s_named_results(docker_client, base_image):
    from attacks.harness import AttackRunner

    from envs.coding.schema import ResultsConfig

    previous = os.environ.get("CRUCIBLE_CONFIG_PATH")
    os.environ["CRUCIBLE_CONFIG_PATH"] = FIXTURES
    try:
        runner = AttackRunner(task="wrinkles/delete_rename", modes=("strict",))
        command = "python3 -m pytest -q -rA -p no:cacheprovider -p no:junitxml tests"  # no JUnit report at all
        parsed = {"test_command": command, "results": ResultsConfig(format="parser", parser=PARSER)}
        broken = {"test_command": command, "results": ResultsConfig(format="parser", parser="exit 3")}
        jobs = [
            ("golden", "strict", None, parsed),
            ("baseline", "strict", [], parsed),
            ("golden-broken-parser", "strict", None, broken),
        ]
        records = asyncio.run(runner.run(jobs))
    finally:
        if previous is None:
            os.environ.pop("CRUCIBLE_CONFIG_PATH", None)
        else:
            os.environ["CRUCIBLE_CONFIG_PATH"] = previous
    golden, baseline, broken_run = (
        records[(name, "strict")] for name in ("golden", "baseline", "golden-broken-parser")
    )
    assert (golden.reward, baseline.reward) == (1.0, 0.0), (
        golden.raw_grade.get("reason"),
        baseline.raw_grade.get("reason"),
    )
    assert golden.raw_grade["results"]["format"] == "parser"
    # Read under the task's ids (strict's random test names are mapped back, as for any format).
    assert ("tests/test_slugify.py::test_accented_letters_lose_their_accents", "PASSED") in {
        (t.name, t.status) for t in golden.tests
    }
    assert ("tests/test_slugify.py::test_accented_letters_lose_their_accents", "FAILED") in {
        (t.name, t.status) for t in baseline.tests
    }
    # A parser that fails gives no results, and no results is never a pass.
    assert broken_run.reward == 0.0
    assert broken_run.raw_grade["reason"].startswith("no named test results: the results parser failed (exit code 3)")
