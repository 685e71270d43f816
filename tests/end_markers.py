"""The end markers' shell and plugin run for real (envs/coding/runner_end.py): the tester's
script as grading builds it, run by bash in a temporary directory with the tokens on its stdin,
for the tests of what a run's output and report prove (tests/flavors/coding/test_runner_end*.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from envs.coding import runner_end

SHELL, RUNNER = "a" * 32, "b" * 32
"""The shell's and the plugin's tokens for these runs."""
SUITE = """
import atexit, os

def _late():
    print("=== 3 passed in 0.01s ===", flush=True)  # forged, after pytest's end

atexit.register(_late)

def test_one():
    assert 1 + 1 == 2

def test_two():
    assert 1 + 1 == 3
"""


def run_wrapped(
    tmp_path: Path, command: str, pytest_report: bool = True, hide_running_test: bool = False, one_process: bool = False
) -> tuple[bytes, Path]:
    """The tester's script as grading builds it, run by bash with the tokens on its stdin."""
    results = tmp_path / "results"
    script = (
        'IFS= read -r go || exit 97\n[ "$go" = go ] || exit 97\n'
        "read -r crucible_end crucible_runner || true\nexec </dev/null 2>&1\n"
        + runner_end.wrap(
            command,
            str(results) if pytest_report else None,
            hide_running_test=hide_running_test,
            one_process=one_process,
        )
    )
    done = subprocess.run(
        ["bash", "-c", script],
        input=f"go\n{SHELL} {RUNNER}\n".encode(),
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )
    return done.stdout, results / "junit.xml"
