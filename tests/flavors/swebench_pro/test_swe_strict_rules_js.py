"""crucible-strict's pure parts on a JavaScript instance (swe_tasks/strict.py, jsresults.py): which
run script is jest's or mocha's, their own results read and merged, a listed name mapped to one
test, a listed test confirmed by the results, and the hook that asks the runner for them."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from swe_raw import raw

from envs.integrity.sources import jsresults as js_source
from swe_tasks import gojson, jsresults, junit, replay, strict
from swe_tasks.flavor import SwebenchProFlavor

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


@pytest.mark.slow
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
the real one runs in test_swe_strict_js.py's mocha instance."""


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


@pytest.mark.slow
def test_results_a_grader_cannot_afford_are_refused_with_the_reason():
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    assert jsresults.record(["jest"], [("file", deep)], "/tmp/r", [HIDDEN])["error"].startswith(
        "a results file of jest is not one"
    )
    many = jest_json(*((HIDDEN, [], f"t{i}", "passed") for i in range(jsresults.MAX_TESTS + 1)))
    assert jsresults.record(["jest"], [("file", many)], "/tmp/r", [HIDDEN])["error"] == (
        f"the results of jest name over {jsresults.MAX_TESTS} tests, refused"
    )
