"""Run records for the store's tests (tests/store/test_store*.py): a full record as the engine
writes it, with steps, subscores and timings, and a count by SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.models import RunRecord, Step
from engine.store.duckdb import DuckDBStore

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def make_run(run_id: str, status: str = "completed", **overrides) -> RunRecord:
    final = status != "running"
    fields = dict(
        run_id=run_id,
        spec_hash=f"hash-{run_id}",
        spec={"task": {"id": "t1"}, "seed": 0, "x": [1.5, None]},
        status=status,
        task_id="t1",
        agent="integration_test",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault" if final else None,
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at=T0.isoformat(),
        ended_at=(T0 + timedelta(seconds=12.5)).isoformat() if final else None,
        reward=1.0 if final else None,
        subscores={"tests": 1.0, "pr": 0.5} if final else {},
        raw_grade={"exit_code": 0, "tail": "2 passed"} if final else {},
        diff="--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n" if final else None,
        violations=["tests/test_f.py"] if final else [],
        stop_reason="done" if final else None,
        warnings=["slow provision"] if final else [],
        timings={"build": 0.25, "agent": 3.0, "grade": 1.5} if final else {},
        steps=[
            Step(
                idx=0,
                kind="tool_call",
                capability="mcp",
                tool="bash",
                arguments={"command": "ls -la"},
                result="a\nb\n",
                started_at=T0.isoformat(),
                seconds=0.5,
                tokens_in=10,
                tokens_out=3,
                cost_usd=0.001,
            ),
            Step(idx=1, kind="model", result="thinking — ünïcode", is_error=True, note="n", seconds=1.25),
            Step(idx=2, kind="tool_call", capability="ssh", tool="shell", arguments=["a", 1, None]),
        ]
        if final
        else [],
        image_tag="crucible/x:1",
        from_cache=True,
        owner_pid=12345,
        owner_host="somewhere",
    )
    fields.update(overrides)
    return RunRecord(**fields)


def count(store: DuckDBStore, sql: str) -> int:
    return store.query(sql)[1][0][0]
