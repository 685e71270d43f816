"""The hidden change: what grading lays over the agent's diff, read from the host repo.

By default it is EVERYTHING between the baseline and the test ref — files added, modified,
deleted, renamed (a delete and an add: ``--no-renames``), binary files, mode changes and
symlinks — so a real fix's test change, which also deletes or moves tests, is reproduced
exactly. The task's ``hidden_tests`` only filters it. Each entry is written (or removed)
after the agent's diff in the grading workspace, so the agent's edits to those paths are
lost and deleted tests are gone.

Read once per task with the git CLI (one ``diff --raw``, one ``cat-file --batch`` for the blobs), on the host: the test
ref never enters the agent's workspace.
"""

from __future__ import annotations

import base64
import functools
import os
import posixpath
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ConfigError, PlanError
from engine.util.commit_memo import remembered
from envs.integrity import patch

WRITE_MODES = {"100644": "644", "100755": "755", "120000": "link"}
"""git's file modes -> the stager's: a plain file, an executable one, a symlink (its blob is
the target). A gitlink (160000, a submodule) has no content to write: refused."""
DELETE = "del"
TEST_MODULE = re.compile(r"(^test_.*\.py$)|(^.*_test\.py$)")
"""pytest's default ``python_files``: the hidden change's modules ``{test_files}`` names."""


@dataclass(frozen=True)
class HiddenFile:
    path: str
    mode: str
    """``644``, ``755``, ``link`` or ``del`` (removed in grading)."""
    data: bytes = b""

    @property
    def entry(self) -> str:
        """How the stager is told about it before the submission exists: ``MODE PATH``."""
        return f"{self.mode} {self.path}"


def select(paths: Sequence[str], filters: Sequence[str]) -> list[str]:
    """Those of ``paths`` a ``hidden_tests`` filter keeps: all of them without one; else an
    exact path, a glob, a name glob at any depth (no '/'), ``DIR/`` or ``DIR/**``."""
    if not filters:
        return list(paths)
    wanted = [f.strip("/") + ("/**" if f.endswith("/") else "") for f in filters]
    return [p for p in paths if patch.is_protected(p, wanted)]


def test_modules(files: Sequence[HiddenFile]) -> list[str]:
    """What ``{test_files}`` becomes: the change's pytest modules that exist at the test ref."""
    return [f.path for f in files if f.mode != DELETE and TEST_MODULE.match(posixpath.basename(f.path))]


def read_change(repo_path: Path, baseline: str, test: str, filters: Sequence[str], *, task_id: str) -> list[HiddenFile]:
    """The hidden change of a task, sorted by path. Raises ConfigError for what cannot be
    graded (a submodule in the change, a filter that selects nothing) and PlanError for a
    repo that lacks a commit."""
    return list(_read_change(str(repo_path), baseline, test, tuple(filters), task_id))


@functools.lru_cache(maxsize=64)
def _read_change(
    repo_path: str, baseline: str, test: str, filters: tuple[str, ...], task_id: str
) -> tuple[HiddenFile, ...]:
    """Once per process, and read from git once across commands (a function of the two commits
    and the filters alone: engine.util.commit_memo); a change that cannot be graded is refused
    every time, never kept."""
    kept = remembered(
        "hidden-change",
        (repo_path, baseline, test, *filters),
        lambda: [
            [f.path, f.mode, base64.b64encode(f.data).decode()]
            for f in _read_change_now(repo_path, baseline, test, filters, task_id)
        ],
    )
    return tuple(HiddenFile(path, mode, base64.b64decode(data)) for path, mode, data in kept)


def _read_change_now(
    repo_path: str, baseline: str, test: str, filters: tuple[str, ...], task_id: str
) -> tuple[HiddenFile, ...]:
    raw = _git(repo_path, ["diff", "--raw", "-z", "--no-renames", "--no-abbrev", baseline, test], baseline, test)
    changed = _parse_raw(raw.decode("utf-8", "surrogateescape"))
    chosen = set(select(sorted(changed), filters))
    exact = [f.strip("/") for f in filters if not any(c in f for c in "*?[") and not f.endswith("/")]
    unchanged = [f for f in exact if f not in changed and not any(p.startswith(f + "/") for p in changed)]
    if unchanged:  # a listed hidden test the test ref does not change would silently not run
        raise ConfigError(
            f"task '{task_id}': hidden_tests names {', '.join(unchanged)}, which the test "
            "ref does not change relative to the baseline"
        )
    if filters and not chosen:
        raise ConfigError(
            f"task '{task_id}': hidden_tests {list(filters)} select nothing of the test "
            f"change ({len(changed)} paths between the baseline and the test ref)"
        )
    if not chosen:
        raise ConfigError(f"task '{task_id}': the test ref changes nothing relative to the baseline")
    for path in sorted(chosen):
        mode = changed[path][0]
        if mode != "000000" and mode not in WRITE_MODES:
            raise ConfigError(
                f"task '{task_id}': the test change has {path} with git mode {mode} "
                "(a submodule?), which grading cannot write"
            )
    written = sorted(p for p in chosen if changed[p][0] != "000000")
    blobs = _blobs(repo_path, [changed[p][1] for p in written], baseline, test)
    data = dict(zip(written, blobs, strict=True))
    return tuple(
        HiddenFile(path, DELETE)
        if changed[path][0] == "000000"
        else HiddenFile(path, WRITE_MODES[changed[path][0]], data[path])
        for path in sorted(chosen)
    )


def _git(repo_path: str, args: list[str], baseline: str, test: str, stdin: bytes | None = None) -> bytes:
    """git's output, by the git CLI (one process; GitPython's import alone cost ~0.05 s of every
    plan, bench/bench_cached_check.py). PlanError naming the diff when git fails."""
    proc = subprocess.run(
        ["git", "-C", repo_path, *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"},
    )
    if proc.returncode != 0:
        raise PlanError(
            f"cannot diff {baseline[:12]}..{test[:12]} in {repo_path}: "
            f"{proc.stderr.decode(errors='replace').strip()[-300:]}"
        )
    return proc.stdout


def _blobs(repo_path: str, shas: list[str], baseline: str, test: str) -> list[bytes]:
    """The blobs ``shas`` in order, by one ``git cat-file --batch`` (``SHA TYPE SIZE``, the bytes,
    a newline, for each)."""
    if not shas:
        return []
    out = _git(repo_path, ["cat-file", "--batch"], baseline, test, stdin="".join(f"{s}\n" for s in shas).encode())
    found, at = [], 0
    for sha in shas:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) != 3 or header[0].decode() != sha or header[1] != b"blob":
            raise PlanError(f"blob {sha[:12]} of the test change is not in {repo_path} ({out[at:end][:80]!r})")
        size = int(header[2])
        found.append(out[end + 1 : end + 1 + size])
        at = end + 1 + size + 1
    return found


def _parse_raw(raw: str) -> dict[str, tuple[str, str]]:
    """``git diff --raw -z`` -> {path: (new mode, new blob)}: ``:old new oldsha newsha X\\0path\\0``."""
    fields = raw.split("\0")
    changed: dict[str, tuple[str, str]] = {}
    i = 0
    while i + 1 < len(fields):
        head, path = fields[i], fields[i + 1]
        i += 2
        if not head.startswith(":"):
            continue
        _old_mode, new_mode, _old_blob, new_blob, _status = head[1:].split(" ")
        changed[path] = (new_mode, new_blob)
    return changed
