"""``crucible show`` and ``crucible terminals``: one stored run, or the terminals of coding CLIs
run in tmux, printed for a person (``show --json`` for a program)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from engine.errors import UserError

if TYPE_CHECKING:
    from engine.models import RunRecord, TerminalRecord, TestResult
    from engine.store.duckdb import DuckDBStore


def run_show(run_id: str, *, store_path: str | None, as_json: bool) -> int:
    """``crucible show RUN_ID``: the run's whole story on the terminal, or its record as JSON."""
    from engine.run.session import open_housekept_store as open_store

    store = open_store(store_path)
    record = store.get_run(run_id)
    if record is None:
        raise UserError(f"no run '{run_id}' in the store")
    if as_json:
        print(json.dumps(record.to_dict(), indent=2, default=str))
        return 0
    lines = [
        f"run        {record.run_id}",
        f"task       {record.task_id}    agent {record.agent}" + (f"    model {record.model}" if record.model else ""),
        f"status     {record.status}"
        + (" (infrastructure: not scored)" if record.infrastructure else "")
        + (f" in {record.error_phase}: {record.error}" if record.error else ""),
        f"reward     {record.reward}    stop {record.stop_reason}",
        f"integrity  asked {record.integrity_requested}, got {record.integrity_obtained}",
        f"spec       {record.spec_hash}",
        f"image      {record.image_tag}",
        f"started    {record.started_at}    ended {record.ended_at}",
        "timings    " + "  ".join(f"{k}={v:.2f}s" for k, v in record.timings.items()),
        f"run dir    {record.run_dir}",
    ]
    if record.host or record.retry_of:
        lines.append(
            "placed     "
            + (f"on {record.host}" if record.host else "on this machine")
            + (f"    retries run {record.retry_of}" if record.retry_of else "")
        )
    if record.final_answer:
        lines.append(
            "answer     "
            + "\n           ".join(record.final_answer.splitlines()[:SHOWN_ANSWER_LINES])
            + ("\n           ..." if len(record.final_answer.splitlines()) > SHOWN_ANSWER_LINES else "")
        )
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


def _explained(record: RunRecord) -> list[str]:
    """What the run's flavor says of its raw grade (``Flavor.explain``, as ``crucible check``
    prints it: for sdlc, the PR and the github_* calls); nothing when there is no grade or the
    flavor cannot be loaded here (then the raw grade below still says everything)."""
    from engine.config.plugins import explainer_class

    part = dict((record.spec or {}).get("flavor") or {})
    if not record.raw_grade or not part.get("_target_"):
        return []
    try:  # the flavor's explainer alone where its package names one (the coding flavor's grader is heavy)
        flavor = explainer_class(part.pop("_target_"))(**part)
        explained = [str(line) for line in flavor.explain(record.raw_grade)]
    except Exception:  # a flavor removed or changed since the run: show the raw grade alone
        return []
    return ["verdict    " + "\n           ".join(explained)] if explained else []


def _terminals_shown(store: DuckDBStore, run_id: str) -> list[str]:
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


def _terminal_line(terminal: TerminalRecord, *, prefix: str = "") -> str:
    when = (
        f"closed {terminal.closed_at} ({terminal.closed_by})"
        if terminal.closed_at
        else f"closes_at {terminal.closes_at}"
        if terminal.closes_at
        else f"started {terminal.started_at}"
    )
    reason = f"  ({terminal.end_reason})" if terminal.end_reason and terminal.end_reason != "done" else ""
    return (
        f"{prefix}{terminal.terminal_id}  {terminal.state:<9} run {terminal.run_id}  "
        f"tmux {terminal.tmux_server}:{terminal.tmux_session}  {when}{reason}"
    )


def run_terminals(*, run_id: str | None = None, include_closed: bool = False, dismiss: str | None = None) -> int:
    """``crucible terminals [RUN_ID] [--all]``, or ``terminals dismiss TERMINAL_ID``."""
    from engine.run.session import open_housekept_store as open_store

    store = open_store()
    if dismiss is not None:
        print(f"dismissed {store.dismiss_terminal(dismiss)}")
        return 0
    if run_id:
        record = store.get_run(run_id)
        if record is None:
            raise UserError(f"no run '{run_id}' in the store")
        run_id = record.run_id
    terminals = store.terminals(run_id, include_closed=include_closed)
    print("\n".join(_terminal_line(t) for t in terminals) if terminals else "no terminals")
    return 0


SHOWN_NOT_PASSED = 20
SHOWN_ANSWER_LINES = 40
"""The agent's answer in ``show``, at most this many lines (``--json`` has all of it)."""


def _test_summary(tests: list[TestResult]) -> list[str]:
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
    not_passed = sorted(
        (t for t in tests if t.status != "PASSED"), key=lambda t: (t.status == "SKIPPED", rank(t.status), t.name)
    )
    lines.extend(f"  {t.status:<8} {t.name}" for t in not_passed[:SHOWN_NOT_PASSED])
    if len(not_passed) > SHOWN_NOT_PASSED:
        lines.append(f"  ... and {len(not_passed) - SHOWN_NOT_PASSED} more that did not pass")
    return lines
