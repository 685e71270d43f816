"""The test-awareness scan of one commit against the working tree's, over bench_scanner.py's
corpora: every commit's findings whole and in order, not the bench's counts. A change meant to
keep the findings (issue 33's split of envs/coding/scanner.py into envs/integrity/scan/) shows
here as no commit differing.

The base is extracted with ``git archive`` into a temporary directory; each side is read in a
Python of its own with its tree first on the path, importing its scanner where it lives
(``envs/integrity/scan/`` or ``envs/coding/scanner.py``). Commits are chosen as bench_scanner.py
chooses them (``--commits``, ``--code``, ``--python-tests``, ``--test-paths``), and each is
scanned as SWE-bench Pro's strict reads it (test files too) and as the coding flavor's.

    .venv/bin/python bench/scan_compare.py --base HEAD MIRROR [MIRROR ...] [--commits 200] [...]
"""

from __future__ import annotations

import argparse
import collections
import importlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def record(tree: str, out: str, ns: argparse.Namespace) -> None:
    """One side: every chosen commit's findings, a JSON line each, with ``tree``'s scanner."""
    sys.path.insert(0, tree)
    try:
        scanner = importlib.import_module("envs.integrity.scan.scanner")
        changed_files = importlib.import_module("envs.integrity.scan.diffs").changed_files
    except ModuleNotFoundError:  # before issue 33
        scanner = importlib.import_module("envs.coding.scanner")
        changed_files = scanner.changed_files
    try:
        patch = importlib.import_module("envs.integrity.patch")
    except ModuleNotFoundError:  # before envs/coding/patch.py moved into the shared catalogue
        patch = importlib.import_module("envs.coding.patch")
    test_paths = (*importlib.import_module("envs.coding.protect").DEFAULT_TEST_PATHS, *ns.test_paths)
    with open(out, "w") as sink:
        for repo in ns.repos:
            scanned = 0
            for commit in (
                git(repo, "rev-list", "--no-merges", f"--max-count={ns.commits * 3}", "HEAD").decode().split()
            ):
                if scanned >= ns.commits:
                    break
                parents = git(repo, "rev-list", "--parents", "-n", "1", commit).decode().split()[1:]
                if len(parents) != 1:
                    continue
                try:
                    diff = git(repo, "diff", "--binary", "--no-renames", parents[0], commit)
                except subprocess.CalledProcessError:
                    break  # a shallow mirror's oldest commit
                changed = [c for c in changed_files(diff) if c.added and c.symlink_target is None]
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
                contents = {c.path: _blob(repo, commit, c.path) for c in changed if c.path.endswith(".py")}
                swe = scanner.scan(diff, contents, test_paths, runner_output_skips=())
                coding = scanner.scan(diff, contents, test_paths)
                sink.write(
                    json.dumps(
                        {
                            "repo": repo,
                            "commit": commit,
                            "swe": [f.to_dict() for f in swe],
                            "coding": [f.to_dict() for f in coding],
                        }
                    )
                    + "\n"
                )
                scanned += 1


def _blob(repo: str, commit: str, path: str) -> bytes | None:
    proc = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def compare(before: list[dict], after: list[dict]) -> int:
    """Prints the counts per rule on each side and every commit that differs; the number differing."""
    if [(r["repo"], r["commit"]) for r in before] != [(r["repo"], r["commit"]) for r in after]:
        print("the two sides chose different commits")
        return 1
    differing = 0
    for mode in ("swe", "coding"):
        rules = [collections.Counter(f["rule"] for r in side for f in r[mode]) for side in (before, after)]
        flagged = [sum(1 for r in side if r[mode]) for side in (before, after)]
        print(
            f"{mode:7} commits {len(before)}, flagged {flagged[0]} / {flagged[1]}, findings "
            f"{sum(rules[0].values())} / {sum(rules[1].values())} (before / after)"
        )
        for rule in sorted(set(rules[0]) | set(rules[1])):
            print(f"        {rule:18} {rules[0][rule]:5} {rules[1][rule]:5}")
        for old, new in zip(before, after):
            if old[mode] != new[mode]:
                differing += 1
                print(f"  differs ({mode}): {old['repo']} {old['commit'][:10]}: {old[mode]} -> {new[mode]}")
    print(f"commits differing: {differing}")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("repos", nargs="+")
    parser.add_argument("--base", default="HEAD", help="the commit whose scanner is compared with the working tree's")
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--code", nargs="+", default=[".py"], metavar="SUFFIX")
    parser.add_argument("--python-tests", action="store_true")
    parser.add_argument("--test-paths", nargs="+", default=[], metavar="PATTERN")
    parser.add_argument("--record", nargs=2, metavar=("TREE", "OUT"), help=argparse.SUPPRESS)  # one side
    ns = parser.parse_args()
    if ns.record:
        record(ns.record[0], ns.record[1], ns)
        return 0
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp) / "base"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ns.base, "engine", "envs", "swe_tasks"], check=True, capture_output=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(base, filter="data")
        sides = []
        for tree, out in ((str(base), f"{temp}/before.jsonl"), (str(ROOT), f"{temp}/after.jsonl")):
            sides.append((subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--record", tree, out]), out))
        if any(proc.wait() != 0 for proc, _ in sides):
            return 1
        before, after = ([json.loads(line) for line in Path(out).read_text().splitlines()] for _, out in sides)
        return compare(before, after)


if __name__ == "__main__":
    sys.exit(main())
