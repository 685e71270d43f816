"""What the coding flavor tells a task's author in ``crucible check``'s output
(``engine.interfaces.AdvisesAuthors``): the command that fixes a gate side failed by skips,
a prompt still as ``crucible task new`` took it from the fix's commit, a canary the test
command leaves no room for, a lock asked of a task whose grading names no tests. Pure functions of the planned task and one raw grade."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.models import RunSpec
from envs.coding import canary, grader, judging, reading
from envs.coding.upstream import prompt_digest


def remedy(spec: RunSpec, raw: Mapping[str, Any]) -> str | None:
    if raw.get("reason") == judging.TESTS_SKIPPED:
        # A lock lists the tests the fix flips and those that keep passing; the reward is then
        # decided on them, so a skip or an xfail elsewhere in the suite no longer counts.
        return f"run `crucible lock task={spec.task_id}` to list the task's tests (fail_to_pass/pass_to_pass)"
    return None


def notes(spec: RunSpec, raw: Mapping[str, Any]) -> list[str]:
    task, found = spec.task, []
    digest = getattr(task, "prompt_from_commit", "")
    if digest and prompt_digest(str(task.prompt)) == digest:
        found.append(
            "prompt is still the fix's commit message, which usually names the fix: write the task's "
            "own `prompt:` in its YAML (an issue's words)"
        )
    skipped = (raw.get("canary") or {}).get("skipped")
    if skipped == canary.NOT_WANTED and canary.lacks_test_files(str(task.test_command)):
        found.append(
            "no canary (raw_grade.canary.skipped): the test command has no {test_files}, where the "
            "grader adds its canary test to pytest's arguments; put {test_files} in test_command for one"
        )
    return found


def lock_refusal(spec: RunSpec) -> str | None:
    task, integrity = spec.task, spec.integrity
    if grader.isolates(task, integrity):
        # The isolated verdict's pytest runs outside the repo and is judged by its launcher,
        # per scenario: there are no per-test results to split into lists, and none needed.
        return (
            f"task '{task.id}' reads no named test results (isolated_verdict: true under "
            f"integrity={integrity.mode}: its launcher judges the scenarios), so there are no tests to lock; "
            "it needs none: `crucible check` gates it as it is (a lock is for a task whose results name each "
            "test: results.format pytest, go or parser, without isolated_verdict)"
        )
    if reading.declared_format(task) == "none":
        return (
            f"task '{task.id}' reads no named test results (results.format {task.results.format!r} for "
            f"`{task.test_command}`), so there are no tests to lock: set results.format (pytest, go, parser)"
        )
    return None
