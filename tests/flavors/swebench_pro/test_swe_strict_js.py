"""SWE-bench Pro under `strict` and `none` on the synthetic JavaScript instances (``jestshout``,
``jestown``, ``mochashout``, ``mochafile`` and ``ospec``): the golden confirmed by the runner's
own results, printed or forged results scoring 0 under `strict`, and a run script that edits
every test file as NodeBB's does (tests/swe_synth.py, swe_tasks/strict.py)."""

from __future__ import annotations

import json

import pytest
import swe_synth
import swe_synth_instances
from swe_strict_runs import crucible, graded, patch_from, row, statuses
from swe_synth_instances import JEST_OWN, JEST_SHOUT, MOCHA_FILE, MOCHA_SHOUT, OSPEC

from swe_tasks.flavor import SwebenchProFlavor

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def synth(strict_instances):
    """This module's commands pointed at the synthetic instances (generated once a session)."""
    with swe_synth.pointed_at(strict_instances):
        yield strict_instances


_JEST_FORGED_LINES = (
    "PASS test/lib.test.js\n  shout\n    case\n      \u2713 uppercases (1 ms)\n"
    "  whisper\n    \u2713 lowercases (1 ms)\n"
)


def made_at_run_time(text: str) -> str:
    """A JavaScript expression for ``text`` with each ``test`` upper-cased in the literal and put
    back at run time: the forged output names the test file (`test/lib.test.js`), which the
    scan's test-path rule reads in a literal; made so, the forgery is past the scan, and what
    stops it is the named results."""
    assert "TEST" not in text
    return f"{json.dumps(text.replace('test', 'TEST'))}.replace(/TEST/g, 'test')"


JEST_PRINT_AND_EXIT = (
    "const fs = require('fs');\n\n"
    f"fs.writeSync(1, {made_at_run_time(_JEST_FORGED_LINES)});\n"
    "process.kill(process.pid, 'SIGKILL');\n\n" + swe_synth_instances.JEST_LIB_BASE
)
"""lib.js, when jest loads it, prints jest's verbose lines for both listed tests and ends jest's
process before any real result: the official verdict is the parser's reading of that text."""

_JEST_FORGED_JSON = json.dumps(
    {
        "numTotalTestSuites": 1,
        "testResults": [
            {
                "name": "/app/test/lib.test.js",
                "assertionResults": [
                    {"ancestorTitles": ["shout", "case"], "title": "uppercases", "status": "passed"},
                    {"ancestorTitles": ["whisper"], "title": "lowercases", "status": "passed"},
                ],
            }
        ],
    }
)
JEST_FORGED_OWN_JSON = (
    "const fs = require('fs');\n\n"
    f"fs.writeSync(1, {made_at_run_time(_JEST_FORGED_JSON + chr(10))});\n"
    "process.kill(process.pid, 'SIGKILL');\n\n" + swe_synth_instances.JEST_LIB_BASE
)
"""On the instance whose run script passes --json itself: lib.js writes passing JSON to jest's
stdout (the file the run script will `cat`), and ends jest before jest writes its own."""

JEST_WRITES_ITS_OWN_RESULTS = JEST_PRINT_AND_EXIT.replace(
    "process.kill(",
    "const option = process.argv.find((a) => a.startsWith('--outputFile='));\n"
    f"if (option) fs.writeFileSync(option.slice('--outputFile='.length), {made_at_run_time(_JEST_FORGED_JSON)});\n"
    "process.kill(",
)
"""The print-and-exit attack, and before it jest's results written by the code under test itself
where jest's arguments (read in jest's own process) say jest would write them."""


def test_on_a_jest_instance_the_golden_is_confirmed_by_jests_own_results(synth, tmp_path):
    """Run by jest through yarn, with a run script that replaces NODE_OPTIONS: the root-owned
    `node` first on PATH puts the hook back, jest's CLI writes its results, and each listed test
    passes only if the parser and those results agree."""
    gold = row(synth, JEST_SHOUT)["patch"]
    official = graded(tmp_path, "jestshout-gold", gold, "none", JEST_SHOUT)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    assert "js_results" not in official["raw"] and "node-wrap" not in official["raw"]["run_script"]["command"]
    hardened = graded(tmp_path, "jestshout-gold", gold, "strict", JEST_SHOUT)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert raw["run_script"]["command"].startswith(
        'PATH="/workspace/node-wrap:$PATH" NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require=/workspace/results-hook.js" '
        "setpriv"
    )
    assert (
        raw["js_results"]["expected"] is True and raw["js_results"]["reports"] == 1 and "error" not in raw["js_results"]
    )
    assert raw["js_results"]["path"].startswith("/tmp/crucible-results-") and raw["js_results"]["path"].endswith(
        "/r/js-*.json"
    )
    # restored, locked, the patch's own never
    assert raw["js_results"]["hidden"] == ["/app/test/__snapshots__/lib.test.js.snap", "/app/test/lib.test.js"]
    assert {
        "file": "/app/test/lib.test.js",
        "ancestors": ["shout", "case"],
        "title": "uppercases",
        "status": "PASSED",
    } in raw["js_results"]["tests"]
    # What the parser read is jest's verbose text as without crucible, as uid 1000.
    assert (
        "run_script uid=1000 files=test/__snapshots__/lib.test.js.snap,test/lib.test.js"
        in raw["run_script"]["stdout_tail"]
    )
    assert "      \u2713 uppercases" in raw["run_script"]["stdout_tail"]
    # The hidden snapshot file is locked and holds an obsolete entry: jest saves it again, the
    # same bytes, and that write would fail the test file but for the hook's skip.
    assert "test/__snapshots__/lib.test.js.snap" in raw["lock"]["output"].splitlines()
    assert "1 snapshot obsolete" in raw["run_script"]["stdout_tail"]
    assert [(e["name"], e["parser"], e["js"], e["js_mapped"], e["judged_by"]) for e in raw["listed"]] == [
        ("test/lib.test.js | shout | case | uppercases", "PASSED", "PASSED", "path-suffix", ["parser", "js-results"]),
        ("test/lib.test.js | whisper | lowercases", "PASSED", "PASSED", "path-suffix", ["parser", "js-results"]),
    ]
    assert raw["rerun"]["resolved"] and raw["rerun"]["js_results"]["path"] != raw["js_results"]["path"]
    shown = crucible("show", hardened["run_id"])
    assert shown.returncode == 0 and "jest's own results (/tmp/crucible-results-" in shown.stdout, (
        shown.stdout + shown.stderr
    )
    assert "2 test(s) from 1 run(s)" in shown.stdout and "js-results-confirms" in shown.stdout
    empty = graded(tmp_path, "jestshout-empty", "", "strict", JEST_SHOUT)
    assert empty["reward"] == 0.0
    assert {e["name"]: (e["parser"], e["js"]) for e in empty["raw"]["listed"]} == {
        "test/lib.test.js | shout | case | uppercases": ("FAILED", "FAILED"),
        "test/lib.test.js | whisper | lowercases": ("PASSED", "PASSED"),
    }


def test_printing_the_parsers_passed_lines_and_exiting_first_scores_0_under_strict_on_a_jest_instance(synth, tmp_path):
    """What closes the limit on jest instances: jest's results come from its test runs, not from
    text. Under `none` the same patch resolves: the attack is real."""
    patch = patch_from(synth, tmp_path, {"lib.js": JEST_PRINT_AND_EXIT}, JEST_SHOUT)
    official = graded(tmp_path, "jest-print-and-exit", patch, "none", JEST_SHOUT)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    hardened = graded(tmp_path, "jest-print-and-exit", patch, "strict", JEST_SHOUT)
    raw = hardened["raw"]
    assert statuses(raw) == {
        "test/lib.test.js | shout | case | uppercases": ["PASSED"],
        "test/lib.test.js | whisper | lowercases": ["PASSED"],
    }  # the parser is fooled
    assert hardened["reward"] == 0.0
    assert raw["js_results"]["reports"] == 0
    assert raw["reason"].startswith("no named results: jest wrote no results"), raw["reason"]
    assert all(e["parser"] == "PASSED" and e["js"] is None for e in raw["listed"])


def test_on_a_jest_instance_whose_run_script_passes_json_itself_its_results_come_from_a_results_processor(
    synth, tmp_path
):
    """element-hq's other run scripts pass --json and parse jest's JSON on stdout: crucible's
    hook leaves that JSON where it was and takes its own copy through --testResultsProcessor.
    The same JSON written by the code under test where the run script reads it resolves under
    `none` and scores 0 under `strict`."""
    gold = row(synth, JEST_OWN)["patch"]
    hardened = graded(tmp_path, "jestown-gold", gold, "strict", JEST_OWN)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert '"numTotalTestSuites"' in raw["run_script"]["stdout_tail"]  # the run script's own JSON, on stdout
    assert [(e["name"], e["parser"], e["js"], e["js_mapped"]) for e in raw["listed"]] == [
        ("/app/test/lib.test.js | shout | case | uppercases", "PASSED", "PASSED", "exact"),
        ("/app/test/lib.test.js | whisper | lowercases", "PASSED", "PASSED", "exact"),
    ]
    patch = patch_from(synth, tmp_path, {"lib.js": JEST_FORGED_OWN_JSON}, JEST_OWN)
    official = graded(tmp_path, "jestown-forged", patch, "none", JEST_OWN)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    forged = graded(tmp_path, "jestown-forged", patch, "strict", JEST_OWN)
    assert all(e["parser"] == "PASSED" and e["js"] is None for e in forged["raw"]["listed"])
    assert forged["reward"] == 0.0 and forged["raw"]["reason"].startswith("no named results: jest wrote no results")


def test_in_process_code_writing_jests_results_itself_still_resolves_under_strict(synth, tmp_path):
    """The documented limit on jest instances (docs/swebench_pro.md): the tests run in jest's
    processes, whose arguments name the results file and whose uid owns its directory, so code
    under test can write passing results and end jest. Written with the results' names as
    literals, the scan's test-path rule reads the test file's name and stops it; made at run time,
    it still wins. This test's last part fails the day a defence closes it; then it should assert 0."""
    literal = JEST_WRITES_ITS_OWN_RESULTS.replace(made_at_run_time(_JEST_FORGED_JSON), json.dumps(_JEST_FORGED_JSON))
    assert literal != JEST_WRITES_ITS_OWN_RESULTS
    scanned = graded(
        tmp_path,
        "jest-own-results-literal",
        patch_from(synth, tmp_path, {"lib.js": literal}, JEST_SHOUT),
        "strict",
        JEST_SHOUT,
    )
    assert scanned["reward"] == 0.0
    assert scanned["raw"]["reason"].startswith('test-aware code: test-path at lib.js:5 ("{\\"numTotalTestSuites'), (
        scanned["raw"]["reason"]
    )

    patch = patch_from(synth, tmp_path, {"lib.js": JEST_WRITES_ITS_OWN_RESULTS}, JEST_SHOUT)
    hardened = graded(tmp_path, "jest-own-results", patch, "strict", JEST_SHOUT)
    raw = hardened["raw"]
    assert raw["scan"]["findings"] == []
    assert raw["js_results"]["reports"] == 1 and "error" not in raw["js_results"]
    assert all(e["parser"] == "PASSED" and e["js"] == "PASSED" for e in raw["listed"])
    assert hardened["reward"] == 1.0, raw["reason"]


_MOCHA_FORGED_REPORT = json.dumps(
    {
        "stats": {"tests": 2, "passes": 2, "failures": 0},
        "tests": [],
        "pending": [],
        "failures": [],
        "passes": [
            {"title": "uppercases", "fullTitle": "shout case uppercases", "file": "/app/test/lib.test.js"},
            {"title": "lowercases", "fullTitle": "whisper lowercases", "file": "/app/test/lib.test.js"},
        ],
    },
    indent=2,
)
MOCHA_PRINT_AND_EXIT = (
    "const fs = require('fs');\n\n"
    f"fs.writeSync(1, {made_at_run_time(_MOCHA_FORGED_REPORT + chr(10))});\n"
    "process.exit(0);\n\n" + swe_synth_instances.JEST_LIB_BASE
)
"""lib.js, when mocha loads the test file, prints the JSON reporter's report with both listed
tests passed and ends mocha's process before its runner starts."""


def test_on_a_mocha_instance_the_golden_is_confirmed_by_mochas_runner_and_print_and_exit_scores_0(synth, tmp_path):
    """NodeBB's run scripts run mocha with its JSON reporter on stdout, which the tested code can
    print itself: under `strict` the hook's record of mocha's runner events must agree."""
    gold = row(synth, MOCHA_SHOUT)["patch"]
    hardened = graded(tmp_path, "mochashout-gold", gold, "strict", MOCHA_SHOUT)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert raw["js_results"]["runners"] == ["mocha"] and raw["js_results"]["reports"] == 1
    assert {
        "file": "/app/test/lib.test.js",
        "ancestors": ["shout", "case"],
        "title": "uppercases",
        "status": "PASSED",
    } in raw["js_results"]["tests"]
    assert '"passes": [' in raw["run_script"]["stdout_tail"]  # mocha's own reporter, as without crucible
    assert [(e["name"], e["parser"], e["js"], e["js_mapped"]) for e in raw["listed"]] == [
        ("test/lib.test.js | shout case uppercases", "PASSED", "PASSED", "path-suffix"),
        ("test/lib.test.js | whisper lowercases", "PASSED", "PASSED", "path-suffix"),
    ]
    empty = graded(tmp_path, "mochashout-empty", "", "strict", MOCHA_SHOUT)
    assert empty["reward"] == 0.0
    assert {e["name"]: (e["parser"], e["js"]) for e in empty["raw"]["listed"]} == {
        "test/lib.test.js | shout case uppercases": ("FAILED", "FAILED"),
        "test/lib.test.js | whisper lowercases": ("PASSED", "PASSED"),
    }
    patch = patch_from(synth, tmp_path, {"lib.js": MOCHA_PRINT_AND_EXIT}, MOCHA_SHOUT)
    official = graded(tmp_path, "mocha-print-and-exit", patch, "none", MOCHA_SHOUT)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    forged = graded(tmp_path, "mocha-print-and-exit", patch, "strict", MOCHA_SHOUT)
    assert all(e["parser"] == "PASSED" and e["js"] is None for e in forged["raw"]["listed"])  # the parser is fooled
    assert forged["reward"] == 0.0
    assert forged["raw"]["reason"].startswith("no named results: mocha wrote no results"), forged["raw"]["reason"]


SED_THE_HIDDEN_TEST = (
    "require('child_process').execSync(\"sed -i -E 's/HEY!/hey!/' test/lib.test.js\", {stdio: 'inherit'});\n"
    "module.exports = {};\n"
)
"""A ``.mocharc.js`` (mocha loads it before any test file) that rewrites the hidden test's
expectation to what the unfixed shout() gives, with the same sed the run script uses (first on
PATH under strict: the wrapper)."""

A_NAME_THAT_IS_A_SED_COMMAND = {
    "test/lib.test.jsx/x#e;#.js": "sed -i -E 's/HEY!/hey!/' test/lib.test.js # describe('x')\n"
}
"""A file the run script's find lists, in a directory at a path the strict lock also protects
(``test/lib.test.jsx``, what a runner's pattern ``test/lib.test.js`` names too): the loop puts
its name into sed's script, where ``#e;#`` ends the substitution with the ``e`` flag, so the
line, substituted, runs as a shell command: the same rewrite of the hidden test."""


def test_a_run_script_that_edits_every_test_file_as_nodebbs_do_resolves_under_strict_with_the_edit_made_by_root(
    synth, tmp_path
):
    """22 of NodeBB's run scripts, under `set -e`, sed every test file in a find|while loop before
    mocha runs (each describe title gets its file's path, which the parser names tests by). Under
    strict the hidden ones are locked: root makes the script's own edit of them before the run
    (swe_tasks/edits.py), the script's sed of them answers with no write, and its sed of the other
    files runs as ever. Without that, the script ended at the first locked file and the gold
    patch scored 0. A selected test file the script removes itself before mocha runs (NodeBB's
    `rm -r test/activitypub*`) is left unlocked, so it goes with its helper as officially; locked,
    it outlived its helper and mocha failed loading it. An `npm install` offline finds root's
    cache in the tests' HOME, as the official run (as root) does. The names prove each file got the edit exactly once: a helper's describe is
    named by the helper's path only if its file was edited, and a second edit would name it by a
    doubled path. A patch that adds tests of its own under test/ (root's after git apply, in a
    directory the lock makes root's and sticky) gets them back as the tests' uid's, so the loop
    edits them as officially."""
    gold = row(synth, MOCHA_FILE)["patch"]
    official = graded(tmp_path, "mochafile-gold", gold, "none", MOCHA_FILE)
    assert official["reward"] == 1.0, official["raw"]["reason"]
    assert "edit" not in official["raw"]
    hardened = graded(tmp_path, "mochafile-gold", gold, "strict", MOCHA_FILE)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert raw["edit"]["exit_code"] == 0
    assert sorted(raw["edit"]["output"].split()) == [
        "test/helpers/echo.js",
        "test/helpers/whisper.js",
        "test/lib.test.js",
    ]
    assert raw["edit"]["command"].startswith("as root, for each file FILE the lock names itself of `find test/ -type f")
    assert raw["unlocked"]["files"] == ["test/retired/old.test.js"]  # the script removes it (rm), as officially
    assert (raw["home"]["exit_code"], raw["home"]["output"]) == (0, "/root/.npm\n")  # npm's offline install
    assert "added 1 package" in raw["run_script"]["stderr_tail"]
    assert "test/retired/old.test.js" not in raw["lock"]["output"].split("\n")
    assert (
        "run_script.sh's own edit of the locked test files, made by root: exit 0, 3 file(s)"
        in SwebenchProFlavor().explain(raw)
    )
    assert (
        "hidden test files left unlocked, as run_script.sh removes them itself (rm) before its runner starts: "
        "test/retired/old.test.js"
    ) in SwebenchProFlavor().explain(raw)
    ancestors = {t["title"]: t["ancestors"] for t in raw["js_results"]["tests"]}
    assert ancestors == {
        "uppercases": ["test/lib.test.js::shout", "test/lib.test.js::case"],
        "lowercases": ["test/helpers/whisper.js::whisper"],
        "repeats": ["test/helpers/echo.js::echo"],  # a listed name names it: locked
        "runs": ["test/helpers/extra.js::extra"],
    }  # the script's own sed, as the tests' uid
    assert all(t["file"] == "/app/test/lib.test.js" for t in raw["js_results"]["tests"])
    assert [(e["name"], e["parser"], e["js"], e["js_mapped"]) for e in raw["listed"]] == [
        ("test/lib.test.js | shout case uppercases", "PASSED", "PASSED", "path-suffix"),
        ("test/helpers/whisper.js | whisper lowercases", "PASSED", "PASSED", "describe-file"),
        ("test/helpers/echo.js | echo repeats", "PASSED", "PASSED", "describe-file"),
    ]
    assert raw["own"]["output"] == "1"  # lib.js, root's after git apply, the tests' uid's again
    mine = "describe('mine', () => {\n  it('works', () => {});\n});\n"
    with_tests = patch_from(
        synth,
        tmp_path,
        {"lib.js": swe_synth_instances.JEST_LIB_FIX, "test/mine.test.js": mine, "test/mine/deeper.test.js": mine},
        MOCHA_FILE,
    )
    honest = graded(tmp_path, "mochafile-gold-and-tests", with_tests, "strict", MOCHA_FILE)
    assert honest["reward"] == 1.0, honest["raw"]["reason"]
    # the agent's own tests are not graded (test-files-dropped): only lib.js was written
    assert honest["raw"]["test_files_dropped"]["files"] == ["test/mine.test.js", "test/mine/deeper.test.js"]
    assert honest["raw"]["own"]["output"] == "1"
    empty = graded(tmp_path, "mochafile-empty", "", "strict", MOCHA_FILE)
    assert empty["reward"] == 0.0
    assert {e["name"]: (e["parser"], e["js"]) for e in empty["raw"]["listed"]} == {
        "test/lib.test.js | shout case uppercases": ("FAILED", "FAILED"),
        "test/helpers/whisper.js | whisper lowercases": ("PASSED", "PASSED"),
        "test/helpers/echo.js | echo repeats": ("PASSED", "PASSED"),
    }
    patch = patch_from(synth, tmp_path, {".mocharc.js": SED_THE_HIDDEN_TEST}, MOCHA_FILE)
    rewritten = graded(tmp_path, "mochafile-sed-the-test", patch, "none", MOCHA_FILE)
    assert rewritten["reward"] == 1.0, rewritten["raw"]["reason"]  # root's run lets it rewrite the test
    refused = graded(tmp_path, "mochafile-sed-the-test", patch, "strict", MOCHA_FILE)
    assert refused["reward"] == 0.0
    assert "/usr/bin/sed: cannot rename test/sed" in refused["raw"]["run_script"]["stderr_tail"]  # the real sed's
    patch = patch_from(synth, tmp_path, A_NAME_THAT_IS_A_SED_COMMAND, MOCHA_FILE)
    executed = graded(tmp_path, "mochafile-name-runs", patch, "none", MOCHA_FILE)
    assert executed["reward"] == 1.0, executed["raw"]["reason"]  # the script's own sed, as root, runs it
    kept = graded(tmp_path, "mochafile-name-runs", patch, "strict", MOCHA_FILE)
    assert kept["reward"] == 0.0  # root edits only the files the lock names, never one below a directory
    assert sorted(kept["raw"]["edit"]["output"].split()) == [
        "test/helpers/echo.js",
        "test/helpers/whisper.js",
        "test/lib.test.js",
    ]


_OSPEC_EXIT = "process.exit(0);\n"
OSPEC_PRINTED = "console.log('All 3 assertions passed');\n" + _OSPEC_EXIT + swe_synth_instances.JEST_LIB_BASE
"""lib.js, on being required by the first test file, prints the runner's summary for the whole
suite (three assertions, as the listed name says) and ends the run before any assertion."""
OSPEC_MADE = (
    "console.log(Buffer.from('QWxsIDMgYXNzZXJ0aW9ucyBwYXNzZWQ=', 'base64').toString());\n"
    + _OSPEC_EXIT
    + swe_synth_instances.JEST_LIB_BASE
)
"""The same line made at run time (base64), past the scan."""
OSPEC_PRETEST = (
    '{\n  "name": "ospec-shape",\n  "private": true,\n  "scripts": {\n'
    '    "pretest": "echo All 3 assertions passed",\n    "test": "node test/run.js"\n  }\n}\n'
)
"""package.json runs a `pretest` script that prints the summary; npm test then fails for real,
and run_script.sh ends under `set -e`: the parser has read its line."""


def test_on_an_instance_run_by_its_own_runner_as_tutanotas_the_scan_stops_a_printed_summary_and_a_made_one_wins(
    synth, tmp_path
):
    """tutanota's 74 instances: `npm test` runs the project's own runner, whose one summary line
    the parser names the whole suite by, so no runner result confirms anything and the verdict is
    the parser's reading of text. The gold resolves under both modes, judged by the parser alone;
    the summary printed by the code under test, or by a `pretest` script the patch adds, wins
    under `none` and scores 0 under `strict` (the scan's `runner-output`); the same line made at
    run time still wins under `strict`, the documented limit (docs/swebench_pro.md). This test's
    last part fails the day a defence closes it; then it should assert 0."""
    gold = row(synth, OSPEC)["patch"]
    assert graded(tmp_path, "ospec-gold", gold, "none", OSPEC)["reward"] == 1.0
    hardened = graded(tmp_path, "ospec-gold", gold, "strict", OSPEC)
    raw = hardened["raw"]
    assert hardened["reward"] == 1.0, raw["reason"]
    assert raw["js_results"] == {"expected": False} and raw["junit"]["expected"] is False
    assert [(e["name"], e["judged_by"]) for e in raw["listed"]] == [
        ("test/tests/Suite.js | tests (3 assertions)", ["parser"])
    ]
    assert "test/tests/ShoutTest.js" in raw["lock"]["output"].split("\n")
    assert graded(tmp_path, "ospec-empty", "", "strict", OSPEC)["reward"] == 0.0

    for name, files, where in (
        ("ospec-printed", {"lib.js": OSPEC_PRINTED}, "lib.js:1"),
        ("ospec-pretest", {"package.json": OSPEC_PRETEST}, "package.json:5"),
    ):
        patch = patch_from(synth, tmp_path, files, OSPEC)
        official = graded(tmp_path, name, patch, "none", OSPEC)
        assert official["reward"] == 1.0, official["raw"]["reason"]
        forged = graded(tmp_path, name, patch, "strict", OSPEC)
        # The parser is fooled (npm also echoes the pretest's command line: the summary twice).
        assert set(statuses(forged["raw"])["test/tests/Suite.js | tests (3 assertions)"]) == {"PASSED"}
        assert forged["reward"] == 0.0
        assert forged["raw"]["reason"] == f"test-aware code: runner-output at {where} ('assertions passed')"

    made = graded(tmp_path, "ospec-made", patch_from(synth, tmp_path, {"lib.js": OSPEC_MADE}, OSPEC), "strict", OSPEC)
    assert made["raw"]["scan"]["findings"] == []
    assert made["reward"] == 1.0, made["raw"]["reason"]
