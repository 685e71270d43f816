"""A task repo given as a URL (engine/plan/repos.py: _cloned_repo): every branch and tag the
remote has, brought up to date on each plan. A real remote over file://; the clone lives in
the session's CRUCIBLE_HOME."""

from __future__ import annotations

from pathlib import Path

from git_repos import commit as commit_files
from git_repos import git

from engine.plan.repos import resolve_repo


def commit(work: Path, name: str) -> str:
    return commit_files(work, {name: f"{name}\n".encode()}, name)


def test_a_url_repo_has_every_remote_branch_and_tag_and_follows_them(tmp_path):
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    git(work, "remote", "add", "origin", str(remote))
    base = commit(work, "a")
    git(work, "push", "-q", "origin", "main")
    git(work, "checkout", "-q", "-b", "golden")
    golden = commit(work, "b")
    git(work, "tag", "v1")
    git(work, "push", "-q", "origin", "golden", "v1")

    clone = resolve_repo(f"file://{remote}")
    assert git(clone, "rev-parse", "main", "golden", "v1^{commit}").split() == [base, golden, golden]

    # The remote moves: main (the clone's own HEAD branch) and golden gain commits, a tag moves.
    git(work, "checkout", "-q", "main")
    newer_main = commit(work, "c")
    git(work, "checkout", "-q", "golden")
    newer_golden = commit(work, "d")
    git(work, "tag", "-f", "v1")
    git(work, "push", "-q", "-f", "origin", "main", "golden", "v1")

    assert resolve_repo(f"file://{remote}") == clone
    assert git(clone, "rev-parse", "main", "golden", "v1^{commit}").split() == [newer_main, newer_golden, newer_golden]
