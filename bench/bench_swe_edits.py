"""The run script's own edit of the test files, as crucible-strict makes it (swe_tasks/edits.py),
against the script's loop run by bash, on real trees.

For each official run script whose test-file edit loop ``edits.loop`` recognises, the instance's
``test/`` at its base commit (from a bare mirror of the instance's repository) is written twice:
once edited by the script's own loop text, run by bash (what the official run does as root), once
as sh/replay.sh does it under strict (the loop's ``find`` words, then ``sed --sandbox`` with the loop's
words for each file listed). Reported per script: files, files the edit changes, files whose
name sh/replay.sh refuses to put into sed's script as root (a character outside
``NAME_CHARACTERS``; such a file keeps the lock's refusal), and whether the two trees are byte
for byte the same. Nothing of either repository is kept.

    .venv/bin/python bench/bench_swe_edits.py --mirror <benchmark checkout or bare mirror> \
        --repo NodeBB/NodeBB=<bare mirror of NodeBB>
"""

from __future__ import annotations

import argparse
import filecmp
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.util.tables import format_table  # noqa: E402
from swe_tasks import edits  # noqa: E402

NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_./@+,=-]")
"""What sh/replay.sh's edit_locked refuses in a file's name (the same bracket expression)."""
_BASE = re.compile(r"^Base Commit: (\w+)", re.M)
_REPO = re.compile(r"^Repository: (\S+)", re.M)


def _git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, check=True).stdout


def _tree(repo: str, commit: str, into: Path) -> None:
    data = _git(repo, "archive", "--format=tar", commit, "test")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def _same(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    if files != sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()):
        return False
    return all(filecmp.cmp(a / f, b / f, shallow=False) for f in files)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mirror", required=True, help="the benchmark's repository: a checkout or a bare mirror")
    parser.add_argument("--repo", action="append", default=[], help="OWNER/NAME=<bare mirror>, per repository")
    ns = parser.parse_args()
    mirrors = dict(r.split("=", 1) for r in ns.repo)
    bench = ns.mirror if (Path(ns.mirror) / "HEAD").is_file() else str(Path(ns.mirror) / ".git")
    ids = _git(bench, "ls-tree", "--name-only", "HEAD:run_scripts").decode().split()
    rows, recognised, loops = [], 0, 0
    for iid in ids:
        script = _git(bench, "show", f"HEAD:run_scripts/{iid}/run_script.sh")
        loops += bool(re.search(rb"-print0\s*\\?\s*\n?\s*\|", script))
        found = edits.loop(script)
        if found is None:
            continue
        recognised += 1
        info = _git(bench, "show", f"HEAD:run_scripts/{iid}/instance_info.txt").decode()
        repo, base = _REPO.search(info), _BASE.search(info)
        if not (repo and base and repo.group(1) in mirrors):
            rows.append([iid[:60], "-", "-", "-", "no mirror of its repository given"])
            continue
        text = script.decode()
        block = text[text.index("find ") : text.index("done", text.index("-print0")) + 4]
        with tempfile.TemporaryDirectory() as work:
            by_bash, by_crucible, before = Path(work, "bash"), Path(work, "crucible"), Path(work, "before")
            for where in (by_bash, by_crucible, before):
                where.mkdir()
                _tree(mirrors[repo.group(1)], base.group(1), where)
            subprocess.run(["bash", "-ec", block], cwd=by_bash, check=True)
            listed = subprocess.run(
                ["find", *found.find, "-print0"], cwd=by_crucible, capture_output=True, check=True
            ).stdout.split(b"\0")[:-1]
            for name in (n.decode() for n in listed):
                subprocess.run(
                    ["sed", "--sandbox", *(w.replace(edits.FILE, name) for w in found.sed), name],
                    cwd=by_crucible,
                    check=True,
                )
            changed = sum(not filecmp.cmp(before / n.decode(), by_crucible / n.decode(), shallow=False) for n in listed)
            refused = sum(bool(NAME_CHARACTERS.search(n.decode())) for n in listed)
            rows.append([iid[:60], len(listed), changed, refused, "yes" if _same(by_bash, by_crucible) else "NO"])
    print(f"{len(ids)} run scripts; {loops} hold a find -print0 pipe; the edit loop recognised in {recognised}")
    print(
        format_table(
            ["instance", "files listed", "files the edit changes", "names refused", "same bytes as bash's loop"], rows
        )
    )
    return 0 if all(r[4] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
