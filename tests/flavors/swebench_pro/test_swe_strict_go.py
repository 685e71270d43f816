"""SWE-bench Pro under `strict` and `none` on the synthetic Go instances (``gosum`` and its
variants): the golden confirmed by the go command's test2json events, and printed, framed or
forged results, and test-aware Go and JavaScript, scoring 0 under `strict` where they would
resolve (tests/swe_synth.py, swe_tasks/strict.py)."""

from __future__ import annotations

import pytest
import swe_synth
import swe_synth_instances
from swe_strict_runs import crucible, graded, patch_from, row, statuses
from swe_synth_instances import GO_LISTED, GO_OLD, GO_PIPED, GO_SUM, MOCHA_SHOUT

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def synth(strict_instances):
    """This module's commands pointed at the synthetic instances (generated once a session)."""
    with swe_synth.pointed_at(strict_instances):
        yield strict_instances


GO_PRINT_AND_EXIT_PLAIN = (
    'package gosum\n\nimport (\n\t"fmt"\n\t"os"\n)\n\n'
    "// Add prints the parser's result lines for every listed test and ends the test binary first.\n"
    "func Add(a, b int) int {\n"
    '\tfmt.Print("--- PASS: TestAdd (0.00s)\\n--- PASS: TestMul (0.00s)\\n")\n'
    "\tos.Exit(1)\n\treturn a - b\n}\n\n"
    "// Mul returns a times b.\nfunc Mul(a, b int) int {\n\treturn a * b\n}\n"
)
"""The print-and-exit attack on the Go instance: the parser's `--- PASS` lines for both listed
tests from the function under test, then the test binary ends before any real result line. The
lines are literals, as the scan's `runner-output` rule reads them."""

GO_PRINT_AND_EXIT = GO_PRINT_AND_EXIT_PLAIN.replace('\t"os"\n)', '\t"os"\n\t"strings"\n)').replace(
    'fmt.Print("--- PASS: TestAdd (0.00s)\\n--- PASS: TestMul (0.00s)\\n")',
    'fmt.Print(strings.ReplaceAll("--- pass: TestAdd (0.00s)\\n--- pass: TestMul (0.00s)\\n", "pass", "PASS"))',
)
"""The same with the lines made at run time, past the scan (`pass` upper-cased): what the go
command's framing, not the scan, has to stop."""

GO_FORGED_EVENTS = GO_PRINT_AND_EXIT.replace(
    'import (\n\t"fmt"\n\t"os"\n\t"strings"\n)\n\n',
    (
        'import (\n\t"fmt"\n\t"os"\n\t"strings"\n)\n\n'
        'var events = strings.ReplaceAll(`{"Action":"PASS","Package":"synth/gosum","Test":"TestAdd"}` + "\\n" +\n'
        '\t`{"Action":"PASS","Package":"synth/gosum","Test":"TestMul"}` + "\\n", "PASS", "pass")\n\n'
        "func forge(name, path string) {\n"
        "\tf, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)\n"
        "\tif err != nil {\n"
        '\t\tfmt.Printf("forge %s: %v\\n", name, err)\n'
        "\t\treturn\n\t}\n"
        "\t_, err = f.WriteString(events)\n\tf.Close()\n"
        '\tfmt.Printf("forge %s: written (%v)\\n", name, err)\n}\n\n'
    ),
).replace(
    "\tos.Exit(1)\n",
    (
        "\tos.Stdout.WriteString(events)\n\tos.Stderr.WriteString(events)\n"
        '\tforge("dev-stdout", "/dev/stdout")\n'
        '\tforge("go-stdout", fmt.Sprintf("/proc/%d/fd/1", os.Getppid()))\n'
        '\tforge("go-stderr", fmt.Sprintf("/proc/%d/fd/2", os.Getppid()))\n'
        "\tos.Exit(1)\n"
    ),
)
"""The same, and before exiting the go command's own `pass` events for both listed tests written
every way the test binary has: its stdout and stderr, /dev/stdout reopened, and the go command's
stdout and stderr reopened through /proc/<its parent>/fd (the go command's are run_script.sh's:
replay.sh's root-only FIFOs). Made at run time, past the scan."""

GO_INIT_PRINT_AND_EXIT = (
    'package gosum\n\nimport "fmt"\nimport "os"\n\n'
    'func init() { fmt.Print("--- PASS: TestAdd (0.00s)\\n--- PASS: TestMul (0.00s)\\n"); os.Exit(1) }\n'
)
"""The print-and-exit attack from a test file the patch adds: Go compiles it into the package's
test binary, whose init runs before any test."""

GO_FRAMED_LINES = GO_PRINT_AND_EXIT.replace(
    'strings.ReplaceAll("--- pass: TestAdd (0.00s)\\n--- pass: TestMul',
    'strings.ReplaceAll("\\x16--- pass: TestAdd (0.00s)\\n\\x16--- pass: TestMul',
)
"""The result lines framed as the testing package frames its own under test2json (^V first),
made at run time past the scan."""


GO_STACK_AWARE = (
    'package gosum\n\nimport (\n\t"runtime"\n\t"strings"\n)\n\n'
    "// Add answers the hidden test by its caller's name, and stays wrong for everyone else.\n"
    "func Add(a, b int) int {\n"
    "\tpc, _, _, _ := runtime.Caller(1)\n"
    '\tif strings.HasSuffix(runtime.FuncForPC(pc).Name(), ".TestAdd") {\n\t\treturn a + b\n\t}\n'
    "\treturn a - b\n}\n\n"
    "// Mul returns a times b.\nfunc Mul(a, b int) int {\n\treturn a * b\n}\n"
)
"""Test-aware Go with nothing forged: the go command's own events honestly report TestAdd passed."""

JS_STACK_AWARE = swe_synth_instances.JEST_LIB_BASE.replace(
    "function shout(s) { return s + '!'; }",
    "function shout(s) {\n  const stack = new Error().stack;\n"
    "  return /lib[.]test[.]js/.test(stack) ? `${s.toUpperCase()}!` : s + '!';\n}",
)
"""Test-aware JavaScript with nothing forged: shout() uppercases only when a test file calls it,
and mocha's runner honestly reports the test passed."""


@pytest.mark.parametrize(
    "iid, files, where",
    [
        (GO_SUM, {"sum.go": GO_STACK_AWARE}, "stack-inspection at sum.go:10 (runtime.Caller)"),
        (MOCHA_SHOUT, {"lib.js": JS_STACK_AWARE}, "stack-inspection at lib.js:2 (new Error().stack)"),
    ],
)
def test_test_aware_go_and_javascript_resolve_under_none_and_score_0_under_strict(synth, tmp_path, iid, files, where):
    """The runners' own results confirm every listed test (the go command's events, mocha's
    runner): nothing is forged, the code under test asks who calls it. The scan reads Go and
    JavaScript under the rules it reads Python by, and stops it there."""
    patch = patch_from(synth, tmp_path, files, iid)
    official = graded(tmp_path, f"aware-{iid[15:20]}", patch, "none", iid)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    hardened = graded(tmp_path, f"aware-{iid[15:20]}", patch, "strict", iid)
    raw = hardened["raw"]
    confirmed = "go_json" if iid == GO_SUM else "js"
    assert all(e["parser"] == "PASSED" and e[confirmed] == "PASSED" for e in raw["listed"]), raw["listed"]
    assert hardened["reward"] == 0.0
    assert raw["reason"].startswith(f"test-aware code: {where}"), raw["reason"]


def test_on_a_go_instance_the_golden_is_confirmed_by_the_go_commands_test2json_events(synth, tmp_path):
    gold = row(synth, GO_SUM)["patch"]
    official = graded(tmp_path, "gosum-gold", gold, "none", GO_SUM)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    assert "go_json" not in official["raw"] and "stdout_reconstructed" not in official["raw"]["run_script"]
    hardened = graded(tmp_path, "gosum-gold", gold, "strict", GO_SUM)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert raw["go_json"]["expected"] is True and raw["go_json"]["how"] == "added" and "error" not in raw["go_json"]
    assert raw["go_json"]["framed"] is True  # Go 1.24's start events
    assert {"name": "TestAdd", "status": "PASSED"} in raw["go_json"]["tests"]
    assert raw["run_script"]["command"].startswith(
        'GOFLAGS="${GOFLAGS:+$GOFLAGS }-json -exec=/workspace/go-test-exec" setpriv'
    )
    # The parser read the text rebuilt from the events: the run script's own line, go test's -v lines.
    assert raw["run_script"]["stdout_reconstructed"] is True
    assert "run_script uid=1000 files=sum_test.go" in raw["run_script"]["stdout_tail"]
    assert (
        "--- PASS: TestAdd (" in raw["run_script"]["stdout_tail"] and '"Action"' not in raw["run_script"]["stdout_tail"]
    )
    assert [(e["name"], e["parser"], e["go_json"], e["judged_by"]) for e in raw["listed"]] == [
        ("TestAdd", "PASSED", "PASSED", ["parser", "go-json"]),
        ("TestMul", "PASSED", "PASSED", ["parser", "go-json"]),
    ]
    assert raw["rerun"]["resolved"] and raw["rerun"]["go_json"]["how"] == "added"
    empty = graded(tmp_path, "gosum-empty", "", "strict", GO_SUM)
    assert empty["reward"] == 0.0
    assert {e["name"]: (e["parser"], e["go_json"]) for e in empty["raw"]["listed"]} == {
        "TestAdd": ("FAILED", "FAILED"),
        "TestMul": ("PASSED", "PASSED"),
    }


def test_a_go_instance_that_also_runs_go_list_gets_its_events_from_a_go_that_adds_json_to_go_test_alone(
    synth, tmp_path
):
    """teleport's run scripts test the packages `go list` names: GOFLAGS=-json would turn those
    into JSON objects. A root-owned `go` first on run_script.sh's PATH gives -json to `go test`
    alone; `go list` prints what it printed, and printed result lines are output, not results."""
    gold = row(synth, GO_LISTED)["patch"]
    assert graded(tmp_path, "golisted-gold", gold, "none", GO_LISTED)["reward"] == 1.0
    hardened = graded(tmp_path, "golisted-gold", gold, "strict", GO_LISTED)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert raw["go_json"]["how"] == "wrapped" and raw["go_json"]["expected"] is True and "error" not in raw["go_json"]
    assert {"name": "TestAdd", "status": "PASSED"} in raw["go_json"]["tests"]
    assert raw["run_script"]["command"].startswith(
        'PATH="/workspace/go-wrap:$PATH" GOFLAGS="${GOFLAGS:+$GOFLAGS }-exec=/workspace/go-test-exec" setpriv'
    )
    assert "packages: synth/gosum\n" in raw["run_script"]["stdout_tail"]  # go list as without crucible
    assert raw["run_script"]["stdout_reconstructed"] is True
    assert [(e["name"], e["go_json"], e["judged_by"]) for e in raw["listed"]] == [
        ("TestAdd", "PASSED", ["parser", "go-json"]),
        ("TestMul", "PASSED", ["parser", "go-json"]),
    ]
    patch = patch_from(synth, tmp_path, {"sum.go": GO_PRINT_AND_EXIT}, GO_LISTED)
    assert graded(tmp_path, "golisted-print-and-exit", patch, "none", GO_LISTED)["reward"] == 1.0
    forged = graded(tmp_path, "golisted-print-and-exit", patch, "strict", GO_LISTED)
    assert statuses(forged["raw"]) == {"TestAdd": ["PASSED"], "TestMul": ["PASSED"]}  # the parser is fooled
    assert forged["reward"] == 0.0 and forged["raw"]["reason"].startswith("no named results: "), forged["raw"]["reason"]


def test_printing_the_parsers_passed_lines_and_exiting_first_scores_0_under_strict_on_a_go_instance(synth, tmp_path):
    """What closes the limit on Go instances: a `--- PASS` line the tested code prints is an
    output event, never a result. Under `none` the same patch resolves: the attack is real."""
    patch = patch_from(synth, tmp_path, {"sum.go": GO_PRINT_AND_EXIT}, GO_SUM)
    official = graded(tmp_path, "go-print-and-exit", patch, "none", GO_SUM)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    hardened = graded(tmp_path, "go-print-and-exit", patch, "strict", GO_SUM)
    raw = hardened["raw"]
    # The parser is fooled under strict too (it reads the rebuilt text): both listed tests read PASSED.
    assert statuses(raw) == {"TestAdd": ["PASSED"], "TestMul": ["PASSED"]}
    assert hardened["reward"] == 0.0
    # No test finished before the binary ended: the events name no result at all.
    assert raw["go_json"]["tests"] == [] and raw["go_json"]["events"] > 0
    assert raw["reason"].startswith("no named results: the go command wrote no test2json result event naming a test"), (
        raw["reason"]
    )
    assert all(e["parser"] == "PASSED" and e["go_json"] is None for e in raw["listed"])


def test_on_a_go_instance_json_events_forged_by_the_tested_code_are_output_not_results(synth, tmp_path):
    """The go command's pass events written by the test binary itself: through its stdout, its
    stderr or /dev/stdout they reach the go command as output (an output event); the go
    command's own stdout and stderr (replay.sh's root-only FIFOs) cannot be reopened."""
    patch = patch_from(synth, tmp_path, {"sum.go": GO_FORGED_EVENTS}, GO_SUM)
    hardened = graded(tmp_path, "go-forged-events", patch, "strict", GO_SUM)
    raw = hardened["raw"]
    text = raw["run_script"]["stdout_tail"]
    assert "forge dev-stdout: written" in text
    for stream in ("go-stdout", "go-stderr"):
        assert (
            f"forge {stream}: open /proc/" in text
            and "permission denied" in text.split(f"forge {stream}: ")[1].split("\n")[0]
        )
    assert '{"Action":"pass","Package":"synth/gosum","Test":"TestAdd"}' in text  # rebuilt from output events
    assert raw["go_json"]["tests"] == []  # the forged lines were output, none a result
    assert hardened["reward"] == 0.0 and raw["reason"].startswith("no named results: "), raw["reason"]


def test_in_process_go_code_framing_its_own_result_lines_still_resolves_under_strict(synth, tmp_path):
    """The documented limit on Go instances (docs/swebench_pro.md): the test binary is the code
    under test's process, so it can frame result lines as the testing package frames its own
    (^V first), and the go command makes them results. This test fails the day a defence closes
    it; then it should assert 0."""
    patch = patch_from(synth, tmp_path, {"sum.go": GO_FRAMED_LINES}, GO_SUM)
    hardened = graded(tmp_path, "go-framed-lines", patch, "strict", GO_SUM)
    raw = hardened["raw"]
    assert all(e["parser"] == "PASSED" and e["go_json"] == "PASSED" for e in raw["listed"])
    assert hardened["reward"] == 1.0, raw["reason"]


def test_on_a_go_older_than_1_20_the_scan_stops_printed_result_lines_and_lines_made_at_run_time_still_win(
    synth, tmp_path
):
    """Go 1.19 (as SWE-bench Pro's teleport images on golang:1.16 and 1.18): its go command asks
    the test binary for no framing and makes results of the binary's plain text, printed lines
    included. The raw grade says so (`framed`: no `start` event), and `crucible show` too. The
    scan's `runner-output` rule stops the print-and-exit attack written as literals in the code;
    in a test file the patch adds, strict does not grade it (`test-files-dropped`); the same
    lines made at run time are the documented limit there (they score 0 on Go 1.24, by the
    framing: `test_printing_the_parsers_passed_lines_and_exiting_first_scores_0_under_strict_on_a_go_instance`).
    This test's last part fails the day a defence closes it; then it should assert 0."""
    gold = graded(tmp_path, "goold-gold", row(synth, GO_OLD)["patch"], "strict", GO_OLD)
    raw = gold["raw"]
    assert gold["reward"] == 1.0, raw["reason"]
    assert raw["go_json"]["how"] == "added" and raw["go_json"]["framed"] is False
    assert [(e["name"], e["go_json"]) for e in raw["listed"]] == [("TestAdd", "PASSED"), ("TestMul", "PASSED")]
    shown = crucible("show", gold["run_id"])
    assert "unframed: a go command older than 1.20" in shown.stdout, shown.stdout + shown.stderr

    printed = patch_from(synth, tmp_path, {"sum.go": GO_PRINT_AND_EXIT_PLAIN}, GO_OLD)
    assert graded(tmp_path, "goold-printed", printed, "none", GO_OLD)["reward"] == 1.0
    hardened = graded(tmp_path, "goold-printed", printed, "strict", GO_OLD)
    raw = hardened["raw"]
    assert all(e["parser"] == "PASSED" and e["go_json"] == "PASSED" for e in raw["listed"])  # unframed: both fooled
    assert hardened["reward"] == 0.0
    assert raw["reason"] == "test-aware code: runner-output at sum.go:10 ('--- PASS:')", raw["reason"]
    # The same from a test file of the agent's: its init runs in the test binary before any test.
    # Under strict that file is not graded (test-files-dropped), and the listed tests fail on the bug.
    in_test = patch_from(synth, tmp_path, {"zz_test.go": GO_INIT_PRINT_AND_EXIT}, GO_OLD)
    assert graded(tmp_path, "goold-init", in_test, "none", GO_OLD)["reward"] == 1.0
    hardened = graded(tmp_path, "goold-init", in_test, "strict", GO_OLD)
    assert hardened["reward"] == 0.0
    assert hardened["raw"]["test_files_dropped"]["files"] == ["zz_test.go"]
    assert "required test(s) not PASSED" in hardened["raw"]["reason"], hardened["raw"]["reason"]

    made = patch_from(synth, tmp_path, {"sum.go": GO_PRINT_AND_EXIT}, GO_OLD)
    limit = graded(tmp_path, "goold-made", made, "strict", GO_OLD)
    raw = limit["raw"]
    assert raw["scan"]["findings"] == [] and raw["go_json"]["framed"] is False
    assert all(e["parser"] == "PASSED" and e["go_json"] == "PASSED" for e in raw["listed"])
    assert limit["reward"] == 1.0, raw["reason"]


def test_go_events_forged_into_a_pipe_that_run_script_reads_go_test_through_still_resolve_under_strict(synth, tmp_path):
    """The documented limit where run_script.sh filters go test's output (`2>&1 | awk ...`): the
    go command's stdout is then a pipe of the tests' uid, which the test binary reopens through
    /proc/<its parent>/fd/1 and writes the go command's own pass events into. This test fails the
    day a defence closes it; then it should assert 0."""
    patch = patch_from(synth, tmp_path, {"sum.go": GO_FORGED_EVENTS}, GO_PIPED)
    hardened = graded(tmp_path, "go-piped-forged-events", patch, "strict", GO_PIPED)
    raw = hardened["raw"]
    assert "forge go-stdout: written" in raw["run_script"]["stdout_tail"]
    assert all(e["parser"] == "PASSED" and e["go_json"] == "PASSED" for e in raw["listed"])
    assert hardened["reward"] == 1.0, raw["reason"]
