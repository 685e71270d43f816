"""crucible-strict's pure parts (swe_tasks/strict.py): which mode gets which evaluator, the
instance's test files, the end marker's cut, and the verdict regraded from a stored raw grade
(worst status, the scan's refusal and its allowances, the differential re-run's agreement)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from engine.util.paths import PROJECT_ROOT
from envs.coding.schema import AllowTestAware
from swe_tasks import strict
from swe_tasks.flavor import SwebenchProFlavor

F2P, P2P = "t.py::T::test_fixed", "t.py::T::test_kept"


def integrity(mode: str):
    return OmegaConf.load(PROJECT_ROOT / "conf" / "integrity" / f"{mode}.yaml")


@pytest.mark.parametrize("mode, evaluator", [("none", "official"), ("vault", "official"), ("strict", "crucible-strict")])
def test_each_mode_records_which_evaluator_grades_it(mode, evaluator):
    assert (strict.STRICT if strict.applies(integrity(mode)) else strict.OFFICIAL) == evaluator
    assert bool(strict.defences(integrity(mode))) == (evaluator == "crucible-strict")


def test_the_hidden_test_files_are_those_before_repo_set_cmd_restores_and_the_selected_ones():
    task = SimpleNamespace(before_repo_set_cmd="git reset --hard a\ngit checkout b -- tests/a.py 'web/x y.test.js'\n",
                           selected_test_files_to_run=["tests/a.py", "tests/c.py", "../escape.py", "/abs.py"])
    assert strict.hidden_test_files(task) == ["tests/a.py", "web/x y.test.js", "tests/c.py"]


def test_output_after_the_end_marker_is_cut_from_what_the_parser_reads_and_kept():
    token = "ab" * 16
    data = b"ok - real\n" + f"\n{token} end 1\n".encode() + b"ok - forged\n"
    assert strict.split_end(data, token) == (b"ok - real\n", b"ok - forged\n", True)
    forged_marker = b"x\n" + b"cd" * 16 + b" end 0\nok - forged\n"  # another token is just output
    assert strict.split_end(forged_marker, token) == (forged_marker, b"", False)


def spec(allow=()):
    return SimpleNamespace(task=SimpleNamespace(fail_to_pass=[F2P], pass_to_pass=[P2P], allow_test_aware=list(allow)))


def raw(evaluator: str, *tests: tuple[str, str], **more) -> dict:
    return {"evaluator": evaluator, "apply": {"exit_code": 0},
            "run_script": {"end": {"stdout": True, "stderr": True}} if evaluator == strict.STRICT else {},
            "parser": {"tests": [{"name": n, "status": s} for n, s in tests]}, **more}


def test_a_printed_passed_line_beside_a_failure_resolves_officially_and_not_under_crucible_strict():
    tests = ((F2P, "FAILED"), (F2P, "PASSED"), (P2P, "PASSED"))
    assert SwebenchProFlavor().regrade(spec(), raw(strict.OFFICIAL, *tests)).reward == 1.0
    verdict = SwebenchProFlavor().regrade(spec(), raw(strict.STRICT, *tests))
    assert verdict.reward == 0.0 and "not PASSED" in verdict.raw["reason"]


def test_a_scan_finding_fails_the_run_unless_the_instance_allows_it():
    finding = {"rule": "import-time-hook", "path": "pkg/worker.py", "line": 3, "detail": "threading.Thread"}
    graded = raw(strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), scan={"refuse": True, "findings": [finding]})
    refused = SwebenchProFlavor().regrade(spec(), graded)
    assert refused.reward == 0.0
    assert refused.raw["reason"] == "test-aware code: import-time-hook at pkg/worker.py:3 (threading.Thread)"
    allowed = spec([AllowTestAware("import-time-hook", "pkg/*", "the pool starts at import upstream")])
    assert SwebenchProFlavor().regrade(allowed, graded).reward == 1.0
    recorded_only = {**graded, "scan": {"refuse": False, "findings": [finding]}}
    assert SwebenchProFlavor().regrade(spec(), recorded_only).reward == 1.0


def test_a_run_without_its_end_marker_is_not_believed():
    graded = raw(strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"))
    graded["run_script"]["end"] = {"stdout": True, "stderr": False}
    verdict = SwebenchProFlavor().regrade(spec(), graded)
    assert verdict.reward == 0.0 and verdict.raw["reason"].startswith("no end marker")


def test_the_differential_rerun_must_agree_on_the_listed_tests():
    passing = raw(strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), ("t.py::T::test_flaky", "FAILED"))
    agreeing = raw(strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), ("t.py::T::test_flaky", "PASSED"))
    verdict = SwebenchProFlavor().regrade(spec(), {**passing, "rerun": agreeing})
    assert verdict.reward == 1.0 and "rerun_differences" not in verdict.raw  # unlisted tests may differ
    disagreeing = raw(strict.STRICT, (F2P, "FAILED"), (P2P, "PASSED"))
    verdict = SwebenchProFlavor().regrade(spec(), {**passing, "rerun": disagreeing})
    assert verdict.reward == 0.0 and verdict.raw["reason"] == strict.TAMPERED_RERUN
    assert verdict.raw["rerun_differences"] == ["reward 1 vs 0", f"{F2P} PASSED vs FAILED"]
    assert verdict.raw["rerun"]["resolved"] is False  # both verdicts recorded
    again = SwebenchProFlavor().regrade(spec(), verdict.raw)  # a stored run regrades the same
    assert again.reward == 0.0 and again.raw["rerun_differences"] == verdict.raw["rerun_differences"]
