"""What every result source is and shares: the ``ResultSource`` interface, one result per name.

A result source is a format a test run's named results arrive in (pytest's JUnit XML, the go
command's ``go test -json`` events, jest's or mocha's own results, a SWE-bench Pro parser's
output). It reads captured bytes into typed named results (``parse``: a pure function of the
bytes, so a stored run regrades) and explains what a flavor recorded of one reading
(``explain``). The flavors find each by name in the registry (``envs.integrity.sources``).

A *record* is what a flavor's raw grade keeps of one reading, under the source's
``record_key``: ``expected`` (whether this run's results are required from the source),
``tests`` (``[{name, status}]``, merged over every file read) or ``error`` (why there are none),
and what says where they came from (``path``, ``reports``: how many files). A listed test's
entry (``raw["listed"]``) says under the source's ``mapped_key`` how its name was mapped to the
source's, ``unmapped: ...`` where it was not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from engine.errors import GradeError
from engine.models import TEST_STATUSES, TestResult

MAX_REPORT_BYTES = 64 * 1024 * 1024
"""A larger report is refused: the tested code can write it, and must not exhaust the grader."""

SEVERITY = {"PASSED": 0, "SKIPPED": 1, "FAILED": 2, "ERROR": 3}
"""Worst wins when a name is reported twice (pytest reports a failing teardown as a second case)."""
STATUS_WORDS = ", ".join(TEST_STATUSES)

Result = TypeVar("Result", covariant=True)


class ResultSource(Protocol[Result]):
    """One format of named test results. ``parse`` raises ``GradeError`` (one line saying what
    is malformed) for bytes that are not the format, or are over its size limit."""

    name: str
    """The registry's key for it (``junit``, ``go-json``, ``js-results``, ``parser``)."""
    record_key: str
    """The raw grade key a flavor records a reading of it under."""

    def parse(self, data: bytes) -> Sequence[Result]:
        """The named results in ``data``, one per test, in a stable order."""
        ...

    def explain(self, record: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> list[str]:
        """Lines for ``crucible explain``: what the ``record`` of a reading says (nothing where
        none was required), and the ``listed`` tests whose names it could not map."""
        ...


def merge_worst(results: Iterable[TestResult]) -> list[TestResult]:
    """One result per name, the worst status it was reported with (ERROR > FAILED > SKIPPED >
    PASSED), sorted by name. Raises ``GradeError`` for a status outside ``TEST_STATUSES``."""
    worst: dict[str, str] = {}
    for result in results:
        if result.status not in SEVERITY:
            raise GradeError(f"test {result.name!r} has status {short(result.status)}, not one of {STATUS_WORDS}")
        seen = worst.get(result.name)
        if seen is None or SEVERITY[result.status] > SEVERITY[seen]:
            worst[result.name] = result.status
    return [TestResult(name, worst[name]) for name in sorted(worst)]


def unmapped(listed: Sequence[Mapping[str, Any]], key: str, where: str) -> list[str]:
    """The line naming the listed tests whose ``key`` says they were not found in ``where``."""
    names = [str(e.get("name")) for e in listed if str(e.get(key, "")).startswith("unmapped")]
    return [f"listed tests not found in {where} ({len(names)}): " + ", ".join(names[:5])] if names else []


def short(value: Any, quote: bool = True, limit: int = 80) -> str:
    """A value as a message shows it: one line (repr escapes newlines), not too long."""
    text = repr(value) if quote else str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_type(value: Any) -> str:
    """A JSON value's type as JSON names it, for messages about malformed input."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
