"""What each integrity mode costs per run: golden runs under none, vault and strict, as ratios.

Each trial is one golden run end to end in-process under each mode in turn
(bench/golden_runs.py). The image is built before timing. Reported:
the median wall per run, its ratio to ``none``, and the median of each stage, so a
difference shows where it comes from (setup: vault vs copy; capture: the protected-path
policy; grade: tests as uid 1000).

    .venv/bin/python bench/bench_integrity.py [--task sample/last_page] [--trials 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from golden_runs import alternate, print_table  # noqa: E402

MODES = ("none", "vault", "strict")
STAGES = ("provision", "setup", "agent", "capture", "grade", "teardown")


def plans(task: str):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    session, planned = None, {}
    for mode in MODES:
        typed = to_typed(compose_config([f"task={task}", "agent=integration_test", f"integrity={mode}"]))
        session = session or session_for(typed)
        planned[mode] = plan(typed, builder=session.builder)
    for p in planned.values():  # every image a run starts from, its setup layer too (engine/plan/setup_layer.py)
        for image in (*p.images, *([p.setup_image] if p.setup_image else [])):
            session.builder.ensure(image, session.store)
    return session, planned


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="sample/last_page")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the samples here")
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-"))

    session, planned = plans(ns.task)
    run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "bench-integrity"
    walls, stages = alternate(session, planned, run_root, ns.trials)
    print(f"task {ns.task}, golden runs, {ns.trials} trials per mode, alternating; medians (perf_counter)")
    print_table(walls, stages, STAGES, base="none", label="mode")
    if ns.json:
        ns.json.write_text(json.dumps({"walls": walls, "stages": stages}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
