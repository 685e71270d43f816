"""Judging a run's named test results against a task's FAIL_TO_PASS / PASS_TO_PASS lists.

The results are read by a result source (``envs.integrity.sources``, chosen by
``ResultsConfig.format`` in ``envs/coding/schema.py``); ``judge_lists`` grades them against the
lists the engine's ``crucible lock`` derived (``engine.plan.lock.derive_lists``). A pure
function of its arguments, so a stored run regrades.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity.sources.base import merge_worst

_FAILED_LIST_LIMIT = 20


def judge_lists(
    results: Sequence[TestResult], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> tuple[bool, dict]:
    """True iff every test named in either list is PASSED in ``results``; a test the results
    do not name counts as failed (status ``MISSING``). Tests in neither list do not matter.
    The dict says, per list, how many passed of how many, and the first 20 that did not (in
    the list's order, with their status). A name listed twice counts once.
    Raises ``GradeError`` when both lists are empty: that would pass any run at all."""
    if not fail_to_pass and not pass_to_pass:
        raise GradeError("judge_lists: fail_to_pass and pass_to_pass are both empty; nothing to judge")
    statuses = {result.name: result.status for result in merge_worst(results)}
    detail = {"fail_to_pass": _judge_one(statuses, fail_to_pass), "pass_to_pass": _judge_one(statuses, pass_to_pass)}
    ok = all(part["passed"] == part["total"] for part in detail.values())
    return ok, detail


def _judge_one(statuses: Mapping[str, str], names: Sequence[str]) -> dict:
    wanted = list(dict.fromkeys(names))
    failing = [
        {"name": name, "status": statuses.get(name, "MISSING")} for name in wanted if statuses.get(name) != "PASSED"
    ]
    return {"passed": len(wanted) - len(failing), "total": len(wanted), "failing": failing[:_FAILED_LIST_LIMIT]}
