"""Golden runs of one task under several variants (integrity modes, a flag off), timed in turn.

Shared by bench_integrity.py and bench_strict_cost.py. Each trial is one golden run end to end
in-process through the batch API (containers created from scratch, setup, the
integration_test agent staging the golden through the MCP tools, capture, grading in a fresh
container, store), under each variant in turn, so drift on the machine hits all of them alike
(the method of bench_golden.py). A warm-up round first, not timed: the first run of a process
pays imports and caches.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path

Check = Callable[[object], str | None]
"""What else a variant's record must show (None = fine; else why the bench stops)."""


def golden_run(session, planned, run_root: Path, check: Check | None = None) -> tuple[float, dict]:
    """One golden run of ``planned``: its wall seconds and its record's stage timings."""
    from engine.run.batch import run_one

    began = time.perf_counter()
    record = asyncio.run(run_one(planned, session, root=run_root))
    seconds = time.perf_counter() - began
    if record.status != "completed" or record.reward != 1.0:
        raise SystemExit(
            f"golden run failed under {planned.spec.integrity.mode}: {record.status} "
            f"{record.error} {(record.raw_grade or {}).get('reason')}"
        )
    problem = check(record) if check is not None else None
    if problem:
        raise SystemExit(problem)
    return seconds, record.timings


def alternate(
    session, planned: dict, run_root: Path, trials: int, check: Check | None = None
) -> tuple[dict[str, list[float]], dict[str, list[dict]]]:
    """``trials`` golden runs of each of ``planned``'s variants, in turn, after a warm-up round:
    the walls and stage timings per variant."""
    walls: dict[str, list[float]] = {v: [] for v in planned}
    stages: dict[str, list[dict]] = {v: [] for v in planned}
    for variant in planned:
        golden_run(session, planned[variant], run_root, check)
    for _ in range(trials):
        for variant in planned:
            seconds, timings = golden_run(session, planned[variant], run_root, check)
            walls[variant].append(seconds)
            stages[variant].append(timings)
    return walls, stages


def print_table(
    walls: dict[str, list[float]],
    stages: dict[str, list[dict]],
    stage_names: tuple[str, ...],
    *,
    base: str,
    label: str = "variant",
) -> None:
    """Each variant's median wall, its ratio to ``base``'s, its range, and its stages' medians."""
    med = statistics.median
    width = max(len(label), *(len(v) for v in walls))
    print(
        f"{label:{width}} {'median s':>9} {'x ' + base:>9}   min..max s   " + " ".join(f"{s:>9}" for s in stage_names)
    )
    for variant, values in walls.items():
        per_stage = " ".join(f"{med(t.get(s, 0.0) for t in stages[variant]):9.3f}" for s in stage_names)
        print(
            f"{variant:{width}} {med(values):9.3f} {med(values) / med(walls[base]):9.2f}   "
            f"{min(values):.3f}..{max(values):.3f}   {per_stage}"
        )
