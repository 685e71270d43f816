"""Hermetic grading of a captured diff in a FRESH workspace from the task's image.

    reset workdir to the baseline (vault) -> apply the diff -> write the hidden tests
    -> hand the tree to uid 1000 -> run the test command -> verdict

The hidden tests are written AFTER the diff, so an agent's edits to them are lost. The
verdict is a pure function of what the steps produced (``verdict_from_test_result``), and
``Verdict.raw`` keeps those products, so a stored run can be graded again (``regrade``).
A failure of grading itself (broken workspace, missing vault) raises ``GradeError``.
"""
from __future__ import annotations

import re
import shlex
import time
import uuid
from typing import Mapping

from engine.errors import GradeError, WorkspaceError
from engine.interfaces import AGENT_UID, ROOT_UID, Workspace
from engine.models import CapturedSubmission, ExecResult, Verdict
from envs.coding import patch
from envs.coding.gitops import SCRATCH_DIR, VAULT, brief, run_script
from envs.coding.repo import baseline_of, workdir_of

OUTPUT_TAIL_BYTES = 8192
DEFAULT_TESTS_RAN = r"\b[1-9][0-9]* passed\b"
PATCH_FILE = "submission.patch"

_RESET = r"""
WORKDIR=$1 BASE=$2 VAULT=$3 DIR=$4
require_vault
shadow_init "$DIR"
cd "$WORKDIR"
git "${HARDEN[@]}" read-tree "$BASE"
# Fresh container: normally nothing differs. Only stale tracked files are rewritten, so a
# big tree is not copied up; untracked files go, ignored ones (install outputs) stay.
git "${HARDEN[@]}" update-index -q --refresh >/dev/null || true
git "${HARDEN[@]}" ls-files -z -m -d | git "${HARDEN[@]}" checkout-index -f -z --stdin
git "${HARDEN[@]}" clean -fdq
"""

# Applied inside the shadow repo so the baseline's .gitattributes convert exactly as at
# capture (e.g. eol=crlf files), and git refuses paths beyond symlinks.
_APPLY = r"""
WORKDIR=$1 BASE=$2 VAULT=$3 DIR=$4 PATCH=$5
export GIT_DIR="$DIR/repo" GIT_WORK_TREE="$WORKDIR" GIT_INDEX_FILE="$DIR/index"
cd "$WORKDIR"
git "${HARDEN[@]}" apply --binary --whitespace=nowarn --verbose -- "$PATCH" 2>&1
"""

# Each hidden path: every parent a real directory inside workdir (a symlink or file the
# agent's diff put there is removed), and the file itself removed, before it is written.
_PREPARE_HIDDEN = r"""
WORKDIR=$1
shift
for rel in "$@"; do
  d=$WORKDIR
  IFS=/ read -r -a parts <<< "$(dirname -- "$rel")"
  for part in "${parts[@]}"; do
    [ -z "$part" ] || [ "$part" = . ] && continue
    d="$d/$part"
    if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then rm -f -- "$d"; fi
    mkdir -p -- "$d"
  done
  rm -rf -- "$WORKDIR/$rel"
done
"""

# "Chown what you stage": only entries not already uid 1000's (a stat walk, no copy-up).
_HAND_OVER = r"""
WORKDIR=$1
find "$WORKDIR" -xdev \( ! -user 1000 -o ! -group 1000 \) -exec chown -h 1000:1000 -- {} +
"""


async def grade(
    ws: Workspace,
    task: dict,
    integrity: dict,
    submission: CapturedSubmission,
    hidden_files: Mapping[str, bytes],
    timeout: float,
) -> Verdict:
    """Grade ``submission`` in ``ws`` (a fresh workspace). Raises ``GradeError``."""
    deadline = time.monotonic() + timeout
    workdir, base = workdir_of(task, GradeError), baseline_of(task, GradeError)
    scratch = f"{SCRATCH_DIR}/grade-{uuid.uuid4().hex}"
    raw: dict = {"durations": {}, "violations": list(submission.violations),
                 "hidden_files": sorted(hidden_files), "tests_ran_regex": _tests_ran_regex(task)}
    try:
        await _step(raw, "reset", _reset(ws, workdir, base, scratch, deadline))
        raw["apply"] = await _step(raw, "apply", _apply(ws, workdir, base, scratch, submission.diff, deadline))
        if raw["apply"]["ok"]:
            await _step(raw, "hidden", _write_hidden(ws, workdir, hidden_files, integrity, deadline))
            raw["test"] = await _step(raw, "test", _run_tests(ws, task, workdir, hidden_files, integrity, deadline))
    except WorkspaceError as exc:
        raise GradeError(f"grading workspace failed: {exc}") from exc
    finally:
        await _quietly_remove(ws, scratch)
    return regrade(raw)


async def _step(raw: dict, name: str, aw):
    began = time.monotonic()
    try:
        return await aw
    finally:
        raw["durations"][name] = round(time.monotonic() - began, 4)


def _left(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise GradeError(f"grade timeout spent before {what}")
    return left


async def _reset(ws: Workspace, workdir: str, base: str, scratch: str, deadline: float) -> None:
    result = await run_script(ws, _RESET, [workdir, base, VAULT, scratch], timeout=_left(deadline, "reset"))
    if not result.ok:
        raise GradeError(f"cannot reset {workdir} to the baseline: {brief(result)}")


async def _apply(ws: Workspace, workdir: str, base: str, scratch: str, diff: str, deadline: float) -> dict:
    """Apply the diff as captured; if that fails and it has CRLF line ends, once more with LF."""
    if not diff.strip():
        return {"ok": True, "empty": True, "attempts": []}
    data = patch.ensure_trailing_newline(diff.encode("utf-8", "surrogateescape"))
    candidates = [("as-captured", data)]
    if b"\r\n" in data:
        candidates.append(("crlf-normalised", data.replace(b"\r\n", b"\n")))
    attempts = []
    for label, body in candidates:
        path = f"{scratch}/{PATCH_FILE}"
        await ws.write_file(path, body, mode=0o600, owner=ROOT_UID)
        result = await run_script(ws, _APPLY, [workdir, base, VAULT, scratch, path], timeout=_left(deadline, "apply"))
        attempts.append({"variant": label, "exit_code": result.exit_code, "output": _tail(result)})
        if result.ok:
            return {"ok": True, "empty": False, "attempts": attempts}
    return {"ok": False, "empty": False, "attempts": attempts}


async def _write_hidden(ws: Workspace, workdir: str, hidden: Mapping[str, bytes], integrity: dict,
                        deadline: float) -> None:
    for rel in hidden:
        _check_relative(rel)
    result = await run_script(ws, _PREPARE_HIDDEN, [workdir, *hidden], timeout=_left(deadline, "hidden tests"))
    if not result.ok:
        raise GradeError(f"cannot prepare hidden test paths: {brief(result)}")
    owner = AGENT_UID if integrity.get("uid_wall") else ROOT_UID
    for rel, data in hidden.items():
        await ws.write_file(f"{workdir}/{rel}", data, mode=0o644, owner=owner)
    if integrity.get("uid_wall"):
        result = await run_script(ws, _HAND_OVER, [workdir], timeout=_left(deadline, "chown"))
        if not result.ok:
            raise GradeError(f"cannot hand {workdir} to uid {AGENT_UID}: {brief(result)}")


async def _run_tests(ws: Workspace, task: dict, workdir: str, hidden: Mapping[str, bytes], integrity: dict,
                     deadline: float) -> dict:
    command = str(task["test_command"]).replace("{test_files}", " ".join(shlex.quote(p) for p in hidden))
    limit = min(float(task.get("test_timeout") or 600.0), _left(deadline, "tests"))
    user = AGENT_UID if integrity.get("uid_wall") else ROOT_UID
    # One stream, interleaved as a terminal would show it: the summary line is at its end.
    result = await ws.exec(["bash", "-c", "exec 2>&1\n" + command], user=user, cwd=workdir, timeout=limit)
    return {"command": command, "user": user, "exit_code": result.exit_code, "timed_out": result.timed_out,
            "timeout": limit, "output_tail": _tail(result), "output_bytes": result.stdout_bytes_total
            + result.stderr_bytes_total}


def verdict_from_test_result(
    *,
    applied: bool,
    test_exit_code: int | None,
    timed_out: bool,
    output_tail: str,
    tests_ran_regex: str = DEFAULT_TESTS_RAN,
    raw: dict | None = None,
) -> Verdict:
    """The verdict, from captured outputs only. 1.0 iff the diff applied, the tests exited 0
    within the timeout AND the output shows tests actually ran."""
    try:
        ran = re.search(tests_ran_regex, output_tail) is not None
    except re.error as exc:
        raise GradeError(f"task tests_ran_regex {tests_ran_regex!r} is invalid: {exc}") from exc
    if not applied:
        reason = "diff does not apply"
    elif timed_out:
        reason = "test timeout"
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
    )


def _tests_ran_regex(task: dict) -> str:
    return str(task.get("tests_ran_regex") or DEFAULT_TESTS_RAN)


def _tail(result: ExecResult) -> str:
    text = result.text()
    data = text.encode("utf-8")
    if len(data) <= OUTPUT_TAIL_BYTES:
        return text
    return data[-OUTPUT_TAIL_BYTES:].decode("utf-8", "ignore")


def _check_relative(rel: str) -> None:
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or not rel.strip("/"):
        raise GradeError(f"hidden test path {rel!r} must be relative and inside the repo")


async def _quietly_remove(ws: Workspace, path: str) -> None:
    try:
        await ws.exec(["rm", "-rf", "--", path], timeout=60)
    except WorkspaceError:
        pass  # the grading workspace is destroyed right after; nothing depends on this
