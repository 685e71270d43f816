"""Deterministic builder for the task repos under samples/ (stdlib + the git CLI only).

A task set's directory holds its history as plain files a reviewer can read:

    main/NN_slug/message.txt      one commit on ``main`` per directory, in name order
    main/NN_slug/files/...        full contents of the files that commit adds or changes
    main/NN_slug/deleted.txt      optional: paths the commit deletes, one per line
    main/NN_slug/modes.txt        optional: ``100755 path`` lines for files under files/ that
                                  are executable (every other file it writes is 100644)
    tasks/T/bug/{message.txt,files/}    ``T_baseline``: branched from main, introduces the bug
    tasks/T/test/{message.txt,files/}   ``T_test``: from T_baseline, adds the hidden test(s)
    tasks/T/fix/{message.txt,files/}    ``T_golden``: from T_baseline, the fix

Any commit directory, main's or a task's, may have deleted.txt and modes.txt, and files/
may be missing when deleted.txt is not (a commit that only deletes).

The repo is written with ``git fast-import`` rather than ``git add``/``git commit``: the
stream names every file's mode, every author, committer and date explicitly, so no
config, hook, umask, clock or working-tree state can reach a commit, and the same inputs
give the same SHAs on every machine. Config is still shut out (GIT_CONFIG_GLOBAL=/dev/null,
GIT_CONFIG_NOSYSTEM=1, a scrubbed environment) because the final checkout honours it.

A mode belongs to the commit that writes the file: rewriting an executable file without
repeating its ``modes.txt`` line makes it 100644 again, and making a file executable means
writing it (with the same bytes, for a change of mode alone). Files are bytes, so binary
files need nothing special. A commit with neither deleted.txt nor modes.txt gives the same
stream, and so the same SHAs, as before they existed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

AUTHOR = "Crucible Samples <samples@crucible.invalid>"
EPOCH = 1704067200  # 2024-01-01T00:00:00Z; each commit is one hour after the previous
FILE_MODE = "100644"  # git records only 644/755 for blobs; a file is 644 unless modes.txt says 755
MODES = (FILE_MODE, "100755")
SAFE_PATH = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
GIT_CONFIG = (
    "-c",
    "init.defaultBranch=main",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
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
    deleted: tuple[str, ...] = ()
    modes: dict[str, str] = field(default_factory=dict)
    """Path -> mode for the files this commit writes that are not 100644."""
    source: Path = Path()
    """The commit's directory, for error messages."""

    def mode(self, path: str) -> str:
        return self.modes.get(path, FILE_MODE)


def read_commit_dir(path: Path, ref: str, parent: str | None) -> Commit:
    """One commit from ``path/message.txt``, the files under ``path/files`` and the optional
    ``path/deleted.txt`` and ``path/modes.txt``."""
    message_file, files_dir = path / "message.txt", path / "files"
    if not message_file.is_file():
        raise RepoGenError(f"{path}: needs message.txt (and files/, deleted.txt or both)")
    files = {}
    for file in sorted(p for p in files_dir.rglob("*") if p.is_file()):
        rel = file.relative_to(files_dir).as_posix()
        if not SAFE_PATH.match(rel):
            raise RepoGenError(f"{file}: keep sample paths to [A-Za-z0-9_.-] segments")
        files[rel] = file.read_bytes()
    deleted = read_deleted(path / "deleted.txt", files)
    if not files and not deleted:
        raise RepoGenError(f"{path}: a commit must change at least one file (files/ or deleted.txt)")
    modes = read_modes(path / "modes.txt", files)
    message = message_file.read_text(encoding="utf-8").strip() + "\n"
    return Commit(ref=ref, parent=parent, message=message, files=files, deleted=deleted, modes=modes, source=path)


def listed_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of each non-blank line of an optional list file."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def read_deleted(path: Path, files: dict[str, bytes]) -> tuple[str, ...]:
    """``deleted.txt``: one repo path per line, none of them also written by the commit."""
    deleted: list[str] = []
    for number, rel in listed_lines(path):
        where = f"{path}:{number}"
        if not SAFE_PATH.match(rel):
            raise RepoGenError(f"{where}: {rel!r} is not a sample path ([A-Za-z0-9_.-] segments)")
        if rel in files:
            raise RepoGenError(f"{where}: {rel} is both written (files/) and deleted")
        if rel in deleted:
            raise RepoGenError(f"{where}: {rel} is listed twice")
        deleted.append(rel)
    return tuple(sorted(deleted))


def read_modes(path: Path, files: dict[str, bytes]) -> dict[str, str]:
    """``modes.txt``: ``MODE PATH`` lines, MODE 100644 or 100755, PATH written by the commit."""
    modes: dict[str, str] = {}
    for number, line in listed_lines(path):
        where = f"{path}:{number}"
        mode, _, rel = line.partition(" ")
        rel = rel.strip()
        if mode not in MODES:
            raise RepoGenError(f"{where}: mode {mode!r} for {rel or '?'} is not one of {', '.join(MODES)}")
        if rel not in files:
            raise RepoGenError(f"{where}: {rel or '(no path)'} is not a file under files/ of this commit")
        if rel in modes:
            raise RepoGenError(f"{where}: {rel} is listed twice")
        if mode != FILE_MODE:
            modes[rel] = mode
    return modes


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
        # The grader applies the hidden change on top of a fix: the two must touch no path in common.
        overlap = set(test.deleted) & (set(fix.files) | set(fix.deleted)) | set(test.files) & set(fix.deleted)
        if overlap:
            raise RepoGenError(f"{task}: test/ and fix/ both change {sorted(overlap)}")
        commits += [bug, test, fix]
    check_deletions(commits)
    return commits


def check_deletions(commits: list[Commit]) -> None:
    """Every deleted path must exist in the tree the commit builds on."""
    trees: dict[str, frozenset[str]] = {}
    for commit in commits:
        parent = trees.get(commit.parent, frozenset()) if commit.parent else frozenset()
        missing = [path for path in commit.deleted if path not in parent]
        if missing:
            raise RepoGenError(
                f"{commit.source / 'deleted.txt'}: deletes {missing[0]}, which {commit.parent or 'the root'} "
                "does not have"
            )
        trees[commit.ref] = (parent - set(commit.deleted)) | set(commit.files)


def fast_import_stream(commits: list[Commit]) -> bytes:
    """A ``git fast-import`` stream; each commit's mark is its index + 1."""
    out = bytearray()
    tips: dict[str, int] = {}
    for index, commit in enumerate(commits):
        mark, when = index + 1, f"{EPOCH + 3600 * index} +0000"
        message = commit.message.encode()
        out += f"commit refs/heads/{commit.ref}\nmark :{mark}\n".encode()
        out += f"author {AUTHOR} {when}\ncommitter {AUTHOR} {when}\n".encode()
        out += f"data {len(message)}\n".encode() + message + b"\n"
        if commit.parent is not None:
            out += f"from :{tips[commit.parent]}\n".encode()
        for path in commit.deleted:
            out += f"D {path}\n".encode()
        for path in sorted(commit.files):
            data = commit.files[path]
            out += f"M {commit.mode(path)} inline {path}\ndata {len(data)}\n".encode() + data + b"\n"
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
            ["git", *GIT_CONFIG, *args], cwd=repo, env=git_env(), input=stdin, capture_output=True, check=True
        )
    except subprocess.CalledProcessError as exc:
        raise RepoGenError(f"git {args[0]} failed: {exc.stderr.decode(errors='replace')}") from exc
    return done.stdout.decode()


def fix_modes(repo: Path) -> None:
    """Working-tree modes independent of the caller's umask (git writes files 0666 & ~umask):
    0755 for directories and the files git records as 100755, 0644 for the rest."""
    executable = {
        line.split("\t", 1)[1]
        for line in git(repo, "ls-files", "--stage", "-z").split("\0")
        if line.startswith("100755 ")
    }
    for path in repo.rglob("*"):
        rel = path.relative_to(repo)
        if ".git" in rel.parts:
            continue
        path.chmod(0o755 if path.is_dir() or rel.as_posix() in executable else 0o644)


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
