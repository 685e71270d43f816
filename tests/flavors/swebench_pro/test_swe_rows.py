"""SWE-bench Pro rows as a task set (no Docker): the dataset read by DuckDB in any of its
formats, instances selected by id, glob, repo or language with no YAML per instance, a bad
row or a missing asset as one line, and the pure parts of the evaluator replay."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import swe_synth

from engine.errors import ConfigError
from engine.util.paths import PROJECT_ROOT
from swe_tasks import replay, rows
from swe_tasks.assets import env_exports, read_assets
from swe_tasks.predictions import read_predictions

CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"
SHOUT = "instance_synth__shout-2222222222222222222222222222222222222222-vnan"


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return swe_synth.generate(tmp_path_factory.mktemp("swe-synth"), None)


def crucible(*args: str, env: dict[str, str], conf: Path | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    if conf is not None:
        full["CRUCIBLE_CONFIG_PATH"] = str(conf)
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=full,
        timeout=300,
    )


def test_jsonl_csv_and_parquet_read_the_same_rows(synth, tmp_path):
    jsonl = synth["dataset"]
    with duckdb.connect() as con:
        con.execute(
            f"copy (select * from read_json('{jsonl}', format='newline_delimited')) to '{tmp_path}/d.parquet' (format parquet)"
        )
        con.execute(
            f"copy (select * from read_json('{jsonl}', format='newline_delimited')) to '{tmp_path}/d.csv' (header)"
        )
    read = [rows.read_rows(p) for p in (jsonl, tmp_path / "d.parquet", tmp_path / "d.csv")]
    assert [r.instance_id for r in read[0]] == [CALC, SHOUT]
    assert read[0] == read[1] == read[2]
    calc = read[0][0].fields
    assert calc["fail_to_pass"] == ["tests/test_calc.py::TestCalc::test_add"]  # the Python literal, parsed
    assert calc["selected_test_files_to_run"] == ["tests/test_calc.py"]


def renamed(row: dict, names: dict[str, str]) -> dict:
    return {names.get(key, key): value for key, value in row.items()}


UPPER = {"fail_to_pass": "FAIL_TO_PASS", "pass_to_pass": "PASS_TO_PASS", "instance_id": "Instance_Id"}


def test_the_official_field_names_are_read_in_any_case_in_every_format(synth, tmp_path):
    """The official script's docstring writes FAIL_TO_PASS/PASS_TO_PASS: the same fields."""
    expected = rows.read_rows(synth["dataset"])
    upper = tmp_path / "upper.jsonl"
    upper.write_text(
        "".join(
            json.dumps(renamed(json.loads(line), UPPER)) + "\n" for line in synth["dataset"].read_text().splitlines()
        )
    )
    with duckdb.connect() as con:
        for fmt in ("parquet", "csv"):
            con.execute(
                f"copy (select * from read_json('{upper}', format='newline_delimited')) to "
                f"'{tmp_path}/upper.{fmt}' ({'format parquet' if fmt == 'parquet' else 'header'})"
            )
    assert "FAIL_TO_PASS" in (tmp_path / "upper.csv").read_text().splitlines()[0]
    for path in (upper, tmp_path / "upper.parquet", tmp_path / "upper.csv"):
        assert rows.read_rows(path) == expected, path


@pytest.mark.slow
def test_a_field_given_in_two_cases_with_different_values_is_one_line_naming_the_row_and_the_field(synth, tmp_path):
    row = json.loads(synth["dataset"].read_text().splitlines()[0])
    same = tmp_path / "same.jsonl"
    same.write_text(
        json.dumps({**row, "FAIL_TO_PASS": json.dumps(json.loads(row["fail_to_pass"].replace("'", '"')))}) + "\n"
    )  # the same names, written otherwise: one field
    assert rows.read_rows(same)[0].fields["fail_to_pass"] == ["tests/test_calc.py::TestCalc::test_add"]
    words = f"instance {CALC}: field fail_to_pass is given as fail_to_pass and as FAIL_TO_PASS, with different values"
    differ = {**row, "FAIL_TO_PASS": "['tests/test_calc.py::TestCalc::test_mul']"}
    jsonl = tmp_path / "differ.jsonl"
    jsonl.write_text(json.dumps(differ) + "\n")
    csv_path = tmp_path / "differ.csv"
    with csv_path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(differ))
        writer.writeheader()
        writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in differ.items()})
    # DuckDB writes no two names apart only by case: a name of the same length, patched in the file's bytes
    parquet = tmp_path / "differ.parquet"
    staged = tmp_path / "staged.jsonl"
    staged.write_text(json.dumps(renamed(differ, {"FAIL_TO_PASS": "FAIL_TO_PASX"})) + "\n")
    with duckdb.connect() as con:
        con.execute(
            f"copy (select * from read_json('{staged}', format='newline_delimited')) to '{parquet}' (format parquet)"
        )
    data = parquet.read_bytes()
    assert b"FAIL_TO_PASX" in data
    parquet.write_bytes(data.replace(b"FAIL_TO_PASX", b"FAIL_TO_PASS"))
    for path in (jsonl, csv_path, parquet):
        with pytest.raises(ConfigError, match=words):
            rows.read_rows(path)
    env = {**swe_synth.env_for(synth), "CRUCIBLE_SWEBENCH_PRO_DATASET": str(jsonl)}
    proc = crucible("build", f"task=swebench_pro/{CALC}", "--dry-run", env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and words in lines[0], proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "field, value, words",
    [
        ("fail_to_pass", "['a', ", "field fail_to_pass is not a Python list literal"),
        ("base_commit", "HEAD", "field base_commit 'HEAD' is not a commit SHA"),
        ("patch", "", "field patch is missing or empty"),
        ("pass_to_pass", "[1, 2]", "field pass_to_pass is not a list of strings"),
    ],
)
def test_a_bad_row_is_one_line_naming_the_instance_and_the_field(synth, tmp_path, field, value, words):
    lines = synth["dataset"].read_text().splitlines()
    row = json.loads(lines[1])
    row[field] = value
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ConfigError, match=f"instance {SHOUT}: {words}"):
        rows.read_rows(bad)
    env = {**swe_synth.env_for(synth), "CRUCIBLE_SWEBENCH_PRO_DATASET": str(bad)}
    proc = crucible("build", f"task=swebench_pro/{CALC}", "--dry-run", env=env)
    lines_out = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines_out) == 1, proc.stderr
    assert SHOUT in lines_out[0] and field in lines_out[0], lines_out


def test_instances_are_selected_by_id_and_glob_with_no_yaml_per_instance(synth, monkeypatch):
    from engine.config.compose import combinations

    for key, value in swe_synth.env_for(synth).items():
        monkeypatch.setenv(key, value)
    assert combinations(["task=glob(swebench_pro/*shout*)"]) == [[f"task=swebench_pro/{SHOUT}"]]
    assert combinations([f"task=swebench_pro/{CALC}"]) == [[f"task=swebench_pro/{CALC}"]]
    with pytest.raises(ConfigError, match="selects nothing"):
        combinations(["task=glob(swebench_pro/*nothing*)"])


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_an_instance_asked_for_with_the_dataset_unset_says_the_set_is_empty_and_what_to_set(synth):
    env = {**swe_synth.env_for(synth), "CRUCIBLE_SWEBENCH_PRO_DATASET": ""}
    line = one_line_error(crucible("check", f"task=swebench_pro/{CALC}", env=env))
    assert line == (
        f"crucible check: unknown task swebench_pro/{CALC}: task set swebench_pro is empty: its source "
        "(swe_tasks.source.SwebenchProSource) has no dataset; set CRUCIBLE_SWEBENCH_PRO_DATASET"
    )
    line = one_line_error(crucible("check", "task=glob(swebench_pro/*calc*)", env=env))
    assert line.endswith(
        "selects nothing: task set swebench_pro is empty: its source "
        "(swe_tasks.source.SwebenchProSource) has no dataset; set CRUCIBLE_SWEBENCH_PRO_DATASET"
    ), line


@pytest.mark.slow
def test_an_instance_the_dataset_lacks_is_one_line_naming_the_dataset(synth, tmp_path):
    missing = CALC.replace("calc", "calx")
    line = one_line_error(crucible("check", f"task=swebench_pro/{missing}", env=swe_synth.env_for(synth)))
    assert line == (
        f"crucible check: unknown task swebench_pro/{missing}: task set swebench_pro has no {missing}: "
        f"its source (swe_tasks.source.SwebenchProSource) finds no instance {missing} in the dataset "
        f"{synth['dataset']}"
    )
    conf = tmp_path / "conf"  # a set of the js rows only: calc is in the dataset, not in the set
    (conf / "task" / "swe_js").mkdir(parents=True)
    (conf / "task" / "swe_js" / "_source.yaml").write_text(
        "_target_: swe_tasks.source.SwebenchProSource\n"
        f"dataset: {synth['dataset']}\nassets: {synth['assets']}\nlanguages: [js]\n"
    )
    line = one_line_error(crucible("check", f"task=swe_js/{CALC}", env=swe_synth.env_for(synth), conf=conf))
    assert line.endswith(
        f"task set swe_js has no {CALC}: its source (swe_tasks.source.SwebenchProSource) selects "
        f"no instance {CALC} of the dataset {synth['dataset']} (by its instances, repos and languages)"
    )


def test_the_instance_image_builds_from_its_own_image_or_a_stand_in(synth, monkeypatch, tmp_path):
    from engine.config.compose import compose_config, to_typed
    from engine.interfaces import PlanContext
    from swe_tasks.flavor import SwebenchProFlavor

    for key, value in {**swe_synth.env_for(synth), "CRUCIBLE_SWEBENCH_PRO_BASE_IMAGES": ""}.items():
        monkeypatch.setenv(key, value)

    def planned(*overrides: str):
        cfg = to_typed(compose_config([f"task=swebench_pro/{CALC}", *overrides]))
        ctx = PlanContext(
            env=cfg.env, base_image=lambda: "unused", dockerfile=PROJECT_ROOT / "Dockerfile.hud", cache_dir=tmp_path
        )
        return SwebenchProFlavor().plan_task(cfg.task, ctx)

    plan = planned()
    row = rows.read_rows(synth["dataset"])[0].fields
    assert plan.image.build_args["BASE"] == f"jefzda/sweap-images:{row['dockerhub_tag']}"
    assert plan.image.build_args["INSTANCE_ID"] == CALC and plan.image.build_args["BASELINE_REF"] == row["base_commit"]
    assert planned("task.base_image=local/stand-in:1").image.build_args["BASE"] == "local/stand-in:1"
    assert plan.task.prompt.startswith("calc.add subtracts") and plan.task.pins["baseline"] == row["base_commit"]


def test_a_set_selects_by_language_and_repo_in_its_own_source_file(synth, tmp_path):
    conf = tmp_path / "conf"
    (conf / "task" / "swe_js").mkdir(parents=True)
    (conf / "task" / "swe_js" / "_source.yaml").write_text(
        "_target_: swe_tasks.source.SwebenchProSource\n"
        f"dataset: {synth['dataset']}\nassets: {synth['assets']}\nlanguages: [js]\nrepos: ['synth/*']\n"
    )
    from engine.config.sources import generated_dirs

    made = generated_dirs([conf])
    options = sorted(p.stem for d in made for p in (d / "task" / "swe_js").glob("*.yaml"))
    assert options == [SHOUT]


def test_a_changed_dataset_is_a_new_composition_not_a_stale_cached_one(synth, tmp_path, monkeypatch):
    from engine.config.compose import compose_config, to_typed

    dataset = tmp_path / "d.jsonl"
    dataset.write_text(synth["dataset"].read_text())
    for key, value in {**swe_synth.env_for(synth), "CRUCIBLE_SWEBENCH_PRO_DATASET": str(dataset)}.items():
        monkeypatch.setenv(key, value)
    first = to_typed(compose_config([f"task=swebench_pro/{CALC}"])).task
    assert rows.decode_text(first.problem_statement).startswith("calc.add subtracts")
    changed = [json.loads(line) for line in dataset.read_text().splitlines()]
    changed[0]["problem_statement"] = "Costs ${HOME} and $$ to fix."
    dataset.write_text("".join(json.dumps(r) + "\n" for r in changed))
    second = to_typed(compose_config([f"task=swebench_pro/{CALC}"])).task
    assert rows.decode_text(second.problem_statement) == "Costs ${HOME} and $$ to fix."  # no interpolation either


def test_a_missing_official_asset_is_one_line_naming_the_instance_and_the_file(synth, tmp_path):
    import shutil

    assets = tmp_path / "assets"
    shutil.copytree(synth["assets"], assets)
    (assets / "run_scripts" / CALC / "parser.py").unlink()
    with pytest.raises(ConfigError, match=f"instance {CALC}: official asset run_scripts/{CALC}/parser.py missing"):
        read_assets(str(assets), CALC)
    env = {**swe_synth.env_for(synth), "CRUCIBLE_SWEBENCH_PRO_ASSETS": str(assets)}
    proc = crucible("build", f"task=swebench_pro/{CALC}", "--dry-run", env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and f"run_scripts/{CALC}/parser.py" in lines[0], proc.stderr


def test_the_prompt_is_built_as_the_official_harness_builds_it():
    fields = {"problem_statement": "P", "requirements": "R", "interface": "I"}
    assert rows.prompt(fields) == "P\n\nRequirements:\nR\n\nNew interfaces introduced:\nI"


def test_env_lines_become_exports_and_only_the_last_before_line_runs():
    assert env_exports(b"FROM x\n  ENV A=1\nRUN ENV=2\nENV B='two words'\n") == ["export A=1", "export B='two words'"]
    assert replay.last_line("git reset --hard a\ngit clean -fd \ngit checkout b -- t.py\n") == "git checkout b -- t.py"


def test_binary_hunks_are_stripped_and_text_hunks_kept():
    text = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    binary = "diff --git a/i.png b/i.png\nnew file mode 100644\nGIT binary patch\nliteral 3\nKcmZ?wbN~PV\n\nliteral 0\nHcmV?d00001\n\n"
    differ = "diff --git a/j.bin b/j.bin\nBinary files a/j.bin and b/j.bin differ\n"
    assert replay.strip_binary_hunks(text + binary + differ + text) == text + text
    assert replay.strip_binary_hunks("") == ""


def test_resolved_iff_every_required_name_is_reported_passed():
    raw = {
        "parser": {
            "tests": [
                {"name": "a", "status": "PASSED"},
                {"name": "b", "status": "FAILED"},
                {"name": "b", "status": "PASSED"},
            ]
        },
        "apply": {"exit_code": 0},
    }
    assert replay.judge(raw, ["a"], ["b"])["resolved"]  # officially: PASSED once is passed
    judged = replay.judge(raw, ["a", "c"], ["b"])
    assert not judged["resolved"] and judged["f2p"] == 0.5 and judged["p2p"] == 1.0
    missing = replay.judge({"parser": {"error": "run_script.sh left no stdout.log/stderr.log"}}, ["a"], [])
    assert not missing["resolved"] and "no test results" in missing["reason"]


def test_text_encoding_round_trips_whatever_the_dollars():
    for text in ["${a}", "$#{b}", "$$", "\\${c}", "plain", "$"]:
        assert rows.decode_text(rows.encode_text(text)) == text
        assert "${" not in rows.encode_text(text)


def test_a_bad_prediction_is_one_line_naming_the_entry_and_the_field(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"instance_id": "x", "model_patch": 3}) + "\n")
    with pytest.raises(ConfigError, match="entry 1 \\(instance x\\): field model_patch is not text"):
        read_predictions(path)
    path.write_text(json.dumps([{"instance_id": "x", "model_patch": "", "model_name_or_path": "m"}]))
    found, sha = read_predictions(path)
    assert found[0].model_name_or_path == "m" and len(sha) == 64


def test_step_records_and_files_are_delimited_by_length_not_by_markers():
    fake = b"@@crucible-step x 0 0 1 5\n"  # output that looks like a record stays output
    data = (
        b"@@crucible-step apply 1 0 83 "
        + str(len(fake)).encode()
        + b"\n"
        + fake
        + b"@@crucible-step run_script 124 1 9000 0\n"
        + b"@@crucible-files 3 1\nabcd"
    )
    records, files = replay.parse_records(data)
    assert records["apply"] == {"exit_code": 1, "timed_out": False, "seconds": 0.083, "output": fake.decode()}
    assert records["run_script"]["timed_out"] and records["run_script"]["exit_code"] == 124
    assert "x" not in records and files == {"stdout": b"abc", "stderr": b"d"}
