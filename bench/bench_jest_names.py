"""Do listed jest test names map to jest's own results? crucible-strict's name mapping
(swe_tasks/jestjson.py, ``map_name``) measured on real jest output read by parsers.

A suite of our own with what real suites have (describe blocks three deep, ``test.each`` and
``describe.each`` rows, titles with parentheses, the same title in two describes and in two
files, skipped, todo and failing tests, top-level tests, non-ASCII titles) is run by real jest
(``swe_synth.JS_PACKAGES``, installed by the host's npm into a cache directory) under
crucible's hook (js/jest_hook.js, through ``node --require``): once verbose (jest's text, as
element-hq's and protonmail's run scripts print it) and once with ``--json`` (as element-hq's
other run scripts do). Each parser then reads that output, and every name it reports goes
through ``map_name`` against jest's results (the hook's file): mapped to exactly one test, with
the same status, or not.

The parsers: by default the synthetic ones (tests/swe_synth.py). ``--mirror GIT_DIR`` reads
instead, at bench time, every distinct ``parser.py`` of the SWE-bench Pro run scripts that
``runs_jest`` (a bare mirror of the benchmark's public repository; nothing of it is kept).

    .venv/bin/python bench/bench_jest_names.py [--mirror /work/.mirror/scaleapi+SWE-bench_Pro-os/repo]
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

import swe_synth  # noqa: E402
from engine.util.tables import format_table  # noqa: E402
from swe_tasks import jestjson  # noqa: E402

CACHE = Path.home() / ".cache" / "crucible-bench" / "jest"

LIB = ("function add(a, b) { return a + b; }\n"
       "function shout(s) { return `${s.toUpperCase()}!`; }\nmodule.exports = { add, shout };\n")
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


def ensure_jest() -> Path:
    """jest (``swe_synth.JS_PACKAGES``) in the cache directory, installed once by the host's npm."""
    marker = CACHE / ".installed"
    if marker.exists() and marker.read_text() == json.dumps(swe_synth.JS_PACKAGES):
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "package.json").write_text('{"private": true}\n')
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-package-lock", "--ignore-scripts",
                    *swe_synth.JS_PACKAGES], cwd=CACHE, check=True, capture_output=True)
    marker.write_text(json.dumps(swe_synth.JS_PACKAGES))
    return CACHE


def run_jest(project: Path, jest_home: Path, results: Path, *args: str) -> tuple[str, str, list[dict]]:
    """jest in ``project`` under crucible's hook: (stdout, stderr, the tests in the results it wrote)."""
    for old in (results / "r").glob("jest-*.json"):
        old.unlink()
    hook = results / "jest-hook.js"
    hook.write_text(jestjson.hook_program(str(results)))
    done = subprocess.run(["node", f"--require={hook}", str(jest_home / "node_modules" / ".bin" / "jest"),
                           "--ci", "--verbose", f"--rootDir={project}", *args], cwd=project, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(results), "LANG": "C.UTF-8"})
    reports = [p.read_bytes() for p in sorted((results / "r").glob("jest-*.json"))]
    assert reports, "jest wrote no results under the hook: " + done.stderr[-2000:]
    return done.stdout, done.stderr, jestjson.merged(t for report in reports for t in jestjson.tests_in(report))


_OWN_JSON = re.compile(rb"(?<![\w-])--json(?![\w-])")


def parsers(mirror: Path | None) -> dict[str, tuple[bytes, int, bool]]:
    """sha256[:8] -> (parser.py, how many jest instances use it, whether their run scripts pass
    --json themselves: the parser then reads jest's JSON)."""
    if mirror is None:
        return {"synth-verbose": (swe_synth.JEST_PARSER.encode(), 1, False),
                "synth-own-json": (swe_synth.JEST_OWN_PARSER.encode(), 1, True)}

    def show(rel: str) -> bytes:
        return subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{rel}"], capture_output=True, check=True).stdout

    ids = subprocess.run(["git", "-C", str(mirror), "ls-tree", "HEAD:run_scripts", "--name-only"], capture_output=True,
                         text=True, check=True).stdout.split()
    found: dict[str, tuple[bytes, int, bool]] = {}
    for iid in ids:
        run_script = show(f"run_scripts/{iid}/run_script.sh")
        if not jestjson.runs_jest(run_script):
            continue
        parser = show(f"run_scripts/{iid}/parser.py")
        key = hashlib.sha256(parser).hexdigest()[:8]
        found[key] = (parser, found.get(key, (parser, 0, False))[1] + 1, bool(_OWN_JSON.search(run_script)))
    return found


def parse(parser: bytes, stdout: str, stderr: str) -> tuple[list[dict], str]:
    """(the names and statuses the parser reports, why it reported none)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "parser.py").write_bytes(parser)
        (work / "stdout.log").write_text(stdout)
        (work / "stderr.log").write_text(stderr)
        done = subprocess.run([sys.executable, "-S", "parser.py", "stdout.log", "stderr.log", "output.json"], cwd=work,
                              capture_output=True, text=True, timeout=60)
        try:
            return json.loads((work / "output.json").read_text()).get("tests") or [], ""
        except (OSError, ValueError):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return [], f"parser.py exit {done.returncode}, no output.json: {last}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", type=Path, help="a bare mirror of the SWE-bench Pro repository (read at bench time)")
    args = ap.parse_args()
    jest_home = ensure_jest()
    with tempfile.TemporaryDirectory(prefix="crucible-jest-names-") as tmp:
        project, results = Path(tmp) / "app", Path(tmp) / "results"
        (project / "test").mkdir(parents=True)
        (results / "r").mkdir(parents=True)
        (project / "package.json").write_text('{"name": "names", "private": true, "jest": {"testEnvironment": "node"}}\n')
        (project / "lib.js").write_text(LIB)
        (project / "test" / "tricky.test.js").write_text(TRICKY)
        (project / "test" / "other.test.js").write_text(OTHER)
        (project / "test" / "failing.test.js").write_text(FAILING)
        hidden = {str(project / "test" / name) for name in ("tricky.test.js", "other.test.js", "failing.test.js")}
        v_out, v_err, v_tests = run_jest(project, jest_home, results, "test/")
        # As element-hq's verbose run scripts: `2>&1` (all on stdout); protonmail's parsers read
        # stderr. With --json, as element-hq's other run scripts: the JSON on stdout, jest's text on stderr.
        verbose = (v_err + v_out, v_err + v_out)
        j_out, j_err, j_tests = run_jest(project, jest_home, results, "--json", "test/")
        assert v_tests == j_tests, "the two runs' results differ"
        rows = []
        unmapped_examples: dict[str, list[str]] = collections.defaultdict(list)
        for key, (parser, uses, own_json) in sorted(parsers(args.mirror).items(), key=lambda kv: -kv[1][1]):
            source = "--json" if own_json else "verbose"
            reported, why = parse(parser, j_out, j_err) if own_json else parse(parser, *verbose)
            mapped = agree = 0
            hows: collections.Counter[str] = collections.Counter()
            for entry in reported:
                found, how = jestjson.map_name(str(entry.get("name")), v_tests, hidden)
                if not found:
                    unmapped_examples[key].append(f"{entry.get('name')} ({how})")
                    continue
                mapped += 1
                hows[how] += 1
                agree += all(v_tests[i]["status"] == entry.get("status") for i in found)
            rows.append([key, uses, source, len(reported), mapped, len(reported) - mapped, agree,
                         ", ".join(f"{h}: {n}" for h, n in hows.most_common()) or why])
        print(f"jest tests in the suite: {len(v_tests)} ({collections.Counter(t['status'] for t in v_tests)})")
        print(format_table(["parser", "instances", "output read", "names", "mapped", "unmapped", "same status",
                            "how mapped"], rows, max_cell=None))
        for key, names in unmapped_examples.items():
            print(f"\n{key}: unmapped ({len(names)}):")
            for name in names[:12]:
                print("  " + name.replace(str(project) + "/", ""))


if __name__ == "__main__":
    if shutil.which("node") is None or shutil.which("npm") is None:
        sys.exit("bench_jest_names: needs node and npm on this machine")
    main()
