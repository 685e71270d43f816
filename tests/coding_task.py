"""A small three-branch coding task for the coding-env tests, and its image.

The repo is built deterministically (fixed identity and dates), so its SHAs, its baseline
bundle and therefore the image's input-addressed tag are the same on every run: the image
is built once and then found in the cache. Tests run in bash only (the offline base image
has no python): ``tests/runner.sh`` sources the test files, runs every ``test_*`` function
and prints ``N passed, M failed``.

The golden touches every kind of change the lifecycle must carry: a modified file, a new
file in a new directory, a deletion, a pure rename, a binary file, a mode change, CRLF
text, non-UTF-8 text and a file without a final newline. The hidden tests check each one
byte-exactly (sha256), so only a faithful round trip scores 1.0.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from engine.build.images import ContentAddressedBuilder
from engine.config.schema import IntegrityConfig
from engine.models import RunSpec
from engine.plan.repos import baseline_bundle
from engine.util.paths import PROJECT_ROOT
from envs.coding.schema import CodingTaskConfig, TaskRefs

GOLDEN_MARKER = "GOLDEN" + "-MARKER-9d41c7e2"
HIDDEN_MARKER = "HIDDEN" + "-MARKER-51be2d0a"
NAME = "calc"
WORKDIR = "/app"
HIDDEN = "tests/test_calc.sh"

RUNNER = """#!/bin/bash
# Runs every test_* function defined by the given files; prints "N passed, M failed".
source ./calc.sh
for f in "$@"; do source "$f"; done
passed=0; failed=0
for t in $(declare -F | awk '{print $3}' | grep '^test_'); do
  if ( set -e; "$t" ); then passed=$((passed + 1)); else echo "FAILED $t"; failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
"""

BASE_FILES: dict[str, bytes] = {
    "README.md": b"calc: a tiny bash calculator\n",
    "calc.sh": b"# calc library\nadd() { echo $(( $1 - $2 )); }\n",
    "tests/runner.sh": RUNNER.encode(),
    "tests/test_smoke.sh": b'test_smoke() { [ "$(add 0 0)" = 0 ]; }\n',
    "obsolete.txt": b"to be deleted\n",
    "old_name.txt": b"moved without change\n",
    "scripts/tool.sh": b"#!/bin/bash\necho tool\n",
    "win.txt": b"line one\r\nline two\r\n",
    "latin1.txt": b"caf\xe9\n",
    "noeol.txt": b"no newline",
    "w.bat": b"@echo off\necho hi\n",
    ".gitattributes": b"*.bat text eol=crlf\n",
}

BLOB = bytes(range(256)) * 4 + b"\x00\r\n\x00"
GOLDEN_FILES: dict[str, bytes] = {
    "calc.sh": f"# calc library ({GOLDEN_MARKER})\nadd() {{ echo $(( $1 + $2 )); }}\n".encode(),
    "lib/helper.sh": b"helper() { echo ok; }\n",
    "data/blob.bin": BLOB,
    "win.txt": b"line one\r\nline TWO\r\n",
    "latin1.txt": b"caf\xe9 cr\xe8me\n",
    "noeol.txt": b"still no newline!",
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hidden_test() -> bytes:
    checks = "\n".join(
        f'test_bytes_{i}() {{ [ "$(sha256sum < {path} | cut -c1-64)" = {_sha(data)} ]; }}'
        for i, (path, data) in enumerate(sorted(GOLDEN_FILES.items()))
    )
    return f"""# hidden tests ({HIDDEN_MARKER})
test_add() {{ [ "$(add 2 3)" = 5 ]; }}
test_helper() {{ source lib/helper.sh; [ "$(helper)" = ok ]; }}
test_tool_is_executable() {{ [ -x scripts/tool.sh ]; }}
test_renamed() {{ [ -f renamed/name.txt ] && [ ! -e old_name.txt ]; }}
test_deleted() {{ [ ! -e obsolete.txt ]; }}
{checks}
""".encode()


@dataclass
class TaskRepo:
    path: Path
    baseline: str
    test: str
    golden: str

    def git(self, *args: str) -> str:
        return _git(self.path, *args)


_ENV = {
    "GIT_AUTHOR_NAME": "fixture",
    "GIT_AUTHOR_EMAIL": "fixture@crucible.invalid",
    "GIT_COMMITTER_NAME": "fixture",
    "GIT_COMMITTER_EMAIL": "fixture@crucible.invalid",
    "GIT_AUTHOR_DATE": "2001-02-03T04:05:06+0000",
    "GIT_COMMITTER_DATE": "2001-02-03T04:05:06+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env={**os.environ, **_ENV}
    ).stdout.strip()


def _write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def build_repo(root: Path) -> TaskRepo:
    """The task repo: two baseline commits, then test and golden branches off the baseline."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", f"{NAME}_baseline")
    _git(root, "config", "core.autocrlf", "false")
    _write(root, BASE_FILES)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "calc: first version")
    _write(root, {"README.md": BASE_FILES["README.md"] + b"\nUsage: source calc.sh\n"})
    _git(root, "commit", "-q", "-am", "docs: usage")
    baseline = _git(root, "rev-parse", "HEAD")

    _git(root, "checkout", "-q", "-b", f"{NAME}_test")
    _write(root, {HIDDEN: hidden_test()})
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "hidden tests")

    _git(root, "checkout", "-q", "-b", f"{NAME}_golden", baseline)
    _write(root, GOLDEN_FILES)
    _git(root, "rm", "-q", "obsolete.txt")
    (root / "renamed").mkdir()
    _git(root, "mv", "old_name.txt", "renamed/name.txt")
    os.chmod(root / "scripts/tool.sh", 0o755)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fix add, and more")
    _git(root, "checkout", "-q", f"{NAME}_baseline")
    return TaskRepo(root, baseline, _git(root, "rev-parse", f"{NAME}_test"), _git(root, "rev-parse", f"{NAME}_golden"))


def build_image(client, base_image: str, repo: TaskRepo, context: Path, install_cmd: str = "") -> str:
    """The task image from Dockerfile.hud (the real image definition); cached by its inputs.
    ``install_cmd``: the task's install step (INSTALL_CMD), run in the tree as root."""
    context.mkdir(parents=True, exist_ok=True)
    baseline_bundle(repo.path, f"{NAME}_baseline", repo.baseline, context / "repo.bundle")
    builder = ContentAddressedBuilder(client, ca_bundle=None)
    args = {"BASE": base_image, "BASELINE_REF": f"{NAME}_baseline", "REPO_DIR": WORKDIR}
    if install_cmd:
        args["INSTALL_CMD"] = install_cmd
    ref = builder.plan(PROJECT_ROOT / "Dockerfile.hud", context, args, purpose="test-coding-task")
    builder.ensure(ref)
    return ref.tag


def golden_diff(repo: TaskRepo) -> str:
    """baseline..golden as a diff crucible would capture (binary, full index)."""
    return subprocess.run(
        ["git", "-C", str(repo.path), "diff", "--binary", "--full-index", repo.baseline, repo.golden],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8", "surrogateescape")


def task(repo: TaskRepo, **overrides) -> CodingTaskConfig:
    """The coding task over ``repo``, as planning leaves it (id and pins filled)."""
    fields = {
        "id": f"test/{NAME}",
        "name": NAME,
        "set": "test",
        "repo": str(repo.path),
        "refs": TaskRefs(baseline=f"{NAME}_baseline", test=f"{NAME}_test", golden=f"{NAME}_golden"),
        "pins": {"baseline": repo.baseline, "test": repo.test, "golden": repo.golden},
        "hidden_tests": [HIDDEN],
        "test_command": "bash tests/runner.sh {test_files}",
        "prompt": "Fix add in calc.sh.",
        "workdir": WORKDIR,
        "protected_paths": ["tests/runner.sh"],
        "test_timeout": 60.0,
        "tests_ran_regex": r"\b[1-9][0-9]* passed\b",
    }
    return CodingTaskConfig(**{**fields, **overrides})


TEXT_VERDICTS = "integrity.defences.named_results_only=false"
"""This task's bash runner reads no named results: it is graded on its exit code and summary
text, which ``strict`` refuses (envs/coding/reading.py ``text_only_refusal``). The tests over it
check grading's mechanics, so they compose each mode with text verdicts allowed; the refusal
itself is tested in tests/flavors/coding/test_runner_end_verdicts.py."""


@functools.cache
def integrity(mode: str) -> IntegrityConfig:
    """The integrity mode ``mode`` as the config tree composes it (never hand-built), text
    verdicts allowed (``TEXT_VERDICTS``)."""
    from engine.config.compose import compose_config, to_typed

    return to_typed(compose_config(["task=sample/last_page", f"integrity={mode}", TEXT_VERDICTS])).integrity


def spec(task: CodingTaskConfig, mode: str, *overrides: str) -> RunSpec:
    """A run spec for ``task`` with the config tree's parts (integrity ``mode``, the env,
    the timeouts, ...; ``overrides`` as on the command line), as planning would make it
    minus the image: for driving the flavor directly."""
    from engine.config.compose import compose_config, to_typed

    cfg = to_typed(
        compose_config(
            ["task=sample/last_page", f"integrity={mode}", "agent=integration_test", TEXT_VERDICTS, *overrides]
        )
    )
    return RunSpec(
        engine_version="test",
        task=task,
        env=cfg.env,
        flavor=cfg.flavor,
        agent=cfg.agent,
        model=None,
        integrity=cfg.integrity,
        runtime=cfg.runtime,
        image={},
        timeouts=cfg.timeouts,
        seed=0,
        attempt=0,
    )
