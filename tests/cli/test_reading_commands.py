"""The commands that read the store, as a new user meets them (issue 39, point 5): ``show``
prints the run's diff, whole; ``query``, ``show`` and ``report`` read the store ``--store PATH``
(or ``store=PATH``, as ``run`` takes it) names; a store path where there is none is one line,
and no store is made there."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.models import RunRecord
from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]
DIFF_FILES = 2500
"""Files in the long diff: ~5,000 lines, far past anything a terminal shows at once."""


def crucible(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "CRUCIBLE_STORE"}
    full.update({"CRUCIBLE_HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT, env=full, timeout=120
    )


def long_diff() -> str:
    return "".join(
        f"diff --git a/src/m{i}.py b/src/m{i}.py\n--- a/src/m{i}.py\n+++ b/src/m{i}.py\n"
        f"@@ -1 +1 @@\n-old = {i}\n+new = {i}\n"
        for i in range(DIFF_FILES)
    )


def record(run_id: str, *, diff: str | None, sweep: str | None = None) -> RunRecord:
    now = datetime.now(UTC).isoformat()
    return RunRecord(
        run_id=run_id,
        spec_hash=run_id.ljust(64, "0"),
        spec={},
        status="completed",
        task_id="sample/last_page",
        agent="noop",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained="strict",
        attempt=0,
        seed=0,
        sweep_id=sweep,
        started_at=now,
        ended_at=now,
        reward=0.0,
        image_tag="crucible/task:x",
        diff=diff,
        raw_grade={"reason": "graded"},
    )


def stored(home: Path, path: Path, *records: RunRecord, monkeypatch) -> Path:
    """``records`` in the store at ``path``, recorded as a run records them (through ``home``'s spool)."""
    monkeypatch.setenv("CRUCIBLE_HOME", str(home))  # its spool too: never the session's
    store = DuckDBStore(path)
    for each in records:
        store.record_run(each)
    return path


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """Two stores: the default one ($CRUCIBLE_HOME's) and another, each with runs of its own."""
    home = tmp_path / "home"
    home.mkdir()
    stored(
        home, home / "store.duckdb", record("default-run", diff="x\n", sweep="SWEEP-DEFAULT"), monkeypatch=monkeypatch
    )
    (tmp_path / "elsewhere").mkdir()
    other = stored(
        home,
        tmp_path / "elsewhere" / "other.duckdb",
        record("long-diff", diff=long_diff(), sweep="SWEEP-OTHER"),
        record("no-diff", diff=None),
        record("empty-diff", diff=""),
        monkeypatch=monkeypatch,
    )
    return home, other


def test_show_prints_the_whole_diff_after_everything_else(stores):
    home, other = stores
    proc = crucible(home, "show", "long-diff", "--store", str(other))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    diff_lines = long_diff().splitlines()
    at = lines.index(f"diff ({len(diff_lines)} lines):")
    assert any(line.startswith("raw grade: ") for line in lines[:at]), "the diff comes after what show printed before"
    assert lines[at + 1 :] == diff_lines, "the diff is printed whole, and last"


@pytest.mark.slow
@pytest.mark.parametrize(
    "run_id, line",
    [
        ("no-diff", "diff       none: no submission was captured"),
        ("empty-diff", "diff       empty: the submission changed nothing"),
    ],
)
def test_show_says_in_one_line_that_a_run_has_no_diff(stores, run_id, line):
    home, other = stores
    proc = crucible(home, "show", run_id, f"store={other}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == line


@pytest.mark.slow
@pytest.mark.parametrize("form", ["--store", "--store=", "store="])
@pytest.mark.parametrize("command", ["query", "show", "report"])
def test_the_read_commands_read_the_store_they_are_given(stores, command, form):
    home, other = stores
    store_args = [form + str(other)] if form.endswith("=") else [form, str(other)]
    args = {
        "query": ["select run_id from runs order by run_id", "--csv"],
        "show": ["long-diff"],
        "report": ["--sweep", "SWEEP-OTHER", "--format", "json"],
    }[command]
    # $CRUCIBLE_STORE names the default store: the option wins over it, as store= does for run.
    proc = crucible(home, command, *args, *store_args, env={"CRUCIBLE_STORE": str(home / "store.duckdb")})
    assert proc.returncode == 0, proc.stderr
    assert "default-run" not in proc.stdout and "SWEEP-DEFAULT" not in proc.stdout
    expected = {"query": "empty-diff\nlong-diff\nno-diff\n", "show": "run        long-diff", "report": '"SWEEP-OTHER"'}
    assert expected[command] in proc.stdout, proc.stdout
    # Without the option: the default store, which has none of the other's runs.
    default = crucible(home, "query", "select run_id from runs", "--csv")
    assert default.returncode == 0 and default.stdout.split() == ["run_id", "default-run"], default.stdout


@pytest.mark.parametrize("command", ["query", "show", "report"])
def test_a_store_path_with_no_store_is_one_line_naming_it_and_none_is_made(stores, command):
    home, other = stores
    missing = other.parent / "typo.duckdb"
    args = {"query": ["select 1"], "show": ["long-diff"], "report": []}[command]
    proc = crucible(home, command, *args, "--store", str(missing))
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"crucible {command}: store {missing}: does not exist (query, show and report read a store, never create one)"
    ]
    assert sorted(p.name for p in other.parent.iterdir() if p.name.startswith("typo")) == [], "nothing made there"


def test_two_different_stores_at_once_are_refused_in_one_line(stores):
    home, other = stores
    proc = crucible(home, "show", "long-diff", "--store", str(other), f"store={home / 'store.duckdb'}")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "two stores given" in proc.stderr
