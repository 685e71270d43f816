"""Synthesised run records for the viewer's tests and bench/bench_viewer.py, written through the
store's real path (``DuckDBStore.write_run_record`` into the spool, then ``ingest_pending``).

Deterministic: run ``i`` of a store always has the same task, agent, sweep, verdict and steps,
so a test can say which runs a filter or a search must find.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta

from engine.models import RunRecord, Step, TestResult
from engine.store.duckdb import DuckDBStore

T0 = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
AGENTS = ("noop", "integration_test", "tool_calling", "claude_code")
MODELS = {"tool_calling": ("m-small", "m-large"), "claude_code": ("m-large",)}
SWEEPS = 10
TASKS = 20
DIFF = """diff --git a/pkg/page.py b/pkg/page.py
--- a/pkg/page.py
+++ b/pkg/page.py
@@ -1,3 +1,3 @@
 def pages_for(total, per_page):
-    return total // per_page
+    return -(-total // per_page)
"""


def task_of(i: int) -> str:
    return f"synth/task_{i % TASKS:02d}"


def agent_of(i: int) -> str:
    return AGENTS[i % len(AGENTS)]


def sweep_of(i: int, runs: int) -> str:
    return f"synth-sweep-{i * SWEEPS // max(runs, 1):02d}"


def record(i: int, runs: int, *, big_output: int = 0) -> RunRecord:
    """Run ``i`` of ``runs``: solved when ``i % 3 == 0``; ``big_output`` bytes of tool output in
    its second step (the 5 MB case)."""
    agent, started = agent_of(i), T0 + timedelta(minutes=i)
    models = MODELS.get(agent)
    solved = i % 3 == 0
    steps = [
        Step(
            idx=0,
            kind="tool_call",
            capability="mcp",
            tool="bash",
            arguments={"command": f"grep -rn page pkg/ # run {i}"},
            result=f"pkg/page.py:2: return total // per_page  (marker-{i:05d})",
            seconds=0.05,
            started_at=started.isoformat(),
        ),
        Step(
            idx=1,
            kind="tool_call",
            capability="mcp",
            tool="str_replace_based_edit_tool",
            arguments={
                "command": "str_replace",
                "path": "/app/pkg/page.py",
                "old_str": "total // per_page",
                "new_str": "-(-total // per_page)",
            },
            result=("x" * (big_output - 1) + "\n") if big_output else "The file /app/pkg/page.py has been edited.",
            seconds=0.02,
            started_at=started.isoformat(),
        ),
    ]
    if models:
        steps.insert(0, Step(idx=0, kind="model", tokens_in=1200 + i % 50, tokens_out=80, cost_usd=0.002, seconds=0.4))
    tests = [
        TestResult(f"tests/test_page.py::test_pages[{n}]", "PASSED" if solved or n % 2 else "FAILED") for n in range(4)
    ]
    return RunRecord(
        run_id=f"synth-{i:05d}",
        spec_hash=f"spec-{i:05d}",
        spec={"task": {"id": task_of(i), "prompt": f"Fix the pager, request {i}.", "pins": {"baseline": "a" * 40}}},
        status="completed",
        task_id=task_of(i),
        agent=agent,
        model=models[i % len(models)] if models else None,
        flavor="coding",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained="strict",
        attempt=0,
        seed=0,
        sweep_id=sweep_of(i, runs),
        started_at=started.isoformat(),
        ended_at=(started + timedelta(seconds=3)).isoformat(),
        reward=1.0 if solved else 0.0,
        subscores={"tests": 1.0 if solved else 0.5},
        raw_grade={"reason": "all tests passed" if solved else "tests failed"},
        diff=DIFF if agent != "noop" else "",
        steps=steps,
        tests=tests,
        timings={"provision": 0.4, "setup": 0.3, "agent": 1.1, "capture": 0.1, "grade": 0.8},
        owner_pid=os.getpid(),
        owner_host=socket.gethostname(),
    )


def fill(store: DuckDBStore, runs: int, *, big: dict[int, int] | None = None) -> None:
    """Write ``runs`` records through the spool and ingest them (``big``: run index -> bytes of
    tool output)."""
    big = big or {}
    for i in range(runs):
        store.write_run_record(record(i, runs, big_output=big.get(i, 0)), None)
        if i % 2000 == 1999:
            store.ingest_pending()
    store.ingest_pending()
