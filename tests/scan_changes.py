"""Agents' changes made as real git diffs in a small repository, and scanned as grading scans them
(envs/integrity/scan/): the shared helpers of tests/integrity/scan/."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from envs.coding.protect import DEFAULT_TEST_PATHS
from envs.integrity.scan import diffs, model, scanner

BASE = '''\
"""Money arithmetic."""
import inspect


def legacy_caller():
    return inspect.stack()[1].function  # the project's own, before the agent came


def add(a, b):
    return a + b
'''


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def make_repo(tmp_path: Path) -> Path:
    """A repository with the project's code (``BASE``) and a test, committed: the baseline."""
    root = tmp_path / "repo"
    (root / "money").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "money" / "core.py").write_text(BASE)
    (root / "tests" / "test_core.py").write_text(
        "from money.core import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "baseline")
    return root


def change(repo: Path, path: str, text: str) -> list[model.Finding]:
    """The findings on the agent's change: ``path`` now reads ``text``."""
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text))
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "--binary", "HEAD")
    wanted = scanner.paths_to_read(diff, DEFAULT_TEST_PATHS)
    contents = {p: (repo / p).read_bytes() for p in wanted}
    return scanner.scan(diff, contents, DEFAULT_TEST_PATHS)


def rules(findings: list[model.Finding]) -> set[str]:
    return {f.rule for f in findings}


def run_apart(program: str) -> None:
    """``program`` in a Python of its own, with a limit far above what a linear read takes: a
    read that backtracks or walks the file again per name runs past it."""
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=Path(scanner.__file__).parents[3],
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def swe_change(repo: Path, files: dict[str, str], restored: tuple[str, ...] = ()) -> list[model.Finding]:
    """The findings on an agent's change graded as SWE-bench Pro's ``strict`` grades it: the
    patch whole, its own test files running beside the hidden ones, ``restored`` left to the
    benchmark; every Python file git wrote is sent back for the scan."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(textwrap.dedent(text))
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "--binary", "HEAD")
    contents = {c.path: (repo / c.path).read_bytes() for c in diffs.changed_files(diff) if c.path.endswith(".py")}
    return scanner.scan(diff, contents, (*DEFAULT_TEST_PATHS, *restored), runner_output_skips=list(restored))


def read_for_runner_plugins(repo: Path, detail: str, text: str) -> None:
    """An agent's own ``tests/conftest.py`` holding ``text`` is read for runner plugins: found with
    ``detail`` (a runner hook, a patch or code the scan cannot read); restored by the benchmark,
    the same file is the project's and not blamed."""
    found = swe_change(repo, {"tests/conftest.py": text})
    assert detail in [f.detail for f in found if f.path == "tests/conftest.py"], found
    assert {f.rule for f in found} <= {"runner-hook", "monkeypatch", "unread-code"}
    assert swe_change(repo, {"tests/conftest.py": text + "\n"}, restored=("tests/conftest.py",)) == []


def zip_of(files: dict[str, str]) -> bytes:
    """A zip archive holding ``files`` (name -> text), as bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()
