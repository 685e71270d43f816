"""The timing signal (engine/run/timing.py) over a real DuckDB store: a passing run whose tests
took a small fraction of the stored golden's time is flagged, with the golden it was measured
against; nothing else is."""

from __future__ import annotations

import pytest

from engine.models import RunRecord
from engine.run.timing import FRACTION, timing_warning
from engine.store.duckdb import DuckDBStore


def record(
    run_id: str,
    agent: str,
    reward: float,
    test_seconds: float | None,
    *,
    integrity: str = "strict",
    task: str = "sample/last_page",
    ended: str = "2026-12-05T01:00:00+00:00",
) -> RunRecord:
    durations = {} if test_seconds is None else {"test": test_seconds}
    return RunRecord(
        run_id=run_id,
        spec_hash=f"spec-{run_id}",
        spec={"task": {"id": task}},
        status="completed",
        task_id=task,
        agent=agent,
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested=integrity,
        integrity_obtained=integrity,
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at="2026-12-05T00:59:00+00:00",
        ended_at=ended,
        reward=reward,
        subscores={"tests": reward},
        raw_grade={"reason": "tests passed" if reward else "tests failed", "durations": durations},
        diff="",
        violations=[],
        stop_reason="done",
        warnings=[],
        timings={"grade": 1.0},
        steps=[],
        run_dir=None,
        image_tag="crucible/task:x",
        from_cache=True,
        owner_pid=None,
        owner_host=None,
    )


@pytest.fixture
def store(tmp_path):
    store = DuckDBStore(tmp_path / "store.duckdb")
    store.record_run(record("golden-old", "integration_test", 1.0, 9.0, ended="2026-12-05T00:30:00+00:00"))
    store.record_run(record("golden", "integration_test", 1.0, 4.0))
    store.record_run(record("golden-vault", "integration_test", 1.0, 40.0, integrity="vault"))
    return store


def test_a_pass_in_a_fraction_of_the_latest_goldens_time_is_flagged_with_that_golden(store):
    signal = timing_warning(store, record("quick", "tool_calling", 1.0, 0.3), "integration_test", 1.0)
    assert signal is not None
    assert (signal["golden_run"], signal["golden_seconds"], signal["seconds"]) == ("golden", 4.0, 0.3)
    assert (
        signal["warning"].startswith("timing: the tests passed in 0.30 s, 8% of the 4.00 s")
        and "(not a verdict)" in signal["warning"]
    )


@pytest.mark.parametrize(
    "candidate",
    [
        record("took-its-time", "tool_calling", 1.0, FRACTION * 4.0 + 0.01),  # at least a fair share
        record("failed-quickly", "tool_calling", 0.0, 0.1),  # a failing run says nothing by its speed
        record("golden-again", "integration_test", 1.0, 0.1),  # the golden's own agent is the yardstick
        record("no-durations", "tool_calling", 1.0, None),  # a flavor that records no test time
        record("other-task", "tool_calling", 1.0, 0.1, task="sample/query_ops"),  # no golden stored for it
    ],
    ids=lambda r: r.run_id,
)
def test_nothing_is_said_where_there_is_no_signal(store, candidate):
    assert timing_warning(store, candidate, "integration_test", 1.0) is None


def test_the_golden_is_taken_under_the_runs_own_integrity_mode(store):
    under_vault = record("vault-run", "tool_calling", 1.0, 5.0, integrity="vault")
    signal = timing_warning(store, under_vault, "integration_test", 1.0)
    assert signal is not None and signal["golden_run"] == "golden-vault"


def test_a_golden_too_quick_to_measure_gives_no_signal(tmp_path):
    store = DuckDBStore(tmp_path / "store.duckdb")
    store.record_run(record("golden", "integration_test", 1.0, 0.5))
    assert timing_warning(store, record("quick", "tool_calling", 1.0, 0.01), "integration_test", 1.0) is None


def test_a_batch_reads_each_stored_golden_once_and_looks_again_until_one_is_stored(tmp_path):
    """A sweep's passing runs share the batch's lookups (``Runner.golden_times``): one store read
    per task and mode once a golden is found; none found yet is asked again, since a golden may
    finish later in the same batch."""
    store = DuckDBStore(tmp_path / "store.duckdb")
    reads: list[str] = []
    query = store.query

    def counted(sql: str, **kwargs):
        reads.append(sql)
        return query(sql, **kwargs)

    store.query = counted  # type: ignore[method-assign]
    goldens: dict = {}
    assert timing_warning(store, record("quick-1", "tool_calling", 1.0, 0.3), "integration_test", 1.0, goldens) is None
    assert len(reads) == 1 and goldens == {}  # no golden stored yet: nothing kept
    store.record_run(record("golden", "integration_test", 1.0, 4.0))
    for n in range(2, 6):
        signal = timing_warning(store, record(f"quick-{n}", "tool_calling", 1.0, 0.3), "integration_test", 1.0, goldens)
        assert signal is not None and signal["golden_run"] == "golden"
    assert len(reads) == 2, reads  # found once, then kept
