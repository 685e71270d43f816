"""The go command's ``go test -json`` (test2json) event stream as a result source.

Two readings of one stream. The coding flavor's (``parse_go_json``, ``format: go``) judges the
whole run: a test that started and never ended, or a package that failed on its own, is an
ERROR. SWE-bench Pro's ``strict`` (``named_results``, recorded by swe_tasks/gojson.py under
``go_json``) asks only what the go command itself said passed, failed or skipped, beside the
official parser's reading of the text (``reconstruct``), and whether the go command framed the
test binary's result lines (Go 1.20 and later), without which printed lines count as results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity.sources.base import MAX_REPORT_BYTES, merge_worst

_GO_STATUS = {"pass": "PASSED", "fail": "FAILED", "skip": "SKIPPED"}


def parse_go_json(text: str) -> list[TestResult]:
    """The results in a ``go test -json`` event stream, named by the ``Test`` field alone
    (``TestFoo``, a subtest ``TestFoo/case_1``); a name run in several packages keeps its worst
    status. ``pass``/``fail``/``skip`` -> PASSED/FAILED/SKIPPED; a test that was ``run`` but
    never ended (the binary crashed or timed out) -> ERROR. A package that failed without a
    failed or errored test of its own (a build failure, a panic in TestMain, an exit after the
    tests) -> a result named by the package path, ERROR. A test run more than once (``-count``)
    keeps its worst run. Lines that are not JSON objects (the go command's plain-text build
    errors) are skipped.
    Refuses (``GradeError``) a stream over ``MAX_REPORT_BYTES`` characters."""
    if len(text) > MAX_REPORT_BYTES:
        raise GradeError(f"go test -json output: {len(text)} characters, over the {MAX_REPORT_BYTES}-character limit")
    outcomes: list[tuple[str, str, str]] = []  # (package, test, status); with -count=N a test runs N times
    running: set[tuple[str, str]] = set()
    failed_packages: set[str] = set()
    for event in _go_events(text):
        package, test, action = event["Package"], event["Test"], event["Action"]
        if not test:
            if action == "fail":
                failed_packages.add(package)
        elif action == "run":
            running.add((package, test))
        elif action in _GO_STATUS:
            running.discard((package, test))
            outcomes.append((package, test, _GO_STATUS[action]))
    outcomes += [(package, test, "ERROR") for package, test in running]  # started, never ended
    explained = {package for package, _, status in outcomes if status in ("FAILED", "ERROR")}
    results = [TestResult(test, status) for _, test, status in outcomes]
    results += [TestResult(package, "ERROR") for package in failed_packages - explained]
    return merge_worst(results)


def _go_events(text: str) -> Iterable[dict[str, str]]:
    """The stream's test events, with ``Package``/``Test``/``Action`` as strings ("" where
    absent). Newer go's ``build-output``/``build-fail`` events carry no ``Package`` and are
    skipped: the package's own ``fail`` event follows them."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        fields = {key: event.get(key) or "" for key in ("Package", "Test", "Action")}
        if all(isinstance(value, str) for value in fields.values()) and fields["Package"] and fields["Action"]:
            yield fields


def is_event(line: bytes) -> dict[str, Any] | None:
    """The test2json event on ``line`` (a JSON object with a string ``Action``), or None."""
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) and isinstance(found.get("Action"), str) else None


def reconstruct(stream: bytes) -> bytes:
    """The text the go command would have written without ``-json``: each event's ``Output``
    in order, every line that is not an event kept as it is (run_script.sh's own echo, a filter's
    output). Output split over several events (a long line) joins up again."""
    out: list[bytes] = []
    for line in stream.splitlines(keepends=True):
        event = is_event(line)
        if event is None:
            out.append(line)
        elif isinstance(event.get("Output"), str):
            out.append(event["Output"].encode("utf-8", "surrogateescape"))
    return b"".join(out)


def named_results(stream: bytes) -> tuple[list[TestResult], int, bool]:
    """(each test's status from the ``pass``/``fail``/``skip`` events that name it, the worst
    where a name comes from more than one package; how many events there were; whether a
    ``start`` event was among them: the go command writes one before it runs each package's
    test binary since Go 1.20, the release whose binary frames its result lines. An older go
    command writes none, asks for no framing, and makes results of the binary's plain text)."""
    found: list[TestResult] = []
    events = 0
    started = False
    for line in stream.splitlines():
        event = is_event(line)
        if event is None:
            continue
        events += 1
        started = started or (event["Action"] == "start" and "Test" not in event)
        test, status = event.get("Test"), _GO_STATUS.get(event["Action"])
        if isinstance(test, str) and test and status:
            found.append(TestResult(test, status))
    return merge_worst(found), events, started


class GoJsonSource:
    """``go test -json``; a record says how the events were asked for and whether they were framed."""

    name = "go-json"
    record_key = "go_json"

    def parse(self, data: bytes) -> list[TestResult]:
        return parse_go_json(data.decode("utf-8", "replace"))

    def explain(self, record: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> list[str]:
        if not (record.get("expected") or record.get("why_not")):
            return []
        return [
            f"go test -json events ({record.get('how')}): "
            + str(record.get("error") or record.get("why_not") or f"{len(record.get('tests') or [])} test(s)")
            + (
                "; unframed: a go command older than 1.20 reads result lines from the test binary's text, "
                "printed ones included"
                if record.get("framed") is False
                else ""
            )
        ]


SOURCE = GoJsonSource()
