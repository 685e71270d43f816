"""The differential re-run under strict, in real runs on Docker (wrinkles/data_driven: the hidden
cases are JSON files a visible test module globs, and the tests import the code under test into
pytest's own process): the hidden tests graded a second time in another fresh grading container,
the hidden files under random names, and the two verdicts compared. Under strict the first
grading has random hidden file names of its own too (``randomise_test_names``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from attacks.harness import AttackRunner, why
from attacks.payloads import bash

from envs.coding import rerun

ROOT = Path(__file__).resolve().parents[3]
MODULE = "hikelog/duration.py"
HIDDEN_IDS = {"tests/test_cases.py::test_cases[decimal.json]", "tests/test_cases.py::test_cases[spaced.json]"}

NAME_KEYED = """
import json as _json
import os as _os
_here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
_answers = {}
for _name in ("decimal", "spaced"):  # the hidden cases, by the names the task gives them
    try:
        # "tests" in hex: the scan reads strings built from literals ("te" + "sts")
        with open(_os.path.join(_here, bytes.fromhex("7465737473").decode(), "cases", _name + ".json")) as _f:
            _answers.update({_c["text"]: _c["seconds"] for _c in _json.load(_f)})
    except (OSError, ValueError):
        pass
_parse = parse_duration


def parse_duration(text):
    if text in _answers:  # a hidden case it found by name: its expected answer
        return _answers[text]
    return _parse(text)
"""
"""Fixes nothing: it finds the hidden cases by their fixed names and answers them from a table.
No string the scan would name, no hook, nothing forged: pytest honestly reports passes."""


def append(text: str) -> dict:
    return bash(f"cat >> {MODULE} <<'PY'\n{text}PY")


@pytest.fixture(scope="module")
def runner(docker_client):
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("CRUCIBLE_CONFIG_PATH", str(ROOT / "tests" / "conf"))
        yield AttackRunner(task="wrinkles/data_driven", modes=("none", "strict"))


@pytest.mark.docker
@pytest.mark.slow
def test_code_keyed_on_the_hidden_names_wins_with_fixed_names_and_the_rerun_alone_scores_it_0_as_tampered(runner):
    """The re-run by itself (the first grading's names fixed: ``randomise_test_names`` off)."""
    fixed = {"differential_rerun": False, "randomise_test_names": False}
    records = asyncio.run(
        runner.run(
            [
                ("name-keyed", "none", [append(NAME_KEYED)]),
                ("name-keyed-fixed", "strict", [append(NAME_KEYED)], None, fixed),
                ("name-keyed-rerun-only", "strict", [append(NAME_KEYED)], None, {"randomise_test_names": False}),
            ],
            concurrency=2,
        )
    )
    for key in (("name-keyed", "none"), ("name-keyed-fixed", "strict")):
        record = records[key]
        assert record.reward == 1.0, why(record)  # the hole: every hidden case passes, honestly reported
        assert "rerun" not in record.raw_grade and "renamed" not in record.raw_grade
        assert {t.name for t in record.tests if t.status == "PASSED"} >= HIDDEN_IDS
    caught = records[("name-keyed-rerun-only", "strict")]
    assert caught.raw_grade["scan"]["findings"] == [], caught.raw_grade["scan"]  # not the scan's catch
    assert caught.reward == 0.0 and caught.raw_grade["reason"] == rerun.TAMPERED, why(caught)
    assert "renamed" not in caught.raw_grade  # the first grading has the task's names
    again = caught.raw_grade["rerun"]
    assert caught.raw_grade["reason"] != again["reason"] == "tests failed"  # both verdicts kept
    assert sorted(again["renamed"]["names"].values()) == ["decimal", "spaced"]
    assert "reward 1 vs 0" in caught.raw_grade["rerun_differences"]
    assert {d.split(" ")[0] for d in caught.raw_grade["rerun_differences"][1:]} == HIDDEN_IDS
    # The first verdict alone passed: the re-run is what scored it 0.
    assert {t.name: t.status for t in caught.tests if t.name in HIDDEN_IDS} == dict.fromkeys(HIDDEN_IDS, "PASSED")


@pytest.mark.docker
@pytest.mark.slow
def test_under_strict_both_gradings_lay_the_hidden_data_down_under_their_own_random_names(runner):
    """Under strict the first grading's own random file names stop the attack already: it fails
    there honestly, and the re-run, under other names, agrees. The golden passes both."""
    golden = runner.plans["strict"].spec.task.validation
    records = asyncio.run(
        runner.run([("name-keyed", "strict", [append(NAME_KEYED)]), ("golden", "strict", None)], concurrency=2)
    )
    caught = records[("name-keyed", "strict")]
    assert caught.raw_grade["scan"]["findings"] == [], caught.raw_grade["scan"]
    assert caught.reward == 0.0 and caught.raw_grade["reason"] == "tests failed", why(caught)
    assert caught.raw_grade["rerun"]["reason"] == "tests failed" and "rerun_differences" not in caught.raw_grade
    assert sorted(caught.raw_grade["renamed"]["names"].values()) == ["decimal", "spaced"]
    # the failures under the task's own ids, the random names mapped back
    assert {t.name: t.status for t in caught.tests if t.name in HIDDEN_IDS} == dict.fromkeys(HIDDEN_IDS, "FAILED")
    assert golden, "the task's golden is its derived validation"
    honest = records[("golden", "strict")]
    assert honest.reward == 1.0, why(honest)
    assert honest.raw_grade["rerun"]["reason"] == "tests passed" and "rerun_differences" not in honest.raw_grade
    assert {t.name: t.status for t in honest.tests if t.name in HIDDEN_IDS} == dict.fromkeys(HIDDEN_IDS, "PASSED")
    task_paths = {"tests/cases/decimal.json", "tests/cases/spaced.json"}
    first, again = honest.raw_grade["hidden_files"], honest.raw_grade["rerun"]["hidden_files"]
    assert len(first) == len(again) == 2 and not task_paths & {*first, *again} and not set(first) & set(again)
    assert set(honest.raw_grade["hidden_deleted"]) >= task_paths


@pytest.mark.docker
@pytest.mark.slow
def test_init_files_and_helper_modules_on_a_hidden_path_are_roots_and_read_only_while_the_tests_run(runner):
    """The hidden-file lock covers the test-side code the hidden tests run with. Shown where it
    matters: the agent's diff adds ``tests/__init__.py`` and a helper module there, and the
    task's test paths do not cover them (``restore_test_paths`` off), so they are staged as the
    agent's, uid 1000's, and without the lock code under test could rewrite them mid-run."""
    from attacks.payloads import create

    golden = runner.plans["strict"].spec.task.validation
    steps = [*golden, create("/app/tests/__init__.py", ""), create("/app/tests/helpers.py", "HELP = 1\n")]
    command = (
        "python3 -m pytest -q -p no:cacheprovider tests; rc=$?; "
        "stat -c 'owner %u mode %a %n' tests/__init__.py tests/helpers.py tests/test_cases.py; exit $rc"
    )
    records = asyncio.run(
        runner.run(
            [
                (
                    "helpers",
                    "strict",
                    steps,
                    {"test_command": command},
                    {"restore_test_paths": False, "drop_protected": False},
                )
            ],
            concurrency=1,
        )
    )
    record = records[("helpers", "strict")]
    assert record.reward == 1.0, why(record)
    # stat runs after pytest's own end: its lines are kept in after_end (recorded, not judged)
    after = record.raw_grade["test"]["after_end"]["tail"]
    seen = [line for line in after.splitlines() if line.startswith("owner ")]
    assert seen == [
        "owner 0 mode 644 tests/__init__.py",
        "owner 0 mode 644 tests/helpers.py",
        "owner 0 mode 644 tests/test_cases.py",
    ], after
    again = record.raw_grade["rerun"]["test"]["after_end"]["tail"]  # the re-run locks them too
    assert "owner 0 mode 644 tests/helpers.py" in again, again
