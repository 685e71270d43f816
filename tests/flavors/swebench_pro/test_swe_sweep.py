"""A model agent swept over the synthetic SWE-bench Pro instances, 3 attempts each, ending in
`crucible report` with pass@k per model. The model is the local STAND-IN for a hosted API
(tests/standin), scripted to apply an instance's gold patch through the task's own tools on
some attempts and to give up on others; everything else is real (Hydra's launcher, images,
containers, MCP tools, the official steps' replay, the store)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from fractions import Fraction

import pytest
import swe_synth
from standin.process import standin_server

from engine.util.paths import PROJECT_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CALC = "swebench_pro/instance_synth__calc-1111111111111111111111111111111111111111-vnan"
SHOUT = "swebench_pro/instance_synth__shout-2222222222222222222222222222222222222222-vnan"
OUTCOMES = {
    ("standin-a", CALC): ["swe_fix", "swe_fix", "give_up"],
    ("standin-b", SHOUT): ["swe_fix", "give_up", "give_up"],
}
SCRIPT = f"""
import json, os
from tests.standin.script import answer, call, outcome_table, reply

def swe_fix(turn):
    # The instance's gold patch, written in the repo and applied, as the golden does.
    iid = turn.task.split("/", 1)[1]
    rows = [json.loads(line) for line in open(os.environ["CRUCIBLE_SWEBENCH_PRO_DATASET"])]
    patch = next(r["patch"] for r in rows if r["instance_id"] == iid)
    if turn.turn == 0:
        return reply("Writing the fix.", call("str_replace_based_edit_tool", command="create", path="fix.diff",
                                              file_text=patch))
    if turn.turn == 1:
        return reply("Applying it.", call("bash", command="git apply fix.diff && rm fix.diff"))
    return answer("Fixed.")

table = {{key: [swe_fix if b == "swe_fix" else b for b in value] for key, value in {OUTCOMES!r}.items()}}
script = outcome_table(table, default="give_up")
"""


def hand_count(model: str) -> tuple[Fraction, Fraction]:
    fixes = [OUTCOMES.get((model, task), []).count("swe_fix") for task in (CALC, SHOUT)]
    return sum(Fraction(c, 3) for c in fixes) / 2, Fraction(sum(1 for c in fixes if c), 2)


@pytest.fixture(scope="module")
def synth_env(tmp_path_factory, base_image):
    with swe_synth.pointed_at(swe_synth.generate(tmp_path_factory.mktemp("swe-synth"), base_image)) as generated:
        yield generated


def test_a_stand_in_model_sweep_over_swebench_pro_ends_in_pass_at_k(synth_env, tmp_path_factory):
    with standin_server(tmp_path_factory.mktemp("standin"), SCRIPT) as url:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "engine.cli",
                "run",
                "-m",
                "agent=tool_calling",
                "model=openai-compatible/standin-a,openai-compatible/standin-b",
                "task=glob(swebench_pro/*)",
                "attempt=range(0,3)",
                f"agent.base_url={url}",
                "hydra/launcher=joblib",
            ],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=1500,
            env={**os.environ, "OPENAI_API_KEY": "unused"},
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep = re.search(r"^sweep (\S+): (\d+) run\(s\) stored", proc.stdout, re.M)
    assert sweep and sweep.group(2) == "12", proc.stdout[-2000:]
    report = subprocess.run(
        [sys.executable, "-m", "engine.cli", "report", "--sweep", sweep.group(1), "--format", "json"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)["summary"]
    for model in ("standin-a", "standin-b"):
        row = next(r for r in summary if r["model"] == f"openai-compatible/{model}")
        pass1, pass3 = hand_count(model)
        assert row["pass@1"] == pytest.approx(float(pass1)), (model, row)
        assert row["pass@3"] == pytest.approx(float(pass3)), (model, row)
