"""``crucible swe eval PREDICTIONS``: grade another harness's patches as the official evaluator
would, through crucible's batch runner (images cached, runs stored, resumed by spec hash).

Writes ``eval_results.json`` (instance_id -> resolved, exactly the official file) and
``report.json`` (a SWE-bench-style summary) into ``--output``; prints progress as runs end.
"""
from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, UserError
from swe_tasks.predictions import Prediction, read_predictions

USAGE = "crucible swe eval PREDICTIONS [--instances ID_OR_GLOB ...] [--workers N] [--output DIR] [--set SET] [overrides]"


class SweCommand:
    """The ``crucible swe`` command (``conf/command/swe.yaml``)."""

    def run(self, argv: list[str]) -> int:
        if len(argv) < 2 or argv[0] != "eval":
            raise UserError(f"usage: {USAGE}")
        return evaluate(_parse(argv[1:]))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, never argparse's usage block
        raise UserError(message)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="crucible swe eval", description="grade a predictions file as the official evaluator does")
    parser.add_argument("predictions", type=Path)
    parser.add_argument("overrides", nargs="*", help="config overrides (runtime=, integrity=, ...)")
    parser.add_argument("--instances", nargs="+", default=[], help="instance ids or globs to grade")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None, help="where eval_results.json goes (default: .)")
    parser.add_argument("--set", default="swebench_pro", help="the task set the instances are in")
    return parser.parse_args(argv)


def evaluate(ns: argparse.Namespace) -> int:
    from engine.run.batch import run_batch
    from engine.run.session import housekeeping
    from engine.util import paths

    predictions, sha = read_predictions(ns.predictions)
    if ns.instances:
        predictions = [p for p in predictions if any(fnmatch.fnmatchcase(p.instance_id, g) for g in ns.instances)]
    if not predictions:
        raise ConfigError(f"predictions {ns.predictions}: no prediction selected")
    jobs, session, skipped = _jobs(predictions, ns, sha)
    for iid in skipped:
        print(f"warning: instance {iid} is not in task set {ns.set}; skipped", file=sys.stderr)
    if session is None:
        hint = " (is CRUCIBLE_SWEBENCH_PRO_DATASET set?)" if ns.set == "swebench_pro" else ""
        raise ConfigError(f"none of the predictions' instances is in task set {ns.set}{hint}")
    housekeeping(session.store)
    total, done, started = len(jobs), [0], time.monotonic()

    def progress(job: Any, record: Any) -> None:
        done[0] += 1
        outcome = _outcome(record)
        print(f"[{done[0]}/{total}] {job.label} {outcome}{' (store)' if job.from_store else ''} "
              f"{time.monotonic() - started:.1f}s", flush=True)

    asyncio.run(run_batch([j for j in jobs], session, root=paths.runs_dir() / "swe-eval",
                          parallel=max(1, ns.workers), reuse=True, on_record=progress))
    results = {job.label: _outcome(job.records[0]) == "resolved" for job in jobs}
    out = ns.output or Path(".")
    out.mkdir(parents=True, exist_ok=True)
    with (out / "eval_results.json").open("w") as fh:
        json.dump(results, fh)  # as the official evaluator writes it: json.dump, default separators
    report = _report(jobs, [p.instance_id for p in predictions], skipped)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"resolved {report['resolved_instances']} of {len(results)} "
          f"({report['resolved_instances'] / max(1, len(results)):.2%}); errors {report['error_instances']}; "
          f"wrote {out / 'eval_results.json'}")
    return 0


def _outcome(record: Any) -> str:
    if record.status != "completed":
        return "error"
    return "resolved" if record.reward == 1.0 else "unresolved"


def _jobs(predictions: list[Prediction], ns: argparse.Namespace, sha: str):
    from omegaconf import OmegaConf

    from engine.config.compose import compose_config, group_options, to_typed
    from engine.plan.spec import plan
    from engine.run.batch import BatchJob
    from engine.run.session import require_integrity, session_for
    from swe_tasks.rows import encode_text

    known = set(group_options("task"))
    jobs, session, skipped = [], None, []
    source = str(ns.predictions.resolve())
    for pred in predictions:
        option = f"{ns.set}/{pred.instance_id}"
        if option not in known:
            skipped.append(pred.instance_id)
            continue
        cfg = compose_config([f"task={option}", "agent=swe_prediction", *ns.overrides])
        for key, value in (("name", pred.model_name_or_path), ("patch", pred.model_patch),
                           ("source", source), ("source_sha256", sha)):
            OmegaConf.update(cfg, f"agent.{key}", encode_text(value), merge=False)
        typed = to_typed(cfg)
        session = session or session_for(typed)
        planned = plan(typed, builder=session.builder)
        require_integrity(session.runtime, planned.spec.integrity)
        jobs.append(BatchJob(planned, config=cfg, label=pred.instance_id))
    return jobs, session, skipped


def _report(jobs: list, submitted: list[str], skipped: list[str]) -> dict[str, Any]:
    outcomes = {job.label: _outcome(job.records[0]) for job in jobs}
    ids = {kind: sorted(i for i, o in outcomes.items() if o == kind) for kind in ("resolved", "unresolved", "error")}
    return {"total_instances": len(submitted), "submitted_instances": len(submitted),
            "completed_instances": len(ids["resolved"]) + len(ids["unresolved"]),
            "resolved_instances": len(ids["resolved"]), "unresolved_instances": len(ids["unresolved"]),
            "error_instances": len(ids["error"]), "skipped_instances": len(skipped),
            "resolved_ids": ids["resolved"], "unresolved_ids": ids["unresolved"], "error_ids": ids["error"],
            "skipped_ids": sorted(skipped), "schema_version": 2}
