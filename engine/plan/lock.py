"""A task's lock file: the named tests it is graded on, pinned with what they were derived on.

Like Nix's flake.lock or Cargo.lock, it sits beside the task's config (``conf/task/SET/
NAME.yaml`` -> ``NAME.lock``) and is written by ``crucible lock`` (or ``check --lock``), never
by hand: the resolved SHAs, the image's input hash, and the fail-to-pass / pass-to-pass lists
derived the way a benchmark validates an instance — run the baseline (with the hidden change)
and the golden, ``repeats`` times each; F2P = failing on every baseline run and passing on
every golden one, P2P = passing on all of them, a test whose status differs between repeats
of one side is flaky and in neither list.

Planning reads it: the lists go into the task (so the spec hash covers them), and a lock whose
SHAs or test settings are not what the task plans to now is stale, one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.config.tree import option_file
from engine.errors import ConfigError
from engine.models import TestResult

LOCK_VERSION = 1
SUFFIX = ".lock"


def lock_path(task_id: str) -> Path | None:
    """Where ``task_id``'s lock lives (beside its config), or None for a task with no file."""
    config = option_file("task", task_id)
    return config.with_suffix(SUFFIX) if config is not None else None


READ: dict[str, str] = {}
"""Every lock this process planned with (task id -> its text): what a sweep's launcher sends
with a job to a worker that may not have it (engine/cli/ray_sweep.py)."""
SENT: dict[str, str] = {}
"""Locks that came with a job from the launcher (task id -> text): planning uses them, the
launcher's, over any this machine has, so the worker plans what the launcher planned."""


def read_lock(path: Path, *, text: str | None = None) -> dict[str, Any]:
    """The lock at ``path`` (``text``: its content, when it came from elsewhere); a malformed
    one is a ConfigError naming the file and the key."""
    try:
        data = json.loads(path.read_text() if text is None else text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"lock file {path} cannot be read: {exc}") from exc
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION:
        raise ConfigError(f"lock file {path}: not a version-{LOCK_VERSION} crucible lock (rewrite it: crucible lock)")
    for key in ("pins", "image_input_hash", "task_inputs", "fail_to_pass", "pass_to_pass"):
        if key not in data:
            raise ConfigError(f"lock file {path}: no '{key}' (rewrite it: crucible lock)")
    for key in ("fail_to_pass", "pass_to_pass", "flaky"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"lock file {path}: '{key}' must be a list of test names")
    return data


UNLOCKED_FIELDS = frozenset({"fail_to_pass", "pass_to_pass", "pins", "id", "prompt", "validation"})
"""Task fields a lock's lists do not depend on (or that it sets itself)."""


def task_inputs(task: Any) -> str:
    """A hash of everything else in the task (its test command, hidden-test filter, results
    format, packages, install step, ...): change one and the lists may name other tests."""
    import dataclasses
    import hashlib

    fields = {k: v for k, v in dataclasses.asdict(task).items() if k not in UNLOCKED_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def check_fresh(lock: Mapping[str, Any], path: Path, task_id: str, pins: Mapping[str, str], inputs: str) -> None:
    """A lock derived on other commits or from another test setup says nothing about this plan.
    (The image's input hash is recorded, not compared: it covers the forwarded CA bundle and
    base image, which differ between machines that run the same tests.)"""
    command = f"crucible lock task={task_id}"
    locked = dict(lock.get("pins") or {})
    for role in sorted(set(locked) | set(pins)):
        if locked.get(role) != pins.get(role):
            was, now = str(locked.get(role) or "none")[:12], str(pins.get(role) or "none")[:12]
            raise ConfigError(
                f"task '{task_id}': lock {path} is stale: {role} moved from {was} to {now}; run `{command}`"
            )
    if lock.get("task_inputs") != inputs:
        raise ConfigError(
            f"task '{task_id}': lock {path} is stale: the task's test settings changed since it was "
            f"written (test command, hidden tests, results, packages, ...); run `{command}`"
        )


def derive_lists(
    baseline: Sequence[Sequence[TestResult]], golden: Sequence[Sequence[TestResult]]
) -> dict[str, list[str]]:
    """F2P, P2P and flaky from ``baseline`` and ``golden``: each the results of one or more
    repeated runs of that side. A test missing from a run counts as not passed there; a test
    that passes in some runs of one side and not in others is flaky (FAILED in one run and
    ERROR in another is not: it fails either way)."""
    if not baseline or not golden:
        raise ValueError(f"derive_lists needs a run of each side ({len(baseline)} baseline, {len(golden)} golden)")
    base = [{t.name for t in run if t.status == "PASSED"} for run in baseline]
    gold = [{t.name for t in run if t.status == "PASSED"} for run in golden]
    names = {t.name for runs in (baseline, golden) for run in runs for t in run}

    def split(runs: list[set[str]], name: str) -> set[bool]:
        return {name in passed for passed in runs}

    flaky = sorted(n for n in names if len(split(base, n)) > 1 or len(split(gold, n)) > 1)
    steady = [n for n in sorted(names) if n not in flaky]
    return {
        "fail_to_pass": [n for n in steady if split(gold, n) == {True} and split(base, n) == {False}],
        "pass_to_pass": [n for n in steady if split(gold, n) == {True} and split(base, n) == {True}],
        "flaky": flaky,
    }


def write_lock(
    path: Path,
    *,
    task_id: str,
    pins: Mapping[str, str],
    input_hash: str,
    task_inputs: str,
    lists: Mapping[str, list[str]],
    repeats: int,
) -> None:
    """Write the lock atomically, in a stable form (sorted keys, one name per line): a lock
    re-derived to the same lists is the same file."""
    data = {
        "version": LOCK_VERSION,
        "task": task_id,
        "pins": dict(sorted(pins.items())),
        "image_input_hash": input_hash,
        "task_inputs": task_inputs,
        "repeats": repeats,
        "fail_to_pass": list(lists["fail_to_pass"]),
        "pass_to_pass": list(lists["pass_to_pass"]),
        "flaky": list(lists.get("flaky", [])),
    }
    tmp = path.with_suffix(SUFFIX + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    tmp.replace(path)
