"""pytest's JUnit XML reports as a result source: each case named by pytest's node id.

The coding flavor reads the one report its grader's pytest writes (``format: pytest``);
SWE-bench Pro's ``strict`` reads one report per pytest session of the run script
(swe_tasks/junit.py records them under ``junit``). The naming (``junit_node_id``) is also
copied, verbatim, into the runner-end plugin (envs/coding/verdict/crucible_runner_end.py),
which runs inside the container where this package is not importable;
tests/flavors/coding/test_runner_end_names.py checks the copy is this code and names alike.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity.sources.base import MAX_REPORT_BYTES, SEVERITY, merge_worst, short, unmapped

_JUNIT_STATUS = {"failure": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}
"""A testcase's child element -> its status; a testcase without one passed. An xfail is a
``<skipped type="pytest.xfail">``, a strict xpass already a ``<failure>``."""

_DTD = re.compile(r"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)


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
        node_id = junit_node_id(case.get("classname", ""), name, case.get("file"))
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
        raise GradeError(
            f"junit report: root element is <{short(root.tag, quote=False)}>, not <testsuites> or <testsuite>"
        )
    return root


def _junit_status(case: ET.Element) -> str:
    statuses = [_JUNIT_STATUS[child.tag] for child in case if child.tag in _JUNIT_STATUS]
    return max(statuses, key=SEVERITY.__getitem__, default="PASSED")


# junit_node_id, _node_id_from_file and _guess_node_id are copied verbatim (docstrings aside) into
# envs/coding/verdict/crucible_runner_end.py; tests/flavors/coding/test_runner_end_names.py holds them equal.
def junit_node_id(classname: str, name: str, file: str | None) -> str:
    """The node id of a JUnit case: exact from xunit1's ``file`` where it is the node's own,
    else guessed from the dotted ``classname``."""
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
        classes = classname[len(dotted) + 1 :].split(".")
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


class JUnitSource:
    """pytest's JUnit reports; a record says how many sessions wrote one, and where."""

    name = "junit"
    record_key = "junit"

    def parse(self, data: bytes) -> list[TestResult]:
        return parse_junit(data)

    def explain(self, record: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> list[str]:
        lines = []
        if record.get("expected"):
            lines.append(
                f"pytest's JUnit reports ({record.get('path')}): "
                + (
                    str(record["error"])
                    if record.get("error")
                    else f"{len(record.get('tests') or [])} test(s) from {record.get('reports', 1)} session(s)"
                )
            )
        return lines + unmapped(listed, "mapped", "the JUnit report")


SOURCE = JUnitSource()
