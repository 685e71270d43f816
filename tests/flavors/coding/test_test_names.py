"""Random names for the hidden tests' functions and classes (envs/coding/testnames.py,
``integrity.randomise_test_names``): the rewrite, checked by running real pytest on the
module before and after it, and the mapping back to the task's test ids. No Docker; the
runs under strict: test_differential_rerun.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from git_repos import commit, git

from engine.models import TestResult
from envs.coding import hidden, judging, rerun, testnames
from envs.coding.hidden import HiddenFile
from envs.integrity.sources.junit import parse_junit

MODULE = b"""import unittest

import pytest


def helper():
    return 1


def test_plain():
    assert helper() == 1


@pytest.mark.parametrize("value", [1, 2], ids=["one", "two"])
def test_parametrised(value):
    assert value in (1, 2)


class TestOuter:
    def test_method(self):
        assert True

    def test_fails(self):
        assert helper() == 2

    class TestInner:
        def test_nested(self):
            pass


class TestBase:
    def test_inherited(self):
        pass


class TestChild(TestBase):
    pass


class Cases(unittest.TestCase):
    def test_unittest(self):
        self.assertEqual(helper(), 1)

    def test_calls_another(self):
        self.test_called()  # an attribute: the method it names keeps its name

    def test_called(self):
        pass


def test_named_by_string():
    pass


def test_looks_it_up():
    assert globals()["test_named_by_string"] is not None


def test_uses_an_alias():
    assert same is test_plain


same = test_plain
"""
RENAMED = {
    "test_plain",
    "test_parametrised",
    "TestOuter",
    "test_method",
    "test_fails",
    "TestInner",
    "test_nested",
    "TestBase",
    "test_inherited",
    "TestChild",
    "Cases",
    "test_unittest",
    "test_calls_another",
    "test_looks_it_up",
    "test_uses_an_alias",
}
KEPT = {"test_named_by_string", "test_called"}


def _pytest(folder: Path) -> list[TestResult]:
    """Real pytest over ``folder``, its named results read from its JUnit report as grading reads them."""
    report = folder / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "tests"],
        cwd=folder,
        capture_output=True,
        check=False,
        timeout=120,
    )
    return parse_junit(report.read_bytes())


def _words(source: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))


@pytest.mark.slow
def test_collected_functions_methods_and_classes_take_random_names_and_results_map_back_to_the_task_ids(tmp_path):
    original = HiddenFile("tests/test_module.py", "644", MODULE)
    names = testnames.candidates([original])
    assert names == RENAMED  # a name a string or an attribute spells is kept; helper is not collected
    (written,), mapping = testnames.randomise([original], names)
    text = written.data.decode()
    assert written.path == original.path and not _words(text) & RENAMED and _words(text) >= KEPT
    assert sorted(mapping.values()) == sorted(RENAMED)
    assert all(re.fullmatch(r"test_x[0-9a-f]{16}", token) for token, name in mapping.items() if name[0] == "t")
    assert all(re.fullmatch(r"TestX[0-9a-f]{16}", token) for token, name in mapping.items() if name[0] != "t")
    assert len(text.splitlines()) == len(MODULE.decode().splitlines())  # tracebacks keep their lines
    runs = {}
    for label, data in (("task", MODULE), ("random", written.data)):
        (tmp_path / label / "tests").mkdir(parents=True)
        (tmp_path / label / "tests" / "test_module.py").write_bytes(data)
        runs[label] = _pytest(tmp_path / label)
    read = [{"name": t.name, "status": t.status} for t in runs["random"]]
    assert not any("test_plain" in t["name"] for t in read)  # pytest saw only the random names
    back = [TestResult(t["name"], t["status"]) for t in rerun.map_back(read, mapping)]
    assert sorted(back, key=lambda t: t.name) == runs["task"]
    ids = {t.name: t.status for t in runs["task"]}
    assert ids["tests/test_module.py::test_parametrised[two]"] == "PASSED"  # the parameter suffix kept
    assert ids["tests/test_module.py::TestOuter::TestInner::test_nested"] == "PASSED"
    assert ids["tests/test_module.py::TestChild::test_inherited"] == "PASSED"
    assert ids["tests/test_module.py::Cases::test_unittest"] == "PASSED"
    assert ids["tests/test_module.py::TestOuter::test_fails"] == "FAILED"
    assert len(ids) == 14


def test_a_name_another_file_of_the_test_ref_or_the_command_names_keeps_it(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(repo, {"src/m.py": b"x = 1\n", "tests/test_visible.py": b"def test_seen():\n    pass\n"}, "base")
    test = commit(
        repo,
        {
            "tests/test_hidden.py": b"def test_free():\n    pass\n\n\ndef test_hooked():\n    pass\n\n\n"
            b"def test_deselected():\n    pass\n\n\ndef test_seen():\n    pass\n\n\n"
            b"def test_pathed():\n    pass\n",
            "tests/conftest.py": b"def pytest_collection_modifyitems(items):\n"
            b"    items.sort(key=lambda i: i.name == 'test_hooked')\n",
            "tests/data/test_pathed.yml": b"expected: 1\n",  # found by the running test's name
        },
        "test",
    )

    change = hidden.read_change(repo, base, test, [], task_id="t/x")
    assert base and testnames.candidates(change) == {
        "test_free",
        "test_hooked",
        "test_deselected",
        "test_seen",
        "test_pathed",
    }
    command = "python3 -m pytest -q tests --deselect tests/test_hidden.py::test_deselected"
    # the conftest names test_hooked, the command test_deselected, a visible module test_seen,
    # a data file's path test_pathed
    assert testnames.renamable(repo, test, change, command) == {"test_free"}
    # -k selects by any part of a name: then no name changes, in the command or in addopts
    assert testnames.renamable(repo, test, change, "python3 -m pytest -q tests -k 'not slow'") == set()
    for ini, text, kept in (
        ("pytest.ini", b"[pytest]\naddopts = -q -k 'not slow'\n", set()),
        ("setup.cfg", b"[tool:pytest]\npython_functions = test_* check_*\n", set()),
        ("tox.ini", b"[pytest]\naddopts = -q --strict-markers\n", {"test_free", "test_deselected"}),
    ):
        other = commit(repo, {ini: text}, ini)
        assert testnames.renamable(repo, other, change, "python3 -m pytest -q tests") == kept, ini
        git(repo, "reset", "-q", "--hard", test)


def test_one_name_in_two_modules_takes_one_new_name_so_an_override_still_overrides(tmp_path):
    base = HiddenFile("tests/test_base.py", "644", b"class TestShared:\n    def test_m(self):\n        assert 0\n")
    child = HiddenFile(
        "tests/test_child.py",
        "644",
        b"from tests.test_base import TestShared\n\n\n"
        b"class TestMore(TestShared):\n    def test_m(self):\n"
        b"        pass\n",
    )
    # TestShared is imported by name: kept everywhere; test_m is one method in both: one new name
    names = testnames.candidates([base, child])
    assert names == {"test_m", "TestMore"}
    files, mapping = testnames.randomise([base, child], names)
    token = {v: k for k, v in mapping.items()}["test_m"]
    assert all(f"def {token}(self)" in f.data.decode() for f in files)
    assert "class TestShared" in files[0].data.decode()


def test_a_module_that_does_not_parse_or_a_non_module_is_left_as_is_and_its_names_kept():
    broken = HiddenFile("tests/test_broken.py", "644", b"def test_a(:\n    pass\ntest_b\n")
    fine = HiddenFile("tests/test_fine.py", "644", b"def test_b():\n    pass\n\n\ndef test_c():\n    pass\n")
    data = HiddenFile("tests/cases/test_c.json", "644", b"[]")
    helper = HiddenFile("tests/helpers.py", "644", b"def test_d():\n    pass\n")
    names = testnames.candidates([broken, fine, data, helper])
    assert names == {"test_c"}  # test_b is spelled in a module that cannot be rewritten
    files, mapping = testnames.randomise([broken, fine, data, helper], names)
    assert files[0] == broken and files[2] == data and files[3] == helper
    assert list(mapping.values()) == ["test_c"] and "def test_b()" in files[1].data.decode()


def test_a_bom_a_coding_line_and_crlf_line_ends_survive_the_rewrite():
    source = "\ufeff# -*- coding: utf-8 -*-\r\ndef test_café():\r\n    assert 'é'\r\n".encode("utf-8")
    names = testnames.candidates([HiddenFile("tests/test_x.py", "644", source)])
    (written,), mapping = testnames.randomise([HiddenFile("tests/test_x.py", "644", source)], names)
    assert list(mapping.values()) == ["test_café"]
    assert written.data == source.replace("test_café".encode(), next(iter(mapping)).encode())


def test_the_first_grading_and_the_rerun_each_map_their_own_names_back():
    change = [HiddenFile("tests/test_p.py", "644", b"def test_p():\n    pass\n")]
    free = frozenset({"tests/test_p.py"})
    first = rerun.first_grading(change, free, {"test_p"})
    again = rerun.randomise(change, free, {"test_p"})
    assert first is not None and not first.second and first.seed is None and again.second
    assert first.functions.keys().isdisjoint(again.functions.keys())
    assert first.names.keys().isdisjoint(again.names.keys())  # each its own file name too
    assert rerun.first_grading(change, frozenset(), set()) is None  # nothing to rename: graded as the task has it
    assert [f.path for f in first.hidden] == ["tests/test_p.py", f"tests/{next(iter(first.names))}.py"]
    assert first.hidden[0].mode == hidden.DELETE  # nothing left at the task's path

    def raw(renaming: rerun.Renaming, status: str) -> dict:
        name = f"{renaming.hidden[-1].path}::{next(iter(renaming.functions))}"
        return {
            "apply": {"ok": True},
            "renamed": renaming.record(),
            "test": {"exit_code": 0 if status == "PASSED" else 1, "timed_out": False, "output_tail": "1 passed"},
            "results": {"format": "go", "tests": [{"name": name, "status": status}]},
        }

    ok = judging.regrade({**raw(first, "PASSED"), "rerun": raw(again, "PASSED")})
    assert ok.reward == 1.0 and ok.tests == [TestResult("tests/test_p.py::test_p", "PASSED")]
    assert "rerun_differences" not in ok.raw
    bad = judging.regrade({**raw(first, "PASSED"), "rerun": raw(again, "FAILED")})
    assert bad.raw["rerun_differences"] == ["reward 1 vs 0", "tests/test_p.py::test_p PASSED vs FAILED"]
    from envs.coding.flavor import CodingFlavor

    failed = judging.regrade(raw(first, "FAILED"))
    assert failed.reward == 0.0 and failed.tests == [TestResult("tests/test_p.py::test_p", "FAILED")]
    assert "tests not passed (1 of 1): tests/test_p.py::test_p FAILED" in CodingFlavor().explain(failed.raw)


def test_the_flag_is_on_in_strict_only_and_left_out_of_the_spec_while_off():
    """Off in none and vault, which so keep the spec hashes they always had."""
    from engine.config.compose import compose_config, to_typed
    from engine.models import RunSpec

    for mode, on in (("none", False), ("vault", False), ("strict", True)):
        integrity = to_typed(compose_config(["task=sample/last_page", f"integrity={mode}"])).integrity
        assert integrity.randomise_test_names is on
        spec = RunSpec(
            engine_version="x",
            task=None,
            env=None,
            flavor=None,
            agent=None,
            model=None,
            integrity=integrity,
            runtime=None,
            image={},
            timeouts=None,
            seed=0,
            attempt=0,
        )
        assert ("randomise_test_names" in spec.to_dict()["integrity"]) is on
