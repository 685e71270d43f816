"""The coding flavor's defences (the sdlc flavor grades the same way and shares them): its
integrity schema, one field per defence, and their catalogue entry (envs/integrity/catalogue.py).

Each defence's ``judge`` is what its own guards of the verdict (envs/coding/judging.py) say
of a stored raw grade, the task's lists and allowances aside.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.schema import IntegrityConfig
from envs.coding import audit, judging
from envs.integrity import guards
from envs.integrity.catalogue import Defence, register


def _judged(name: str) -> Any:
    """``name``'s own guards over a stored raw grade."""

    def judge(raw: Mapping[str, Any]) -> str | None:
        return guards.first(judging.VERDICT, judging.case_of(raw), name)

    return judge


def _recorded(key: str, what: str) -> Any:
    """One line naming what the raw grade keeps under ``key``, where it keeps anything."""

    def explain(raw: Mapping[str, Any]) -> list[str]:
        value = raw.get(key)
        return [f"{what} (raw_grade.{key}): {value}"] if value not in (None, {}, []) else []

    return explain


VAULT = Defence(
    "vault",
    threat="reading the fix from the repo's history (commits, refs, reflog, objects)",
    adds="the history moved to a root-only vault; the agent gets a fresh one-commit repo",
    modes=("vault", "strict"),
    stored=True,
)
RESTORE_TEST_PATHS = Defence(
    "restore_test_paths",
    threat="editing, replacing or deleting the tests the grading runs",
    adds="the agent's changes to the task's test paths (the hidden change's and `test_paths`) dropped from the "
    "graded diff and recorded: grading sees the tests as the test ref has them",
    modes=("vault", "strict"),
    stored=True,
    explaining=_recorded("violations", "dropped from the graded diff"),
)
DROP_PROTECTED = Defence(
    "drop_protected",
    threat="planting what the test runner loads (conftest.py, pytest.ini, plugins, start-up files)",
    adds="the agent's changes to protected paths dropped from the graded diff and recorded",
    stored=True,
    explaining=_recorded("violations", "dropped from the graded diff"),
)
CANARY = Defence(
    "canary",
    threat="code in pytest's process that makes every test pass",
    adds="a test that must fail runs beside the hidden tests (pytest commands): a run whose canary is not "
    "reported failed was tampered with from inside (envs/coding/canary.py)",
    stored=True,
    judging=_judged("canary"),
    explaining=_recorded("canary", "the canary"),
)
REFUSE_TEST_AWARE_CODE = Defence(
    "refuse_test_aware_code",
    threat="code that knows it is being tested (inspects its caller, looks for the "
    "runner, patches it or the standard library, hooks exit, reads test paths)",
    adds="a finding of the scan (recorded in every mode) or of the runtime audit the task does not allow scores 0",
    judging=_judged("refuse_test_aware_code"),
    explaining=_recorded("scan", "the test-awareness scan"),
)
DIFFERENTIAL_RERUN = Defence(
    "differential_rerun",
    threat="code that passes only where a hidden test or its data has the name the task gives it",
    adds="the hidden tests run again in another fresh grading workspace, files under other random names, modules in "
    "another order: the two verdicts must agree, or the run scores 0 as tampered",
    explaining=_recorded("rerun_differences", "where the re-run disagrees"),
)
ISOLATE_VERDICT = Defence(
    "isolate_verdict",
    threat="code under test sharing pytest's process (tasks with `isolated_verdict`)",
    adds="pytest runs outside the repo as its own uid, each scenario as the agent's (envs/coding/isolated.py)",
    stored=True,
    explaining=_recorded("isolated", "the isolated verdict"),
)
HIDE_RUNNING_TEST = Defence(
    "hide_running_test",
    threat="reading which hidden case is asking from `PYTEST_CURRENT_TEST`",
    adds="pytest does not publish the running test's id to the code under test",
)
TESTS_IN_ONE_PROCESS = Defence(
    "tests_in_one_process",
    threat="a hook on a pytest-xdist worker turning failures into passes before any count",
    adds="pytest-xdist does not distribute the tests: they run in pytest's own process",
)
RANDOMISE_TEST_NAMES = Defence(
    "randomise_test_names",
    threat="recognising a hidden test by its name, or finding it or its data by a fixed path",
    adds="the hidden tests' functions, classes and files under fresh random names, mapped back in the results",
    explaining=_recorded("renamed", "the random names"),
)
NAMED_RESULTS_ONLY = Defence(
    "named_results_only",
    threat="printing a passing summary or forging the exit code the verdict reads",
    adds="a verdict from named test results only: a text-only task is refused at plan time and scores 0, and a "
    "pytest report no end marker vouches for scores 0",
    judging=_judged("named_results_only"),
)


@dataclass
class CodingIntegrity(IntegrityConfig):
    """The coding flavor's integrity config: the engine's isolation and one switch per defence
    (each mode's value from ``Defence.modes``; ``integrity.defences.<name>`` overrides it)."""

    vault: bool = VAULT.field()
    drop_protected: bool = DROP_PROTECTED.field()
    restore_test_paths: bool = RESTORE_TEST_PATHS.field()
    canary: bool = CANARY.field()
    refuse_test_aware_code: bool = REFUSE_TEST_AWARE_CODE.field()
    differential_rerun: bool = DIFFERENTIAL_RERUN.field()
    isolate_verdict: bool = ISOLATE_VERDICT.field()
    hide_running_test: bool = HIDE_RUNNING_TEST.field()
    tests_in_one_process: bool = TESTS_IN_ONE_PROCESS.field()
    randomise_test_names: bool = RANDOMISE_TEST_NAMES.field()
    named_results_only: bool = NAMED_RESULTS_ONLY.field()


def _runtime(name: str, threat: str, adds: str, needs: str) -> Defence:
    return Defence(name, threat=threat, adds=adds, switch=False, needs=needs)


RUNTIME_EVIDENCE = (
    *(
        _runtime(
            rule.name,
            rule.threat,
            "an audit hook loaded before the code under test records it, per test "
            "and phase, with the caller's file and line; a pass it shows is tampered unless the task allows it "
            "(envs/coding/audit.py)",
            "refuse_test_aware_code",
        )
        for rule in audit.RULES
    ),
    _runtime(
        "audit-fails-closed",
        "making the audit hook itself raise, so it records nothing",
        "an error inside the hook is counted in its record, and a record with one is tampered",
        "refuse_test_aware_code",
    ),
    _runtime(
        "no-bytecode-written",
        "a bytecode or assertion-rewrite cache planted beside a hidden module",
        "the test process writes and reads no bytecode where the tested uid can write",
        "refuse_test_aware_code",
    ),
    _runtime(
        "hidden-first-in-rerun",
        "code that a visible conftest or test module imports, finding the hidden modules still to come",
        "the end plugin imports the re-run's hidden modules before the conftests (after them where they need one)",
        "differential_rerun",
    ),
)
"""What the runtime evidence of issue 34 adds under ``refuse_test_aware_code`` (the audit's
rules, each with its threat) and ``differential_rerun``: in the catalogue, so the docs list each
class beside the defence that carries it."""


register("coding", CodingIntegrity, *RUNTIME_EVIDENCE)
