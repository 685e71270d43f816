"""`crucible swe eval` on SWE-bench Pro's own predictions format and SWE-bench's, and its
``--output`` in the official evaluator's per-instance layout.

The official evaluator (scaleapi/SWE-bench_Pro-os, ``swe_bench_pro_eval.py``) cannot run here
(no network, and none of its code is in this repository), so its layout is stated below as
our own expectation, read from that script: per instance a directory
``<output_dir>/<instance_id>/`` holding ``<prefix>_patch.diff`` (the patch as given),
``<prefix>_stdout.log`` and ``<prefix>_stderr.log`` (run_script.sh's two files, empty when one
is missing, in its local-docker mode), and, only where the parser left an ``output.json``,
``<prefix>_output.json`` (``json.dump`` of it) and ``<prefix>_entryscript.sh``; ``prefix``
defaults to "". Beside them ``eval_results.json``: ``json.dump`` of ``{instance_id: bool}``.
(It also leaves its bind mount, ``workspace/``, which crucible does not write.)

The unit tests read both formats and their bad entries; the Docker tests grade the synthetic
instances (tests/swe_synth.py) in both formats and query the store for the names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import swe_synth

from engine.errors import ConfigError, UserError
from engine.models import RunRecord
from swe_tasks import cli, replay
from swe_tasks.predictions import Prediction, read_predictions

CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"
SHOUT = "instance_synth__shout-2222222222222222222222222222222222222222-vnan"

OFFICIAL_WITH_OUTPUT = ("{p}_entryscript.sh", "{p}_output.json", "{p}_patch.diff", "{p}_stderr.log", "{p}_stdout.log")
"""What swe_bench_pro_eval.py leaves in ``<output_dir>/<instance_id>/`` once its parser wrote
output.json (our reading of the script: see the module docstring)."""
OFFICIAL_WITHOUT_OUTPUT = ("{p}_patch.diff", "{p}_stderr.log", "{p}_stdout.log")
"""The same when output.json is missing: it returns before saving the output and the entry script."""


def official_files(prefix: str, with_output: bool = True) -> list[str]:
    return sorted(n.format(p=prefix) for n in (OFFICIAL_WITH_OUTPUT if with_output else OFFICIAL_WITHOUT_OUTPUT))


def official_entry_lines(env_lines: list[str], base: str, before: str, files: list[str]) -> list[str]:
    """The commands of the official entry script (create_entryscript) for one instance, as we
    read that function: each Dockerfile ENV line as an export, then the steps."""
    return [
        *(line.replace("ENV", "export", 1) for line in env_lines),
        "cd /app",
        f"git reset --hard {base}",
        f"git checkout {base}",
        "git apply -v /workspace/patch.diff",
        before.strip().split("\n")[-1],
        f"bash /workspace/run_script.sh {','.join(files)} > /workspace/stdout.log 2> /workspace/stderr.log",
        "python /workspace/parser.py /workspace/stdout.log /workspace/stderr.log /workspace/output.json",
    ]


def commands_of(script: str) -> list[str]:
    return [line for line in script.split("\n") if line and not line.startswith("#")]


def write(path: Path, entries) -> Path:
    path.write_text(json.dumps(entries))
    return path


# --------------------------------------------------------------------------- reading, both formats


def test_swebench_pros_own_format_is_read_and_its_prefix_names_agent_and_model(tmp_path):
    path = write(
        tmp_path / "sample1_patches.json",
        [
            {"instance_id": "a", "patch": "diff a", "prefix": "sample1"},
            {"instance_id": "b", "patch": "", "prefix": "sample1"},
        ],
    )
    found, sha = read_predictions(path)
    assert found == [
        Prediction("a", "diff a", agent="sample1", model="sample1", prefix="sample1"),
        Prediction("b", "", agent="sample1", model="sample1", prefix="sample1"),
    ]
    assert len(sha) == 64


def test_swebench_format_is_read_from_jsonl_and_names_agent_and_model_without_a_file_prefix(tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text(
        "".join(
            json.dumps({"instance_id": i, "model_patch": f"diff {i}", "model_name_or_path": "org/m"}) + "\n"
            for i in ("a", "b")
        )
    )
    found, _ = read_predictions(path)
    assert [(p.instance_id, p.patch, p.agent, p.model, p.prefix) for p in found] == [
        ("a", "diff a", "org/m", "org/m", ""),
        ("b", "diff b", "org/m", "org/m", ""),
    ]
    assert found[0].model_name_or_path == "org/m"


def test_a_mapping_keyed_by_instance_id_and_a_single_jsonl_line_are_read(tmp_path):
    mapping = write(tmp_path / "m.json", {"a": {"model_patch": "x", "model_name_or_path": "m"}})
    assert [(p.instance_id, p.patch) for p in read_predictions(mapping)[0]] == [("a", "x")]
    one = write(tmp_path / "one.jsonl", {"instance_id": "a", "patch": "x", "prefix": "p"})
    assert [(p.instance_id, p.prefix) for p in read_predictions(one)[0]] == [("a", "p")]


def test_prefix_names_the_agent_and_model_name_or_path_the_model_when_both_are_given(tmp_path):
    path = write(
        tmp_path / "p.json",
        [{"instance_id": "a", "patch": "x", "prefix": "run1", "model_name_or_path": "openai/gpt-x"}],
    )
    [pred] = read_predictions(path)[0]
    assert (pred.agent, pred.model, pred.prefix) == ("run1", "openai/gpt-x", "run1")


def test_without_a_name_agent_and_model_are_the_files_stem_and_the_files_prefix_is_the_officials(tmp_path):
    path = write(tmp_path / "my_run.json", [{"instance_id": "a", "patch": "x"}])
    [pred] = read_predictions(path)[0]
    assert (pred.agent, pred.model, pred.prefix) == ("my_run", "my_run", "")


def test_equal_patch_and_model_patch_and_a_null_patch_are_accepted(tmp_path):
    path = write(
        tmp_path / "p.json",
        [{"instance_id": "a", "patch": "x", "model_patch": "x"}, {"instance_id": "b", "patch": None, "prefix": "q"}],
    )
    assert [p.patch for p in read_predictions(path)[0]] == ["x", ""]


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        (
            [{"instance_id": "a", "patch": "x", "model_patch": "y"}],
            "entry 1 (instance a): fields patch and model_patch differ",
        ),
        ([{"instance_id": "a", "patch": 3}], "entry 1 (instance a): field patch is not text"),
        ([{"instance_id": "a", "model_patch": ["x"]}], "entry 1 (instance a): field model_patch is not text"),
        ([{"instance_id": "a", "patch": "x", "prefix": 7}], "entry 1 (instance a): field prefix is not text"),
        (
            [{"instance_id": "a", "model_patch": "x", "model_name_or_path": {}}],
            "entry 1 (instance a): field model_name_or_path is not text",
        ),
        ([{"instance_id": "a", "patch": "x", "prefix": "a/b"}], "entry 1 (instance a): field prefix holds a '/'"),
        ([{"instance_id": "a", "patch": "x", "prefix": "${oc.env:HOME}"}], "entry 1 (instance a): field prefix holds"),
        ([{"instance_id": "a", "diff": "x"}], "entry 1 (instance a): no patch"),
        ([{"instance_id": "a", "patch": "x"}, {"patch": "y"}], "entry 2: field instance_id is missing"),
        ([{"instance_id": "a", "patch": "x"}, "diff"], "entry 2 is not an object"),
        (
            [{"instance_id": "a", "patch": "x"}, {"instance_id": "a", "patch": "y"}],
            "entry 2 (instance a): a second prediction for the instance of entry 1",
        ),
        (42, "a int, not a list of predictions"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_file_the_entry_and_the_field(tmp_path, entries, words):
    path = write(tmp_path / "bad.json", entries)
    with pytest.raises(ConfigError) as caught:
        read_predictions(path)
    message = str(caught.value)
    assert message.startswith(f"predictions {path}: ") and words in message and "\n" not in message, message


def test_a_bad_jsonl_line_is_named_by_its_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"instance_id": "a", "patch": ""}) + "\n\n{not json\n")
    with pytest.raises(ConfigError, match=r"p\.jsonl: line 3 is not JSON"):
        read_predictions(path)


def test_swe_eval_refuses_an_override_of_the_names_the_predictions_give(tmp_path):
    path = write(tmp_path / "p.json", [{"instance_id": "a", "patch": "", "prefix": "p"}])
    with pytest.raises(UserError, match="model=x is not taken"):
        cli.evaluate(cli._parse([str(path), "model=x"]))


# --------------------------------------------------------------------------- --output, from records


def record_with(raw: dict, status: str = "completed") -> RunRecord:
    return RunRecord(
        run_id="r1",
        spec_hash="h",
        spec={"task": {"workdir": "/app"}},
        status=status,
        task_id="t",
        agent="p",
        model="p",
        flavor="swebench_pro",
        runtime="docker",
        integrity_requested="none",
        integrity_obtained="none",
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at="2025-01-01T00:00:00",
        raw_grade=raw,
    )


def official_raw(parser: dict) -> dict:
    """A raw grade as the official evaluator's steps record it (swe_tasks/replay.py)."""
    task = SimpleNamespace(
        base_commit="b" * 40,
        before_repo_set_cmd="git reset --hard B\ngit checkout S -- t.py",
        selected_test_files_to_run=["t.py", "u.py"],
    )
    raw = {
        "evaluator": "official",
        "instance_id": "inst",
        "binary_hunks_stripped": False,
        "env_exports": ["export A=1", "export B=2 C=3"],
        "parser": parser,
    }
    for name, command in replay.official_commands(task).items():
        raw[name] = {"command": command, "exit_code": 0, "timed_out": False, "seconds": 0.1, "output": ""}
    raw["run_script"]["logs"] = {
        "stdout": replay.kept_log(b"out\n", "stdout.log"),
        "stderr": replay.kept_log(b"err\n", "stderr.log"),
    }
    return raw


def test_output_holds_the_official_files_of_an_instance_the_parser_read(tmp_path):
    tests = [{"name": "t.py::a", "status": "PASSED"}]
    pred = Prediction("inst", "diff --git a/x b/x\n", agent="p", model="p", prefix="p")
    cli.write_instance(tmp_path, pred, record_with(official_raw({"exit_code": 0, "tests": tests})))
    folder = tmp_path / "inst"
    assert sorted(os.listdir(folder)) == official_files("p")
    assert (folder / "p_patch.diff").read_text() == pred.patch
    assert (folder / "p_stdout.log").read_text() == "out\n" and (folder / "p_stderr.log").read_text() == "err\n"
    assert (folder / "p_output.json").read_text() == json.dumps({"tests": tests})  # json.dump's own bytes
    script = (folder / "p_entryscript.sh").read_text()
    assert commands_of(script) == official_entry_lines(
        ["ENV A=1", "ENV B=2 C=3"], "b" * 40, "git reset --hard B\ngit checkout S -- t.py", ["t.py", "u.py"]
    )


def test_without_a_parser_output_there_is_no_output_json_nor_entry_script_and_stale_ones_go(tmp_path):
    pred = Prediction("inst", "", agent="m", model="m")
    good = record_with(official_raw({"exit_code": 0, "tests": []}))
    cli.write_instance(tmp_path, pred, good)
    assert sorted(os.listdir(tmp_path / "inst")) == official_files("")
    failed = record_with(official_raw({"error": "parser.py (exit 1) wrote no readable output.json"}))
    cli.write_instance(tmp_path, pred, failed)
    assert sorted(os.listdir(tmp_path / "inst")) == official_files("", with_output=False)


def test_a_run_that_never_reached_the_tests_leaves_its_patch_alone(tmp_path):
    pred = Prediction("inst", "diff", agent="m", model="m", prefix="m")
    cli.write_instance(tmp_path, pred, record_with({}, status="error"))
    assert os.listdir(tmp_path / "inst") == ["m_patch.diff"]


def test_an_instance_id_that_leads_out_of_the_output_directory_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a directory name under --output"):
        cli.write_instance(tmp_path, Prediction("../x", "", agent="m", model="m"), record_with({}))


def test_a_large_log_is_kept_bounded_with_its_size_and_hash_of_the_whole():
    data = b"a" * replay.KEPT_LOG + b"THE END\n"
    kept = replay.kept_log(data, "stdout.log")
    assert kept is not None and kept["bytes"] == len(data) and kept["left_out"] == 8
    assert kept["text"].endswith("THE END\n") and "8 bytes of stdout.log left out here" in kept["text"]
    assert len(kept["text"]) < replay.KEPT_LOG + 100
    assert replay.kept_log(None, "stderr.log") is None


# --------------------------------------------------------------------------- real runs (Docker)


@pytest.fixture(scope="module")
def synth(tmp_path_factory, base_image):
    with swe_synth.pointed_at(swe_synth.generate(tmp_path_factory.mktemp("swe-synth"), base_image)) as generated:
        yield generated


def query(sql: str) -> list[dict]:
    proc = swe_synth.crucible("query", sql, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def instance(synth: dict, iid: str):
    return next(i for i in synth["instances"] if i.instance_id == iid)


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_pro_predictions_name_the_model_in_the_store_and_output_is_the_official_layout(synth, tmp_path):
    calc, shout = instance(synth, CALC), instance(synth, SHOUT)
    path = write(
        tmp_path / "pro.json",
        [
            {"instance_id": CALC, "patch": calc.row["patch"], "prefix": "pro-model"},
            {"instance_id": SHOUT, "patch": "", "prefix": "pro-model"},
        ],
    )
    out = tmp_path / "out"
    proc = swe_synth.crucible("swe", "eval", str(path), "integrity=none", "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (out / "eval_results.json").read_text()
    assert text == json.dumps({CALC: True, SHOUT: False})  # in the file's order, json.dump's separators
    stored = query("select task_id, agent, model, raw_grade from runs where model = 'pro-model' order by task_id")
    assert [(r["task_id"], r["agent"], r["model"]) for r in stored] == [
        (f"swebench_pro/{CALC}", "pro-model", "pro-model"),
        (f"swebench_pro/{SHOUT}", "pro-model", "pro-model"),
    ]
    assert sorted(p.name for p in out.iterdir()) == sorted([CALC, SHOUT, "eval_results.json", "report.json"])
    for inst, rec in zip((calc, shout), stored):
        folder = out / inst.instance_id
        assert sorted(os.listdir(folder)) == official_files("pro-model")
        raw = json.loads(rec["raw_grade"]) if isinstance(rec["raw_grade"], str) else rec["raw_grade"]
        assert json.loads((folder / "pro-model_output.json").read_text()) == {"tests": raw["parser"]["tests"]}
        script = (folder / "pro-model_entryscript.sh").read_text()
        assert commands_of(script) == official_entry_lines(
            inst.base_env + inst.instance_env,
            inst.row["base_commit"],
            inst.row["before_repo_set_cmd"],
            eval(inst.row["selected_test_files_to_run"]),
        )
    calc_dir = out / CALC
    assert (calc_dir / "pro-model_patch.diff").read_text() == calc.row["patch"]
    # the synthetic run script says who ran it on stdout; unittest reports on stderr
    assert "run_script uid=0" in (calc_dir / "pro-model_stdout.log").read_text()
    assert "test_add (tests.test_calc.TestCalc" in (calc_dir / "pro-model_stderr.log").read_text()
    assert (out / SHOUT / "pro-model_patch.diff").read_text() == ""


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_predictions_name_agent_and_model_and_strict_steps_are_comments(synth, tmp_path):
    calc = instance(synth, CALC)
    path = tmp_path / "swe.jsonl"
    path.write_text(
        json.dumps({"instance_id": CALC, "model_patch": calc.row["patch"], "model_name_or_path": "org/swe-model"})
        + "\n"
    )
    out = tmp_path / "out"
    proc = swe_synth.crucible("swe", "eval", str(path), "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((out / "eval_results.json").read_text()) == {CALC: True}
    stored = query("select agent, model from runs where model = 'org/swe-model'")
    assert stored == [{"agent": "org/swe-model", "model": "org/swe-model"}]
    # no prefix in SWE-bench's format: the official default, "", names the files
    assert sorted(os.listdir(out / CALC)) == official_files("")
    script = (out / CALC / "_entryscript.sh").read_text()
    assert "evaluator crucible-strict" in script
    assert "# lock: exit 0" in script  # crucible-strict's own step, in words
    [run] = [line for line in script.split("\n") if "bash /workspace/run_script.sh" in line]
    assert run.startswith("#   ") and "setpriv --reuid=1000" in run  # run_script.sh ran otherwise: uid 1000
    assert "run_script uid=1000" in (out / CALC / "_stdout.log").read_text()
