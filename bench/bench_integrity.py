"""What each integrity mode costs per run: golden runs under none, vault and strict, as ratios.

Each trial is one golden run end to end in-process (the batch API: containers created from
scratch, setup, the integration_test agent staging the golden through the MCP tools, capture,
grading in a fresh container, store), under each mode in turn, so drift on the machine hits
all three alike (the method of bench_golden.py). The image is built before timing. Reported:
the median wall per run, its ratio to ``none``, and the median of each stage, so a
difference shows where it comes from (setup: vault vs copy; capture: the protected-path
policy; grade: tests as uid 1000).

    .venv/bin/python bench/bench_integrity.py [--task sample/last_page] [--trials 7] [--json FILE]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODES = ("none", "vault", "strict")
STAGES = ("provision", "setup", "agent", "capture", "grade", "teardown")


def plans(task: str):
    from engine.config.compose import compose_config, to_typed
    from engine.run.session import session_for
    from engine.plan.spec import plan

    session, planned = None, {}
    for mode in MODES:
        typed = to_typed(compose_config([f"task={task}", "agent=integration_test", f"integrity={mode}"]))
        session = session or session_for(typed)
        planned[mode] = plan(typed, builder=session.builder)
    session.builder.ensure(planned["strict"].image, session.store)
    return session, planned


def trial(session, planned, run_root: Path) -> tuple[float, dict]:
    from engine.run.batch import BatchJob, run_batch

    began = time.perf_counter()
    record = asyncio.run(run_batch([BatchJob(planned)], session, root=run_root))[0].records[0]
    seconds = time.perf_counter() - began
    if record.status != "completed" or record.reward != 1.0:
        raise SystemExit(f"golden run failed under {planned.spec.integrity.mode}: {record.status} "
                         f"{record.error} {record.raw_grade}")
    return seconds, record.timings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="sample/last_page")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the samples here")
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-"))

    session, planned = plans(ns.task)
    run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "bench-integrity"
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    stages: dict[str, list[dict]] = {m: [] for m in MODES}
    for mode in MODES:  # warm-up, not timed: the first run of a process pays imports and caches
        trial(session, planned[mode], run_root)
    for _ in range(ns.trials):
        for mode in MODES:
            seconds, timings = trial(session, planned[mode], run_root)
            walls[mode].append(seconds)
            stages[mode].append(timings)

    med = statistics.median
    base = med(walls["none"])
    print(f"task {ns.task}, golden runs, {ns.trials} trials per mode, alternating; medians (perf_counter)")
    print(f"{'mode':8} {'median s':>9} {'x none':>7}   min..max s   " + " ".join(f"{s:>9}" for s in STAGES))
    for mode in MODES:
        per_stage = " ".join(f"{med(t.get(s, 0.0) for t in stages[mode]):9.3f}" for s in STAGES)
        print(f"{mode:8} {med(walls[mode]):9.3f} {med(walls[mode]) / base:7.2f}   "
              f"{min(walls[mode]):.3f}..{max(walls[mode]):.3f}   {per_stage}")
    if ns.json:
        ns.json.write_text(json.dumps({"walls": walls, "stages": stages}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
