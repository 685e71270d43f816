"""Named test results: read a test run's report into ``TestResult``s, and judge them.

Three report formats (``ResultsConfig.format`` in ``envs/coding/schema.py``): pytest's JUnit
XML, the ``go test -json`` event stream, and the SWE-bench Pro parser format. Every reader
returns one result per name, sorted by name, so the same report always reads the same; a
name reported more than once keeps its worst status (``merge_worst``). Malformed input raises
``GradeError`` with one line saying what is malformed.

``judge_lists`` grades a run against a task's FAIL_TO_PASS / PASS_TO_PASS lists (derived by
the engine's ``crucible lock``, ``engine.plan.lock.derive_lists``). All pure functions of
their arguments, so a stored run regrades.
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any, Iterable, Mapping, Sequence

from engine.errors import GradeError
from engine.models import TEST_STATUSES, TestResult

MAX_REPORT_BYTES = 64 * 1024 * 1024
"""A larger report is refused: the tested code can write it, and must not exhaust the grader."""

_SEVERITY = {"PASSED": 0, "SKIPPED": 1, "FAILED": 2, "ERROR": 3}
"""Worst wins when a name is reported twice (pytest reports a failing teardown as a second case)."""

_JUNIT_STATUS = {"failure": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}
"""A testcase's child element -> its status; a testcase without one passed. An xfail is a
``<skipped type="pytest.xfail">``, a strict xpass already a ``<failure>``."""

_DTD = re.compile(r"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_GO_STATUS = {"pass": "PASSED", "fail": "FAILED", "skip": "SKIPPED"}
_FAILED_LIST_LIMIT = 20
_STATUS_WORDS = ", ".join(TEST_STATUSES)


def merge_worst(results: Iterable[TestResult]) -> list[TestResult]:
    """One result per name, the worst status it was reported with (ERROR > FAILED > SKIPPED >
    PASSED), sorted by name. Raises ``GradeError`` for a status outside ``TEST_STATUSES``."""
    worst: dict[str, str] = {}
    for result in results:
        if result.status not in _SEVERITY:
            raise GradeError(f"test {result.name!r} has status {_short(result.status)}, not one of {_STATUS_WORDS}")
        seen = worst.get(result.name)
        if seen is None or _SEVERITY[result.status] > _SEVERITY[seen]:
            worst[result.name] = result.status
    return [TestResult(name, worst[name]) for name in sorted(worst)]


# --- pytest JUnit XML -------------------------------------------------------------------


def parse_junit(data: bytes) -> list[TestResult]:
    """The results in a pytest JUnit XML report (``junit_family`` xunit1 or xunit2), named by
    pytest's node id (``tests/test_x.py::TestC::test_m[1-2]``).

    pytest writes ``classname`` as the node id's file path in dotted form (``.py`` dropped)
    followed by its classes, and ``name`` as the last part with its parameters. xunit1 also
    writes ``file``, which gives the path exactly; xunit2 does not, so the path is guessed
    (``_guess_node_id``). A collection error (``classname=""``, ``name="tests.test_broken"``)
    is named by its file path, ``tests/test_broken.py``.

    Refuses (``GradeError``) a report over ``MAX_REPORT_BYTES``, one with a DOCTYPE or ENTITY
    declaration (entity expansion and external entities are the XML attacks; pytest writes
    neither), and anything that is not well-formed UTF-8 XML with a testsuite(s) root.
    """
    root = _parse_xml(data)
    results = []
    for index, case in enumerate(root.iter("testcase")):
        name = case.get("name")
        if name is None:
            raise GradeError(f"junit report: testcase #{index} has no name attribute")
        node_id = _junit_node_id(case.get("classname", ""), name, case.get("file"))
        results.append(TestResult(node_id, _junit_status(case)))
    return merge_worst(results)


def _parse_xml(data: bytes) -> ET.Element:
    if len(data) > MAX_REPORT_BYTES:
        raise GradeError(f"junit report: {len(data)} bytes, over the {MAX_REPORT_BYTES}-byte limit")
    # The declaration check is exact only on text in the encoding the parser reads. So decode
    # here, strictly as UTF-8 (what pytest writes), and hand the parser text: it then ignores
    # the document's own encoding declaration and BOM, under which (UTF-16, an EBCDIC code
    # page) "<!DOCTYPE" would be spelled in bytes this search does not see.
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GradeError(f"junit report: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    if _DTD.search(text):
        raise GradeError("junit report: has a DOCTYPE or ENTITY declaration, refused")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise GradeError(f"junit report: not well-formed XML ({exc})") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise GradeError(f"junit report: root element is <{_short(root.tag, quote=False)}>, not <testsuites> or <testsuite>")
    return root


def _junit_status(case: ET.Element) -> str:
    statuses = [_JUNIT_STATUS[child.tag] for child in case if child.tag in _JUNIT_STATUS]
    return max(statuses, key=_SEVERITY.__getitem__, default="PASSED")


def _junit_node_id(classname: str, name: str, file: str | None) -> str:
    if file:
        exact = _node_id_from_file(classname, name, file)
        if exact is not None:
            return exact
    return _guess_node_id(classname, name)


def _node_id_from_file(classname: str, name: str, file: str) -> str | None:
    """The node id, when ``file`` is the node's own file. It need not be: for a test method
    inherited from a class in another module, xunit1's ``file`` is where the method is defined
    (``tests/base.py`` under classname ``tests.test_x.TestSub``); then None."""
    dotted = re.sub(r"\.py$", "", file.replace("/", "."))  # how pytest turns the path into a classname
    if not classname and name == dotted:  # a collection error names the file itself
        return file
    if classname == dotted:
        return f"{file}::{name}"
    if classname.startswith(dotted + "."):
        classes = classname[len(dotted) + 1:].split(".")
        return "::".join([file, *classes, name])
    return None


def _guess_node_id(classname: str, name: str) -> str:
    """Best effort without ``file`` (xunit2): the dotted classname's last component that looks
    like a test module (starts with ``test`` or ends with ``_test``, pytest's default
    ``python_files``) ends the file path; what follows it are classes. ``a.b.test_mod.TestC`` +
    ``test_m`` -> ``a/b/test_mod.py::TestC::test_m``. Without such a component the whole
    classname is taken as the module. Wrong for directories with dots in their names or modules
    outside the default ``python_files`` patterns; xunit1 reports have neither problem.
    An empty classname is a collection error: ``name`` is then the module's dotted path."""
    if not classname:
        return name.replace(".", "/") + ".py" if name else name
    parts = classname.split(".")
    module_end = len(parts)
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].startswith("test") or parts[index].endswith("_test"):
            module_end = index + 1
            break
    path = "/".join(parts[:module_end]) + ".py"
    return "::".join([path, *parts[module_end:], name])


# --- go test -json ----------------------------------------------------------------------


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


# --- SWE-bench Pro parser format --------------------------------------------------------


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
        raise GradeError(f"parser output: top level is a JSON {_json_type(document)}, not an object")
    entries = document.get("tests")
    if not isinstance(entries, list):
        raise GradeError(f'parser output: no "tests" list (found {_json_type(entries)})')
    return merge_worst(_parser_entry(index, entry) for index, entry in enumerate(entries))


def _parser_entry(index: int, entry: Any) -> TestResult:
    where = f"parser output: tests[{index}]"
    if not isinstance(entry, dict):
        raise GradeError(f"{where} is a JSON {_json_type(entry)}, not an object")
    name, status = entry.get("name"), entry.get("status")
    if not isinstance(name, str):
        raise GradeError(f"{where} has no string name (found {_json_type(name)})")
    if not name:
        raise GradeError(f"{where} has an empty name")
    if status not in TEST_STATUSES:
        raise GradeError(f"{where} has status {_short(status)}, not one of {_STATUS_WORDS}")
    return TestResult(name, status)


# --- judging and deriving the lists -----------------------------------------------------


def judge_lists(results: Sequence[TestResult], fail_to_pass: Sequence[str],
                pass_to_pass: Sequence[str]) -> tuple[bool, dict]:
    """True iff every test named in either list is PASSED in ``results``; a test the results
    do not name counts as failed (status ``MISSING``). Tests in neither list do not matter.
    The dict says, per list, how many passed of how many, and the first 20 that did not (in
    the list's order, with their status). A name listed twice counts once.
    Raises ``GradeError`` when both lists are empty: that would pass any run at all."""
    if not fail_to_pass and not pass_to_pass:
        raise GradeError("judge_lists: fail_to_pass and pass_to_pass are both empty; nothing to judge")
    statuses = {result.name: result.status for result in merge_worst(results)}
    detail = {"fail_to_pass": _judge_one(statuses, fail_to_pass),
              "pass_to_pass": _judge_one(statuses, pass_to_pass)}
    ok = all(part["passed"] == part["total"] for part in detail.values())
    return ok, detail


def _judge_one(statuses: Mapping[str, str], names: Sequence[str]) -> dict:
    wanted = list(dict.fromkeys(names))
    failing = [{"name": name, "status": statuses.get(name, "MISSING")}
               for name in wanted if statuses.get(name) != "PASSED"]
    return {"passed": len(wanted) - len(failing), "total": len(wanted), "failing": failing[:_FAILED_LIST_LIMIT]}


def _short(value: Any, quote: bool = True, limit: int = 80) -> str:
    """A value as a message shows it: one line (repr escapes newlines), not too long."""
    text = repr(value) if quote else str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
