"""`crucible export --trajectories ATIF DIR` (engine/store/atif.py): every stored run's steps as a
trajectory in Harbor's ATIF-v1.4: the prompt as the user's step, a model turn with the tool calls
after it and their results correlated by id, tokens and cost as metrics and totals, tool calls of
an agent without model turns as steps of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.models import RunRecord, Step
from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]


def _record(run_id: str, agent: str, model: str | None, steps: list[Step]) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        spec_hash=f"h-{run_id}",
        spec={"task": {"prompt": "Fix mean()."}, "engine_version": "abc123"},
        status="completed",
        task_id="harbor/gen/py-mean",
        agent=agent,
        model=model,
        flavor="harbor",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained="strict",
        attempt=0,
        seed=0,
        sweep_id="s1",
        started_at="2026-01-02T03:04:05+00:00",
        ended_at="2026-01-02T03:05:05+00:00",
        reward=1.0,
        steps=steps,
    )


def _step(idx: int, kind: str, **fields) -> Step:
    return Step(idx=idx, kind=kind, started_at=f"2026-01-02T03:04:{10 + idx:02d}+00:00", **fields)


def test_runs_are_written_as_atif_trajectories(tmp_path):
    store = DuckDBStore(tmp_path / "store.duckdb")
    store.record_run(
        _record(
            "model-run",
            "tool_calling",
            "openai/gpt-x",
            [
                _step(0, "model", result="Let me look.", tokens_in=100, tokens_out=20, cost_usd=0.01),
                _step(
                    1,
                    "tool_call",
                    capability="mcp",
                    tool="bash",
                    arguments={"command": "cat stats.py"},
                    result="def mean",
                ),
                _step(
                    2,
                    "tool_call",
                    capability="mcp",
                    tool="bash",
                    arguments={"command": "false"},
                    result="[exit 1]",
                    is_error=True,
                ),
                _step(3, "model", result="Done.", tokens_in=150, tokens_out=5, cost_usd=0.02),
            ],
        )
    )
    store.record_run(
        _record(
            "replay-run",
            "integration_test",
            None,
            [
                _step(0, "tool_call", capability="mcp", tool="bash", arguments={"command": "true"}, result=""),
                _step(1, "tool_call", capability="ssh", tool="bash", arguments="raw text", result="ok"),
            ],
        )
    )
    out = tmp_path / "atif"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "export",
            "--trajectories",
            "ATIF",
            str(out),
            "--store",
            str(tmp_path / "store.duckdb"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 0 and "wrote 2 trajectory file(s) (ATIF-v1.4)" in proc.stdout, proc.stderr
    model = json.loads((out / "model-run.json").read_text())
    assert model["schema_version"] == "ATIF-v1.4" and model["session_id"] == "model-run"
    assert model["agent"] == {"name": "tool_calling", "version": "abc123", "model_name": "openai/gpt-x"}
    steps = model["steps"]
    assert [s["step_id"] for s in steps] == [1, 2, 3] and [s["source"] for s in steps] == ["user", "agent", "agent"]
    assert steps[0]["message"] == "Fix mean()." and steps[0]["timestamp"] == "2026-01-02T03:04:05Z"
    calls, results = steps[1]["tool_calls"], steps[1]["observation"]["results"]
    assert [c["function_name"] for c in calls] == ["bash", "bash"] and calls[0]["arguments"] == {
        "command": "cat stats.py"
    }
    assert [r["source_call_id"] for r in results] == [c["tool_call_id"] for c in calls]
    assert results[0]["content"] == "def mean" and steps[1]["extra"]["calls"][calls[1]["tool_call_id"]]["is_error"]
    assert steps[1]["metrics"] == {"prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.01}
    assert model["final_metrics"] == {
        "total_steps": 3,
        "total_prompt_tokens": 250,
        "total_completion_tokens": 25,
        "total_cost_usd": 0.03,
    }
    assert model["extra"]["crucible"]["reward"] == 1.0
    replay = json.loads((out / "replay-run.json").read_text())
    assert [len(s.get("tool_calls", [])) for s in replay["steps"]] == [0, 1, 1] and "model_name" not in replay["agent"]
    assert replay["steps"][2]["tool_calls"][0]["arguments"] == {"input": "raw text"}


def test_only_the_chosen_sweeps_runs_are_written(tmp_path):
    store = DuckDBStore(tmp_path / "store.duckdb")
    store.record_run(_record("old", "noop", None, []))
    latest = _record("new", "noop", None, [])
    latest.sweep_id, latest.started_at = "s2", "2026-01-03T00:00:00+00:00"
    store.record_run(latest)
    out = tmp_path / "atif"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "export",
            "--trajectories",
            "ATIF",
            str(out),
            "--sweep",
            "last",
            "--store",
            str(tmp_path / "store.duckdb"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["new.json"]


def test_an_unknown_trajectory_format_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "export", "--trajectories", "OTHER", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "ATIF" in lines[0], proc.stderr
