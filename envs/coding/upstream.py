"""A coding task from one upstream fix commit (``crucible task new``).

The fix is split by path: its changes to test paths (``--tests`` globs, else the flavor's
default test paths, ``protect.DEFAULT_TEST_PATHS``) are the hidden test change, the rest is
the golden. The task's own repo gets the three-branch convention:

    NAME_baseline = the base commit (the fix's parent), its history as upstream has it
    NAME_test     = base + the fix's test-path changes      (one commit)
    NAME_golden   = base + every other change of the fix     (one commit)

Both new commits are written with git plumbing through a private index (no checkout, no
work tree), dated and authored as the fix was, so the same fix gives the same SHAs. Only
those three branches are left in the task repo. Nothing of upstream is copied into crucible:
the repo goes to the user's task-repo directory and the YAML names it by path.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from engine.errors import ConfigError
from engine.models import UpstreamFix
from engine.plan import repos
from envs.coding import protect
from envs.integrity import patch

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DEFAULT_TEST_COMMAND = "python3 -m pytest -q -p no:cacheprovider"
DEFAULT_PACKAGES = ("python3", "python3-pytest")


def new_task(fix: UpstreamFix) -> Path:
    set_name, _, name = fix.task_id.partition("/")
    if not (NAME.match(set_name) and NAME.match(name)) or "/" in name:
        raise ConfigError(f"task id '{fix.task_id}' must be SET/NAME (letters, digits, _ . -)")
    yaml_path = fix.conf_dir / "task" / set_name / f"{name}.yaml"
    if yaml_path.exists():
        raise ConfigError(f"{yaml_path} exists: choose another name or remove it")
    target = (fix.repos_dir / set_name / name).resolve()
    if target.exists():
        raise ConfigError(f"task repo {target} exists: choose another name or remove it")
    source = repos.resolve_repo(fix.repo)
    fix_sha = repos.pin(source, fix.fix, task_id=fix.task_id, role="fix")
    base_sha = repos.pin(source, fix.base, task_id=fix.task_id, role="base") if fix.base else _parent(source, fix_sha)
    changes = _changes(source, base_sha, fix_sha)
    patterns = tuple(fix.tests) or protect.DEFAULT_TEST_PATHS
    tests = {p: c for p, c in changes.items() if patch.is_protected(p, patterns)}
    rest = {p: c for p, c in changes.items() if p not in tests}
    where = f"fix {fix_sha[:12]} (base {base_sha[:12]}, {len(changes)} paths)"
    if not tests:
        raise ConfigError(
            f"{where}: no path matches the test paths {list(patterns)}, so the test change would "
            "be empty; name them with --tests GLOB"
        )
    if not rest:
        raise ConfigError(
            f"{where}: every path is a test path ({', '.join(sorted(tests)[:5])}), so the golden would be empty"
        )
    _write_repo(source, target, name, base_sha, fix_sha, tests, rest)
    prompt = fix.prompt if fix.prompt is not None else _message(source, fix_sha)
    yaml_path.parent.mkdir(parents=True, exist_ok=True)
    yaml_path.write_text(_task_yaml(fix, name, set_name, target, prompt, fix_sha, base_sha, sorted(tests)))
    return yaml_path


def prompt_digest(prompt: str) -> str:
    """What ``prompt_from_commit`` records: a prompt still equal to it is still the message."""
    return hashlib.sha256(prompt.encode()).hexdigest()


def _git(repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", **(env or {})},
    )
    if proc.returncode != 0:
        raise ConfigError(f"git {args[0]} failed in {repo}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def _parent(source: Path, fix_sha: str) -> str:
    parents = _git(source, "rev-list", "--parents", "-n", "1", fix_sha).split()[1:]
    if not parents:
        raise ConfigError(f"fix {fix_sha[:12]} is a root commit: give --base")
    return parents[0]


def _changes(source: Path, base: str, fix: str) -> dict[str, tuple[str, str]]:
    """{path: (new mode, new blob)} of base..fix, renames as a delete and an add."""
    raw = _git(source, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", base, fix)
    fields = raw.split("\0")
    changes = {}
    for head, path in zip(fields[0::2], fields[1::2]):
        if head.startswith(":"):
            _old_mode, mode, _old_blob, blob, _status = head[1:].split(" ")
            if mode == "160000":
                raise ConfigError(f"fix {fix[:12]} changes the submodule {path}: not supported")
            changes[path] = (mode, blob)
    return changes


def _message(source: Path, sha: str) -> str:
    return _git(source, "log", "-1", "--format=%B", sha).strip()


def _write_repo(
    source: Path,
    target: Path,
    name: str,
    base: str,
    fix: str,
    tests: dict[str, tuple[str, str]],
    rest: dict[str, tuple[str, str]],
) -> None:
    """The task repo: a bare clone of ``source`` cut down to the three branches."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        repo = scratch / "repo.git"
        # Tags too: a fix may be reachable only from one (every ref but the three goes below).
        proc = subprocess.run(
            ["git", "clone", "--quiet", "--bare", str(source), str(repo)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise ConfigError(f"cannot clone {source}: {proc.stderr.strip()[-300:]}")
        _git(repo, "cat-file", "-e", f"{fix}^{{commit}}")  # a fix on no branch is not in a plain clone
        dated = dict(
            zip(
                (
                    "GIT_AUTHOR_NAME",
                    "GIT_AUTHOR_EMAIL",
                    "GIT_AUTHOR_DATE",
                    "GIT_COMMITTER_NAME",
                    "GIT_COMMITTER_EMAIL",
                    "GIT_COMMITTER_DATE",
                ),
                _git(repo, "log", "-1", "--format=%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd", "--date=raw", fix)
                .rstrip("\n")
                .split("\0"),
            )
        )
        test_sha = _commit(repo, base, tests, dated, f"{name}: the hidden test change of {fix[:12]}")
        golden_sha = _commit(repo, base, rest, dated, f"{name}: the fix of {fix[:12]} without its tests")
        for ref in _git(repo, "for-each-ref", "--format=%(refname)").split():
            _git(repo, "update-ref", "-d", ref)
        for role, sha in (("baseline", base), ("test", test_sha), ("golden", golden_sha)):
            _git(repo, "update-ref", f"refs/heads/{name}_{role}", sha)
        _git(repo, "symbolic-ref", "HEAD", f"refs/heads/{name}_baseline")
        os.rename(repo, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _commit(repo: Path, base: str, changes: dict[str, tuple[str, str]], env: dict[str, str], message: str) -> str:
    """base's tree with ``changes`` laid over it, committed on base, through a private index."""
    with tempfile.TemporaryDirectory() as scratch:
        index_env = {**env, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(repo, "read-tree", base, env=index_env)
        lines = []
        for path, (mode, blob) in sorted(changes.items()):
            # --index-info: "MODE SHA\tPATH"; mode 0 removes the path.
            lines.append(f"0 {'0' * 40}\t{path}" if mode == "000000" else f"{mode} {blob}\t{path}")
        _git(repo, "update-index", "--index-info", env=index_env, stdin="\n".join(lines) + "\n")
        tree = _git(repo, "write-tree", env=index_env).strip()
        return _git(repo, "commit-tree", tree, "-p", base, "-m", message, env=index_env).strip()


def _task_yaml(
    fix: UpstreamFix,
    name: str,
    set_name: str,
    repo: Path,
    prompt: str,
    fix_sha: str,
    base_sha: str,
    tests: Sequence[str],
) -> str:
    import json

    def quoted(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML string

    packages = list(fix.packages) or list(DEFAULT_PACKAGES)
    lines = [
        f"# {set_name}/{name}: made by `crucible task new` from {fix.repo}",
        f"# fix {fix_sha}, base {base_sha}; hidden test change: {len(tests)} path(s)",
        f"name: {quoted(name)}",
        f"set: {quoted(set_name)}",
        f"repo: {quoted(str(repo))}",
        f"test_command: {quoted(fix.test_command or DEFAULT_TEST_COMMAND)}",
        f"system_packages: [{', '.join(quoted(p) for p in packages)}]",
    ]
    if fix.install:
        lines.append(f"install: {quoted(fix.install)}")
    if fix.tests:
        lines.append(f"test_paths: [{', '.join(quoted(t) for t in fix.tests)}]")
    if fix.prompt is None:
        # The commit message usually names the fix: check says so until the prompt is edited.
        lines.append("# the prompt is the fix's commit message: write the task's own (an issue's words)")
        lines.append(f"prompt_from_commit: {quoted(prompt_digest(prompt))}")
    lines.append(f"prompt: {quoted(prompt)}")
    return "\n".join(lines) + "\n"
