"""Stored raw grades of SWE-bench Pro's crucible-strict, built for the tests of its pure parts
(tests/flavors/swebench_pro/test_swe_strict_rules*.py): the listed tests, a task's spec, and the
raw grade an evaluator records, with a go command's test2json events."""

from __future__ import annotations

import json
from types import SimpleNamespace

from swe_tasks import gojson, junit, strict

F2P, P2P = "t.py::T::test_fixed", "t.py::T::test_kept"


def spec(allow=()):
    """A task listing ``F2P`` and ``P2P``, with the scan findings it allows."""
    return SimpleNamespace(task=SimpleNamespace(fail_to_pass=[F2P], pass_to_pass=[P2P], allow_test_aware=list(allow)))


def raw(evaluator: str, *tests: tuple[str, str], **more) -> dict:
    """The raw grade ``evaluator`` records: the patch applied, the parser's ``tests`` (name,
    status), under crucible-strict the end marker seen on both streams, and ``more``."""
    return {
        "evaluator": evaluator,
        "apply": {"exit_code": 0},
        "run_script": {"end": {"stdout": True, "stderr": True}} if evaluator == strict.STRICT else {},
        "parser": {"tests": [{"name": n, "status": s} for n, s in tests]},
        **more,
    }


def go_event(action: str, test: str | None = None, output: str | None = None, package: str = "synth/p") -> bytes:
    """One test2json event line, as ``go test -json`` writes it."""
    event = {"Time": "2026-01-01T00:00:00Z", "Action": action, "Package": package}
    if test is not None:
        event["Test"] = test
    if output is not None:
        event["Output"] = output
    return (json.dumps(event) + "\n").encode()


GO_F2P, GO_P2P = "TestFixed", "TestKept"


def go_spec():
    """A Go task listing ``GO_F2P`` and ``GO_P2P``."""
    return SimpleNamespace(task=SimpleNamespace(fail_to_pass=[GO_F2P], pass_to_pass=[GO_P2P], allow_test_aware=[]))


def go_raw(stream: bytes, *tests: tuple[str, str], how: str = "added") -> dict:
    """crucible-strict's raw grade of a Go instance: the parser's ``tests`` and the events ``stream``."""
    return raw(
        strict.STRICT,
        *tests,
        junit=junit.record(False, [], "/tmp/crucible-results-x"),
        go_json=gojson.record(how, stream),
    )
