"""A JavaScript test runner's own results as a result source: jest's JSON or mocha's runner events.

jest's results come in either shape it writes (``--json``'s, or the aggregated results a
``--testResultsProcessor`` gets); mocha's as SWE-bench Pro's hook records its runner's events
(swe_tasks/js/results_hook.js). A test is named by its file, describe blocks and title, kept
apart (``JsTest``): SWE-bench Pro's ``strict`` maps a parser's names onto them in several forms
(swe_tasks/jsresults.py, which records the reading under ``js_results``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from engine.errors import GradeError
from envs.integrity.sources.base import unmapped

_STATUS = {"passed": "PASSED", "failed": "FAILED"}
"""The runners' statuses; every other one (pending, skipped, todo, disabled, focused) is SKIPPED."""


class JsTest(TypedDict):
    """One test as a JavaScript runner reports it; ``status`` is PASSED, FAILED or SKIPPED."""

    file: str
    ancestors: list[str]
    title: str
    status: str


def _jest_tests(data: Mapping[str, Any]) -> list[JsTest]:
    """jest's results in either shape: ``--json``'s (``testResults[].name``, ``assertionResults``)
    or the aggregated results a processor gets (``testFilePath``, ``testResults``)."""
    found: list[JsTest] = []
    for suite in data["testResults"]:
        if not isinstance(suite, dict):
            raise ValueError("a testResults entry is not an object")
        path = suite.get("name", suite.get("testFilePath"))
        cases = suite.get("assertionResults", suite.get("testResults")) or []
        if not isinstance(path, str) or not isinstance(cases, list):
            raise ValueError("a test file's results have no path or no list of tests")
        for case in cases:
            if not (
                isinstance(case, dict)
                and isinstance(case.get("title"), str)
                and isinstance(case.get("ancestorTitles"), list)
                and all(isinstance(a, str) for a in case["ancestorTitles"])
            ):
                raise ValueError(f"a test in {path} has no title or ancestorTitles")
            found.append(
                {
                    "file": path,
                    "ancestors": list(case["ancestorTitles"]),
                    "title": case["title"],
                    "status": _STATUS.get(str(case.get("status")), "SKIPPED"),
                }
            )
    return found


def _mocha_tests(data: Mapping[str, Any]) -> list[JsTest]:
    """mocha's runner events as the hook writes them: ``tests[]`` of ``{file, titlePath, status}``
    (a failed hook is a ``fail`` too: it names no test of the task)."""
    found: list[JsTest] = []
    for test in data["tests"]:
        path = test.get("file") if isinstance(test, dict) else None
        titles = test.get("titlePath") if isinstance(test, dict) else None
        if not (isinstance(titles, list) and titles and all(isinstance(t, str) for t in titles)):
            raise ValueError("a mocha test has no titlePath")
        found.append(
            {
                "file": path if isinstance(path, str) else "",
                "ancestors": titles[:-1],
                "title": titles[-1],
                "status": _STATUS.get(str(test.get("status")), "SKIPPED"),
            }
        )
    return found


def tests_in(report: bytes) -> list[JsTest]:
    """Each test in one results file. Raises ValueError for what is neither jest's results nor
    the hook's record of mocha's."""
    data = json.loads(report)
    if isinstance(data, dict) and data.get("runner") == "mocha" and isinstance(data.get("tests"), list):
        return _mocha_tests(data)
    if not isinstance(data, dict) or not isinstance(data.get("testResults"), list):
        raise ValueError("neither jest's results (no testResults list) nor mocha's (no tests list)")
    return _jest_tests(data)


def merged(tests: Iterable[Mapping[str, Any]]) -> list[JsTest]:
    """One entry per test (file, ancestors, title) over every run: FAILED if any run failed it,
    else PASSED if any passed it, else SKIPPED (a run whose name filter left it out reports it pending)."""
    rank = {"FAILED": 2, "PASSED": 1, "SKIPPED": 0}
    found: dict[tuple[str, tuple[str, ...], str], str] = {}
    for test in tests:
        key = (str(test["file"]), tuple(test["ancestors"]), str(test["title"]))
        if key not in found or rank[test["status"]] > rank[found[key]]:
            found[key] = str(test["status"])
    return [{"file": f, "ancestors": list(a), "title": t, "status": s} for (f, a, t), s in sorted(found.items())]


class JsResultsSource:
    """jest's or mocha's own results; a record names the runners and how many runs wrote results."""

    name = "js-results"
    record_key = "js_results"

    def parse(self, data: bytes) -> list[JsTest]:
        """``tests_in`` for one results file, its ValueError as the interface's GradeError."""
        try:
            return tests_in(data)
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested past the parser's depth
            raise GradeError(str(exc)) from exc

    def explain(self, record: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> list[str]:
        lines = []
        if record.get("expected"):
            lines.append(
                f"{' and '.join(record.get('runners') or [])}'s own results ({record.get('path')}): "
                + str(
                    record.get("error")
                    or f"{len(record.get('tests') or [])} test(s) from {record.get('reports')} run(s)"
                )
            )
        return lines + unmapped(listed, "js_mapped", "the runner's own results")


SOURCE = JsResultsSource()
