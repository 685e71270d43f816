"""A sweep worker stand-in for tests/store/test_store_concurrency.py.

    python tests/store_writer.py WRITER_INDEX COUNT

Uses the store of ``$CRUCIBLE_HOME``. For each of COUNT runs it writes the "running"
record (as the engine does at run start), then records the finished run with steps,
and prints the run id only after ``record_run`` returned. ``make_record`` is
deterministic so the test can rebuild exactly what each writer wrote.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.models import RunRecord, Step  # noqa: E402
from engine.store.duckdb import DuckDBStore  # noqa: E402
from engine.store.files import this_host  # noqa: E402
from engine.util import paths  # noqa: E402

BASE_TIME = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def run_id(writer: int, i: int) -> str:
    return f"w{writer}-run{i:03d}"


def step_count(i: int) -> int:
    return i % 7 + 1


def make_record(writer: int, i: int, status: str, owner_pid: int, owner_host: str, run_dir: str | None) -> RunRecord:
    started = BASE_TIME + timedelta(minutes=writer * 100 + i, microseconds=writer * 1000 + i)
    final = status != "running"
    steps = [
        Step(
            idx=k,
            kind="tool_call",
            capability="mcp",
            tool="bash" if k % 2 else "str_replace_based_edit_tool",
            arguments={"command": f"echo {writer}-{i}-{k}", "n": k, "nested": [1, 2.5, None]},
            result=f"out {writer}/{i}/{k}\nline two — ünïcode",
            is_error=k == 3,
            started_at=(started + timedelta(seconds=k)).isoformat(),
            seconds=0.125 * (k + 1),
            tokens_in=100 + k,
            tokens_out=None if k % 3 else 7,
            cost_usd=0.0001 * (i + k),
            note=None,
        )
        for k in range(step_count(i) if final else 0)
    ]
    return RunRecord(
        run_id=run_id(writer, i),
        spec_hash=f"spec-{writer}-{i}",
        spec={"task": {"id": f"task{i % 5}"}, "seed": i, "writer": writer},
        status=status,
        task_id=f"task{i % 5}",
        agent=f"agent{writer % 2}",
        model="model-x" if i % 2 else None,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault" if final else None,
        attempt=0,
        seed=i,
        sweep_id=f"sweep-{writer}",
        started_at=started.isoformat(),
        ended_at=(started + timedelta(seconds=30 + i)).isoformat() if final else None,
        reward=float(i % 2) if final else None,
        subscores={"tests": float(i % 2), "pr": 0.25} if final else {},
        raw_grade={"exit_code": i % 2, "tail": "1 passed"} if final else {},
        diff=f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-{i}\n+{i + 1}\n" if final else None,
        violations=["tests/test_x.py"] if final and i % 4 == 0 else [],
        stop_reason="done" if final else None,
        warnings=[f"warn {i}"] if final and i % 3 == 0 else [],
        timings={"build": 0.5, "agent": 1.0 + i, "grade": 2.0} if final else {},
        steps=steps,
        run_dir=run_dir,
        image_tag="crucible/test:abc",
        from_cache=bool(i % 2),
        owner_pid=owner_pid,
        owner_host=owner_host,
    )


def main(writer: int, count: int) -> None:
    store = DuckDBStore()
    pid, host = os.getpid(), this_host()
    for i in range(count):
        run_dir = paths.runs_dir() / run_id(writer, i)
        store.write_run_record(make_record(writer, i, "running", pid, host, str(run_dir)), run_dir)
        store.record_run(make_record(writer, i, "completed", pid, host, str(run_dir)))
        print(run_id(writer, i), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
