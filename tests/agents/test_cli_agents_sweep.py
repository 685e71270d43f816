"""The issue's sweep: `crucible run -m agent=claude_code,codex task='glob(sample/*)'
attempt='range(0,2)'` with the REAL CLIs against the stand-in (a process, as a user would run
one; it answers 401 to any request without the key, which only the host proxy holds), then
`crucible report`: each agent's runs are there, each scored, with the tokens and the cost its
model calls spent (the CLIs' default models, priced by the shipped table).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from standin.process import standin_server

from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

KEY_ENV = "CRUCIBLE_TEST_CLI_SWEEP_KEY"
SCRIPT = """
from tests.standin.script import answer, fixer


def script(turn):
    return answer("ok") if turn.task is None else fixer(turn)
"""


@pytest.fixture(scope="module")
def sweep(docker_client, base_image, tmp_path_factory):
    folder = tmp_path_factory.mktemp("standin")
    env = {**os.environ, KEY_ENV: "sk-standin-sweep-77e1"}
    os.environ[KEY_ENV] = env[KEY_ENV]  # the stand-in process reads it at start
    try:
        with standin_server(folder, SCRIPT, require_key_env=KEY_ENV) as url:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "engine.cli.main",
                    "run",
                    "-m",
                    "agent=claude_code,codex",
                    "task=glob(sample/*)",
                    "attempt=range(0,2)",
                    f"agent.base_url={url}",
                    f"agent.api_key_env={KEY_ENV}",
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=1500,
                env=env,
            )
    finally:
        os.environ.pop(KEY_ENV, None)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    match = re.search(r"^sweep (\S+): (\d+) run\(s\) stored", proc.stdout, re.M)
    assert match, proc.stdout[-2000:]
    exchanges = [json.loads(line) for line in (folder / "exchanges.jsonl").read_text().splitlines()]
    return match.group(1), exchanges


def test_the_cli_sweep_runs_both_clis_on_every_sample_task_twice_and_each_fixes_it(sweep):
    sweep_id, exchanges = sweep
    _, rows = DuckDBStore().query(
        f"SELECT agent, model, task_id, attempt, status, reward FROM runs WHERE sweep_id = '{sweep_id}'"
    )
    assert len(rows) == 16
    assert {(r[0], r[1]) for r in rows} == {("claude_code", "anthropic/claude-sonnet-4-6"), ("codex", "openai/gpt-5")}
    assert [r for r in rows if (r[4], r[5]) != ("completed", 1.0)] == []
    assert exchanges and all(e["api_key"] == "present" and e["status"] == 200 for e in exchanges)


def test_report_shows_tokens_and_cost_per_cli_agent(sweep):
    sweep_id, _ = sweep
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "report", "--sweep", sweep_id, "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    summary = {row["agent"]: row for row in json.loads(proc.stdout)["summary"]}
    assert set(summary) == {"claude_code", "codex"}
    for row in summary.values():
        assert row["pass@1"] == 1.0, row
        assert row["tokens_in"] > 0 and row["tokens_out"] > 0 and row["cost_usd"] > 0, row
        assert row["unpriced_steps"] == 0, row
    table = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "report", "--sweep", sweep_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "claude_code" in table and "codex" in table and "cost" in table
