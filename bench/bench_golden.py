"""One golden run end to end against the floor, as ratios measured in one run.

floor      one `docker run` of the same task image that applies the golden diff (with the
           hidden tests) and runs the test command — the least any harness can do (for a
           task with an isolated verdict: its scenarios called in pytest's process).
in-process crucible from a planned spec to a stored verdict (the batch API), with the
           integration_test agent staging the golden through the MCP tools.
cli        the whole `crucible run task=... agent=integration_test` command, started cold
           (CRUCIBLE_WARM=off: the command imports, composes and plans in its own process).
warm cli   the same command with `crucible warm start`'s server running (engine/cli/warm.py):
           the command's process hands it to a fork of the server, which has crucible
           imported. The server is started before timing, as a user starts it once.

Nothing is pre-started: every trial creates its containers from scratch. The image is
built before timing (a cached build is what every real run after the first sees).
Trials alternate between the three so drift on the machine hits all of them alike.

    .venv/bin/python bench/bench_golden.py [--task sample/last_page] [--trials 5] [--override KEY=VALUE]...

Exits non-zero when a median ratio is past its target (issue 38): in-process at most
TARGET_INPROCESS x the floor, the whole command at most TARGET_CLI x (warm; the cold
command's ratio is shown beside it). The CLI's start-up is
broken down by processes timed beside the trials: a bare interpreter, one that imports the
run command's modules, and the rest of the command outside the in-process run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_INPROCESS = 1.3
TARGET_CLI = 2.0


def golden_patch(repo: Path, task, *, fix: bool = True) -> bytes:
    """The golden diff and then the hidden change (the test change, filtered by hidden_tests),
    as one patch git applies in one go; ``fix=False``: the hidden change alone (a baseline's
    floor: nothing submitted, the hidden tests run on the code as it was)."""
    from engine.plan.repos import git_bytes
    from envs.coding.hidden import read_change

    pins = task.pins
    diff = git_bytes(repo, "diff", "--binary", "--full-index", pins["baseline"], pins["golden"]) if fix else b""
    paths = [f.path for f in read_change(repo, pins["baseline"], pins["test"], task.hidden_tests, task_id=task.id)]
    hidden = git_bytes(repo, "diff", "--binary", "--full-index", pins["baseline"], pins["test"], "--", *paths)
    return diff + hidden


def floor_argv(image: str, task, then: str = "", *, fails: bool = False) -> list[str]:
    """The floor's ``docker run``: apply the patch on stdin, run the test command (``then``
    after it, whatever its exit). ``fails``: the tests are to fail (a baseline's: pytest's exit
    1), and the run exits 0 only then."""
    from envs.coding.hidden import read_change, test_modules

    change = read_change(_repo(task), task.pins["baseline"], task.pins["test"], task.hidden_tests, task_id=task.id)
    files = [f.path for f in change if f.mode != "del"] if task.hidden_tests else test_modules(change)
    test = task.test_command.replace("{test_files}", " ".join(shlex.quote(t) for t in files))
    if fails:  # the patch must apply; the tests must fail as tests do (1), not as a broken run
        script = f"cd {shlex.quote(task.workdir)} && git apply --binary - || exit 90; {test}; [ $? -eq 1 ]"
    else:
        script = f"cd {shlex.quote(task.workdir)} && git apply --binary - && {test}"
    script += f"; {then}" if then else ""
    probe: list[str] = []
    if task.isolated_verdict:
        # Scenario tests need crucible_probe; the floor calls their scenarios in-process, the
        # cheapest way to run them (crucible's strict runs each in a forked interpreter).
        from envs.coding.isolated import PROBE_MODE, SCRIPTS

        probe = [
            "-v",
            f"{SCRIPTS}:/crucible-probe:ro",
            "-e",
            "PYTHONPATH=/crucible-probe",
            "-e",
            f"{PROBE_MODE}=in-process",
        ]
    return ["docker", "run", "--rm", "-i", "--network", "none", *probe, image, "bash", "-c", script]


def floor_trial(image: str, task, patch: bytes, *, fails: bool = False) -> float:
    argv = floor_argv(image, task, fails=fails)  # the host's git work is not the floor's
    began = time.perf_counter()
    proc = subprocess.run(
        argv,
        input=patch,
        capture_output=True,
    )
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"floor trial failed: {proc.stdout.decode()[-500:]} {proc.stderr.decode()[-500:]}")
    return seconds


def _repo(task) -> Path:
    from engine.plan.repos import resolve_repo

    return resolve_repo(task.repo)


def inprocess_trial(planned, session, run_root: Path) -> tuple[float, dict]:
    from engine.run.batch import run_one

    began = time.perf_counter()
    record = asyncio.run(run_one(planned, session, root=run_root))
    seconds = time.perf_counter() - began
    if record.status != "completed" or record.reward != 1.0:
        raise SystemExit(f"in-process golden run failed: {record.status} {record.error} {record.raw_grade}")
    return seconds, record.timings


def cli_trial(task_option: str, seed: int, overrides: list[str] = [], *, warm: bool = False) -> float:  # noqa: B006 (read only)
    env = {**os.environ, "CRUCIBLE_WARM": "on" if warm else "off"}
    began = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "run",
            f"task={task_option}",
            "agent=integration_test",
            f"seed={seed}",
            *overrides,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    seconds = time.perf_counter() - began
    if proc.returncode != 0 or "reward=1.0" not in proc.stdout:
        raise SystemExit(f"cli golden run failed: {proc.stdout[-800:]} {proc.stderr[-800:]}")
    return seconds


def startup_trial(code: str) -> float:
    """Wall seconds of one interpreter running ``code`` (the CLI's start-up, piece by piece)."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - began


STARTUP = {
    "interpreter (python3 -c pass)": "pass",
    "+ import the run command (engine.cli.main, engine.cli.run)": "import engine.cli.main, engine.cli.run",
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="sample/last_page")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        help="a config override for both crucible rows (e.g. build.setup_layers=false)",
    )
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-"))

    from engine.config.compose import compose_config, to_typed
    from engine.plan.repos import resolve_repo
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task={ns.task}", "agent=integration_test", *ns.override]))
    session = session_for(typed)
    planned = plan(typed, builder=session.builder)
    for image in (*planned.images, *([planned.setup_image] if planned.setup_image else [])):  # its setup layer too
        session.builder.ensure(image, session.store)
    patch = golden_patch(resolve_repo(planned.spec.task.repo), planned.spec.task)
    run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "bench"

    started = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "warm", "start"], cwd=ROOT, capture_output=True, text=True
    )
    if started.returncode != 0:
        raise SystemExit(f"crucible warm start failed: {started.stdout} {started.stderr}")
    try:
        return _measure(ns, planned, session, patch, run_root)
    finally:
        subprocess.run([sys.executable, "-m", "engine.cli.main", "warm", "stop"], cwd=ROOT, capture_output=True)


def _measure(ns: argparse.Namespace, planned, session, patch: bytes, run_root: Path) -> int:
    floor, inproc, cli, warm, stages = [], [], [], [], []
    startup: dict[str, list[float]] = {name: [] for name in STARTUP}
    floor_trial(planned.image.tag, planned.spec.task, patch)  # warm the page cache, not timed
    for trial in range(ns.trials):
        floor.append(floor_trial(planned.image.tag, planned.spec.task, patch))
        seconds, timings = inprocess_trial(planned, session, run_root)
        inproc.append(seconds)
        stages.append(timings)
        cli.append(cli_trial(ns.task, seed=10_000 + trial, overrides=ns.override))
        warm.append(cli_trial(ns.task, seed=20_000 + trial, overrides=ns.override, warm=True))
        for name, code in STARTUP.items():
            startup[name].append(startup_trial(code))

    med = statistics.median
    f = med(floor)
    rows = [
        ("floor: docker run (apply + test)", f, 1.0),
        ("crucible in-process (spec -> stored verdict)", med(inproc), med(inproc) / f),
        ("crucible CLI (whole command), cold", med(cli), med(cli) / f),
        ("crucible CLI (whole command), warm server", med(warm), med(warm) / f),
    ]
    print(
        f"task {ns.task}, image {planned.image.tag}, {ns.trials} trials each, medians (resolution: perf_counter, ~1 us; "
        f"spread below); load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'pipeline':48} {'median s':>9} {'x floor':>8}   min..max s")
    for (name, value, ratio), samples in zip(rows, (floor, inproc, cli, warm)):
        print(f"{name:48} {value:9.3f} {ratio:8.2f}   {min(samples):.3f}..{max(samples):.3f}")
    paired = {
        name: med(v / each for v, each in zip(samples, floor))
        for name, samples in (("in-process", inproc), ("cold", cli), ("warm", warm))
    }
    print(
        "median of each trial's own ratio to its floor (a machine drifting over a trial moves both): "
        + ", ".join(f"{name} {ratio:.2f}" for name, ratio in paired.items())
    )
    print("\nin-process stages (median s):")
    for stage in stages[0]:
        print(f"  {stage:10} {med(s.get(stage, 0.0) for s in stages):.3f}")
    print("\nthe whole command beyond the in-process run (median s):")
    interpreter, imported = (med(v) for v in startup.values())
    print(f"  {'interpreter start (python3 -c pass)':58} {interpreter:.3f}")
    print(f"  {'importing the run command (engine.cli.main, engine.cli.run)':58} {imported - interpreter:.3f}")
    print(f"  {'the rest: compose, plan, session, pre-flight, exit':58} {med(cli) - med(inproc) - imported:.3f}")
    print("the warm command beyond the in-process run (median s):")
    print(f"  {'client, fork, compose, plan, session, pre-flight, exit':58} {med(warm) - med(inproc):.3f}")
    if ns.json:
        ns.json.write_text(
            json.dumps(
                {"floor": floor, "inprocess": inproc, "cli": cli, "warm": warm, "stages": stages, "startup": startup},
                indent=2,
            )
        )
    failed = [f"in-process {med(inproc) / f:.2f}x the floor (target <= {TARGET_INPROCESS}x)"] * (
        med(inproc) / f > TARGET_INPROCESS
    ) + [f"the whole command (warm) {med(warm) / f:.2f}x the floor (target <= {TARGET_CLI}x)"] * (
        med(warm) / f > TARGET_CLI
    )
    for line in failed:
        print(f"FAIL: {line}")
    if not failed:
        print(f"ok: in-process <= {TARGET_INPROCESS}x, the whole command <= {TARGET_CLI}x the floor")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
