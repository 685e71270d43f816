"""``crucible export`` and ``crucible import`` (docs/report.md, "Exports and imports").

crucible export --format parquet|jsonl DIR        every table of the store, and a manifest
crucible export --predictions FILE --sweep ID     a sweep's patches as SWE-bench predictions
crucible export --swebench-report FILE --sweep ID a sweep's verdicts as a SWE-bench report
crucible export --trajectories ATIF DIR           every run's steps as ATIF trajectories
crucible import DIR                               an export into this store, nothing twice
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from engine.store.duckdb import DuckDBStore

from engine.errors import UserError


def run_export(args: list[str]) -> int:
    from engine.cli.args import one_line_parser, parse_reading
    from engine.store.export import FORMATS

    parser = one_line_parser(
        "export",
        "the store's tables as Parquet or JSONL files, or a sweep as SWE-bench predictions or report (docs/report.md)",
    )
    parser.add_argument("directory", nargs="?", metavar="DIR", help="with --format: a new (or empty) directory")
    parser.add_argument("--format", choices=tuple(FORMATS), help="every table, one file each, into DIR")
    parser.add_argument("--predictions", metavar="FILE", help="the sweep's patches, SWE-bench predictions JSONL")
    parser.add_argument("--swebench-report", metavar="FILE", help="the sweep's verdicts, a SWE-bench-style report")
    parser.add_argument("--sweep", metavar="ID", help="the sweep (last = the latest)")
    parser.add_argument("--agent", action="append", default=[], help="with several agents in the sweep: which")
    parser.add_argument("--model", action="append", default=[], help="with several models in the sweep: which")
    parser.add_argument("--task", action="append", default=[], metavar="GLOB", help="only these tasks")
    parser.add_argument("--attempt", type=int, help="which attempt (default: the lowest of each task)")
    ns = parse_reading(parser, args)
    store = _reading_store(ns.store)
    if ns.format:
        if ns.predictions or ns.swebench_report or not ns.directory:
            raise UserError("--format takes a DIR and nothing else: crucible export --format parquet|jsonl DIR")
        from engine.store.export import export_store

        manifest = export_store(store, Path(ns.directory), ns.format)
        rows = sum(t["rows"] for t in manifest["tables"])
        print(f"exported {len(manifest['tables'])} table(s), {rows} row(s), as {ns.format} into {ns.directory}")
        return 0
    if not (ns.predictions or ns.swebench_report) or ns.directory:
        raise UserError("say what to export: --format parquet|jsonl DIR, --predictions FILE or --swebench-report FILE")
    if not ns.sweep:
        raise UserError("--predictions and --swebench-report need --sweep ID (or --sweep last)")
    return _export_sweep(store, ns)


def _export_sweep(store: DuckDBStore, ns: argparse.Namespace) -> int:
    from engine.report.query import filters_from_args
    from engine.report.swebench import predictions_jsonl, swebench_report, sweep_instances

    chosen = filters_from_args(sweeps=[], agents=ns.agent, models=ns.model, tasks=ns.task, since=None)
    instances = sweep_instances(
        store, ns.sweep, agents=chosen.agents, models=chosen.models, tasks=chosen.tasks, attempt=ns.attempt
    )
    if ns.predictions:
        _write(ns.predictions, predictions_jsonl(instances), "--predictions")
        print(f"wrote {len(instances)} prediction(s) to {ns.predictions}")
    if ns.swebench_report:
        report = swebench_report(instances)
        _write(ns.swebench_report, json.dumps(report, indent=2) + "\n", "--swebench-report")
        print(f"wrote {ns.swebench_report}: resolved {report['resolved_instances']} of {report['total_instances']}")
    return 0


def run_export_trajectories(args: list[str]) -> int:
    """``crucible export --trajectories ATIF DIR [--task GLOB] [--sweep ID|last]``."""
    from engine.cli.args import one_line_parser, parse_reading
    from engine.run.session import open_housekept_store
    from engine.store.atif import FORMATS, SCHEMA_VERSION, export_trajectories

    parser = one_line_parser("export", "every run's steps as trajectories in Harbor's ATIF (docs/harbor.md)")
    parser.add_argument("--trajectories", choices=FORMATS, required=True)
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument("--task", action="append", default=[], metavar="GLOB", help="only these tasks")
    parser.add_argument("--sweep", metavar="ID", help="only this sweep's runs (last = the latest)")
    ns = parse_reading(parser, args)
    count = export_trajectories(open_housekept_store(ns.store), Path(ns.directory), tasks=ns.task, sweep=ns.sweep)
    print(f"wrote {count} trajectory file(s) ({SCHEMA_VERSION}) into {ns.directory}")
    return 0


def run_import(args: list[str]) -> int:
    from engine.cli.args import one_line_parser
    from engine.store.duckdb import DuckDBStore
    from engine.store.export import import_store

    parser = one_line_parser("import", "load a crucible export into this store; rows it has already are kept once")
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="the store to load into (made if missing; default: $CRUCIBLE_STORE, else $CRUCIBLE_HOME/store.duckdb)",
    )
    ns = parser.parse_args(args)
    store = DuckDBStore(ns.store or None)
    added = import_store(store, Path(ns.directory))
    shown = ", ".join(f"{name} {count}" for name, count in added.items() if count)
    print(f"imported into {store.path}: " + (shown or "nothing new (every row was there)"))
    return 0


def _reading_store(path: str | None) -> DuckDBStore:
    from engine.run.session import open_housekept_store

    return open_housekept_store(path)


def _write(path: str, text: str, option: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write it ({exc.strerror})") from exc
