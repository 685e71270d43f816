"""The result-source registry (envs/integrity/sources/): every format behind one interface, found by
name by the coding flavor and explained from its record for SWE-bench Pro, and open to a new one."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from engine.errors import GradeError
from engine.models import TEST_STATUSES, TestResult
from envs.integrity import sources

JUNIT = (
    b'<testsuites><testsuite><testcase classname="t.test_a" name="test_1" file="t/test_a.py"/>'
    b'<testcase classname="t.test_a" name="test_2" file="t/test_a.py"><failure/></testcase></testsuite></testsuites>'
)
GO = (
    b'{"Action":"start","Package":"m"}\n{"Action":"pass","Package":"m","Test":"TestA"}\n'
    b'{"Action":"fail","Package":"m","Test":"TestB"}\n'
)
JEST = json.dumps(
    {
        "testResults": [
            {
                "name": "/app/a.test.js",
                "assertionResults": [
                    {"title": "works", "ancestorTitles": ["a"], "status": "passed"},
                    {"title": "breaks", "ancestorTitles": ["a"], "status": "failed"},
                ],
            }
        ]
    }
).encode()
PARSER = json.dumps({"tests": [{"name": "t::a", "status": "PASSED"}, {"name": "t::b", "status": "FAILED"}]}).encode()
SAMPLES = {"junit": JUNIT, "go-json": GO, "js-results": JEST, "parser": PARSER}
"""One honest document of each registered format, passing one test and failing another."""


def _status(result: Any) -> str:
    return result.status if isinstance(result, TestResult) else str(result["status"])


def test_the_registry_holds_every_format_each_under_its_own_record_key():
    assert list(sources.REGISTRY) == ["junit", "go-json", "js-results", "parser"]
    keys = [source.record_key for source in sources.REGISTRY.values()]
    assert keys == ["junit", "go_json", "js_results", "parser"] and len(set(keys)) == len(keys)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_source_reads_its_format_into_one_status_per_test(name):
    found = sources.get(name).parse(SAMPLES[name])
    assert sorted(_status(r) for r in found) == ["FAILED", "PASSED"]
    assert all(_status(r) in TEST_STATUSES for r in found)


@pytest.mark.parametrize("name", list(SAMPLES))
@pytest.mark.parametrize("garbage", [b"\xff\xfe not any format", b"PASSED t::a\n--- PASS: TestA (0.00s)\n", b""])
def test_no_source_makes_a_pass_of_bytes_that_are_not_its_format(name, garbage):
    """Refused (GradeError), or no results at all (go's stream skips what is not an event): never a pass."""
    try:
        found = sources.get(name).parse(garbage)
    except GradeError:
        return
    assert found == []


def test_explain_shows_each_sources_record_and_the_names_it_could_not_map():
    raw = {
        "junit": {
            "expected": True,
            "path": "/r/pytest-*.xml",
            "tests": [{"name": "a", "status": "PASSED"}],
            "reports": 2,
        },
        "go_json": {"expected": True, "how": "added", "error": "no event", "framed": False},
        "js_results": {"expected": True, "runners": ["jest"], "path": "/r/js-*.json", "tests": [], "reports": 1},
        "parser": {"error": "parser.py exited 1"},
        "listed": [
            {"name": "t::x", "mapped": "unmapped: not in the JUnit report"},
            {"name": "f | y", "js_mapped": "unmapped: not in the runner's results"},
        ],
    }
    assert sources.explain(raw) == [
        "pytest's JUnit reports (/r/pytest-*.xml): 1 test(s) from 2 session(s)",
        "listed tests not found in the JUnit report (1): t::x",
        "go test -json events (added): no event; unframed: a go command older than 1.20 reads result lines "
        "from the test binary's text, printed ones included",
        "jest's own results (/r/js-*.json): 0 test(s) from 1 run(s)",
        "listed tests not found in the runner's own results (1): f | y",
        "parser: parser.py exited 1",
    ]


def test_explain_says_nothing_of_sources_a_run_did_not_require():
    assert (
        sources.explain(
            {
                "junit": {"expected": False},
                "go_json": {"expected": False, "how": "not go test"},
                "js_results": {"expected": False},
                "parser": {"tests": []},
            }
        )
        == []
    )
    assert sources.explain({}) == []


class _Toy:
    name = "toy"
    record_key = "toy_results"

    def parse(self, data: bytes) -> list[TestResult]:
        return [TestResult(line, "PASSED") for line in data.decode().split()]

    def explain(self, record: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> list[str]:
        return [f"toy results: {len(record.get('tests') or [])} test(s)"] if record else []


def test_a_source_a_flavor_registers_is_found_by_name_and_explained(monkeypatch):
    monkeypatch.setattr(sources, "REGISTRY", dict(sources.REGISTRY))
    sources.register(_Toy())
    assert sources.get("toy").parse(b"a b") == [TestResult("a", "PASSED"), TestResult("b", "PASSED")]
    assert sources.explain({"toy_results": {"tests": [{"name": "a", "status": "PASSED"}]}}) == [
        "toy results: 1 test(s)"
    ]


def test_a_taken_name_or_an_unknown_one_is_refused(monkeypatch):
    monkeypatch.setattr(sources, "REGISTRY", dict(sources.REGISTRY))
    toy = _Toy()
    toy.name = "junit"
    with pytest.raises(ValueError, match="'junit' is already registered"):
        sources.register(toy)
    with pytest.raises(KeyError, match="no result source 'pytest' .known: junit, go-json, js-results, parser"):
        sources.get("pytest")
