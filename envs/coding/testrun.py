"""The hidden tests run in the staged grading workspace, and their named results read back:
the test command, its output kept within bounds, the JUnit report pytest wrote outside the repo,
and a task's own results parser. What comes back is data for the verdict (envs/coding/judging.py),
never a verdict itself."""

from __future__ import annotations

import hashlib
import secrets
import shlex
import time
from collections.abc import Sequence

from engine.errors import GradeError, WorkspaceError
from engine.interfaces import ROOT_UID, Workspace
from envs.coding import canary as canaries
from envs.coding import runner_end, staging
from envs.coding.schema import CodingTaskConfig
from envs.integrity import sources

RESULTS_ROOT = "/tmp/crucible-results"
"""Prefix of the fresh directory (random suffix, outside the repo) pytest writes its JUnit report to."""
OUTPUT_TAIL_BYTES = 8192

TIMEOUT_RESERVE = 5.0

TEST_OUTPUT_BYTES = 1 << 20

PYTEST_OUTPUT_BYTES = 8 << 20
"""Under the end plugin, whose line names each test that passed (11 bytes a test): it is at the
end, and the last half of what is kept holds it for a suite of some 360,000 tests."""

RESULTS_OUTPUT_BYTES = 64 << 20
"""Where the named results are read from the output (go test -json, a parser), all of it."""

NO_REPORT = 44
"""The report reader's exit code when there is no report (or something other than a file)."""


async def start_reader(ws: Workspace, results_dir: str, ready: staging.Staging) -> staging.Waiting:
    """A process that waits for "go" and then prints the JUnit report: started with the other
    two, so reading the report after the tests costs no process start (~0.1 s). It runs as the
    tests' uid: a report swapped for a symlink after its check leads nowhere the tests could
    not read themselves."""
    report = shlex.quote(f"{results_dir}/junit.xml")
    script = (
        f'IFS= read -r go || exit 97\n[ "$go" = go ] || exit 97\n'
        f"if [ -L {report} ] || [ ! -f {report} ]; then exit {NO_REPORT}; fi\nexec cat -- {report}\n"
    )
    try:
        return staging.Waiting(await ws.open_process(["bash", "-c", script], user=ready.user, cwd="/"))
    except BaseException:
        await dismiss(ready)
        raise


def left(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise GradeError(f"grade timeout spent before {what}")
    return left


def command_for_tests(task: CodingTaskConfig, files: Sequence[str], canary: canaries.Canary | None = None) -> str:
    listed = [*files, canary.rel] if canary else list(files)
    text = " ".join(shlex.quote(p) for p in listed)
    if canary:
        # The canary's failure must be named in pytest's short summary, whatever reportchars
        # the task's command chose (-rN would hide it and fail an honest run): -r is "last
        # one wins", and this comes after the task's own options before {test_files}.
        text += " -rfE"
    return str(task.test_command).replace("{test_files}", text)


async def run_tests(ready: staging.Staging, task: CodingTaskConfig, deadline: float) -> tuple[dict, bytes]:
    """(the test run's record, its output: all of it where the results are read from it)."""
    # A little of the grade budget is kept back, so a slow suite ends as "test timeout" here
    # rather than as the engine cancelling the whole grade.
    limit = min(float(task.test_timeout or 600.0), max(1.0, left(deadline, "tests") - TIMEOUT_RESERVE))
    keep = (
        RESULTS_OUTPUT_BYTES
        if ready.results_format in ("go", "parser")
        else PYTEST_OUTPUT_BYTES
        if ready.results_format == "pytest"
        else TEST_OUTPUT_BYTES
    )
    tokens = " ".join(ready.end or ()).encode()
    done = await staging.run(ready.tester, b"go\n" + tokens + b"\n", limit, keep)
    if not done.delivered:  # an infrastructure failure, never a score
        raise GradeError(
            f"the test command had ended before it was started: "
            f"{brief(done.output.decode('utf-8', 'replace'), done.exit_code)}"
        )
    user = ready.isolation.pytest_uid if ready.isolation is not None else ready.user  # pytest's, not a launcher's
    output = done.output
    record = {
        "command": ready.command,
        "user": user,
        "exit_code": done.exit_code,
        "timed_out": done.timed_out,
        "timeout": limit,
        "output_bytes": done.output_bytes,
        "seconds": round(done.seconds, 4),
    }
    if ready.end is not None:  # judged: what came before the runner's end; the rest only recorded
        cut = runner_end.split(output, *ready.end)
        output = cut.text
        record["end"] = {
            "shell": cut.shell_end,
            "runner_report": cut.runner_report,
            **({"runner_outcomes": cut.runner_outcomes} if cut.runner_outcomes is not None else {}),
            **({"runner_passed": sorted(cut.runner_passed)} if cut.runner_passed is not None else {}),
            **({"hidden_first": cut.hidden_first} if cut.hidden_first is not None else {}),
        }
        if cut.runner_audit is not None:  # the runtime audit's record (envs/coding/audit.py), kept whole
            record["audit"] = cut.runner_audit
        if cut.after.strip():
            record["after_end"] = {"bytes": len(cut.after), "tail": tail_text(cut.after.decode("utf-8", "replace"))}
    record["output_tail"] = tail_text(output.decode("utf-8", "replace"))
    return record, output


async def read_results(
    ws: Workspace, ready: staging.Staging, task: CodingTaskConfig, output: bytes, deadline: float
) -> dict:
    """The named test results, as the raw grade keeps them: ``{"format", "tests": [{name,
    status}]}`` or ``{"format", "error"}`` when they could not be read (that run scores 0:
    a verdict never falls back to text the tested code could have written)."""
    fmt, digest = ready.results_format, ""
    if fmt == "none":
        return {"format": "none"}
    try:
        if fmt == "pytest":
            assert ready.reader is not None  # started by prepare for pytest
            done = await staging.run(
                ready.reader, b"go\n", left(deadline, "reading the test report"), RESULTS_OUTPUT_BYTES
            )
            if done.exit_code == NO_REPORT or not done.delivered:
                return {"format": fmt, "error": "pytest wrote no JUnit report (it did not run, or was stopped)"}
            if done.exit_code != 0 or done.timed_out or done.output_bytes > RESULTS_OUTPUT_BYTES:
                raise GradeError(
                    f"the JUnit report could not be read (exit code {done.exit_code}, {done.output_bytes} bytes)"
                )
            # Its digest first: a report rewritten after pytest's end may no longer parse, and
            # that it changed is the finding (envs/coding/runner_end.py), not that it is broken.
            digest = hashlib.sha256(done.output).hexdigest()
            tests = sources.get("junit").parse(done.output)
        elif fmt == "go":
            tests = sources.get("go-json").parse(output)
        elif fmt == "parser":
            tests = sources.get("parser").parse(await run_parser(ws, task, output, deadline))
        else:
            raise GradeError(f"task {task.id!r}: results.format {fmt!r} is not auto, pytest, go, parser or none")
    except GradeError as exc:
        return {"format": fmt, "error": str(exc), **({"sha256": digest} if digest else {})}
    read = {"format": fmt, "tests": [{"name": t.name, "status": t.status} for t in tests]}
    return {**read, "sha256": digest} if fmt == "pytest" else read


async def run_parser(ws: Workspace, task: CodingTaskConfig, output: bytes, deadline: float) -> bytes:
    """Run the task's parser as root over the test output; what it wrote to ``{output}``."""
    if not task.results.parser.strip():
        raise GradeError(f"task {task.id!r}: results.format is parser but results.parser is empty")
    scratch = f"{RESULTS_ROOT}-parse-{secrets.token_hex(8)}"
    files = {"stdout": f"{scratch}/stdout", "stderr": f"{scratch}/stderr", "output": f"{scratch}/output.json"}
    parser = task.results.parser
    for key, path in files.items():
        parser = parser.replace("{" + key + "}", shlex.quote(path))
    script = (
        f"set -e\nmkdir -m 700 {shlex.quote(scratch)}\ncat > {shlex.quote(files['stdout'])}\n"
        f": > {shlex.quote(files['stderr'])}\n( {parser} ) >&2\ncat -- {shlex.quote(files['output'])}\n"
    )
    # From /, not the repo: a parser run as root from a directory the agent's diff writes to
    # would import whatever module the diff put there.
    done = await ws.exec(
        ["bash", "-c", script],
        user=ROOT_UID,
        cwd="/",
        stdin=output,
        timeout=left(deadline, "the results parser"),
        max_output=RESULTS_OUTPUT_BYTES,
    )
    if done.timed_out or done.exit_code != 0:
        raise GradeError(
            f"the results parser failed (exit code {done.exit_code}): "
            f"{brief(done.stderr.decode('utf-8', 'replace'), done.exit_code, 300)}"
        )
    return done.stdout


def brief(text: str, exit_code: int, limit: int = 2000) -> str:
    text = text.strip()
    return text[-limit:] if text else f"(no output, exit code {exit_code})"


def tail_text(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= OUTPUT_TAIL_BYTES:
        return text
    return data[-OUTPUT_TAIL_BYTES:].decode("utf-8", "ignore")


async def dismiss(ready: staging.Staging) -> None:
    """Let whichever of the two commands still waits go (the tester, when nothing applied)."""
    for waiting in (ready.stager, ready.tester, ready.reader):
        if waiting is None:
            continue
        try:
            await staging.dismiss(waiting)
        except (BrokenPipeError, WorkspaceError):
            pass
