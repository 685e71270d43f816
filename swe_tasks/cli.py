"""``crucible swe eval PREDICTIONS``: grade another harness's patches as the official evaluator
would, through crucible's batch runner (images cached, runs stored, resumed by spec hash).

Writes ``eval_results.json`` (instance_id -> resolved, exactly the official file) and
``report.json`` (a SWE-bench-style summary) into ``--output`` (default: .); with ``--output``,
also what ``swe_bench_pro_eval.py`` writes per instance, from each run's record: under
``DIR/<instance_id>/`` the files ``<prefix>_patch.diff``, ``<prefix>_stdout.log``,
``<prefix>_stderr.log`` and, where the parser left an output, ``<prefix>_output.json`` and
``<prefix>_entryscript.sh`` (crucible's replayed steps as shell). Prints progress as runs end.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, UserError
from swe_tasks import replay, strict
from swe_tasks.predictions import Prediction, read_predictions

USAGE = (
    "crucible swe eval PREDICTIONS [--instances ID_OR_GLOB ...] [--workers N] [--output DIR] [--set SET] [overrides]"
)


class SweCommand:
    """The ``crucible swe`` command (``conf/command/swe.yaml``)."""

    def run(self, argv: list[str]) -> int:
        if argv[:1] in (["-h"], ["--help"], ["help"]):  # asked for: the usage on stdout, exit 0
            print(
                f"usage: {USAGE}\n\ngrade SWE-bench Pro predictions as the official evaluator does "
                "(crucible swe eval --help: its options)"
            )
            return 0
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
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="where eval_results.json goes (default: .) and, given, the official per-instance files",
    )
    parser.add_argument("--set", default="swebench_pro", help="the task set the instances are in")
    return parser.parse_args(argv)


def evaluate(ns: argparse.Namespace) -> int:
    from engine.run.batch import run_batch
    from engine.run.progress import TaskProgress
    from engine.run.session import housekeeping
    from engine.util import paths

    given = [o for o in ns.overrides if o.lstrip("+~").split("=")[0] in ("model", "agent", "agent.name")]
    if given:  # each prediction names its own (prefix, model_name_or_path): an override would be lost
        raise UserError(f"crucible swe eval: {given[0]} is not taken: the predictions name the agent and the model")
    predictions, sha = read_predictions(ns.predictions)
    if ns.instances:
        predictions = [p for p in predictions if any(fnmatch.fnmatchcase(p.instance_id, g) for g in ns.instances)]
    if not predictions:
        raise ConfigError(f"predictions {ns.predictions}: no prediction selected")
    for pred in predictions if ns.output is not None else []:
        instance_dir(ns.output, pred.instance_id)
    jobs, session, skipped = _jobs(predictions, ns, sha)
    for iid in skipped:
        print(f"warning: instance {iid} is not in task set {ns.set}; skipped", file=sys.stderr)
    if session is None:
        hint = " (is CRUCIBLE_SWEBENCH_PRO_DATASET set?)" if ns.set == "swebench_pro" else ""
        raise ConfigError(f"none of the predictions' instances is in task set {ns.set}{hint}")
    housekeeping(session.store)
    total, done, started = len(jobs), [0], time.monotonic()
    by_id = {p.instance_id: p for p in predictions}

    def progress(job: Any, record: Any) -> None:
        done[0] += 1
        if ns.output is not None:  # as each instance ends, as the official script writes them
            write_instance(ns.output, by_id[job.label], record)
        outcome = _outcome(record)
        print(
            f"[{done[0]}/{total}] {job.label} {outcome}{' (store)' if job.from_store else ''} "
            f"{time.monotonic() - started:.1f}s",
            flush=True,
        )

    with TaskProgress("swe eval", total) as shown:  # on stderr; the per-instance lines on stdout
        asyncio.run(
            run_batch(
                [j for j in jobs],
                session,
                root=paths.runs_dir() / "swe-eval",
                parallel=max(1, ns.workers),
                reuse=True,
                on_record=progress,
                progress=shown,
            )
        )
    results = {job.label: _outcome(job.records[0]) == "resolved" for job in jobs}
    out = ns.output or Path(".")
    out.mkdir(parents=True, exist_ok=True)
    with (out / "eval_results.json").open("w") as fh:
        json.dump(results, fh)  # as the official evaluator writes it: json.dump, default separators
    report = _report(jobs, [p.instance_id for p in predictions], skipped)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"resolved {report['resolved_instances']} of {len(results)} "
        f"({report['resolved_instances'] / max(1, len(results)):.2%}); errors {report['error_instances']}; "
        f"wrote {out / 'eval_results.json'}" + (f" and {out}/<instance_id>/" if ns.output is not None else "")
    )
    return 0


OFFICIAL_FILES = ("patch.diff", "stdout.log", "stderr.log", "output.json", "entryscript.sh")
"""What swe_bench_pro_eval.py leaves per instance, each as ``<prefix>_<name>``."""
SHELL_STEPS = ("reset", "apply", "before_repo_set_cmd")
"""Steps whose recorded command is the shell that ran (run_script.sh's too, under the official
evaluator); crucible-strict's own steps are recorded as what they did, in words."""


def write_instance(out: Path, pred: Prediction, record: Any) -> None:
    """The official evaluator's files for one instance in ``out/<instance_id>/``; those of the
    prediction's prefix that this run has none of are removed (left from an earlier call, they
    would be read as this one's)."""
    folder = instance_dir(out, pred.instance_id)
    files = instance_files(pred, record)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in OFFICIAL_FILES:
            path = folder / f"{pred.prefix}_{name}"
            if name in files:
                path.write_bytes(files[name])
            else:
                path.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"--output {out}: instance {pred.instance_id}: {exc.strerror or exc}") from exc


def instance_dir(out: Path, instance_id: str) -> Path:
    """``out/<instance_id>``, as the official script joins them; an id that would lead elsewhere
    is refused (checked before any run, so a batch never stops half-written)."""
    if instance_id in (".", "..") or "/" in instance_id or "\0" in instance_id:
        raise ConfigError(f"instance {instance_id!r}: not a directory name under --output")
    return out / instance_id


def instance_files(pred: Prediction, record: Any) -> dict[str, bytes]:
    """``OFFICIAL_FILES`` as the official script writes them, from the run's record. The patch
    always (as given, before binary hunks are stripped); the two logs once run_script.sh ran
    (empty where it left no file, as the script's local-docker mode writes them); the parser's
    output (``json.dump``, default separators) and the entry script only where the parser left
    an output, as the script saves neither when output.json is missing."""
    files = {"patch.diff": pred.patch.encode()}
    raw = record.raw_grade if isinstance(record.raw_grade, Mapping) else {}
    logs = (raw.get("run_script") or {}).get("logs")
    if isinstance(logs, Mapping):
        for stream in ("stdout", "stderr"):
            files[f"{stream}.log"] = str((logs.get(stream) or {}).get("text", "")).encode()
    parsed = raw.get("parser") or {}
    if not parsed.get("error") and isinstance(parsed.get("tests"), list):
        files["output.json"] = json.dumps({"tests": parsed["tests"]}).encode()
        workdir = str(((record.spec or {}).get("task") or {}).get("workdir") or "/app")
        files["entryscript.sh"] = entry_script(raw, workdir).encode()
    return files


def entry_script(raw: Mapping[str, Any], workdir: str) -> str:
    """The steps crucible replayed, shaped as the official entry script (create_entryscript):
    the ENV exports, ``cd`` into the repo, each recorded step in the order it ran, the parser's
    line. Under the official evaluator every line is the command that ran; under crucible-strict
    its own steps (and run_script.sh's changed run) are comments saying what was done. The
    comment above each step is its recorded outcome."""
    evaluator = str(raw.get("evaluator") or strict.OFFICIAL)
    lines = [
        f"# crucible's replay of swe_bench_pro_eval.py's entry script for {raw.get('instance_id')}, "
        f"evaluator {evaluator}.",
        "# Run as one exec (swe_tasks/sh/replay.sh) as root in a fresh container, after the image's git",
        "# history was put back from its vault; each step under its own limit, a failed one not stopping",
        "# the next; the parser ran host-side on the two files. Commented steps are not shell that ran.",
        *[str(line) for line in raw.get("env_exports") or []],
        f"cd {workdir}",
    ]
    for name in replay.STEPS:
        step = raw.get(name)
        if not isinstance(step, Mapping):
            continue
        lines.append(f"# {name}: {_step_outcome(step)}{_note(raw, name)}")
        command = [] if step.get("command") in (None, "", name) else str(step["command"]).split("\n")
        ran = name in SHELL_STEPS or (name == "run_script" and evaluator == strict.OFFICIAL)
        lines += command if ran else [f"#   {line}" for line in command]
    parsed = raw.get("parser") or {}
    lines += [
        f"# parser: exit {parsed.get('exit_code')}, {len(parsed.get('tests') or [])} test(s)",
        replay.PARSER_COMMAND,
    ]
    return "\n".join(lines) + "\n"


def _step_outcome(step: Mapping[str, Any]) -> str:
    said = f"exit {step.get('exit_code')}" + (" (timed out)" if step.get("timed_out") else "")
    said += f", {step.get('seconds')} s" if step.get("seconds") is not None else ""
    first = str(step.get("output") or "").strip().split("\n")[0][:200]
    return f"{said}: {first}" if first else said


def _note(raw: Mapping[str, Any], name: str) -> str:
    """What the step's inputs were, where crucible's differ from the prediction as given."""
    if name != "apply":
        return ""
    notes = ["binary hunks stripped first"] if raw.get("binary_hunks_stripped") else []
    dropped = (raw.get("test_files_dropped") or {}).get("files") or []
    if dropped:
        notes.append(f"the patch without its chunks on the test paths {', '.join(map(str, dropped[:5]))}")
    return f" ({'; '.join(notes)})" if notes else ""


def _outcome(record: Any) -> str:
    if record.status != "completed":
        return "error"
    return "resolved" if record.reward == 1.0 else "unresolved"


def _jobs(predictions: list[Prediction], ns: argparse.Namespace, sha: str):
    from omegaconf import OmegaConf

    from engine.config.compose import compose_config, to_typed
    from engine.config.tree import group_options
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
        # names hold no "${" (read_predictions): set as they are, so the store says them as given
        OmegaConf.update(cfg, "model", pred.model, merge=False)
        for key, value in (
            ("name", pred.agent),
            ("patch", encode_text(pred.patch)),
            ("source", encode_text(source)),
            ("source_sha256", sha),
        ):
            OmegaConf.update(cfg, f"agent.{key}", value, merge=False)
        typed = to_typed(cfg)
        session = session or session_for(typed)
        planned = plan(typed, builder=session.builder)
        require_integrity(session.runtime, planned.spec.integrity)
        jobs.append(BatchJob(planned, config=cfg, label=pred.instance_id))
    return jobs, session, skipped


def _report(jobs: list, submitted: list[str], skipped: list[str]) -> dict[str, Any]:
    outcomes = {job.label: _outcome(job.records[0]) for job in jobs}
    ids = {kind: sorted(i for i, o in outcomes.items() if o == kind) for kind in ("resolved", "unresolved", "error")}
    return {
        "total_instances": len(submitted),
        "submitted_instances": len(submitted),
        "completed_instances": len(ids["resolved"]) + len(ids["unresolved"]),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "error_instances": len(ids["error"]),
        "skipped_instances": len(skipped),
        "resolved_ids": ids["resolved"],
        "unresolved_ids": ids["unresolved"],
        "error_ids": ids["error"],
        "skipped_ids": sorted(skipped),
        "schema_version": 2,
    }
