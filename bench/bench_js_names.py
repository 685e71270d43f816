"""Do listed test names map to the JavaScript runner's own results? crucible-strict's name
mapping (swe_tasks/jsresults.py, ``map_name``) measured on real jest and mocha output read by
parsers.

Suites of our own with what real suites have (describe blocks three deep, ``test.each`` and
``describe.each`` rows, titles with parentheses, the same title in two describes and in two
files, skipped, todo and failing tests, top-level tests, non-ASCII titles; for mocha also
describe titles with NodeBB's ``FILE::`` before them, as its run scripts' sed leaves them) run
through real jest and mocha (``swe_synth_assets.JS_PACKAGES``, installed by the host's npm into a cache
directory) under crucible's hook (js/results_hook.js, through ``node --require``): jest once
verbose (its text, as element-hq's and protonmail's run scripts print it) and once with
``--json`` (as element-hq's other run scripts do), mocha with its JSON reporter (as NodeBB's).
Each parser then reads the output its run scripts produce, and every name it reports goes
through ``map_name`` against the runner's results (the hook's files): mapped, with the same
status, or not.

The parsers: by default the synthetic ones (tests/swe_synth.py). ``--mirror GIT_DIR`` reads
instead, at bench time, every distinct ``parser.py`` of the SWE-bench Pro run scripts that run
jest or mocha (``jsresults.runners``; a bare mirror of the benchmark's public repository;
nothing of it is kept).

    .venv/bin/python bench/bench_js_names.py [--mirror /work/.mirror/scaleapi+SWE-bench_Pro-os/repo]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import swe_synth_assets  # noqa: E402

from engine.util.tables import format_table  # noqa: E402
from envs.integrity.sources import jsresults as js_source  # noqa: E402
from swe_tasks import jsresults  # noqa: E402

CACHE = Path.home() / ".cache" / "crucible-bench" / "js"
APP = "/app"
"""Where the benchmark's images keep the project: the runners' output reads as if it were there."""

LIB = (
    "function add(a, b) { return a + b; }\n"
    "function shout(s) { return `${s.toUpperCase()}!`; }\nmodule.exports = { add, shout };\n"
)
TRICKY = """\
const { add, shout } = require('../lib');

describe('add', () => {
  test('adds two numbers', () => expect(add(1, 2)).toBe(3));
  test.each([[1, 1, 2], [2, 3, 5]])('adds %i + %i (each row)', (a, b, want) => expect(add(a, b)).toBe(want));
  describe('with negatives', () => {
    describe('deeply', () => {
      test('adds -1 and -2', () => expect(add(-1, -2)).toBe(-3));
    });
    test('handles (parenthesised) input', () => expect(add(-1, 1)).toBe(0));
    test('calls add() twice', () => expect(add(add(1, 1), 1)).toBe(3));
  });
  test.skip('is skipped', () => {});
  test.todo('one day');
});

describe('shout', () => {
  test('adds two numbers', () => expect(shout('a')).toBe('A!'));
  it('keeps ünïcödé — and dashes', () => expect(shout('ü')).toBe('Ü!'));
});

describe.each([['en'], ['fr']])('locale %s', (locale) => {
  test('greets', () => expect(locale.length).toBe(2));
});

test('a top-level test', () => expect(add(0, 0)).toBe(0));
"""
OTHER = """\
const { add } = require('../lib');

describe('add', () => {
  test('adds two numbers', () => expect(add(2, 2)).toBe(4));
});
"""
FAILING = """\
const { add } = require('../lib');

describe('add', () => {
  test('fails on purpose', () => expect(add(1, 1)).toBe(3));
  test('passes beside it', () => expect(add(1, 1)).toBe(2));
});
"""
"""A file with a failure: jest prints it as FAIL (some parsers read only PASS files)."""
MOCHA_NODEBB = """\
const assert = require('assert');

describe('test/nodebb.mocha.js::Translator shim', () => {
  describe('.translate()', () => {
    it('should translate (with parentheses)', () => assert.strictEqual(1, 1));
    it('fails on purpose', () => assert.strictEqual(1, 2));
    it.skip('is pending', () => {});
  });
});
describe('test/nodebb.mocha.js::new Translator(language)', () => {
  it('should throw if not passed a language', () => assert.throws(() => { throw new Error('x'); }));
});
"""
"""As NodeBB's test files are after its run scripts' sed: ``FILE::`` before each describe title."""
MOCHA_PLAIN = """\
const assert = require('assert');

describe('User', () => {
  describe('.create()', () => {
    it('creates a user', () => assert.ok(true));
    [1, 2].forEach((n) => it(`accepts ${n} (row)`, () => assert.ok(n)));
  });
  it('creates a user', () => assert.ok(true));
});
it('a root-level test', () => assert.ok(true));
"""


def ensure_packages() -> Path:
    """jest and mocha (``swe_synth_assets.JS_PACKAGES``) in the cache directory, installed once by the host's npm."""
    marker = CACHE / ".installed"
    if marker.exists() and marker.read_text() == json.dumps(swe_synth_assets.JS_PACKAGES):
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "package.json").write_text('{"private": true}\n')
    subprocess.run(
        [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--ignore-scripts",
            *swe_synth_assets.JS_PACKAGES,
        ],
        cwd=CACHE,
        check=True,
        capture_output=True,
    )
    marker.write_text(json.dumps(swe_synth_assets.JS_PACKAGES))
    return CACHE


def run_runner(project: Path, home: Path, results: Path, *argv: str) -> tuple[str, str, list[dict]]:
    """A runner's bin (``argv[0]``, under the cache's node_modules/.bin) in ``project`` under
    crucible's hook: (stdout, stderr, the tests in the results it wrote)."""
    for old in (results / "r").glob("js-*.json"):
        old.unlink()
    hook = results / jsresults.HOOK
    hook.write_text(jsresults.hook_program(str(results)))
    done = subprocess.run(
        ["node", f"--require={hook}", str(home / "node_modules" / ".bin" / argv[0]), *argv[1:]],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(results), "LANG": "C.UTF-8"},
    )
    reports = [p.read_bytes() for p in sorted((results / "r").glob("js-*.json"))]
    assert reports, f"{argv[0]} wrote no results under the hook: " + done.stderr[-2000:]
    tests = js_source.merged(t for report in reports for t in js_source.tests_in(report))
    # As if the project were the images' /app (parsers strip "/app/" from paths, some crudely).
    for test in tests:
        test["file"] = APP + test["file"].removeprefix(str(project))
    return done.stdout.replace(str(project), APP), done.stderr.replace(str(project), APP), tests


_OWN_JSON = re.compile(rb"(?<![\w-])--json(?![\w-])")


def parsers(mirror: Path | None) -> dict[str, tuple[bytes, int, str]]:
    """sha256[:8] -> (parser.py, how many instances use it, the output it reads: ``jest`` (verbose),
    ``jest --json`` (where the run scripts pass --json themselves) or ``mocha``)."""
    if mirror is None:
        return {
            "synth-verbose": (swe_synth_assets.JEST_PARSER.encode(), 1, "jest"),
            "synth-own-json": (swe_synth_assets.JEST_OWN_PARSER.encode(), 1, "jest --json"),
            "synth-mocha": (swe_synth_assets.MOCHA_PARSER.encode(), 1, "mocha"),
        }

    def show(rel: str) -> bytes:
        return subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{rel}"], capture_output=True, check=True).stdout

    ids = subprocess.run(
        ["git", "-C", str(mirror), "ls-tree", "HEAD:run_scripts", "--name-only"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    found: dict[str, tuple[bytes, int, str]] = {}
    for iid in ids:
        run_script = show(f"run_scripts/{iid}/run_script.sh")
        runners = jsresults.runners(run_script)
        if not runners:
            continue
        kind = "mocha" if runners == ["mocha"] else "jest --json" if _OWN_JSON.search(run_script) else "jest"
        parser = show(f"run_scripts/{iid}/parser.py")
        key = hashlib.sha256(parser).hexdigest()[:8]
        found[key] = (parser, found.get(key, (parser, 0, kind))[1] + 1, kind)
    return found


def parse(parser: bytes, stdout: str, stderr: str) -> tuple[list[dict], str]:
    """(the names and statuses the parser reports, why it reported none)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "parser.py").write_bytes(parser)
        (work / "stdout.log").write_text(stdout)
        (work / "stderr.log").write_text(stderr)
        done = subprocess.run(
            [sys.executable, "-S", "parser.py", "stdout.log", "stderr.log", "output.json"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=60,
        )
        try:
            return json.loads((work / "output.json").read_text()).get("tests") or [], ""
        except (OSError, ValueError):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return [], f"parser.py exit {done.returncode}, no output.json: {last}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", type=Path, help="a bare mirror of the SWE-bench Pro repository (read at bench time)")
    args = ap.parse_args()
    home = ensure_packages()
    with tempfile.TemporaryDirectory(prefix="crucible-js-names-") as tmp:
        project, results = Path(tmp) / "app", Path(tmp) / "results"
        (project / "test").mkdir(parents=True)
        (results / "r").mkdir(parents=True)
        (project / "package.json").write_text(
            '{"name": "names", "private": true, "jest": {"testEnvironment": "node"}}\n'
        )
        (project / "lib.js").write_text(LIB)
        suites = {
            "tricky.test.js": TRICKY,
            "other.test.js": OTHER,
            "failing.test.js": FAILING,
            "nodebb.mocha.js": MOCHA_NODEBB,
            "plain.mocha.js": MOCHA_PLAIN,
        }
        for name, text in suites.items():
            (project / "test" / name).write_text(text)
        hidden = {f"{APP}/test/{name}" for name in suites}
        jest = ("jest", "--ci", "--verbose", f"--rootDir={project}", "--testMatch=**/*.test.js")
        v_out, v_err, v_tests = run_runner(project, home, results, *jest, "test/")
        j_out, j_err, j_tests = run_runner(project, home, results, *jest, "--json", "test/")
        m_out, m_err, m_tests = run_runner(
            project, home, results, "mocha", "--reporter=json", "test/nodebb.mocha.js", "test/plain.mocha.js"
        )
        assert v_tests == j_tests, "the two jest runs' results differ"
        # As element-hq's verbose run scripts: `2>&1` (all on stdout); protonmail's parsers read
        # stderr. With --json, as element-hq's other run scripts: the JSON on stdout, jest's text
        # on stderr. mocha's JSON reporter on stdout, as NodeBB's run scripts print it.
        outputs = {
            "jest": (v_err + v_out, v_err + v_out, v_tests),
            "jest --json": (j_out, j_err, j_tests),
            "mocha": (m_out, m_err, m_tests),
        }
        rows = []
        unmapped_examples: dict[str, list[str]] = collections.defaultdict(list)
        for key, (parser, uses, kind) in sorted(parsers(args.mirror).items(), key=lambda kv: -kv[1][1]):
            stdout, stderr, tests = outputs[kind]
            reported, why = parse(parser, stdout, stderr)
            mapped = agree = 0
            hows: collections.Counter[str] = collections.Counter()
            for entry in reported:
                found, how = jsresults.map_name(str(entry.get("name")), tests, hidden)
                if not found:
                    unmapped_examples[key].append(f"{entry.get('name')} ({how})")
                    continue
                mapped += 1
                hows[how] += 1
                agree += all(tests[i]["status"] == entry.get("status") for i in found)
            rows.append(
                [
                    key,
                    uses,
                    kind,
                    len(reported),
                    mapped,
                    len(reported) - mapped,
                    agree,
                    ", ".join(f"{h}: {n}" for h, n in hows.most_common()) or why,
                ]
            )
        for kind, (_, _, tests) in outputs.items():
            print(f"{kind}: {len(tests)} tests ({dict(collections.Counter(t['status'] for t in tests))})")
        print(
            format_table(
                ["parser", "instances", "output read", "names", "mapped", "unmapped", "same status", "how mapped"],
                rows,
                max_cell=None,
            )
        )
        for key, names in unmapped_examples.items():
            print(f"\n{key}: unmapped ({len(names)}):")
            for name in names[:12]:
                print("  " + name)


if __name__ == "__main__":
    if shutil.which("node") is None or shutil.which("npm") is None:
        sys.exit("bench_jest_names: needs node and npm on this machine")
    main()
