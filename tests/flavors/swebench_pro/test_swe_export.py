"""A sweep's patches exported as SWE-bench predictions are graded by `crucible swe eval` to the
resolved set the sweep's own verdicts give, and its verdicts exported as a SWE-bench-style
report hold that set. The sweep is a model agent (the local stand-in, scripted) over the
synthetic SWE-bench Pro instances: it applies the gold patch of one and gives up on the other."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import swe_synth
from standin.process import standin_server

from engine.store.duckdb import DuckDBStore
from engine.util.paths import PROJECT_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"
SHOUT = "instance_synth__shout-2222222222222222222222222222222222222222-vnan"
SCRIPT = f"""
import json, os
from tests.standin.script import answer, call, outcome_table, reply

def swe_fix(turn):
    iid = turn.task.split("/", 1)[1]
    rows = [json.loads(line) for line in open(os.environ["CRUCIBLE_SWEBENCH_PRO_DATASET"])]
    patch = next(r["patch"] for r in rows if r["instance_id"] == iid)
    if turn.turn == 0:
        return reply("Writing the fix.", call("str_replace_based_edit_tool", command="create", path="fix.diff",
                                              file_text=patch))
    if turn.turn == 1:
        return reply("Applying it.", call("bash", command="git apply fix.diff && rm fix.diff"))
    return answer("Fixed.")

script = outcome_table({{("standin-a", "swebench_pro/{CALC}"): [swe_fix]}}, default="give_up")
"""


def crucible(store, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CRUCIBLE_STORE": str(store), "OPENAI_API_KEY": "unused"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def swept(tmp_path_factory, base_image):
    """(store, sweep id) of the stand-in's sweep over both synthetic instances."""
    work = tmp_path_factory.mktemp("swe-export")
    store = work / "store.duckdb"
    with swe_synth.pointed_at(swe_synth.generate(work / "synth", base_image)):
        with standin_server(work / "standin", SCRIPT) as url:
            proc = crucible(
                store,
                "run",
                "-m",
                "agent=tool_calling",
                "model=openai-compatible/standin-a",
                "task=glob(swebench_pro/*)",
                f"agent.base_url={url}",
                "hydra/launcher=joblib",
            )
        sweep = re.search(r"^sweep (\S+): 2 run\(s\) stored", proc.stdout, re.M)
        assert sweep, proc.stdout[-2000:]
        yield store, sweep.group(1), work


def test_exported_predictions_graded_by_swe_eval_resolve_what_the_sweep_resolved(swept):
    store, sweep, work = swept
    preds, report_file, out = work / "preds.jsonl", work / "report.json", work / "eval"
    crucible(store, "export", "--predictions", str(preds), "--swebench-report", str(report_file), "--sweep", sweep)
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert [(p["instance_id"], p["model_name_or_path"]) for p in lines] == [
        (CALC, "openai-compatible/standin-a"),
        (SHOUT, "openai-compatible/standin-a"),
    ]
    assert lines[0]["model_patch"].startswith("diff --git") and lines[1]["model_patch"] == ""
    report = json.loads(report_file.read_text())
    assert report["resolved_ids"] == [CALC]  # the sweep's own verdicts
    # the ids come from the field the flavor's tasks carry, as docs/report.md says
    _, named = DuckDBStore(store).query(
        f"SELECT DISTINCT json_extract_string(spec, '$.task.instance_id') FROM runs "
        f"WHERE sweep_id = '{sweep}' ORDER BY 1"
    )
    assert named == [(CALC,), (SHOUT,)]

    crucible(store, "swe", "eval", str(preds), "--output", str(out))
    graded = json.loads((out / "eval_results.json").read_text())
    assert graded == {CALC: True, SHOUT: False}
    assert sorted(i for i, resolved in graded.items() if resolved) == report["resolved_ids"]
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == report["resolved_ids"]


def test_the_swebench_report_has_the_official_fields_and_counts(swept):
    store, sweep, work = swept
    target = work / "report-last.json"
    crucible(store, "export", "--swebench-report", str(target), "--sweep", "last")
    report = json.loads(target.read_text())
    assert report == {
        "total_instances": 2,
        "submitted_instances": 2,
        "completed_instances": 1,
        "resolved_instances": 1,
        "unresolved_instances": 0,
        "empty_patch_instances": 1,
        "error_instances": 0,
        "completed_ids": [CALC],
        "incomplete_ids": [],
        "empty_patch_ids": [SHOUT],
        "submitted_ids": [CALC, SHOUT],
        "resolved_ids": [CALC],
        "unresolved_ids": [],
        "error_ids": [],
        "schema_version": 2,
    }
