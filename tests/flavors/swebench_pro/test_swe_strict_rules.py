"""crucible-strict's pure parts (swe_tasks/strict.py): which mode gets which evaluator, the
instance's test files, the end marker's cut, and the verdict regraded from a stored raw grade
(worst status, the scan's refusal and its allowances, the differential re-run's agreement, the
JUnit report's confirmation, printed pass lines); the patch graded without its chunks on the test
paths. The go command's events are in test_swe_strict_rules_go.py, the JavaScript runners' own
results in test_swe_strict_rules_js.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from swe_raw import F2P, GO_F2P, GO_P2P, P2P, go_event, go_raw, go_spec, raw, spec

from engine.config.schema import IntegrityConfig, with_defences
from engine.util.paths import PROJECT_ROOT
from envs.coding.schema import AllowTestAware
from swe_tasks import junit, strict
from swe_tasks.defences import SwebenchIntegrity
from swe_tasks.flavor import SwebenchProFlavor


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


@pytest.mark.slow
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
