"""``crucible export`` / ``crucible import``: a real sweep's store, exported as Parquet and as
JSONL, loaded into other stores: every table equal, the same ``crucible report`` byte for
byte, nothing twice, and bad exports refused in one line with the target untouched."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime

import pytest
from real_sweep import sweep_into

from engine.cli.main import main
from engine.models import TerminalRecord
from engine.store.duckdb import DuckDBStore
from engine.store.schema import SCHEMA_VERSION
from engine.store.terminals import TerminalLog, TerminalPolicy

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FORMATS = ("parquet", "jsonl")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A store filled by one real sweep (4 runs, their steps, subscores, stage timings, builds),
    plus a terminal of one run with its snapshot and a later sweep's link to another run,
    through the store's own recording calls, so that every table has rows."""
    store = tmp_path_factory.mktemp("export-source") / "store.duckdb"
    sweep_into(store)
    filled = DuckDBStore(store)
    first, second = sorted(r for (r,) in filled.query("SELECT run_id FROM runs")[1])[:2]
    log = TerminalLog(filled, first, TerminalPolicy(retention=60))

    async def terminal():
        await log.start(
            TerminalRecord(
                terminal_id="term-1",
                run_id=first,
                owner="test",
                tmux_server="crucible-x",
                tmux_session="crucible",
                state="running",
                started_at=datetime.now(UTC).isoformat(),
            )
        )
        await log.end("term-1", state="closing", reason="done", final_text="● Done.\n  ünïcode")

    asyncio.run(terminal())
    filled.link_sweep_run("S-resumed", second)
    _, counts = filled.query(
        "SELECT (SELECT count(*) FROM terminals), (SELECT count(*) FROM terminal_snapshots), "
        "(SELECT count(*) FROM sweep_runs)"
    )
    assert counts == [(1, 1, 1)]
    return store


@pytest.fixture(scope="module")
def exports(source, tmp_path_factory):
    """format -> the export directory of ``source``."""
    root = tmp_path_factory.mktemp("exports")
    for fmt in FORMATS:
        assert main(["export", "--store", str(source), "--format", fmt, str(root / fmt)]) == 0
    return {fmt: root / fmt for fmt in FORMATS}


def tables(store) -> dict[str, list[tuple]]:
    """Every table but ``meta``, its rows in a fixed order: what "without loss" compares."""
    _, names = DuckDBStore(store).query("SELECT table_name FROM duckdb_tables() WHERE table_name <> 'meta'")
    return {name: DuckDBStore(store).query(f'SELECT * FROM "{name}" ORDER BY ALL')[1] for (name,) in names}


def report(store, fmt: str, capsys) -> str:
    capsys.readouterr()
    assert main(["report", "--store", str(store), "--format", fmt]) == 0
    return capsys.readouterr().out


def import_into(export, store, capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["import", str(export), "--store", str(store)])
    return code, capsys.readouterr().err.splitlines()


def test_export_writes_every_table_the_store_has_and_a_manifest(source, exports):
    have = set(tables(source)) | {"meta"}
    for fmt, directory in exports.items():
        manifest = json.loads((directory / "manifest.json").read_text())
        assert manifest["schema_version"] == SCHEMA_VERSION and manifest["format"] == fmt
        assert {t["name"] for t in manifest["tables"]} == have
        for table in manifest["tables"]:
            assert (directory / table["file"]).is_file()
        runs = next(t for t in manifest["tables"] if t["name"] == "runs")
        assert runs["rows"] == 4 and {"name": "started_at", "type": "TIMESTAMP"} in runs["columns"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_round_trip_keeps_every_row_and_the_same_report_byte_for_byte(source, exports, tmp_path, capsys, fmt):
    target = tmp_path / "target.duckdb"
    assert import_into(exports[fmt], target, capsys) == (0, [])
    assert tables(target) == tables(source)  # timestamps, JSON text, lists, doubles: all exact
    for shown in ("table", "json", "csv", "markdown"):
        assert report(target, shown, capsys) == report(source, shown, capsys), shown


def test_importing_twice_adds_nothing(source, exports, tmp_path, capsys):
    target = tmp_path / "target.duckdb"
    assert import_into(exports["parquet"], target, capsys)[0] == 0
    assert import_into(exports["jsonl"], target, capsys)[0] == 0  # the same rows, the other format
    capsys.readouterr()
    assert main(["import", str(exports["parquet"]), "--store", str(target)]) == 0
    assert "nothing new (every row was there)" in capsys.readouterr().out
    assert tables(target) == tables(source)


def test_a_store_that_has_some_of_the_runs_keeps_each_once(source, exports, tmp_path, capsys):
    target = tmp_path / "partial.duckdb"
    partial = DuckDBStore(target)
    # a golden replay (it has steps) and a baseline
    _, rows = DuckDBStore(source).query("SELECT run_id, agent FROM runs ORDER BY agent, run_id")
    run_ids = sorted(r for r, _ in rows)
    had = [next(r for r, agent in rows if agent == name) for name in ("integration_test", "noop")]
    for record in DuckDBStore(source).get_runs(had).values():
        partial.write_run_record(record, None)  # as its own sweep recorded them
    partial.ingest_pending()
    own_steps = partial.query("SELECT * FROM steps ORDER BY ALL")[1]
    assert own_steps  # the golden replay's tool calls
    assert import_into(exports["jsonl"], target, capsys)[0] == 0
    _, counts = partial.query("SELECT run_id, count(*) FROM runs GROUP BY run_id")
    assert sorted(counts) == [(r, 1) for r in run_ids]
    # the runs it had keep their own child rows, not a second set from the export
    assert partial.query(f"SELECT * FROM steps WHERE run_id IN ('{had[0]}', '{had[1]}') ORDER BY ALL")[1] == own_steps
    for child in ("steps", "subscores", "stage_timings"):
        assert tables(target)[child] == tables(source)[child], child
    assert report(target, "json", capsys) == report(source, "json", capsys)


def broken(exports, tmp_path, how: str):
    directory = tmp_path / how
    if how == "not_an_export":
        directory.mkdir()
        (directory / "runs.parquet").write_text("")
        return directory, "no manifest.json: not a crucible export (crucible export makes one)"
    shutil.copytree(exports["jsonl"], directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    if how == "missing_table_file":
        (directory / "steps.jsonl").unlink()
        return directory, "table steps: file steps.jsonl is missing"
    if how == "newer_schema":
        manifest["schema_version"] = SCHEMA_VERSION + 1
        (directory / "manifest.json").write_text(json.dumps(manifest))
        return (
            directory,
            f"schema version {SCHEMA_VERSION + 1} is newer than this crucible's {SCHEMA_VERSION}; upgrade crucible",
        )
    lines = (directory / "stage_timings.jsonl").read_text().splitlines(keepends=True)
    (directory / "stage_timings.jsonl").write_text("".join(lines[:-1]))  # a file cut short
    return directory, f"stage_timings.jsonl holds {len(lines) - 1} rows, the manifest says {len(lines)}"


@pytest.mark.parametrize("how", ["not_an_export", "missing_table_file", "newer_schema", "cut_short"])
def test_a_bad_export_is_one_line_and_leaves_the_target_as_it_was(exports, tmp_path, capsys, how):
    target = tmp_path / "target.duckdb"
    assert main(["import", str(exports["parquet"]), "--store", str(target)]) == 0
    before = tables(target)
    directory, words = broken(exports, tmp_path, how)
    code, err = import_into(directory, target, capsys)
    assert code == 2 and err == [f"crucible import: import {directory}: {words}"]
    assert tables(target) == before
    fresh = tmp_path / "fresh.duckdb"
    assert import_into(directory, fresh, capsys)[0] == 2 and not fresh.exists()


def test_export_refuses_a_directory_that_holds_files(source, exports, capsys):
    assert main(["export", "--store", str(source), "--format", "parquet", str(exports["parquet"])]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"crucible export: export {exports['parquet']}: exists and is not an empty directory (name a new one)"
    ]


def test_an_export_of_an_older_schema_loads_with_what_it_predates_left_empty(source, exports, tmp_path, capsys):
    import duckdb

    directory = tmp_path / "older"
    shutil.copytree(exports["parquet"], directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    con = duckdb.connect()  # the runs file as a schema-2 store wrote it: no final_answer column
    con.execute(
        f"COPY (SELECT * EXCLUDE (final_answer) FROM read_parquet('{directory / 'runs.parquet'}')) "
        f"TO '{directory / 'runs2.parquet'}' (FORMAT PARQUET)"
    )
    con.close()
    (directory / "runs2.parquet").replace(directory / "runs.parquet")
    manifest["schema_version"] = 2
    manifest["tables"] = [
        t
        for t in manifest["tables"]
        if t["name"] in ("meta", "runs", "steps", "subscores", "test_results", "stage_timings", "builds")
    ]
    runs = next(t for t in manifest["tables"] if t["name"] == "runs")
    runs["columns"] = [c for c in runs["columns"] if c["name"] != "final_answer"]
    (directory / "manifest.json").write_text(json.dumps(manifest))
    target = tmp_path / "target.duckdb"
    assert import_into(directory, target, capsys) == (0, [])
    assert DuckDBStore(target).query("SELECT count(*), count(final_answer) FROM runs")[1] == [(4, 0)]
    assert report(target, "json", capsys) == report(source, "json", capsys)


def test_predictions_of_a_coding_sweep_name_instances_by_the_tasks_last_component(source, tmp_path, capsys):
    preds = tmp_path / "preds.jsonl"
    [(sweep,)] = DuckDBStore(source).query("SELECT DISTINCT sweep_id FROM runs")[1]
    capsys.readouterr()
    assert main(["export", "--store", str(source), "--predictions", str(preds), "--sweep", sweep]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert (
        "ran 2 agent/model pairs; a predictions file is for one: choose with --agent integration_test, "
        "--agent noop" in line
    )
    assert (
        main(
            [
                "export",
                "--store",
                str(source),
                "--predictions",
                str(preds),
                "--sweep",
                sweep,
                "--agent",
                "integration_test",
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert [(p["instance_id"], p["model_name_or_path"]) for p in lines] == [
        ("last_page", "integration_test"),
        ("query_ops", "integration_test"),
    ]
    assert all(p["model_patch"].startswith("diff --git") for p in lines)
    assert main(["export", "--store", str(source), "--predictions", str(preds)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "crucible export: --predictions and --swebench-report need --sweep ID (or --sweep last)"
    ]
