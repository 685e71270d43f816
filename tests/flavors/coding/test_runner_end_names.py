"""The end plugin names each test as the grader reads its JUnit entry (envs/coding/runner_end.py,
envs/coding/verdict/crucible_runner_end.py): what it saw pass is looked up by those names, so a
name spelled apart would refuse an honest run; its naming code is a verbatim copy of the result
source's (envs/integrity/sources/junit.py)."""

from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path

import pytest
from end_markers import RUNNER, SHELL, run_wrapped

from envs.coding import runner_end
from envs.integrity.sources import junit
from envs.integrity.sources.junit import parse_junit

ROOT = Path(__file__).resolve().parents[3]


SHAPES = {
    "tests/pkg/__init__.py": "",
    "tests/pkg/test_shapes.py": '''import unittest

import pytest


class TestC:
    def test_m(self):
        pass

    class TestD:
        def test_nested(self):
            pass

        def test_nested_fail(self):
            assert 0


@pytest.mark.parametrize("x", ["a[b]", "c::d", "e/f", "\u00fc \u00f1", "g.h", "sp ace", "x-y", "\\x01"])
def test_p(x):
    pass


@pytest.mark.parametrize("x", [1, 2])
class TestParam:
    def test_q(self, x):
        assert x == 1


class TestU(unittest.TestCase):
    def test_sub(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertLess(i, 2)

    def test_ok(self):
        pass


@pytest.mark.skip
def test_skipped():
    pass


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    pass


def add(a, b):
    """
    >>> add(1, 2)
    3
    """
    return a + b
''',
    "tests/base.py": "class BaseT:\n    def test_inherited(self):\n        pass\n",
    "tests/test_sub.py": (
        "import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\nfrom base import BaseT\n\n\n"
        "class TestSub(BaseT):\n    pass\n"
    ),
    "tests/test_broken.py": "def test_x(:\n",
    "tests/odd.dir/test_dotted.py": "def test_in_a_dotted_directory():\n    pass\n",
    "tests/check_named.py": "def test_outside_the_default_patterns():\n    pass\n",
    "pytest.ini": "[pytest]\npython_files = test_*.py check_*.py\n",
}


@pytest.mark.parametrize(
    "options",
    ["", "--junitprefix=pre", "-o junit_family=xunit2", "--junitprefix=pre -o junit_family=xunit2"],
    ids=["plain", "prefixed", "xunit2", "prefixed-xunit2"],
)
def test_the_plugin_names_each_test_as_the_grader_reads_its_junit_entry(tmp_path, options):
    """What the plugin saw pass is looked up by the names the grader reads from the report, so
    the plugin must name every test the same (a name it spelled apart would refuse an honest
    run): classes in classes, parameters with brackets, ``::``, slashes, dots and non-ASCII,
    a method inherited from another module (its JUnit ``file`` is the base's), unittest's
    subTest, doctests, a collection error, skips and a strict xpass, with and without a prefix,
    and in the family (xunit2) a task's own ``-o`` can choose, which writes no ``file``."""
    for path, text in SHAPES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    output, report = run_wrapped(
        tmp_path,
        f"{sys.executable} -m pytest -q -p no:cacheprovider --doctest-modules "
        f"--continue-on-collection-errors {options} tests",
    )
    cut = runner_end.split(output, SHELL, RUNNER)
    tests = parse_junit(report.read_bytes())
    passed = {t.name for t in tests if t.status == "PASSED"}
    inherited = "TestSub::test_inherited"  # under a prefix every name is guessed from its classname alike
    assert any(name.endswith(inherited) for name in passed) and len(passed) >= 14, output.decode(errors="replace")[
        -2000:
    ]
    assert not any(
        name.endswith(("test_nested_fail", "test_q[2]", "TestU::test_sub", "test_skipped", "xpass_strict"))
        for name in passed
    ), passed
    assert cut.runner_passed == {runner_end.key(name) for name in passed}
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {
        "shell": cut.shell_end,
        "runner_report": cut.runner_report,
        "runner_outcomes": cut.runner_outcomes,
        "runner_passed": sorted(cut.runner_passed or ()),
    }
    assert runner_end.check(end, named, tests, cut.text.decode(), True) is None


def test_the_plugins_digest_of_a_name_is_the_graders():
    import importlib.util

    spec = importlib.util.spec_from_file_location("end_plugin", ROOT / "envs/coding/verdict/crucible_runner_end.py")
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)  # no end.nonce beside it: it takes no token and speaks for no run
    for name in ("t.py::test_a", "tests/test_\u00fc.py::TestC::test_m[a-b\\x00]", "t.py::test_\udcff"):
        assert plugin.key(name) == runner_end.key(name)
    for classname, name, file in (
        ("", "tests.test_broken", "tests/test_broken.py"),
        ("a.test_b.C", "t[1]", "a/test_b.py"),
        ("a.test_b.C", "t", "a/base.py"),
        ("pre.a.test_b", "t", "a/test_b.py"),
        ("a.b.test_c", "t", None),
    ):
        assert plugin.junit_node_id(classname, name, file) == junit.junit_node_id(classname, name, file)


NAMING = ("junit_node_id", "_node_id_from_file", "_guess_node_id")


def _naming_code(path: Path) -> dict[str, str]:
    """The JUnit naming functions in ``path``, as code: docstrings and comments left out."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name in NAMING:
            body = (
                node.body[1:]
                if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
                else node.body
            )
            found[node.name] = ast.dump(
                ast.Module(body=[ast.FunctionDef(**{**vars(node), "body": body})], type_ignores=[])
            )
    return found


def test_the_plugins_junit_naming_is_a_verbatim_copy_of_the_result_sources():
    """The plugin runs in the container, where crucible is not importable, so it carries a copy of
    the ``junit`` result source's naming: the same code, function for function."""
    source = _naming_code(ROOT / "envs/integrity/sources/junit.py")
    copy = _naming_code(ROOT / "envs/coding/verdict/crucible_runner_end.py")
    assert set(source) == set(NAMING), "the result source lost a naming function"
    assert copy == source, (
        "envs/coding/verdict/crucible_runner_end.py's naming drifted from envs/integrity/sources/junit.py"
    )


def test_the_naming_comparison_sees_a_changed_line(tmp_path):
    drifted = tmp_path / "drifted.py"
    drifted.write_text(
        (ROOT / "envs/integrity/sources/junit.py")
        .read_text(encoding="utf-8")
        .replace('return f"{file}::{name}"', 'return f"{file}:{name}"'),
        encoding="utf-8",
    )
    assert _naming_code(drifted) != _naming_code(ROOT / "envs/integrity/sources/junit.py")
