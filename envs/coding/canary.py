"""The canary: a test that must FAIL, run last beside the hidden tests under ``strict``.

The hidden tests import the agent's code into the test runner's own process, so that code
can rewrite the runner's verdict from inside: register a plugin that marks every report
passed, or print a passing summary and exit 0. No rule about paths can drop it — it is the
code being graded. A canary catches every such trick that forges the verdict wholesale: the
grader adds one test of its own, with a fresh random name, that always fails. A run whose
canary is not reported failed was tampered with and scores 0; an honest run shows exactly
one failure, the canary's, which is then taken out of the output before the task's
``tests_ran_regex`` and the exit code are judged.

Its limit (docs/integrity.md): code that has read this module can tell the canary from the
hidden tests in-process (a name it did not see before, a body that only raises) and forge
around it. The canary raises the bar; only a verdict from outside the tested process would
end it.

Only for pytest commands that take the test files (``{test_files}``): other runners get no
canary (recorded as such; ``crucible check`` notes a pytest command that lacks only them).
Passing the canary some other way (appended to a command that names its own paths, or to a
``make`` target) would guess at the command's shape, so the author is told instead.
"""

from __future__ import annotations

import posixpath
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TAMPERED = "tampered: the canary test, which always fails, was not reported failed"
_SUMMARY = re.compile(r"(?m)^=*\s*((?:[0-9]+ [a-z]+(?:, )?)+)(?: in [0-9.]+\s*s\b.*?)?\s*=*\s*$")
_COUNT = re.compile(r"([0-9]+) ([a-z]+)")


@dataclass(frozen=True)
class Canary:
    rel: str
    """Where the stager writes it: beside the first hidden test, under a fresh random name."""
    nodeid: str
    """pytest's id for it, as its short test summary names a failure."""
    body: bytes

    def record(self) -> dict:
        """What the raw grade keeps, so the verdict can be judged again from the record."""
        return {"nodeid": self.nodeid}


NOT_WANTED = "the test command is not a pytest run over {test_files}"
"""What the raw grade records (``canary.skipped``) where ``wanted`` says no."""


def lacks_test_files(test_command: str) -> bool:
    """A pytest run that would take a canary but for its missing ``{test_files}``: the
    grader passes the canary to pytest among the test files, and a command naming its own
    paths has nowhere to put it (what ``crucible check`` notes)."""
    return "{test_files}" not in test_command and re.search(r"\bpytest\b", test_command) is not None


def wanted(test_command: str) -> bool:
    """A canary needs a pytest run that takes the test files as arguments."""
    return "{test_files}" in test_command and re.search(r"\bpytest\b", test_command) is not None


def make(hidden: Sequence[str]) -> Canary:
    """A new canary for one grading: its name and message are fresh random tokens."""
    token = secrets.token_hex(8)
    folder = posixpath.dirname(hidden[0]) if hidden else "tests"
    rel = posixpath.join(folder, f"test_{token}.py") if folder else f"test_{token}.py"
    name = f"test_{secrets.token_hex(6)}"
    body = f'def {name}():\n    raise AssertionError("{secrets.token_hex(8)}")\n'.encode()
    return Canary(rel=rel, nodeid=f"{rel}::{name}", body=body)


def account(exit_code: int | None, output: str, canary: Mapping | None) -> tuple[int | None, str, str | None]:
    """(the exit code, the output, a tamper reason or None) as if the canary had not run.

    Honest: exit code 1, the canary named among the failures, the summary's only failure.
    Then the result reads as the hidden tests' own: exit 0, "1 failed, " out of the summary
    and the canary's summary line gone. An exit of 0 means the canary was reported passed
    (or never ran): tampered. Anything else stands as it is (a real failure, an error)."""
    if not canary or "nodeid" not in canary or exit_code is None:
        return exit_code, output, None
    if exit_code == 0:
        return exit_code, output, TAMPERED
    failed_line = re.compile(rf"(?m)^FAILED {re.escape(str(canary['nodeid']))}(?: - .*)?\n?")
    summaries = list(_SUMMARY.finditer(output))
    if exit_code != 1 or not failed_line.search(output) or not summaries:
        return exit_code, output, None
    last = summaries[-1]
    counts = {kind: int(n) for n, kind in _COUNT.findall(last.group(1))}
    if counts.get("failed") != 1:
        return exit_code, output, None  # a hidden test failed too
    rest = ", ".join(f"{n} {kind}" for n, kind in _COUNT.findall(last.group(1)) if kind != "failed")
    body = last.group(0).replace(last.group(1), rest, 1)
    output = output[: last.start()] + body + output[last.end() :]
    return 0, failed_line.sub("", output), None
