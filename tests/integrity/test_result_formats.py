"""The JUnit result source (envs/integrity/sources/junit.py): named test results read from real
pytest JUnit reports, one result per name, the worst; the go test -json stream and the SWE-bench
Pro parser format are in test_result_streams.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity.sources import junit
from envs.integrity.sources.junit import parse_junit

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
