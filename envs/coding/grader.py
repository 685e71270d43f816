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

import asyncio
import dataclasses
import hashlib
import json
import logging
import platform
import posixpath
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import cast

from engine.errors import CrucibleError, GradeError, WorkspaceError
from engine.interfaces import AGENT_UID, ROOT_UID, Workspace
from engine.models import CapturedSubmission, Verdict
from engine.util.commit_memo import remembered
from envs.coding import audit, isolated, protect, reading, rerun, runner_end, staging
from envs.coding import canary as canaries
from envs.coding import hidden as hidden_change
from envs.coding.defences import CodingIntegrity
from envs.coding.hidden import HiddenFile
from envs.coding.judging import DEFAULT_TESTS_RAN, regrade
from envs.coding.repo import baseline_of, workdir_of
from envs.coding.schema import CodingTaskConfig
from envs.coding.testrun import (
    RESULTS_OUTPUT_BYTES,
    RESULTS_ROOT,
    brief,
    command_for_tests,
    dismiss,
    left,
    read_results,
    run_tests,
    start_reader,
    tail_text,
)
from envs.integrity import patch
from envs.integrity.scan import scanner

log = logging.getLogger(__name__)

STAGE_OUTPUT_BYTES = 8 << 20
"""git apply --verbose names every file: room for a big diff's, so no record line is dropped."""
SCAN_FILES = 1000
"""At most this many changed files are read for the test-awareness scan (Python files, binary
files changed by a delta); each one past it is a finding (``unscannable``), never passed unread."""


async def prepare(
    ws: Workspace,
    task: CodingTaskConfig,
    integrity: CodingIntegrity,
    hidden: Sequence[HiddenFile],
    renaming: rerun.Renaming | None = None,
) -> staging.Staging:
    """Start grading's commands in ``ws`` (a fresh grading workspace) ahead of ``grade``: the
    reset to the baseline runs at once, the rest waits for the submission. ``hidden``: the
    task's hidden change (``envs.coding.hidden``), maybe renamed by ``renaming`` (a
    differential re-run's, which also puts the test modules in another order, or a first
    grading's random names, the modules in the task's order). Raises ``GradeError``."""
    for item in hidden:
        _check_relative(item.path)
    uid_wall = bool(integrity.uid_wall)
    workdir = workdir_of(task, GradeError)
    modules = _test_files(task, hidden)
    if renaming is not None:
        modules = renaming.ordered(modules)
    separate = bool(task.isolated_verdict) and isolates(task, integrity)
    # read from git once per commit (a big repo's: a while), then kept: off the event loop
    preload = await asyncio.to_thread(_scenario_preload, task) if separate else None
    try:
        plan = (
            isolated.plan(
                str(task.test_command),
                modules,
                workdir=workdir,
                uid_wall=uid_wall,
                separate=separate,
                files=hidden,
                preload=preload,
            )
            if task.isolated_verdict
            else None
        )
    except ValueError as exc:
        raise GradeError(f"task {task.id}: {exc}") from exc
    canary = canaries.make(modules) if _wants_canary(task, integrity) and modules else None
    entries = [f.entry for f in hidden] + ([f"644 {canary.rel}"] if canary else [])  # the canary runs last
    results_format = reading.results_format(task, plan)
    results_dir = f"{RESULTS_ROOT}-{secrets.token_hex(8)}" if results_format == "pytest" else None
    if plan is not None:  # a scenario task: the plan says what runs the tests, as whom, and where
        command, user, support = plan.command, plan.user, list(plan.support)
        gates_itself, shown = plan.gates_itself, plan.shown
    else:
        command, user = command_for_tests(task, modules, canary), AGENT_UID if uid_wall else ROOT_UID
        support, gates_itself, shown = [], False, None
    # The isolated verdict's launcher writes the hidden tests itself, outside the repo: the
    # stager's are those that go into the repo.
    staged_entries = [] if plan is not None and plan.separate else entries
    end = None if gates_itself else (secrets.token_hex(16), secrets.token_hex(16))
    if end is not None:  # the shell's and pytest's ends marked (envs/coding/runner_end.py)
        shown = shown or command  # the record shows the task's command, not the report's plumbing
        command = runner_end.wrap(
            command,
            results_dir,
            hide_running_test=bool(integrity.hide_running_test),
            one_process=bool(integrity.tests_in_one_process),
            audit=bool(integrity.refuse_test_aware_code),
            first=[m for m in modules if m.endswith(".py")] if renaming is not None and renaming.second else (),
        )
    try:
        ready = await staging.start(
            ws,
            workdir=workdir,
            baseline=baseline_of(task, GradeError),
            uid_wall=uid_wall,
            hidden=staged_entries,
            command=command,
            user=user,
            support=support,
            gates_itself=gates_itself,
            shown=shown,
            preamble=plan.preamble if plan is not None else b"",
        )
        reader = await start_reader(ws, results_dir, ready) if results_dir is not None else None
    except WorkspaceError as exc:
        raise GradeError(f"grading workspace failed: {exc}") from exc
    return dataclasses.replace(
        ready,
        hidden_digest=_digest(hidden),
        canary=canary,
        isolation=plan,
        results_format=results_format,
        results_dir=results_dir,
        reader=reader,
        end=end,
    )


def _test_files(task: CodingTaskConfig, hidden: Sequence[HiddenFile]) -> list[str]:
    """What ``{test_files}`` names: the files a ``hidden_tests`` filter kept (a hand-written
    list means exactly those; for pytest only the Python ones: a data file handed to pytest
    is a usage error), else the change's pytest modules."""
    if task.hidden_tests:
        kept = [f.path for f in hidden if f.mode != hidden_change.DELETE]
        runs_pytest = task.isolated_verdict or re.search(r"\bpytest\b", str(task.test_command))
        return [p for p in kept if p.endswith(".py")] if runs_pytest else kept
    return hidden_change.test_modules(hidden)


def isolates(task: CodingTaskConfig, integrity: CodingIntegrity) -> bool:
    """Whether the verdict is isolated: a scenario task, graded in a mode that asks for it."""
    return bool(task.isolated_verdict) and bool(integrity.isolate_verdict)


def _shape_of(ready: staging.Staging) -> tuple[bool, bool | None]:
    """How a prepared staging grades: (with a canary, how scenarios run: separate / in
    pytest's process / None, not a scenario task)."""
    return bool(ready.canary), None if ready.isolation is None else ready.isolation.separate


def _shape_for(task: CodingTaskConfig, integrity: CodingIntegrity) -> tuple[bool, bool | None]:
    """The same, as ``task`` under ``integrity`` needs it."""
    return _wants_canary(task, integrity), isolates(task, integrity) if task.isolated_verdict else None


def _wants_canary(task: CodingTaskConfig, integrity: CodingIntegrity) -> bool:
    """A canary guards tests that share pytest's process with the code under test; an
    isolated verdict has none of that code in there to catch."""
    return bool(integrity.canary) and not isolates(task, integrity) and canaries.wanted(str(task.test_command))


def _digest(hidden: Sequence[HiddenFile]) -> str:
    """The hidden change a staging is prepared for, entries and contents (an isolated verdict's
    launcher holds them from its start)."""
    digest = hashlib.sha256()
    for item in hidden:
        digest.update(f"{item.entry}\0{len(item.data)}\0".encode("utf-8", "surrogateescape") + item.data)
    return digest.hexdigest()


def _scenario_preload(task: CodingTaskConfig) -> list[str] | None:
    """The modules the baseline imports, for the zygote to load ahead; None (all it would) where
    they cannot be read: an optimisation, never a reason for grading to fail."""
    try:
        return isolated.imported_modules(str(task.repo), baseline_of(task, GradeError))
    except (CrucibleError, OSError) as exc:  # the repo gone, no git: the zygote loads all
        log.debug("task %s: the baseline's imports not read (%s): the zygote preloads all", task.id, exc)
        return None


async def grade(
    ws: Workspace,
    task: CodingTaskConfig,
    integrity: CodingIntegrity,
    submission: CapturedSubmission,
    hidden: Sequence[HiddenFile],
    timeout: float,
    prepared: staging.Staging | None = None,
    renaming: rerun.Renaming | None = None,
) -> Verdict:
    """Grade ``submission`` in ``ws`` (a fresh workspace, maybe ``prepare``d) with the task's
    hidden change ``hidden`` laid over it. A differential re-run passes its ``renaming`` (and
    its ``hidden``), and so does a first grading whose hidden file and test names are random
    (``randomise_test_names``): recorded, so its results are read back under the task's test ids.
    Raises ``GradeError``."""
    deadline = time.monotonic() + timeout
    for item in hidden:
        _check_relative(item.path)
    raw: dict = {
        "durations": {},
        "violations": list(submission.violations),
        "hidden_files": [f.path for f in hidden if f.mode != hidden_change.DELETE],
        "hidden_deleted": [f.path for f in hidden if f.mode == hidden_change.DELETE],
        "tests_ran_regex": _tests_ran_regex(task),
        "canary": None,
        "named_results_only": bool(integrity.named_results_only),
    }
    if renaming is not None:
        raw["renamed"] = renaming.record()
    try:
        if prepared is not None and (
            prepared.hidden_digest != _digest(hidden) or _shape_of(prepared) != _shape_for(task, integrity)
        ):
            await dismiss(prepared)  # prepared for another change or another mode: not usable
            if prepared.isolation is not None and prepared.isolation.separate:
                # Its launcher (and its pytest, writing under the verdict dir) ends before the
                # next one writes that dir afresh.
                await staging.ended(prepared.tester)
            prepared = None
        ready = prepared or await prepare(ws, task, integrity, hidden, renaming=renaming)
        separate = ready.isolation is not None and ready.isolation.separate
        staged = {} if separate else {f.path: f.data for f in hidden}  # else the launcher wrote them
        if ready.canary is not None:
            staged[ready.canary.rel] = ready.canary.body
            raw["canary"] = ready.canary.record()
        elif integrity.canary and isolates(task, integrity):
            raw["canary"] = {"skipped": "isolated verdict: no code under test runs in pytest's process"}
        elif integrity.canary:
            raw["canary"] = {"skipped": canaries.NOT_WANTED}
        owned: Mapping[str, bytes] = dict(staged)  # what lands in the repo, and so is handed to uid 1000
        if ready.isolation is not None:
            raw["isolated"] = ready.isolation.record()
            staged.update(ready.isolation.support)
        try:
            scanning = (
                renaming is None or not renaming.second
            )  # a re-run applies the same diff: the first's scan covers it
            wanted = _scan_paths(task, submission.diff) if scanning else []
            raw["apply"], hidden_seconds, seconds, sent = await _stage(
                ready, submission.diff, staged, deadline, owned, [] if isinstance(wanted, str) else wanted
            )
            # One command did both; "hidden" is its in-container share, so the two still add up.
            raw["durations"]["stage"] = round(max(0.0, seconds - hidden_seconds), 4)
            if raw["apply"]["ok"]:
                raw["durations"]["hidden"] = round(hidden_seconds, 4)
                if integrity.refuse_test_aware_code:  # what the audit counts as the agent's (envs/coding/audit.py)
                    raw["audit_scope"] = audit.scope(_scanned_diff(submission.diff))
                if scanning:
                    began = time.monotonic()
                    raw["scan"] = await _scan(ws, task, integrity, submission.diff, wanted, sent)
                    raw["durations"]["scan"] = round(time.monotonic() - began, 4)
                raw["test"], output = await run_tests(ready, task, deadline)
                raw["durations"]["test"] = raw["test"].pop("seconds")
                began = time.monotonic()
                if ready.results_format in ("go", "parser") and raw["test"]["output_bytes"] > RESULTS_OUTPUT_BYTES:
                    raw["results"] = {
                        "format": ready.results_format,
                        "error": (
                            f"the test output ({raw['test']['output_bytes']} bytes) is over the "
                            f"{RESULTS_OUTPUT_BYTES} bytes the results are read from"
                        ),
                    }
                else:
                    raw["results"] = await read_results(ws, ready, task, output, deadline)
                if ready.results_format != "none":
                    raw["durations"]["results"] = round(time.monotonic() - began, 4)
        finally:
            await dismiss(ready)
    except WorkspaceError as exc:
        raise GradeError(f"grading workspace failed: {exc}") from exc
    return regrade(raw, task)


def _scanned_diff(diff: str) -> bytes:
    """The diff as it applied: CRLF line ends normalised where only that variant applies."""
    return _patch_variants(diff)[-1][1] if diff.strip() else b""


def _scan_paths(task: CodingTaskConfig, diff: str) -> list[str] | str:
    """The changed files the scan reads as staged, or why the diff could not be read."""
    try:
        return scanner.paths_to_read(_scanned_diff(diff), protect.test_path_patterns(task))[:SCAN_FILES]
    except ValueError as exc:  # git applied it, so git can read it; recorded, never a crash
        return f"diff not read: {exc}"


async def _scan(
    ws: Workspace,
    task: CodingTaskConfig,
    integrity: CodingIntegrity,
    diff: str,
    wanted: list[str] | str,
    sent: Mapping[str, bytes],
) -> dict:
    """The test-awareness scan (envs/integrity/scan/) of the code as it will run: each
    changed Python file as the stager sent it back once everything was staged (``sent``), or
    read here (one request each) where it did not; all before any test runs."""
    data = _scanned_diff(diff)
    patterns = protect.test_path_patterns(task)
    if isinstance(wanted, str):
        return {"refuse": integrity.refuse_test_aware_code, "findings": [], "error": wanted}
    contents: dict[str, bytes | None] = {}
    for path in wanted:
        if path in sent:
            contents[path] = sent[path]
            continue
        try:  # a symlink, a path not there, or the stager's output cut: read it here
            contents[path] = await ws.read_file(posixpath.join(workdir_of(task), path))
        except WorkspaceError:
            contents[path] = None  # not there to run (a rename's old side, a dropped path)
    return {"refuse": integrity.refuse_test_aware_code, "findings": _scanned(data, contents, patterns)}


def _scanned(data: bytes, contents: Mapping[str, bytes | None], patterns: Sequence[str]) -> list[dict]:
    """``scanner.scan``'s findings as dicts, kept by the digest of all it reads (a pure function
    of them: commit_memo's key holds the engine's version, so changed rules are a new key, and
    this interpreter's, whose parser decides what reads): a golden run's, a rerun's or a
    baseline's diff is scanned once, not at every grading (~3 ms of a run's CPU, more on a big
    diff, on the way to its tests). Findings with an unscannable file are never kept: the
    parser's RecursionError or MemoryError may be this moment's, not the file's."""
    digest = hashlib.sha256(f"{len(data)}\0".encode())
    digest.update(data)
    for path in sorted(contents):
        text = contents[path]
        digest.update(f"\0{path}\0{-1 if text is None else len(text)}\0".encode("utf-8", "surrogateescape"))
        digest.update(text or b"")
    key = (digest.hexdigest(), json.dumps(list(patterns)), platform.python_version())
    return cast(
        list[dict],
        remembered(
            "scan",
            key,
            lambda: [f.to_dict() for f in scanner.scan(data, contents, patterns)],
            keep_if=lambda found: all(f["rule"] != "unscannable" for f in found),
        ),
    )


def _patch_variants(diff: str) -> list[tuple[str, bytes]]:
    """The diff as captured (with a final newline); if it has CRLF line ends, also with LF."""
    if not diff.strip():
        return []
    data = patch.ensure_trailing_newline(diff.encode("utf-8", "surrogateescape"))
    variants = [("as-captured", data)]
    if b"\r\n" in data:
        variants.append(("crlf-normalised", data.replace(b"\r\n", b"\n")))
    return variants


async def _stage(
    ready: staging.Staging,
    diff: str,
    hidden: Mapping[str, bytes],
    deadline: float,
    in_repo: Mapping[str, bytes],
    scan: Sequence[str] = (),
) -> tuple[dict, float, float, dict[str, bytes]]:
    """Hand the submission to the stager: (the apply record, seconds writing the hidden tests,
    seconds in all, the ``scan`` files it sent back). ``in_repo``: those of ``hidden`` written
    into the repo."""
    variants = _patch_variants(diff)
    stdin = staging.submission_input(variants, list(hidden.values()), _staged_paths(diff, in_repo), scan)
    done = await staging.run(ready.stager, stdin, left(deadline, "staging"), STAGE_OUTPUT_BYTES)
    sent = staging.scanned(done.output, done.output_bytes, ready.nonce) if done.exit_code == 0 else {}
    cut = done.output.find(f"\n{ready.nonce} scan ".encode())
    text = (done.output if cut < 0 else done.output[:cut]).decode("utf-8", "replace")
    if done.timed_out or done.exit_code not in (0, staging.NOT_APPLIED):
        raise GradeError(f"cannot stage the submission: {brief(text, done.exit_code)}")
    attempts, hidden_seconds = _records(text, ready.nonce)
    return (
        {"ok": done.exit_code == 0, "empty": not variants, "attempts": attempts},
        hidden_seconds,
        done.seconds,
        sent,
    )


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
            attempts.append({"variant": fields[2], "exit_code": int(fields[3]), "output": tail_text(text)})
            lines = []
        elif record == "hidden":
            hidden_seconds = max(0.0, float(fields[3]) - float(fields[2]))
        elif record == "received":
            lines = []  # what the reset printed
        else:
            lines.append(line)
    return attempts, hidden_seconds


def _tests_ran_regex(task: CodingTaskConfig) -> str:
    return str(task.tests_ran_regex or DEFAULT_TESTS_RAN)


def _check_relative(rel: str) -> None:
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or not rel.strip("/"):
        raise GradeError(f"hidden test path {rel!r} must be relative and inside the repo")
