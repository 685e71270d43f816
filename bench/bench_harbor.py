"""A real Harbor task through crucible's gate, image cached, against the floor: a bare
``docker build`` of the same environment (cached) and one ``docker run`` doing what Harbor's
oracle trial does (solve.sh, then tests/test.sh, the reward read), in the same container.

    .venv/bin/python bench/bench_harbor.py DATASET_DIR --task NAME [--trials 5] [--integrity strict]

DATASET_DIR is a directory of Harbor task folders; nothing of any dataset is in this repository
and this script fetches nothing. The figures in bench/README.md are of ``log-report``
(``dynamo/log-report``, the one task of github.com/zhcet19/Terminal-Bench-2-Harbor-, a
Terminal-Bench 2 task in Harbor's format), mirrored and extracted by hand:

    git clone https://github.com/zhcet19/Terminal-Bench-2-Harbor- /tmp/tb2-src
    mkdir -p /tmp/tb/log-report && git -C /tmp/tb2-src archive HEAD | tar -x -C /tmp/tb/log-report
    # the task as published calls `pytest --json-ctrf`; pytest-json-ctrf 0.3.5, which its
    # Dockerfile pins, names the option --ctrf, so its golden fails in Harbor too: fix it
    sed -i 's/--json-ctrf/--ctrf/' /tmp/tb/log-report/tests/test.sh
    .venv/bin/python bench/bench_harbor.py /tmp/tb --task log-report

``crucible check`` runs once with the task image removed (Docker's build cache is shared with
other users of the daemon and kept, so that build is mostly layer hits; ``docker build
--no-cache`` of the environment, timed once, is the real cost of a cold image), then ``--rebuild`` N times
(every run made again, the image a cache hit); the floor runs N times, interleaved with it.
Both use crucible's base for the Dockerfile's FROM (no registry here) and the same mapping
(envs/harbor/image.py), so they build the same environment. The state is a throwaway
CRUCIBLE_HOME. Exits non-zero when the gate does not ship the task (or the floor's reward is not 1).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def check(env: dict[str, str], task: str, integrity: str, *, rebuild: bool = True) -> float:
    """Seconds of one ``crucible check`` of the task; SystemExit with its output if it fails."""
    argv = [
        PYTHON,
        "-m",
        "engine.cli",
        "check",
        f"task=harbor/dataset/{task}",
        f"integrity={integrity}",
        *(["--rebuild"] if rebuild else []),
    ]
    began = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"the gate does not ship harbor/dataset/{task}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return seconds


def task_image(env: dict[str, str], task: str) -> str | None:
    """The task image the last check ran on (from the throwaway store)."""
    sql = f"select image_tag from runs where task_id = 'harbor/dataset/{task}' order by started_at desc limit 1"
    proc = subprocess.run(
        [PYTHON, "-m", "engine.cli", "query", "--csv", sql], cwd=ROOT, env=env, capture_output=True, text=True
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("crucible/")]
    return lines[0].strip() if lines else None


def floor_image(folder: Path, *, no_cache: bool = False) -> str:
    """The bare build: the task's Dockerfile with FROM mapped as crucible maps it, no tail, its
    environment/ as the context (and the forwarded CA bundle pip needs here). Cached by Docker."""
    from engine.build.baseimage import offline_base
    from engine.build.images import CA_FILE, default_ca_bundle
    from engine.runtimes.docker.daemon import ensure_engine
    from envs.harbor import folder as harbor_folder
    from envs.harbor.image import BASE_ARG, _dockerfile_text

    found = harbor_folder.read(folder)
    text = _dockerfile_text(found, True, tail=False)
    context = Path(tempfile.mkdtemp(prefix="harbor-floor-"))
    shutil.copytree(folder / "environment", context, dirs_exist_ok=True)
    (context / "Dockerfile.floor").write_text(text)
    bundle = default_ca_bundle()
    (context / CA_FILE).write_bytes(Path(bundle).read_bytes() if bundle else b"")
    tag = f"crucible-bench/harbor-floor:{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "--network",
            "host",
            *(["--no-cache"] if no_cache else []),
            "-f",
            str(context / "Dockerfile.floor"),
            "--build-arg",
            f"{BASE_ARG}={offline_base(ensure_engine())}",
            "-t",
            tag,
            str(context),
        ],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(context, ignore_errors=True)
    return tag


def floor(folder: Path, workdir: str) -> tuple[float, str]:
    """Seconds of the bare gate's golden side: the (cached) build, then one container running
    solve.sh then test.sh as Harbor's oracle trial does; and the reward it read."""
    began = time.perf_counter()
    tag = floor_image(folder)
    script = (
        f"mkdir -p /logs/verifier && cd {workdir} && bash /solution/solve.sh >/dev/null 2>&1; "
        "bash /tests/test.sh >/dev/null 2>&1; cat /logs/verifier/reward.txt 2>/dev/null || echo none"
    )
    proc = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{folder / 'solution'}:/solution:ro",
            "-v",
            f"{folder / 'tests'}:/tests:ro",
            tag,
            "bash",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - began, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "none"


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a directory of Harbor task folders")
    parser.add_argument("--task", required=True, help="the task folder's name")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--integrity", default="strict")
    args = parser.parse_args()
    folder = (args.dataset / args.task).resolve()
    if not (folder / "task.toml").is_file():
        raise SystemExit(f"{folder} is no Harbor task folder (no task.toml)")
    from envs.harbor import folder as harbor_folder

    workdir = harbor_folder.read(folder).workdir or "/app"
    home = tempfile.mkdtemp(prefix="bench-harbor-home-")
    env = {**os.environ, "CRUCIBLE_HOME": home, "CRUCIBLE_HARBOR_DATASET": str(args.dataset.resolve())}
    env.pop("CRUCIBLE_STORE", None)
    try:
        check(env, args.task, args.integrity, rebuild=False)  # the images' tags, then cold from scratch
        for tag in (task_image(env, args.task), floor_image(folder)):  # the layers they share go too
            if tag:
                subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
        cold = check(env, args.task, args.integrity, rebuild=True)
        began = time.perf_counter()
        floor_image(folder, no_cache=True)  # what building the environment really costs
        uncached = time.perf_counter() - began
        gate, bare, rewards, stored = [], [], [], []
        for _ in range(args.trials):  # interleaved
            gate.append(check(env, args.task, args.integrity, rebuild=True))
            stored.append(check(env, args.task, args.integrity, rebuild=False))
            seconds, reward = floor(folder, workdir)
            bare.append(seconds)
            rewards.append(reward)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"task {args.task} ({folder}), integrity {args.integrity}, {args.trials} trials")
    print(f"crucible check, image removed:             {cold:.2f} s  (Docker's build cache kept: a shared daemon)")
    print(f"docker build --no-cache of the environment: {uncached:.2f} s")
    print(
        f"crucible check --rebuild, image cached:    {spread(gate)}  (golden and baseline, each graded "
        "in a fresh container)"
    )
    print(f"crucible check, verdicts from the store:   {spread(stored)}  (the same specs: nothing runs)")
    print(
        f"floor: docker build (cached) + docker run: {spread(bare)}  (solve.sh then test.sh, one container; "
        f"rewards {sorted(set(rewards))})"
    )
    print(f"ratio gate / floor (medians): {statistics.median(gate) / statistics.median(bare):.2f}")
    if set(rewards) != {"1"}:
        print(f"the floor's reward is not 1: {rewards}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
