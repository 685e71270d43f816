"""``crucible regrade [RUN_ID ...] [--all]``: stored runs judged again by today's code.

Each run's stored raw grade and spec go to its flavor's ``regrade`` (engine/report/regrade.py);
the table shows the stored verdict beside today's. Read-only: the store keeps what it holds.
Exit 0 when every verdict is the same, 1 when one differs or a run no longer loads.
"""

from __future__ import annotations

import json

from engine.errors import UserError
from engine.util.tables import format_table


def run_regrade(run_ids: list[str], *, every: bool, store_path: str | None, as_json: bool) -> int:
    from engine.report.regrade import regrade_records
    from engine.run.session import open_housekept_store as open_store

    if bool(run_ids) == every:
        raise UserError("name the runs to regrade (RUN_ID ...) or pass --all, not both")
    store = open_store(store_path)
    if every:
        _, rows = store.query("SELECT run_id FROM runs WHERE status = 'completed' ORDER BY started_at, run_id")
        run_ids = [str(row[0]) for row in rows]
    records = []
    for run_id in run_ids:
        record = store.get_run(run_id)
        if record is None:
            raise UserError(f"no run '{run_id}' in the store")
        records.append(record)
    results = regrade_records(records)
    if as_json:
        print(json.dumps([{**r.__dict__, "same": r.same} for r in results], indent=2, default=str))
    else:
        rows = [
            (
                r.run_id,
                r.task_id,
                _verdict(r.stored_reward, r.stored_reason),
                r.problem or _verdict(r.reward, r.reason),
                "same" if r.same else "DIFFERS",
            )
            for r in results
        ]
        print(format_table(["run", "task", "stored", "today", ""], rows))
        print(f"{sum(r.same for r in results)}/{len(results)} verdict(s) the same")
    return 0 if all(r.same for r in results) else 1


def _verdict(reward: float | None, reason: str) -> str:
    return f"{reward} {reason[:60]}"
