"""The harbor flavor's pure parts: Harbor's reward read from a raw grade, a task folder read,
the Dockerfile's FROM mapped onto crucible's base, the source's options, and the one-line
refusals a user meets (no such task, no WORKDIR)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import harbor_tasks
import pytest

from engine.errors import ConfigError
from envs.harbor import folder, image, reward
from envs.harbor.source import HarborSource

ROOT = Path(__file__).resolve().parents[3]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def graded(**raw) -> reward.Verdict:
    return reward.verdict({"mode": "strict", "apply": "ok", "exit_code": 0, "outlived": [], **raw})


def test_reward_txt_is_the_reward_and_reward_json_keys_are_all_subscores():
    assert graded(reward_txt=b64("1\n")).reward == 1.0
    several = graded(reward_json=b64('{"reward": 0.5, "style": 1, "tests": 0}'))
    assert several.reward == 0.5 and several.subscores == {"reward": 0.5, "style": 1.0, "tests": 0.0}
    assert graded(reward_json=b64('{"accuracy": 0.25}')).reward == 0.25  # the only key


def test_reward_json_comes_before_reward_txt_as_in_harbors_verifier():
    assert graded(reward_txt=b64("0"), reward_json=b64('{"reward": 1}')).reward == 1.0


@pytest.mark.parametrize(
    "raw, why",
    [
        ({}, "test.sh wrote no reward file"),
        ({"reward_txt": b64("yes")}, "reward.txt is not a number: 'yes'"),
        ({"reward_txt": b64("")}, "reward.txt is not a number: ''"),
        ({"reward_json": b64("{")}, "reward.json is not JSON"),
        ({"reward_json": b64('{"reward": true}')}, "reward.json's 'reward' is not a number"),
        ({"reward_json": b64('{"a": 1, "b": 1}')}, "several keys (a, b) and none named reward"),
        ({"reward_txt": b64("1"), "timed_out": True, "limit": 60.0}, "test.sh timed out after 60.0 s"),
        ({"reward_txt": b64("1"), "apply": b64("error: patch failed")}, "did not apply"),
        ({"reward_txt": b64("1"), "outlived": ["sleep 100"]}, "outlived test.sh"),
    ],
)
def test_a_missing_or_malformed_reward_is_0_with_the_reason_recorded(raw, why):
    verdict = graded(**raw)
    assert verdict.reward == 0.0 and why in verdict.raw["reason"], verdict.raw
    assert verdict.raw["reason"] in "\n".join(reward.explain(verdict.raw))


def test_an_outliving_process_is_the_reason_even_where_it_left_the_reward_file_half_written():
    verdict = graded(reward_txt=b64(""), outlived=["bash -c while :; do echo 1 > reward.txt; done"])
    assert verdict.reward == 0.0 and verdict.raw["reason"].startswith("processes of the tests outlived test.sh")
    rewritten = graded(reward_txt=b64("1"), outlived=["sleep 100"])
    assert rewritten.subscores == {} and rewritten.raw["rewards"] == {"reward": 1.0}


def test_processes_outliving_test_sh_cost_the_run_under_strict_only():
    assert graded(reward_txt=b64("1"), outlived=["sleep 100"], mode="vault").reward == 1.0


def test_a_folder_reads_harbors_settings(tmp_path):
    harbor_tasks.dataset(tmp_path)
    read = folder.read(tmp_path / "awk-totals")
    assert (read.workdir, read.agent_timeout, read.verifier_timeout) == ("/app", 300.0, 60.0)
    assert (read.cpus, read.memory_mb, read.allow_internet, read.shape) == (1.0, 2048, False, "dockerfile")
    assert read.capture == "workdir" and folder.read(tmp_path / "tmp-totals").capture == "container"
    sidecar = folder.read(tmp_path / "with-sidecar")
    assert sidecar.shape == "compose" and sidecar.sidecars == ["cache"]
    toml = tmp_path / "live-totals" / "task.toml"
    toml.write_text(toml.read_text().replace('"live"', '"everything"'))
    with pytest.raises(ConfigError, match="crucible_capture must be one of workdir, container, live"):
        folder.read(tmp_path / "live-totals")
    (tmp_path / "awk-totals" / "tests" / "test.sh").unlink()
    with pytest.raises(ConfigError, match="tests/test.sh is missing"):
        folder.read(tmp_path / "awk-totals")


def test_from_images_become_the_base_build_arg_but_stages_stay(tmp_path):
    harbor_tasks.dataset(tmp_path)
    task = folder.read(tmp_path / "py-mean")
    task.dockerfile.write_text(
        "FROM ubuntu:24.04 AS build\nRUN true\nFROM build\nFROM --platform=x alpine\nWORKDIR /app\n"
    )
    text = image._dockerfile_text(task, mapped=True)
    assert text.startswith(f"ARG {image.BASE_ARG}\nFROM ${{{image.BASE_ARG}}} AS build\n"), text
    assert "\nFROM build\n" in text and f"\nFROM --platform=x ${{{image.BASE_ARG}}}\n" in text, text
    assert "base.git" in text  # crucible's tail: the baseline committed outside the working directory
    assert image._dockerfile_text(task, mapped=False).startswith("FROM ubuntu:24.04 AS build")


def test_the_source_makes_one_option_per_task_folder(tmp_path):
    harbor_tasks.dataset(tmp_path)
    (tmp_path / "not-a-task").mkdir()
    source = HarborSource(str(tmp_path))
    options = source.options("harbor/gen")
    assert sorted(options) == ["awk-totals", "live-totals", "no-reward", "py-mean", "tmp-totals", "with-sidecar"]
    assert options["py-mean"]["path"] == str(tmp_path / "py-mean") and options["py-mean"]["set"] == "harbor/gen"
    assert HarborSource("").options("harbor/gen") == {} and HarborSource("").fingerprint() == "no dataset"


def _cli(conf: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "CRUCIBLE_CONFIG_PATH": str(conf)},
    )


@pytest.mark.slow
def test_a_missing_task_a_local_runtime_and_a_dockerfile_without_workdir_are_one_line_each(tmp_path):
    harbor_tasks.dataset(tmp_path / "gen")
    harbor_tasks.source_conf(tmp_path / "conf", "gen", tmp_path / "gen")
    proc = _cli(tmp_path / "conf", "build", "task=harbor/gen/nope", "--dry-run")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "finds no Harbor task folder nope" in lines[0], lines
    proc = _cli(tmp_path / "conf", "build", "task=harbor/gen/py-mean", "runtime=local", "--dry-run")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "runtime=local" in lines[0] and "use runtime=docker" in lines[0]
    dockerfile = tmp_path / "gen" / "awk-totals" / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("WORKDIR /app\n", ""))
    proc = _cli(tmp_path / "conf", "build", "task=harbor/gen/awk-totals", "--dry-run")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "sets no WORKDIR" in lines[0], lines


def test_the_oracles_calls_are_the_same_for_the_same_solution_whatever_its_files_mtimes(tmp_path):
    """They are in the run spec: a folder copied or checked out again must plan the same run."""
    from envs.harbor.flavor import oracle_calls

    harbor_tasks.dataset(tmp_path)
    solution = tmp_path / "py-mean" / "solution"
    before = oracle_calls(solution, 300.0)
    os.utime(solution / "solve.sh", (1, 1))
    assert oracle_calls(solution, 300.0) == before
    assert before[-1]["arguments"]["timeout"] == 300.0 and "solve.sh" in before[-1]["arguments"]["command"]
    assert oracle_calls(tmp_path / "nowhere", 300.0) == []
