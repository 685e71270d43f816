"""Result sources (envs/integrity/sources/): named test results read from real pytest JUnit
reports, a go test -json stream, and the SWE-bench Pro parser format; one result per name, the worst."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity.sources import gojson, junit, parser
from envs.integrity.sources.base import merge_worst
from envs.integrity.sources.gojson import parse_go_json
from envs.integrity.sources.junit import parse_junit
from envs.integrity.sources.parser import parse_parser_output

# --- a real pytest run --------------------------------------------------------------------

SUITE = {
    "pytest.ini": "[pytest]\n",  # pins the rootdir here, whatever lies above tmp_path
    "tests/__init__.py": "",
    "tests/base.py": """
        class Base:
            def test_inherited(self):
                pass
    """,
    "tests/test_mod.py": """
        import pytest

        from tests.base import Base

        def test_pass():
            pass

        def test_fail():
            assert 1 == 2

        def test_skip():
            pytest.skip("not here")

        @pytest.mark.xfail(reason="known bug")
        def test_xfail():
            assert False

        @pytest.mark.xfail(strict=True)
        def test_xpass_strict():
            pass

        @pytest.mark.xfail
        def test_xpass():
            pass

        @pytest.mark.parametrize("a,b", [(1, 2), ("a", "b b"), ("é", "::x[y]")],
                                 ids=["a-b", "sp ace", "ünï::[x]"])
        def test_param(a, b):
            pass

        def test_ünïcode():
            pass

        class TestC:
            def test_m(self):
                pass

        class TestOuter:
            class TestInner:
                def test_x(self):
                    pass

        class TestSub(Base):  # its test method is defined in tests/base.py
            pass

        @pytest.fixture
        def broken():
            raise RuntimeError("setup boom")

        def test_setup_error(broken):
            pass

        @pytest.fixture
        def bad_teardown():
            yield
            raise RuntimeError("teardown boom")

        def test_teardown_error(bad_teardown):
            pass

        def test_fail_and_teardown(bad_teardown):
            assert False
    """,
    "tests/test_broken.py": """
        import no_such_module_anywhere

        def test_never():
            pass
    """,
    "pkg/__init__.py": "",
    "pkg/sub/__init__.py": "",
    "pkg/sub/test_y.py": """
        def test_g():
            pass
    """,
    "pkg/sub/thing_test.py": """
        class TestK:
            def test_k(self):
                pass
    """,
}

EXPECTED = {
    "tests/test_broken.py": "ERROR",  # collection error: the module fails to import
    "tests/test_mod.py::test_pass": "PASSED",
    "tests/test_mod.py::test_fail": "FAILED",
    "tests/test_mod.py::test_skip": "SKIPPED",
    "tests/test_mod.py::test_xfail": "SKIPPED",  # xfailed
    "tests/test_mod.py::test_xpass_strict": "FAILED",
    "tests/test_mod.py::test_xpass": "PASSED",  # non-strict xpass
    "tests/test_mod.py::test_param[a-b]": "PASSED",
    "tests/test_mod.py::test_param[sp ace]": "PASSED",
    "tests/test_mod.py::test_param[\\xfcn\\xef::[x]]": "PASSED",  # pytest itself escapes non-ASCII ids
    "tests/test_mod.py::test_ünïcode": "PASSED",  # ...but not function names
    "tests/test_mod.py::TestC::test_m": "PASSED",
    "tests/test_mod.py::TestOuter::TestInner::test_x": "PASSED",
    "tests/test_mod.py::TestSub::test_inherited": "PASSED",
    "tests/test_mod.py::test_setup_error": "ERROR",
    "tests/test_mod.py::test_teardown_error": "ERROR",  # passed, then its teardown failed
    "tests/test_mod.py::test_fail_and_teardown": "ERROR",  # reported twice: failure, then teardown error
    "pkg/sub/test_y.py::test_g": "PASSED",
    "pkg/sub/thing_test.py::TestK::test_k": "PASSED",
}


def _pytest(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # no outer addopts
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the venv's plugins (hydra, anyio) only cost startup time
    env["PYTHONIOENCODING"] = "utf-8"  # the listing names test_ünïcode, whatever the locale
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(root),
            "--continue-on-collection-errors",
            *args,
            "tests",
            "pkg",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        encoding="utf-8",
    )


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("graded_suite")
    for rel, body in SUITE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def pytest_runs(suite) -> tuple[dict[str, bytes], set[str]]:
    """The suite run for real, once per junit_family, and the node ids pytest collects in it
    (the three runs at once: each is mostly interpreter startup)."""
    procs = {
        family: _pytest(suite, f"--junitxml={suite / family}.xml", "-o", f"junit_family={family}")
        for family in ("xunit1", "xunit2")
    }
    procs["collect"] = _pytest(suite, "--collect-only", "-q")
    outputs = {}
    try:
        for key, proc in procs.items():
            outputs[key] = proc.communicate(timeout=120)[0]
    finally:
        for proc in procs.values():  # none outlives the fixture, whatever failed
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for family in ("xunit1", "xunit2"):
        assert procs[family].returncode == 1, f"the suite has failures, so pytest exits 1:\n{outputs[family]}"
    reports = {family: (suite / f"{family}.xml").read_bytes() for family in ("xunit1", "xunit2")}
    listing = outputs["collect"]
    collected = {line for line in listing.splitlines() if "::" in line and not line.startswith(" ")}
    return reports, collected


@pytest.fixture(scope="module")
def junit_reports(pytest_runs) -> dict[str, bytes]:
    return pytest_runs[0]


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_junit_report_names_every_test_by_pytest_node_id(junit_reports, family):
    got = {r.name: r.status for r in parse_junit(junit_reports[family])}
    assert got == EXPECTED, f"{family}: name -> status differs from pytest's own outcome"


def test_junit_names_are_the_node_ids_pytest_collects(pytest_runs):
    reports, collected = pytest_runs
    assert len(collected) == len(EXPECTED) - 1, "pytest collected every test but the broken module's"
    for family, report in reports.items():
        names = {r.name for r in parse_junit(report)}
        assert names - {"tests/test_broken.py"} == collected, f"{family}: a name is not pytest's node id"


def test_junit_results_are_sorted_and_unique(junit_reports):
    names = [r.name for r in parse_junit(junit_reports["xunit1"])]
    assert names == sorted(set(names)), "one result per name, sorted, so a report always reads the same"


# --- hand-written JUnit: shapes a real run above does not produce ---------------------------


def _xml(cases: str, root: str = "testsuites") -> bytes:
    inner = f'<testsuite name="pytest" tests="1">{cases}</testsuite>'
    body = inner if root == "testsuite" else f"<{root}>{inner}</{root}>"
    return f'<?xml version="1.0" encoding="utf-8"?>{body}'.encode()


def test_junit_single_testsuite_root_and_several_suites_are_read():
    single = _xml('<testcase classname="t.test_a" name="test_1"/>', root="testsuite")
    assert parse_junit(single) == [TestResult("t/test_a.py::test_1", "PASSED")], "a bare <testsuite> root is read"
    several = (
        b'<testsuites><testsuite><testcase classname="t.test_a" name="test_1"/></testsuite>'
        b'<testsuite><testcase classname="t.test_b" name="test_2"><skipped/></testcase></testsuite></testsuites>'
    )
    assert parse_junit(several) == [
        TestResult("t/test_a.py::test_1", "PASSED"),
        TestResult("t/test_b.py::test_2", "SKIPPED"),
    ], "every suite's cases are read"


@pytest.mark.parametrize(
    ("classname", "name", "expected"),
    [
        ("a.b.test_mod.TestC", "test_m", "a/b/test_mod.py::TestC::test_m"),
        ("a.b.mod_test", "test_q", "a/b/mod_test.py::test_q"),
        ("tests.test_x.TestOuter.TestInner", "test_i[1-2]", "tests/test_x.py::TestOuter::TestInner::test_i[1-2]"),
        ("lib.checks", "check_x", "lib/checks.py::check_x"),  # no test-like component: all of it is the module
        ("", "tests.test_broken", "tests/test_broken.py"),  # collection error
    ],
)
def test_junit_without_file_attribute_guesses_the_module(classname, name, expected):
    report = _xml(f'<testcase classname="{classname}" name="{name}"/>')
    assert [r.name for r in parse_junit(report)] == [expected], "xunit2's documented best-effort node id"


def test_junit_file_attribute_of_another_module_is_not_trusted():
    # An inherited test method: xunit1's file is where the method is defined, not the node's module.
    report = _xml('<testcase classname="tests.test_x.TestSub" name="test_base" file="tests/base.py" line="3"/>')
    assert [r.name for r in parse_junit(report)] == ["tests/test_x.py::TestSub::test_base"], (
        "a file that is not a prefix of classname falls back to the guess"
    )


def test_junit_file_attribute_gives_paths_a_guess_cannot():
    report = _xml('<testcase classname="my.dir.checks_x.Case" name="t" file="my.dir/checks_x.py"/>')
    assert [r.name for r in parse_junit(report)] == ["my.dir/checks_x.py::Case::t"], (
        "a dotted directory and a non-default module name come out right from xunit1's file"
    )


def test_junit_odd_names_are_kept_verbatim():
    report = _xml('<testcase classname="tests.test_x" name="test_a[x::y z-ü-&lt;&amp;&gt;]" file="tests/test_x.py"/>')
    assert [r.name for r in parse_junit(report)] == ["tests/test_x.py::test_a[x::y z-ü-<&>]"], (
        "unicode, '::', brackets, spaces and XML-escaped characters survive as pytest wrote them"
    )


def test_junit_worst_child_decides_a_case_with_several():
    report = _xml('<testcase classname="t.test_a" name="test_1"><skipped/><error message="teardown"/></testcase>')
    assert parse_junit(report) == [TestResult("t/test_a.py::test_1", "ERROR")], "error outranks skipped"


@pytest.mark.parametrize(
    "declaration",
    [
        b'<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>',
        b'<!DOCTYPE x SYSTEM "file:///etc/passwd">',
        b"<!doctype testsuites>",
        b'<!ENTITY x "y">',
    ],
)
def test_junit_with_a_dtd_or_entity_is_refused(declaration):
    report = b'<?xml version="1.0"?>' + declaration + b"<testsuites><testsuite/></testsuites>"
    with pytest.raises(GradeError, match="DOCTYPE or ENTITY"):
        parse_junit(report)


@pytest.mark.parametrize("codec", ["utf-16", "utf-32", "cp500"])
def test_junit_in_another_encoding_cannot_hide_a_dtd(codec):
    # A search of the bytes would not see "<!DOCTYPE" in these; the report must be UTF-8 or nothing.
    body = (
        '<!DOCTYPE x [<!ENTITY e "boom">]>'
        '<testsuites><testsuite><testcase classname="t" name="&e;"/></testsuite></testsuites>'
    ).encode(codec)
    report = f'<?xml version="1.0" encoding="{codec}"?>'.encode() + body
    with pytest.raises(GradeError, match="junit report: not UTF-8"):
        parse_junit(report)


def test_junit_encoding_declaration_and_bom_do_not_change_how_it_reads():
    report = (
        '\ufeff<?xml version="1.0" encoding="latin-1"?><testsuites><testsuite>'
        '<testcase classname="t.test_a" name="test_é"/></testsuite></testsuites>'
    )
    assert parse_junit(report.encode("utf-8")) == [TestResult("t/test_a.py::test_é", "PASSED")], (
        "a UTF-8 BOM is dropped and the declared encoding ignored: UTF-8 is read as UTF-8"
    )


def test_junit_over_the_size_limit_is_refused(monkeypatch):
    monkeypatch.setattr(junit, "MAX_REPORT_BYTES", 100)
    report = _xml('<testcase classname="t.test_a" name="test_1"/>' * 5)
    with pytest.raises(GradeError, match="over the 100-byte limit"):
        parse_junit(report)


@pytest.mark.parametrize(
    ("report", "message"),
    [
        (b"<testsuites><testsuite>", "not well-formed XML"),
        (b"", "not well-formed XML"),
        (b"<html><testcase name='x'/></html>", "root element is <html>"),
        (b"<testsuite><testcase classname='t'/></testsuite>", "testcase #0 has no name attribute"),
    ],
)
def test_junit_malformed_report_raises_naming_the_problem(report, message):
    with pytest.raises(GradeError, match=message) as caught:
        parse_junit(report)
    assert "\n" not in str(caught.value), "a GradeError message is one line"


# --- go test -json ------------------------------------------------------------------------

# A recorded stream's shape (go <= 1.23, as the grader captures it: stdout and stderr in one
# stream), written out by hand: the go command's plain-text build errors come first, then
# test2json events. Packages: calc (pass, a failing subtest, a skip), util (the same TestAdd
# name, failing), broken (build failure), server (timed out mid-test: no terminal action),
# exitcode (every test passed, then TestMain exited 1), cmd (no test files).
GO_STREAM = r"""
# example.com/m/broken
broken/broken.go:7:9: undefined: missingFunc
{"Time":"2024-05-02T10:15:01.100000000Z","Action":"start","Package":"example.com/m/broken"}
{"Time":"2024-05-02T10:15:01.100100000Z","Action":"output","Package":"example.com/m/broken","Output":"FAIL\texample.com/m/broken [build failed]\n"}
{"Time":"2024-05-02T10:15:01.100200000Z","Action":"fail","Package":"example.com/m/broken","Elapsed":0}
{"Time":"2024-05-02T10:15:01.200000000Z","Action":"start","Package":"example.com/m/calc"}
{"Time":"2024-05-02T10:15:01.210000000Z","Action":"run","Package":"example.com/m/calc","Test":"TestAdd"}
{"Time":"2024-05-02T10:15:01.210100000Z","Action":"output","Package":"example.com/m/calc","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Time":"2024-05-02T10:15:01.210200000Z","Action":"output","Package":"example.com/m/calc","Test":"TestAdd","Output":"--- PASS: TestAdd (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.210300000Z","Action":"pass","Package":"example.com/m/calc","Test":"TestAdd","Elapsed":0}
{"Time":"2024-05-02T10:15:01.211000000Z","Action":"run","Package":"example.com/m/calc","Test":"TestDiv"}
{"Time":"2024-05-02T10:15:01.211100000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv","Output":"=== RUN   TestDiv\n"}
{"Time":"2024-05-02T10:15:01.211200000Z","Action":"run","Package":"example.com/m/calc","Test":"TestDiv/case_1"}
{"Time":"2024-05-02T10:15:01.211300000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv/case_1","Output":"=== RUN   TestDiv/case_1\n"}
{"Time":"2024-05-02T10:15:01.211400000Z","Action":"run","Package":"example.com/m/calc","Test":"TestDiv/by_zero"}
{"Time":"2024-05-02T10:15:01.211500000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv/by_zero","Output":"=== RUN   TestDiv/by_zero\n"}
{"Time":"2024-05-02T10:15:01.211600000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv/by_zero","Output":"    calc_test.go:31: got 0, want error\n"}
{"Time":"2024-05-02T10:15:01.211700000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv","Output":"--- FAIL: TestDiv (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.211800000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv/case_1","Output":"    --- PASS: TestDiv/case_1 (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.211900000Z","Action":"pass","Package":"example.com/m/calc","Test":"TestDiv/case_1","Elapsed":0}
{"Time":"2024-05-02T10:15:01.212000000Z","Action":"output","Package":"example.com/m/calc","Test":"TestDiv/by_zero","Output":"    --- FAIL: TestDiv/by_zero (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.212100000Z","Action":"fail","Package":"example.com/m/calc","Test":"TestDiv/by_zero","Elapsed":0}
{"Time":"2024-05-02T10:15:01.212200000Z","Action":"fail","Package":"example.com/m/calc","Test":"TestDiv","Elapsed":0}
{"Time":"2024-05-02T10:15:01.213000000Z","Action":"run","Package":"example.com/m/calc","Test":"TestSlow"}
{"Time":"2024-05-02T10:15:01.213100000Z","Action":"output","Package":"example.com/m/calc","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Time":"2024-05-02T10:15:01.213200000Z","Action":"output","Package":"example.com/m/calc","Test":"TestSlow","Output":"    calc_test.go:44: skipping in short mode\n"}
{"Time":"2024-05-02T10:15:01.213300000Z","Action":"output","Package":"example.com/m/calc","Test":"TestSlow","Output":"--- SKIP: TestSlow (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.213400000Z","Action":"skip","Package":"example.com/m/calc","Test":"TestSlow","Elapsed":0}
{"Time":"2024-05-02T10:15:01.214000000Z","Action":"output","Package":"example.com/m/calc","Output":"FAIL\n"}
{"Time":"2024-05-02T10:15:01.214100000Z","Action":"output","Package":"example.com/m/calc","Output":"FAIL\texample.com/m/calc\t0.004s\n"}
{"Time":"2024-05-02T10:15:01.214200000Z","Action":"fail","Package":"example.com/m/calc","Elapsed":0.004}
{"Time":"2024-05-02T10:15:01.300000000Z","Action":"start","Package":"example.com/m/util"}
{"Time":"2024-05-02T10:15:01.310000000Z","Action":"run","Package":"example.com/m/util","Test":"TestAdd"}
{"Time":"2024-05-02T10:15:01.310100000Z","Action":"output","Package":"example.com/m/util","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Time":"2024-05-02T10:15:01.310200000Z","Action":"output","Package":"example.com/m/util","Test":"TestAdd","Output":"--- FAIL: TestAdd (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.310300000Z","Action":"fail","Package":"example.com/m/util","Test":"TestAdd","Elapsed":0}
{"Time":"2024-05-02T10:15:01.310400000Z","Action":"output","Package":"example.com/m/util","Output":"FAIL\texample.com/m/util\t0.002s\n"}
{"Time":"2024-05-02T10:15:01.310500000Z","Action":"fail","Package":"example.com/m/util","Elapsed":0.002}
{"Time":"2024-05-02T10:15:01.400000000Z","Action":"start","Package":"example.com/m/server"}
{"Time":"2024-05-02T10:15:01.410000000Z","Action":"run","Package":"example.com/m/server","Test":"TestPing"}
{"Time":"2024-05-02T10:15:01.410100000Z","Action":"output","Package":"example.com/m/server","Test":"TestPing","Output":"=== RUN   TestPing\n"}
{"Time":"2024-05-02T10:15:01.410200000Z","Action":"output","Package":"example.com/m/server","Test":"TestPing","Output":"--- PASS: TestPing (0.00s)\n"}
{"Time":"2024-05-02T10:15:01.410300000Z","Action":"pass","Package":"example.com/m/server","Test":"TestPing","Elapsed":0}
{"Time":"2024-05-02T10:15:01.411000000Z","Action":"run","Package":"example.com/m/server","Test":"TestServe"}
{"Time":"2024-05-02T10:15:01.411100000Z","Action":"output","Package":"example.com/m/server","Test":"TestServe","Output":"=== RUN   TestServe\n"}
{"Time":"2024-05-02T10:15:01.411200000Z","Action":"output","Package":"example.com/m/server","Test":"TestServe","Output":"=== PAUSE TestServe\n"}
{"Time":"2024-05-02T10:15:01.411300000Z","Action":"pause","Package":"example.com/m/server","Test":"TestServe"}
{"Time":"2024-05-02T10:15:01.411400000Z","Action":"cont","Package":"example.com/m/server","Test":"TestServe"}
{"Time":"2024-05-02T10:15:01.411500000Z","Action":"output","Package":"example.com/m/server","Test":"TestServe","Output":"=== CONT  TestServe\n"}
{"Time":"2024-05-02T10:15:02.412000000Z","Action":"output","Package":"example.com/m/server","Test":"TestServe","Output":"panic: test timed out after 1s\n"}
{"Time":"2024-05-02T10:15:02.412100000Z","Action":"output","Package":"example.com/m/server","Test":"TestServe","Output":"running tests:\n"}
{"Time":"2024-05-02T10:15:02.412200000Z","Action":"output","Package":"example.com/m/server","Test":"TestServe","Output":"\tTestServe (1s)\n"}
{"Time":"2024-05-02T10:15:02.415000000Z","Action":"output","Package":"example.com/m/server","Output":"FAIL\texample.com/m/server\t1.005s\n"}
{"Time":"2024-05-02T10:15:02.415100000Z","Action":"fail","Package":"example.com/m/server","Elapsed":1.005}
{"Time":"2024-05-02T10:15:02.500000000Z","Action":"start","Package":"example.com/m/exitcode"}
{"Time":"2024-05-02T10:15:02.510000000Z","Action":"run","Package":"example.com/m/exitcode","Test":"TestFine"}
{"Time":"2024-05-02T10:15:02.510100000Z","Action":"output","Package":"example.com/m/exitcode","Test":"TestFine","Output":"=== RUN   TestFine\n"}
{"Time":"2024-05-02T10:15:02.510200000Z","Action":"output","Package":"example.com/m/exitcode","Test":"TestFine","Output":"--- PASS: TestFine (0.00s)\n"}
{"Time":"2024-05-02T10:15:02.510300000Z","Action":"pass","Package":"example.com/m/exitcode","Test":"TestFine","Elapsed":0}
{"Time":"2024-05-02T10:15:02.510400000Z","Action":"output","Package":"example.com/m/exitcode","Output":"PASS\n"}
{"Time":"2024-05-02T10:15:02.510500000Z","Action":"output","Package":"example.com/m/exitcode","Output":"FAIL\texample.com/m/exitcode\t0.003s\n"}
{"Time":"2024-05-02T10:15:02.510600000Z","Action":"fail","Package":"example.com/m/exitcode","Elapsed":0.003}
{"Time":"2024-05-02T10:15:02.600000000Z","Action":"start","Package":"example.com/m/cmd"}
{"Time":"2024-05-02T10:15:02.600100000Z","Action":"output","Package":"example.com/m/cmd","Output":"?   \texample.com/m/cmd\t[no test files]\n"}
{"Time":"2024-05-02T10:15:02.600200000Z","Action":"skip","Package":"example.com/m/cmd","Elapsed":0}
FAIL
"""

# The same build failure in go >= 1.24's shape: build output as JSON events without a Package.
GO_124_BUILD_FAILURE = r"""
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-output","Output":"# example.com/m/broken\n"}
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-output","Output":"broken/broken.go:7:9: undefined: missingFunc\n"}
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-fail"}
{"Time":"2025-03-01T09:00:00.100000000Z","Action":"start","Package":"example.com/m/broken"}
{"Time":"2025-03-01T09:00:00.100100000Z","Action":"output","Package":"example.com/m/broken","Output":"FAIL\texample.com/m/broken [build failed]\n"}
{"Time":"2025-03-01T09:00:00.100200000Z","Action":"fail","Package":"example.com/m/broken","Elapsed":0,"FailedBuild":"example.com/m/broken [example.com/m/broken.test]"}
"""


def test_go_stream_names_tests_and_failed_packages():
    got = {r.name: r.status for r in parse_go_json(GO_STREAM)}
    assert got == {
        "example.com/m/broken": "ERROR",  # build failed: no test of its own explains the package's fail
        "TestAdd": "FAILED",  # PASSED in calc, FAILED in util: the worst of the two
        "TestDiv": "FAILED",
        "TestDiv/case_1": "PASSED",
        "TestDiv/by_zero": "FAILED",
        "TestSlow": "SKIPPED",
        "TestPing": "PASSED",
        "TestServe": "ERROR",  # run, never ended: the binary timed out
        "TestFine": "PASSED",
        "example.com/m/exitcode": "ERROR",  # all its tests passed, yet the package failed
    }, "calc, util and server failed through their tests, so they get no package result; cmd had no tests"


def test_go_124_build_events_are_read_like_older_ones():
    assert parse_go_json(GO_124_BUILD_FAILURE) == [TestResult("example.com/m/broken", "ERROR")], (
        "the package's fail event, not the build-output events, names the failure"
    )


def test_go_repeated_run_keeps_worst_and_an_unfinished_repeat_errors():
    events = [
        {"Action": "run", "Package": "p", "Test": "TestA"},
        {"Action": "pass", "Package": "p", "Test": "TestA"},
        {"Action": "run", "Package": "p", "Test": "TestA"},
    ]  # -count=2, the second run never ended
    stream = "\n".join(json.dumps(e) for e in events)
    assert parse_go_json(stream) == [TestResult("TestA", "ERROR")], "a later unfinished run is not hidden by a pass"


def test_go_stream_skips_lines_that_are_not_events():
    stream = 'not json\n[1, 2]\n{"Action": 3, "Package": "p", "Test": "T"}\n{"Action":"pass","Package":"p","Test":"TestOk"}\n{broken'
    assert parse_go_json(stream) == [TestResult("TestOk", "PASSED")], "only well-formed events count"


def test_go_stream_over_the_size_limit_is_refused(monkeypatch):
    monkeypatch.setattr(gojson, "MAX_REPORT_BYTES", 100)
    with pytest.raises(GradeError, match="over the 100-character limit"):
        parse_go_json(GO_STREAM)


# --- SWE-bench Pro parser format ----------------------------------------------------------


def test_parser_output_reads_and_dedupes_worst():
    data = json.dumps(
        {
            "tests": [
                {"name": "b::t", "status": "PASSED"},
                {"name": "a::t", "status": "SKIPPED"},
                {"name": "b::t", "status": "FAILED", "extra": 1},
            ],
            "meta": {},
        }
    ).encode()
    assert parse_parser_output(data) == [TestResult("a::t", "SKIPPED"), TestResult("b::t", "FAILED")], (
        "sorted by name, a duplicate keeps its worst status, extra keys ignored"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PASSED a\n", r"^parser output: not JSON \("),
        (b'["tests"]', r"^parser output: top level is a JSON array, not an object$"),
        (b'{"results": []}', r'^parser output: no "tests" list \(found null\)$'),
        (b'{"tests": {"a": "PASSED"}}', r'^parser output: no "tests" list \(found object\)$'),
        (b'{"tests": ["a"]}', r"^parser output: tests\[0\] is a JSON string, not an object$"),
        (
            b'{"tests": [{"name": "a", "status": "PASSED"}, {"status": "PASSED"}]}',
            r"^parser output: tests\[1\] has no string name \(found null\)$",
        ),
        (
            b'{"tests": [{"name": 7, "status": "PASSED"}]}',
            r"^parser output: tests\[0\] has no string name \(found number\)$",
        ),
        (b'{"tests": [{"name": "", "status": "PASSED"}]}', r"^parser output: tests\[0\] has an empty name$"),
        (
            b'{"tests": [{"name": "a", "status": "PASSED"}, {"name": "b", "status": "PASSED"}, {"name": "c", "status": "PASSED"},'
            b' {"name": "d", "status": "OK"}]}',
            r"^parser output: tests\[3\] has status 'OK', not one of PASSED, FAILED, SKIPPED, ERROR$",
        ),
        (
            b'{"tests": [{"name": "a", "status": "passed\\nx"}]}',
            r"^parser output: tests\[0\] has status 'passed\\nx', ",
        ),
        (b'{"tests": [{"name": "a"}]}', r"^parser output: tests\[0\] has status None, not one of "),
    ],
)
def test_parser_output_malformed_raises_naming_the_field(data, message):
    with pytest.raises(GradeError, match=message) as caught:
        parse_parser_output(data)
    assert "\n" not in str(caught.value), "a GradeError message is one line"


def test_parser_output_over_the_size_limit_is_refused(monkeypatch):
    monkeypatch.setattr(parser, "MAX_REPORT_BYTES", 10)
    with pytest.raises(GradeError, match="over the 10-byte limit"):
        parse_parser_output(b'{"tests": []}')


# --- merge_worst ----------------------------------------------------------------------------


def test_merge_worst_ranks_error_failed_skipped_passed():
    merged = merge_worst(
        [
            TestResult("z", "PASSED"),
            TestResult("z", "SKIPPED"),
            TestResult("y", "FAILED"),
            TestResult("y", "ERROR"),
            TestResult("x", "SKIPPED"),
            TestResult("x", "FAILED"),
            TestResult("y", "PASSED"),
        ]
    )
    assert merged == [TestResult("x", "FAILED"), TestResult("y", "ERROR"), TestResult("z", "SKIPPED")], (
        "ERROR > FAILED > SKIPPED > PASSED, output sorted by name"
    )


def test_merge_worst_refuses_an_unknown_status():
    with pytest.raises(GradeError, match="has status 'XFAIL'"):
        merge_worst([TestResult("a", "XFAIL")])
