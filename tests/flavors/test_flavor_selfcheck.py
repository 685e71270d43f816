"""The flavor self-check (engine/cli/selfcheck: ``crucible selfcheck task=...``) passes for
every flavor crucible has (the toy one from tests/, coding, sdlc, SWE-bench Pro on the suite's
synthetic instances, Harbor on a generated task folder), each on one task's golden and
baseline; and it can fail: a toy flavor that breaks one clause of the contract
(tests/toy_flavor/broken.py) fails that check, by name, with its one line."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import swe_synth

from engine.cli.selfcheck import CHECKS, CheckResult, Subject, run_gate, run_one, run_selfcheck, subjects


def on_docker(test):
    """Runs flavors' golden and baseline (or reads them from the session's store): Docker, slow."""
    return pytest.mark.docker(pytest.mark.slow(test))


TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
TOY_ENV = {"CRUCIBLE_CONFIG_PATH": str(TESTS / "conf"), "CRUCIBLE_PLUGIN_PACKAGES": "toy_flavor"}
CHECK_NAMES = [c.name for c in CHECKS]
BY_NAME = {c.name: c for c in CHECKS}


def failures(results: list[CheckResult]) -> list[str]:
    return [f"{r.task_id} {r.check}: {r.message}" for r in results if not r.passed]


def every_check_passed(results: list[CheckResult], tasks: set[str]) -> None:
    assert not failures(results), failures(results)
    assert {r.task_id for r in results} == tasks
    for task in tasks:  # every check ran on every task, in CHECKS' order
        assert [r.check for r in results if r.task_id == task] == CHECK_NAMES


@pytest.fixture(scope="module")
def toy_flavor_conf(base_image):
    with pytest.MonkeyPatch.context() as patch:
        for key, value in TOY_ENV.items():
            patch.setenv(key, value)
        yield


@pytest.fixture(scope="module")
def toy(toy_flavor_conf) -> Subject:
    """toy/life with its gate run (or taken from the store) and read back from the store."""
    found, jobs, session = subjects(["task=toy/life"])
    run_gate(found, jobs, session)
    return found[0]


@on_docker
def test_the_toy_flavor_passes_every_check(toy):
    results = [run_one(check, toy) for check in CHECKS]
    every_check_passed(results, {"toy/life"})


@on_docker
def test_coding_and_sdlc_pass_every_check(base_image):
    every_check_passed(run_selfcheck(["task=sample/last_page,sdlc/last_page"]), {"sample/last_page", "sdlc/last_page"})


@on_docker
def test_swebench_pro_passes_every_check(tmp_path_factory, base_image):
    generated = swe_synth.generate(tmp_path_factory.mktemp("swe-synth"), base_image)
    with swe_synth.pointed_at(generated):
        results = run_selfcheck(["task=glob(swebench_pro/*)"])
    every_check_passed(results, {f"swebench_pro/{i.instance_id}" for i in generated["instances"]})


@on_docker
def test_harbor_passes_every_check(tmp_path, base_image, monkeypatch):
    spec = importlib.util.spec_from_file_location("harbor_tasks", TESTS / "flavors" / "harbor" / "harbor_tasks.py")
    assert spec is not None and spec.loader is not None
    harbor_tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harbor_tasks)
    harbor_tasks.source_conf(tmp_path / "conf", "gen", harbor_tasks.dataset(tmp_path / "gen"))
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(tmp_path / "conf"))
    every_check_passed(run_selfcheck(["task=harbor/gen/awk-totals"]), {"harbor/gen/awk-totals"})


def broken(subject: Subject, flavor_class: str) -> Subject:
    """``subject`` (its stored runs too) with a broken toy flavor, for planning and for checks."""
    from engine.config.plugins import instantiate

    flavor = dataclasses.replace(subject.typed.flavor, _target_=f"toy_flavor.broken.{flavor_class}")
    return dataclasses.replace(
        subject, typed=dataclasses.replace(subject.typed, flavor=flavor), flavor=instantiate(flavor, where="flavor")
    )


def outcome(subject: Subject, check: str) -> CheckResult:
    return run_one(BY_NAME[check], subject)


@on_docker
def test_a_plan_that_pins_something_new_each_time_fails_plan_purity(toy):
    result = outcome(broken(toy, "ImpurePlan"), "plan_is_pure_and_hashable")
    assert not result.passed
    assert result.message.startswith("two plans of the same task differ: spec.task.pins.planned: "), result.message


@on_docker
def test_a_regrade_that_differs_from_the_stored_verdict_fails_regrade(toy):
    subject = broken(toy, "RegradeDiffers")
    result = outcome(subject, "regrade_equals_the_stored_verdict")
    assert not result.passed
    assert result.message == "golden: regrade gives reward 0.0, the store holds 1.0", result.message
    assert outcome(subject, "explain_covers_every_raw_grade_field").passed  # only its own clause fails


@on_docker
def test_an_explain_that_drops_a_field_fails_unless_the_flavor_says_why(toy):
    result = outcome(broken(toy, "ExplainDropsAField"), "explain_covers_every_raw_grade_field")
    assert not result.passed
    assert result.message.startswith("golden: explain never reads raw-grade field(s) ['answer']"), result.message
    silent = outcome(broken(toy, "ExplainOmitsAFieldSilently"), "explain_covers_every_raw_grade_field")
    assert not silent.passed and silent.message == "explain_omits gives no reason for ['answer']", silent.message
    assert outcome(broken(toy, "ExplainOmitsAFieldSaying"), "explain_covers_every_raw_grade_field").passed


@on_docker
def test_the_command_prints_each_check_and_exits_1_naming_a_failure(toy):
    """``crucible selfcheck``: a row per check; a flavor failing one (``ExplainDropsAField``, the
    toy task under that flavor) exits 1 with its one line. The gate's runs come from the store."""
    env = {**os.environ, **TOY_ENV, "PYTHONPATH": str(TESTS)}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "selfcheck", "task=toy/life"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("toy/life")] == CHECK_NAMES
    assert proc.stdout.rstrip().endswith(f"{len(CHECK_NAMES)} passed, 0 failed"), proc.stdout
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "selfcheck",
            "task=toy/life",
            "flavor._target_=toy_flavor.broken.ExplainDropsAField",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "FAIL toy/life explain_covers_every_raw_grade_field: golden: explain never reads raw-grade field(s) ['answer']"
    ) in proc.stdout, proc.stdout


def test_selfcheck_without_a_task_is_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "selfcheck"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("crucible selfcheck: ") and "task=" in proc.stderr, proc.stderr
