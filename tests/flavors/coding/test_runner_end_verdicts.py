"""The verdicts the end markers feed (envs/coding/judging.py): the canary judged from the named
results, a report pytest's end did not vouch for, text-only verdicts refused under strict (in
grading, and at plan time in one line), and a run stored before the end markers regraded as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs.coding import judging, runner_end
from envs.coding.judging import verdict_from_test_result

ROOT = Path(__file__).resolve().parents[3]


def _verdict(
    exit_code: int,
    tests: list[tuple[str, str]],
    output: str,
    canary: dict | None = None,
    named_only: bool = True,
    report: str = "r" * 64,
    printed: str | None = "r" * 64,
):
    named = {"format": "pytest", "tests": [{"name": n, "status": s} for n, s in tests], "sha256": report}
    raw = {
        "named_results_only": named_only,
        "test": {"exit_code": exit_code, "end": {"shell": True, "runner_report": printed}},
    }
    return verdict_from_test_result(
        applied=True, test_exit_code=exit_code, timed_out=False, output_tail=output, raw=raw, canary=canary, named=named
    )


CANARY = {"nodeid": "tests/test_0123456789abcdef.py::test_c"}


def test_the_canary_is_judged_from_the_named_results_not_the_summary_text():
    honest = "FAILED tests/test_0123456789abcdef.py::test_c\n1 failed, 2 passed in 0.1s\n"
    passing = [("tests/test_a.py::test_a", "PASSED"), ("tests/test_a.py::test_b", "PASSED")]
    assert _verdict(1, [*passing, (CANARY["nodeid"], "FAILED")], honest, CANARY).reward == 1.0
    # a real failure beside the canary: the text forged to say the canary was the only one changes nothing
    failing = [("tests/test_a.py::test_a", "PASSED"), ("tests/test_a.py::test_b", "FAILED")]
    forged = "2 failed, 1 passed in 0.1s\n" + honest
    assert _verdict(1, [*failing, (CANARY["nodeid"], "FAILED")], forged, CANARY).raw["reason"] != "tests passed"
    # the canary failed, yet pytest exited 0: a forged exit
    assert _verdict(0, [*passing, (CANARY["nodeid"], "FAILED")], honest, CANARY).raw["reason"].startswith("tampered")
    assert _verdict(1, [*passing, (CANARY["nodeid"], "PASSED")], honest, CANARY).raw["reason"].startswith("tampered")


def test_a_report_pytests_end_did_not_vouch_for_scores_zero_only_where_named_results_are_required():
    passing = [("tests/test_a.py::test_a", "PASSED")]
    assert _verdict(0, passing, "1 passed in 0.1s\n", printed=None).raw["reason"].startswith("no named test results")
    assert _verdict(0, passing, "1 passed in 0.1s\n", printed=None, named_only=False).reward == 1.0
    assert _verdict(0, passing, "1 passed in 0.1s\n", printed="0" * 64).raw["reason"] == runner_end.TAMPERED_REPORT


def test_a_text_only_verdict_scores_zero_where_named_results_are_required():
    raw = {"named_results_only": True, "test": {"exit_code": 0}}
    verdict = verdict_from_test_result(
        applied=True, test_exit_code=0, timed_out=False, output_tail="3 passed\n", raw=raw, named={"format": "none"}
    )
    assert verdict.reward == 0.0 and verdict.raw["reason"].startswith("text-only verdict refused")
    raw["isolated"] = {"separate": True}  # the isolated verdict's launcher judged it: not the tested code's text
    assert (
        verdict_from_test_result(
            applied=True, test_exit_code=0, timed_out=False, output_tail="3 passed\n", raw=raw, named={"format": "none"}
        ).reward
        == 1.0
    )


def test_a_stored_run_graded_before_the_end_markers_regrades_as_it_was():
    raw = {
        "apply": {"ok": True},
        "test": {"exit_code": 0, "output_tail": "2 passed in 0.1s\n"},
        "results": {
            "format": "pytest",
            "tests": [{"name": "t::a", "status": "PASSED"}, {"name": "t::b", "status": "PASSED"}],
        },
    }
    assert judging.regrade(raw).reward == 1.0


@pytest.mark.slow
@pytest.mark.docker  # planning resolves the base image through the engine
@pytest.mark.parametrize("mode, refused", [("strict", True), ("vault", False)])
def test_strict_refuses_a_text_only_task_in_one_line_at_plan_time(tmp_path, mode, refused, docker_client):
    conf = tmp_path / "conf" / "task" / "tx"
    conf.mkdir(parents=True)
    data_driven = (ROOT / "tests" / "conf" / "task" / "wrinkles" / "data_driven.yaml").read_text()
    (conf / "data_driven.yaml").write_text(
        data_driven.replace("set: wrinkles", "set: tx") + "results:\n  format: none\n"
    )
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf"), "CRUCIBLE_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "build", "--dry-run", "task=tx/data_driven", f"integrity={mode}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    line = "task 'tx/data_driven': integrity=strict takes verdicts from named test results only"
    if refused:
        assert done.returncode != 0 and done.stderr.count("\n") == 1 and line in done.stderr, done.stderr
    else:  # the same task plans under vault, where a text verdict is allowed
        assert done.returncode == 0 and "named test results" not in done.stderr, done.stderr
