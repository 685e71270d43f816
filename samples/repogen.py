"""Deterministic builder for the task repos under samples/ (stdlib + the git CLI only).

A task set's directory holds its history as plain files a reviewer can read:

    main/NN_slug/message.txt      one commit on ``main`` per directory, in name order
    main/NN_slug/files/...        full contents of the files that commit adds or changes
    tasks/T/bug/{message.txt,files/}    ``T_baseline``: branched from main, introduces the bug
    tasks/T/test/{message.txt,files/}   ``T_test``: from T_baseline, adds the hidden test(s)
    tasks/T/fix/{message.txt,files/}    ``T_golden``: from T_baseline, the fix

The repo is written with ``git fast-import`` rather than ``git add``/``git commit``: the
stream names every file's mode, every author, committer and date explicitly, so no
config, hook, umask, clock or working-tree state can reach a commit, and the same inputs
give the same SHAs on every machine. Config is still shut out (GIT_CONFIG_GLOBAL=/dev/null,
GIT_CONFIG_NOSYSTEM=1, a scrubbed environment) because the final checkout honours it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

AUTHOR = "Crucible Samples <samples@crucible.invalid>"
EPOCH = 1704067200  # 2024-01-01T00:00:00Z; each commit is one hour after the previous
FILE_MODE = "100644"  # git records only 644/755; every sample file is a plain 644 file
SAFE_PATH = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
GIT_CONFIG = (
    "-c", "init.defaultBranch=main",
    "-c", "commit.gpgsign=false",
    "-c", "tag.gpgsign=false",
    "-c", "core.autocrlf=false",
    "-c", "core.fileMode=true",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)


class RepoGenError(Exception):
    """The task set's files are malformed, or OUT_DIR cannot take a repo."""


@dataclass(frozen=True)
class Commit:
    ref: str
    parent: str | None
    """The ref whose tip this commit builds on; None for the root commit."""
    message: str
    files: dict[str, bytes]


def read_commit_dir(path: Path, ref: str, parent: str | None) -> Commit:
    """One commit from ``path/message.txt`` and the files under ``path/files``."""
    message_file, files_dir = path / "message.txt", path / "files"
    if not message_file.is_file() or not files_dir.is_dir():
        raise RepoGenError(f"{path}: needs message.txt and a files/ directory")
    files = {}
    for file in sorted(p for p in files_dir.rglob("*") if p.is_file()):
        rel = file.relative_to(files_dir).as_posix()
        if not SAFE_PATH.match(rel):
            raise RepoGenError(f"{file}: keep sample paths to [A-Za-z0-9_.-] segments")
        files[rel] = file.read_bytes()
    if not files:
        raise RepoGenError(f"{files_dir}: a commit must change at least one file")
    message = message_file.read_text(encoding="utf-8").strip() + "\n"
    return Commit(ref=ref, parent=parent, message=message, files=files)


def task_names(set_dir: Path) -> list[str]:
    return sorted(p.name for p in (set_dir / "tasks").iterdir() if p.is_dir())


def plan_commits(set_dir: Path) -> list[Commit]:
    """Every commit of the set, in the order (and so with the dates) they are written."""
    commits, parent = [], None
    for step in sorted(p for p in (set_dir / "main").iterdir() if p.is_dir()):
        commits.append(read_commit_dir(step, "main", parent))
        parent = "main"
    if not commits:
        raise RepoGenError(f"{set_dir}/main: no commits")
    for task in task_names(set_dir):
        base = set_dir / "tasks" / task
        bug = read_commit_dir(base / "bug", f"{task}_baseline", "main")
        test = read_commit_dir(base / "test", f"{task}_test", f"{task}_baseline")
        fix = read_commit_dir(base / "fix", f"{task}_golden", f"{task}_baseline")
        # The hidden tests must exist only on T_test, never on baseline or golden.
        clash = set(test.files) & (set(bug.files) | set(fix.files))
        if clash:
            raise RepoGenError(f"{task}: hidden test files also in bug/ or fix/: {sorted(clash)}")
        commits += [bug, test, fix]
    return commits


def fast_import_stream(commits: list[Commit]) -> bytes:
    """A ``git fast-import`` stream; each commit's mark is its index + 1."""
    out, tips = bytearray(), {}
    for index, commit in enumerate(commits):
        mark, when = index + 1, f"{EPOCH + 3600 * index} +0000"
        message = commit.message.encode()
        out += f"commit refs/heads/{commit.ref}\nmark :{mark}\n".encode()
        out += f"author {AUTHOR} {when}\ncommitter {AUTHOR} {when}\n".encode()
        out += f"data {len(message)}\n".encode() + message + b"\n"
        if commit.parent is not None:
            out += f"from :{tips[commit.parent]}\n".encode()
        for path in sorted(commit.files):
            data = commit.files[path]
            out += f"M {FILE_MODE} inline {path}\ndata {len(data)}\n".encode() + data + b"\n"
        out += b"\n"
        tips[commit.ref] = mark
    return bytes(out + b"done\n")


def git_env() -> dict[str, str]:
    """A scrubbed environment: no inherited GIT_DIR/GIT_INDEX_FILE, no user or system config."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LC_ALL": "C",
        "TZ": "UTC",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *GIT_CONFIG, *args], cwd=repo, env=git_env(), input=stdin,
            capture_output=True, check=True,
        )
    except subprocess.CalledProcessError as exc:
        raise RepoGenError(f"git {args[0]} failed: {exc.stderr.decode(errors='replace')}") from exc
    return done.stdout.decode()


def fix_modes(repo: Path) -> None:
    """Working-tree modes independent of the caller's umask (git writes files 0666 & ~umask)."""
    for path in repo.rglob("*"):
        if ".git" in path.relative_to(repo).parts:
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)


def build(set_dir: Path, out_dir: Path) -> dict[str, str]:
    """Write the set's repo (non-bare, ``main`` checked out) at ``out_dir``; return branch -> SHA."""
    commits = plan_commits(set_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise RepoGenError(f"{out_dir}: must not exist or be an empty directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    git(out_dir, "init", "--quiet", "--template=")
    git(out_dir, "fast-import", "--quiet", "--done", stdin=fast_import_stream(commits))
    git(out_dir, "reset", "--quiet", "--hard", "main")
    fix_modes(out_dir)
    listing = git(out_dir, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in listing.splitlines())


def main(set_dir: Path, argv: list[str]) -> int:
    """CLI: ``build_repo.py OUT_DIR``; prints ``SHA BRANCH`` lines like ``git show-ref``."""
    if len(argv) != 1:
        print(f"usage: python samples/{set_dir.name}/build_repo.py OUT_DIR", file=sys.stderr)
        return 2
    try:
        refs = build(set_dir, Path(argv[0]))
    except (RepoGenError, OSError) as exc:
        print(f"build_repo: {exc}", file=sys.stderr)
        return 1
    for ref, sha in sorted(refs.items()):
        print(f"{sha} {ref}")
    return 0
