"""The raw grade of a graded test run, typed: what the coding and sdlc flavors' grading
recorded (``Verdict.raw``), read back into dataclasses the verdict's guards take.

The stored form stays the dict: ``RawGrade.from_dict`` reads every raw grade stored so far
(keys added later missing, keys since retired ignored) and never changes it; ``data`` is that
dict as it was given, for whatever a part does not type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.models import TestResult


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Applied:
    """``raw["apply"]``: whether the submission's diff applied."""

    ok: bool = False
    empty: bool = False

    @classmethod
    def from_dict(cls, data: Any) -> Applied:
        part = _mapping(data)
        return cls(ok=bool(part.get("ok")), empty=bool(part.get("empty")))


@dataclass(frozen=True)
class TestRun:
    """``raw["test"]``: the test command's run, its end markers and the runtime audit's record."""

    __test__ = False  # not a pytest test class, whatever its name says

    exit_code: int | None = None
    timed_out: bool = False
    output_tail: str = ""
    end: Mapping[str, Any] | None = None
    """The shell's and the runner's end markers (envs/coding/runner_end.py)."""
    audit: Mapping[str, Any] | None = None
    """The runtime audit's record (envs/coding/audit.py), strict only."""

    @classmethod
    def from_dict(cls, data: Any) -> TestRun:
        part = _mapping(data)
        end, audit = part.get("end"), part.get("audit")
        return cls(
            exit_code=part.get("exit_code"),
            timed_out=bool(part.get("timed_out")),
            output_tail=str(part.get("output_tail", "")),
            end=end if isinstance(end, Mapping) else None,
            audit=audit if isinstance(audit, Mapping) else None,
        )


@dataclass(frozen=True)
class NamedResults:
    """``raw["results"]``: the named test results as read, or why they could not be."""

    format: str = "none"
    tests: tuple[TestResult, ...] = ()
    error: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> NamedResults:
        part = _mapping(data)
        tests = tuple(TestResult(str(t["name"]), str(t["status"])) for t in part.get("tests") or [])
        return cls(
            format=str(part.get("format") or "none"),
            tests=tests,
            error=str(part["error"]) if part.get("error") else None,
        )

    @property
    def read(self) -> bool:
        """Whether the task reads named results at all (a format other than none)."""
        return self.format != "none"


@dataclass(frozen=True)
class ScanRecord:
    """``raw["scan"]``: the test-awareness scan's findings and whether they refuse the run."""

    refuse: bool = False
    findings: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> ScanRecord:
        part = _mapping(data)
        return cls(
            refuse=bool(part.get("refuse")),
            findings=tuple(part.get("findings") or []),
            error=str(part["error"]) if part.get("error") else None,
        )


@dataclass(frozen=True)
class RawGrade:
    """One grading's raw grade (a differential re-run's is another, in ``rerun``)."""

    apply: Applied = field(default_factory=Applied)
    test: TestRun = field(default_factory=TestRun)
    results: NamedResults = field(default_factory=NamedResults)
    canary: Mapping[str, Any] | None = None
    """The canary's record (envs/coding/canary.py), or why there was none (``skipped``)."""
    scan: ScanRecord = field(default_factory=ScanRecord)
    named_results_only: bool = False
    tests_ran_regex: str | None = None
    """The task's pass pattern; None where the raw grade has none (the flavor's default)."""
    separate: bool = False
    """An isolated verdict whose pytest ran apart from the code under test (``raw["isolated"]``)."""
    renamed: Mapping[str, Any] | None = None
    """The hidden files' and tests' random names (envs/coding/rerun.py), where there were some."""
    audit_scope: Any = None
    rerun: Mapping[str, Any] | None = None
    """The differential re-run's own raw grade."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """The dict as stored."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RawGrade:
        renamed, canary, again = raw.get("renamed"), raw.get("canary"), raw.get("rerun")
        return cls(
            apply=Applied.from_dict(raw.get("apply")),
            test=TestRun.from_dict(raw.get("test")),
            results=NamedResults.from_dict(raw.get("results")),
            canary=canary if isinstance(canary, Mapping) else None,
            scan=ScanRecord.from_dict(raw.get("scan")),
            named_results_only=bool(raw.get("named_results_only")),
            tests_ran_regex=str(raw["tests_ran_regex"]) if raw.get("tests_ran_regex") else None,
            separate=bool(_mapping(raw.get("isolated")).get("separate")),
            renamed=renamed if isinstance(renamed, Mapping) else None,
            audit_scope=raw.get("audit_scope"),
            rerun=again if isinstance(again, Mapping) else None,
            data=raw,
        )
