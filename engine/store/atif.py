"""Every stored run's steps as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format,
``ATIF-v1.4``): ``crucible export --trajectories ATIF DIR`` writes ``DIR/<run_id>.json`` each.

The mapping: step 1 is the user's (the task's prompt, from the run's spec); a model turn
(``kind = model``) is an agent step whose message is the model's text, with the tool calls that
follow it as its ``tool_calls`` and their results as its ``observation`` (each result's
``source_call_id`` names its call); a tool call with no model turn before it (``integration_test``,
a coding CLI's parsed events, an outside agent's calls) is an agent step of its own with an
empty message; a warning is a system step. Tokens and cost go into ``metrics`` and
``final_metrics``; what ATIF has no field for (the run's task, reward, status, integrity mode,
a call's error flag and duration) into ``extra``. Pure: ``trajectory`` reads rows only.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import UserError

if TYPE_CHECKING:
    from engine.interfaces import Store

SCHEMA_VERSION = "ATIF-v1.4"
FORMATS = ("ATIF",)
_RUNS = (
    "SELECT run_id, task_id, agent, model, status, reward, integrity_requested, sweep_id, started_at, spec "
    "FROM runs WHERE status <> 'running' ORDER BY started_at, run_id"
)
_STEPS = (
    "SELECT run_id, position, kind, capability, tool, arguments, result, is_error, started_at, seconds, "
    "tokens_in, tokens_out, cost_usd, note FROM steps ORDER BY run_id, position"
)


def trajectory(run: Mapping[str, Any], steps: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One run (a ``runs`` row) and its ``steps`` rows, in order, as an ATIF trajectory."""
    spec = _json(run.get("spec")) or {}
    prompt = str(((spec.get("task") or {}).get("prompt")) or "")
    out: list[dict[str, Any]] = [
        {"step_id": 1, "timestamp": _time(run.get("started_at")), "source": "user", "message": prompt}
    ]
    turn: dict[str, Any] | None = None
    for row in steps:
        kind = row.get("kind")
        if kind == "model":
            turn = _agent_step(row, str(row.get("result") or ""))
            out.append(turn)
        elif kind == "tool_call":
            if turn is None:
                out.append(_agent_step(row, ""))
            _add_call(turn or out[-1], row)
        else:
            turn = None
            out.append(
                {
                    "source": "system",
                    "timestamp": _time(row.get("started_at")),
                    "message": str(row.get("note") or row.get("result") or ""),
                    "extra": {"kind": kind},
                }
            )
    for index, step in enumerate(out, 1):
        step["step_id"] = index
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": str(run["run_id"]),
        "agent": {
            "name": str(run.get("agent")),
            "version": str(spec.get("engine_version") or "unknown"),
            **({"model_name": str(run["model"])} if run.get("model") else {}),
        },
        "steps": out,
        "final_metrics": _final_metrics(out),
        "extra": {
            "crucible": {k: run.get(k) for k in ("task_id", "status", "reward", "integrity_requested", "sweep_id")}
        },
    }


def _agent_step(row: Mapping[str, Any], message: str) -> dict[str, Any]:
    step: dict[str, Any] = {"source": "agent", "timestamp": _time(row.get("started_at")), "message": message}
    metrics = {
        key: row[field]
        for key, field in (
            ("prompt_tokens", "tokens_in"),
            ("completion_tokens", "tokens_out"),
            ("cost_usd", "cost_usd"),
        )
        if row.get(field) is not None
    }
    if row.get("kind") == "model" and metrics:
        step["metrics"] = metrics
    return step


def _add_call(step: dict[str, Any], row: Mapping[str, Any]) -> None:
    call_id = f"call_{row.get('position')}"
    arguments = _json(row.get("arguments"))
    step.setdefault("tool_calls", []).append(
        {
            "tool_call_id": call_id,
            "function_name": str(row.get("tool") or ""),
            "arguments": arguments if isinstance(arguments, dict) else {"input": arguments},
        }
    )
    step.setdefault("observation", {"results": []})["results"].append(
        {"source_call_id": call_id, "content": str(row.get("result") or "")}
    )
    step.setdefault("extra", {}).setdefault("calls", {})[call_id] = {
        "is_error": bool(row.get("is_error")),
        "seconds": row.get("seconds"),
        "capability": row.get("capability"),
    }


def _final_metrics(steps: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = [s["metrics"] for s in steps if "metrics" in s]
    totals: dict[str, Any] = {"total_steps": len(steps)}
    for key, total in (
        ("prompt_tokens", "total_prompt_tokens"),
        ("completion_tokens", "total_completion_tokens"),
        ("cost_usd", "total_cost_usd"),
    ):
        values = [m[key] for m in metrics if m.get(key) is not None]
        if values:
            totals[total] = sum(values)
    return totals


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _time(value: Any) -> str | None:
    """ISO 8601 in UTC (the store keeps naive UTC timestamps)."""
    if value is None:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.isoformat().replace("+00:00", "Z")


def export_trajectories(store: Store, out: Path, *, tasks: list[str], sweep: str | None) -> int:
    """Write each chosen run's trajectory as ``out/<run_id>.json``; how many were written."""
    columns, rows = store.query(_RUNS)
    runs = [dict(zip(columns, row)) for row in rows]
    if sweep == "last":  # the latest sweep's, as the other exports take it
        sweeps = [r["sweep_id"] for r in runs if r["sweep_id"]]
        if not sweeps:
            raise UserError("--sweep last: the store has no sweep")
        sweep = sweeps[-1]
    runs = [
        r
        for r in runs
        if (not tasks or any(fnmatch.fnmatchcase(str(r["task_id"]), t) for t in tasks))
        and (sweep is None or r["sweep_id"] == sweep)
    ]
    step_columns, step_rows = store.query(_STEPS)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in step_rows:
        entry = dict(zip(step_columns, row))
        by_run.setdefault(str(entry["run_id"]), []).append(entry)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for run in runs:
            data = trajectory(run, by_run.get(str(run["run_id"]), []))
            (out / f"{run['run_id']}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    except OSError as exc:
        raise UserError(f"--trajectories: cannot write into {out} ({exc.strerror})") from exc
    return len(runs)
