"""SWE-bench Pro grading end to end on synthetic instances (tests/swe_synth.py: one Python, one
JavaScript, images built from the offline base): the gold patch resolves and the empty one
does not, through `crucible check` and `crucible swe eval`; eval_results.json is the official
file; the official steps' edges (test files restored by before_repo_set_cmd, binary hunks
stripped, a patch that does not apply); and a stand-in model's sweep ending in pass@k."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import swe_synth

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"
SHOUT = "instance_synth__shout-2222222222222222222222222222222222222222-vnan"


@pytest.fixture(scope="module")
def synth(tmp_path_factory, base_image):
    # pointed at in this process too: the stand-in server reads the set
    with swe_synth.pointed_at(swe_synth.generate(tmp_path_factory.mktemp("swe-synth"), base_image)) as generated:
        yield generated


crucible = swe_synth.crucible


def query(sql: str) -> list[dict]:
    proc = crucible("query", sql, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def predictions(path: Path, model: str, patches: dict[str, str]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"instance_id": i, "model_patch": p, "model_name_or_path": model}) + "\n"
            for i, p in patches.items()
        )
    )
    return path


def row(synth: dict, iid: str) -> dict:
    return next(i.row for i in synth["instances"] if i.instance_id == iid)


def patch_from(synth: dict, iid: str, tmp: Path, files: dict[str, bytes]) -> str:
    """A patch against base_commit that writes ``files`` (made with git, binary-safe)."""
    work = tmp / f"edit-{iid}"
    subprocess.run(["git", "clone", "-q", str(Path(synth["dataset"]).parent / "repos" / iid), str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "checkout", "-q", row(synth, iid)["base_commit"]], check=True)
    for rel, data in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True)
    return subprocess.run(
        ["git", "-C", str(work), "diff", "--cached", "--binary"], check=True, capture_output=True, text=True
    ).stdout


def test_gold_resolves_and_empty_does_not_through_check_python_and_javascript(synth):
    proc = crucible("check", "task=glob(swebench_pro/*)", "--rebuild")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 2 task(s) ship: golden 1, baseline 0" in proc.stdout
    statuses = {
        (r["agent"], r["name"]): r["status"]
        for r in query(
            "select r.agent, t.name, t.status from test_results t join runs r using (run_id) "
            "where r.task_id like 'swebench_pro/%'"
        )
    }
    assert statuses[("integration_test", "test/lib.test.js | shout uppercases")] == "PASSED"
    assert statuses[("noop", "test/lib.test.js | shout uppercases")] == "FAILED"
    assert statuses[("noop", "tests/test_calc.py::TestCalc::test_mul")] == "PASSED"


def test_swe_eval_writes_the_official_eval_results_and_resumes_by_spec_hash(synth, tmp_path):
    gold = predictions(tmp_path / "gold.jsonl", "gold-model", {i: row(synth, i)["patch"] for i in (CALC, SHOUT)})
    proc = crucible("swe", "eval", str(gold), "--workers", "2", "--output", str(tmp_path / "gold"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[2/2]" in proc.stdout
    text = (tmp_path / "gold" / "eval_results.json").read_text()
    assert json.loads(text) == {CALC: True, SHOUT: True}
    assert text == json.dumps(json.loads(text))  # json.dump's own separators, no newline: the official bytes
    report = json.loads((tmp_path / "gold" / "report.json").read_text())
    assert report["resolved_ids"] == sorted([CALC, SHOUT]) and report["error_instances"] == 0
    again = crucible("swe", "eval", str(gold), "--output", str(tmp_path / "again"))
    assert again.returncode == 0 and again.stdout.count("(store)") == 2, again.stdout
    empty = predictions(tmp_path / "empty.jsonl", "empty-model", {CALC: "", SHOUT: ""})
    proc = crucible("swe", "eval", str(empty), "--output", str(tmp_path / "empty"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "empty" / "eval_results.json").read_text()) == {CALC: False, SHOUT: False}
    stored = query("select agent, count(*) as n from runs where agent in ('gold-model', 'empty-model') group by agent")
    assert {r["agent"]: r["n"] for r in stored} == {"gold-model": 2, "empty-model": 2}


def _graded(synth: dict, tmp_path: Path, model: str, patch: str) -> dict:
    path = predictions(tmp_path / f"{model}.jsonl", model, {CALC: patch})
    proc = crucible("swe", "eval", str(path), "--output", str(tmp_path / model))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [record] = query(f"select reward, raw_grade from runs where agent = '{model}' order by started_at desc limit 1")
    raw = record["raw_grade"]
    return {
        "reward": record["reward"],
        "raw": json.loads(raw) if isinstance(raw, str) else raw,
        "eval": json.loads((tmp_path / model / "eval_results.json").read_text()),
    }


def test_an_edit_to_a_test_file_named_in_before_repo_set_cmd_is_overwritten(synth, tmp_path):
    cheat = (
        "import unittest\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        pass\n\n"
        "    def test_mul(self):\n        pass\n"
    )
    graded = _graded(
        synth, tmp_path, "cheat-model", patch_from(synth, CALC, tmp_path, {"tests/test_calc.py": cheat.encode()})
    )
    # under strict (swe eval's default) the edit is not even applied (test-files-dropped); officially
    # it applies and before_repo_set_cmd overwrites it
    assert graded["raw"]["apply"]["exit_code"] == 0
    assert graded["raw"]["test_files_dropped"]["files"] == ["tests/test_calc.py"]
    # The image is at base_commit since its build: the official reset is not paid again.
    assert "since the image was built" in graded["raw"]["reset"]["output"]
    assert graded["eval"] == {CALC: False} and graded["reward"] == 0.0
    statuses = {t["name"]: t["status"] for t in graded["raw"]["parser"]["tests"]}
    assert statuses["tests/test_calc.py::TestCalc::test_add"] == "FAILED"


def test_a_binary_hunk_is_stripped_and_the_rest_of_the_patch_applies(synth, tmp_path):
    fix = row(synth, CALC)["patch"]
    binary = patch_from(synth, CALC, tmp_path, {"assets/logo.bin": bytes(range(256)) * 4})
    assert "GIT binary patch" in binary
    graded = _graded(synth, tmp_path, "binary-model", binary + fix)
    assert graded["raw"]["binary_hunks_stripped"] is True
    assert graded["raw"]["apply"]["exit_code"] == 0 and "logo.bin" not in graded["raw"]["apply"]["output"]
    assert graded["eval"] == {CALC: True} and graded["reward"] == 1.0


def test_a_patch_that_does_not_apply_is_unresolved_with_git_applys_output(synth, tmp_path):
    broken = row(synth, CALC)["patch"].replace("-    return a - b", "-    return a ** b")
    graded = _graded(synth, tmp_path, "broken-model", broken)
    assert graded["eval"] == {CALC: False} and graded["reward"] == 0.0
    apply = graded["raw"]["apply"]
    assert apply["exit_code"] != 0 and "patch does not apply" in apply["output"], apply
    assert "did not apply" in graded["raw"]["reason"]
