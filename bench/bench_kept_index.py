"""What the image's kept index of the baseline saves on a big tree, as ratios measured in one run.

A task repo of ``--files`` generated files (8 KB of text each, 5,000 by default: a mid-sized
project) beside the coding tests' calc task (tests/coding_task.py), its image built from
Dockerfile.hud. Each trial captures an agent's one-file change and grades the golden in a
fresh container, through the coding env's own functions, two ways, alternating:

kept       as every run does: the stager and the capture start from the image's index of the
           baseline (/var/lib/crucible/index/<commit>), so git stats the tree.
afresh     that index removed from both workspaces first (as root, before anything reads it):
           the baseline read from the vault, so git hashes every file, as before the index.

Timed: the capture (one exec, the agent's workspace) and grading's stage (the stager's reset
of the tree and the diff's apply, from the grader's own durations), medians over the trials.

    .venv/bin/python bench/bench_kept_index.py [--files 5000] [--trials 5]

Exits non-zero when either median, kept over afresh, is past TARGET on 5,000 files or more
(fewer, and the stage's fixed costs weigh more): the index no longer read, or no longer
matching the tree a container sees.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

KEPT = "/var/lib/crucible/index"
TARGET = 0.8


def bulk_files(count: int) -> dict[str, bytes]:
    """``count`` files of 8 KB of text, 50 to a directory, the same bytes on every run."""
    files = {}
    for i in range(count):
        seed = hashlib.sha256(f"bulk {i}".encode()).hexdigest()
        files[f"bulk/d{i // 50:03d}/f{i % 50:02d}.txt"] = ((seed + "\n") * 125).encode()
    return files


async def trial(runtime, image: str, repo, kept: bool) -> tuple[float, float]:
    import coding_task as ct

    from engine.models import CapturedSubmission
    from envs.coding.flavor import hidden_files
    from envs.coding.grader import grade
    from envs.coding.repo import capture_diff, setup_repo

    task, integrity = ct.task(repo), ct.integrity("strict")
    run_id = f"bench-kept-{uuid.uuid4().hex[:8]}"
    async with (
        runtime.provision(image, run_id=run_id, network=False, purpose="agent") as agent,
        runtime.provision(image, run_id=run_id, network=False, purpose="grade") as grading,
    ):
        if not kept:
            for ws in (agent, grading):
                assert (await ws.exec(["rm", "-rf", "--", KEPT])).ok
        await setup_repo(agent, task, integrity)
        edit = await agent.exec(["bash", "-c", "echo '# edited' >> README.md"], user=1000, cwd=ct.WORKDIR)
        assert edit.ok, edit.text()
        began = time.perf_counter()
        captured = await capture_diff(agent, task, integrity)
        capture_seconds = time.perf_counter() - began
        assert captured.files_changed == ["README.md"], captured.files_changed
        golden = CapturedSubmission(diff=ct.golden_diff(repo))
        verdict = await grade(grading, task, integrity, golden, hidden_files(task), timeout=300)
        assert verdict.reward == 1.0, verdict.raw
        return capture_seconds, float(verdict.raw["durations"]["stage"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()

    import coding_task as ct
    import docker

    from engine.build.baseimage import ensure_base_image
    from engine.runtimes.docker.runtime import DockerRuntime

    ct.BASE_FILES.update(bulk_files(args.files))
    work = Path(tempfile.mkdtemp(prefix="crucible-bench-kept-"))
    repo = ct.build_repo(work / "repo")
    client = docker.from_env()
    image = ct.build_image(client, ensure_base_image(client).tag, repo, work / "context")
    runtime = DockerRuntime()
    asyncio.run(trial(runtime, image, repo, kept=True))  # warm: the image's layers in the page cache
    results: dict[str, list[tuple[float, float]]] = {"kept": [], "afresh": []}
    for _ in range(args.trials):
        for name in results:
            results[name].append(asyncio.run(trial(runtime, image, repo, kept=name == "kept")))

    print(f"{args.files} files ({args.files * 8 // 1000} MB) beside the calc task, {args.trials} trials each, medians")
    print(f"{'':8} {'capture s':>10} {'stage s':>9}   min..max capture / stage")
    medians = {}
    for name, rows in results.items():
        captures, stages = [r[0] for r in rows], [r[1] for r in rows]
        medians[name] = (statistics.median(captures), statistics.median(stages))
        spread = f"{min(captures):.3f}..{max(captures):.3f} / {min(stages):.3f}..{max(stages):.3f}"
        print(f"{name:8} {medians[name][0]:10.3f} {medians[name][1]:9.3f}   {spread}")
    kept, afresh = medians["kept"], medians["afresh"]
    print(f"kept / afresh: capture {kept[0] / afresh[0]:.2f}x, stage {kept[1] / afresh[1]:.2f}x")
    failed = False
    for i, name in enumerate(("capture", "stage")):
        if args.files >= 5000 and kept[i] / afresh[i] > TARGET:
            print(f"FAIL: the {name} from the kept index is {kept[i] / afresh[i]:.2f}x afresh (target <= {TARGET}x)")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
