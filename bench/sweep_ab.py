"""Two revisions' warm sweeps, alternating: what a change did to bench_sweep's sweep, paired.

On a machine whose speed drifts over minutes (a shared host: the same 8 floors cost 2.8 CPU-s
at one hour and 4.9 at another), a ratio to the floor taken now and one taken an hour ago do not
compare. This runs bench_sweep's warm sweep (8 runs, 2 at a time, a new seed each) from a
checkout of REV and from this tree, one after the other, each with its own warm server and
one store, and gives each side's wall and machine CPU (every process's, /proc/stat) and the
median of each pair's ratio: the two sides of a pair ran seconds apart.

    .venv/bin/python bench/sweep_ab.py REV [--trials 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_sweep import SWEEP, settle  # noqa: E402
from sweep_cpu import machine_cpu_seconds  # noqa: E402


def checkout(rev: str, where: Path) -> Path:
    """REV as a worktree of this repository, with this tree's virtualenv."""
    subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=ROOT, check=True, capture_output=True)
    (where / ".venv").symlink_to(ROOT / ".venv")
    return where


def crucible(tree: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], cwd=tree, env=env, capture_output=True, text=True
    )


def one_sweep(tree: Path, seed: int, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, machine CPU s) of one warm sweep from ``tree``, started on a quiet machine."""
    settle()  # the sweep before's containers' teardown charged to neither
    cpu, began = machine_cpu_seconds(), time.perf_counter()
    proc = crucible(tree, *SWEEP, f"seed={seed}", env=env)
    wall, used = time.perf_counter() - began, machine_cpu_seconds() - cpu
    if proc.returncode != 0 or "8 run(s) stored" not in proc.stdout:
        raise SystemExit(f"sweep from {tree} failed: {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
    return wall, used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the revision to compare this tree against (e.g. a commit before a change)")
    parser.add_argument("--trials", type=int, default=8)
    ns = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="crucible-sweep-ab-"))
    env = {**os.environ, "CRUCIBLE_HOME": str(scratch / "home"), "CRUCIBLE_WARM": "on"}
    before = checkout(ns.rev, scratch / "before")
    sides = {"before": before, "after": ROOT}
    try:
        for tree in sides.values():  # bytecode as an installed crucible has it; the servers warm
            subprocess.run([sys.executable, "-m", "compileall", "-q", "engine", "envs"], cwd=tree, capture_output=True)
            started = crucible(tree, "warm", "start", env=env)
            if started.returncode != 0:
                raise SystemExit(f"crucible warm start failed in {tree}: {started.stdout} {started.stderr}")
        seed = int(time.time()) % 100_000 * 100
        for tree in sides.values():  # each side's first sweep (images, page cache), not timed
            seed += 1
            one_sweep(tree, seed, env)
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for trial in range(ns.trials):
            for name in ("before", "after") if trial % 2 == 0 else ("after", "before"):
                seed += 1
                timings[name].append(one_sweep(sides[name], seed, env))
    finally:
        for tree in sides.values():
            crucible(tree, "warm", "stop", env=env)
        subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    print(f"{ns.trials} pairs of warm sweeps (8 runs, 2 at a time), alternating; load {os.getloadavg()[0]:.2f}")
    for name in sides:
        walls, cpus = ([t[i] for t in timings[name]] for i in (0, 1))
        print(
            f"{name:6} {ns.rev if name == 'before' else 'this tree':>12}: wall {statistics.median(walls):.3f} s "
            f"({min(walls):.2f}..{max(walls):.2f}), machine CPU {statistics.median(cpus):.3f} s "
            f"({min(cpus):.2f}..{max(cpus):.2f})"
        )
    pairs = list(zip(timings["before"], timings["after"], strict=True))
    wall = statistics.median(a[0] / b[0] for b, a in pairs)
    cpu = statistics.median(a[1] / b[1] for b, a in pairs)
    print(f"after / before, median of each pair's ratio: wall {wall:.3f}, machine CPU {cpu:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
