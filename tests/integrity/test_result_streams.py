"""Result sources (envs/integrity/sources/) other than JUnit: named test results read from a go test
-json stream and from the SWE-bench Pro parser format, and merged, one result per name, the worst."""

from __future__ import annotations

import json

import pytest

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity.sources import gojson, parser
from envs.integrity.sources.base import merge_worst
from envs.integrity.sources.gojson import parse_go_json
from envs.integrity.sources.parser import parse_parser_output

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
