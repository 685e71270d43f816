"""``crucible export-task task=SET/NAME DIR``: a coding (or sdlc) task written as a Harbor task
folder that crucible's own harbor flavor ships back with the same gate verdicts.

environment/ = the baseline tree (``git archive``) with a Dockerfile installing the task's system
packages and running its ``install``; tests/ = the hidden change (files written over the agent's
work, deletions listed) with a test.sh running the task's test command and writing reward.txt
(1 iff it exits 0); solution/ = the golden diff and a solve.sh applying it (Harbor's oracle).
What does not carry over is said per task on stdout (an sdlc task's PR check; the strict-mode
defences of the coding grader).
"""

from __future__ import annotations

import io
import shlex
import shutil
import tarfile
from pathlib import Path

from engine.errors import ConfigError, UserError
from engine.plan import repos
from envs.coding import hidden

USAGE = "crucible export-task task=SET/NAME|'glob(SET/*)' DIR [overrides]"
PROBE = Path(__file__).resolve().parents[1] / "coding" / "verdict"
EXPORTABLE = ("coding", "sdlc")

TEST_SH = """#!/bin/bash
# Exported by crucible from task {task_id}: the hidden change laid over the agent's work, the task's
# test command run, reward 1 iff it exits 0.
mkdir -p /logs/verifier
cd {workdir} || {{ echo 0 > /logs/verifier/reward.txt; exit 0; }}
if [ -d /tests/hidden ]; then cp -a /tests/hidden/. ./; fi
if [ -f /tests/hidden.deleted ]; then
  while IFS= read -r path; do rm -rf -- "./$path"; done < /tests/hidden.deleted
fi
export PYTHONPATH="/tests/lib${{PYTHONPATH:+:$PYTHONPATH}}"
{command}
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

SOLVE_SH = """#!/bin/bash
# The golden of crucible task {task_id}: its diff from the baseline, applied.
set -e
cd {workdir}
git apply --binary --whitespace=nowarn "$(dirname "$0")/golden.diff"
"""

TASK_TOML = """version = "1.0"

[metadata]
source = "crucible"
crucible_task = "{task_id}"

[verifier]
timeout_sec = {verifier}

[agent]
timeout_sec = {agent}

[environment]
allow_internet = false
"""


class ExportTaskCommand:
    """The ``crucible export-task`` command (``conf/command/export-task.yaml``)."""

    def run(self, argv: list[str]) -> int:
        if argv[:1] in (["-h"], ["--help"], ["help"]):
            print(f"usage: {USAGE}\n\nwrite each selected coding or sdlc task as a Harbor task folder under DIR")
            return 0
        targets = [a for a in argv if "=" not in a]
        if len(targets) != 1 or not any(a.startswith("task=") for a in argv):
            raise UserError(f"usage: {USAGE}")
        out = Path(targets[0])
        from engine.config.compose import combinations, compose_config, to_typed

        for combo in combinations([a for a in argv if "=" in a]):
            cfg = to_typed(compose_config([*combo, "agent=noop"]))
            for line in export(cfg, out):
                print(line)
        return 0


def export(cfg, out: Path) -> list[str]:
    """Write ``cfg``'s task under ``out/<name>``; the lines saying what was written and what of
    the task a Harbor folder cannot carry."""
    task = cfg.task
    task_id = f"{task.set}/{task.name}"
    if cfg.flavor.name not in EXPORTABLE:
        raise ConfigError(
            f"task {task_id}: flavor {cfg.flavor.name} cannot be exported to a Harbor folder "
            f"(only {', '.join(EXPORTABLE)})"
        )
    repo = repos.resolve_repo(task.repo)
    shas = {
        role: repos.pin(repo, getattr(task.refs, role), task_id=task_id, role=role)
        for role in ("baseline", "test", "golden")
    }
    change = hidden.read_change(repo, shas["baseline"], shas["test"], task.hidden_tests, task_id=task_id)
    target = out / task.name
    if target.exists():
        raise UserError(f"{target} exists: export-task writes new folders only (remove it, or choose another DIR)")
    _environment(target / "environment", repo, shas["baseline"], cfg)
    _tests(target / "tests", change, cfg, task_id)
    (target / "solution").mkdir(parents=True)
    (target / "solution" / "golden.diff").write_bytes(
        repos.git_bytes(repo, "diff", "--binary", "--no-color", shas["baseline"], shas["golden"])
    )
    _script(target / "solution" / "solve.sh", SOLVE_SH.format(task_id=task_id, workdir=shlex.quote(task.workdir)))
    (target / "instruction.md").write_text(str(task.prompt).rstrip("\n") + "\n", encoding="utf-8")
    (target / "task.toml").write_text(
        TASK_TOML.format(task_id=task_id, verifier=_verifier_limit(cfg), agent=float(cfg.timeouts.agent)),
        encoding="utf-8",
    )
    lines = [f"exported {task_id} -> {target}"]
    if cfg.flavor.name == "sdlc":
        lines.append(f"  {task_id}: its PR check (0.2 of the sdlc reward) is not exported: the reward is its tests'")
    return lines


def _verifier_limit(cfg) -> float:
    """test.sh's limit: two thirds of the task's grading limit (the rest is the grader's own)."""
    return float(round(float(cfg.timeouts.grade) * 2 / 3))


def _environment(env_dir: Path, repo: Path, baseline: str, cfg) -> None:
    """The baseline tree and a Dockerfile any Docker builds (FROM debian:bookworm; crucible's
    harbor source maps FROM onto its own base)."""
    tree = env_dir / "repo"
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(repos.git_bytes(repo, "archive", "--format=tar", baseline))) as tar:
        tar.extractall(tree, filter="tar")
    task = cfg.task
    packages = sorted({"git", "ca-certificates", *cfg.env.system_packages, *task.system_packages})
    workdir = task.workdir
    lines = [
        "FROM debian:bookworm",
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        f"{' '.join(packages)} && rm -rf /var/lib/apt/lists/*",
        f"COPY repo/ {workdir}/",
        f"WORKDIR {workdir}",
    ]
    if task.install:
        lines.append(f"RUN {task.install}")
    (env_dir / "Dockerfile").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _tests(tests_dir: Path, change: list[hidden.HiddenFile], cfg, task_id: str) -> None:
    task = cfg.task
    tests_dir.mkdir(parents=True)
    deleted = [f.path for f in change if f.mode == hidden.DELETE]
    for item in change:
        if item.mode == hidden.DELETE:
            continue
        path = tests_dir / "hidden" / item.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if item.mode == "link":
            path.symlink_to(item.data.decode())
        else:
            path.write_bytes(item.data)
            path.chmod(0o755 if item.mode == "755" else 0o644)
    if deleted:
        (tests_dir / "hidden.deleted").write_text("".join(f"{p}\n" for p in deleted), encoding="utf-8")
    (tests_dir / "lib").mkdir()
    for name in ("crucible_probe.py", "crucible_scenario.py"):  # what isolated-verdict tests import
        shutil.copyfile(PROBE / name, tests_dir / "lib" / name)
    modules = " ".join(shlex.quote(p) for p in hidden.test_modules(change))
    command = str(task.test_command).replace("{test_files}", modules)
    _script(tests_dir / "test.sh", TEST_SH.format(task_id=task_id, workdir=shlex.quote(task.workdir), command=command))


def _script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
