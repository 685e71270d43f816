"""``crucible report``: the statistics against hand counts, then reports read from a real store."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.models import RunRecord, Step
from engine.report.compute import Filters, build_report
from engine.report.query import parse_since
from engine.report.render import render
from engine.report.stats import (
    mean_interval,
    mean_pass_at_k,
    pass_at_k,
    report_ks,
    t_interval,
    t_quantile,
    wilson_interval,
)
from engine.store.duckdb import DuckDBStore

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (3, 1, 1, 1 / 3),
        (3, 1, 2, 2 / 3),
        (3, 1, 3, 1.0),  # 1 - C(2,k)/C(3,k)
        (3, 0, 1, 0.0),
        (3, 0, 3, 0.0),
        (3, 3, 1, 1.0),
        (3, 2, 2, 1.0),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 1, 5, 0.5),  # 1 - C(9,5)/C(10,5) = 1 - 126/252
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_stays_exact_where_binomials_overflow_floats():
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)
    assert pass_at_k(2000, 1000, 1000) == 1.0 - math.comb(1000, 1000) / math.comb(2000, 1000)


@pytest.mark.parametrize("n, c, k", [(3, 1, 4), (3, 4, 1), (3, 1, 0), (0, 0, 1)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_pass_at_k_averages_over_tasks_and_needs_k_attempts_of_each():
    assert mean_pass_at_k([(3, 3), (3, 1), (3, 0)], 1) == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert mean_pass_at_k([(3, 3), (2, 1)], 3) is None
    assert mean_pass_at_k([], 1) is None


def test_report_ks_are_every_k_the_attempts_allow_then_round_ones():
    assert report_ks(0) == [] and report_ks(3) == [1, 2, 3]
    assert report_ks(100) == [1, 2, 3, 4, 5, 10, 20, 50, 100]
    assert report_ks(37) == [1, 2, 3, 4, 5, 10, 20, 37]


def test_wilson_interval_matches_published_values():
    low, high = wilson_interval(8, 10).low, wilson_interval(8, 10).high
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    zero = wilson_interval(0, 10)
    assert (zero.low, round(zero.high, 4)) == (0.0, 0.2775)
    full = wilson_interval(10, 10)
    assert (round(full.low, 4), full.high) == (0.7225, 1.0)
    assert wilson_interval(0, 0) is None


def test_t_interval_uses_the_exact_t_quantile():
    assert [round(t_quantile(df, 0.975), 3) for df in (1, 2, 4, 10, 30, 2000)] == [
        12.706,
        4.303,
        2.776,
        2.228,
        2.042,
        1.961,
    ]
    interval = t_interval([1, 2, 3, 4, 5])  # mean 3, s = sqrt(2.5), t(4) = 2.7764
    assert (round(interval.low, 3), round(interval.high, 3)) == (1.037, 4.963)
    assert t_interval([0.5]) is None


def test_mean_interval_is_wilson_for_0_1_rewards_and_t_otherwise():
    mean, interval = mean_interval([1.0, 0.0, 1.0, 1.0])
    assert mean == 0.75 and interval == wilson_interval(3, 4)
    mean, interval = mean_interval([1.0, 0.5, 0.0])
    assert mean == 0.5 and interval.method == "t"
    assert mean_interval([]) == (None, None)


def test_since_takes_durations_and_iso_times_as_utc():
    now = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)
    assert parse_since("7d", now) == datetime(2025, 3, 3, 12, 0)
    assert parse_since("90m", now) == datetime(2025, 3, 10, 10, 30)
    assert parse_since("2025-03-01") == datetime(2025, 3, 1)
    assert parse_since("2025-03-01T14:00+02:00") == datetime(2025, 3, 1, 12, 0)


# ---------------------------------------------------------------- reports from a store


def run(
    run_id: str,
    *,
    task: str,
    model: str | None,
    attempt: int,
    status: str = "completed",
    reward: float | None = None,
    agent: str = "tool_calling",
    sweep: str = "S1",
    minutes: float = 0,
    steps: list[Step] | None = None,
    spec: str | None = None,
    started: datetime | None = None,
) -> RunRecord:
    started = started or T0 + timedelta(minutes=minutes)
    final = status != "running"
    return RunRecord(
        run_id=run_id,
        spec_hash=spec or f"{agent}|{model}|{task}|{attempt}",
        spec={},
        status=status,
        task_id=task,
        agent=agent,
        model=model,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault",
        attempt=attempt,
        seed=0,
        sweep_id=sweep,
        started_at=started.isoformat(),
        ended_at=(started + timedelta(seconds=10 + attempt)).isoformat() if final else None,
        reward=reward if status == "completed" else None,
        error="boom" if status == "error" else None,
        steps=steps or [],
        owner_pid=os.getpid(),
        owner_host=socket.gethostname(),
    )


def model_step(tokens_in: int, tokens_out: int, cost: float | None) -> Step:
    return Step(idx=0, kind="model", tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost)


def tool_step() -> Step:
    return Step(idx=1, kind="tool_call", tool="bash")  # no model, so no price to know


# Rewards per (model, task) over attempts 0, 1, 2; "E" error, "T" timeout.
OUTCOMES = {
    "m1": {"t1": [1, 1, 1], "t2": [1, 0, 0], "t3": [0, 0, 0], "t4": [1, "E", 0]},
    "m2": {"t1": [0, 0, 1], "t2": [0.5, 0, 0], "t3": ["T", 0, 0], "t4": [1, 1, 0]},
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    store = DuckDBStore()
    records = []
    for model, tasks in OUTCOMES.items():
        for task, outcomes in tasks.items():
            for attempt, outcome in enumerate(outcomes):
                status = {"E": "error", "T": "timeout"}.get(outcome, "completed")
                steps = [model_step(100, 10, 0.01 if model == "m1" else None), tool_step()]
                records.append(
                    run(
                        f"{model}-{task}-{attempt}",
                        task=task,
                        model=model,
                        attempt=attempt,
                        status=status,
                        reward=None if status != "completed" else float(outcome),
                        minutes=attempt,
                        steps=steps,
                    )
                )
    records += [
        # m1/t2 attempt 0 failed first, then was resumed: one attempt, the completed one.
        run("m1-t2-0-killed", task="t2", model="m1", attempt=0, status="error", minutes=-5),
        # still running (owned by this live process, so housekeeping leaves it be), and
        # canceled by the user: not attempts
        run("m1-t1-3", task="t1", model="m1", attempt=3, status="running", started=datetime.now(UTC)),
        run("m2-t2-3", task="t2", model="m2", attempt=3, status="canceled", minutes=4),
        # another agent, in another sweep, long ago
        run("noop-t1", task="t1", model=None, attempt=0, reward=0.0, agent="noop", sweep="S0", minutes=-60 * 24 * 30),
    ]
    for record in records:
        store.write_run_record(record, None)
    store.ingest_pending()
    return store


def summary(report, model):
    return next(g for g in report.groups if g.model == model)


def test_report_counts_pass_at_k_and_intervals_as_counted_by_hand(store):
    report = build_report(store, Filters(sweeps=("S1",)))
    assert report.ks == [1, 2, 3]
    m1, m2 = summary(report, "m1"), summary(report, "m2")
    # m1 successes per task (n=3 each): t1 3, t2 1, t3 0, t4 1 (its error counts as not solved)
    assert m1.pass_at[1] == pytest.approx((1 + 1 / 3 + 0 + 1 / 3) / 4)
    assert m1.pass_at[2] == pytest.approx((1 + 2 / 3 + 0 + 2 / 3) / 4)
    assert m1.pass_at[3] == pytest.approx(3 / 4)
    # m2: t1 1, t2 0 (0.5 is not a success), t3 0 (timeout + two zeros), t4 2
    assert m2.pass_at[1] == pytest.approx((1 / 3 + 0 + 0 + 2 / 3) / 4)
    assert m2.pass_at[3] == pytest.approx(2 / 4)
    assert (m1.runs, m1.running, m1.superseded, m1.attempts, m1.completed, m1.errors, m1.timeouts, m1.solved) == (
        14,
        1,
        1,
        12,
        11,
        1,
        0,
        5,
    )
    assert (m2.runs, m2.canceled, m2.attempts, m2.completed, m2.errors, m2.timeouts, m2.solved) == (
        13,
        1,
        12,
        11,
        0,
        1,
        3,
    )
    # mean reward over completed attempts only: errors have no reward
    assert m1.mean_reward == pytest.approx(5 / 11) and m1.interval == wilson_interval(5, 11)
    assert m2.mean_reward == pytest.approx(3.5 / 11) and m2.interval.method == "t"
    assert m1.median_wall_s == pytest.approx(11.0)  # attempts 0/1/2 take 10/11/12 s


def test_tokens_and_cost_sum_every_run_that_spent_and_count_unpriced_steps(store):
    report = build_report(store, Filters(sweeps=("S1",)))
    m1, m2 = summary(report, "m1"), summary(report, "m2")
    assert (m1.tokens_in, m1.tokens_out, m1.cost_usd, m1.unpriced_steps) == (1200, 120, pytest.approx(0.12), 0)
    assert (m2.tokens_in, m2.cost_usd, m2.unpriced_steps) == (1200, None, 12)


def test_task_matrix_shows_solved_over_attempts_and_flags_failures(store):
    report = build_report(store, Filters())
    text = render(report, "table")
    matrix = text.split("Tasks solved")[1]
    rows = {line.split()[0]: line.split()[1:] for line in matrix.splitlines()[2:] if line and line[0] != "("}
    assert rows["t1"] == ["0/1", "3/3", "1/3"]  # noop, tool_calling/m1, tool_calling/m2
    assert rows["t4"] == ["1/3!", "2/3"]  # no noop run: an empty cell
    assert rows["t3"] == ["0/3", "0/3!"]
    assert rows["tasks"] == ["solved", "0/1", "3/4", "2/4"]


def test_filters_select_by_sweep_agent_model_task_glob_and_time(store):
    def groups(**kw):
        return [(g.agent, g.model, g.attempts) for g in build_report(store, Filters(**kw)).groups]

    assert groups(models=("-",)) == [("noop", "", 1)]
    assert groups(agents=("tool_calling",), models=("m2",), tasks=("t[12]",)) == [("tool_calling", "m2", 6)]
    assert groups(since=datetime(2025, 2, 27)) == [("tool_calling", "m1", 12), ("tool_calling", "m2", 12)]
    assert groups(sweeps=("last",)) == groups(sweeps=("S1",))
    assert build_report(store, Filters(tasks=("nope*",))).notes == ["no runs match these filters"]
    assert groups(agents=("x' OR '1'='1",), tasks=("it's*",)) == []  # values are quoted, never SQL


def test_compare_lists_the_tasks_that_flipped_between_two_sweeps(store):
    extra = [  # sweep S2 for m1: t1 lost, t3 gained, t2 unchanged (solved), t4 absent
        run("s2-t1", task="t1", model="m1", attempt=0, reward=0.0, sweep="S2", spec="s2-t1"),
        run("s2-t2", task="t2", model="m1", attempt=0, reward=1.0, sweep="S2", spec="s2-t2"),
        run("s2-t3", task="t3", model="m1", attempt=0, reward=1.0, sweep="S2", spec="s2-t3"),
    ]
    for record in extra:
        store.write_run_record(record, None)
    report = build_report(store, Filters(models=("m1",)), compare=("S1", "S2"))
    (tally,) = report.comparison.tallies
    assert (tally.tasks, tally.solved_a, tally.solved_b, tally.gained, tally.lost, tally.only_a, tally.only_b) == (
        3,
        2,
        2,
        1,
        1,
        1,
        0,
    )
    assert [(f.task_id, f.change, f.a.solved, f.a.attempts, f.b.solved) for f in report.comparison.flips] == [
        ("t1", "lost", 3, 3, 0),
        ("t3", "gained", 0, 3, 1),
    ]


# ---------------------------------------------------------------- the command


def test_report_command_prints_every_format(store, capsys):
    assert main(["report", "--sweep", "S1", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ks"] == [1, 2, 3] and document["filters"] == {"sweep": ["S1"]}
    m1 = next(row for row in document["summary"] if row["model"] == "m1")
    assert m1["pass@3"] == 0.75 and m1["ci_method"] == "wilson" and m1["running"] == 1
    assert {
        "task_id": "t4",
        "agent": "tool_calling",
        "model": "m1",
        "solved": 1,
        "attempts": 3,
        "failed": 1,
    } in document["matrix"]
    assert any("still running" in note for note in document["notes"])

    assert main(["report", "--sweep", "S1", "--format", "csv", "--k", "1,3"]) == 0
    blocks = capsys.readouterr().out.split("# ")[1:]
    assert [b.splitlines()[0] for b in blocks] == ["summary", "matrix"]
    header = blocks[0].splitlines()[1].split(",")
    assert "pass@1" in header and "pass@3" in header and "pass@2" not in header

    assert main(["report", "--format", "markdown", "--model", "m2"]) == 0
    text = capsys.readouterr().out
    assert "| agent | model | runs |" in text and "| tool_calling | m2 | 13 | 12 |" in text

    assert main(["report", "--compare", "S0", "S1", "--agent", "noop"]) == 0
    assert "Sweep S0 (a) vs S1 (b)" in capsys.readouterr().out


def test_report_command_rejects_bad_options_in_one_line(store, capsys):
    assert main(["report", "--k", "two"]) == 2
    assert main(["report", "--since", "yesterday"]) == 2
    assert main(["report", "--format", "html"]) == 2
    assert main(["report", "--compare", "S0", "S1", "--sweep", "S1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("crucible report: ") for line in err)


def report_cli(*args: str) -> subprocess.CompletedProcess:
    """``crucible report`` as a user runs it, on the store the ``store`` fixture filled (its
    $CRUCIBLE_HOME is in this process's environment, which the child inherits)."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "report", *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, line",
    [
        (["--sweep", "NOSUCH"], "--sweep NOSUCH: no such sweep in the store (the latest is S1; --sweep last names it)"),
        (
            ["--sweep", "S1,NOSUCH"],
            "--sweep NOSUCH: no such sweep in the store (the latest is S1; --sweep last names it)",
        ),
        (
            ["--compare", "S0", "NOSUCH"],
            "--compare NOSUCH: no such sweep in the store (the latest is S1; --compare last names it)",
        ),
    ],
)
def test_a_sweep_the_store_lacks_exits_non_zero_naming_it(store, args, line):
    proc = report_cli(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"crucible report: {line}"]
    assert proc.stdout == ""
    assert report_cli("--sweep", "S1").returncode == 0  # a sweep the store has still reports


@pytest.mark.slow
def test_sweep_last_in_a_store_without_sweeps_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    no_sweep = DuckDBStore()
    no_sweep.write_run_record(
        run("single", task="t1", model=None, attempt=0, reward=1.0, agent="noop", sweep=None), None
    )
    no_sweep.ingest_pending()
    proc = report_cli("--sweep", "last")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "crucible report: --sweep last: the store has no sweep yet (crucible run -m makes one)"
    ]
    assert report_cli().returncode == 0  # the run outside any sweep is still reported without --sweep
