"""Stored runs judged again by today's code (``crucible regrade``, engine/report/regrade.py).

``store_before_33/`` is a store made by crucible's own code as it stood before the integrity
catalogue (issue 33, commit c9a0546), exported with ``crucible export --format parquet``: the
four sample tasks' gates under none, vault and strict, the sdlc gates, the attack tables of the
sample and ordinary suites under none and strict (canary, scanner, end-marker, re-run, audit and
protected-path reasons among them), the runtime-audit attacks, the canary cases and a differential
re-run's catch under strict, and synthetic SWE-bench Pro instances under none and strict.
Every stored raw grade must still explain and regrade to its stored verdict.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine.report.regrade import regrade_record, regrade_records

pytestmark = pytest.mark.slow  # ~250 runs typed and judged again: about half a minute

BEFORE = Path(__file__).resolve().parent / "store_before_33"


@pytest.fixture(scope="module")
def old_store(tmp_path_factory):
    """The export loaded into a fresh store, as a user would: ``crucible import``."""
    from engine.store.duckdb import DuckDBStore

    path = tmp_path_factory.mktemp("old-store") / "store.duckdb"
    proc = _crucible("import", str(BEFORE), "--store", str(path))
    assert proc.returncode == 0, proc.stderr
    store = DuckDBStore(path)
    _, rows = store.query("SELECT run_id FROM runs WHERE status = 'completed' ORDER BY run_id")
    return path, list(store.get_runs([r[0] for r in rows]).values())


def _crucible(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, timeout=600)


def test_every_raw_grade_stored_before_the_catalogue_regrades_to_its_verdict(old_store):
    _, records = old_store
    results = regrade_records(records)
    differing = [
        f"{r.run_id} {r.task_id}: stored {r.stored_reward} {r.stored_reason!r}, today "
        f"{r.reward} {r.reason!r}{' (tests differ)' if not r.same_tests else ''} {r.problem}"
        for r in results
        if not r.same
    ]
    assert differing == []
    assert all(r.explained for r in results), "every raw grade explains"
    # The fixture covers what it claims: each flavor, both verdicts, the defences' reasons.
    flavors = Counter(str((r.spec or {}).get("flavor", {}).get("name")) for r in records)
    assert {"coding", "sdlc", "swebench_pro"} <= set(flavors), flavors
    assert {r.reward for r in records} == {0.0, 1.0}
    reasons = " | ".join(r.stored_reason for r in results)
    for defence in (
        "canary test",
        "test-aware code",
        "runtime audit",
        "differential re-run",
        "text-only verdict",
        "JUnit report changed after pytest's own end",
        "resolved",
        "no open pull request",
    ):
        assert defence in reasons, defence


def test_a_verdict_that_no_longer_follows_from_its_raw_grade_is_reported(old_store):
    _, records = old_store
    passed = next(r for r in records if r.reward == 1.0)
    forged = dataclasses.replace(passed, raw_grade={**passed.raw_grade, "apply": {"ok": False}})
    result = regrade_record(forged)
    assert not result.same and result.reward == 0.0 and result.reason == "diff does not apply"


def test_the_command_shows_each_stored_verdict_beside_todays(old_store):
    path, records = old_store
    named = [records[0].run_id, next(r for r in records if r.reward == 1.0).run_id]
    proc = _crucible("regrade", *named, "--store", str(path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "2/2 verdict(s) the same" in proc.stdout and all(run_id in proc.stdout for run_id in named)
    bad = _crucible("regrade", "no-such-run", "--store", str(path))
    assert bad.returncode == 2 and bad.stderr.strip() == "crucible regrade: no run 'no-such-run' in the store"
