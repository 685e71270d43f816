"""SWE-bench Pro's defences (crucible-strict, swe_tasks/strict.py): its integrity schema, whose
switches decide whether grading is the official evaluator or crucible-strict, and the
defences crucible-strict grading applies, in the order the raw grade lists them
(``raw_grade.defences``). swe_tasks/strict.py's docstring says what each one does.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config.schema import IntegrityConfig
from envs.coding.defences import VAULT
from envs.integrity.catalogue import Defence, catalogue, register

FLAVOR = "swebench_pro"

NAMED_RESULTS_ONLY = Defence(
    "named_results_only",
    threat="result lines the code under test prints, read as the tests' results",
    adds="grading is crucible-strict (the official evaluator's steps with the defences below), not the official one",
)
REFUSE_TEST_AWARE_CODE = Defence(
    "refuse_test_aware_code",
    threat="code that knows it is being tested",
    adds="crucible-strict grading, whose scan of the patch's Python files refuses a finding the task does not allow",
)
DIFFERENTIAL_RERUN = Defence(
    "differential_rerun",
    threat="code that passes only in the order or place the tests run in",
    adds="crucible-strict grading, replayed in a second fresh container with the test files in reverse order",
)


@dataclass
class SwebenchIntegrity(IntegrityConfig):
    """SWE-bench Pro's integrity config: the engine's isolation, the vault, and the switches
    that make grading crucible-strict (each mode's value from ``Defence.modes``)."""

    vault: bool = VAULT.field()
    refuse_test_aware_code: bool = REFUSE_TEST_AWARE_CODE.field()
    differential_rerun: bool = DIFFERENTIAL_RERUN.field()
    named_results_only: bool = NAMED_RESULTS_ONLY.field()


def _grading(name: str, threat: str, adds: str, needs: str = "") -> Defence:
    return Defence(name, threat=threat, adds=adds, switch=False, needs=needs)


GRADING = (
    _grading(
        "test-files-dropped",
        "the agent's conftest or helper rewriting what the runner reports",
        "the patch's chunks on the instance's test paths left out before it is applied",
    ),
    _grading(
        "written-diff",
        "a patch that names its files otherwise than git writes them",
        "git's own diff of what it wrote is what the scan, the trust and the chown read",
    ),
    _grading(
        "uid-wall",
        "the tested code rewriting the hidden tests or the results",
        "run_script.sh as uid 1000, the instance's test files root's and read-only",
    ),
    _grading(
        "end-marker",
        "output printed after the run, read as its results",
        "a one-time token ends run_script.sh's output; what comes after is never parsed",
    ),
    _grading(
        "worst-status",
        "a printed PASSED line beside the real FAILED one",
        "a name reported with two statuses counts by its worst",
    ),
    _grading(
        "junit-confirms",
        "pytest's printed results forged",
        "a listed test passes only if pytest's own JUnit reports agree with the parser",
    ),
    _grading(
        "go-json-confirms",
        "go test's printed results forged",
        "a listed test passes only if go's test2json events agree with the parser",
    ),
    _grading(
        "js-results-confirms",
        "jest's or mocha's printed results forged",
        "a listed test passes only if the runner's own results agree with the parser",
    ),
    _grading(
        "scan-refuses",
        "code that knows it is being tested",
        "the scan's finding the task does not allow scores 0",
        needs="refuse_test_aware_code",
    ),
    _grading(
        "scan-recorded",
        "code that knows it is being tested",
        "the scan's findings recorded only",
        needs="!refuse_test_aware_code",
    ),
    _grading(
        "differential-rerun",
        "code that passes only in the order the tests run in",
        "the steps again in a second fresh container, test files reversed: the verdicts must agree",
        needs="differential_rerun",
    ),
)

register(FLAVOR, SwebenchIntegrity, *GRADING)


def grading(integrity: SwebenchIntegrity) -> list[str]:
    """The crucible-strict defences on under ``integrity``, by name, in the catalogue's order."""
    return [d.name for d in catalogue(FLAVOR) if not d.switch and d.on(integrity)]
