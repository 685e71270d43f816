"""crucible-strict's second source of named results on jest instances: jest's own JSON results.

The official verdict is parser.py reading run_script.sh's output for jest's verbose lines
(``PASS file``, describe blocks, ``✓ title``): text the tested code can print itself, then end
the test process before jest reports anything (the print-and-exit attack). jest's aggregated
results are made in jest's main process from what its test runs returned, not from text.

Under ``strict``, where the instance's run_script.sh runs jest (``runs_jest``: a line of the
official asset, not a comment, names ``jest``, or runs a package's ``test`` script with a flag
only jest's CLI knows, as element-hq's ``yarn test --passWithNoTests`` and protonmail's ``yarn
workspace X test --runInBand``; decided from the pinned asset, never from whether results turned
up, which the tested code decides by ending the run early), sh/replay.sh:

- writes ``js/jest_hook.js`` root's into the grading's work directory and appends ``--require``
  of it to ``NODE_OPTIONS`` for run_script.sh;
- puts a root-owned ``node`` (sh/node_wrap.sh) first on run_script.sh's PATH, which appends the
  same ``--require`` again where a run script or package script replaced ``NODE_OPTIONS``
  (protonmail's ``export NODE_OPTIONS=--max-old-space-size=4096``), then runs the next node on
  PATH: yarn, npm and jest's own bin start through ``#!/usr/bin/env node``;
- the hook acts only in jest's CLI process (``process.argv[1]`` is jest's bin; its workers and
  yarn load it and are left alone): it adds ``--json --outputFile=<results>/r/jest-<pid>-<ms>.json``
  to jest's arguments, or where run_script.sh passes ``--json`` or ``--outputFile`` itself (its
  parser reads jest's JSON from stdout) ``--testResultsProcessor=<the hook>``, whose results go
  to such a file and back to jest unchanged; a run that already names a processor gets nothing
  (no report: unresolved, fail-closed). Each jest run writes its own file (protonmail runs jest
  once per listed test);
- after run_script.sh's end and the kill, every ``r/jest-*.json`` is read (a regular file, not a
  symlink, as the tests' uid) and sent back (``@@crucible-jest STATE BYTES``).

A listed test then passes only if the parser says PASSED AND the reports say passed for the one
jest test the name maps to (``map_name``): a test in one of the instance's hidden test files
(root's and read-only: a test file the patch adds never answers for a hidden test), whose path
is the name's file part (before the first `` | ``) or ends with it, and whose describe blocks
and title give the rest in one of the forms the benchmark's parsers build (``forms``: ``a | b |
title``, jest's ``fullName``, the innermost describe and the title, the title alone, the title
cut before a parenthesis), the most faithful form first; where several answer to the first form
any does (a parser that drops the describe blocks folds them into one name), their worst status.
No such test is unmapped and not passed. A test
reported by several runs counts as failed if any failed it, else passed if any passed it (a run
that filtered it out reports it pending). Pure functions of the recorded raw grade, so a stored
run regrades. What this does not stop: code in jest's processes (the tests run in them) can
write a report itself, or rewrite jest's results before they are written.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping, Sequence

from engine.util import shell

_JEST = re.compile(rb"(?<![\w.@/-])jest(?![\w-])")
_TEST_SCRIPT = re.compile(rb"(?<![\w.-])(yarn|npm|pnpm)\b[^#\n]*(?<![\w.:-])test(?![\w:.-])")
_JEST_ONLY_FLAGS = re.compile(rb"--(passWithNoTests|testPathPattern|testNamePattern|runInBand|maxWorkers|"
                              rb"logHeapUsage|testTimeout|detectOpenHandles|forceExit|json|ci|coverage)(?![\w-])")
"""Flags of jest's CLI that no other JavaScript runner in the benchmark's run scripts is given
(mocha's and tutanota's own take other spellings)."""
_STATUS = {"passed": "PASSED", "failed": "FAILED"}
"""jest's assertion statuses; every other one (pending, skipped, todo, disabled, focused) is SKIPPED."""
REPORTS = "r"
"""Where in the grading's results directory jest's reports are written (the tests' uid's directory)."""
MAX_REPORTS = 200


def _code_lines(run_script: bytes) -> list[bytes]:
    return [line for line in run_script.splitlines() if not line.lstrip().startswith(b"#")]


def runs_jest(run_script: bytes) -> bool:
    """Whether the official run_script.sh runs jest: a line that is not a comment names ``jest``,
    or runs a package's ``test`` script (yarn, npm, pnpm) with a flag only jest's CLI knows."""
    lines = _code_lines(run_script)
    return any(_JEST.search(line) or (_TEST_SCRIPT.search(line) and _JEST_ONLY_FLAGS.search(line)) for line in lines)


def hook_program(results_dir: str) -> str:
    """The hook (js/jest_hook.js, its header comment left out) with the reports' directory in it,
    which sh/replay.sh writes root's into the grading's work directory."""
    lines = (Path(__file__).parent / "js" / "jest_hook.js").read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    while start < len(lines) and (not lines[start].strip() or lines[start].lstrip().startswith("//")):
        start += 1
    return ("'use strict';\n" f"const REPORTS = {json.dumps(f'{results_dir}/{REPORTS}')};\n" + "".join(lines[start:]))


def node_wrap_program() -> str:
    """The ``node`` first on run_script.sh's PATH (sh/node_wrap.sh, its comments left out)."""
    return "#!/bin/bash\n" + shell.script(__file__, "node_wrap.sh")


def shown(work: str) -> str:
    """What the recorded run_script command shows for the environment added."""
    return f'PATH="{work}/node-wrap:$PATH" NODE_OPTIONS="${{NODE_OPTIONS:+$NODE_OPTIONS }}--require={work}/jest-hook.js" '


STATES = {"absent": "jest wrote no results (it did not run, was stopped, or the run named its own results processor)",
          "symlink": "a jest results path is a symlink, refused",
          "not-a-file": "a jest results path is not a regular file, refused",
          "too-large": "jest's results are over 64 MiB in all, refused",
          "too-many": f"there are over {MAX_REPORTS} jest results files, refused",
          "unreadable": "jest's results could not be read (no mkdir, cat or wc in the image?)"}


def tests_in(report: bytes) -> list[dict[str, Any]]:
    """Each test in one report: ``{file, ancestors, title, status}``. Both shapes jest writes are
    read: ``--json``'s (``testResults[].name``, ``assertionResults``) and the aggregated results a
    processor gets (``testFilePath``, ``testResults``). Raises ValueError for what is neither."""
    data = json.loads(report)
    if not isinstance(data, dict) or not isinstance(data.get("testResults"), list):
        raise ValueError("not jest's results: no testResults list")
    found = []
    for suite in data["testResults"]:
        if not isinstance(suite, dict):
            raise ValueError("a testResults entry is not an object")
        path = suite.get("name", suite.get("testFilePath"))
        cases = suite.get("assertionResults", suite.get("testResults")) or []
        if not isinstance(path, str) or not isinstance(cases, list):
            raise ValueError("a test file's results have no path or no list of tests")
        for case in cases:
            if not (isinstance(case, dict) and isinstance(case.get("title"), str)
                    and isinstance(case.get("ancestorTitles"), list)
                    and all(isinstance(a, str) for a in case["ancestorTitles"])):
                raise ValueError(f"a test in {path} has no title or ancestorTitles")
            found.append({"file": path, "ancestors": list(case["ancestorTitles"]), "title": case["title"],
                          "status": _STATUS.get(str(case.get("status")), "SKIPPED")})
    return found


def merged(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per test (file, ancestors, title) over every run: FAILED if any run failed it,
    else PASSED if any passed it, else SKIPPED (a run whose name filter left it out reports it pending)."""
    rank = {"FAILED": 2, "PASSED": 1, "SKIPPED": 0}
    found: dict[tuple[str, tuple[str, ...], str], str] = {}
    for test in tests:
        key = (str(test["file"]), tuple(test["ancestors"]), str(test["title"]))
        if key not in found or rank[test["status"]] > rank[found[key]]:
            found[key] = str(test["status"])
    return [{"file": f, "ancestors": list(a), "title": t, "status": s} for (f, a, t), s in sorted(found.items())]


def record(expected: bool, reports: Sequence[tuple[str, bytes | None]], results_dir: str) -> dict[str, Any]:
    """The raw grade's ``jest``: whether this instance runs jest (so its results are required),
    where they were written, each report's sha256, and the tests (merged over the runs) or why
    there are none."""
    found: dict[str, Any] = {"expected": expected, "path": f"{results_dir}/{REPORTS}/jest-*.json"}
    if not expected:
        return {"expected": False}
    bad = [state for state, _ in reports if state != "file"]
    if bad or not reports:
        state = bad[0] if bad else "absent"
        return {**found, "reports": len(reports), "error": STATES.get(state, f"jest's results were not read ({state})")}
    tests: list[dict[str, Any]] = []
    digests = []
    for _, data in reports:
        assert data is not None
        digests.append(hashlib.sha256(data).hexdigest())
        try:
            tests += tests_in(data)
        except ValueError as exc:
            return {**found, "reports": len(reports), "error": f"a jest results file is not jest's JSON: {exc}"}
    found.update(reports=len(reports), sha256=digests, tests=merged(tests))
    if not found["tests"]:
        found["error"] = f"jest's results ({len(reports)} file(s)) name no test"
    return found


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def forms(test: Mapping[str, Any]) -> list[set[str]]:
    """What a parser may write after a test's file and `` | ``, most faithful first: the
    describe blocks and title joined by `` | `` or by spaces (jest's ``fullName``); the innermost
    describe and the title; the title alone; then each of those with the title cut before its
    first ``(`` or its last `` (`` (parsers that strip a duration cut there); for a test that did
    not run, each with jest's ``skipped``/``todo`` word before the title. Whitespace squeezed."""
    ancestors, title = [str(a) for a in test["ancestors"]], str(test["title"])

    def tiers(name: str) -> list[set[str]]:
        innermost = {f"{ancestors[-1]} | {name}", f"{ancestors[-1]} {name}"} if ancestors else set()
        return [{" | ".join([*ancestors, name]), " ".join([*ancestors, name])}, innermost, {name}]

    cut = {title.split("(")[0].strip(), title[:title.rfind(" (")].strip() if " (" in title else title} - {"", title}
    found = tiers(title) + [set().union(*(tier for name in sorted(cut) for tier in tiers(name)))]
    if test.get("status") == "SKIPPED":  # jest's verbose line says "○ skipped TITLE" / "✎ todo TITLE"
        found = [tier | {f.replace(title, f"{word} {title}") for f in tier for word in ("skipped", "todo")}
                 for tier in found]
    return [{_squeezed(f) for f in tier} for tier in found]


def _same_file(name_file: str, path: str) -> bool:
    return bool(name_file) and (path == name_file or path.endswith("/" + name_file.removeprefix("./")))


def _hidden(path: str, files: Collection[str]) -> bool:
    return path in files or any(path.startswith(f"{f}/") for f in files)


def map_name(name: str, tests: Sequence[Mapping[str, Any]], files: Collection[str]) -> tuple[list[int], str]:
    """(the indices in ``tests`` of the jest tests ``name`` stands for, how), or ([], why none).
    Only tests in ``files`` (the instance's hidden test files, absolute: root's and read-only
    under strict) count, so a test file the patch adds cannot answer for a hidden test; the
    first tier of ``forms`` that any of them answers to is taken. Where it holds several (a
    parser that drops the describe blocks folds two tests with one title into one name), the
    name stands for all of them, as the parser's worst status does."""
    file, sep, rest = name.partition(" | ")
    if not sep:
        return [], "unmapped: the name has no 'file | test' form"
    file, rest = file.strip(), _squeezed(rest)
    candidates = [(i, forms(t)) for i, t in enumerate(tests)
                  if _hidden(str(t["file"]), files) and _same_file(file, str(t["file"]))]
    for tier in range(4):
        found = [i for i, tiers in candidates if rest in tiers[tier]]
        if found:
            how = [*(["path-suffix"] if any(str(tests[i]["file"]) != file for i in found) else []),
                   *([("innermost", "title", "title-cut")[tier - 1]] if tier else []),
                   *([f"{len(found)} tests"] if len(found) > 1 else [])]
            return found, ", ".join(how) or "exact"
    return [], "unmapped: not in jest's results for the hidden test files"


_SEVERITY = {"PASSED": 0, "SKIPPED": 1, "FAILED": 2}


def confirm(jest: Mapping[str, Any] | None, confirmed: Mapping[str, Any], files: Collection[str]) -> dict[str, Any]:
    """``confirmed`` (swe_tasks/junit.py's ``confirm``) with jest's say added where its results
    were expected (``files``: the hidden test files' absolute paths, ``map_name``): each entry's
    ``jest`` status (the worst of the tests it maps to), ``jest_names`` and ``jest_mapped``,
    ``judged_by`` + ``jest``; a test stays passed only if jest says PASSED too; without results,
    ``jest_error`` says why. Without a ``jest`` record (graded before it existed, or no jest)
    ``confirmed`` unchanged."""
    if not (jest and jest.get("expected")):
        return dict(confirmed)
    error = str(jest["error"]) if jest.get("error") else None
    tests = [] if error else [t for t in jest.get("tests") or [] if isinstance(t, Mapping)]
    passed = set(confirmed["passed"])
    entries = []
    for entry in confirmed["listed"]:
        found, how = ([], "no results") if error else map_name(entry["name"], tests, files)
        said = max((str(tests[i]["status"]) for i in found), key=lambda s: _SEVERITY.get(s, 3), default=None)
        names = [" | ".join([tests[i]["file"], *tests[i]["ancestors"], tests[i]["title"]]) for i in found]
        entries.append({**entry, "jest": said, "jest_names": names, "jest_mapped": how,
                        "judged_by": [*entry["judged_by"], "jest"]})
        if said != "PASSED":
            passed.discard(entry["name"])
    found_all = {**confirmed, "listed": entries, "passed": [e["name"] for e in entries if e["name"] in passed]}
    return {**found_all, "jest_error": error} if error else found_all


def reason(confirmed: Mapping[str, Any]) -> str | None:
    """Why jest's results keep a run unresolved that the parser alone would pass, or None."""
    if confirmed.get("jest_error"):
        return f"no named results: {confirmed['jest_error']} (run_script.sh runs jest, so its results are required)"
    denied = [e for e in confirmed["listed"] if e["parser"] == "PASSED" and "jest" in e and e["jest"] != "PASSED"]
    if not denied:
        return None
    first = denied[0]
    said = first["jest"] or first["jest_mapped"]
    return (f"{len(denied)} listed test(s) PASSED by the parser but not by jest's results, "
            f"e.g. {first['name']!r} ({said})")
