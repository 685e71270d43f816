"""crucible's runner end marker: a pytest plugin the grader loads with ``-p`` from the fresh
directory pytest writes its JUnit report to (outside the repo; envs/coding/runner_end.py).

At import (pytest loads ``-p`` plugins before any conftest, collection, or code under test) it
takes a one-time token from ``end.nonce`` beside it and deletes the file. When pytest ends
(``pytest_unconfigure``, after the terminal summary and the JUnit report are written) it
prints one line: the token, ``runner-end`` and the report's sha256. Whatever appears after
that line (an exit hook, a thread, a process left behind) is not pytest's, and a report that
differs from the digest was rewritten after pytest wrote it.
"""
from __future__ import annotations

import hashlib
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))


def _take_token() -> tuple[str, list[str]]:
    """The one-time token and the words after it (what else grading asks of this plugin)."""
    path = os.path.join(_HERE, "end.nonce")
    try:
        with open(path, encoding="ascii") as handle:
            words = handle.read().split()
        os.unlink(path)  # gone before any code under test is imported
    except OSError:
        return "", []  # a nested or second pytest run: only the first one speaks
    return (words[0], words[1:]) if words else ("", [])


def _hide_running_test() -> None:
    """pytest puts the running test's id in the process environment (PYTEST_CURRENT_TEST),
    where the code under test could read which hidden case is asking. Nothing of a verdict
    needs it: pytest's own function that sets and clears it is replaced by one that does not."""
    from _pytest import runner

    if hasattr(runner, "_update_current_test_var"):
        runner._update_current_test_var = lambda item, when: None
    os.environ.pop("PYTEST_CURRENT_TEST", None)


_TOKEN, _ASKED = _take_token()
if "hide-running-test" in _ASKED:
    _hide_running_test()


def _digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "none"


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: object) -> None:
    if not _TOKEN:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    line = f"\n{_TOKEN} runner-end {_digest(os.path.join(_HERE, 'junit.xml'))}\n"
    os.write(1, line.encode("ascii"))
