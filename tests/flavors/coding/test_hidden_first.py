"""Ordering (issue 34, envs/coding/verdict/crucible_runner_end.py ``_import_first``): the
differential re-run has the end plugin import the hidden test modules before pytest loads the
first conftest, so code under test that a visible conftest (or a visible module in a directory
that sorts first) imports finds no hidden module still to come in that grading. Run for real: the
tester's script around a real pytest, as test_runtime_audit.py runs it, on a copy of
``wrinkles/data_driven``'s code with a hidden unittest-style module."""

from __future__ import annotations

from pathlib import Path

import pytest
from attacks import ordinary
from attacks.runtime_host import META_PATH_EMPTIED
from flavors.coding.test_runtime_audit import BUG, make_repo, run

HIDDEN = "tests/test_cases_unit.py"
CONFTEST_IMPORTS_THE_CODE = "from hikelog import duration  # noqa: F401  (a fixture module of the project's)\n"


def _hidden(tests: list) -> list:
    found = [t for t in tests if "test_cases_unit" in t.name]
    assert found, tests
    return found


@pytest.mark.slow
def test_a_hunt_started_from_a_visible_conftest_finds_no_hidden_module_to_come_when_they_are_imported_first(tmp_path):
    """A conftest loads before any test module in every pytest run: code under test it imports
    serves the hidden module emptied (a meta-path finder) and wins, however the modules are named.
    Imported first, the hidden module is already loaded when that code runs: its tests run, fail
    on the bug, and the two gradings disagree."""
    attacked = BUG.read_text(encoding="utf-8") + META_PATH_EMPTIED
    repo = make_repo(tmp_path / "plain", attacked)
    (repo / "conftest.py").write_text(CONFTEST_IMPORTS_THE_CODE, encoding="utf-8")
    plain, tests = run(repo, "tests", audited=False)
    assert all(t.status == "PASSED" for t in _hidden(tests)), (tests, plain.text[-2000:])  # the hunt wins
    assert plain.hidden_first is None  # not asked: the end line says nothing of it

    repo = make_repo(tmp_path / "first", attacked)
    (repo / "conftest.py").write_text(CONFTEST_IMPORTS_THE_CODE, encoding="utf-8")
    first, tests = run(repo, "tests", audited=False, first=(HIDDEN,))
    assert first.hidden_first == "conftests", first.text[-2000:]
    assert any(t.status == "FAILED" for t in _hidden(tests)), (tests, first.text[-2000:])  # found nothing to come


@pytest.mark.slow
def test_honest_suites_pass_with_the_hidden_modules_imported_first_or_after_the_conftest_they_need(tmp_path):
    """The golden, with a conftest that imports the code under test, passes with the hidden module
    imported before it; with a conftest the hidden module needs at import (it puts a helper
    directory on ``sys.path``) the early import is undone and the module imported after the
    conftests, before any test module; under the importlib import mode it is left to collection.
    Every test passes each time."""
    golden = ordinary.FIXED

    repo = make_repo(tmp_path / "a", golden)
    (repo / "conftest.py").write_text(CONFTEST_IMPORTS_THE_CODE, encoding="utf-8")
    cut, tests = run(repo, "tests", audited=True, first=(HIDDEN,))
    assert cut.hidden_first == "conftests" and all(t.status == "PASSED" for t in tests), (tests, cut.text[-2000:])

    repo = make_repo(tmp_path / "b", golden)
    _needs_its_conftest(repo)
    cut, tests = run(repo, "tests", audited=True, first=(HIDDEN,))
    assert cut.hidden_first == "tests", cut.text[-2000:]
    assert all(t.status == "PASSED" for t in tests) and len(_hidden(tests)) == 3, (tests, cut.text[-2000:])
    assert cut.runner_audit is not None and not cut.runner_audit.get("hook_errors"), cut.runner_audit

    repo = make_repo(tmp_path / "c", golden)
    _needs_its_conftest(repo)
    (repo / "pytest.ini").write_text("[pytest]\naddopts = --import-mode=importlib\n", encoding="utf-8")
    cut, tests = run(repo, "tests", audited=False, first=(HIDDEN,))
    assert cut.hidden_first == "no" and all(t.status == "PASSED" for t in tests), (tests, cut.text[-2000:])


def _needs_its_conftest(repo: Path) -> None:
    """The hidden module imports ``casehelp``, found only on the path its directory's conftest adds."""
    helpers = repo / "tests" / "helpers"
    helpers.mkdir()
    (helpers / "casehelp.py").write_text("LABEL = 'cases'\n", encoding="utf-8")
    (repo / "tests" / "conftest.py").write_text(
        "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent / 'helpers'))\n",
        encoding="utf-8",
    )
    module = repo / HIDDEN
    module.write_text("import casehelp  # noqa: F401\n" + module.read_text(encoding="utf-8"), encoding="utf-8")
