"""False positives of the test-awareness scanner (envs/integrity/scan/) on honest changes:
the recent non-merge commits of real Python projects, each scanned as if an agent had made it
(the commit's diff against its parent, the changed files as the commit has them, the
default test paths), and how long a scan takes.

The repositories are local mirrors given on the command line (bare or not); nothing of them
is kept. A commit counts when it changes at least one Python file outside the test paths (or,
with ``--code``, any file of those suffixes, tests included: the `runner-output` rule reads any
language's lines, and under SWE-bench Pro's strict the agent's test files too, as here; with
``--python-tests``, one that changes a Python test file: under SWE-bench Pro's strict those run
beside the hidden tests and are read for runner hooks and runner patching).

    .venv/bin/python bench/bench_scanner.py /path/to/mirror.git [...] [--commits 300]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envs.coding.protect import DEFAULT_TEST_PATHS  # noqa: E402
from envs.integrity import patch  # noqa: E402
from envs.integrity.scan import diffs, scanner  # noqa: E402


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def blob(repo: str, commit: str, path: str) -> bytes | None:
    proc = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("repos", nargs="+")
    parser.add_argument("--commits", type=int, default=300, help="the latest N non-merge commits of each")
    parser.add_argument(
        "--code",
        nargs="+",
        default=[".py"],
        metavar="SUFFIX",
        help="a commit counts when it changes a file with one of these suffixes (default .py, outside "
        "the test paths; others, tests included: e.g. .go .ts .js for `runner-output`)",
    )
    parser.add_argument(
        "--python-tests",
        action="store_true",
        help="a commit counts when it changes a Python file in the test paths (conftest.py, tests/...)",
    )
    parser.add_argument(
        "--test-paths",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="patterns added to the default test paths, as an instance's test trees are "
        "(swe_tasks/strict.py test_trees: test/units/** for ansible's)",
    )
    ns = parser.parse_args()
    test_paths = (*DEFAULT_TEST_PATHS, *ns.test_paths)
    print(f"{'repository':34} {'commits':>8} {'flagged':>8} {'rate':>6} {'scan ms (median)':>17}")
    examples: list[str] = []
    by_rule: collections.Counter[str] = collections.Counter()
    all_scanned = all_flagged = 0
    for repo in ns.repos:
        commits = git(repo, "rev-list", "--no-merges", f"--max-count={ns.commits * 3}", "HEAD").decode().split()
        scanned = flagged = 0
        seconds: list[float] = []
        for commit in commits:
            if scanned >= ns.commits:
                break
            parents = git(repo, "rev-list", "--parents", "-n", "1", commit).decode().split()[1:]
            if len(parents) != 1:
                continue
            try:
                diff = git(repo, "diff", "--binary", "--no-renames", parents[0], commit)
            except subprocess.CalledProcessError:
                break  # a shallow mirror's oldest commit: its parent is not there
            changed = [c for c in diffs.changed_files(diff) if c.added and c.symlink_target is None]
            # every Python file written, as SWE-bench Pro's strict sends them back for the scan
            wanted = [c.path for c in changed if c.path.endswith(".py")]
            if ns.python_tests:
                counts = any(c.path.endswith(".py") and patch.is_protected(c.path, test_paths) for c in changed)
            else:
                counts = any(
                    c.path.endswith(tuple(ns.code))
                    and (ns.code != [".py"] or not patch.is_protected(c.path, test_paths))
                    for c in changed
                )
            if not counts:
                continue
            contents = {path: blob(repo, commit, path) for path in wanted}
            began = time.perf_counter()
            # As SWE-bench Pro's strict reads it: the runner-output rule reads test files too.
            findings = scanner.scan(diff, contents, test_paths, runner_output_skips=())
            seconds.append(time.perf_counter() - began)
            scanned += 1
            if findings:
                flagged += 1
                by_rule.update({f.rule for f in findings})
                subject = git(repo, "log", "-1", "--format=%s", commit).decode().strip()[:60]
                examples.append(
                    f"{Path(repo).parent.name} {commit[:10]} {subject!r}: "
                    + "; ".join(f.describe() for f in findings[:3])
                )
        seconds.sort()
        median_ms = 1000 * seconds[len(seconds) // 2] if seconds else 0.0
        name = Path(repo).parent.name if Path(repo).name == "repo" else Path(repo).name
        print(f"{name:34} {scanned:8} {flagged:8} {flagged / max(scanned, 1):6.1%} {median_ms:17.2f}")
        all_scanned += scanned
        all_flagged += flagged
    print(f"{'all':34} {all_scanned:8} {all_flagged:8} {all_flagged / max(all_scanned, 1):6.1%}")
    print("\ncommits flagged, by rule:", dict(by_rule.most_common()))
    for line in examples:
        print(" ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
