"""Derive a task's ``validation``: tool calls that stage the golden solution on the baseline.

From the baseline..golden diff (host side, on the task's repo), one call per change:
``str_replace_based_edit_tool`` ``create`` with the full golden text for added or modified
UTF-8 text files, ``bash`` for what the edit tool cannot express (deletions, renames,
binary or non-UTF-8 content, symlinks, mode changes). Replayed through the task's own
tools by the ``integration_test`` agent, they must make the hidden tests pass.
"""

from __future__ import annotations

import base64
import functools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from engine.errors import PlanError
from engine.plan.repos import git_bytes
from engine.util.commit_memo import remembered

EDIT = "str_replace_based_edit_tool"
REGULAR, EXECUTABLE, SYMLINK, GITLINK = "100644", "100755", "120000", "160000"


@dataclass(frozen=True)
class Change:
    status: str  # A, M, D, R, T (git's letters; R carries a score we drop)
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    old_path: str
    new_path: str


def parse_raw(output: bytes) -> list[Change]:
    """Parse ``git diff-tree -r -z -M --raw`` output."""
    fields = output.split(b"\0")
    changes, i = [], 0
    while i < len(fields) and fields[i]:
        meta = fields[i].decode().lstrip(":").split(" ")
        old_mode, new_mode, old_sha, new_sha, status = meta[0], meta[1], meta[2], meta[3], meta[4][0]
        old_path = fields[i + 1].decode("utf-8", "surrogateescape")
        if status in "RC":
            new_path = fields[i + 2].decode("utf-8", "surrogateescape")
            i += 3
        else:
            new_path = old_path
            i += 2
        changes.append(Change(status, old_mode, new_mode, old_sha, new_sha, old_path, new_path))
    return changes


def derive_validation(repo_path: str | Path, baseline_sha: str, golden_sha: str, workdir: str) -> list[dict]:
    """The ``{name, arguments}`` tool calls that turn the baseline tree into the golden one.

    Once per process for the same commits (a function of their content alone): ``crucible check``
    plans each task twice, golden and baseline, and this reads every changed blob with one
    ``git`` each (~5 ms a task, bench/bench_cached_check.py). Each caller gets its own copy."""
    return json.loads(_derived(str(repo_path), baseline_sha, golden_sha, workdir))


@functools.lru_cache(maxsize=64)
def _derived(repo_path: str, baseline_sha: str, golden_sha: str, workdir: str) -> str:
    """Read from git once across commands too (engine.util.commit_memo): the commits' content
    alone decides it."""
    steps = remembered(
        "validation",
        (repo_path, baseline_sha, golden_sha, workdir),
        lambda: _derive(Path(repo_path), baseline_sha, golden_sha, workdir),
    )
    return json.dumps(steps)


def _derive(repo: Path, baseline_sha: str, golden_sha: str, workdir: str) -> list[dict]:
    raw = git_bytes(repo, "diff-tree", "-r", "-z", "-M", "--raw", "--no-commit-id", baseline_sha, golden_sha)
    changes = parse_raw(raw)
    root = workdir.rstrip("/") or "/"
    steps: list[dict] = []
    # Deletions and renames first: a path may turn from a file into a directory.
    for change in changes:
        if change.status == "D" or change.status == "T":
            steps.append(_bash(f"rm -rf -- {_q(root, change.old_path)}"))
    for change in changes:
        if change.status == "R":
            move = f"mv -f -- {_q(root, change.old_path)} {_q(root, change.new_path)}"
            steps.append(_bash(_mkdir_for(root, change.new_path) + move))
    for change in changes:
        if change.status != "D":
            steps.extend(_stage(repo, root, change))
    return steps


def _stage(repo: Path, root: str, change: Change) -> list[dict]:
    mode, target = change.new_mode, f"{root}/{change.new_path}"
    if mode == GITLINK:
        raise PlanError(f"cannot derive validation for submodule {change.new_path}; give the task explicit validation")
    data = git_bytes(repo, "cat-file", "blob", change.new_sha)
    if mode == SYMLINK:
        link = shlex.quote(data.decode("utf-8", "surrogateescape"))
        return [_bash(_mkdir_for(root, change.new_path) + f"ln -sfn -- {link} {shlex.quote(target)}")]
    steps = []
    text = _text(data)
    if change.status in "MR" and change.old_sha == change.new_sha:
        pass  # content already in place (a pure rename after the mv, or a mode-only change)
    elif text is not None:
        steps.append({"name": EDIT, "arguments": {"command": "create", "path": target, "file_text": text}})
    else:
        steps.extend(_binary_steps(root, change.new_path, data))
    new_file = change.status in "AT"
    if (new_file and mode == EXECUTABLE) or (not new_file and mode != change.old_mode):
        steps.append(_bash(f"chmod {'755' if mode == EXECUTABLE else '644'} -- {shlex.quote(target)}"))
    return steps


BINARY_CHUNK = 48 * 1024
"""Raw bytes per bash step: 64 KiB of base64, well under Linux's 128 KiB limit on one argument."""


def _binary_steps(root: str, rel: str, data: bytes) -> list[dict]:
    """Bytes the edit tool cannot carry, written by ``base64 -d`` in argument-sized pieces."""
    target = shlex.quote(f"{root}/{rel}")
    steps = [_bash(_mkdir_for(root, rel) + f": > {target}")]
    for start in range(0, len(data), BINARY_CHUNK):
        encoded = base64.b64encode(data[start : start + BINARY_CHUNK]).decode()
        steps.append(_bash(f"printf '%s' {encoded} | base64 -d >> {target}"))
    return steps


def _text(data: bytes) -> str | None:
    """The file as text when the edit tool can write it byte-exactly (UTF-8, no NUL)."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def _q(root: str, rel: str) -> str:
    return shlex.quote(f"{root}/{rel}")


def _mkdir_for(root: str, rel: str) -> str:
    parent = f"{root}/{rel}".rsplit("/", 1)[0]
    return f"mkdir -p -- {shlex.quote(parent)} && "
