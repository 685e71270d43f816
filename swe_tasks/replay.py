"""The official evaluator's steps, replayed one by one in a fresh grading workspace.

The official entry script (``swe_bench_pro_eval.py``, create_entryscript) runs, in one shell
with no ``set -e``: the ENV lines as exports; ``cd /app``; ``git reset --hard BASE``; ``git
checkout BASE``; ``git apply -v patch.diff`` (binary hunks stripped first); the LAST line of
``before_repo_set_cmd``; ``run_script.sh`` with the selected test files comma-joined, stdout
and stderr to separate files; then ``parser.py stdout stderr output.json``. Here the same
steps run in one exec (sh/replay.sh), each with its own limit and its exit status and output
recorded; a failed step does not stop the next (as there). The parser runs host-side on the
two files, so an image needs only bash and git.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import GradeError, WorkspaceError
from engine.interfaces import ROOT_UID, Workspace
from engine.util import shell
from envs.integrity.sources.gojson import reconstruct
from swe_tasks import edits, gojson, jsresults, junit, strict
from swe_tasks.assets import Assets
from swe_tasks.schema import SwebenchProTaskConfig

WORK = "/workspace"
"""Where the official evaluator mounts its files; a fresh grading workspace has nothing there."""
VAULT = "/var/lib/crucible/vault/repo.git"
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
TAIL = 4000
STEPS = ("reset", "apply", "written", "before_repo_set_cmd", "own", "lock", "edit", "home", "run_script")
"""The steps sh/replay.sh may record, in the order it runs them (the raw grade keeps no order:
the store writes its JSON with sorted keys). All but reset, apply, before_repo_set_cmd and
run_script are crucible-strict's."""
PARSER_COMMAND = f"python {WORK}/parser.py {WORK}/stdout.log {WORK}/stderr.log {WORK}/output.json"
"""The official entry script's last line; crucible runs the parser host-side instead (run_parser)."""
KEPT_LOG = 512 << 10
"""Of each of the two files the parser read, the raw grade keeps this many bytes at most (the
first quarter and the rest from the end): enough for `crucible swe eval --output` to write the
official per-instance logs of an ordinary run without a sweep's store growing by its logs."""


def strip_binary_hunks(patch: str) -> str:
    """The patch without its binary file sections (``GIT binary patch`` or ``Binary files ...
    differ``): they are dropped, as officially, before ``git apply``."""
    if not patch:
        return patch
    kept = []
    for section in re.split(r"(?=^diff --git )", patch, flags=re.MULTILINE):
        if not section.strip():
            continue
        if re.search(r"^Binary files .* differ$", section, re.MULTILINE) or re.search(
            r"^GIT binary patch$", section, re.MULTILINE
        ):
            continue
        kept.append(section)
    return "".join(kept)


def last_line(command: str) -> str:
    return command.strip().split("\n")[-1]


def official_args(task: SwebenchProTaskConfig, assets: Assets) -> list[str]:
    """sh/replay.sh's arguments for the official steps: the assets as read, unchanged."""
    return [
        task.workdir,
        VAULT,
        WORK,
        task.base_commit,
        last_line(task.before_repo_set_cmd),
        ",".join(task.selected_test_files_to_run),
        f"{task.step_timeout:g}",
        f"{task.test_timeout:g}",
        "\n".join(assets.env_lines),
        assets.run_script.decode("utf-8", "replace"),
    ]


def official_commands(task: SwebenchProTaskConfig) -> dict[str, str]:
    """Each official step as the evaluator's entry script writes it (recorded per step)."""
    files = ",".join(task.selected_test_files_to_run)
    return {
        "reset": f"git reset --hard {task.base_commit}\ngit checkout {task.base_commit}",
        "apply": f"git apply -v {WORK}/patch.diff",
        "before_repo_set_cmd": last_line(task.before_repo_set_cmd),
        "run_script": f"bash {WORK}/run_script.sh {files} > {WORK}/stdout.log 2> {WORK}/stderr.log",
    }


async def replay(
    ws: Workspace, task: SwebenchProTaskConfig, assets: Assets, patch: str, hardened: strict.Plan | None = None
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Every step run and recorded: (the raw grade, no verdict yet: ``judge`` decides; the files
    a crucible-strict grading sends back for the scan). One exec (sh/replay.sh: the patch on
    its stdin, history restored, every step with its own limit, the two output files back on
    its stdout), the parser host-side. ``hardened``: the crucible-strict defences
    (swe_tasks/strict.py); None: the official evaluator's steps exactly."""
    started = time.monotonic()
    stripped = strip_binary_hunks(patch)
    raw: dict[str, Any] = {
        "instance_id": task.instance_id,
        "binary_hunks_stripped": stripped != patch,
        # pinned assets' lines (env_sha256), not the graded code's: their size is the asset's
        "env_exports": list(assets.env_lines),
    }
    args = official_args(task, assets)
    stdin = stripped.encode()
    commands = official_commands(task)
    go_json = gojson.how(assets.run_script) if hardened is not None else ""
    runners = jsresults.runners(assets.run_script) if hardened is not None else []
    pytest = hardened is not None and junit.runs_pytest(assets.run_script)
    edit = hardened.edit if hardened is not None else None
    if hardened is not None:
        selected = list(task.selected_test_files_to_run)
        args[5] = ",".join(selected[::-1] if hardened.reverse else selected)
        args += [
            *hardened.args(),
            go_json,
            gojson.exec_program() if go_json in gojson.EXPECTED else "",
            gojson.wrap_program() if go_json == "wrapped" else "",
            jsresults.hook_program(hardened.results_dir) if runners else "",
            jsresults.node_wrap_program() if runners else "",
            junit.plugin_program(hardened.results_dir) if pytest else "",
            *edits.args(edit),
            edits.wrap_program() if edit else "",
            "\n".join(strict.home_from_root(assets.run_script)),
        ]
        stdin = hardened.token.encode() + b"\n" + stdin
        commands["written"] = (
            "git apply --numstat of the patch (as this git reads it), then git's own diff against "
            "base_commit of those paths (a temporary index): the scan's and the trust's reading"
        )
        commands["own"] = (
            f"chown -h {strict.TEST_UID} each path the patch writes, and each directory git apply "
            "made for it, that is root's (the image's tree is that uid's; the lock then takes the "
            "hidden files back)"
        )
        if edit is not None:
            commands["edit"] = edits.shown(edit, WORK)
        if strict.home_from_root(assets.run_script):
            commands["home"] = (
                f"cp -a ROOT_HOME/{{{','.join(strict.home_from_root(assets.run_script))}}} "
                f"into the tests' fresh HOME, uid {strict.TEST_UID}'s (npm falls back to root's cache offline)"
            )
        commands["run_script"] = (
            (f'PATH="{WORK}/sed-wrap:$PATH" ' if edit else "")
            + gojson.goflags_shown(go_json, WORK)
            + (jsresults.shown(WORK) if runners else "")
            + (junit.shown(WORK) if pytest else "")
            + f"setpriv --reuid={strict.TEST_UID} --regid={strict.TEST_UID} --clear-groups "
            f"bash {WORK}/run_script.sh {args[5]} (stdout, stderr: root-only FIFOs, end-marked)"
        )
    budget = 3 * task.step_timeout + task.test_timeout + 60  # the steps' own limits, and the restore
    try:
        result = await ws.exec(
            ["bash", "-c", shell.script(__file__, "replay.sh"), "crucible", *args],
            user=ROOT_UID,
            cwd="/",
            env=BASE_ENV,
            timeout=budget,
            stdin=stdin,
            max_output=2 * (2 * MAX_LOG_BYTES + (1 << 20)) + MAX_LOG_BYTES,
        )
    except WorkspaceError as exc:
        raise GradeError(f"instance {task.instance_id}: the official steps could not run: {exc}") from exc
    if result.truncated:
        raise GradeError(f"instance {task.instance_id}: run_script.sh wrote more than {MAX_LOG_BYTES >> 20} MiB")
    records, files, scanned, reports, js_reports = parse_output(result.stdout)
    if "run_script" not in records:
        raise GradeError(
            f"instance {task.instance_id}: the official steps stopped early (exit {result.exit_code}): "
            f"{result.text()[-500:]}"
        )
    pythons = junit.pythons(str((records.pop("pythons", None) or {}).get("output", "")))
    for name, record in records.items():
        raw[name] = {"command": commands.get(name, name), **record}
    stdout: bytes | None
    stderr: bytes | None
    if "stdout" in files and "stderr" in files:
        stdout, stderr = files["stdout"], files["stderr"]
    else:  # an image without cat or wc; or a step removed the files (then the reads say so)
        stdout, stderr = await asyncio.gather(_read(ws, "stdout.log"), _read(ws, "stderr.log"))
    if hardened is not None:  # only what came before run_script.sh's end is parsed
        stdout, out_after, out_end = strict.split_end(stdout, hardened.token)
        stderr, err_after, err_end = strict.split_end(stderr, hardened.token)
        raw["run_script"]["end"] = {"stdout": out_end, "stderr": err_end}
        raw["run_script"]["outlived"] = raw["run_script"].pop("output", "") == "outlived"
        raw["run_script"]["after_end"] = {
            "stdout": _tail(out_after),
            "stderr": _tail(err_after),
            "bytes": len(out_after) + len(err_after),
        }
        raw["junit"] = await asyncio.to_thread(
            junit.record, pytest, reports, hardened.results_dir, pythons if pytest else None
        )
        raw["go_json"] = await asyncio.to_thread(gojson.record, go_json, stdout)
        raw["js_results"] = await asyncio.to_thread(
            jsresults.record,
            runners,
            js_reports,
            hardened.results_dir,
            strict.trusted_test_files(task, stripped, _locked(raw), strict.written_diff(raw, "")) if runners else [],
        )
        if go_json in gojson.REBUILT and stdout is not None:  # the parser reads the text, as without -json
            stdout = reconstruct(stdout)
            raw["run_script"]["stdout_reconstructed"] = True
    raw["run_script"].update(
        stdout_tail=_tail(stdout),
        stderr_tail=_tail(stderr),
        logs={"stdout": kept_log(stdout, "stdout.log"), "stderr": kept_log(stderr, "stderr.log")},
    )
    raw["parser"] = await asyncio.to_thread(run_parser, assets.parser, stdout, stderr, task.step_timeout)
    raw["seconds"] = round(time.monotonic() - started, 3)
    return raw, scanned


_RECORD = re.compile(rb"@@crucible-step (\S+) (-?\d+) ([01]) (\d+) (\d+)\n")
_FILES = re.compile(rb"@@crucible-files (\d+) (\d+)\n")
_SCANNED = re.compile(rb"@@crucible-scan (\d+) (\d+)\n")
_JUNIT = re.compile(rb"@@crucible-junit ([a-z-]+) (\d+)\n")
_JS = re.compile(rb"@@crucible-js ([a-z-]+) (\d+)\n")
MAX_LOG_BYTES = 64 << 20
"""Each of run_script.sh's two files, at most (a larger run is a GradeError, never a score)."""


def parse_records(data: bytes) -> tuple[dict[str, dict[str, Any]], dict[str, bytes]]:
    """sh/replay.sh's output: step records ``name -> {exit_code, timed_out, seconds, output}``
    and the run's files ``stdout|stderr -> bytes``. Lengths, not markers, delimit each part."""
    records, files, _, _, _ = parse_output(data)
    return records, files


def parse_output(
    data: bytes,
) -> tuple[
    dict[str, dict[str, Any]],
    dict[str, bytes],
    dict[str, bytes],
    list[tuple[str, bytes | None]],
    list[tuple[str, bytes | None]],
]:
    """``parse_records``, the files a crucible-strict grading sent back for the scan, and each
    JUnit report pytest wrote (swe_tasks/junit.py) and each results file of a JavaScript runner
    (swe_tasks/jsresults.py) as ``(state, bytes or None)``."""
    records: dict[str, dict[str, Any]] = {}
    files: dict[str, bytes] = {}
    scanned: dict[str, bytes] = {}
    reports: list[tuple[str, bytes | None]] = []
    js: list[tuple[str, bytes | None]] = []
    at = 0
    while True:
        if (r := _JS.match(data, at)) is not None:
            state, nreport = r.group(1).decode(), int(r.group(2))
            js.append((state, data[r.end() : r.end() + nreport] if state == "file" else None))
            at = r.end() + nreport
            continue
        if (j := _JUNIT.match(data, at)) is not None:
            state, nreport = j.group(1).decode(), int(j.group(2))
            reports.append((state, data[j.end() : j.end() + nreport] if state == "file" else None))
            at = j.end() + nreport
            continue
        if (s := _SCANNED.match(data, at)) is not None:
            nbytes, length = int(s.group(1)), int(s.group(2))
            path = data[s.end() : s.end() + length].decode("utf-8", "replace")
            scanned[path] = data[s.end() + length : s.end() + length + nbytes]
            at = s.end() + length + nbytes
            continue
        if (m := _RECORD.match(data, at)) is None:
            break
        name, rc, timed_out, ms, size = m.groups()
        output = data[m.end() : m.end() + int(size)]
        records[name.decode()] = {
            "exit_code": int(rc),
            "timed_out": timed_out == b"1",
            "seconds": int(ms) / 1000,
            "output": output.decode("utf-8", "replace"),
        }
        at = m.end() + int(size)
    if (f := _FILES.match(data, at)) is not None:
        n_out, n_err = int(f.group(1)), int(f.group(2))
        body = data[f.end() :]
        if len(body) == n_out + n_err:  # else a file changed under us: read_file says what is there
            files = {"stdout": body[:n_out], "stderr": body[n_out:]}
    return records, files, scanned, reports, js


async def _read(ws: Workspace, name: str) -> bytes | None:
    try:
        return await ws.read_file(f"{WORK}/{name}")
    except FileNotFoundError:
        return None


def _locked(raw: Mapping[str, Any]) -> set[str]:
    """The files the lock step made root's (its output lists them, relative to the workdir)."""
    return {line for line in str((raw.get("lock") or {}).get("output", "")).split("\n") if line}


def kept_log(data: bytes | None, name: str) -> dict[str, Any] | None:
    """One file the parser read, as the raw grade keeps it (None: there was none): its size and
    sha256, and its text, whole up to ``KEPT_LOG`` bytes; past that its first quarter and its
    end, with one line between saying how many bytes were left out (``left_out``)."""
    if data is None:
        return None
    kept, left_out = data, 0
    if len(data) > KEPT_LOG:
        head, tail = KEPT_LOG // 4, KEPT_LOG - KEPT_LOG // 4
        left_out = len(data) - head - tail
        kept = data[:head] + f"\n[crucible: {left_out} bytes of {name} left out here]\n".encode() + data[-tail:]
    return {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "left_out": left_out,
        "text": kept.decode("utf-8", "replace"),
    }


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
            # -S: no site packages (a parser needs the standard library only; start-up is faster).
            proc = subprocess.run(
                [sys.executable, "-S", "parser.py", "stdout.log", "stderr.log", "output.json"],
                cwd=work,
                capture_output=True,
                timeout=timeout,
                env={"PATH": "/usr/bin:/bin"},
            )
        except subprocess.TimeoutExpired:
            return {"error": f"parser.py ran past {timeout:g} s"}
        try:
            output = json.loads((work / "output.json").read_text())
        except (OSError, ValueError) as exc:
            return {
                "error": f"parser.py (exit {proc.returncode}) wrote no readable output.json: {exc}",
                "output": _tail(proc.stdout + proc.stderr),
            }
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
    passed = {
        str(t.get("name")) for t in parsed.get("tests") or [] if isinstance(t, dict) and t.get("status") == "PASSED"
    }
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
