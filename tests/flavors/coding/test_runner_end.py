"""No pass from text the tested code can write (envs/coding/runner_end.py, grader.py): the
output cut at pytest's own end and the shell's, the report checked against the digest pytest
printed and against its own summary, the canary judged from the named results, and text-only
verdicts refused under strict, at plan time in one line and in grading.

The end markers' shell and plugin run for real here (bash and a real pytest in a temporary
directory); the Docker runs are in test_attacks_ordinary.py."""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from attacks.ordinary import FORGE_WITH_PYTESTS_OBJECTS

from engine.models import TestResult
from envs.coding import judging, runner_end
from envs.coding.judging import verdict_from_test_result
from envs.integrity.sources import junit
from envs.integrity.sources.junit import parse_junit

ROOT = Path(__file__).resolve().parents[3]
SHELL, RUNNER = "a" * 32, "b" * 32
SUITE = """
import atexit, os

def _late():
    print("=== 3 passed in 0.01s ===", flush=True)  # forged, after pytest's end

atexit.register(_late)

def test_one():
    assert 1 + 1 == 2

def test_two():
    assert 1 + 1 == 3
"""


def run_wrapped(
    tmp_path: Path, command: str, pytest_report: bool = True, hide_running_test: bool = False, one_process: bool = False
) -> tuple[bytes, Path]:
    """The tester's script as grading builds it, run by bash with the tokens on its stdin."""
    results = tmp_path / "results"
    script = (
        'IFS= read -r go || exit 97\n[ "$go" = go ] || exit 97\n'
        "read -r crucible_end crucible_runner || true\nexec </dev/null 2>&1\n"
        + runner_end.wrap(
            command,
            str(results) if pytest_report else None,
            hide_running_test=hide_running_test,
            one_process=one_process,
        )
    )
    done = subprocess.run(
        ["bash", "-c", script],
        input=f"go\n{SHELL} {RUNNER}\n".encode(),
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )
    return done.stdout, results / "junit.xml"


def test_pytests_own_end_cuts_what_an_exit_hook_prints_after_it(tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE)
    output, report = run_wrapped(tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider test_suite.py")
    cut = runner_end.split(output, SHELL, RUNNER)
    assert cut.shell_end and cut.runner_report == hashlib.sha256(report.read_bytes()).hexdigest()
    assert b"1 failed, 1 passed" in cut.text and b"3 passed" not in cut.text
    assert b"=== 3 passed in 0.01s ===" in cut.after  # recorded, not judged
    assert runner_end.summary_counts(cut.text.decode()) == {"failed": 1, "passed": 1}
    assert not (tmp_path / "results" / "end.nonce").exists()  # the token was taken before any test ran


def test_a_report_rewritten_after_pytests_end_is_tampered(tmp_path):
    (tmp_path / "test_suite.py").write_text(
        SUITE.replace(
            'print("=== 3 passed in 0.01s ===", flush=True)',
            'import glob; [open(p, "a").write("<!-- later -->") for p in glob.glob("results/junit.xml")]',
        )
    )
    output, report = run_wrapped(tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider test_suite.py")
    cut = runner_end.split(output, SHELL, RUNNER)
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {"shell": cut.shell_end, "runner_report": cut.runner_report}
    assert runner_end.check(end, named, [], cut.text.decode(), False) == runner_end.TAMPERED_REPORT


def test_a_report_cut_short_after_pytests_end_is_tampered_not_merely_unreadable():
    """Truncated by the code under test after pytest's end, the report no longer parses: that it
    changed is the finding (before this, the run read as "not well-formed XML")."""
    printed = hashlib.sha256(b"<testsuites/>").hexdigest()
    named = {
        "format": "pytest",
        "error": "junit report: not well-formed XML (no element found: line 1, column 0)",
        "sha256": hashlib.sha256(b"").hexdigest(),
    }
    assert runner_end.check({"runner_report": printed}, named, None, "", False) == runner_end.TAMPERED_REPORT
    # The same error with the report pytest vouched for is only what it says.
    assert runner_end.check({"runner_report": printed}, {**named, "sha256": printed}, None, "", False) is None


def test_output_after_the_shell_end_is_cut_and_a_command_exit_ends_only_its_subshell(tmp_path):
    output, _ = run_wrapped(tmp_path, "echo honest; (sleep 0.3; echo '5 passed') & exit 3", pytest_report=False)
    cut = runner_end.split(output, SHELL, RUNNER)
    assert cut.shell_end and cut.runner_report is None
    assert cut.text.strip() == b"honest"
    assert output.endswith(f"{SHELL} end 3\n".encode()) or b"5 passed" in cut.after


ASKS_ITS_NAME = """
import os

def test_the_running_tests_id_is_not_published():
    assert "PYTEST_CURRENT_TEST" not in os.environ, os.environ["PYTEST_CURRENT_TEST"]
"""


@pytest.mark.parametrize("hidden", [True, False], ids=["hidden", "published"])
def test_strict_keeps_the_running_tests_id_from_the_code_under_test(tmp_path, hidden):
    """pytest publishes the running test's id in the environment, where code under test can
    read which hidden case asks (the ``aware-test-name-unnamed`` attack); under strict the end
    plugin turns that off, and the test still runs and reports as ever."""
    (tmp_path / "test_name.py").write_text(ASKS_ITS_NAME)
    output, report = run_wrapped(
        tmp_path, "python3 -m pytest -q -p no:cacheprovider test_name.py", hide_running_test=hidden
    )
    results = {r.name: r.status for r in parse_junit(report.read_bytes())}
    assert results == {"test_name.py::test_the_running_tests_id_is_not_published": "PASSED" if hidden else "FAILED"}, (
        output.decode(errors="replace")[-2000:]
    )
    assert b"runner-end" in output


@pytest.mark.parametrize("hidden", [True, False], ids=["hidden", "published"])
def test_the_running_tests_id_is_kept_from_pytest_xdists_workers_too(tmp_path, hidden):
    """Under pytest-xdist the tests run in worker processes, which load the end plugin but find
    its token taken: the controller tells each worker to hide the id as it starts it. The
    plugin's record of what passed is made in the controller, from the workers' reports."""
    (tmp_path / "test_name.py").write_text(ASKS_ITS_NAME + "\n\ndef test_two():\n    pass\n")
    output, report = run_wrapped(
        tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider -n 2 test_name.py", hide_running_test=hidden
    )
    tests = parse_junit(report.read_bytes())
    assert {r.name: r.status for r in tests} == {
        "test_name.py::test_the_running_tests_id_is_not_published": "PASSED" if hidden else "FAILED",
        "test_name.py::test_two": "PASSED",
    }, output.decode(errors="replace")[-2000:]
    assert b"bringing up nodes" in output  # it did run in workers
    cut = runner_end.split(output, SHELL, RUNNER)
    assert cut.runner_passed == {runner_end.key(t.name) for t in tests if t.status == "PASSED"}
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {
        "shell": cut.shell_end,
        "runner_report": cut.runner_report,
        "runner_outcomes": cut.runner_outcomes,
        "runner_passed": sorted(cut.runner_passed or ()),
    }
    assert runner_end.check(end, named, tests, cut.text.decode(), True) is None


def test_markers_without_the_tokens_are_text():
    forged = f"x\n{'c' * 32} runner-end none\n1 passed\n{'d' * 32} end 0\n".encode()
    cut = runner_end.split(forged, SHELL, RUNNER)
    assert (cut.text, cut.after, cut.shell_end, cut.runner_report) == (forged, b"", False, None)


@pytest.mark.parametrize(
    "tests, summary, problem",
    [
        ([TestResult("a", "PASSED"), TestResult("b", "PASSED")], {"passed": 1, "failed": 1}, "2 passed"),
        ([TestResult("a", "PASSED")], {"passed": 1, "failed": 1}, "1 failed or errors"),
        ([TestResult("a", "ERROR"), TestResult("b", "PASSED")], {"passed": 2, "failed": 1, "error": 1}, None),
        ([TestResult("a", "PASSED"), TestResult("b", "PASSED")], {"passed": 1, "xpassed": 1}, None),
        ([TestResult("a", "PASSED")], None, None),
    ],
)
def test_the_report_is_checked_against_pytests_own_summary(tests, summary, problem):
    found = runner_end.counts(tests, summary, "pytest's own summary")
    assert (found is None) if problem is None else (problem in str(found)), found


def test_a_report_and_summary_forged_with_pytests_own_objects_disagree_with_the_plugins_count(tmp_path):
    """A review's attack: a plugin of the code under test's (loaded by an entry point, a ``-p``)
    rewrites the JUnit report in ``pytest_sessionfinish`` (before pytest's end, so the digest
    vouches for it) and moves the failures into the passes of ``terminalreporter.stats``, so
    pytest's printed summary agrees with the report and the exit code is 0. The end plugin counted
    each outcome as the test reported, first of every hook: that count disagrees."""
    (tmp_path / "test_suite.py").write_text(SUITE.replace("atexit.register(_late)", ""))
    (tmp_path / "forger.py").write_text(FORGE_WITH_PYTESTS_OBJECTS)
    output, report = run_wrapped(tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider -p forger test_suite.py")
    cut = runner_end.split(output, SHELL, RUNNER)
    tests = parse_junit(report.read_bytes())
    assert {t.status for t in tests} == {"PASSED"} and len(tests) == 2, output.decode(errors="replace")[-2000:]
    assert runner_end.summary_counts(cut.text.decode()) == {"passed": 2}  # the printed summary agrees with it
    assert output.endswith(f"{SHELL} end 0\n".encode())
    assert cut.runner_outcomes == {"failed": 1, "passed": 1}
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {"shell": cut.shell_end, "runner_report": cut.runner_report, "runner_outcomes": cut.runner_outcomes}
    assert (
        runner_end.check(end, named, tests, cut.text.decode(), True)
        == "tampered: the report has 2 passed, crucible's count as the tests reported 1"
    )
    # without the plugin's count (a run stored before it), the summary was the only witness, and it lied
    stored_before = {k: v for k, v in end.items() if k != "runner_outcomes"}
    assert runner_end.check(stored_before, named, tests, cut.text.decode(), True) is None


SWAP_STATUSES = """import re


def pytest_sessionfinish(session):
    path = session.config.option.xmlpath
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    failure = re.search(r"<failure\\b.*?</failure>", text, flags=re.S).group(0)
    text = text.replace(failure, "")
    # the failure moves to the test that passed: every count stays as pytest counted it
    text = re.sub(r'(<testcase [^>]*name="test_one"[^>]*?)\\s*/>', lambda m: m.group(1) + ">" + failure + "</testcase>",
                  text)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
"""


def test_a_failure_swapped_with_a_pass_keeps_every_count_and_is_named_by_the_plugins_record(tmp_path):
    """A review's gap in the count: compared in total, a plugin that moves a listed test's
    failure onto a test that passed keeps the passes and the failures as counted. The end plugin
    names the tests it saw pass (short digests of their names as the grader reads them), so the
    report's PASSED for another is refused, under the name the task knows it by."""
    (tmp_path / "test_suite.py").write_text(SUITE.replace("atexit.register(_late)", ""))
    (tmp_path / "swapper.py").write_text(SWAP_STATUSES)
    output, report = run_wrapped(
        tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider -p swapper test_suite.py"
    )
    cut = runner_end.split(output, SHELL, RUNNER)
    tests = parse_junit(report.read_bytes())
    assert {t.name: t.status for t in tests} == {
        "test_suite.py::test_one": "FAILED",
        "test_suite.py::test_two": "PASSED",
    }, output.decode(errors="replace")[-2000:]
    assert cut.runner_outcomes == {"failed": 1, "passed": 1}
    assert cut.runner_passed == {runner_end.key("test_suite.py::test_one")}
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {"shell": cut.shell_end, "runner_report": cut.runner_report, "runner_outcomes": cut.runner_outcomes}
    assert runner_end.check(end, named, tests, cut.text.decode(), True) is None  # the counts alone agree
    end["runner_passed"] = sorted(cut.runner_passed)
    forged = "tampered: the report has {} PASSED, and crucible's record of the run has no pass of it"
    assert runner_end.check(end, named, tests, cut.text.decode(), True) == forged.format("test_suite.py::test_two")
    # named as the task knows it (a re-run's random names mapped back), looked up as pytest ran it
    told = [TestResult(t.name.replace("test_suite", "test_task"), t.status) for t in tests]
    assert runner_end.check(end, named, told, cut.text.decode(), True, as_reported=tests) == forged.format(
        "test_task.py::test_two"
    )
    # a pass written under the task's name beside the failure under the random one: never ran
    made_up = [TestResult("test_suite.py::test_one", "FAILED"), TestResult("test_task.py::test_two", "PASSED")]
    assert runner_end.check(end, named, made_up, cut.text.decode(), True) == forged.format("test_task.py::test_two")


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


OUTRANKER = """
import pytest


class _Flip:
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report):
        if report.failed:
            report.outcome = "passed"
        yield


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.pluginmanager.register(_Flip(), "flip")
"""


def test_a_wrapper_registered_after_the_count_that_runs_before_it_is_tampered(tmp_path):
    """A review's attack on the count: pluggy calls the last registered first, so a wrapper tried
    first and registered after the end plugin's counter changed each report before the count saw
    it. The counter checks that it is still the outermost at every report."""
    (tmp_path / "test_suite.py").write_text(SUITE.replace("atexit.register(_late)", ""))
    (tmp_path / "outranker.py").write_text(OUTRANKER)
    output, report = run_wrapped(
        tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider -p outranker test_suite.py"
    )
    cut = runner_end.split(output, SHELL, RUNNER)
    tests = parse_junit(report.read_bytes())
    assert {t.status for t in tests} == {"PASSED"}, output.decode(errors="replace")[-2000:]
    assert cut.runner_outcomes == {"outranked": 1, "passed": 2}
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {"shell": cut.shell_end, "runner_report": cut.runner_report, "runner_outcomes": cut.runner_outcomes}
    assert runner_end.check(end, named, tests, cut.text.decode(), True).startswith("tampered: a hook wrapper")


IN_A_WORKER = """import gc


class _Helper:
    pass


def _flip(self, report):
    if report.failed:
        report.outcome, report.longrepr = "passed", None


_flip.tryfirst = True
setattr(_Helper, "py" + "test_run" + "test_log" + "report", _flip)  # no hook named in the source

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Con" + "fig" and hasattr(_obj, "plugin" + "manager"):
        if hasattr(_obj, "worker" + "input"):  # only in an xdist worker, where no count is
            getattr(_obj, "plugin" + "manager").register(_Helper(), "helper")
        break


def parse(text):
    return int(text)
"""


@pytest.mark.parametrize("one_process", [True, False], ids=["one-process", "distributed"])
def test_xdists_workers_do_not_run_the_tests_where_no_count_sees_their_reports(tmp_path, one_process):
    """A review's attack: under pytest-xdist (``-n 2``) the tests ran in worker processes, where
    the code under test registered a hook (on the worker's Config, found among live objects,
    its name built at run time) that made each failure a pass before the worker sent the report
    on: the count, pytest's summary and the report all had the pass, and every check agreed.
    Under strict (``tests_in_one_process``) the end plugin turns the distribution off: the tests
    run in its own process, counted first."""
    (tmp_path / "hikelog").mkdir()
    (tmp_path / "hikelog" / "__init__.py").write_text(IN_A_WORKER)
    (tmp_path / "test_parse.py").write_text(
        "from hikelog import parse\n\n\ndef test_int():\n"
        "    assert parse('3') == 3\n\n\ndef test_float():\n"
        "    assert parse('1.5') == 1.5\n"
    )
    output, report = run_wrapped(
        tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider -n 2 test_parse.py", one_process=one_process
    )
    cut = runner_end.split(output, SHELL, RUNNER)
    tests = parse_junit(report.read_bytes())
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {
        "shell": cut.shell_end,
        "runner_report": cut.runner_report,
        "runner_outcomes": cut.runner_outcomes,
        "runner_passed": sorted(cut.runner_passed or ()),
    }
    assert runner_end.check(end, named, tests, cut.text.decode(), True) is None
    if one_process:
        assert {t.name: t.status for t in tests} == {
            "test_parse.py::test_float": "FAILED",
            "test_parse.py::test_int": "PASSED",
        }, output.decode(errors="replace")[-2000:]
        assert cut.runner_outcomes == {"failed": 1, "passed": 1} and b"bringing up nodes" not in output
    else:  # what it won: every check agrees with the forged pass
        assert {t.status for t in tests} == {"PASSED"} and b"bringing up nodes" in output, output.decode(
            errors="replace"
        )[-2000:]


def test_the_plugins_count_matches_an_honest_run_with_skips_xfails_and_errors(tmp_path):
    (tmp_path / "test_mixed.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef broken():\n    raise RuntimeError\n\n"
        "def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n\ndef test_error(broken):\n    pass\n\n"
        "@pytest.mark.skip\ndef test_skipped():\n    pass\n\n@pytest.mark.xfail\ndef test_xfail():\n    assert 0\n\n"
        "@pytest.mark.xfail\ndef test_xpass():\n    pass\n"
    )
    output, report = run_wrapped(tmp_path, f"{sys.executable} -m pytest -q -p no:cacheprovider test_mixed.py")
    cut = runner_end.split(output, SHELL, RUNNER)
    assert cut.runner_outcomes == {"error": 1, "failed": 1, "passed": 1, "skipped": 1, "xfailed": 1, "xpassed": 1}
    assert runner_end.summary_counts(cut.text.decode()) == {
        "failed": 1,
        "passed": 1,
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 1,
        "error": 1,
    }
    tests = parse_junit(report.read_bytes())
    named = {"format": "pytest", "tests": [], "sha256": hashlib.sha256(report.read_bytes()).hexdigest()}
    end = {"shell": cut.shell_end, "runner_report": cut.runner_report, "runner_outcomes": cut.runner_outcomes}
    assert runner_end.check(end, named, tests, cut.text.decode(), True) is None
    assert cut.runner_passed == {runner_end.key(f"test_mixed.py::test_{n}") for n in ("ok", "xpass")}
    end["runner_passed"] = sorted(cut.runner_passed)
    assert runner_end.check(end, named, tests, cut.text.decode(), True) is None


def test_a_runner_end_printed_before_the_plugin_counted_still_reads():
    digest = "c" * 64
    for line, outcomes in (
        (f"{RUNNER} runner-end {digest}", None),
        (f"{RUNNER} runner-end {digest} outcomes=", {}),
        (f"{RUNNER} runner-end {digest} outcomes=failed:2,passed:10", {"failed": 2, "passed": 10}),
    ):
        cut = runner_end.split(f"x\n{line}\nlate\n{SHELL} end 0\n".encode(), SHELL, RUNNER)
        assert (cut.text, cut.runner_report, cut.runner_outcomes, cut.after) == (b"x", digest, outcomes, b"late")
        assert cut.runner_passed is None
    line = f"{RUNNER} runner-end {digest} outcomes=failed:2 passed={'1' * 10},{'2' * 10}"
    cut = runner_end.split(f"x\n{line}\n\n{SHELL} end 1\n".encode(), SHELL, RUNNER)
    assert cut.runner_passed == {"1" * 10, "2" * 10} and cut.runner_outcomes == {"failed": 2}


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
