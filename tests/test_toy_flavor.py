"""A flavor defined entirely inside tests/ (tests/toy_flavor: its own task schema with no repo
or refs, its own tool, its own image, its own grader) ships through `crucible check` with
no line of engine/ written for it. The engine finds it by ``_target_`` alone, and only
because the user allows its package (``CRUCIBLE_PLUGIN_PACKAGES``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from toy_flavor.flavor import ToyFlavor

from engine.config.schema import IntegrityConfig
from engine.models import RunSpec
from envs.integrity import docs
from envs.integrity.catalogue import Defence, register, unregister

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def crucible(*args: str, allow: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": str(TESTS / "conf"), "PYTHONPATH": str(TESTS)}
    env.pop("CRUCIBLE_PLUGIN_PACKAGES", None)
    if allow:
        env["CRUCIBLE_PLUGIN_PACKAGES"] = "toy_flavor"
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


@pytest.mark.docker
@pytest.mark.slow
def test_a_flavor_from_tests_ships_through_check_golden_1_baseline_0():
    proc = crucible("check", "task=toy/life", "--rebuild")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("toy/life"))
    assert row.split()[1:3] == ["1", "0"], proc.stdout  # golden, baseline
    assert "all 1 task(s) ship: golden 1, baseline 0" in proc.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_a_wrong_golden_of_the_toy_flavor_fails_with_the_flavors_own_explanation():
    proc = crucible("check", "task=toy/wrong_golden", "--rebuild")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL toy/wrong_golden (golden, agent integration_test): reward 0.0 (expected 1.0)" in proc.stdout
    assert "reason: wrong answer; the comparison exited 1; answer given: '41'" in proc.stdout


@pytest.mark.slow
def test_a_toy_task_key_the_toy_schema_lacks_is_one_line_naming_it(tmp_path):
    conf = tmp_path / "task" / "toy"
    conf.mkdir(parents=True)
    (conf / "typo.yaml").write_text(
        "defaults:\n  - override /flavor@_global_.flavor: toy\n  - _self_\n"
        "name: typo\nset: toy\nprompt: p\nquestion: q\nanswer: a\nanwser: b\n"
    )
    env_conf = f"{TESTS / 'conf'}:{tmp_path}"
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "build", "task=toy/typo", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={
            **os.environ,
            "CRUCIBLE_CONFIG_PATH": env_conf,
            "PYTHONPATH": str(TESTS),
            "CRUCIBLE_PLUGIN_PACKAGES": "toy_flavor",
        },
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "task toy/typo (flavor toy)" in lines[0] and "task.anwser" in lines[0], lines


@pytest.mark.slow
def test_a_flavor_outside_crucibles_packages_is_refused_unless_allowed():
    proc = crucible("build", "task=toy/life", "--dry-run", allow=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "toy_flavor.flavor.ToyFlavor' is outside crucible's packages" in lines[0]
    assert "CRUCIBLE_PLUGIN_PACKAGES" in lines[0]


@pytest.mark.docker
@pytest.mark.slow
def test_a_flavor_that_grades_in_many_workspaces_gets_each_fresh_prepared_and_removed_after(docker_client):
    """The engine's ``GradesInMany`` hook, for any flavor: ``grading_workspaces`` fresh grading
    containers (three here), each prepared while the agent works, all handed to ``grade_many``,
    none of them left behind."""
    import docker.errors

    from engine.store.duckdb import DuckDBStore

    proc = crucible("run", "task=toy/life_many", "agent=integration_test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = DuckDBStore().query(
        "SELECT reward, raw_grade FROM runs WHERE task_id = 'toy/life_many' AND status = 'completed'"
    )[1]
    assert len(rows) == 1, rows
    reward, raw = rows[0][0], rows[0][1] if isinstance(rows[0][1], dict) else json.loads(rows[0][1])
    assert reward == 1.0 and raw["rewards"] == [1.0, 1.0, 1.0], raw
    hosts = [g["host"] for g in raw["gradings"]]
    assert len(set(hosts)) == 3 and all(g["fresh"] for g in raw["gradings"]), raw  # three, none shared
    assert raw["prepared"] == hosts  # prepare_grading on the first, prepare_extra_grading on the others
    for host in hosts:
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(host)


# ---------------------------------------------------------------- a defence declared here only
ONE_LINE = Defence(
    "answer_on_one_line",
    threat="a right answer padded with lines for whoever reads the answer file next",
    adds="a right answer of more than one line scores 0 (a toy defence, declared in this test only)",
    judging=lambda raw: (
        "tampered: the answer spans more than one line"
        if len(str(raw.get("answer", "")).strip().splitlines()) > 1
        else None
    ),
)


@dataclass
class OneLineIntegrity(IntegrityConfig):
    """The toy flavor's integrity schema (none of its own) and this test's defence."""

    answer_on_one_line: bool = ONE_LINE.field()


class OneLineToy(ToyFlavor):
    """The toy flavor with the defence above: nothing outside this file names it."""

    integrity_schema = OneLineIntegrity


@pytest.fixture
def one_line_toy(monkeypatch):
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(TESTS / "conf"))
    monkeypatch.setenv("CRUCIBLE_PLUGIN_PACKAGES", f"toy_flavor:{__name__}")
    register("toy_one_line", OneLineIntegrity)
    yield
    unregister("toy_one_line")


def _typed(mode: str, *overrides: str):
    """The toy task's config typed as planning types it (``schema.typed``, not the evaluation
    cache, which keys on the flavor's package and not on this test's class)."""
    from engine.config.compose import compose_config
    from engine.config.schema import typed

    return typed(compose_config(["task=toy/life", f"integrity={mode}", *overrides]))


def _spec(flavor_cfg, integrity) -> RunSpec:
    cfg = _typed("none")
    return RunSpec(
        engine_version="test",
        task=cfg.task,
        env=cfg.env,
        flavor=flavor_cfg,
        agent=cfg.agent,
        model=None,
        integrity=integrity,
        runtime=cfg.runtime,
        image={},
        timeouts=cfg.timeouts,
        seed=0,
        attempt=0,
    )


@pytest.mark.slow
def test_a_defence_declared_in_a_test_is_catalogued_applied_under_strict_only_and_changes_the_spec_hash(one_line_toy):
    tables = docs.render(["toy_one_line"])
    row = next(line for line in tables["catalogue"].splitlines() if "`answer_on_one_line`" in line)
    assert row.startswith("| toy_one_line | `answer_on_one_line` | strict |"), row
    assert "`answer_on_one_line`" in tables["modes"].splitlines()[-1].split("|")[-2]  # the strict column
    assert "answer_on_one_line" not in docs.render()["catalogue"]  # the shipped catalogue is the shipped flavors'
    padded = {"answer": "42\n(and 42 is the answer to the next task too)", "exit_code": 0}
    for mode in ("none", "vault", "strict"):
        plain = _typed(mode)
        cfg = _typed(mode, f"flavor._target_={__name__}.OneLineToy")
        on = mode == "strict"
        assert cfg.integrity.answer_on_one_line is on
        verdict = OneLineToy().regrade(_spec(cfg.flavor, cfg.integrity), padded)
        assert (verdict.reward, verdict.raw["reason"]) == (
            (0.0, "tampered: the answer spans more than one line") if on else (1.0, "right answer")
        )
        assert OneLineToy().regrade(_spec(cfg.flavor, cfg.integrity), {"answer": "42", "exit_code": 0}).reward == 1.0
        # The same run spec but for the new defence: its hash moves only where the defence is on.
        with_it, without = _spec(plain.flavor, cfg.integrity), _spec(plain.flavor, plain.integrity)
        assert (with_it.spec_hash != without.spec_hash) is on, mode
        assert ("answer_on_one_line" in with_it.to_dict()["integrity"]) is on
    off = _typed("strict", f"flavor._target_={__name__}.OneLineToy", "integrity.defences.answer_on_one_line=false")
    assert off.integrity.answer_on_one_line is False
    assert OneLineToy().regrade(_spec(off.flavor, off.integrity), padded).reward == 1.0
