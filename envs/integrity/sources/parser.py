"""A SWE-bench Pro parser's output as a result source: ``{"tests": [{"name", "status"}]}``.

The coding flavor runs a task's own parser over the test output (``format: parser``) and reads
what it wrote here; SWE-bench Pro's official evaluator records its instance parser's reading
under ``parser`` (swe_tasks/replay.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import GradeError
from engine.models import TEST_STATUSES, TestResult
from envs.integrity.sources.base import MAX_REPORT_BYTES, STATUS_WORDS, json_type, merge_worst, short


def parse_parser_output(data: bytes) -> list[TestResult]:
    """The results a task's parser wrote: ``{"tests": [{"name": str, "status": one of
    TEST_STATUSES}, ...]}`` (other keys ignored). Raises ``GradeError`` naming the first thing
    wrong: not JSON, no ``tests`` list, an entry that is not an object, has no string name or
    an empty one, or has another status; or over ``MAX_REPORT_BYTES``."""
    if len(data) > MAX_REPORT_BYTES:
        raise GradeError(f"parser output: {len(data)} bytes, over the {MAX_REPORT_BYTES}-byte limit")
    try:
        document = json.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
        raise GradeError(f"parser output: not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise GradeError(f"parser output: top level is a JSON {json_type(document)}, not an object")
    entries = document.get("tests")
    if not isinstance(entries, list):
        raise GradeError(f'parser output: no "tests" list (found {json_type(entries)})')
    return merge_worst(_parser_entry(index, entry) for index, entry in enumerate(entries))


def _parser_entry(index: int, entry: Any) -> TestResult:
    where = f"parser output: tests[{index}]"
    if not isinstance(entry, dict):
        raise GradeError(f"{where} is a JSON {json_type(entry)}, not an object")
    name, status = entry.get("name"), entry.get("status")
    if not isinstance(name, str):
        raise GradeError(f"{where} has no string name (found {json_type(name)})")
    if not name:
        raise GradeError(f"{where} has an empty name")
    if status not in TEST_STATUSES:
        raise GradeError(f"{where} has status {short(status)}, not one of {STATUS_WORDS}")
    return TestResult(name, status)


class ParserSource:
    """A parser's output; a record says why the parser gave no results, where it did not."""

    name = "parser"
    record_key = "parser"

    def parse(self, data: bytes) -> list[TestResult]:
        return parse_parser_output(data)

    def explain(self, record: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> list[str]:
        return [f"parser: {record['error']}"] if record.get("error") else []


SOURCE = ParserSource()
