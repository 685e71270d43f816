"""crucible-strict's pure parts on a Go instance (swe_tasks/strict.py, gojson.py): which run script
gets the go command's test2json events and how, the text rebuilt from them, each test by its worst
status, a listed test confirmed by the events, and the wrapping go that adds -json."""

from __future__ import annotations

import json
import subprocess

import pytest
from swe_raw import GO_F2P, GO_P2P, go_event, go_raw, go_spec

from envs.integrity.sources import gojson as go_source
from swe_tasks import gojson
from swe_tasks.flavor import SwebenchProFlavor


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
