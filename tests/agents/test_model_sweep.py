"""A sweep across two models, 4 tasks, 3 attempts (24 runs), then `crucible report`.

The models are a STAND-IN for a hosted model API, which is unreachable here: the local
stand-in server (tests/standin) speaks the real OpenAI chat-completions protocol on
127.0.0.1 and is scripted to fix some tasks on some attempts and give up on others, so
pass@1 and pass@3 differ. Everything else is real: the CLI, Hydra's joblib launcher,
the images, containers, MCP tools, grading and the store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from standin.process import standin_server

from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Per (model, task): the stand-in's behaviour on its 1st, 2nd and 3rd conversation.
OUTCOMES = {
    ("standin-a", "sample/last_page"): ["fix", "fix", "fix"],
    ("standin-a", "sample/negative_money"): ["fix", "give_up", "give_up"],
    ("standin-a", "sample/query_ops"): ["give_up", "give_up", "give_up"],
    ("standin-a", "sample/snapshot_alias"): ["give_up", "fix", "give_up"],
    ("standin-b", "sample/last_page"): ["give_up", "give_up", "fix"],
}
SCRIPT = f"""
from tests.standin.script import outcome_table
script = outcome_table({OUTCOMES!r}, default="give_up")
"""


def hand_count(model: str, tasks: list[str]) -> tuple[Fraction, Fraction]:
    """pass@1 and pass@3 by hand: with n=3 attempts, pass@1 = c/3 and pass@3 = [c > 0]."""
    fixes = [OUTCOMES.get((model, task), []).count("fix") for task in tasks]
    return (sum(Fraction(c, 3) for c in fixes) / len(tasks), Fraction(sum(1 for c in fixes if c), len(tasks)))


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    with standin_server(tmp_path_factory.mktemp("standin"), SCRIPT) as url:
        yield url


@pytest.fixture(scope="module")
def sweep(standin, docker_client, base_image):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "run",
            "-m",
            "agent=tool_calling",
            "model=openai-compatible/standin-a,openai-compatible/standin-b",
            "task=glob(sample/*)",
            "attempt=range(0,3)",
            f"agent.base_url={standin}",
            "hydra/launcher=joblib",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "OPENAI_API_KEY": "unused"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    match = re.search(r"^sweep (\S+): (\d+) run\(s\) stored", proc.stdout, re.M)
    assert match, proc.stdout[-2000:]
    return match.group(1)


def test_the_model_sweep_stores_every_run_once_each_in_its_own_workspace(sweep):
    _, rows = DuckDBStore().query(
        f"SELECT run_id, model, task_id, attempt, status, run_dir, spec_hash FROM runs WHERE sweep_id = '{sweep}'"
    )
    assert len(rows) == 24
    assert len({r[0] for r in rows}) == 24 and len({r[5] for r in rows}) == 24 and len({r[6] for r in rows}) == 24
    assert {(r[1], r[3]) for r in rows} == {(f"openai-compatible/standin-{m}", a) for m in "ab" for a in range(3)}
    assert all(r[4] == "completed" for r in rows), [r for r in rows if r[4] != "completed"]


def test_report_pass_at_1_and_3_match_a_hand_count(sweep):
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "report", "--sweep", sweep, "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    tasks = sorted({row["task_id"] for row in document["matrix"]})
    assert len(tasks) == 4
    for model in ("standin-a", "standin-b"):
        row = next(r for r in document["summary"] if r["model"] == f"openai-compatible/{model}")
        pass1, pass3 = hand_count(model, tasks)
        assert row["pass@1"] == pytest.approx(float(pass1)), (model, row)
        assert row["pass@3"] == pytest.approx(float(pass3)), (model, row)
    a = next(r for r in document["summary"] if r["model"].endswith("standin-a"))
    assert a["pass@1"] != a["pass@3"], "the script must make pass@1 and pass@3 differ"
