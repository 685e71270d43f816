"""The coding flavor's verdict: an ordered list of guard clauses (``VERDICT``) over the typed
raw grade (envs/integrity/raw.py), read top to bottom (envs/integrity/guards.py).

A pure function of the recorded raw grade and the task's lists (``regrade``), so a stored run
is graded again the same way. Each guard that belongs to one of the flavor's defences names it
(envs/coding/defences.py), so the catalogue says which check each defence adds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import GradeError
from engine.models import TestResult, Verdict
from envs.coding import audit, rerun, results, runner_end
from envs.coding import canary as canaries
from envs.coding.schema import CodingTaskConfig
from envs.integrity import guards
from envs.integrity.guards import Guard
from envs.integrity.raw import RawGrade
from envs.integrity.scan import model

DEFAULT_TESTS_RAN = (
    r"(?m)^(?!.*\b[1-9][0-9]* (?:failed|skipped|deselected|xfailed|xpassed|errors?)\b)"
    r".*\b[1-9][0-9]* passed\b"
)
"""The schema's default (engine/config/schema.py TaskConfig.tests_ran_regex), for raw grades without one."""
PASSED = "tests passed"
TESTS_SKIPPED = "tests skipped (a task whose tests skip or xfail lists fail_to_pass/pass_to_pass)"
"""The reason of a plain judgement (no lists) that met a skip or an xfail."""
TEXT_ONLY = (
    "text-only verdict refused: the task reads no named test results (results.format none), "
    "and its exit code and output are the tested code's to write"
)


@dataclass
class Case:
    """What the guards read: one grading's raw grade, the canary taken out of it, with the
    task's lists and allowances. ``detail`` is the lists' judgement, once made."""

    applied: bool
    exit_code: int | None
    """The test command's exit code as the canary leaves it (its own failure accounted for)."""
    timed_out: bool
    output_tail: str
    tests_ran_regex: str
    named: Mapping[str, Any] | None
    tests: list[TestResult] | None
    results_problem: str | None
    named_only: bool
    text_only: bool
    tampered: str | None
    unbelieved: str | None
    refused: list
    scan_refuses: bool
    fail_to_pass: Sequence[str] = ()
    pass_to_pass: Sequence[str] = ()
    allowed: Sequence[model.Allowance] = ()
    audit: Mapping[str, Any] | None = None
    audit_scope: Any = None
    detail: dict = field(default_factory=dict)


def _applies(case: Case) -> str | None:
    return None if case.applied else "diff does not apply"


def _test_aware(case: Case) -> str | None:
    if not (case.refused and case.scan_refuses):
        return None
    more = f" (and {len(case.refused) - 1} more)" if len(case.refused) > 1 else ""
    return f"test-aware code: {model.Finding(**case.refused[0]).describe()}{more}"


def _text_only(case: Case) -> str | None:
    return TEXT_ONLY if case.named_only and case.text_only else None


def _timeout(case: Case) -> str | None:
    return "test timeout" if case.timed_out else None


def _named_results(case: Case) -> str | None:
    return f"no named test results: {case.results_problem}" if case.results_problem else None


def _lists(case: Case) -> str | None:
    if case.tests is None or not (case.fail_to_pass or case.pass_to_pass):
        return None
    ok, case.detail = results.judge_lists(case.tests, case.fail_to_pass, case.pass_to_pass)
    return PASSED if ok else "named tests not passed: " + _failing_brief(case.detail)


def _plain(case: Case) -> str | None:
    if case.tests is None:
        return None
    reason = _judge_plain(case.tests, case.exit_code)
    # A deselected test leaves no trace in a per-test report, but pytest's summary says
    # "N deselected", which the pass pattern refuses: without lists, a pytest run must
    # satisfy both (so the pattern can only make it stricter); so must a task's own pattern.
    reads_summary = (case.named or {}).get("format") == "pytest" or case.tests_ran_regex != DEFAULT_TESTS_RAN
    if reason == PASSED and reads_summary:
        reason = _judge_text(case.exit_code, case.output_tail, case.tests_ran_regex)
    return reason


def _text(case: Case) -> str | None:
    return _judge_text(case.exit_code, case.output_tail, case.tests_ran_regex)


def _audit(case: Case) -> str | None:
    return audit.tampered(case.audit, case.allowed, case.audit_scope)


VERDICT: tuple[Guard[Case], ...] = (
    Guard("diff applies", _applies),
    Guard("test-aware code refused", _test_aware, defence="refuse_test_aware_code"),
    Guard("text-only verdict refused", _text_only, defence="named_results_only"),
    Guard("test timeout", _timeout),
    Guard("canary tampered", lambda case: case.tampered, defence="canary"),
    Guard("end marker unbelieved", lambda case: case.unbelieved, defence="named_results_only"),
    Guard("no named results", _named_results),
    Guard("lists judged", _lists, kind="judge"),
    Guard("plain results judged", _plain, kind="judge"),
    Guard("text judged", _text, kind="judge"),
    Guard("runtime audit", _audit, kind="on_pass", defence="refuse_test_aware_code"),
)
"""The verdict, in order: the first refusal is the reason, else the first judgement that
applies; a pass the runtime audit refuses is tampered (a failing verdict keeps its own reason)."""


def verdict_from_test_result(
    *,
    applied: bool,
    test_exit_code: int | None,
    timed_out: bool,
    output_tail: str,
    tests_ran_regex: str = DEFAULT_TESTS_RAN,
    raw: dict | None = None,
    canary: Mapping | None = None,
    named: Mapping | None = None,
    fail_to_pass: Sequence[str] = (),
    pass_to_pass: Sequence[str] = (),
    scan: Mapping | None = None,
    allowed: Sequence[model.Allowance] = (),
) -> Verdict:
    """The verdict, from captured outputs only (``VERDICT`` over ``case``): with named results
    (``named``, the raw grade's ``results``), every listed test PASSED, else exit 0 with at
    least one PASSED and nothing FAILED, ERROR or SKIPPED (for pytest and a task's own
    ``tests_ran_regex``, the pattern must match too); without, exit 0 and the pattern. From
    ``raw``: the end markers, ``named_results_only``, the runtime audit's record."""
    built = case(
        applied=applied,
        test_exit_code=test_exit_code,
        timed_out=timed_out,
        output_tail=output_tail,
        tests_ran_regex=tests_ran_regex,
        raw=raw,
        canary=canary,
        named=named,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        scan=scan,
        allowed=allowed,
    )
    reason = guards.verdict(VERDICT, built, PASSED)
    reward = 1.0 if reason == PASSED else 0.0
    verdict_raw = {**(raw or {}), "reason": reason}
    if built.detail:
        verdict_raw["lists"] = built.detail
    return Verdict(reward=reward, subscores={"tests": reward}, raw=verdict_raw, tests=built.tests or [])


def case(
    *,
    applied: bool,
    test_exit_code: int | None,
    timed_out: bool,
    output_tail: str,
    tests_ran_regex: str = DEFAULT_TESTS_RAN,
    raw: Mapping | None = None,
    canary: Mapping | None = None,
    named: Mapping | None = None,
    fail_to_pass: Sequence[str] = (),
    pass_to_pass: Sequence[str] = (),
    scan: Mapping | None = None,
    allowed: Sequence[model.Allowance] = (),
) -> Case:
    """The guards' ``Case``: the canary taken out of the results and the exit code (judged
    from the named results where there are some), the report checked against the run's end
    markers (envs/coding/runner_end.py) before that."""
    test = (raw or {}).get("test") or {}
    tests, results_problem = _named_tests(named)
    named_only = bool((raw or {}).get("named_results_only"))
    # The report against pytest's own end and summary (envs/coding/runner_end.py), before the
    # canary's failure is taken out of either.
    as_reported = _named_tests((raw or {}).get("results"))[0] if (raw or {}).get("renamed") else None
    unbelieved = runner_end.check(test.get("end"), named, tests, output_tail, named_only, as_reported)
    exit_code = test_exit_code
    test_exit_code, output_tail, tampered = canaries.account(test_exit_code, output_tail, canary)
    if tests is not None and results_problem is None and canary and "nodeid" in canary:
        # Judged from the named results, not the text: the canary FAILED, and it is the only
        # failure there, explains pytest's exit 1; an exit 0 beside it is a forged exit.
        own = [t for t in tests if t.name == canary["nodeid"]]
        tests = [t for t in tests if t.name != canary["nodeid"]]
        if [t.status for t in own] != ["FAILED"] or exit_code == 0:
            tampered = tampered or canaries.TAMPERED
        elif exit_code == 1 and not any(t.status in ("FAILED", "ERROR") for t in tests):
            test_exit_code = 0
        else:
            test_exit_code = exit_code
    text_only = (not (named or {}).get("format") or (named or {}).get("format") == "none") and not (
        ((raw or {}).get("isolated") or {}).get("separate")
    )
    refused, _ = model.judge((scan or {}).get("findings") or [], allowed)
    return Case(
        applied=applied,
        exit_code=test_exit_code,
        timed_out=timed_out,
        output_tail=output_tail,
        tests_ran_regex=tests_ran_regex,
        named=named,
        tests=tests,
        results_problem=results_problem,
        named_only=named_only,
        text_only=text_only,
        tampered=tampered,
        unbelieved=unbelieved,
        refused=refused,
        scan_refuses=bool((scan or {}).get("refuse")),
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        allowed=allowed,
        audit=test.get("audit"),
        audit_scope=(raw or {}).get("audit_scope"),
    )


def _named_tests(named: Mapping | None) -> tuple[list[TestResult] | None, str | None]:
    """(the named results, or None where the task reads none; why they are missing)."""
    if not named or named.get("format", "none") == "none":
        return None, None
    if named.get("error"):
        return [], str(named["error"])
    return [TestResult(str(t["name"]), str(t["status"])) for t in named.get("tests") or []], None


def _judge_plain(tests: Sequence[TestResult], exit_code: int | None) -> str:
    """No lists: the named-results form of the default pass pattern."""
    statuses = {t.status for t in tests}
    if exit_code != 0 or statuses & {"FAILED", "ERROR"}:
        return "tests failed"
    if "SKIPPED" in statuses:
        # Code under test calling pytest.skip() where it would fail must not pass; a task whose
        # tests legitimately skip or xfail names its tests (fail_to_pass / pass_to_pass, a lock).
        return TESTS_SKIPPED
    if "PASSED" not in statuses:
        return "no tests ran"
    return PASSED


def _judge_text(exit_code: int | None, output_tail: str, tests_ran_regex: str) -> str:
    try:
        ran = re.search(tests_ran_regex, output_tail) is not None
    except re.error as exc:
        raise GradeError(f"task tests_ran_regex {tests_ran_regex!r} is invalid: {exc}") from exc
    if exit_code != 0:
        return "tests failed"
    if not ran:
        return "no tests ran"
    return PASSED


def _failing_brief(detail: Mapping) -> str:
    parts = []
    for key in ("fail_to_pass", "pass_to_pass"):
        part = detail.get(key) or {}
        if part.get("total"):
            parts.append(f"{key} {part.get('passed')}/{part.get('total')}")
    failing = [
        *((detail.get("fail_to_pass") or {}).get("failing") or []),
        *((detail.get("pass_to_pass") or {}).get("failing") or []),
    ]
    first = failing[0] if failing else None
    named = f"{first.get('name')} {first.get('status')}" if isinstance(first, Mapping) else first
    return ", ".join(parts) + (f" (first: {named})" if first else "")


def with_rerun(first: Verdict, second: Verdict, task: CodingTaskConfig | None = None) -> Verdict:
    """One verdict from a grading and its differential re-run: the first's, with the re-run's
    raw grade kept beside it (``rerun``), and 0 as tampered when the two disagree."""
    kept = {k: v for k, v in first.raw.items() if k not in ("reason", "lists")}
    return regrade({**kept, "rerun": second.raw}, task)


def regrade(raw: Mapping, task: CodingTaskConfig | None = None) -> Verdict:
    """Grade again from a stored ``Verdict.raw`` (what ``grade`` recorded) and the task's
    lists (from the stored spec: the lists are the task's, not the run's). With a differential
    re-run's raw grade in ``rerun``, that is judged the same way, and any disagreement between
    the two scores 0 as tampered (``rerun_differences`` says where; a first verdict that failed
    already keeps its reason)."""
    verdict = _regrade_one({k: v for k, v in raw.items() if k not in ("rerun", "rerun_differences")}, task)
    again = RawGrade.from_dict(raw).rerun
    if again is None:
        return verdict
    second = _regrade_one(again, task)
    verdict.raw["rerun"] = second.raw  # the re-run's own verdict (its reason) kept beside the first
    listed = {*task.fail_to_pass, *task.pass_to_pass} if task is not None else set()
    found = rerun.differences(verdict.reward, verdict.tests, second.reward, second.tests, judged=listed)
    if found:
        verdict.raw["rerun_differences"] = found
        if verdict.reward:  # a first verdict that already failed keeps its own, more telling reason
            verdict.raw["reason"] = rerun.TAMPERED
            verdict.reward, verdict.subscores = 0.0, {"tests": 0.0}
    return verdict


def case_of(raw: Mapping, task: CodingTaskConfig | None = None) -> Case:
    """The guards' ``Case`` for one grading's stored raw grade (a re-run's results read under
    the task's ids)."""
    return case(**_arguments(raw, task))


def _regrade_one(raw: Mapping, task: CodingTaskConfig | None) -> Verdict:
    """``regrade`` of one grading's raw grade; a re-run's results read under the task's ids."""
    return verdict_from_test_result(**_arguments(raw, task))


def _arguments(raw: Mapping, task: CodingTaskConfig | None) -> dict[str, Any]:
    """``verdict_from_test_result``'s arguments, from a stored raw grade (typed on the way)."""
    grade = RawGrade.from_dict(raw)
    named = raw.get("results")
    if grade.renamed is not None and isinstance(named, Mapping) and named.get("tests"):
        named = {**named, "tests": rerun.map_back(named["tests"], rerun.recorded_names(grade.renamed))}
    return dict(
        applied=grade.apply.ok,
        test_exit_code=grade.test.exit_code,
        timed_out=grade.test.timed_out,
        output_tail=grade.test.output_tail,
        tests_ran_regex=grade.tests_ran_regex or DEFAULT_TESTS_RAN,
        raw={k: v for k, v in raw.items() if k not in ("reason", "lists")},
        canary=raw.get("canary"),
        named=named,
        fail_to_pass=list(task.fail_to_pass) if task is not None else (),
        pass_to_pass=list(task.pass_to_pass) if task is not None else (),
        scan=raw.get("scan"),
        allowed=[model.Allowance(a.rule, a.path, a.reason) for a in task.allow_test_aware] if task is not None else (),
    )
