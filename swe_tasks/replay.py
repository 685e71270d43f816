"""The official evaluator's steps, replayed one by one in a fresh grading workspace.

The official entry script (``swe_bench_pro_eval.py``, create_entryscript) runs, in one shell
with no ``set -e``: the ENV lines as exports; ``cd /app``; ``git reset --hard BASE``; ``git
checkout BASE``; ``git apply -v patch.diff`` (binary hunks stripped first); the LAST line of
``before_repo_set_cmd``; ``run_script.sh`` with the selected test files comma-joined, stdout
and stderr to separate files; then ``parser.py stdout stderr output.json``. Here each step
is its own exec, with its own timeout and its output and exit status recorded, under the same
exports and in the same directory; a failed step does not stop the next (as there). The
parser runs host-side on the two files, so an image needs only bash and git.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from engine.errors import GradeError, WorkspaceError
from engine.interfaces import ROOT_UID, Workspace
from engine.models import ExecResult
from swe_tasks.assets import Assets
from swe_tasks.schema import SwebenchProTaskConfig

WORK = "/workspace"
"""Where the official evaluator mounts its files; a fresh grading workspace has nothing there."""
VAULT = "/var/lib/crucible/vault/repo.git"
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
TAIL = 4000


def strip_binary_hunks(patch: str) -> str:
    """The patch without its binary file sections (``GIT binary patch`` or ``Binary files ...
    differ``): they are dropped, as officially, before ``git apply``."""
    if not patch:
        return patch
    kept = []
    for section in re.split(r"(?=^diff --git )", patch, flags=re.MULTILINE):
        if not section.strip():
            continue
        if re.search(r"^Binary files .* differ$", section, re.MULTILINE) or \
                re.search(r"^GIT binary patch$", section, re.MULTILINE):
            continue
        kept.append(section)
    return "".join(kept)


def last_line(command: str) -> str:
    return command.strip().split("\n")[-1]


async def replay(ws: Workspace, task: SwebenchProTaskConfig, assets: Assets, patch: str) -> dict[str, Any]:
    """Every step run and recorded: the raw grade (no verdict yet; ``verdict.regrade`` judges)."""
    started = time.monotonic()
    stripped = strip_binary_hunks(patch)
    raw: dict[str, Any] = {"instance_id": task.instance_id, "binary_hunks_stripped": stripped != patch}
    await _restore_history(ws, task)
    await ws.write_file(f"{WORK}/patch.diff", stripped.encode())
    await ws.write_file(f"{WORK}/run_script.sh", assets.run_script)
    await ws.write_file(f"{WORK}/env.sh", ("\n".join(assets.env_lines) + "\n").encode())
    base = shlex.quote(task.base_commit)
    steps = [("reset", f"git reset --hard {base}\ngit checkout {base}", task.step_timeout),
             ("apply", f"git apply -v {WORK}/patch.diff", task.step_timeout),
             ("before_repo_set_cmd", last_line(task.before_repo_set_cmd), task.step_timeout),
             ("run_script", f"bash {WORK}/run_script.sh {shlex.quote(','.join(task.selected_test_files_to_run))} "
                            f"> {WORK}/stdout.log 2> {WORK}/stderr.log", task.test_timeout)]
    for name, command, timeout in steps:
        raw[name] = await _step(ws, task, command, timeout)
    stdout, stderr = await _read(ws, "stdout.log"), await _read(ws, "stderr.log")
    raw["run_script"].update(stdout_tail=_tail(stdout), stderr_tail=_tail(stderr))
    raw["parser"] = run_parser(assets.parser, stdout, stderr, task.step_timeout)
    raw["seconds"] = round(time.monotonic() - started, 3)
    return raw


async def _restore_history(ws: Workspace, task: SwebenchProTaskConfig) -> None:
    """The image's history back in place (moved to the root-only vault at build time), and
    the tree trusted by git as root, as the official image's root-owned /app is."""
    script = (f"set -e; w={shlex.quote(task.workdir)}; if [ -d {VAULT} ]; then rm -rf \"$w/.git\"; "
              f"mv {VAULT} \"$w/.git\"; fi; git config --system --add safe.directory \"$w\"")
    result = await _exec(ws, ["bash", "-c", script], timeout=task.step_timeout)
    if not result.ok:
        raise GradeError(f"instance {task.instance_id}: restoring the repository history failed: {result.text()[-500:]}")


async def _step(ws: Workspace, task: SwebenchProTaskConfig, command: str, timeout: float) -> dict[str, Any]:
    """One official step, after the exports, in the repo dir: its exit code and output."""
    script = f"source {WORK}/env.sh\ncd {shlex.quote(task.workdir)}\n{command}\n"
    started = time.monotonic()
    result = await _exec(ws, ["bash", "-c", script], timeout=timeout)
    return {"command": command, "exit_code": result.exit_code, "timed_out": result.timed_out,
            "output": _tail(result.stdout + result.stderr), "seconds": round(time.monotonic() - started, 3)}


async def _exec(ws: Workspace, argv: list[str], *, timeout: float) -> ExecResult:
    try:
        return await ws.exec(argv, user=ROOT_UID, cwd="/", env=BASE_ENV, timeout=timeout)
    except WorkspaceError as exc:
        raise GradeError(f"a grading step could not run: {exc}") from exc


async def _read(ws: Workspace, name: str) -> bytes | None:
    try:
        return await ws.read_file(f"{WORK}/{name}")
    except FileNotFoundError:
        return None


def _tail(data: bytes | None) -> str:
    if data is None:
        return ""
    return data[-TAIL:].decode("utf-8", "replace")


def run_parser(parser: bytes, stdout: bytes | None, stderr: bytes | None, timeout: float) -> dict[str, Any]:
    """The official ``parser.py STDOUT STDERR OUTPUT`` on the run's two files (host-side, a
    fresh directory): its output's test list, or the error that left none."""
    if stdout is None or stderr is None:
        return {"error": "run_script.sh left no stdout.log/stderr.log"}
    with tempfile.TemporaryDirectory(prefix="crucible-swe-parser-") as tmp:
        work = Path(tmp)
        (work / "parser.py").write_bytes(parser)
        (work / "stdout.log").write_bytes(stdout)
        (work / "stderr.log").write_bytes(stderr)
        try:
            proc = subprocess.run([sys.executable, "parser.py", "stdout.log", "stderr.log", "output.json"],
                                  cwd=work, capture_output=True, timeout=timeout, env={"PATH": "/usr/bin:/bin"})
        except subprocess.TimeoutExpired:
            return {"error": f"parser.py ran past {timeout:g} s"}
        try:
            output = json.loads((work / "output.json").read_text())
        except (OSError, ValueError) as exc:
            return {"error": f"parser.py (exit {proc.returncode}) wrote no readable output.json: {exc}",
                    "output": _tail(proc.stdout + proc.stderr)}
    tests = output.get("tests") if isinstance(output, dict) else None
    if not isinstance(tests, list):
        return {"error": "parser.py's output.json has no 'tests' list"}
    return {"exit_code": proc.returncode, "tests": tests}


def judge(raw: Mapping[str, Any], fail_to_pass: list[str], pass_to_pass: list[str]) -> dict[str, Any]:
    """Resolved iff every fail_to_pass and pass_to_pass name is among the names reported
    PASSED (the official rule: a name reported PASSED once counts as passed)."""
    parsed = raw.get("parser") or {}
    if parsed.get("error"):
        return {"resolved": False, "reason": f"no test results: {parsed['error']}", "f2p": 0.0, "p2p": 0.0}
    passed = {str(t.get("name")) for t in parsed.get("tests") or [] if isinstance(t, dict) and t.get("status") == "PASSED"}
    f2p = _fraction(fail_to_pass, passed)
    p2p = _fraction(pass_to_pass, passed)
    missing = [n for n in [*fail_to_pass, *pass_to_pass] if n not in passed]
    resolved = not missing
    reason = "resolved" if resolved else f"{len(missing)} required test(s) not PASSED, e.g. {missing[0]!r}"
    apply = raw.get("apply") or {}
    if apply.get("exit_code") not in (0, None):
        reason += f"; the patch did not apply (git apply exited {apply.get('exit_code')})"
    return {"resolved": resolved, "reason": reason, "f2p": f2p, "p2p": p2p}


def _fraction(names: list[str], passed: set[str]) -> float:
    return 1.0 if not names else sum(n in passed for n in names) / len(names)
