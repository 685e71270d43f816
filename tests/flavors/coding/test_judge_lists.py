"""envs/coding/results.py (``judge_lists``): a run's named results judged against a task's lists, and the lists
derived from runs (engine.plan.lock.derive_lists)."""

from __future__ import annotations

import json

import pytest

from engine.errors import GradeError
from engine.models import TestResult
from engine.plan.lock import derive_lists
from envs.coding.results import judge_lists

# --- judge_lists ----------------------------------------------------------------------------

RUN = [
    TestResult("t::fixed", "PASSED"),
    TestResult("t::kept", "PASSED"),
    TestResult("t::other_skip", "SKIPPED"),
    TestResult("t::other_fail", "FAILED"),
    TestResult("t::still_broken", "FAILED"),
]


def test_judge_lists_passes_when_both_lists_pass_whatever_else_failed():
    ok, detail = judge_lists(RUN, ["t::fixed"], ["t::kept"])
    assert ok, "tests outside both lists (a skip, a failure) do not matter"
    assert detail == {
        "fail_to_pass": {"passed": 1, "total": 1, "failing": []},
        "pass_to_pass": {"passed": 1, "total": 1, "failing": []},
    }, "counts per list"
    assert json.loads(json.dumps(detail)) == detail, "the detail is plain JSON data"


def test_judge_lists_counts_a_missing_test_as_failed():
    ok, detail = judge_lists(RUN, ["t::fixed", "t::gone", "t::still_broken"], ["t::kept", "t::other_skip"])
    assert not ok, "a missing fail_to_pass test fails the run"
    assert detail["fail_to_pass"] == {
        "passed": 1,
        "total": 3,
        "failing": [{"name": "t::gone", "status": "MISSING"}, {"name": "t::still_broken", "status": "FAILED"}],
    }, "failing names keep the list's order and say their status"
    assert detail["pass_to_pass"] == {
        "passed": 1,
        "total": 2,
        "failing": [{"name": "t::other_skip", "status": "SKIPPED"}],
    }, "a skip inside a list is not a pass"


def test_judge_lists_shows_at_most_twenty_failing_and_counts_duplicates_once():
    names = [f"t::n{i:02d}" for i in range(25)]
    ok, detail = judge_lists(RUN, ["t::fixed", "t::fixed"], names)
    assert not ok
    assert detail["fail_to_pass"]["total"] == 1, "a name listed twice counts once"
    assert detail["pass_to_pass"]["total"] == 25 and detail["pass_to_pass"]["passed"] == 0
    assert [f["name"] for f in detail["pass_to_pass"]["failing"]] == names[:20], "the first 20 failing, in order"


def test_judge_lists_uses_the_worst_of_duplicate_results():
    ok, _ = judge_lists([TestResult("t::a", "PASSED"), TestResult("t::a", "ERROR")], ["t::a"], [])
    assert not ok, "a passed test whose teardown errored is not passed"


def test_judge_lists_refuses_two_empty_lists():
    with pytest.raises(GradeError, match="both empty"):
        judge_lists(RUN, [], [])


# --- derive_lists ---------------------------------------------------------------------------


def _run(**statuses: str) -> list[TestResult]:
    return [TestResult(name, status) for name, status in statuses.items()]


def test_derive_lists_by_hand_count_over_two_repeats():
    baseline = [
        _run(
            bug="FAILED",
            keep="PASSED",
            gone_in_base="SKIPPED",
            wobbly="PASSED",
            flip_fail="FAILED",
            half_seen="PASSED",
            still_bad="FAILED",
            new_mod="ERROR",
        ),
        _run(
            bug="FAILED", keep="PASSED", gone_in_base="SKIPPED", wobbly="FAILED", flip_fail="ERROR", still_bad="FAILED"
        ),
    ]
    golden = [
        _run(
            bug="PASSED",
            keep="PASSED",
            gone_in_base="PASSED",
            wobbly="PASSED",
            flip_fail="PASSED",
            half_seen="PASSED",
            still_bad="FAILED",
            new_mod="PASSED",
            added="PASSED",
            g_flaky="PASSED",
        ),
        _run(
            bug="PASSED",
            keep="PASSED",
            gone_in_base="PASSED",
            wobbly="PASSED",
            flip_fail="PASSED",
            half_seen="PASSED",
            still_bad="FAILED",
            new_mod="PASSED",
            added="PASSED",
            g_flaky="FAILED",
        ),
    ]
    assert derive_lists(baseline, golden) == {
        # bug: FAILED -> PASSED. gone_in_base: SKIPPED -> PASSED. new_mod: ERROR, then missing (not a
        # difference: missing is not passed either) -> PASSED. added: missing in baseline -> PASSED.
        # flip_fail: FAILED, then ERROR in baseline: not passed either way, so not flaky -> PASSED.
        "fail_to_pass": ["added", "bug", "flip_fail", "gone_in_base", "new_mod"],
        "pass_to_pass": ["keep"],
        # wobbly: PASSED/FAILED in baseline. half_seen: PASSED, then missing in baseline.
        # g_flaky: PASSED/FAILED in golden. still_bad fails in every run: in no list.
        "flaky": ["g_flaky", "half_seen", "wobbly"],
    }, "hand count: flaky tests are in neither list"


def test_derive_lists_with_one_run_each_has_no_flaky():
    got = derive_lists([_run(a="FAILED", b="PASSED")], [_run(a="PASSED", b="PASSED", c="SKIPPED")])
    assert got == {"fail_to_pass": ["a"], "pass_to_pass": ["b"], "flaky": []}, "a skip in golden goes in no list"


def test_derive_lists_needs_a_run_of_each_role():
    with pytest.raises(ValueError, match="0 baseline, 1 golden"):
        derive_lists([], [_run(a="PASSED")])
