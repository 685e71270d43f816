"""Git repositories the tests build on the host: deterministic commits (fixed author, dates,
no user config) and a small upstream project with one fix. Shared by the hidden-change and
lock tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout.strip()


def commit(
    repo: Path,
    files: dict[str, bytes | None],
    message: str,
    *,
    executable: tuple[str, ...] = (),
    links: dict[str, str] | None = None,
) -> str:
    for rel, data in files.items():
        path = repo / rel
        if data is None:
            git(repo, "rm", "-q", rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if rel in executable else 0o644)
    for rel, target in (links or {}).items():
        (repo / rel).symlink_to(target)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def upstream(tmp_path: Path) -> tuple[Path, str, str]:
    """An upstream project with one fix that changes code, changes a test, deletes a test and adds one."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(
        repo,
        {
            "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": b"from pkg.calc import add\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
            "tests/test_legacy.py": b"def test_legacy():\n    pass\n",
        },
        "base",
    )
    fix = commit(
        repo,
        {
            "pkg/calc.py": b"def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": b"from pkg.calc import add\n\ndef test_two():\n    assert add(1, 1) == 2\n",
            "tests/test_legacy.py": None,
            "CHANGES.md": b"- add adds\n",
        },
        "Fix add, which subtracted\n\nadd(1, 1) gave 0.",
    )
    return repo, base, fix
