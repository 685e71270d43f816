"""A sweep's patches as SWE-bench predictions, and its verdicts as a SWE-bench-style report.

Flavor-neutral: what is read is the store's ``runs`` (diff, status, reward, task id, spec).
An instance id is the spec's ``task.instance_id`` where the flavor's task carries one (the
SWE-bench Pro flavor does: ``task=swebench_pro/<instance_id>``), else the last path
component of the task id (``sample/last_page`` -> ``last_page``), which is what a
harness outside crucible would have to be told the task is called.

Predictions are SWE-bench's format, one JSON object a line: ``instance_id``,
``model_name_or_path`` (the run's model, else its agent) and ``model_patch`` (the run's
captured diff; "" where it captured none). A predictions file holds one prediction per
instance, so it is made for one (agent, model) and one attempt: ``--agent``/``--model``
choose among several, and the lowest attempt number is taken unless ``--attempt`` says.

The report has the fields of SWE-bench's run report (``make_run_report``), from the sweep's
own verdicts: ``resolved`` is solved (completed with reward >= 1), ``error`` a run that
failed or timed out, ``empty_patch`` a completed run that changed nothing, ``unresolved``
the rest; every instance of the selection was submitted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from engine.errors import UserError
from engine.report.compute import attempts
from engine.report.query import Filters, Rows, RunRow, load_runs, resolve_sweeps
from engine.report.stats import SUCCESS


@dataclass(frozen=True)
class Instance:
    instance_id: str
    run_id: str
    agent: str
    model: str
    status: str
    reward: float | None
    patch: str

    @property
    def model_name_or_path(self) -> str:
        return self.model or self.agent

    @property
    def outcome(self) -> str:
        if self.status != "completed":
            return "error"
        if self.reward is not None and self.reward >= SUCCESS:
            return "resolved"
        return "empty_patch" if not self.patch.strip() else "unresolved"


def sweep_instances(
    store: Rows,
    sweep: str,
    *,
    agents: tuple[str, ...] = (),
    models: tuple[str, ...] = (),
    tasks: tuple[str, ...] = (),
    attempt: int | None = None,
) -> list[Instance]:
    """One run per instance of ``sweep`` (``last`` allowed): the attempt chosen (module doc)."""
    (sweep,) = resolve_sweeps(store, (sweep,))
    rows = attempts(load_runs(store, Filters(sweeps=(sweep,), agents=agents, models=models, tasks=tasks)))
    groups = sorted({r.group for r in rows})
    if not groups:
        raise UserError(f"--sweep {sweep}: no finished run matches")
    if len(groups) > 1:
        named = ", ".join(f"--agent {a}" + (f" --model {m}" if m else "") for a, m in groups)
        raise UserError(
            f"--sweep {sweep} ran {len(groups)} agent/model pairs; a predictions file is for one: choose with {named}"
        )
    details = _details(store, [r.run_id for r in rows])
    chosen: dict[str, tuple[int, Instance]] = {}
    for row in rows:
        number, instance_id, patch = details[row.run_id]
        if attempt is not None and number != attempt:
            continue
        instance = Instance(instance_id, row.run_id, row.agent, row.model, row.status, row.reward, patch)
        if instance_id not in chosen or number < chosen[instance_id][0]:
            chosen[instance_id] = (number, instance)
    if not chosen:
        raise UserError(f"--sweep {sweep}: no run of attempt {attempt}")
    _refuse_clashes(rows, details)
    return [chosen[i][1] for i in sorted(chosen)]


def predictions_jsonl(instances: list[Instance]) -> str:
    """SWE-bench predictions, one JSON object a line, by instance id."""
    return "".join(
        json.dumps(
            {"instance_id": i.instance_id, "model_name_or_path": i.model_name_or_path, "model_patch": i.patch},
            ensure_ascii=False,
        )
        + "\n"
        for i in instances
    )


def swebench_report(instances: list[Instance]) -> dict[str, Any]:
    """The sweep's verdicts in the shape of SWE-bench's run report (module doc)."""
    ids: dict[str, list[str]] = defaultdict(list)
    for i in instances:
        ids[i.outcome].append(i.instance_id)
    submitted = sorted(i.instance_id for i in instances)
    completed = sorted(ids["resolved"] + ids["unresolved"])
    return {
        "total_instances": len(submitted),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": completed,
        "incomplete_ids": [],
        "empty_patch_ids": sorted(ids["empty_patch"]),
        "submitted_ids": submitted,
        "resolved_ids": sorted(ids["resolved"]),
        "unresolved_ids": sorted(ids["unresolved"]),
        "error_ids": sorted(ids["error"]),
        "schema_version": 2,
    }


_DETAILS_SQL = """
SELECT run_id, coalesce(attempt, 0), task_id, json_extract_string(spec, '$.task.instance_id'), coalesce(diff, '')
FROM runs WHERE run_id IN ({ids})
"""


def _details(store: Rows, run_ids: list[str]) -> dict[str, tuple[int, str, str]]:
    """run id -> (attempt, instance id, patch)."""
    quoted = ", ".join("'" + r.replace("'", "''") + "'" for r in run_ids)
    _, rows = store.query(_DETAILS_SQL.format(ids=quoted))
    return {
        run_id: (int(number), instance_id or task_id.rsplit("/", 1)[-1], diff)
        for run_id, number, task_id, instance_id, diff in rows
    }


def _refuse_clashes(rows: list[RunRow], details: dict[str, tuple[int, str, str]]) -> None:
    """Two tasks with one instance id (sample/x and other/x) cannot both be predictions."""
    tasks: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        tasks[details[row.run_id][1]].add(row.task_id)
    for instance_id, named in sorted(tasks.items()):
        if len(named) > 1:
            raise UserError(
                f"tasks {', '.join(sorted(named))} share the instance id {instance_id}; narrow the sweep with --task"
            )
