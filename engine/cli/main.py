"""The ``crucible`` command.

    crucible run [-m] [overrides]        a run, or a Hydra multirun sweep (joblib, parallel)
    crucible check [overrides]           the shipping gate: golden 1.0, baseline 0.0
    crucible check --lock [overrides]    derive each task's named tests first (crucible lock)
    crucible selfcheck [overrides] [--rebuild]
                                         the flavor contract on the selected tasks' flavors
    crucible lock [overrides] [--check N]
                                         run golden and baseline, write the task's lock file:
                                         fail-to-pass / pass-to-pass lists, SHAs, image hash
    crucible task new SET/NAME --repo PATH_OR_URL --fix SHA [--base SHA] [--tests GLOB ...]
                      [--prompt-file F] [--install CMD] [--packages P ...] [--test-command C]
                                         a task from an upstream fix: repo, YAML, lock, gate
    crucible build [overrides] [--dry-run]
    crucible query "SQL" [--json|--csv] [--store PATH]
    crucible show RUN_ID [--store PATH]  a run: spec, verdict, steps, tests, then its whole diff
    crucible regrade [RUN_ID ...] [--all] [--json]
                                         stored runs judged again by today's code: stored
                                         verdict beside today's; exit 1 where one differs
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
                    [--plot FILE.png|FILE.svg [--plot-kind pass_rate|cost|stages]]
    crucible view [--port N] [--host H] [--store PATH]
                                         a read-only web viewer of the store on 127.0.0.1
                                         (runs, a run's trajectory and diff, sweeps, builds)
    crucible view --bundle DIR [--store PATH]
                                         the same pages as a static site (DIR/index.html)
    crucible export --format parquet|jsonl DIR [--store PATH]
                                         every table of the store as files, with a manifest
    crucible export --predictions FILE | --swebench-report FILE --sweep ID|last [--agent A] [--model M]
                                         a sweep's patches as SWE-bench predictions (JSONL), or
                                         its verdicts as a SWE-bench-style report (JSON)
    crucible export --trajectories ATIF DIR [--task GLOB] [--sweep ID|last] [--store PATH]
                                         every run's steps as Harbor's ATIF, DIR/<run_id>.json
    crucible import DIR [--store PATH]   load an export into a store; rows already there stay once
    crucible serve [--host ADDR] [--allow-origin URL] [--progress-every S] task=... [overrides]
                                         a task's run for any outside agent: prints its MCP URL
                                         and token and an ssh command line, waits, then grades
    crucible finish RUN_ID               end a served run's turn (it captures and grades)
    crucible doctor [--fix]
    crucible warm start [--idle S]|stop|status
                                         a server holding crucible imported: run, check, build,
                                         rerun and lock start from it (engine/cli/warm.py)

User mistakes end in one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from engine.errors import CrucibleError, UserError

if TYPE_CHECKING:
    import argparse

# Imported where used, not here: a command a warm server starts (engine/cli/warm.py) imports
# this module before it hands its command line over, and needs none of them (~0.01 s).


def one_line_parser(prog: str, description: str) -> argparse.ArgumentParser:
    from engine.cli.args import one_line_parser as made

    return made(prog, description)


def require_task(overrides: list[str]) -> None:
    from engine.cli.args import require_task as required

    required(overrides)


def _reading(name: str) -> Callable[[list[str]], int]:
    """A read command of engine/cli/reading.py, imported when it runs."""

    def command(args: list[str]) -> int:
        from engine.cli import reading

        code: int = getattr(reading, name)(args)
        return code

    return command


USAGE = __doc__
WARM_COMMANDS = frozenset({"run", "check", "build", "rerun", "lock"})
"""The commands a warm server starts in a fork of its own (engine/cli/warm.py): those that
compose and plan."""
WARM_READS = frozenset({"query", "show", "report"})
"""The read commands a warm server answers in its reader (engine/cli/warm_reader.py), a process
that keeps DuckDB's instance from one command to the next."""


SIGTERM_INTERRUPTS = True
"""Whether ``main`` makes SIGTERM Ctrl-C (``_sigterm_as_interrupt``); not in a warm reader, which
never has an exception raised into a command from outside (engine/cli/warm_reader.py)."""


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C, so that what a run started is taken down on a kill too. Within
    ``asyncio.run`` that is the runner's own SIGINT handler: it cancels the run's task, whose
    handlers then record it and remove its containers; a KeyboardInterrupt raised in the event
    loop's machinery instead would reach the run only as the loop's teardown cancels it, and
    interrupt that teardown where it stood."""
    handler = signal.getsignal(signal.SIGINT)
    asyncio = sys.modules.get("asyncio")  # not imported: no runner is running
    runner = getattr(getattr(handler, "func", None), "__self__", None)  # a partial of a bound method
    if asyncio is not None and callable(handler) and isinstance(runner, asyncio.Runner):
        handler(signal.SIGINT, frame)  # the first cancels, a second interrupts
        return
    raise KeyboardInterrupt  # anything else's SIGINT handler (serve's ends a turn) is not a kill's


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("CRUCIBLE_HOME") == "":
        # Unset, as engine.util.paths reads it: the configs' ${oc.env:CRUCIBLE_HOME,default}
        # (Hydra's run and sweep dirs, a Ray worker's) would take "" and write under /.
        del os.environ["CRUCIBLE_HOME"]
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if SIGTERM_INTERRUPTS:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    handlers = {
        "run": cmd_run,
        "check": cmd_check,
        "build": cmd_build,
        "query": _reading("cmd_query"),
        "show": _reading("cmd_show"),
        "report": _reading("cmd_report"),
        "doctor": cmd_doctor,
        "rerun": cmd_rerun,
        "gc": cmd_gc,
        "lock": cmd_lock,
        "task": cmd_task,
        "terminals": _reading("cmd_terminals"),
        "serve": cmd_serve,
        "finish": cmd_finish,
        "view": _reading("cmd_view"),
        "export": _reading("cmd_export"),
        "import": _reading("cmd_import"),
        "selfcheck": cmd_selfcheck,
        "regrade": _reading("cmd_regrade"),
        "warm": cmd_warm,
    }
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
        print(
            f"crucible: unknown command '{command}' (commands: {', '.join([*builtin, *commands()])})", file=sys.stderr
        )
        return 2
    return code


# ---------------------------------------------------------------- run (Hydra app)
def cmd_run(args: list[str]) -> int:
    from engine.cli.run import run_hydra

    return run_hydra(args)


# ---------------------------------------------------------------- check
def cmd_check(args: list[str]) -> int:
    parser = one_line_parser("check", "golden must score 1.0 and baseline 0.0 for every selected task")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--rebuild", action="store_true", help="run again even if the store has the verdict")
    parser.add_argument(
        "--check", type=int, default=0, metavar="N", help="run each spec N more times; fail on any difference"
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs in parallel (default 2)")
    parser.add_argument("--lock", action="store_true", help="derive and write each task's lock first (crucible lock)")
    ns = parser.parse_args(args)
    require_task(ns.overrides)
    if not (ns.lock or ns.rebuild or ns.check):
        from engine.cli.answers import cached_answer

        answered = cached_answer("check", ns.overrides)  # nothing it depends on changed since
        if answered is not None:
            print(answered[0], end="")
            print(
                "check: answered as before: nothing it was computed from has changed (--rebuild runs)", file=sys.stderr
            )
            return answered[1]
    if ns.lock:
        from engine.cli.lock import run_lock

        if run_lock(ns.overrides, check=ns.check, parallel=max(1, ns.jobs)) != 0:
            return 1
    from engine.cli.check import run_check

    return run_check(ns.overrides, rebuild=ns.rebuild, check=ns.check, parallel=max(1, ns.jobs))


def cmd_selfcheck(args: list[str]) -> int:
    from engine.cli.selfcheck import main as selfcheck

    return selfcheck(args)


# ---------------------------------------------------------------- lock
def cmd_lock(args: list[str]) -> int:
    from engine.cli.lock import run_lock

    parser = one_line_parser("lock", "derive each task's fail-to-pass / pass-to-pass tests and write its lock file")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument(
        "--check",
        type=int,
        default=0,
        metavar="N",
        help="run each side N more times; tests whose status differs are flaky and left out",
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs in parallel (default 2)")
    ns = parser.parse_args(args)
    require_task(ns.overrides)
    return run_lock(ns.overrides, check=max(0, ns.check), parallel=max(1, ns.jobs))


# ---------------------------------------------------------------- task new
def cmd_task(args: list[str]) -> int:
    from engine.cli.task import run_task_new

    parser = one_line_parser("task", "make a task")
    parser.add_argument("action", choices=["new"])
    parser.add_argument("task_id", metavar="SET/NAME")
    parser.add_argument("--repo", required=True, help="a local path or git URL holding the fix")
    parser.add_argument("--fix", required=True, help="the upstream fix commit")
    parser.add_argument("--base", default=None, help="the commit the task starts from (default: the fix's parent)")
    parser.add_argument(
        "--tests",
        nargs="+",
        default=[],
        metavar="GLOB",
        help="the fix's test paths (default: the flavor's, e.g. tests/, test_*.py, conftest.py)",
    )
    parser.add_argument("--prompt-file", default=None, help="the task's prompt (default: the fix's commit message)")
    parser.add_argument("--install", default="", help="a shell command run in the image after the repo is in place")
    parser.add_argument("--packages", nargs="+", default=[], metavar="PKG", help="Debian packages for the image")
    parser.add_argument("--test-command", default=None, help="default: python3 -m pytest -q -p no:cacheprovider")
    parser.add_argument("--flavor", default="coding")
    parser.add_argument(
        "--conf", default=None, help="config dir for the task's YAML (default: the last on the config path)"
    )
    parser.add_argument("--check", type=int, default=0, metavar="N", help="lock: run each side N more times")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    ns = parser.parse_args(args)
    return run_task_new(
        ns.task_id,
        repo=ns.repo,
        fix=ns.fix,
        base=ns.base,
        tests=ns.tests,
        prompt_file=ns.prompt_file,
        install=ns.install,
        packages=ns.packages,
        test_command=ns.test_command,
        flavor=ns.flavor,
        conf_dir=ns.conf,
        check=max(0, ns.check),
        parallel=max(1, ns.jobs),
    )


# ---------------------------------------------------------------- build
def cmd_build(args: list[str]) -> int:
    from engine.cli.build import run_build

    parser = one_line_parser("build", "build (or find in the cache) the images the selected runs need")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--dry-run", action="store_true", help="list what would be built and what is cached")
    ns = parser.parse_args(args)
    return run_build(ns.overrides, dry_run=ns.dry_run)


# ---------------------------------------------------------------- rerun
def cmd_rerun(args: list[str]) -> int:
    from engine.cli.rerun import run_rerun

    parser = one_line_parser(
        "rerun",
        "plan a stored run again from its run directory and, if its spec hash is the "
        "same, run it as a new run (an existing image is reused); compare the verdicts",
    )
    parser.add_argument("run_id", help="a run id or a unique prefix of one")
    parser.add_argument("--into", metavar="DIR", help="the new run's directory (default: runs/rerun/<new id>)")
    ns = parser.parse_args(args)
    return run_rerun(ns.run_id, into=ns.into)


# ---------------------------------------------------------------- gc
def cmd_gc(args: list[str]) -> int:
    from engine.cli.gc import run_gc

    parser = one_line_parser("gc", "remove crucible/task images and local templates that no stored run refers to")
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    parser.add_argument(
        "--match",
        default="*",
        metavar="GLOB",
        help="only names matching GLOB, e.g. 'crucible/task:*' or 'local/task:*' (default: all)",
    )
    parser.add_argument(
        "--min-age",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="keep anything younger than this: a run may be about to use it (default: 3600)",
    )
    ns = parser.parse_args(args)
    if ns.min_age < 0:
        raise UserError(f"--min-age must be 0 or more, not {ns.min_age:g}")
    return run_gc(dry_run=ns.dry_run, match=ns.match, min_age=ns.min_age)


# ---------------------------------------------------------------- serve / finish
def cmd_serve(args: list[str]) -> int:
    from engine.cli.serve import run_serve

    parser = one_line_parser("serve", "serve a task's run to an outside agent over MCP and SSH, then grade it")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address the MCP endpoint listens on (default 127.0.0.1: loopback only)"
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="URL",
        help="a browser origin allowed to call the MCP endpoint besides its own (repeatable)",
    )
    parser.add_argument(
        "--progress-every",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds between progress notifications of a long tool call (default 10)",
    )
    ns, overrides = parser.parse_known_args(args)
    flags = [o for o in overrides if o.startswith("-")]
    if flags:
        raise UserError(f"unknown option {flags[0]} (serve takes --host, --allow-origin, --progress-every)")
    require_task(overrides)
    return run_serve(ns, overrides)


def cmd_finish(args: list[str]) -> int:
    from engine.cli.serve import run_finish

    parser = one_line_parser("finish", "end a served run's turn: it captures and grades")
    parser.add_argument("run_id")
    return run_finish(parser.parse_args(args).run_id)


# ---------------------------------------------------------------- doctor
def cmd_doctor(args: list[str]) -> int:
    from engine.cli.doctor import run_doctor

    parser = one_line_parser("doctor", "check (and with --fix, set up) the Docker engine and the offline base image")
    parser.add_argument("--fix", action="store_true")
    ns = parser.parse_args(args)
    return run_doctor(fix=ns.fix)


# ---------------------------------------------------------------- warm
def cmd_warm(args: list[str]) -> int:
    from engine.cli.warm import cmd_warm as warm

    return warm(args)


def entry() -> NoReturn:
    """The console command: the warm server's if one listens (engine/cli/warm.py), else
    ``main`` here; then leave without tearing the interpreter down.

    Clearing the modules of the MCP / pydantic / Docker stack costs ~0.4 s at every exit, a
    tenth of a whole golden run. Nothing crucible keeps needs it: every record is written
    (and fsync'd) before ``main`` returns. What a normal exit does that matters still
    happens, in its order: non-daemon threads are joined (with the executors' exit hooks,
    which ``threading._shutdown`` runs), then the atexit handlers, then the streams flush.
    Tests call ``main``, which returns.
    """
    code = None
    if len(sys.argv) > 1 and (sys.argv[1] in WARM_COMMANDS or sys.argv[1] in WARM_READS):
        from engine.cli.warm import forwarded

        code = forwarded(sys.argv)
    leave(main() if code is None else code)


def leave(code: int, ended: Callable[[int], None] | None = None) -> NoReturn:
    """The end of a command's process (``entry``'s, or a warm server's fork's). ``ended``: told
    the exit status once everything is flushed, before the process goes (a fork's client,
    which then need not wait for the kernel to take down the fork's memory)."""
    threading._shutdown()  # type: ignore[attr-defined]  # private, not in typeshed; what the interpreter calls first on exit  # noqa: SLF001
    atexit._run_exitfuncs()  # noqa: SLF001
    if "logging" in sys.modules:  # a command handed to a warm server never imported it
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe (`crucible query | head`): nothing more to say
    if ended is not None:
        with contextlib.suppress(OSError):  # a client gone already: the server's word is the one left
            ended(code)
    os._exit(code)


if __name__ == "__main__":
    entry()
