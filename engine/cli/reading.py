"""The commands that read the store: ``query``, ``show``, ``regrade``, ``terminals``, ``report``,
``view``, ``export`` and ``import``. Each opens the store only to read it (``--store PATH``)."""

from __future__ import annotations

import os

from engine.cli.args import one_line_parser, parse_reading
from engine.errors import UserError


# ---------------------------------------------------------------- query
def cmd_query(args: list[str]) -> int:
    from engine.run.session import open_housekept_store as open_store
    from engine.util.tables import format_table, to_csv, to_json

    parser = one_line_parser(
        "query",
        "SQL over every run (tables: runs, steps, subscores, stage_timings, test_results, builds, terminals, terminal_snapshots)",
    )
    parser.add_argument("sql")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    ns = parse_reading(parser, args)
    columns, rows = open_store(ns.store).query(ns.sql)
    print(
        to_json(columns, rows) if ns.json else to_csv(columns, rows) if ns.csv else format_table(columns, rows),
        end="" if ns.csv else "\n",
    )
    return 0


# ---------------------------------------------------------------- show / terminals
def cmd_show(args: list[str]) -> int:
    from engine.cli.show import run_show

    parser = one_line_parser("show", "one run: spec, status, verdict, steps, timings, tests, raw grade, then its diff")
    parser.add_argument("run_id")
    parser.add_argument("--json", action="store_true")
    ns = parse_reading(parser, args)
    return run_show(ns.run_id, store_path=ns.store, as_json=ns.json)


def cmd_regrade(args: list[str]) -> int:
    from engine.cli.regrade import run_regrade

    parser = one_line_parser("regrade", "stored runs judged again by today's code, beside their stored verdicts")
    parser.add_argument("run_ids", nargs="*")
    parser.add_argument("--all", action="store_true", help="every completed run in the store")
    parser.add_argument("--json", action="store_true")
    ns = parse_reading(parser, args)
    return run_regrade(ns.run_ids, every=ns.all, store_path=ns.store, as_json=ns.json)


def cmd_terminals(args: list[str]) -> int:
    from engine.cli.show import run_terminals

    if args[:1] == ["dismiss"]:
        parser = one_line_parser("terminals dismiss", "close an ended terminal now: it leaves the listing")
        parser.add_argument("terminal_id")
        return run_terminals(dismiss=parser.parse_args(args[1:]).terminal_id)
    parser = one_line_parser("terminals", "the terminals of coding CLIs run in tmux (those not closed, unless --all)")
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--all", action="store_true", help="closed ones too (retention over, or dismissed)")
    ns = parser.parse_args(args)
    return run_terminals(run_id=ns.run_id, include_closed=ns.all)


# ---------------------------------------------------------------- report
def cmd_report(args: list[str]) -> int:
    from engine.report.compute import build_report
    from engine.report.query import filters_from_args, parse_ks
    from engine.report.render import FORMATS, render
    from engine.run.session import open_housekept_store

    parser = one_line_parser(
        "report",
        "per agent and model: mean reward with a 95% interval, pass@k, a task matrix; "
        "or the tasks that flipped between two sweeps (docs/report.md)",
    )
    for name, meta in (("sweep", "ID"), ("agent", "NAME"), ("model", "MODEL"), ("task", "GLOB")):
        parser.add_argument(
            f"--{name}",
            action="append",
            default=[],
            metavar=meta,
            help="repeatable, or a comma list" + ("; last = the latest sweep" if name == "sweep" else ""),
        )
    parser.add_argument("--since", help="runs started since: 30m, 12h, 7d, or an ISO date/time (UTC)")
    parser.add_argument("--compare", nargs=2, metavar=("SWEEP_A", "SWEEP_B"), help="the tasks that flipped")
    parser.add_argument("--k", help="pass@k for these k (comma list); default: every k the attempts allow")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--plot", metavar="FILE.png|FILE.svg", help="also draw the report into this file")
    parser.add_argument("--plot-kind", choices=("pass_rate", "cost", "stages"), default="pass_rate")
    ns = parse_reading(parser, args)
    plot_format = _plot_format(ns.plot, ns.compare)
    filters = filters_from_args(sweeps=ns.sweep, agents=ns.agent, models=ns.model, tasks=ns.task, since=ns.since)
    store = open_housekept_store(ns.store)
    report = build_report(store, filters, compare=tuple(ns.compare) if ns.compare else None, ks=parse_ks(ns.k))
    if plot_format:
        from engine.report.plots import load_stage_times, plot

        timings = load_stage_times(store, report.filters) if ns.plot_kind == "stages" else []
        _write_file(ns.plot, plot(ns.plot_kind, report, timings, plot_format), "--plot")
    print(render(report, ns.format), end="" if ns.format == "csv" else "\n")
    return 0


def _plot_format(path: str | None, compare: list[str] | None) -> str | None:
    """``--plot FILE``'s format from its extension; checked before the store is read."""
    if path is None:
        return None
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    if extension not in ("png", "svg"):
        raise UserError(f"--plot {path}: name a .png or .svg file")
    if compare:
        raise UserError("--plot draws the summary of one set of runs; drop --compare")
    return extension


def _write_file(path: str, data: bytes, option: str) -> None:
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write it ({exc.strerror})") from exc


# ---------------------------------------------------------------- view
def cmd_view(args: list[str]) -> int:
    from engine.run.session import open_housekept_store

    parser = one_line_parser("view", "a local, read-only web viewer of the store (docs/view.md)")
    parser.add_argument("--port", type=int, default=8765, help="default 8765; 0 picks a free port")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--bundle", metavar="DIR", help="write the pages as a static site into DIR instead of serving")
    ns = parse_reading(parser, args)
    if not 0 <= ns.port <= 65535:
        raise UserError(f"--port {ns.port}: give a port from 1 to 65535, or 0 for a free one")
    path = open_housekept_store(ns.store).path  # validated, schema current; then only read, per request
    if ns.bundle:
        from pathlib import Path

        from engine.view.bundle import write_bundle

        count = write_bundle(path, Path(ns.bundle))
        print(f"crucible view: {count} page(s) written; open {Path(ns.bundle).resolve() / 'index.html'}")
        return 0
    from engine.view.app import serve

    serve(path, ns.host, ns.port)
    return 0


# ---------------------------------------------------------------- export / import
def cmd_export(args: list[str]) -> int:
    if any(a == "--trajectories" or a.startswith("--trajectories=") for a in args):
        from engine.cli.export import run_export_trajectories  # every run's steps as ATIF

        return run_export_trajectories(args)
    from engine.cli.export import run_export

    return run_export(args)


def cmd_import(args: list[str]) -> int:
    from engine.cli.export import run_import

    return run_import(args)
