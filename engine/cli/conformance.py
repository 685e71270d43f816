"""``python -m engine.cli.conformance runtime=docker [task=sample/last_page] [overrides]``

Runs every Workspace conformance check (engine/runtimes/conformance) on the configured runtime,
against the task's image (planned, and built unless cached), and prints a table: one row per
check (passed, FAILED or skipped, with its seconds and message). Exit status 1 when any failed.
"""

from __future__ import annotations

import asyncio
import sys

from engine.config.compose import compose_config, to_typed
from engine.errors import CrucibleError, UserError
from engine.interfaces import Runtime
from engine.plan.spec import plan
from engine.run.session import session_for
from engine.runtimes.conformance import CheckResult, run_conformance
from engine.util.tables import format_table

DEFAULT_TASK = "sample/last_page"


def prepare(overrides: list[str]) -> tuple[Runtime, object]:
    """The configured runtime and a ready image for the task (planned, built unless cached)."""
    if not any(o.startswith("task=") for o in overrides):
        overrides = [*overrides, f"task={DEFAULT_TASK}"]
    cfg = to_typed(compose_config(overrides))
    session = session_for(cfg)
    try:
        image = plan(cfg, builder=session.builder).image
        session.builder.ensure(image, session.store)
    finally:
        close = getattr(session.store, "close", None)
        if callable(close):
            close()
    return session.runtime, image


def report(results: list[CheckResult]) -> str:
    rows = [
        (r.name, "skipped" if r.skipped else "passed" if r.passed else "FAILED", round(r.seconds, 2), r.message)
        for r in results
    ]
    failed = sum(1 for r in results if not r.passed and not r.skipped)
    skipped = sum(1 for r in results if r.skipped)
    summary = f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped"
    return format_table(["check", "result", "seconds", "message"], rows, max_cell=120) + "\n" + summary


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__.strip())
        return 0
    try:
        runtime, image = prepare(overrides)
        results = asyncio.run(run_conformance(runtime, image))
    except UserError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return exc.exit_code
    except CrucibleError as exc:
        print(f"conformance: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report(results))
    return 1 if any(not r.passed and not r.skipped for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
