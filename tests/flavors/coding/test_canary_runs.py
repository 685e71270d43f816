"""The canary end to end, on a task whose hidden tests import the code under test.

fixtures/good is such a task (no ``isolated_verdict``): under ``strict`` the grader runs its
canary beside the hidden tests (envs/coding/canary.py). Real runs on the docker runtime, the
attacks replayed through the task's MCP tools by ``integration_test`` as uid 1000, exactly as
in the attack suite: code under test that forges pytest's verdict wholesale scores 0
("tampered"), and an honest golden still scores 1.0, even with a test command that hides
pytest's short summary. What the canary cannot do is named too: code that has read it can
forge around it, which is why the sample tasks isolate their verdict (test_attacks.py) and
why strict also scans the agent's code for test-awareness (envs/integrity/scan/), which
names such code first: each case runs with the scan on (strict as it is) and off.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from attacks.canary_cases import CASES
from attacks.harness import AttackRunner, why

FIXTURES = str(Path(__file__).resolve().parents[2] / "conf")

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def records(base_image):
    before = os.environ.get("CRUCIBLE_CONFIG_PATH")
    os.environ["CRUCIBLE_CONFIG_PATH"] = FIXTURES
    try:
        runner = AttackRunner(task="fixtures/good", modes=("strict",))
        # Each case twice: as strict is, and with the test-awareness scan off, so the canary's
        # own catch (and its limit) shows without the scan catching the same code first.
        jobs = [(case_id, "strict", steps, task) for case_id, (steps, task) in CASES.items()]
        jobs += [
            (f"{case_id} (no scan)", "strict", steps, task, {"refuse_test_aware_code": False})
            for case_id, (steps, task) in CASES.items()
        ]
        return asyncio.run(runner.run(jobs))
    finally:
        if before is None:
            os.environ.pop("CRUCIBLE_CONFIG_PATH", None)
        else:
            os.environ["CRUCIBLE_CONFIG_PATH"] = before


def _record(records, case_id):
    record = records[(case_id, "strict")]
    assert record.status == "completed", f"{case_id}: {record.error_phase}: {record.error}"
    return record


@pytest.mark.parametrize("case_id", ["golden", "golden-no-short-summary"])
def test_an_honest_run_scores_one_with_the_canary_accounted_for(records, case_id):
    record = _record(records, case_id)
    assert record.reward == 1.0, why(record)
    canary = record.raw_grade["canary"]
    assert canary["nodeid"].startswith("tests/test_") and "isolated" not in record.raw_grade
    # the raw output still shows the canary's one failure; the verdict was judged without it
    assert f"FAILED {canary['nodeid']}" in record.raw_grade["test"]["output_tail"]


@pytest.mark.parametrize("case_id", ["force-pass", "forge-exit"])
def test_forging_the_verdict_wholesale_is_caught(records, case_id):
    alone = _record(records, f"{case_id} (no scan)")
    assert alone.reward == 0.0 and alone.raw_grade["reason"].startswith("tampered"), why(alone)
    record = _record(records, case_id)  # strict as it is: the scan names the code first
    assert record.reward == 0.0 and record.raw_grade["reason"].startswith("test-aware code: "), why(record)


@pytest.mark.xfail(
    strict=True,
    reason="the canary's limit on a task whose tests import the code: code that "
    "knows the canary forges around it (docs/integrity.md); isolate the verdict",
)
def test_forging_around_the_canary_on_a_task_that_does_not_isolate(records):
    assert _record(records, "spare-the-canary (no scan)").reward == 0.0


def test_forging_around_the_canary_is_caught_by_the_test_awareness_scan(records):
    """What the canary alone cannot see, the scan of the agent's code does: the forgery has to
    reach pytest's internals from the code under test, and that is what it names."""
    record = _record(records, "spare-the-canary")
    assert record.reward == 0.0 and record.raw_grade["reason"].startswith("test-aware code: "), why(record)
