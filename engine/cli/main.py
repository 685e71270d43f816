"""The ``crucible`` command.

    crucible run [-m] [overrides]        a run, or a Hydra multirun sweep (joblib, parallel)
    crucible check [overrides]           the shipping gate: golden 1.0, baseline 0.0
    crucible check --lock [overrides]    derive each task's named tests first (crucible lock)
    crucible lock [overrides] [--check N]
                                         run golden and baseline, write the task's lock file:
                                         fail-to-pass / pass-to-pass lists, SHAs, image hash
    crucible task new SET/NAME --repo PATH_OR_URL --fix SHA [--base SHA] [--tests GLOB ...]
                      [--prompt-file F] [--install CMD] [--packages P ...] [--test-command C]
                                         a task from an upstream fix: repo, YAML, lock, gate
    crucible build [overrides] [--dry-run]
    crucible query "SQL" [--json|--csv] [--store PATH]
    crucible show RUN_ID [--store PATH]  a run: spec, verdict, steps, tests, then its whole diff
    crucible rerun RUN_ID [--into DIR]   the same spec as a new run (no rebuild), both verdicts;
                                         exit 1: a deterministic agent's verdict changed,
                                         exit 4: the spec plans differently now (nothing run)
    crucible terminals [RUN_ID] [--all]  the terminals of coding CLIs run in tmux: state, closes_at
    crucible terminals dismiss TERMINAL_ID
                                         close an ended terminal now (it leaves the listing)
    crucible gc [--dry-run] [--match GLOB] [--min-age SECONDS]
                                         remove task images / local templates no stored run
                                         refers to (never one in use, never the base image)
    crucible report [--sweep ID] [--agent A] [--model M] [--task GLOB] [--since 7d]
                    [--compare SWEEP_A SWEEP_B] [--format table|markdown|csv|json] [--store PATH]
    crucible doctor [--fix]

User mistakes end in one line on stderr and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import re
import signal
import sys
import threading
from typing import NoReturn

from engine.errors import CrucibleError, UserError

USAGE = __doc__


def _sigterm_as_interrupt(signum, frame):  # so `finally` blocks remove containers on kill
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    handlers = {"run": cmd_run, "check": cmd_check, "build": cmd_build, "query": cmd_query,
                "show": cmd_show, "report": cmd_report, "doctor": cmd_doctor, "rerun": cmd_rerun,
                "gc": cmd_gc, "lock": cmd_lock, "task": cmd_task, "terminals": cmd_terminals}
    try:
        if command not in handlers:
            return _plugin_command(command, rest, list(handlers))
        return handlers[command](rest) or 0
    except UserError as exc:
        print(f"crucible {command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except CrucibleError as exc:
        print(f"crucible {command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"crucible {command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `crucible query ... | head` closed the pipe: not an error
        sys.stderr.close()
        return 0


def usage() -> str:
    """The usage, the commands plug-in packages add included (their ``help`` lines, read from
    their config files: engine/cli/plugins.py)."""
    from engine.cli.plugins import commands

    listed, _, note = USAGE.strip().rpartition("\n\n")
    try:
        added = commands()
    except CrucibleError as exc:  # a broken plug-in file must not hide the usage
        return f"{listed}\n    (plug-in commands not listed: {exc})\n\n{note}"
    return "\n".join([listed, *(_usage_line(name, line) for name, line in added.items())]) + f"\n\n{note}"


def _usage_line(name: str, help_line: str) -> str:
    """``crucible <help_line>`` as the built-in lines stand: the description at column 41, on a
    line of its own where the usage is longer (the usage and the description are apart by three
    spaces or more in ``help``)."""
    text = help_line.strip() or f"{name}   (its conf/command/{name}.yaml has no help line)"
    usage_part, *description = re.split(r"\s{3,}", text, maxsplit=1)
    head = f"    crucible {usage_part}"
    if not description:
        return head
    if len(head) < 40:
        return f"{head:<41}{description[0]}"
    return f"{head}\n{'':41}{description[0]}"


def _plugin_command(command: str, rest: list[str], builtin: list[str]) -> int:
    """A command a plug-in package adds (``conf/command/<name>.yaml``, engine/cli/plugins.py)."""
    from engine.cli.plugins import commands, run_command

    code = run_command(command, rest)
    if code is None:
        print(f"crucible: unknown command '{command}' (commands: {', '.join([*builtin, *commands()])})",
              file=sys.stderr)
        return 2
    return code


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    class OneLineParser(argparse.ArgumentParser):
        def error(self, message):
            raise UserError(message)

    return OneLineParser(prog=f"crucible {prog}", description=description)


def _require_task(overrides: list[str]) -> None:
    """A command that takes tasks says how to choose one, and which sets there are, without one."""
    if not any(o.startswith("task=") for o in overrides):
        from engine.config.compose import no_task_selected

        raise no_task_selected()


def _parse_reading(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    """``args`` parsed for a command that reads the store (query, show, report), with its
    ``--store PATH``, also taken as ``store=PATH`` (as ``crucible run`` takes it); ``ns.store``
    is None for the default store."""
    parser.add_argument("--store", metavar="PATH",
                        help="the store to read, as run's store=PATH (default: $CRUCIBLE_STORE, "
                             "else $CRUCIBLE_HOME/store.duckdb); it must exist")
    overrides = [a.partition("=")[2] for a in args if a.startswith("store=")]
    ns = parser.parse_args([a for a in args if not a.startswith("store=")])
    given = [*overrides, *([ns.store] if ns.store is not None else [])]
    if len(set(given)) > 1:
        raise UserError(f"two stores given ({', '.join(given)}): a command reads one")
    if given and not given[0]:
        raise UserError("--store: give the store's path")
    ns.store = given[0] if given else None
    return ns


# ---------------------------------------------------------------- run (Hydra app)
def cmd_run(args: list[str]) -> int:
    from engine.cli.run import run_hydra

    return run_hydra(args)


# ---------------------------------------------------------------- check
def cmd_check(args: list[str]) -> int:
    from engine.cli.check import run_check

    parser = _parser("check", "golden must score 1.0 and baseline 0.0 for every selected task")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--rebuild", action="store_true", help="run again even if the store has the verdict")
    parser.add_argument("--check", type=int, default=0, metavar="N", help="run each spec N more times; fail on any difference")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs in parallel (default 2)")
    parser.add_argument("--lock", action="store_true", help="derive and write each task's lock first (crucible lock)")
    ns = parser.parse_args(args)
    _require_task(ns.overrides)
    if ns.lock:
        from engine.cli.lock import run_lock

        if run_lock(ns.overrides, check=ns.check, parallel=max(1, ns.jobs)) != 0:
            return 1
    return run_check(ns.overrides, rebuild=ns.rebuild, check=ns.check, parallel=max(1, ns.jobs))


# ---------------------------------------------------------------- lock
def cmd_lock(args: list[str]) -> int:
    from engine.cli.lock import run_lock

    parser = _parser("lock", "derive each task's fail-to-pass / pass-to-pass tests and write its lock file")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--check", type=int, default=0, metavar="N",
                        help="run each side N more times; tests whose status differs are flaky and left out")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs in parallel (default 2)")
    ns = parser.parse_args(args)
    _require_task(ns.overrides)
    return run_lock(ns.overrides, check=max(0, ns.check), parallel=max(1, ns.jobs))


# ---------------------------------------------------------------- task new
def cmd_task(args: list[str]) -> int:
    from engine.cli.task import run_task_new

    parser = _parser("task", "make a task")
    parser.add_argument("action", choices=["new"])
    parser.add_argument("task_id", metavar="SET/NAME")
    parser.add_argument("--repo", required=True, help="a local path or git URL holding the fix")
    parser.add_argument("--fix", required=True, help="the upstream fix commit")
    parser.add_argument("--base", default=None, help="the commit the task starts from (default: the fix's parent)")
    parser.add_argument("--tests", nargs="+", default=[], metavar="GLOB",
                        help="the fix's test paths (default: the flavor's, e.g. tests/, test_*.py, conftest.py)")
    parser.add_argument("--prompt-file", default=None, help="the task's prompt (default: the fix's commit message)")
    parser.add_argument("--install", default="", help="a shell command run in the image after the repo is in place")
    parser.add_argument("--packages", nargs="+", default=[], metavar="PKG", help="Debian packages for the image")
    parser.add_argument("--test-command", default=None, help="default: python3 -m pytest -q -p no:cacheprovider")
    parser.add_argument("--flavor", default="coding")
    parser.add_argument("--conf", default=None, help="config dir for the task's YAML (default: the last on the config path)")
    parser.add_argument("--check", type=int, default=0, metavar="N", help="lock: run each side N more times")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    ns = parser.parse_args(args)
    return run_task_new(ns.task_id, repo=ns.repo, fix=ns.fix, base=ns.base, tests=ns.tests,
                        prompt_file=ns.prompt_file, install=ns.install, packages=ns.packages,
                        test_command=ns.test_command, flavor=ns.flavor, conf_dir=ns.conf,
                        check=max(0, ns.check), parallel=max(1, ns.jobs))


# ---------------------------------------------------------------- build
def cmd_build(args: list[str]) -> int:
    from engine.cli.build import run_build

    parser = _parser("build", "build (or find in the cache) the images the selected runs need")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--dry-run", action="store_true", help="list what would be built and what is cached")
    ns = parser.parse_args(args)
    return run_build(ns.overrides, dry_run=ns.dry_run)


# ---------------------------------------------------------------- query
def cmd_query(args: list[str]) -> int:
    from engine.run.session import open_housekept_store as open_store
    from engine.util.tables import format_table, to_csv, to_json

    parser = _parser("query", "SQL over every run (tables: runs, steps, subscores, stage_timings, test_results, builds, terminals, terminal_snapshots)")
    parser.add_argument("sql")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    ns = _parse_reading(parser, args)
    columns, rows = open_store(ns.store).query(ns.sql)
    print(to_json(columns, rows) if ns.json else to_csv(columns, rows) if ns.csv else format_table(columns, rows), end="" if ns.csv else "\n")
    return 0


# ---------------------------------------------------------------- show
def cmd_show(args: list[str]) -> int:
    from engine.run.session import open_housekept_store as open_store

    parser = _parser("show", "one run: spec, status, verdict, steps, timings, tests, raw grade, then its diff")
    parser.add_argument("run_id")
    parser.add_argument("--json", action="store_true")
    ns = _parse_reading(parser, args)
    store = open_store(ns.store)
    record = store.get_run(ns.run_id)
    if record is None:
        raise UserError(f"no run '{ns.run_id}' in the store")
    if ns.json:
        print(json.dumps(record.to_dict(), indent=2, default=str))
        return 0
    lines = [
        f"run        {record.run_id}",
        f"task       {record.task_id}    agent {record.agent}" + (f"    model {record.model}" if record.model else ""),
        f"status     {record.status}" + (f" in {record.error_phase}: {record.error}" if record.error else ""),
        f"reward     {record.reward}    stop {record.stop_reason}",
        f"integrity  asked {record.integrity_requested}, got {record.integrity_obtained}",
        f"spec       {record.spec_hash}",
        f"image      {record.image_tag}",
        f"started    {record.started_at}    ended {record.ended_at}",
        "timings    " + "  ".join(f"{k}={v:.2f}s" for k, v in record.timings.items()),
        f"run dir    {record.run_dir}",
    ]
    if record.final_answer:
        lines.append("answer     " + "\n           ".join(record.final_answer.splitlines()[:SHOWN_ANSWER_LINES])
                     + ("\n           ..." if len(record.final_answer.splitlines()) > SHOWN_ANSWER_LINES else ""))
    if record.warnings:
        lines.append("warnings   " + "\n           ".join(record.warnings))
    if record.violations:
        lines.append("violations " + ", ".join(record.violations))
    lines.append(f"steps ({len(record.steps)}):")
    for step in record.steps:
        flag = "ERR" if step.is_error else "ok "
        lines.append(f"  {step.idx:>3} {flag} {step.capability or ''}:{step.tool}  {json.dumps(step.arguments)[:100]}")
    lines.extend(_test_summary(record.tests))
    lines.extend(_explained(record))
    lines.extend(_terminals_shown(store, record.run_id))
    lines.append("raw grade: " + json.dumps(record.raw_grade, indent=2, default=str)[:4000])
    lines.extend(_diff_shown(record.diff))
    print("\n".join(lines))
    return 0


def _diff_shown(diff: str | None) -> list[str]:
    """The submission as captured, last and whole (it is the user's terminal, and a diff cut
    short is no diff to apply); one line where there is none."""
    if diff is None:
        return ["diff       none: no submission was captured"]
    if not diff.strip():
        return ["diff       empty: the submission changed nothing"]
    text = diff[:-1] if diff.endswith("\n") else diff
    return [f"diff ({len(text.splitlines())} lines):", text]


def _explained(record) -> list[str]:
    """What the run's flavor says of its raw grade (``Flavor.explain``, as ``crucible check``
    prints it: for sdlc, the PR and the github_* calls); nothing when there is no grade or the
    flavor cannot be loaded here (then the raw grade below still says everything)."""
    from engine.config.plugins import plugin_class

    part = dict((record.spec or {}).get("flavor") or {})
    if not record.raw_grade or not part.get("_target_"):
        return []
    try:
        flavor = plugin_class(part.pop("_target_"), where="flavor")(**part)
        explained = [str(line) for line in flavor.explain(record.raw_grade)]
    except Exception:  # a flavor removed or changed since the run: show the raw grade alone
        return []
    return ["verdict    " + "\n           ".join(explained)] if explained else []


def _terminals_shown(store, run_id: str) -> list[str]:
    """Each terminal of the run (closed ones too: ``show`` is the run's whole story) and its
    final snapshot, as the pane showed it when the run ended."""
    lines = []
    for terminal in store.terminals(run_id, include_closed=True):
        lines.append(_terminal_line(terminal, prefix="terminal   "))
        final = store.terminal_snapshots(terminal.terminal_id, final_only=True)
        shown = final or store.terminal_snapshots(terminal.terminal_id)[-1:]
        if shown:
            lines.append(f"{'final' if final else 'last'} snapshot ({shown[-1].taken_at}):")
            lines.extend("  " + line for line in shown[-1].text.splitlines())
    return lines


def _terminal_line(terminal, *, prefix: str = "") -> str:
    when = (f"closed {terminal.closed_at} ({terminal.closed_by})" if terminal.closed_at
            else f"closes_at {terminal.closes_at}" if terminal.closes_at else f"started {terminal.started_at}")
    reason = f"  ({terminal.end_reason})" if terminal.end_reason and terminal.end_reason != "done" else ""
    return (f"{prefix}{terminal.terminal_id}  {terminal.state:<9} run {terminal.run_id}  "
            f"tmux {terminal.tmux_server}:{terminal.tmux_session}  {when}{reason}")


# ---------------------------------------------------------------- terminals
def cmd_terminals(args: list[str]) -> int:
    from engine.run.session import open_housekept_store as open_store

    if args[:1] == ["dismiss"]:
        parser = _parser("terminals dismiss", "close an ended terminal now: it leaves the listing")
        parser.add_argument("terminal_id")
        ns = parser.parse_args(args[1:])
        print(f"dismissed {open_store().dismiss_terminal(ns.terminal_id)}")
        return 0
    parser = _parser("terminals", "the terminals of coding CLIs run in tmux (those not closed, unless --all)")
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--all", action="store_true", help="closed ones too (retention over, or dismissed)")
    ns = parser.parse_args(args)
    store = open_store()
    run_id = None
    if ns.run_id:
        record = store.get_run(ns.run_id)
        if record is None:
            raise UserError(f"no run '{ns.run_id}' in the store")
        run_id = record.run_id
    terminals = store.terminals(run_id, include_closed=ns.all)
    print("\n".join(_terminal_line(t) for t in terminals) if terminals else "no terminals")
    return 0


SHOWN_NOT_PASSED = 20
SHOWN_ANSWER_LINES = 40
"""The agent's answer in ``show``, at most this many lines (``--json`` has all of it)."""


def _test_summary(tests: list) -> list[str]:
    """``tests      15: 12 PASSED, 1 FAILED, 2 SKIPPED`` and the first tests that did not pass
    (failures and errors before skips, then by name); nothing for a run without named tests."""
    from engine.models import TEST_STATUSES  # loaded already: the store built the record from it

    if not tests:
        return []
    counts: dict[str, int] = {}
    for test in tests:
        counts[test.status] = counts.get(test.status, 0) + 1

    def rank(status: str) -> tuple[int, str]:  # TEST_STATUSES' order, then anything else by name
        return (TEST_STATUSES.index(status) if status in TEST_STATUSES else len(TEST_STATUSES), status)

    lines = [f"tests      {len(tests)}: " + ", ".join(f"{counts[s]} {s}" for s in sorted(counts, key=rank))]
    not_passed = sorted((t for t in tests if t.status != "PASSED"),
                        key=lambda t: (t.status == "SKIPPED", rank(t.status), t.name))
    lines.extend(f"  {t.status:<8} {t.name}" for t in not_passed[:SHOWN_NOT_PASSED])
    if len(not_passed) > SHOWN_NOT_PASSED:
        lines.append(f"  ... and {len(not_passed) - SHOWN_NOT_PASSED} more that did not pass")
    return lines


# ---------------------------------------------------------------- rerun
def cmd_rerun(args: list[str]) -> int:
    from engine.cli.rerun import run_rerun

    parser = _parser("rerun", "plan a stored run again from its run directory and, if its spec hash is the "
                              "same, run it as a new run (an existing image is reused); compare the verdicts")
    parser.add_argument("run_id", help="a run id or a unique prefix of one")
    parser.add_argument("--into", metavar="DIR", help="the new run's directory (default: runs/rerun/<new id>)")
    ns = parser.parse_args(args)
    return run_rerun(ns.run_id, into=ns.into)


# ---------------------------------------------------------------- gc
def cmd_gc(args: list[str]) -> int:
    from engine.cli.gc import run_gc

    parser = _parser("gc", "remove crucible/task images and local templates that no stored run refers to")
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    parser.add_argument("--match", default="*", metavar="GLOB",
                        help="only names matching GLOB, e.g. 'crucible/task:*' or 'local/task:*' (default: all)")
    parser.add_argument("--min-age", type=float, default=3600.0, metavar="SECONDS",
                        help="keep anything younger than this: a run may be about to use it (default: 3600)")
    ns = parser.parse_args(args)
    if ns.min_age < 0:
        raise UserError(f"--min-age must be 0 or more, not {ns.min_age:g}")
    return run_gc(dry_run=ns.dry_run, match=ns.match, min_age=ns.min_age)


# ---------------------------------------------------------------- report
def cmd_report(args: list[str]) -> int:
    from engine.report.compute import build_report
    from engine.report.query import filters_from_args, parse_ks
    from engine.report.render import FORMATS, render
    from engine.run.session import open_housekept_store

    parser = _parser("report", "per agent and model: mean reward with a 95% interval, pass@k, a task matrix; "
                               "or the tasks that flipped between two sweeps (docs/report.md)")
    for name, meta in (("sweep", "ID"), ("agent", "NAME"), ("model", "MODEL"), ("task", "GLOB")):
        parser.add_argument(f"--{name}", action="append", default=[], metavar=meta,
                            help="repeatable, or a comma list" + ("; last = the latest sweep" if name == "sweep" else ""))
    parser.add_argument("--since", help="runs started since: 30m, 12h, 7d, or an ISO date/time (UTC)")
    parser.add_argument("--compare", nargs=2, metavar=("SWEEP_A", "SWEEP_B"), help="the tasks that flipped")
    parser.add_argument("--k", help="pass@k for these k (comma list); default: every k the attempts allow")
    parser.add_argument("--format", choices=FORMATS, default="table")
    ns = _parse_reading(parser, args)
    filters = filters_from_args(sweeps=ns.sweep, agents=ns.agent, models=ns.model, tasks=ns.task, since=ns.since)
    report = build_report(open_housekept_store(ns.store), filters, compare=tuple(ns.compare) if ns.compare else None,
                          ks=parse_ks(ns.k))
    print(render(report, ns.format), end="" if ns.format == "csv" else "\n")
    return 0


# ---------------------------------------------------------------- doctor
def cmd_doctor(args: list[str]) -> int:
    from engine.cli.doctor import run_doctor

    parser = _parser("doctor", "check (and with --fix, set up) the Docker engine and the offline base image")
    parser.add_argument("--fix", action="store_true")
    ns = parser.parse_args(args)
    return run_doctor(fix=ns.fix)


def entry() -> NoReturn:
    """The console command: ``main``, then leave without tearing the interpreter down.

    Clearing the modules of the MCP / pydantic / Docker stack costs ~0.4 s at every exit, a
    tenth of a whole golden run. Nothing crucible keeps needs it: every record is written
    (and fsync'd) before ``main`` returns. What a normal exit does that matters still
    happens, in its order: non-daemon threads are joined (with the executors' exit hooks,
    which ``threading._shutdown`` runs), then the atexit handlers, then the streams flush.
    Tests call ``main``, which returns.
    """
    code = main()
    threading._shutdown()  # type: ignore[attr-defined]  # private, not in typeshed; what the interpreter calls first on exit  # noqa: SLF001
    atexit._run_exitfuncs()  # noqa: SLF001
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe (`crucible query | head`): nothing more to say
    os._exit(code)


if __name__ == "__main__":
    entry()
