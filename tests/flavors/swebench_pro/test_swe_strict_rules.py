"""crucible-strict's pure parts (swe_tasks/strict.py): which mode gets which evaluator, the
instance's test files, the end marker's cut, and the verdict regraded from a stored raw grade
(worst status, the scan's refusal and its allowances, the differential re-run's agreement, the
JUnit report's, the go command's test2json events' and the JavaScript runners' own results' confirmation)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from engine.config.schema import IntegrityConfig, with_defences
from engine.util.paths import PROJECT_ROOT
from envs.coding.schema import AllowTestAware
from envs.integrity.sources import gojson as go_source
from envs.integrity.sources import jsresults as js_source
from swe_tasks import gojson, jsresults, junit, replay, strict
from swe_tasks.defences import SwebenchIntegrity
from swe_tasks.flavor import SwebenchProFlavor

F2P, P2P = "t.py::T::test_fixed", "t.py::T::test_kept"


def integrity(mode: str):
    """conf/integrity/<mode>.yaml as SWE-bench Pro's integrity schema types it: each defence
    at the mode's value from the flavor's catalogue (swe_tasks/defences.py)."""
    node = OmegaConf.load(PROJECT_ROOT / "conf" / "integrity" / f"{mode}.yaml")
    chosen = IntegrityConfig(mode=node.mode, uid_wall=node.uid_wall, agent_network=node.agent_network)
    return with_defences(SwebenchIntegrity, chosen, "swebench_pro")


@pytest.mark.parametrize(
    "mode, evaluator", [("none", "official"), ("vault", "official"), ("strict", "crucible-strict")]
)
def test_each_mode_records_which_evaluator_grades_it(mode, evaluator):
    assert (strict.STRICT if strict.applies(integrity(mode)) else strict.OFFICIAL) == evaluator
    assert bool(strict.defences(integrity(mode))) == (evaluator == "crucible-strict")


def test_the_hidden_test_files_are_those_before_repo_set_cmd_restores_and_the_selected_ones():
    task = SimpleNamespace(
        before_repo_set_cmd="git reset --hard a\ngit checkout b -- tests/a.py 'web/x y.test.js'\n",
        selected_test_files_to_run=["tests/a.py", "tests/c.py", "../escape.py", "/abs.py"],
    )
    assert strict.hidden_test_files(task) == ["tests/a.py", "web/x y.test.js", "tests/c.py"]


def test_the_helpers_in_a_hidden_tests_tree_are_read_as_tests_and_the_code_beside_that_tree_is_not():
    """ansible's hidden tests lie in `test/units/...`, outside the usual test paths (`test/` is
    library code in django): the helpers beside them import unittest as tests do, and are read as
    an agent's test files are (for runner plugins); ansible-test's own code in `test/lib/` is code."""
    task = SimpleNamespace(
        before_repo_set_cmd="git checkout b -- test/units/modules/test_copy.py\n",
        selected_test_files_to_run=["test/units/modules/test_copy.py", "test/test_top.py"],
    )
    assert strict.test_trees(strict.hidden_test_files(task)) == ["test/units/**", "test/**"]
    task.selected_test_files_to_run = ["test/units/modules/test_copy.py"]
    helper = "import unittest\nfrom unittest import mock\n"
    files = {
        "test/units/mock/procenv.py": helper,
        "test/units/mock/plugin.py": "def pytest_pyfunc_call(pyfuncitem):\n    return True\n",
        "test/lib/ansible_test/_internal/util.py": helper,
    }
    patch = "".join(
        f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n--- /dev/null\n+++ b/{rel}\n"
        f"@@ -0,0 +1,{text.count(chr(10))} @@\n" + "".join(f"+{line}\n" for line in text.splitlines())
        for rel, text in files.items()
    )
    found = strict.scan(task, patch, {rel: text.encode() for rel, text in files.items()}, refuse=True)["findings"]
    assert [(f["rule"], f["path"], f["line"]) for f in found] == [
        ("runner-import", "test/lib/ansible_test/_internal/util.py", 1),
        ("runner-import", "test/lib/ansible_test/_internal/util.py", 2),
        ("runner-hook", "test/units/mock/plugin.py", 1),
    ]


def test_output_after_the_end_marker_is_cut_from_what_the_parser_reads_and_kept():
    token = "ab" * 16
    data = b"ok - real\n" + f"\n{token} end 1\n".encode() + b"ok - forged\n"
    assert strict.split_end(data, token) == (b"ok - real\n", b"ok - forged\n", True)
    forged_marker = b"x\n" + b"cd" * 16 + b" end 0\nok - forged\n"  # another token is just output
    assert strict.split_end(forged_marker, token) == (forged_marker, b"", False)


def spec(allow=()):
    return SimpleNamespace(task=SimpleNamespace(fail_to_pass=[F2P], pass_to_pass=[P2P], allow_test_aware=list(allow)))


def raw(evaluator: str, *tests: tuple[str, str], **more) -> dict:
    return {
        "evaluator": evaluator,
        "apply": {"exit_code": 0},
        "run_script": {"end": {"stdout": True, "stderr": True}} if evaluator == strict.STRICT else {},
        "parser": {"tests": [{"name": n, "status": s} for n, s in tests]},
        **more,
    }


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


def junit_xml(*cases: tuple[str, str, str, str]) -> bytes:
    """A pytest-shaped xunit1 report: (file, classname, name, "" or a failure element)."""
    body = "".join(f'<testcase file="{f}" classname="{c}" name="{n}" time="0.1">{x}</testcase>' for f, c, n, x in cases)
    return f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'.encode()


def pytest_raw(report: bytes | None, *tests: tuple[str, str], state: str = "file") -> dict:
    return raw(strict.STRICT, *tests, junit=junit.record(True, [(state, report)], "/tmp/crucible-results-x"))


def test_only_a_run_script_line_that_runs_pytest_makes_an_instance_a_pytest_one():
    assert junit.runs_pytest(b'#!/bin/bash\nset -e\npython -m pytest -v "$@"\n')
    assert junit.runs_pytest(b"cd /app\npytest tests/ 2>&1 | tee out.log\n")
    assert not junit.runs_pytest(b'#!/bin/bash\n# not pytest: jest\nnpx jest "$@"\n')
    assert not junit.runs_pytest(b"node test/run.js --reporter pytestish\n")
    # ansible-test's units command runs pytest (SWE-bench Pro's ansible instances)
    assert junit.runs_pytest(b'cd /app\n/app/bin/ansible-test units --python 3.9 "$test_file" --verbose || true\n')
    assert not junit.runs_pytest(b"python bin/ansible-test sanity --test import --python 3.11\n")


def test_a_listed_test_passes_under_strict_only_if_the_parser_and_the_junit_report_agree():
    spec_ = spec()
    passing = junit_xml(("t.py", "t.T", "test_fixed", ""), ("t.py", "t.T", "test_kept", ""))
    verdict = SwebenchProFlavor().regrade(spec_, pytest_raw(passing, (F2P, "PASSED"), (P2P, "PASSED")))
    assert verdict.reward == 1.0, verdict.raw["reason"]
    assert [(e["name"], e["parser"], e["junit"], e["mapped"], e["judged_by"]) for e in verdict.raw["listed"]] == [
        (F2P, "PASSED", "PASSED", "exact", ["parser", "junit"]),
        (P2P, "PASSED", "PASSED", "exact", ["parser", "junit"]),
    ]
    failing = junit_xml(("t.py", "t.T", "test_fixed", '<failure message="no"/>'), ("t.py", "t.T", "test_kept", ""))
    verdict = SwebenchProFlavor().regrade(spec_, pytest_raw(failing, (F2P, "PASSED"), (P2P, "PASSED")))
    assert (
        verdict.reward == 0.0 and verdict.subscores["fail_to_pass"] == 0.0 and verdict.subscores["pass_to_pass"] == 1.0
    )
    assert verdict.raw["reason"] == (
        f"1 listed test(s) PASSED by the parser but not by pytest's JUnit report, e.g. {F2P!r} (FAILED)"
    )


@pytest.mark.parametrize("state", ["absent", "symlink", "not-a-file", "too-large", "too-many", "unreadable"])
def test_a_pytest_instance_without_a_readable_junit_report_is_unresolved_with_the_reason(state):
    found = [] if state == "absent" else [(state, None)]
    graded = raw(
        strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), junit=junit.record(True, found, "/tmp/crucible-results-x")
    )
    verdict = SwebenchProFlavor().regrade(spec(), graded)
    assert verdict.reward == 0.0
    assert (
        verdict.raw["reason"]
        == f"no named results: {junit.STATES[state]} (run_script.sh runs pytest, so its report is required)"
    )
    assert verdict.raw["listed"][0]["mapped"] == "no report" and verdict.raw["listed"][0]["junit"] is None


def test_the_reports_of_several_pytest_sessions_are_merged_and_one_refused_report_refuses_them_all():
    """A run script that runs pytest once per test file writes one report per session; each
    test counts by its worst status over them, and a symlink among them is no report at all."""
    fixed = junit_xml(("t.py", "t.T", "test_fixed", ""))
    kept = junit_xml(("t.py", "t.T", "test_kept", ""))
    both = junit.record(True, [("file", fixed), ("file", kept)], "/tmp/crucible-results-x")
    assert (
        both["reports"] == 2 and len(both["sha256"]) == 2 and both["path"] == "/tmp/crucible-results-x/r/pytest-*.xml"
    )
    assert (
        SwebenchProFlavor().regrade(spec(), raw(strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), junit=both)).reward
        == 1.0
    )
    again = junit_xml(("t.py", "t.T", "test_fixed", '<failure message="second run"/>'))
    worst = junit.record(True, [("file", fixed), ("file", kept), ("file", again)], "/x")
    assert {t["name"]: t["status"] for t in worst["tests"]} == {F2P: "FAILED", P2P: "PASSED"}
    refused = junit.record(True, [("file", fixed), ("symlink", None)], "/x")
    assert refused["error"] == junit.STATES["symlink"] and "tests" not in refused


def test_a_malformed_junit_report_is_unresolved_and_says_why():
    verdict = SwebenchProFlavor().regrade(spec(), pytest_raw(b"<html/>", (F2P, "PASSED"), (P2P, "PASSED")))
    assert verdict.reward == 0.0 and "root element is <html>" in verdict.raw["reason"]


def test_a_non_pytest_instance_is_judged_by_the_parser_alone_and_says_so():
    graded = raw(
        strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), junit=junit.record(False, [], "/tmp/crucible-results-x")
    )
    verdict = SwebenchProFlavor().regrade(spec(), graded)
    assert verdict.reward == 1.0 and [e["judged_by"] for e in verdict.raw["listed"]] == [["parser"], ["parser"]]


def test_parser_names_map_to_report_ids_exactly_or_by_one_path_suffix_and_otherwise_say_so():
    report = [
        "app/tests/test_x.py::TestC::test_m[1-2]",
        "tests/test_y.py::test_a",
        "a/tests/test_z.py::test_b",
        "b/tests/test_z.py::test_b",
    ]
    assert junit.map_name("tests/test_y.py::test_a", report) == ("tests/test_y.py::test_a", "exact")
    # pytest's rootdir above the parser's base: the report id ends with the parser's name
    assert junit.map_name("tests/test_x.py::TestC::test_m[1-2]", report) == (report[0], "path-suffix")
    assert junit.map_name("tests/test_x.py::TestC::test_m[1-3]", report) == (None, "unmapped: not in the JUnit report")
    missing, why = junit.map_name("tests/test_z.py::test_b", report)
    assert missing is None and why.startswith("unmapped: 2 report ids end alike")
    # a parser name that is no pytest node id (unittest's) is never guessed, nor a tail of a parameter
    assert junit.map_name("test_a (tests.test_y.Test)", report)[0] is None
    assert junit.map_name("b]", ["tests/t.py::test_m[a/b]"]) == (None, "unmapped: not in the JUnit report")
    assert junit.map_name("tests/t.py::test_m[b]", ["tests/t.py::test_m[a/tests/t.py::test_m[b]"])[0] is None


def test_pytests_own_junit_report_reads_into_the_parsers_node_ids(tmp_path):
    """A report written by pytest itself (xunit1, as sh/replay.sh asks) names tests as the parser does."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_p.py").write_text(
        "import pytest\n\n\nclass TestC:\n    @pytest.mark.parametrize('a', [1, 'x y'])\n"
        "    def test_m(self, a):\n        assert a != 'x y'\n\n\ndef test_f():\n    pass\n"
    )
    report = tmp_path / "out" / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_p.py",
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
        ],
        cwd=tmp_path,
        capture_output=True,
    )
    assert proc.returncode == 1, proc.stdout
    found = junit.record(True, [("file", report.read_bytes())], "/x")["tests"]
    assert found == [
        {"name": "tests/test_p.py::TestC::test_m[1]", "status": "PASSED"},
        {"name": "tests/test_p.py::TestC::test_m[x y]", "status": "FAILED"},
        {"name": "tests/test_p.py::test_f", "status": "PASSED"},
    ]


def test_the_plugin_gives_each_pytest_session_a_report_of_its_own_found_by_autoload_alone(tmp_path):
    """py/crucible_junit.py as sh/replay.sh lays it out (the module and its pytest11 entry point
    in one directory; here on PYTHONPATH, this venv having no user site): two pytest sessions, as
    a run script looping over test files runs them, write two reports that merge into every
    test; sessions a test starts inside one (inline and as a subprocess, as pytester does) write
    none; the run's own --junitxml is left alone; a session without the directory runs as ever."""
    plugin = tmp_path / "pyresults"
    (plugin / "crucible_junit-0.dist-info").mkdir(parents=True)
    (tmp_path / "results" / "r").mkdir(parents=True)
    (plugin / "crucible_junit.py").write_text(junit.plugin_program(str(tmp_path / "results")))
    (plugin / "crucible_junit-0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: crucible-junit\nVersion: 0\n"
    )
    (plugin / "crucible_junit-0.dist-info" / "entry_points.txt").write_text(
        "[pytest11]\ncrucible_junit = crucible_junit\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "import subprocess\nimport sys\n\nimport pytest\n\n\ndef test_one():\n    pass\n\n\n"
        "def test_inner_sessions(tmp_path):\n"
        "    inner = tmp_path / 'test_inner.py'\n"
        "    inner.write_text('def test_inner():\\n    pass\\n')\n"
        "    assert pytest.main(['-q', '-p', 'no:cacheprovider', str(inner)]) == 0\n"
        "    assert subprocess.call([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', str(inner)]) == 0\n"
    )
    (tmp_path / "tests" / "test_b.py").write_text(
        "import pytest\n\n\ndef test_two():\n    assert 0\n\n\n@pytest.mark.skip\ndef test_three():\n    pass\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(plugin)}
    for name in ("tests/test_a.py", "tests/test_b.py"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                name,
                f"--junitxml={tmp_path / 'own.xml'}",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            check=False,
        )
    written = sorted((tmp_path / "results" / "r").iterdir())
    assert [p.name.startswith("pytest-") and p.suffix == ".xml" for p in written] == [True, True]
    merged = junit.record(True, [("file", p.read_bytes()) for p in written], str(tmp_path / "results"))
    assert merged["tests"] == [
        {"name": "tests/test_a.py::test_inner_sessions", "status": "PASSED"},
        {"name": "tests/test_a.py::test_one", "status": "PASSED"},
        {"name": "tests/test_b.py::test_three", "status": "SKIPPED"},
        {"name": "tests/test_b.py::test_two", "status": "FAILED"},
    ]
    assert b"test_two" in (tmp_path / "own.xml").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_a.py"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": ""},
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0 and len(list((tmp_path / "results" / "r").iterdir())) == 2


def go_event(action: str, test: str | None = None, output: str | None = None, package: str = "synth/p") -> bytes:
    event = {"Time": "2026-01-01T00:00:00Z", "Action": action, "Package": package}
    if test is not None:
        event["Test"] = test
    if output is not None:
        event["Output"] = output
    return (json.dumps(event) + "\n").encode()


GO_F2P, GO_P2P = "TestFixed", "TestKept"


def go_spec():
    return SimpleNamespace(task=SimpleNamespace(fail_to_pass=[GO_F2P], pass_to_pass=[GO_P2P], allow_test_aware=[]))


def go_raw(stream: bytes, *tests: tuple[str, str], how: str = "added") -> dict:
    return raw(
        strict.STRICT,
        *tests,
        junit=junit.record(False, [], "/tmp/crucible-results-x"),
        go_json=gojson.record(how, stream),
    )


def test_only_a_run_script_line_that_runs_go_test_makes_an_instance_a_go_one_and_says_how_it_gets_events():
    assert gojson.how(b"#!/bin/bash\nset -e\ngo test -v ./... || true\n") == "added"
    assert gojson.how(b"go test ./... -tags netgo -v -run \"$p\" 2>&1 | awk '!/x/'\n") == "added"
    assert gojson.how(b"/usr/local/go/bin/go test -v ./pkg/...\n") == "added"
    # its own -json: the events are there already, nothing added, nothing rebuilt
    assert gojson.how(b"CGO_ENABLED=1 go test -cover -json -race ./... \\\n  | tee log\n") == "own"
    # go list would print JSON objects too under GOFLAGS=-json: -json for go test alone, from a go on PATH
    assert gojson.how(b"SUBJECT=$(go list ./... | grep -v e2e)\ngo test -v $SUBJECT\n") == "wrapped"
    assert gojson.how(b'#!/bin/bash\n# go test is not used here\nnpx jest "$@"\n') == ""
    assert gojson.how(b"python -m pytest --go test\n") == ""  # no go command: 'go' is a word of an argument
    assert gojson.how(b"cargo test\nmongo test\n") == ""
    # what each adds to GOFLAGS (go list knows -json but not -exec)
    assert gojson.goflags_shown("added", "/w") == 'GOFLAGS="${GOFLAGS:+$GOFLAGS }-json -exec=/w/go-test-exec" '
    assert gojson.goflags_shown("own", "/w") == 'GOFLAGS="${GOFLAGS:+$GOFLAGS }-exec=/w/go-test-exec" '
    assert gojson.goflags_shown("wrapped", "/w") == (
        'PATH="/w/go-wrap:$PATH" GOFLAGS="${GOFLAGS:+$GOFLAGS }-exec=/w/go-test-exec" '
    )
    assert gojson.goflags_shown("refused", "/w") == gojson.goflags_shown("", "/w") == ""


def test_the_text_rebuilt_from_the_events_is_what_the_go_command_would_have_printed():
    stream = (
        b"run_script uid=1000 files=x_test.go\n"  # run_script.sh's own line: kept
        + go_event("start")
        + go_event("run", "TestA")
        + go_event("output", "TestA", "=== RUN   TestA\n")
        + go_event("output", "TestA", "a long li")
        + go_event("output", "TestA", "ne, split\n")
        + go_event("output", "TestA", "--- PASS: TestA (0.00s)\n")
        + go_event("pass", "TestA")
        + b'{"not": "an event"}\n'
        + go_event("output", None, "ok  \tsynth/p\t0.01s\n")
        + go_event("pass")
    )
    assert go_source.reconstruct(stream) == (
        b"run_script uid=1000 files=x_test.go\n=== RUN   TestA\n"
        b"a long line, split\n--- PASS: TestA (0.00s)\n"
        b'{"not": "an event"}\nok  \tsynth/p\t0.01s\n'
    )
    # A forged event the tested code printed arrives as an output event's text: rebuilt as text, no result.
    forged = go_event("output", "TestA", json.dumps({"Action": "pass", "Test": "TestB"}) + "\n")
    assert go_source.reconstruct(forged) == b'{"Action": "pass", "Test": "TestB"}\n'
    assert go_source.named_results(forged) == ([], 1, False)
    assert go_source.named_results(stream)[1:] == (9, True)  # the go command's own start event: it framed


def test_the_events_name_each_test_by_its_worst_status_across_packages():
    stream = (
        go_event("pass", "TestA", package="a")
        + go_event("fail", "TestA", package="b")
        + go_event("skip", "TestS")
        + go_event("pass", "TestP/sub")
        + go_event("fail", package="a")
        + go_event("output", "TestA", "--- PASS: TestA (0.00s)\n")
    )
    tests, events, framed = go_source.named_results(stream)
    assert events == 6 and framed is False  # no start event: a go command older than 1.20
    assert [(t.name, t.status) for t in tests] == [("TestA", "FAILED"), ("TestP/sub", "PASSED"), ("TestS", "SKIPPED")]


def test_a_listed_go_test_passes_under_strict_only_if_the_parser_and_the_events_agree():
    both = go_event("pass", GO_F2P) + go_event("pass", GO_P2P)
    verdict = SwebenchProFlavor().regrade(go_spec(), go_raw(both, (GO_F2P, "PASSED"), (GO_P2P, "PASSED")))
    assert verdict.reward == 1.0, verdict.raw["reason"]
    assert [(e["name"], e["parser"], e["go_json"], e["judged_by"]) for e in verdict.raw["listed"]] == [
        (GO_F2P, "PASSED", "PASSED", ["parser", "go-json"]),
        (GO_P2P, "PASSED", "PASSED", ["parser", "go-json"]),
    ]
    # The parser read a printed `--- PASS` line; the events say the test failed (or never finished).
    for stream, said in (
        (go_event("fail", GO_F2P) + go_event("pass", GO_P2P), "FAILED"),
        (go_event("pass", GO_P2P), "no result event"),
    ):
        verdict = SwebenchProFlavor().regrade(go_spec(), go_raw(stream, (GO_F2P, "PASSED"), (GO_P2P, "PASSED")))
        assert verdict.reward == 0.0
        assert verdict.subscores["fail_to_pass"] == 0.0 and verdict.subscores["pass_to_pass"] == 1.0
        assert verdict.raw["reason"] == (
            "1 listed test(s) PASSED by the parser but not by the go command's test2json "
            f"events, e.g. {GO_F2P!r} ({said})"
        )
    # The events alone never pass a test the parser does not.
    verdict = SwebenchProFlavor().regrade(go_spec(), go_raw(both, (GO_F2P, "FAILED"), (GO_P2P, "PASSED")))
    assert verdict.reward == 0.0 and "not PASSED" in verdict.raw["reason"]


@pytest.mark.parametrize("stream", [b"", b"plain text, no events\n", go_event("start") + go_event("fail")])
def test_a_go_instance_without_result_events_is_unresolved_with_the_reason(stream):
    verdict = SwebenchProFlavor().regrade(go_spec(), go_raw(stream, (GO_F2P, "PASSED"), (GO_P2P, "PASSED")))
    assert verdict.reward == 0.0
    assert verdict.raw["reason"].startswith("no named results: the go command wrote no test2json result event")
    assert verdict.raw["reason"].endswith("(run_script.sh runs go test, so its events are required)")
    assert [e["go_json"] for e in verdict.raw["listed"]] == [None, None]


def test_a_go_grading_stored_before_wrapped_existed_is_judged_by_the_parser_alone_and_says_why():
    """Such a run script (it also runs go list) was ``refused``: nothing added, parser alone."""
    graded = go_raw(b"", (GO_F2P, "PASSED"), (GO_P2P, "PASSED"))
    graded["go_json"] = {
        "expected": False,
        "how": "refused",
        "why_not": (
            "run_script.sh runs another go command that knows -json (go list, go vet, ...): "
            "GOFLAGS=-json would change its output, so none was added and the parser alone judges"
        ),
    }
    verdict = SwebenchProFlavor().regrade(go_spec(), graded)
    assert verdict.reward == 1.0 and [e["judged_by"] for e in verdict.raw["listed"]] == [["parser"], ["parser"]]
    assert verdict.raw["go_json"]["why_not"].startswith("run_script.sh runs another go command that knows -json")
    assert any(line.startswith("go test -json events (refused): ") for line in SwebenchProFlavor().explain(verdict.raw))


def test_a_stored_go_grading_regrades_the_same():
    stream = go_event("fail", GO_F2P) + go_event("pass", GO_P2P)
    verdict = SwebenchProFlavor().regrade(go_spec(), go_raw(stream, (GO_F2P, "PASSED"), (GO_P2P, "PASSED")))
    again = SwebenchProFlavor().regrade(go_spec(), verdict.raw)
    assert (again.reward, again.raw["reason"], again.raw["listed"]) == (
        0.0,
        verdict.raw["reason"],
        verdict.raw["listed"],
    )


def test_the_exec_program_turns_run_scripts_verbose_flag_back_into_test2json_framing(tmp_path):
    """sh/go_test_exec.sh, as sh/replay.sh writes it: -test.v=true (run_script.sh's -v, which
    comes after -json's -test.v=test2json and would win) becomes -test.v=test2json; the rest as
    given. Where the go command asked for no framing (before Go 1.20) nothing changes: an older
    test binary would refuse the value."""
    program = tmp_path / "go-test-exec"
    program.write_text(gojson.exec_program())
    program.chmod(0o755)
    proc = subprocess.run(
        [str(program), "printf", "<%s>", "-test.v=test2json", "-test.run=^TestA$", "-test.v=true", "a b"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout == "<-test.v=test2json><-test.run=^TestA$><-test.v=test2json><a b>"
    older = subprocess.run(
        [str(program), "printf", "<%s>", "-test.v=true", "-test.timeout=10m"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert older.stdout == "<-test.v=true><-test.timeout=10m>"


def test_the_wrapping_go_adds_json_to_go_test_alone_and_runs_the_next_go_on_path(tmp_path):
    """sh/go_wrap.sh, first on PATH: `go test` gets -json (after -C, which must come first),
    every other go command its own arguments, from the next go on PATH (itself left out)."""
    wrap, real = tmp_path / "go-wrap", tmp_path / "real"
    wrap.mkdir()
    real.mkdir()
    (wrap / "go").write_text(gojson.wrap_program())
    (real / "go").write_text('#!/bin/bash\nprintf "%s|" "$@"\n')
    for script in (wrap / "go", real / "go"):
        script.chmod(0o755)
    env = {"PATH": f"{wrap}:{real}:/usr/bin:/bin"}

    def go(*args: str) -> str:
        done = subprocess.run(["go", *args], env=env, capture_output=True, text=True, check=True)
        return done.stdout

    assert go("test", "-v", "./pkg") == "test|-json|-v|./pkg|"
    assert go("list", "./...") == "list|./...|"
    assert go("test", "-C", "sub dir", "-run", "^(A|B)$") == "test|-C|sub dir|-json|-run|^(A|B)$|"
    assert go("test", "-C=sub") == "test|-C=sub|-json|"
    assert go("version") == "version|"
    lone = subprocess.run([str(wrap / "go"), "test"], env={"PATH": str(wrap)}, capture_output=True, text=True)
    assert lone.returncode == 127 and "no go on PATH" in lone.stderr


# --- a JavaScript runner's own results (swe_tasks/jsresults.py) ---------------------------------

JEST_F2P, JEST_P2P = "test/a.test.js | shout | case | uppercases", "test/a.test.js | whisper | lowercases"
HIDDEN = "/app/test/a.test.js"


def jest_spec():
    return SimpleNamespace(
        task=SimpleNamespace(
            fail_to_pass=[JEST_F2P],
            pass_to_pass=[JEST_P2P],
            allow_test_aware=[],
            workdir="/app",
            before_repo_set_cmd="git checkout s -- test/a.test.js",
            selected_test_files_to_run=["test/a.test.js"],
        )
    )


def jest_json(*cases: tuple[str, list[str], str, str], shape: str = "json") -> bytes:
    """jest's results in ``--json``'s shape, or in the aggregated shape a results processor gets."""
    files: dict[str, list[dict]] = {}
    for path, ancestors, title, status in cases:
        files.setdefault(path, []).append(
            {"ancestorTitles": ancestors, "title": title, "status": status, "fullName": " ".join([*ancestors, title])}
        )
    if shape == "json":
        suites = [{"name": path, "assertionResults": tests} for path, tests in files.items()]
    else:
        suites = [{"testFilePath": path, "testResults": tests} for path, tests in files.items()]
    return json.dumps({"numTotalTestSuites": len(files), "testResults": suites}).encode()


def jest_raw(reports: list[tuple[str, bytes | None]], *tests: tuple[str, str]) -> dict:
    return raw(
        strict.STRICT,
        *tests,
        junit=junit.record(False, [], "/tmp/crucible-results-x"),
        go_json=gojson.record("", None),
        js_results=jsresults.record(["jest"], reports, "/tmp/crucible-results-x", [HIDDEN]),
    )


def test_only_a_run_script_line_that_runs_jest_or_mocha_makes_an_instance_one_of_theirs():
    assert jsresults.runners(b'yarn test --verbose --passWithNoTests --ci --maxWorkers=2 "${files[@]}" 2>&1\n') == [
        "jest"
    ]
    assert jsresults.runners(b'  yarn workspace web-app test --runInBand --testPathPattern="$f"\n') == ["jest"]
    assert jsresults.runners(b"npx jest --ci src/\n") == ["jest"]
    assert jsresults.runners(b"yarn test ${test_files[@]} --json > /tmp/out.json || true\n") == ["jest"]
    assert jsresults.runners(b"npm test -- --testNamePattern=shout\n") == ["jest"]
    assert jsresults.runners(b"# npx jest\nNODE_ENV=test npx mocha --reporter=json test/a.js\n") == ["mocha"]
    assert jsresults.runners(b"bash -c 'npx _mocha test/'\n") == ["mocha"]
    assert jsresults.runners(b"npm run test:unit -- --reporter spec\n") == []  # a test script with no jest-only flag
    assert jsresults.runners(b"yarn test\nnode --test\n") == []
    assert jsresults.runners(b"npm install @jest/globals mocha-junit-reporter\n") == []
    assert jsresults.record([], [], "/tmp/r") == {"expected": False}


def test_jests_results_read_in_both_shapes_and_merge_over_runs_failed_first_then_passed():
    cases = (HIDDEN, ["shout", "case"], "uppercases", "passed"), (HIDDEN, [], "todo one", "todo")
    for shape in ("json", "processor"):
        assert js_source.tests_in(jest_json(*cases, shape=shape)) == [
            {"file": HIDDEN, "ancestors": ["shout", "case"], "title": "uppercases", "status": "PASSED"},
            {"file": HIDDEN, "ancestors": [], "title": "todo one", "status": "SKIPPED"},
        ]
    # protonmail runs jest once per listed test: the others are reported pending there
    runs = [js_source.tests_in(jest_json((HIDDEN, ["a"], "t", status))) for status in ("pending", "passed", "pending")]
    assert [t["status"] for t in js_source.merged(sum(runs, []))] == ["PASSED"]
    runs.append(js_source.tests_in(jest_json((HIDDEN, ["a"], "t", "failed"))))
    assert [t["status"] for t in js_source.merged(sum(runs, []))] == ["FAILED"]
    with pytest.raises(ValueError, match="no testResults"):
        js_source.tests_in(b'{"tests": []}')
    mocha = {
        "runner": "mocha",
        "tests": [
            {"file": HIDDEN, "titlePath": ["test/a.test.js::Shim", "works"], "status": "passed"},
            {"file": HIDDEN, "titlePath": ["Shim", "later"], "status": "pending"},
        ],
    }
    assert js_source.tests_in(json.dumps(mocha).encode()) == [
        {"file": HIDDEN, "ancestors": ["test/a.test.js::Shim"], "title": "works", "status": "PASSED"},
        {"file": HIDDEN, "ancestors": ["Shim"], "title": "later", "status": "SKIPPED"},
    ]
    with pytest.raises(ValueError, match="no titlePath"):
        js_source.tests_in(b'{"runner": "mocha", "tests": [{"file": "x"}]}')


def test_a_listed_name_maps_to_the_one_jest_test_in_a_hidden_file_by_the_most_faithful_form():
    tests = js_source.tests_in(
        jest_json(
            (HIDDEN, ["shout", "case"], "uppercases", "passed"),
            (HIDDEN, ["whisper"], "lowercases (slowly)", "passed"),
            (HIDDEN, ["a"], "same", "passed"),
            (HIDDEN, ["b"], "same", "failed"),
            ("/app/other/test/a.test.js", ["decoy"], "wins", "passed"),
        )
    )
    hidden = {HIDDEN}

    def mapped(name: str) -> tuple[list[str], str]:
        found, how = jsresults.map_name(name, tests, hidden)
        return [f"{' > '.join(tests[i]['ancestors'])}: {tests[i]['title']}" for i in found], how

    assert mapped("test/a.test.js | shout | case | uppercases") == (["shout > case: uppercases"], "path-suffix")
    assert mapped("/app/test/a.test.js | shout case uppercases") == (["shout > case: uppercases"], "exact")  # fullName
    assert mapped("test/a.test.js | case uppercases") == (["shout > case: uppercases"], "path-suffix, innermost")
    assert mapped("test/a.test.js | uppercases") == (["shout > case: uppercases"], "path-suffix, title")
    assert mapped("test/a.test.js | whisper | lowercases") == (
        ["whisper: lowercases (slowly)"],
        "path-suffix, title-cut",
    )
    assert mapped("test/a.test.js | a | same") == (["a: same"], "path-suffix")
    # A parser that drops the describe blocks folds both into one name: it stands for both.
    assert mapped("test/a.test.js | same") == (["a: same", "b: same"], "path-suffix, title, 2 tests")
    assert mapped("a.test.js | decoy | wins") == ([], "unmapped: not in the runner's results for the hidden test files")
    assert mapped("est/a.test.js | shout | case | uppercases")[0] == []  # a path suffix ends at a "/"
    assert mapped("no file part")[1] == "unmapped: the name has no 'file | test' form"
    folded = jsresults.confirm(
        jsresults.record(
            ["jest"],
            [("file", jest_json((HIDDEN, ["a"], "same", "passed"), (HIDDEN, ["b"], "same", "failed")))],
            "/tmp/r",
            [HIDDEN],
        ),
        {
            "listed": [{"name": "test/a.test.js | same", "parser": "PASSED", "judged_by": ["parser"]}],
            "passed": ["test/a.test.js | same"],
        },
    )
    assert folded["passed"] == [] and folded["listed"][0]["js"] == "FAILED"  # the worst of the two
    # NodeBB's run scripts put "FILE::" before each describe title; its parser takes it out again.
    nodebb = js_source.tests_in(
        json.dumps(
            {
                "runner": "mocha",
                "tests": [
                    {
                        "file": HIDDEN,
                        "titlePath": ["test/a.test.js::Translator shim", ".translate()", "should translate"],
                        "status": "passed",
                    }
                ],
            }
        ).encode()
    )
    assert jsresults.map_name("test/a.test.js | Translator shim .translate() should translate", nodebb, hidden) == (
        [0],
        "path-suffix",
    )


def test_a_listed_jest_test_passes_under_strict_only_if_the_parser_and_jests_results_agree():
    report = jest_json(
        (HIDDEN, ["shout", "case"], "uppercases", "failed"), (HIDDEN, ["whisper"], "lowercases", "passed")
    )
    forged = jest_raw([("file", report)], (JEST_F2P, "PASSED"), (JEST_P2P, "PASSED"))
    verdict = SwebenchProFlavor().regrade(jest_spec(), forged)
    assert verdict.reward == 0.0
    assert verdict.raw["reason"] == (
        f"1 listed test(s) PASSED by the parser but not by the test runner's own results, e.g. {JEST_F2P!r} (FAILED)"
    )
    assert [(e["js"], e["js_names"], e["judged_by"]) for e in verdict.raw["listed"]] == [
        ("FAILED", [f"{HIDDEN} | shout | case | uppercases"], ["parser", "js-results"]),
        ("PASSED", [f"{HIDDEN} | whisper | lowercases"], ["parser", "js-results"]),
    ]
    fixed = jest_json(
        (HIDDEN, ["shout", "case"], "uppercases", "passed"), (HIDDEN, ["whisper"], "lowercases", "passed")
    )
    honest = jest_raw([("file", fixed)], (JEST_F2P, "PASSED"), (JEST_P2P, "PASSED"))
    assert SwebenchProFlavor().regrade(jest_spec(), honest).reward == 1.0
    assert SwebenchProFlavor().regrade(jest_spec(), json.loads(json.dumps(honest))).reward == 1.0  # a stored grading
    officially = {**honest, "evaluator": strict.OFFICIAL}
    officially.pop("js_results")
    assert SwebenchProFlavor().regrade(jest_spec(), officially).reward == 1.0


@pytest.mark.parametrize(
    "reports, why",
    [
        ([], "jest wrote no results"),
        ([("symlink", None)], "a results path of jest is a symlink"),
        ([("file", b"{not json")], "a results file of jest is not one"),
        ([("file", jest_json())], "the results of jest (1 file(s)) name no test"),
        (
            [("file", jest_json((HIDDEN, ["shout", "case"], "uppercases", "passed"))), ("too-large", None)],
            "the results of jest are over 64 MiB",
        ),
    ],
)
def test_a_jest_instance_without_readable_results_is_unresolved_with_the_reason(reports, why):
    verdict = SwebenchProFlavor().regrade(jest_spec(), jest_raw(reports, (JEST_F2P, "PASSED"), (JEST_P2P, "PASSED")))
    assert verdict.reward == 0.0
    assert verdict.raw["reason"].startswith(f"no named results: {why}"), verdict.raw["reason"]
    assert verdict.raw["reason"].endswith("(run_script.sh runs a JavaScript test runner, so its results are required)")


def test_replays_output_carries_each_results_file_by_length():
    one, two = jest_json((HIDDEN, [], "t", "passed")), b'{"testResults": []}\n@@crucible-js file 3\n'
    data = (
        b"@@crucible-step run_script 0 0 5 0\n"
        + b"@@crucible-junit absent 0\n"
        + f"@@crucible-js file {len(one)}\n".encode()
        + one
        + f"@@crucible-js file {len(two)}\n".encode()
        + two
        + b"@@crucible-js symlink 0\n"
    )
    records, _, _, reports, jest = replay.parse_output(data)
    assert "run_script" in records and reports == [("absent", None)]
    assert jest == [("file", one), ("file", two), ("symlink", None)]


def _node() -> str:
    import shutil

    found = shutil.which("node")
    assert found, "these tests run the jest hook with this machine's node (Node.js is on every machine of this kind)"
    return found


def test_the_hook_skips_only_a_snapshot_write_that_would_leave_the_file_as_it_is():
    """jest saves a snapshot file holding an obsolete entry at the end of its test file, the same
    bytes, in CI mode too; a locked (root's, read-only) hidden snapshot would make that write fail
    the test file under strict. With the hook (in every node process: jest's workers too) the
    unchanged write is skipped; a changed one still fails, and other files are written as ever.
    Run as uid 1000, as the tests are, in a directory it can reach (pytest's tmp_path is root's)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as where:
        _snapshot_writes(Path(where))


def _snapshot_writes(tmp_path: Path) -> None:
    hook = tmp_path / "results-hook.js"
    hook.write_text(jsresults.hook_program(str(tmp_path / "results")))
    snap = tmp_path / "locked" / "a.test.js.snap"
    snap.parent.mkdir()
    snap.write_text("// Jest Snapshot v1\n\nexports[`a 1`] = `1`;\n")
    snap.chmod(0o444)
    snap.parent.chmod(0o1777)
    (tmp_path / "out").mkdir()
    (tmp_path / "out").chmod(0o777)
    tmp_path.chmod(0o755)
    hook.chmod(0o644)
    script = (
        "const fs = require('fs');\n"
        "const tryWrite = (file, data, opt) => { try { fs.writeFileSync(file, data, opt); return 'ok'; }"
        " catch (e) { return e.code; } };\n"
        f"const snap = {json.dumps(str(snap))};\n"
        "console.log(JSON.stringify([tryWrite(snap, fs.readFileSync(snap, 'utf8')),\n"
        "  tryWrite(snap, fs.readFileSync(snap)), tryWrite(snap, fs.readFileSync(snap, 'utf8'), {encoding: 'utf8'}),\n"
        "  tryWrite(snap, 'changed'),\n"
        f"  tryWrite({json.dumps(str(tmp_path / 'out' / 'b.snap'))}, 'new'), tryWrite({json.dumps(str(tmp_path / 'out' / 'c.txt'))}, 'x')]));\n"
    )
    as_tests = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
    done = subprocess.run(
        [*as_tests, _node(), f"--require={hook}", "-e", script], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == ["ok", "ok", "ok", "EACCES", "ok", "ok"]
    assert snap.read_text() == "// Jest Snapshot v1\n\nexports[`a 1`] = `1`;\n"
    without = subprocess.run([*as_tests, _node(), "-e", script], capture_output=True, text=True, check=True)
    assert json.loads(without.stdout)[:3] == ["EACCES", "EACCES", "EACCES"]


def test_the_hook_asks_jests_cli_alone_for_its_results_and_takes_a_processors_copy_where_the_run_wants_json(tmp_path):
    """js/results_hook.js in node's --require: jest's bin (reached through node_modules/.bin) gets
    --json --outputFile, or with the run's own --json the hook as results processor; any other
    script, and a run naming its own processor, keeps its arguments."""
    results = tmp_path / "results"
    (results / "r").mkdir(parents=True)
    hook = tmp_path / "results-hook.js"
    hook.write_text(jsresults.hook_program(str(results)))
    echo = "console.log(JSON.stringify(process.argv.slice(2)));\n"
    for rel in ("node_modules/jest/bin/jest.js", "node_modules/other/bin/jest-like.js"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(echo)
    (tmp_path / "node_modules/.bin").mkdir()
    (tmp_path / "node_modules/.bin/jest").symlink_to("../jest/bin/jest.js")

    def argv(script: str, *args: str) -> list[str]:
        done = subprocess.run(
            [_node(), f"--require={hook}", str(tmp_path / script), *args], capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    added = argv("node_modules/.bin/jest", "--verbose", "a.test.js")
    assert added[:2] == ["--verbose", "a.test.js"] and added[2] == "--json"
    assert added[3].startswith(f"--outputFile={results}/r/js-jest-") and added[3].endswith(".json")
    assert argv("node_modules/.bin/jest", "--json", "a.test.js") == [
        "--json",
        "a.test.js",
        f"--testResultsProcessor={hook}",
    ]
    before_end = argv("node_modules/.bin/jest", "--ci", "--", "--json")  # after `--`: not jest's options
    assert before_end[:2] == ["--ci", "--json"] and before_end[2].startswith("--outputFile=")
    assert before_end[3:] == ["--", "--json"]
    assert argv("node_modules/.bin/jest", "--json", "--testResultsProcessor=theirs") == [
        "--json",
        "--testResultsProcessor=theirs",
    ]
    # jest's CLI takes kebab-case too: a second outputFile or processor would make an array it refuses
    assert argv("node_modules/.bin/jest", "--output-file=o.json", "--json") == [
        "--output-file=o.json",
        "--json",
        f"--testResultsProcessor={hook}",
    ]
    assert argv("node_modules/.bin/jest", "--json", "--test-results-processor=theirs") == [
        "--json",
        "--test-results-processor=theirs",
    ]
    assert argv("node_modules/other/bin/jest-like.js", "--ci") == ["--ci"]
    # As the results processor: the aggregated results go to a file of their own, and back unchanged.
    aggregated = json.loads(jest_json((HIDDEN, ["shout"], "uppercases", "passed"), shape="processor"))
    run = (
        f"const p = require({json.dumps(str(hook))}); const r = {json.dumps(aggregated)};"
        "process.stdout.write(String(p(r) === r));"
    )
    done = subprocess.run([_node(), "-e", run], capture_output=True, text=True, check=True)
    assert done.stdout == "true"
    [written] = list((results / "r").glob("js-jest-*.json"))
    assert js_source.tests_in(written.read_bytes()) == [
        {"file": HIDDEN, "ancestors": ["shout"], "title": "uppercases", "status": "PASSED"}
    ]


def test_the_wrapping_node_puts_the_hook_back_into_node_options_once_and_runs_the_next_node_on_path(tmp_path):
    """sh/node_wrap.sh, first on PATH: a NODE_OPTIONS the run script replaced gets the hook's
    --require again (never twice), from the next node on PATH (itself left out)."""
    wrap, real = tmp_path / "node-wrap", tmp_path / "real"
    wrap.mkdir()
    real.mkdir()
    (wrap / "node").write_text(jsresults.node_wrap_program())
    (real / "node").write_text('#!/bin/bash\nprintf "%s|" "$NODE_OPTIONS" "$@"\n')
    for script in (wrap / "node", real / "node"):
        script.chmod(0o755)
    hook = f"--require={tmp_path}/results-hook.js"

    def node(options: str | None, *args: str) -> str:
        env = {"PATH": f"{wrap}:{real}:/usr/bin:/bin", **({"NODE_OPTIONS": options} if options is not None else {})}
        return subprocess.run(["node", *args], env=env, capture_output=True, text=True, check=True).stdout

    assert node(None, "yarn.js", "test") == f"{hook}|yarn.js|test|"
    assert node("--max-old-space-size=4096", "x.js") == f"--max-old-space-size=4096 {hook}|x.js|"
    assert node(f"{hook} --max-old-space-size=1", "x.js") == f"{hook} --max-old-space-size=1|x.js|"
    # Its own directory on PATH again, spelled otherwise: still the next node that is not itself.
    env = {"PATH": f"{wrap}:{wrap}/:{wrap}:{real}"}
    again = subprocess.run([str(wrap / "node"), "x.js"], env=env, capture_output=True, text=True, timeout=20)
    assert again.stdout == f"{hook}|x.js|"
    lone = subprocess.run(
        [str(wrap / "node")], env={"PATH": f"{wrap}:{wrap}/"}, capture_output=True, text=True, timeout=20
    )
    assert lone.returncode == 127 and "no node on PATH" in lone.stderr


FAKE_MOCHA_RUNNER = """\
const { EventEmitter } = require('events');
class Runner extends EventEmitter {
  run(done) {
    const test = (title, type) => ({ title, type, file: '/app/test/a.test.js', titlePath: () => ['Suite', title] });
    this.emit('pass', test('works', 'test'));
    this.emit('fail', test('breaks', 'test'));
    this.emit('pending', test('later', 'test'));
    this.emit('fail', test('"before all" hook', 'hook'));
    this.emit('end');
    if (done) done(1);
    return this;
  }
}
module.exports = Runner;
"""
"""Stands in for mocha's lib/runner.js (the events its Runner emits), so this test needs no mocha;
the real one runs in test_swe_strict.py's mocha instance."""


def test_the_hook_records_mochas_runner_events_in_mochas_cli_process_alone(tmp_path):
    results = tmp_path / "results"
    (results / "r").mkdir(parents=True)
    hook = tmp_path / "results-hook.js"
    hook.write_text(jsresults.hook_program(str(results)))
    mocha = tmp_path / "node_modules" / "mocha"
    (mocha / "lib").mkdir(parents=True)
    (mocha / "bin").mkdir()
    (mocha / "lib" / "runner.js").write_text(FAKE_MOCHA_RUNNER)
    cli = "const Runner = require('../lib/runner.js');\nnew Runner().run(() => {});\n"
    (mocha / "bin" / "mocha.js").write_text(cli)
    (tmp_path / "not-mocha.js").write_text(cli.replace("../lib/runner.js", "./node_modules/mocha/lib/runner.js"))
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "mocha").symlink_to("../mocha/bin/mocha.js")
    subprocess.run([_node(), f"--require={hook}", str(tmp_path / "not-mocha.js")], check=True)
    assert list((results / "r").iterdir()) == []  # only in mocha's own CLI process
    subprocess.run([_node(), f"--require={hook}", str(tmp_path / "node_modules" / ".bin" / "mocha")], check=True)
    [written] = list((results / "r").glob("js-mocha-*.json"))
    assert [(t["title"], t["status"]) for t in js_source.tests_in(written.read_bytes())] == [
        ("works", "PASSED"),
        ("breaks", "FAILED"),
        ("later", "SKIPPED"),
        ('"before all" hook', "FAILED"),
    ]


def test_only_test_files_whose_content_is_the_benchmarks_answer_for_listed_names():
    """Restored by before_repo_set_cmd, or selected and untouched by the patch (also as a runner's
    path pattern: element-hq selects x-test.ts for x-test.tsx), and locked (so there at the
    lock, and root's since); a selected path the patch creates (protonmail's workspace-relative
    ones name no file at base) is the patch's, and one with no file at the lock, anything's."""
    task = SimpleNamespace(
        workdir="/app",
        before_repo_set_cmd="git checkout s -- test/a-test.tsx",
        selected_test_files_to_run=["test/a-test.ts", "test/b-test.ts", "src/app/c.test.ts"],
        fail_to_pass=["test/a-test.ts | a works"],
        pass_to_pass=["src/app/c.test.ts | c works"],
    )
    created = (
        "diff --git a/src/app/c.test.ts b/src/app/c.test.ts\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/src/app/c.test.ts\n@@ -0,0 +1 @@\n+test('x', () => {});\n"
    )
    locked = {"test/a-test.tsx", "test/b-test.tsx", "src/app/c.test.ts"}  # what the lock found there
    assert strict.trusted_test_files(task, created, locked) == ["/app/test/a-test.tsx", "/app/test/b-test.tsx"]
    assert strict.trusted_test_files(task, "", locked) == [
        "/app/test/a-test.tsx",
        "/app/test/b-test.tsx",
        "/app/src/app/c.test.ts",
    ]
    assert strict.trusted_test_files(task, "", {"test/a-test.tsx"}) == ["/app/test/a-test.tsx"]  # the rest, not there
    edits_restored = created.replace("src/app/c.test.ts", "test/a-test.tsx")
    assert "/app/test/a-test.tsx" in strict.trusted_test_files(task, edits_restored, locked)  # restored over the edit
    assert strict.trusted_test_files(task, "not a diff", locked) == ["/app/test/a-test.tsx"]
    assert "test/b-test.tsx" in strict.plan(task, "").lock  # the alike is locked too, where it exists


def test_results_a_grader_cannot_afford_are_refused_with_the_reason():
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    assert jsresults.record(["jest"], [("file", deep)], "/tmp/r", [HIDDEN])["error"].startswith(
        "a results file of jest is not one"
    )
    many = jest_json(*((HIDDEN, [], f"t{i}", "passed") for i in range(jsresults.MAX_TESTS + 1)))
    assert jsresults.record(["jest"], [("file", many)], "/tmp/r", [HIDDEN])["error"] == (
        f"the results of jest name over {jsresults.MAX_TESTS} tests, refused"
    )


def test_a_printed_pass_line_refuses_only_where_the_verdict_still_reads_printed_lines():
    """`runner-output` is recorded on every grading, and refuses only where a printed pass line
    could pass a test: a listed test judged by the parser alone (tutanota's runner; `calc`'s
    unittest), or a go command that framed nothing (Go older than 1.20). Where the go command
    framed the binary's lines (Go 1.20 and later), the finding passes nothing and is recorded."""
    finding = {"rule": "runner-output", "path": "sum.go", "line": 9, "detail": "'--- PASS:'"}
    scan = {"refuse": True, "findings": [finding]}
    parser_alone = raw(strict.STRICT, (F2P, "PASSED"), (P2P, "PASSED"), scan=scan)
    verdict = SwebenchProFlavor().regrade(spec(), parser_alone)
    assert verdict.reward == 0.0 and verdict.raw["reason"] == "test-aware code: runner-output at sum.go:9 ('--- PASS:')"
    start = go_event("start")
    both = go_event("pass", GO_F2P) + go_event("pass", GO_P2P)
    framed = {**go_raw(start + both, (GO_F2P, "PASSED"), (GO_P2P, "PASSED")), "scan": scan}
    assert framed["go_json"]["framed"] is True
    verdict = SwebenchProFlavor().regrade(go_spec(), framed)
    assert verdict.reward == 1.0, verdict.raw["reason"]
    unframed = {**go_raw(both, (GO_F2P, "PASSED"), (GO_P2P, "PASSED")), "scan": scan}
    assert unframed["go_json"]["framed"] is False
    verdict = SwebenchProFlavor().regrade(go_spec(), unframed)
    assert verdict.reward == 0.0 and verdict.raw["reason"].startswith("test-aware code: runner-output at sum.go:9")
    other = {**framed, "scan": {"refuse": True, "findings": [{**finding, "rule": "stack-inspection"}]}}
    assert SwebenchProFlavor().regrade(go_spec(), other).reward == 0.0  # every other rule refuses everywhere


def _instance() -> SimpleNamespace:
    return SimpleNamespace(
        before_repo_set_cmd="git checkout b -- tests/test_calc.py\n", selected_test_files_to_run=["tests/test_calc.py"]
    )


def _chunk(header: str, old: str, new: str, body: str = "@@ -0,0 +1 @@\n+x = 1\n", extra: str = "") -> str:
    return f"diff --git {header}\n{extra}--- {old}\n+++ {new}\n{body}"


CODE = _chunk("a/calc.py b/calc.py", "a/calc.py", "b/calc.py", "@@ -1 +1 @@\n-a\n+b\n")


@pytest.mark.parametrize(
    "chunk, dropped",
    [
        (_chunk("a/tests/conftest.py b/tests/conftest.py", "/dev/null", "b/tests/conftest.py"), ["tests/conftest.py"]),
        (_chunk("a/tests/helper.py b/tests/helper.py", "/dev/null", "b/tests/helper.py"), ["tests/helper.py"]),
        # a header naming code while the lines git goes by name a test path
        (_chunk("a/calc.py b/calc.py", "a/tests/conftest.py", "b/tests/conftest.py"), ["tests/conftest.py"]),
        # a header naming a test path while the lines name code: not graded either (the test shows it end to end)
        (_chunk("a/tests/helper.py b/tests/helper.py", "a/calc.py", "b/calc.py"), ["tests/helper.py"]),
        (_chunk("a/pkg/test_x.py b/pkg/test_x.py", "/dev/null", "b/pkg/test_x.py"), ["pkg/test_x.py"]),
    ],
)
def test_strict_grades_the_patch_without_its_chunks_on_the_test_paths(chunk, dropped):
    graded, left_out = strict.graded_patch(_instance(), CODE + chunk)
    assert graded == CODE and left_out == dropped
    assert strict.graded_patch(_instance(), CODE) == (CODE, [])


def _git(repo: Path, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=False)


def _repo(tmp_path: Path, end: bytes = b"\n") -> Path:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_bytes(b"a" + end)
    (repo / "tests" / "test_calc.py").write_bytes(b"t" + end)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=c@c", "-c", "user.name=c", "commit", "-qm", "base")
    return repo


def _written(repo: Path, graded: str) -> list[str]:
    """What the image's way of applying (``git apply -v``) writes for ``graded``, by git's status."""
    done = _git(repo, "apply", "-v", "-", data=graded.encode("utf-8", "surrogateescape"))
    assert done.returncode == 0, done.stderr.decode()
    return sorted(line[3:] for line in _git(repo, "status", "--porcelain", "-uall").stdout.decode().splitlines())


MAIL = (
    "From 0f0f Mon Sep 17 00:00:00 2001\nFrom: A <a@example.com>\nDate: Tue, 1 Dec 2026 10:00:00 +0000\n"
    "Subject: [PATCH] Fix calc\n\nThe fix, with a test.\n---\n calc.py | 2 +-\n tests/conftest.py | 1 +\n"
    " 2 files changed\n\n"
)
CONFTEST = _chunk(
    "a/tests/conftest.py b/tests/conftest.py", "/dev/null", "b/tests/conftest.py", extra="new file mode 100644\n"
)


@pytest.mark.parametrize("shape", ["mail", "crlf", "copy"])
def test_strict_drops_test_path_chunks_from_patches_git_reads_in_other_shapes(tmp_path, shape):
    """Shapes git apply reads that the chunk parser did not, so the whole patch went to git and
    an honest one that added its own tests scored 0 as tampered: a ``git format-patch`` mail
    (headers and message before the first ``diff --git``, a signature after), a patch saved with
    CRLF line ends (applied to a CRLF file: git reads its header lines less the CR), and a copy
    (its header names two paths; ``copy to`` names the one written). Checked against real git."""
    end = b"\r\n" if shape == "crlf" else b"\n"
    repo = _repo(tmp_path, end)
    if shape == "mail":
        patch = MAIL + CODE + CONFTEST + "-- \n2.39.2\n\n"
    elif shape == "crlf":
        patch = (CODE + CONFTEST).replace("\n", "\r\n")
    else:
        patch = CODE + (
            "diff --git a/calc.py b/tests/conftest.py\nsimilarity index 50%\ncopy from calc.py\n"
            "copy to tests/conftest.py\n--- a/calc.py\n+++ b/tests/conftest.py\n@@ -1 +1 @@\n-a\n+b\n"
        )
    graded, left_out = strict.graded_patch(_instance(), patch)
    assert left_out == ["tests/conftest.py"]
    assert _written(repo, graded) == ["calc.py"]
    assert (repo / "calc.py").read_bytes() == b"b" + end
    # the whole patch, as under none, is what git would have written the test path from
    _git(repo, "checkout", "-q", ".")
    assert _written(repo, patch) == ["calc.py", "tests/conftest.py"]


def test_a_preamble_git_could_read_as_a_patch_leaves_the_patch_to_git():
    traditional = "--- a/tests/conftest.py\n+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+x = 1\n"
    patch = "notes\n" + traditional + CODE
    assert strict.graded_patch(_instance(), patch) == (patch, [])


def test_a_test_path_git_wrote_for_a_chunk_that_named_none_is_tampered():
    """git's reading is the last word: a patch our parser cannot read (here a traditional diff
    before the first ``diff --git``) is applied as it stands, and if git wrote a test path for
    it, the run is 0."""
    unread = "--- a/tests/conftest.py\n+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+b\n" + CODE
    assert strict.graded_patch(_instance(), unread) == (unread, [])  # not readable here: git judges it
    written = (
        "diff --git a/tests/conftest.py b/tests/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+b\n"
    )
    raw = {"defences": ["test-files-dropped"], "written": {"exit_code": 0, "output": written}}
    task = SimpleNamespace(**vars(_instance()), allow_test_aware=[])
    assert strict.test_paths_written(raw, task) == ["tests/conftest.py"]
    assert strict.refusal(raw, task, []).startswith("tampered: git wrote tests/conftest.py")
    assert strict.refusal({**raw, "defences": []}, task, []) is None  # a run stored before the drop regrades as it was
