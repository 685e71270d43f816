"""crucible-strict's second source of named results on JavaScript instances: the test runner's own
results, from jest's CLI or mocha's runner.

The official verdict is parser.py reading run_script.sh's output: jest's verbose lines (``PASS
file``, describe blocks, ``✓ title``) or the JSON a reporter prints on stdout (``jest --json``,
``mocha --reporter=json``). Both are text the tested code can print itself, then end the test
process before the runner reports anything (the print-and-exit attack). The runner's own record
of its tests is made in its process from what the tests did.

Under ``strict``, where the instance's run_script.sh runs jest or mocha (``runners``: a line of
the official asset, not a comment, names ``jest`` or ``mocha``, or runs a package's ``test``
script with a flag only jest's CLI takes, as element-hq's ``yarn test --passWithNoTests`` and
protonmail's ``yarn workspace X test --runInBand``; decided from the pinned asset, never from
whether results turned up, which the tested code decides by ending the run early), sh/replay.sh:

- writes ``js/results_hook.js`` root's into the grading's work directory and appends
  ``--require`` of it to ``NODE_OPTIONS`` for run_script.sh;
- puts a root-owned ``node`` (sh/node_wrap.sh) first on run_script.sh's PATH, which appends the
  same ``--require`` again where the run script replaced ``NODE_OPTIONS`` (protonmail's ``export
  NODE_OPTIONS=--max-old-space-size=4096``), then runs the next node on PATH: yarn, npm, npx and
  the runners' bins start through ``#!/usr/bin/env node``. (A package script that replaces it
  goes unhooked: yarn puts a ``node`` of its own first on the script's PATH; no results then);
- the hook acts only in the runner's CLI process (``process.argv[1]`` is jest's or mocha's bin;
  yarn, npm and jest's workers load it and are left alone). In jest's it adds ``--json
  --outputFile=<results>/r/js-jest-<pid>-<ms>.json`` to jest's arguments, or where the run passes
  ``--json`` or ``--outputFile`` itself (its parser reads jest's JSON from stdout)
  ``--testResultsProcessor=<the hook>``, whose results go to such a file and back to jest
  unchanged; a run that already names a processor gets nothing (no results: unresolved,
  fail-closed). In mocha's it listens to its runner's ``pass``/``fail``/``pending`` events and
  writes them at the run's ``end`` (``js-mocha-...json``); mocha's one reporter stays the run's.
  Each run writes its own file (protonmail runs jest once per selected test file);
- after run_script.sh's end and the kill, every ``r/js-*.json`` is read (a regular file, not a
  symlink, as the tests' uid) and sent back (``@@crucible-js STATE BYTES``).

A listed test then passes only if the parser says PASSED AND the results say passed for the
tests the name maps to (``map_name``): tests in one of the instance's hidden test files whose
content is the benchmark's (``strict.trusted_test_files``: restored by ``before_repo_set_cmd``,
or selected and not touched by the patch; root's and read-only: a test file the patch adds or
edits never answers for a hidden test), whose path is the
name's file part (before the first `` | ``) or ends with it, and whose describe blocks and title
give the rest in one of the forms the benchmark's parsers build (``forms``: ``a | b | title``,
the runner's full title joined by spaces, the innermost describe and the title, the title alone,
the title cut before a parenthesis; NodeBB's run scripts put ``FILE::`` before each describe
title and its parser takes it out again), the most faithful form first; where several answer to
the first form any does (a parser that drops the describe blocks folds them into one name),
their worst status. No such test is unmapped and not passed. A test reported by several runs
counts as failed if any failed it, else passed if any passed it (a run that filtered it out
reports it pending). Pure functions of the recorded raw grade, so a stored run regrades. What
this does not stop: the results directory is the tests' uid's (the runner writes there), so
any process of that uid can write, replace or delete a results file: code under test in the
runner's processes (mocha's, jest's or its workers'), or a ``pretest``/``posttest`` script the
patch adds to package.json; and code in the runner's process can change its record before it
is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import GradeError
from engine.util import shell
from envs.integrity import sources
from envs.integrity.sources.jsresults import JsTest, merged

_JEST = re.compile(rb"(?<![\w.@-])jest(?![\w.-])")
_MOCHA = re.compile(rb"(?<![\w.@-])_?mocha(?![\w.-])")
"""A command word (``node_modules/.bin/jest`` too), not a package scope (``@jest/globals``) or a file (``jest.config.js``)."""
_TEST_SCRIPT = re.compile(rb"(?<![\w.-])(yarn|npm|pnpm)\b[^#\n]*(?<![\w.:-])test(?![\w:.-])")
_JEST_ONLY_FLAGS = re.compile(
    rb"--(passWithNoTests|testPathPattern|testNamePattern|runInBand|maxWorkers|"
    rb"logHeapUsage|testTimeout|detectOpenHandles|forceExit|json|ci|coverage)(?![\w-])"
)
"""Flags of jest's CLI that no other JavaScript runner in the benchmark's run scripts is given
through a package's test script (mocha's and tutanota's own take other spellings)."""
REPORTS = "r"
"""Where in the grading's results directory the runners' results are written (the tests' uid's directory)."""
HOOK = "results-hook.js"
"""The hook's name in the grading's work directory (sh/node_wrap.sh finds it beside its own directory)."""
MAX_REPORTS = 200
MAX_TESTS = 100_000
"""More tests than this over all results files is refused (the largest honest run in the benchmark
lists a few thousand): the tests' uid can write these files, and must not stall the grader."""


def _runs(line: bytes) -> list[str]:
    if line.lstrip().startswith(b"#"):
        return []
    jest = _JEST.search(line) or (_TEST_SCRIPT.search(line) and _JEST_ONLY_FLAGS.search(line))
    return [*(["jest"] if jest else []), *(["mocha"] if _MOCHA.search(line) else [])]


def runners(run_script: bytes) -> list[str]:
    """Which runners the official run_script.sh runs, of jest and mocha: a line that is not a
    comment names it, or (jest) runs a package's ``test`` script (yarn, npm, pnpm) with a flag
    only jest's CLI takes."""
    found = {runner for line in run_script.split(b"\n") for runner in _runs(line)}
    return [runner for runner in ("jest", "mocha") if runner in found]


def last_runner_line(run_script: bytes) -> int:
    """The index of the script's last line that runs jest or mocha (``runners``), -1 for none;
    lines as bash reads them (ended by a newline only, as ``edits.removals`` counts them)."""
    return max((i for i, line in enumerate(run_script.split(b"\n")) if _runs(line)), default=-1)


def hook_program(results_dir: str) -> str:
    """The hook (js/results_hook.js, its header comment left out) with the results' directory
    in it, which sh/replay.sh writes root's into the grading's work directory."""
    lines = (Path(__file__).parent / "js" / "results_hook.js").read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    while start < len(lines) and (not lines[start].strip() or lines[start].lstrip().startswith("//")):
        start += 1
    return f"'use strict';\nconst REPORTS = {json.dumps(f'{results_dir}/{REPORTS}')};\n" + "".join(lines[start:])


def node_wrap_program() -> str:
    """The ``node`` first on run_script.sh's PATH (sh/node_wrap.sh, its comments left out)."""
    return "#!/bin/bash\n" + shell.script(__file__, "exec_next.sh") + shell.script(__file__, "node_wrap.sh")


def shown(work: str) -> str:
    """What the recorded run_script command shows for the environment added."""
    return f'PATH="{work}/node-wrap:$PATH" NODE_OPTIONS="${{NODE_OPTIONS:+$NODE_OPTIONS }}--require={work}/{HOOK}" '


STATES = {
    "absent": "{runners} wrote no results (it did not run, was stopped, or the run named its own results processor)",
    "symlink": "a results path of {runners} is a symlink, refused",
    "not-a-file": "a results path of {runners} is not a regular file, refused",
    "too-large": "the results of {runners} are over 64 MiB in all, refused",
    "too-many": f"there are over {MAX_REPORTS} results files of {{runners}}, refused",
    "unreadable": "the results of {runners} could not be read (no mkdir, cat or wc in the image?)",
}


def record(
    runs: Sequence[str], reports: Sequence[tuple[str, bytes | None]], results_dir: str, hidden: Sequence[str] = ()
) -> dict[str, Any]:
    """The raw grade's ``js_results``: which runners the instance runs (``runs``; any makes their
    results required), where they were written, the hidden test files whose tests may answer for
    listed names (``hidden``: absolute, ``strict.trusted_test_files``), each file's sha256, and
    the tests (merged over the runs) or why there are none."""
    if not runs:
        return {"expected": False}
    found: dict[str, Any] = {
        "expected": True,
        "runners": list(runs),
        "path": f"{results_dir}/{REPORTS}/js-*.json",
        "hidden": list(hidden),
    }
    named = " and ".join(runs)
    bad = [state for state, _ in reports if state != "file"]
    if bad or not reports:
        state = bad[0] if bad else "absent"
        why = STATES.get(state, "the results of {runners} were not read (" + state + ")")
        return {**found, "reports": len(reports), "error": why.format(runners=named)}
    tests: list[JsTest] = []
    digests = []
    for _, data in reports:
        assert data is not None
        digests.append(hashlib.sha256(data).hexdigest())
        try:
            tests += sources.get("js-results").parse(data)
        except GradeError as exc:
            return {**found, "reports": len(reports), "error": f"a results file of {named} is not one: {exc}"}
        if len(tests) > MAX_TESTS:
            return {
                **found,
                "reports": len(reports),
                "error": f"the results of {named} name over {MAX_TESTS} tests, refused",
            }
    found.update(reports=len(reports), sha256=digests, tests=merged(tests))
    if not found["tests"]:
        found["error"] = f"the results of {named} ({len(reports)} file(s)) name no test"
    return found


def _squeezed(text: str) -> str:
    return " ".join(text.split())


_FILE_PREFIX = re.compile(r"^(\S+)::")
"""NodeBB's run scripts put ``FILE::`` before each describe title (sed over the test files) and
its parser takes it out of the name again, naming the test by that FILE: the file the describe
is written in, which for a describe in a helper the test file requires is not the runner's file
(swe_tasks/edits.py)."""


def _describe_file(test: Mapping[str, Any]) -> str:
    """The ``FILE`` before the test's outermost prefixed describe title ('' for none)."""
    for ancestor in test["ancestors"]:
        if (prefixed := _FILE_PREFIX.match(str(ancestor))) is not None:
            return prefixed.group(1)
    return ""


def forms(test: Mapping[str, Any]) -> list[set[str]]:
    """What a parser may write after a test's file and `` | ``, most faithful first: the
    describe blocks and title joined by `` | `` or by spaces (the runner's full title), also with
    a ``FILE::`` before a describe title taken out; the innermost describe and the title; the
    title alone; then each of those with the title cut before its first ``(`` or its last `` (``
    (parsers that strip a duration cut there); for a test that did not run, each with jest's
    ``skipped``/``todo`` word before the title. Whitespace squeezed."""
    ancestors, title = [str(a) for a in test["ancestors"]], str(test["title"])
    unprefixed = [_FILE_PREFIX.sub("", a) for a in ancestors]

    def tiers(name: str) -> list[set[str]]:
        full = {joined for a in (ancestors, unprefixed) for joined in (" | ".join([*a, name]), " ".join([*a, name]))}
        innermost = {f"{ancestors[-1]} | {name}", f"{ancestors[-1]} {name}"} if ancestors else set()
        return [full, innermost, {name}]

    cut = {title.split("(")[0].strip(), title[: title.rfind(" (")].strip() if " (" in title else title} - {"", title}
    found = tiers(title) + [set().union(*(tier for name in sorted(cut) for tier in tiers(name)))]
    if test.get("status") == "SKIPPED":  # jest's verbose line says "○ skipped TITLE" / "✎ todo TITLE"
        found = [
            tier | {f.replace(title, f"{word} {title}") for f in tier for word in ("skipped", "todo")} for tier in found
        ]
    return [{_squeezed(f) for f in tier} for tier in found]


def _same_file(name_file: str, path: str) -> bool:
    return bool(name_file) and (path == name_file or path.endswith("/" + name_file.removeprefix("./")))


def map_name(
    name: str,
    tests: Sequence[Mapping[str, Any]],
    files: Collection[str],
    cache: dict[int, list[set[str]]] | None = None,
) -> tuple[list[int], str]:
    """(the indices in ``tests`` of the tests ``name`` stands for, how), or ([], why none).
    Only tests in ``files`` (the instance's hidden test files whose content is the benchmark's,
    absolute: ``strict.trusted_test_files``) count, so a test file the patch adds or edits
    cannot answer for a hidden test; a test answers for the name's file part by its own file
    or by the ``FILE::`` of its outermost prefixed describe (``describe-file``: NodeBB's name a
    describe a helper holds by the helper), where that file is one of ``files`` too (the helper as
    the benchmark has it: ``strict.described_test_files``); the first tier of ``forms`` that any of them answers
    to is taken. Where it holds several (a parser that drops the describe blocks folds two tests with
    one title into one name), the name stands for all of them, as the parser's worst status
    does. ``cache``: each test's ``forms`` by index, kept between calls over the same tests."""
    file, sep, rest = name.partition(" | ")
    if not sep:
        return [], "unmapped: the name has no 'file | test' form"
    file, rest = file.strip(), _squeezed(rest)
    cache = {} if cache is None else cache
    described = file if any(_same_file(file, f) for f in files) else ""
    candidates = [
        i
        for i, t in enumerate(tests)
        if str(t["file"]) in files and (_same_file(file, str(t["file"])) or _same_file(described, _describe_file(t)))
    ]
    for i in candidates:
        if i not in cache:
            cache[i] = forms(tests[i])
    for tier in range(4):
        found = [i for i in candidates if rest in cache[i][tier]]
        if found:
            by_file = [i for i in found if _same_file(file, str(tests[i]["file"]))]
            how = [
                *(["path-suffix"] if any(str(tests[i]["file"]) != file for i in by_file) else []),
                *(["describe-file"] if len(by_file) < len(found) else []),
                *([("innermost", "title", "title-cut")[tier - 1]] if tier else []),
                *([f"{len(found)} tests"] if len(found) > 1 else []),
            ]
            return found, ", ".join(how) or "exact"
    return [], "unmapped: not in the runner's results for the hidden test files"


_SEVERITY = {"PASSED": 0, "SKIPPED": 1, "FAILED": 2}


def confirm(results: Mapping[str, Any] | None, confirmed: Mapping[str, Any]) -> dict[str, Any]:
    """``confirmed`` (swe_tasks/junit.py's ``confirm``) with the runner's say added where its
    results were expected (mapped to the tests of the record's ``hidden`` files, ``map_name``): each
    entry's ``js`` status (the worst of the tests it maps to), ``js_names`` and ``js_mapped``,
    ``judged_by`` + ``js-results``; a test stays passed only if the results say PASSED too;
    without results, ``js_error`` says why. Without a ``js_results`` record (graded before it
    existed, or no jest or mocha) ``confirmed`` unchanged."""
    if not (results and results.get("expected")):
        return dict(confirmed)
    error = str(results["error"]) if results.get("error") else None
    tests = [] if error else [t for t in results.get("tests") or [] if isinstance(t, Mapping)]
    files = {str(f) for f in results.get("hidden") or []}
    passed = set(confirmed["passed"])
    entries = []
    cache: dict[int, list[set[str]]] = {}
    for entry in confirmed["listed"]:
        found, how = ([], "no results") if error else map_name(entry["name"], tests, files, cache)
        said = max((str(tests[i]["status"]) for i in found), key=lambda s: _SEVERITY.get(s, 3), default=None)
        names = [" | ".join([tests[i]["file"], *tests[i]["ancestors"], tests[i]["title"]]) for i in found]
        entries.append(
            {**entry, "js": said, "js_names": names, "js_mapped": how, "judged_by": [*entry["judged_by"], "js-results"]}
        )
        if said != "PASSED":
            passed.discard(entry["name"])
    found_all = {**confirmed, "listed": entries, "passed": [e["name"] for e in entries if e["name"] in passed]}
    return {**found_all, "js_error": error} if error else found_all


def reason(confirmed: Mapping[str, Any]) -> str | None:
    """Why the runner's results keep a run unresolved that the parser alone would pass, or None."""
    if confirmed.get("js_error"):
        return (
            f"no named results: {confirmed['js_error']} (run_script.sh runs a JavaScript test runner, "
            "so its results are required)"
        )
    denied = [e for e in confirmed["listed"] if e["parser"] == "PASSED" and "js" in e and e["js"] != "PASSED"]
    if not denied:
        return None
    first = denied[0]
    said = first["js"] or first["js_mapped"]
    return (
        f"{len(denied)} listed test(s) PASSED by the parser but not by the test runner's own results, "
        f"e.g. {first['name']!r} ({said})"
    )
