"""Hermetic grading of a captured diff in a FRESH workspace from the task's image.

    stage (one exec): reset workdir to the baseline (vault), apply the diff, write the hidden
    tests, hand the tree to uid 1000 -> run the test command (as uid 1000 under the wall) -> verdict

Two round trips in all: every exec costs ~0.1 s, more than the git work itself. The hidden
tests are written AFTER the diff, so an agent's edits to them are lost. The
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
from engine.models import CapturedSubmission, Verdict
from envs.coding import patch
from envs.coding.gitops import SCRATCH_DIR, VAULT, brief, run_script
from envs.coding.repo import baseline_of, workdir_of

OUTPUT_TAIL_BYTES = 8192
DEFAULT_TESTS_RAN = r"\b[1-9][0-9]* passed\b"
TIMEOUT_RESERVE = 5.0

NOT_APPLIED = 10
STAGE_OUTPUT_BYTES = 8 << 20
"""git apply --verbose names every file: room for a big diff's, so no record line is dropped."""

# ONE exec stages everything: the patch variants, the hidden tests and the list of paths to
# hand over arrive on stdin, back to back, with their sizes in argv (``head -c`` reads exactly
# that many bytes, so no parsing of untrusted content). Then: reset to the baseline, apply,
# write the hidden tests (AFTER the apply, so the agent's edits to them are lost), hand over.
# Records on stdout: "<nonce> apply <variant> <exit code>" after each apply's output, and
# "<nonce> hidden <seconds>" (time spent writing the hidden tests, measured in here).
_STAGE = r"""
WORKDIR=$1 BASE=$2 VAULT=$3 DIR=$4 UID_WALL=$5 NONCE=$6 NPATCH=$7 NHIDDEN=$8 OWN=$9 OWN_BYTES=${10}
shift 10
labels=("${@:1:$NPATCH}"); shift "$NPATCH"
patch_sizes=("${@:1:$NPATCH}"); shift "$NPATCH"
hidden=("${@:1:$NHIDDEN}"); shift "$NHIDDEN"
hidden_sizes=("${@:1:$NHIDDEN}"); shift "$NHIDDEN"
stamp() { if [ -n "${EPOCHREALTIME:-}" ]; then stamp=$EPOCHREALTIME; else stamp=$(date +%s.%N); fi; }
mkdir -p -m 700 -- "$DIR"
# Each piece in turn: head -c never reads past its count, so a short input leaves the total
# short, which one count over all the pieces catches.
pieces=() expected=$OWN_BYTES
for i in "${!labels[@]}"; do
  piece=$DIR/${labels[$i]}.patch; pieces+=("$piece"); expected=$((expected + patch_sizes[i]))
  head -c "${patch_sizes[$i]}" > "$piece"
done
for i in "${!hidden[@]}"; do
  piece=$DIR/hidden.$i; pieces+=("$piece"); expected=$((expected + hidden_sizes[i]))
  head -c "${hidden_sizes[$i]}" > "$piece"
done
pieces+=("$DIR/own")
head -c "$OWN_BYTES" > "$DIR/own"
if [ "$(cat -- "${pieces[@]}" | wc -c)" != "$expected" ]; then
  echo "crucible: the staging input ended early" >&2; exit 3
fi
require_vault
shadow_init "$DIR"
cd "$WORKDIR"
git "${HARDEN[@]}" read-tree "$BASE"
# A fresh container normally differs in nothing: only stale tracked files are rewritten (no
# copy-up of a big tree); untracked files go, ignored ones (install outputs) stay.
git "${HARDEN[@]}" update-index -q --refresh >/dev/null || true
git "${HARDEN[@]}" ls-files -z -m -d > "$DIR/stale"
git "${HARDEN[@]}" checkout-index -f -z --stdin < "$DIR/stale"
git "${HARDEN[@]}" clean -fdq
# Applied in the shadow repo, so the baseline's .gitattributes convert exactly as at capture
# (eol=crlf files), and git refuses to write beyond symlinks. git apply is all-or-nothing.
applied=$([ "$NPATCH" = 0 ] && echo empty || echo none)
for label in ${labels[@]+"${labels[@]}"}; do
  rc=0
  git "${HARDEN[@]}" apply --binary --whitespace=nowarn --verbose -- "$DIR/$label.patch" 2>&1 || rc=$?
  printf '\n%s apply %s %s\n' "$NONCE" "$label" "$rc"
  if [ "$rc" = 0 ]; then applied=$label; break; fi
done
[ "$applied" != none ] || exit 10
# Hidden tests: every parent a real directory inside workdir (a symlink or file the diff put
# there is removed), whatever the diff left at the path itself removed, then the file written.
stamp; began=$stamp
owner=0
if [ "$UID_WALL" = 1 ]; then owner=1000; fi
for i in "${!hidden[@]}"; do
  rel=${hidden[$i]} target=$WORKDIR/${hidden[$i]} parent=
  if [[ $rel == */* ]]; then parent=${rel%/*}; fi
  d=$WORKDIR
  IFS=/ read -r -a parts <<< "$parent"
  for part in ${parts[@]+"${parts[@]}"}; do
    [ -z "$part" ] || [ "$part" = . ] && continue
    d="$d/$part"
    # Past a missing part nothing deeper exists: the one mkdir -p below makes the rest.
    if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then rm -f -- "$d"; break; fi
    [ -e "$d" ] || break
  done
  if [ ! -d "${target%/*}" ]; then mkdir -p -- "${target%/*}"; fi
  if [ -e "$target" ] || [ -L "$target" ]; then rm -rf -- "$target"; fi
  install -m 644 -o "$owner" -g "$owner" -- "$DIR/hidden.$i" "$target"
done
stamp; printf '%s hidden %s %s\n' "$NONCE" "$began" "$stamp"
# "Chown what you stage": the paths the diff and the hidden tests touch (and their parents,
# NUL-separated in $DIR/own), and only those root owns, so nothing else of a big tree is
# copied up. OWN=all (a diff crucible could not list) hands over the whole tree.
if [ "$UID_WALL" = 1 ]; then
  if [ "$OWN" = all ]; then
    chown -R 1000:1000 -- "$WORKDIR"
  else
    own=()
    while IFS= read -r -d '' rel; do own+=("$WORKDIR/$rel"); done < "$DIR/stale"
    while IFS= read -r -d '' rel; do own+=("$WORKDIR/$rel"); done < "$DIR/own"
    [ ${#own[@]} = 0 ] || chown -h --from=0 1000:1000 -- "${own[@]}" 2>/dev/null || true
  fi
fi
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
    workdir = workdir_of(task, GradeError)
    for rel in hidden_files:
        _check_relative(rel)
    # The scratch dir (root-only) is left behind: a grading workspace is used once.
    scratch = f"{SCRATCH_DIR}/grade-{uuid.uuid4().hex}"
    raw: dict = {"durations": {}, "violations": list(submission.violations),
                 "hidden_files": sorted(hidden_files), "tests_ran_regex": _tests_ran_regex(task)}
    try:
        began = time.monotonic()
        raw["apply"], hidden_seconds = await _stage(ws, task, integrity, submission.diff, hidden_files, scratch,
                                                    deadline)
        # One exec did both; "hidden" is its in-container share, so the two still add up.
        raw["durations"]["stage"] = round(time.monotonic() - began - hidden_seconds, 4)
        if raw["apply"]["ok"]:
            raw["durations"]["hidden"] = round(hidden_seconds, 4)
            raw["test"] = await _step(raw, "test", _run_tests(ws, task, workdir, hidden_files, integrity, deadline))
    except WorkspaceError as exc:
        raise GradeError(f"grading workspace failed: {exc}") from exc
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


def _patch_variants(diff: str) -> list[tuple[str, bytes]]:
    """The diff as captured (with a final newline); if it has CRLF line ends, also with LF."""
    if not diff.strip():
        return []
    data = patch.ensure_trailing_newline(diff.encode("utf-8", "surrogateescape"))
    variants = [("as-captured", data)]
    if b"\r\n" in data:
        variants.append(("crlf-normalised", data.replace(b"\r\n", b"\n")))
    return variants


async def _stage(ws: Workspace, task: dict, integrity: dict, diff: str, hidden: Mapping[str, bytes],
                 scratch: str, deadline: float) -> tuple[dict, float]:
    """Stage in one exec; (the apply record, seconds spent writing the hidden tests)."""
    workdir, base = workdir_of(task, GradeError), baseline_of(task, GradeError)
    variants = _patch_variants(diff)
    nonce = uuid.uuid4().hex
    owned = _staged_paths(diff, hidden)
    own_list = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in owned or [])
    labels = [label for label, _ in variants]
    patch_sizes = [str(len(body)) for _, body in variants]
    hidden_sizes = [str(len(body)) for body in hidden.values()]
    args = [workdir, base, VAULT, scratch, "1" if integrity.get("uid_wall") else "0", nonce, str(len(variants)),
            str(len(hidden)), "all" if owned is None else "list", str(len(own_list)),
            *labels, *patch_sizes, *hidden, *hidden_sizes]
    stdin = b"".join([*(body for _, body in variants), *hidden.values(), own_list])
    result = await run_script(ws, _STAGE, args, timeout=_left(deadline, "staging"), stdin=stdin,
                              max_output=STAGE_OUTPUT_BYTES)
    if result.exit_code not in (0, NOT_APPLIED) or result.timed_out:
        raise GradeError(f"cannot stage the submission in {workdir}: {brief(result)}")
    attempts, hidden_seconds = _records(result.stdout.decode("utf-8", "replace"), nonce)
    return {"ok": result.exit_code == 0, "empty": not variants, "attempts": attempts}, hidden_seconds


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
    """The apply attempts (each with the output before its record) and the hidden-tests time."""
    attempts, lines, hidden_seconds = [], [], 0.0
    for line in output.split("\n"):
        fields = line.split(" ")
        if len(fields) == 4 and fields[0] == nonce and fields[1] == "apply":
            text = "\n".join(lines).strip("\n")
            attempts.append({"variant": fields[2], "exit_code": int(fields[3]), "output": _tail_text(text)})
            lines = []
        elif len(fields) == 4 and fields[0] == nonce and fields[1] == "hidden":
            hidden_seconds = max(0.0, float(fields[3]) - float(fields[2]))
        else:
            lines.append(line)
    return attempts, hidden_seconds


async def _run_tests(ws: Workspace, task: dict, workdir: str, hidden: Mapping[str, bytes], integrity: dict,
                     deadline: float) -> dict:
    command = str(task["test_command"]).replace("{test_files}", " ".join(shlex.quote(p) for p in hidden))
    # A little of the grade budget is kept back, so a slow suite ends as "test timeout" here
    # rather than as the engine cancelling the whole grade.
    limit = min(float(task.get("test_timeout") or 600.0), max(1.0, _left(deadline, "tests") - TIMEOUT_RESERVE))
    user = AGENT_UID if integrity.get("uid_wall") else ROOT_UID
    # One stream, interleaved as a terminal would show it: the summary line is at its end.
    result = await ws.exec(["bash", "-c", "exec 2>&1\n" + command], user=user, cwd=workdir, timeout=limit)
    return {"command": command, "user": user, "exit_code": result.exit_code, "timed_out": result.timed_out,
            "timeout": limit, "output_tail": _tail_text(result.text()),
            "output_bytes": result.stdout_bytes_total + result.stderr_bytes_total}


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


def _tail_text(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= OUTPUT_TAIL_BYTES:
        return text
    return data[-OUTPUT_TAIL_BYTES:].decode("utf-8", "ignore")


def _check_relative(rel: str) -> None:
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or not rel.strip("/"):
        raise GradeError(f"hidden test path {rel!r} must be relative and inside the repo")
