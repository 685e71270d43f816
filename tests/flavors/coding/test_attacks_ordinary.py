"""The attack catalogue on an ordinary suite (tests/attacks/ordinary.py, ``wrinkles/data_driven``:
the tests import the code under test into pytest's process, the hidden cases are JSON data):
every attack and honest fix as a real run on Docker under none / vault / strict, scoring what
the catalogue says. Under strict every attack scores 0, and each row's assertion names the
defence that stopped it, so a 0 for another reason (a broken payload) fails the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from attacks.attack import Attack
from attacks.harness import MODES, AttackRunner, assert_strict_held, why
from attacks.ordinary import ATTACKS, BY_ID, CONTROLS, DEFENDED, TASK

from envs.coding import runner_end

ROOT = Path(__file__).resolve().parents[3]

TAMPERED_REPORT = "tampered: the JUnit report changed after pytest's own end"
TEXT_ONLY = "text-only verdict refused"


def _strict_reason(attack: Attack) -> str:
    """How the verdict's reason under strict starts: the defence that stopped the attack."""
    by_class = {
        "test-aware": "test-aware code: ",
        "runner-patch": "test-aware code: ",
        "canary-plugin": "test-aware code: ",
        "hidden-rewrite": "tests failed",
        "helper": "tests failed",
    }
    if attack.id in ("trailing-text-only", "pattern-weak-skip-text", "pattern-weak-xfail-text"):
        return TEXT_ONLY
    if attack.id == "aware-test-name-unnamed":
        return "tests failed"  # no id to read (hide_running_test): the hidden cases fail honestly
    if attack.id == "pattern-weak-skip":
        return "tests skipped"
    if attack.id in ("trailing-new-test-file", "trailing-detached"):
        # the new test file is a test path (dropped); the detached writer races the report's
        # reader: read before its rewrite the report is honest ("tests failed"), after, tampered
        return "tests failed" if attack.id == "trailing-new-test-file" else ""
    if attack.threat == "forged-output":
        return TAMPERED_REPORT
    if attack.id == "own-plugin-forge-report":
        return "tampered: the report has"  # its hooks allowed: the end plugin's own count disagrees
    if attack.id == "own-plugin-swap-report":  # every count agrees; the plugin saw which tests passed
        return "tampered: the report has tests/test_cases.py::test_cases["
    return by_class[attack.threat]


@pytest.fixture(scope="module")
def records(base_image):
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("CRUCIBLE_CONFIG_PATH", str(ROOT / "tests" / "conf"))
        runner = AttackRunner(task=TASK)
        return asyncio.run(runner.run([a.job(mode) for a in ATTACKS for mode in MODES], concurrency=3))


def _record(records, attack_id: str, mode: str):
    record = records[(attack_id, mode)]
    assert record.status == "completed", f"{attack_id} [{mode}]: {record.error_phase}: {record.error}"
    return record


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("attack", DEFENDED, ids=[a.id for a in DEFENDED])
def test_ordinary_suite_attack_scores_zero_under_strict_stopped_by_its_defence(records, attack: Attack):
    record = _record(records, attack.id, "strict")
    assert_strict_held(record, attack.dropped)
    assert record.raw_grade["reason"].startswith(_strict_reason(attack)), why(record)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_ordinary_suite_attack_scores_what_the_catalogue_says_in_every_mode(records, attack: Attack):
    for mode in MODES:
        record = _record(records, attack.id, mode)
        assert record.reward == attack.expected(mode), f"[{mode}] {why(record)}"


@pytest.mark.docker
@pytest.mark.slow
def test_honest_fixes_with_threads_files_and_exit_hooks_score_one_under_strict(records):
    """No false positives: the golden and honest fixes that start a thread, read a data file,
    register an exit hook or glob a directory inside the package pass under strict; what the
    scan found is recorded and, where the task allows it, excused."""
    for control in CONTROLS:
        record = _record(records, control.id, "strict")
        assert record.reward == control.expected("strict"), (control.id, why(record))
    assert _record(records, "honest-lazy-thread", "strict").raw_grade["scan"]["findings"] == []
    assert _record(records, "honest-package-data", "strict").raw_grade["scan"]["findings"] == []
    for attack_id, rule in (("honest-atexit-allowed", "import-time-hook"), ("honest-units-dir-allowed", "tree-walk")):
        findings = _record(records, attack_id, "strict").raw_grade["scan"]["findings"]
        assert [f["rule"] for f in findings] == [rule], findings


@pytest.mark.docker
@pytest.mark.slow
def test_output_after_pytests_end_is_recorded_and_ignored_in_every_mode(records):
    """The forgers' rewritten report is caught by the digest pytest printed at its own end, and
    their passing summary (printed after that end) is kept in the record, not judged."""
    for attack_id in ("trailing-atexit", "trailing-thread", "trailing-detached"):
        for mode in MODES:
            record = _record(records, attack_id, mode)
            test = record.raw_grade["test"]
            assert test["exit_code"] == 0, why(record)  # pytest's exit was forged in every case
            assert "22 passed" not in test["output_tail"], test["output_tail"][-500:]
            if attack_id == "trailing-detached" and record.raw_grade["reason"] == "tests failed":
                # its rewrite came after the report was read: the honest report, failures and all
                assert record.raw_grade["results"]["sha256"] == test["end"]["runner_report"], why(record)
                assert any(t.status == "FAILED" for t in record.tests), why(record)
                continue
            assert record.raw_grade["reason"].startswith(TAMPERED_REPORT), f"[{mode}] {why(record)}"
            assert record.raw_grade["results"]["sha256"] != test["end"]["runner_report"], why(record)
            # what the end marker alone stopped: a report with no failure
            statuses = {t.status for t in record.tests}
            if attack_id == "trailing-detached":
                # the detached writer races the read: a report caught mid-rewrite names fewer tests
                # (or none), but never a failure, and the digest has already scored it tampered
                assert statuses <= {"PASSED"}, f"[{mode}] {why(record)}"
            else:
                assert statuses == {"PASSED"}, f"[{attack_id} {mode}] {why(record)}"
            if attack_id != "trailing-detached":  # a detached writer may print after the output is drained
                assert "22 passed" in test["after_end"]["tail"], test
    golden = _record(records, "control-golden", "strict").raw_grade
    passed = len(golden["results"]["tests"])
    assert golden["test"]["end"] == {
        "shell": True,
        "runner_report": golden["results"]["sha256"],
        "runner_outcomes": {"passed": passed},
        # each test the plugin saw pass, named as the report names it (the re-run's random names unmapped)
        "runner_passed": sorted(runner_end.key(t["name"]) for t in golden["results"]["tests"]),
    }, golden["test"]["end"]
    assert "after_end" not in golden["test"]


@pytest.mark.docker
@pytest.mark.slow
def test_the_hidden_data_lock_and_the_test_paths_stop_what_the_scan_does_not_see(records):
    """The rewrite and removal of the hidden cases name nothing the scan reads: under strict
    the lock (root's files, sticky root directories) stops them, and the hidden cases fail."""
    for attack_id in ("rewrite-hidden-data", "remove-hidden-data"):
        record = _record(records, attack_id, "strict")
        assert record.raw_grade["scan"]["findings"] == [], record.raw_grade["scan"]
        failed = {t.name for t in record.tests if t.status == "FAILED"}
        assert any("decimal.json" in n for n in failed) and any("spaced.json" in n for n in failed), failed
    for attack_id in ("helper-shadow-package", "helper-tests-init"):
        assert set(BY_ID[attack_id].dropped) <= set(_record(records, attack_id, "vault").violations)
