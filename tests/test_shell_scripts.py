"""Shell that runs in a workspace is a .sh file, and every .sh file passes shellcheck.

Without shellcheck (``apt-get install shellcheck``; scripts/setup.sh installs it) the check
skips, except with CI=true, where a missing shellcheck is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from engine.util import shell
from engine.util.paths import PROJECT_ROOT

ROOTS = ("engine", "envs", "swe_tasks", "scripts")


def _scripts() -> list[str]:
    found = []
    for root in ROOTS:
        found += sorted(str(p.relative_to(PROJECT_ROOT)) for p in (PROJECT_ROOT / root).rglob("*.sh"))
    return found


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but shellcheck is not installed (apt-get install shellcheck)")
        pytest.skip("shellcheck is not installed")
    return found


def test_the_workspace_scripts_are_found():
    scripts = _scripts()
    assert "envs/coding/sh/stager.sh" in scripts and "engine/runtimes/local/sh/write.sh" in scripts


@pytest.mark.parametrize("path", _scripts())
def test_shellcheck_finds_nothing(path):
    done = subprocess.run(
        [_shellcheck(), "-S", "warning", "-x", path],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", [p for p in _scripts() if "/sh/" in p])
def test_a_workspace_script_says_who_runs_it(path):
    """Each opens with a header naming the module that runs it; the header never reaches argv."""
    text = (PROJECT_ROOT / path).read_text()
    header = text[: len(text) - len(shell.body(text))]
    assert text.startswith("# shellcheck shell=") and ".py" in header, header


def test_each_workspace_script_is_run_by_a_module_beside_it():
    """No module names a script that is not there, and no script is left that none runs."""
    for folder in {(PROJECT_ROOT / p).parent for p in _scripts() if "/sh/" in p}:
        modules = [m for m in folder.parent.glob("*.py") if "shell.script(__file__" in m.read_text()]
        named = {n for m in modules for n in re.findall(r'"([A-Za-z0-9_]+\.sh)"', m.read_text())}
        present = {p.name for p in folder.glob("*.sh")}
        assert named == present, folder
        for module in modules:
            for name in named & set(re.findall(r'"([A-Za-z0-9_]+\.sh)"', module.read_text())):
                assert shell.script(str(module), name).strip()
