"""Hermetic grading of a captured diff in a FRESH workspace from the task's image.

    stager (root): reset workdir to the baseline (vault), apply the diff, write the hidden
    tests, hand the staged paths to uid 1000 -> tester (uid 1000 under the wall): the test
    command -> verdict

Both commands start before the submission exists and wait on their stdin
(``envs.coding.staging``): ``prepare`` starts them while the agent still works, or ``grade``
does. The hidden tests are written AFTER the diff, so an agent's edits to them are lost. The
verdict is a pure function of what the steps produced (``verdict_from_test_result``), and
``Verdict.raw`` keeps those products, so a stored run can be graded again (``regrade``).
A failure of grading itself (broken workspace, missing vault) raises ``GradeError``.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
import time
from typing import Mapping, Sequence

from engine.errors import GradeError, WorkspaceError
from engine.interfaces import AGENT_UID, ROOT_UID, Workspace
from engine.models import CapturedSubmission, Verdict
from engine.config.schema import IntegrityConfig
from envs.coding import canary as canaries
from envs.coding import isolated, patch, staging
from envs.coding.repo import baseline_of, workdir_of
from envs.coding.schema import CodingTaskConfig

OUTPUT_TAIL_BYTES = 8192
DEFAULT_TESTS_RAN = (r"(?m)^(?!.*\b[1-9][0-9]* (?:failed|skipped|deselected|xfailed|xpassed|errors?)\b)"
                     r".*\b[1-9][0-9]* passed\b")
"""The schema's default (engine/config/schema.py TaskConfig.tests_ran_regex), for raw grades without one."""
TIMEOUT_RESERVE = 5.0
STAGE_OUTPUT_BYTES = 8 << 20
"""git apply --verbose names every file: room for a big diff's, so no record line is dropped."""
TEST_OUTPUT_BYTES = 1 << 20


async def prepare(ws: Workspace, task: CodingTaskConfig, integrity: IntegrityConfig) -> staging.Staging:
    """Start grading's commands in ``ws`` (a fresh grading workspace) ahead of ``grade``: the
    reset to the baseline runs at once, the rest waits for the submission. Raises ``GradeError``."""
    hidden = [str(rel) for rel in task.hidden_tests or []]
    for rel in hidden:
        _check_relative(rel)
    uid_wall = bool(integrity.uid_wall)
    workdir = workdir_of(task, GradeError)
    plan = isolated.plan(str(task.test_command), hidden, workdir=workdir, uid_wall=uid_wall,
                         separate=_isolates(task, integrity)) if task.isolated_verdict else None
    canary = canaries.make(hidden) if _wants_canary(task, integrity) else None
    staged = [*hidden, canary.rel] if canary else hidden  # the canary runs last
    if plan is not None:  # a scenario task: the plan says what runs the tests, as whom, and where
        command, user, verdict, support = plan.command, plan.user, plan.verdict, list(plan.support)
        gates_itself, shown = plan.gates_itself, plan.shown
    else:
        command, user = _test_command(task, staged, canary is not None), AGENT_UID if uid_wall else ROOT_UID
        verdict, support, gates_itself, shown = None, [], False, None
    try:
        ready = await staging.start(ws, workdir=workdir, baseline=baseline_of(task, GradeError), uid_wall=uid_wall,
                                    hidden=staged, command=command, user=user, verdict=verdict, support=support,
                                    gates_itself=gates_itself, shown=shown,
                                    preamble=plan.preamble if plan is not None else b"")
    except WorkspaceError as exc:
        raise GradeError(f"grading workspace failed: {exc}") from exc
    return dataclasses.replace(ready, canary=canary, isolation=plan)


def _isolates(task: CodingTaskConfig, integrity: IntegrityConfig) -> bool:
    """Whether the verdict is isolated: a scenario task, graded in a mode that asks for it."""
    return bool(task.isolated_verdict) and bool(integrity.isolate_verdict)


def _shape_of(ready: staging.Staging) -> tuple[bool, bool | None]:
    """How a prepared staging grades: (with a canary, how scenarios run: separate / in
    pytest's process / None, not a scenario task)."""
    return bool(ready.canary), None if ready.isolation is None else ready.isolation.separate


def _shape_for(task: CodingTaskConfig, integrity: IntegrityConfig) -> tuple[bool, bool | None]:
    """The same, as ``task`` under ``integrity`` needs it."""
    return _wants_canary(task, integrity), _isolates(task, integrity) if task.isolated_verdict else None


def _wants_canary(task: CodingTaskConfig, integrity: IntegrityConfig) -> bool:
    """A canary guards tests that share pytest's process with the code under test; an
    isolated verdict has none of that code in there to catch."""
    return (bool(integrity.canary) and not _isolates(task, integrity)
            and canaries.wanted(str(task.test_command)))


def _hidden_of(ready: staging.Staging) -> tuple[str, ...]:
    """The task's hidden tests a staging was prepared for (its canary aside)."""
    return ready.hidden[:-1] if ready.canary else ready.hidden


async def grade(
    ws: Workspace,
    task: CodingTaskConfig,
    integrity: IntegrityConfig,
    submission: CapturedSubmission,
    hidden_files: Mapping[str, bytes],
    timeout: float,
    prepared: staging.Staging | None = None,
) -> Verdict:
    """Grade ``submission`` in ``ws`` (a fresh workspace, maybe ``prepare``d). Raises ``GradeError``."""
    deadline = time.monotonic() + timeout
    for rel in hidden_files:
        _check_relative(rel)
    raw: dict = {"durations": {}, "violations": list(submission.violations),
                 "hidden_files": sorted(hidden_files), "tests_ran_regex": _tests_ran_regex(task), "canary": None}
    try:
        if prepared is not None and (_hidden_of(prepared) != tuple(hidden_files)
                                     or _shape_of(prepared) != _shape_for(task, integrity)):
            await _dismiss(prepared)  # prepared for other hidden tests or another mode: not usable
            prepared = None
        ready = prepared or await prepare(ws, dataclasses.replace(task, hidden_tests=list(hidden_files)), integrity)
        staged = dict(hidden_files)
        if ready.canary is not None:
            staged[ready.canary.rel] = ready.canary.body
            raw["canary"] = ready.canary.record()
        elif integrity.canary and _isolates(task, integrity):
            raw["canary"] = {"skipped": "isolated verdict: no code under test runs in pytest's process"}
        elif integrity.canary:
            raw["canary"] = {"skipped": "the test command is not a pytest run over {test_files}"}
        owned: Mapping[str, bytes] = dict(staged)  # what lands in the repo, and so is handed to uid 1000
        if ready.isolation is not None:
            raw["isolated"] = ready.isolation.record()
            owned = {} if ready.isolation.separate else owned
            staged.update(ready.isolation.support)
        try:
            raw["apply"], hidden_seconds, seconds = await _stage(ready, submission.diff, staged, deadline, owned)
            # One command did both; "hidden" is its in-container share, so the two still add up.
            raw["durations"]["stage"] = round(max(0.0, seconds - hidden_seconds), 4)
            if raw["apply"]["ok"]:
                raw["durations"]["hidden"] = round(hidden_seconds, 4)
                raw["test"] = await _run_tests(ready, task, deadline)
                raw["durations"]["test"] = raw["test"].pop("seconds")
        finally:
            await _dismiss(ready)
    except WorkspaceError as exc:
        raise GradeError(f"grading workspace failed: {exc}") from exc
    return regrade(raw)


def _left(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise GradeError(f"grade timeout spent before {what}")
    return left


def _patch_variants(diff: str) -> list[tuple[str, bytes]]:
    """The diff as captured (with a final newline); if it has CRLF line ends, also with LF."""
    if not diff.strip():
        return []
    data = patch.ensure_trailing_newline(diff.encode("utf-8", "surrogateescape"))
    variants = [("as-captured", data)]
    if b"\r\n" in data:
        variants.append(("crlf-normalised", data.replace(b"\r\n", b"\n")))
    return variants


async def _stage(ready: staging.Staging, diff: str, hidden: Mapping[str, bytes],
                 deadline: float, in_repo: Mapping[str, bytes]) -> tuple[dict, float, float]:
    """Hand the submission to the stager: (the apply record, seconds writing the hidden tests,
    seconds in all). ``in_repo``: those of ``hidden`` written into the repo."""
    variants = _patch_variants(diff)
    stdin = staging.submission_input(variants, list(hidden.values()), _staged_paths(diff, in_repo))
    done = await staging.run(ready.stager, stdin, _left(deadline, "staging"), STAGE_OUTPUT_BYTES)
    text = done.output.decode("utf-8", "replace")
    if done.timed_out or done.exit_code not in (0, staging.NOT_APPLIED):
        raise GradeError(f"cannot stage the submission: {_brief(text, done.exit_code)}")
    attempts, hidden_seconds = _records(text, ready.nonce)
    return {"ok": done.exit_code == 0, "empty": not variants, "attempts": attempts}, hidden_seconds, done.seconds


async def _dismiss(ready: staging.Staging) -> None:
    """Let whichever of the two commands still waits go (the tester, when nothing applied)."""
    for waiting in (ready.stager, ready.tester):
        try:
            await staging.dismiss(waiting)
        except (BrokenPipeError, WorkspaceError):
            pass


def _staged_paths(diff: str, hidden: Mapping[str, bytes]) -> list[str] | None:
    """Every path the diff or the hidden tests write, with each parent directory; None when
    the diff cannot be listed (not git's format), so the whole tree is handed over."""
    try:
        written = [c.new_path for c in patch.parse_chunks(diff.encode("utf-8", "surrogateescape"))]
    except ValueError:
        return None
    paths: set[str] = set()
    for rel in [*written, *hidden]:
        parts = rel.split("/")
        paths.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(paths)


def _records(output: str, nonce: str) -> tuple[list[dict], float]:
    """The stager's records: the apply attempts (each with the output before its record) and
    the seconds spent writing the hidden tests."""
    attempts, lines, hidden_seconds = list[dict](), list[str](), 0.0
    for line in output.split("\n"):
        fields = line.split(" ")
        record = fields[1] if len(fields) == 4 and fields[0] == nonce else None
        if record == "apply":
            text = "\n".join(lines).strip("\n")
            attempts.append({"variant": fields[2], "exit_code": int(fields[3]), "output": _tail_text(text)})
            lines = []
        elif record == "hidden":
            hidden_seconds = max(0.0, float(fields[3]) - float(fields[2]))
        elif record == "received":
            lines = []  # what the reset printed
        else:
            lines.append(line)
    return attempts, hidden_seconds


def _test_command(task: CodingTaskConfig, hidden: Sequence[str], canary: bool = False) -> str:
    files = " ".join(shlex.quote(p) for p in hidden)
    if canary:
        # The canary's failure must be named in pytest's short summary, whatever reportchars
        # the task's command chose (-rN would hide it and fail an honest run): -r is "last
        # one wins", and this comes after the task's own options before {test_files}.
        files += " -rfE"
    return str(task.test_command).replace("{test_files}", files)


async def _run_tests(ready: staging.Staging, task: CodingTaskConfig, deadline: float) -> dict:
    # A little of the grade budget is kept back, so a slow suite ends as "test timeout" here
    # rather than as the engine cancelling the whole grade.
    limit = min(float(task.test_timeout or 600.0), max(1.0, _left(deadline, "tests") - TIMEOUT_RESERVE))
    done = await staging.run(ready.tester, b"go\n", limit, TEST_OUTPUT_BYTES)
    if not done.delivered:  # an infrastructure failure, never a score
        raise GradeError(f"the test command had ended before it was started: "
                         f"{_brief(done.output.decode('utf-8', 'replace'), done.exit_code)}")
    user = ready.isolation.pytest_uid if ready.isolation is not None else ready.user  # pytest's, not a launcher's
    return {"command": ready.command, "user": user, "exit_code": done.exit_code, "timed_out": done.timed_out,
            "timeout": limit, "output_tail": _tail_text(done.output.decode("utf-8", "replace")),
            "output_bytes": done.output_bytes, "seconds": round(done.seconds, 4)}


def _brief(text: str, exit_code: int, limit: int = 2000) -> str:
    text = text.strip()
    return text[-limit:] if text else f"(no output, exit code {exit_code})"


def verdict_from_test_result(
    *,
    applied: bool,
    test_exit_code: int | None,
    timed_out: bool,
    output_tail: str,
    tests_ran_regex: str = DEFAULT_TESTS_RAN,
    raw: dict | None = None,
    canary: Mapping | None = None,
) -> Verdict:
    """The verdict, from captured outputs only. 1.0 iff the diff applied, the tests exited 0
    within the timeout AND the output shows tests actually ran — with a ``canary`` (its
    record), judged as if it had not run, and 0 when it was not reported failed."""
    test_exit_code, output_tail, tampered = canaries.account(test_exit_code, output_tail, canary)
    try:
        ran = re.search(tests_ran_regex, output_tail) is not None
    except re.error as exc:
        raise GradeError(f"task tests_ran_regex {tests_ran_regex!r} is invalid: {exc}") from exc
    if not applied:
        reason = "diff does not apply"
    elif timed_out:
        reason = "test timeout"
    elif tampered:
        reason = tampered
    elif test_exit_code != 0:
        reason = "tests failed"
    elif not ran:
        reason = "no tests ran"
    else:
        reason = "tests passed"
    reward = 1.0 if reason == "tests passed" else 0.0
    return Verdict(reward=reward, subscores={"tests": reward}, raw={**(raw or {}), "reason": reason})


def regrade(raw: Mapping) -> Verdict:
    """Grade again from a stored ``Verdict.raw`` (what ``grade`` recorded)."""
    test = raw.get("test") or {}
    return verdict_from_test_result(
        applied=bool((raw.get("apply") or {}).get("ok")),
        test_exit_code=test.get("exit_code"),
        timed_out=bool(test.get("timed_out")),
        output_tail=str(test.get("output_tail", "")),
        tests_ran_regex=str(raw.get("tests_ran_regex") or DEFAULT_TESTS_RAN),
        raw=dict(raw),
        canary=raw.get("canary"),
    )


def _tests_ran_regex(task: CodingTaskConfig) -> str:
    return str(task.tests_ran_regex or DEFAULT_TESTS_RAN)


def _tail_text(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= OUTPUT_TAIL_BYTES:
        return text
    return data[-OUTPUT_TAIL_BYTES:].decode("utf-8", "ignore")


def _check_relative(rel: str) -> None:
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or not rel.strip("/"):
        raise GradeError(f"hidden test path {rel!r} must be relative and inside the repo")
