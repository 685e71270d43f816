"""The ``swebench_pro`` flavor: a dataset row as a task, graded by the official evaluator's steps.

plan -> the official assets read (and pinned by hash) from the configured checkout; the image
= Dockerfile.hud FROM the instance's own image (``INSTANCE_ID`` set: its /app is kept, its
history vaulted); setup and capture are the coding environment's repo lifecycle (the agent
sees one commit at base_commit, its diff is taken through the vault); grade replays the
official steps (``swe_tasks.replay``) in a fresh workspace on the captured patch verbatim.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from engine.errors import ConfigError, GradeError, SetupError
from engine.interfaces import AGENT_UID, ROOT_UID, PlanContext, PlannedTask, Workspace
from engine.models import CapturedSubmission, GateRole, ImageInputs, RunSpec, TestResult, Verdict
from envs.coding import repo
from envs.coding.defences import CodingIntegrity
from envs.coding.tools import CodingTools
from envs.integrity import sources
from envs.integrity.scan import model
from envs.integrity.sources.base import merge_worst
from swe_tasks import gojson, jsresults, junit, replay, strict
from swe_tasks.assets import read_assets
from swe_tasks.defences import SwebenchIntegrity
from swe_tasks.rows import decode_text
from swe_tasks.schema import SwebenchProTaskConfig

GOLD_NAME = ".crucible-gold.diff"
"""The gold patch, written inside the repo by the editor (its only reach), applied, then removed."""
PREDICTION_PATH = "/var/lib/crucible/prediction.diff"
"""Where the predictions agent (``swe_tasks.predictions``) leaves a patch to be graded verbatim:
root-only, so no agent working under the uid wall can write it."""


class SwebenchProFlavor:
    task_schema: ClassVar[type] = SwebenchProTaskConfig
    integrity_schema: ClassVar[type] = SwebenchIntegrity
    roles: ClassVar[Mapping[str, GateRole]] = {
        "golden": GateRole("integration_test", 1.0),
        "baseline": GateRole("noop", 0.0),
    }
    explain_omits: ClassVar[Mapping[str, str]] = {"seconds": "how long grading took: no part of the verdict"}
    """Raw-grade keys ``explain`` leaves out, with why (the flavor self-check holds it to the rest)."""

    def __init__(self, name: str = "swebench_pro") -> None:
        self.name = name

    def plan_task(self, task: SwebenchProTaskConfig, ctx: PlanContext) -> PlannedTask:
        task = _decoded(task)
        for index, allowance in enumerate(task.allow_test_aware):
            if allowance.rule not in model.RULES or not allowance.reason.strip():
                raise ConfigError(
                    f"instance {task.instance_id}: allow_test_aware[{index}] needs a scanner rule "
                    f"({', '.join(model.RULES)}) and a reason"
                )
        assets = read_assets(task.assets, task.instance_id)
        recorded = dict(ctx.pins or {})
        task.pins = {"baseline": task.base_commit, **assets.pins()}
        if recorded and recorded != task.pins:
            raise ConfigError(
                f"instance {task.instance_id}: its assets or base_commit changed since the run was planned"
            )
        if task.validation is None:  # the golden: the gold patch, applied through the agent's own tools
            task.validation = [
                {
                    "name": "str_replace_based_edit_tool",
                    "arguments": {"command": "create", "path": GOLD_NAME, "file_text": task.patch},
                },
                {
                    "name": "bash",
                    "arguments": {"command": f"git apply --binary {GOLD_NAME}; s=$?; rm -f {GOLD_NAME}; exit $s"},
                },
            ]
        base = task.base_image or (f"{task.registry}:{task.dockerhub_tag}" if task.dockerhub_tag else "")
        if not base:
            raise ConfigError(f"instance {task.instance_id}: no base image (set dockerhub_tag, or base_image=)")
        context = ctx.cache_dir / "swebench_pro-context"
        context.mkdir(parents=True, exist_ok=True)
        args = {
            "BASE": base,
            "INSTANCE_ID": task.instance_id,
            "SYSTEM_PACKAGES": "",
            "INSTALL_CMD": "",
            "REPO_DIR": task.workdir,
            "BASELINE_REF": task.base_commit,
        }
        where = (
            "its base_image" if task.base_image else f"the registry {task.registry} (CRUCIBLE_SWEBENCH_PRO_REGISTRY)"
        )
        hint = (
            f"instance {task.instance_id}'s image comes from {where}; with no registry reachable, "
            "load the image here and map instances to local images with CRUCIBLE_SWEBENCH_PRO_BASE_IMAGES "
            "(a JSON file: instance_id -> image) or task.base_image="
        )
        return PlannedTask(
            task=task, image=ImageInputs(str(ctx.dockerfile), str(context), args, missing_base_hint=hint)
        )

    def tools(self, ws: Workspace, spec: RunSpec) -> CodingTools:
        env = spec.env
        return CodingTools(
            ws,
            workdir=spec.task.workdir,
            user=AGENT_UID if spec.integrity.uid_wall else ROOT_UID,
            bash_timeout=float(env.bash_timeout),
            max_output_bytes=int(env.max_output_bytes),
            enabled=list(env.tools),
        )

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        try:
            await repo.setup_repo(ws, spec.task, spec.integrity, timeout=float(spec.timeouts.setup))
        except SetupError as exc:
            raise SetupError(f"instance {spec.task.instance_id}: {exc}") from exc

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        return None

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        """A prediction's patch verbatim, else the agent's diff against base_commit. Nothing is
        dropped: the official evaluator overwrites the test files itself (before_repo_set_cmd)."""
        try:
            return CapturedSubmission(diff=(await ws.read_file(PREDICTION_PATH)).decode("utf-8"), kind="prediction")
        except FileNotFoundError:
            pass
        # coding's capture with none of its test-path defences: before_repo_set_cmd restores those paths
        integrity = CodingIntegrity(
            mode=spec.integrity.mode,
            uid_wall=spec.integrity.uid_wall,
            agent_network=spec.integrity.agent_network,
            vault=spec.integrity.vault,
        )
        return await repo.capture_diff(ws, spec.task, integrity, timeout=float(spec.timeouts.capture))

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        return self.regrade(spec, await self._replay(ws, spec, submission))

    async def _replay(
        self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission, rerun: bool = False
    ) -> dict[str, Any]:
        """One grading's raw grade: the official steps (``evaluator: official``), or the same
        with the crucible-strict defences (swe_tasks/strict.py) where the integrity mode asks."""
        task: SwebenchProTaskConfig = spec.task
        assets = read_assets(task.assets, task.instance_id, GradeError)
        if {"baseline": task.base_commit, **assets.pins()} != dict(task.pins):
            raise GradeError(
                f"instance {task.instance_id}: the official assets under {task.assets} changed since planning"
            )
        if not strict.applies(spec.integrity):
            raw, _ = await replay.replay(ws, task, assets, submission.diff)
            return {"evaluator": strict.OFFICIAL, **raw}
        graded, dropped = strict.graded_patch(task, submission.diff)
        hardened = strict.plan(task, graded, reverse=rerun, run_script=assets.run_script)
        raw, scanned = await replay.replay(ws, task, assets, graded, hardened)
        raw = {"evaluator": strict.STRICT, "defences": strict.defences(spec.integrity), **raw}
        if dropped:
            raw["test_files_dropped"] = {
                "files": dropped,
                "why": "the agent's changes to the instance's test paths "
                "run in the runner's process beside the hidden tests: not graded",
            }
        if hardened.unlocked:
            raw["unlocked"] = {
                "files": list(hardened.unlocked),
                "why": "run_script.sh removes them itself (rm) before its runner starts",
            }
        if rerun:
            raw["reversed_test_files"] = True
        elif (raw.get("apply") or {}).get("exit_code") == 0:  # a re-run applies the same patch: one scan
            raw["scan"] = strict.scan(
                task, strict.written_diff(raw, graded), scanned, bool(spec.integrity.refuse_test_aware_code)
            )
        return raw

    # ------------------------------------------------------------ differential re-run (GradesInMany)
    def grading_workspaces(self, spec: RunSpec) -> int:
        """Two under crucible-strict with ``differential_rerun``: the second replays the steps again."""
        return 2 if strict.applies(spec.integrity) and spec.integrity.differential_rerun else 1

    async def prepare_extra_grading(self, ws: Workspace, spec: RunSpec, index: int) -> None:
        return None

    async def grade_many(
        self, workspaces: Sequence[Workspace], spec: RunSpec, submission: CapturedSubmission
    ) -> Verdict:
        """The grading and its differential re-run at once, each in its own fresh workspace."""
        outcomes = await asyncio.gather(
            self._replay(workspaces[0], spec, submission),
            self._replay(workspaces[1], spec, submission, rerun=True),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        first, second = outcomes
        return self.regrade(spec, {**first, "rerun": second})  # type: ignore[dict-item]

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        """The official verdict (resolved iff every F2P and P2P name is reported PASSED once);
        under crucible-strict, a name's worst status, pytest's JUnit report on pytest instances
        (swe_tasks/junit.py), the go command's test2json events on Go ones (swe_tasks/gojson.py) and
        jest's or mocha's own results on theirs (swe_tasks/jsresults.py; ``listed`` records which sources
        judged each listed test), the
        refusals (no end marker, test-aware code) and the differential re-run's agreement decide too."""
        task = spec.task
        listed = [*task.fail_to_pass, *task.pass_to_pass]
        full = {k: v for k, v in raw.items() if k != "rerun_differences"}
        judged = _judge(raw, task)
        full.update(judged)
        again = raw.get("rerun")
        if isinstance(again, Mapping):
            second = {**again, **_judge(again, task)}
            full["rerun"] = second
            found = strict.differences(full, second, listed)
            if found:
                full["rerun_differences"] = found
                if judged["resolved"]:
                    full.update(resolved=False, reason=strict.TAMPERED_RERUN)
        resolved = bool(full["resolved"])
        # F2P and P2P fractions are diagnostics (weight 0): the reward is the verdict alone.
        return Verdict(
            reward=1.0 if resolved else 0.0,
            subscores={
                "resolved": 1.0 if resolved else 0.0,
                "fail_to_pass": judged["f2p"],
                "pass_to_pass": judged["p2p"],
            },
            raw=full,
            tests=_tests(raw),
        )

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        lines = [
            f"evaluator: {raw.get('evaluator', strict.OFFICIAL)}"
            + (f" ({', '.join(raw.get('defences') or [])})" if raw.get("defences") else ""),
            f"reason: {raw.get('reason')}",
        ]
        findings = (raw.get("scan") or {}).get("findings") or []
        if findings:
            lines.append(
                f"test-aware code ({len(findings)}): " + "; ".join(model.Finding(**f).describe() for f in findings[:5])
            )
        lines += sources.explain(raw)  # each result source's record: pytest's, go's, a JS runner's, the parser's
        if raw.get("unlocked"):
            lines.append(
                f"hidden test files left unlocked, as {raw['unlocked']['why']}: "
                + ", ".join(raw["unlocked"]["files"][:5])
            )
        edit = raw.get("edit") or {}
        if edit:
            edited = str(edit.get("output", "")).split("\n")
            lines.append(
                f"run_script.sh's own edit of the locked test files, made by root: exit {edit.get('exit_code')}, "
                f"{len([f for f in edited if f])} file(s)"
            )
        run = raw.get("run_script") or {}
        if run.get("outlived"):
            lines.append("processes of the tests outlived run_script.sh: killed at its end")
        after = run.get("after_end") or {}
        if after.get("bytes"):
            lines.append(f"output after run_script.sh's end (recorded, not parsed): {after['bytes']} bytes")
        if raw.get("rerun_differences"):
            lines.append("differential re-run disagrees: " + "; ".join(raw["rerun_differences"][:5]))
        lines.append(
            f"{raw.get('instance_id')}: resolved {raw.get('resolved')}, share passed of fail-to-pass "
            f"{raw.get('f2p')}, of pass-to-pass {raw.get('p2p')}; run_script.sh's environment: "
            f"{'; '.join(raw.get('env_exports') or []) or 'none'}; binary hunks stripped: "
            f"{raw.get('binary_hunks_stripped')}"
        )
        again = raw.get("rerun") or {}
        if again:
            lines.append(f"differential re-run: resolved {again.get('resolved')}, reason: {again.get('reason')}")
        for step in ("reset", "apply", "own", "written", "lock", "before_repo_set_cmd", "run_script"):
            info = raw.get(step) or {}
            if info:
                lines.append(f"{step}: exit {info.get('exit_code')}{' (timed out)' if info.get('timed_out') else ''}")
        apply = raw.get("apply") or {}
        if apply.get("exit_code") not in (0, None):
            lines += ["git apply output:", *str(apply.get("output", "")).strip().splitlines()[-8:]]
        run = raw.get("run_script") or {}
        for stream in ("stdout_tail", "stderr_tail"):
            text = str(run.get(stream) or "").strip()
            if text:
                lines += [f"run_script.sh {stream.split('_')[0]} (last lines):", *text.splitlines()[-8:]]
        return lines


def _judge(raw: Mapping[str, Any], task: SwebenchProTaskConfig) -> dict[str, Any]:
    """One grading's verdict: the official rule, then crucible-strict's where it was applied."""
    f2p, p2p = list(task.fail_to_pass), list(task.pass_to_pass)
    if raw.get("evaluator") != strict.STRICT:
        return replay.judge(raw, f2p, p2p)
    found = strict.statuses(raw)
    worst = {
        **raw,
        "parser": {**(raw.get("parser") or {}), "tests": [{"name": t.name, "status": t.status} for t in found]},
    }
    judged = replay.judge(worst, f2p, p2p)
    confirmed = junit.confirm(raw.get("junit"), {t.name: t.status for t in found}, [*f2p, *p2p])
    confirmed = gojson.confirm(raw.get("go_json"), confirmed)
    confirmed = jsresults.confirm(raw.get("js_results"), confirmed)
    judged["listed"] = confirmed["listed"]
    denied = (
        junit.reason(confirmed) or gojson.reason(confirmed) or jsresults.reason(confirmed)
        if not (raw.get("parser") or {}).get("error")
        else None
    )
    if denied:
        passed = set(confirmed["passed"])
        judged.update(resolved=False, reason=denied, f2p=_share(f2p, passed), p2p=_share(p2p, passed))
    refused = strict.refusal(raw, task, confirmed["listed"])
    if refused:
        judged.update(resolved=False, reason=refused)
    return judged


def _share(names: Sequence[str], passed: set[str]) -> float:
    return 1.0 if not names else sum(n in passed for n in names) / len(names)


def _decoded(task: SwebenchProTaskConfig) -> SwebenchProTaskConfig:
    """The task's texts as the dataset has them (its options are stored encoded, ``rows.encode_text``)."""
    changes = {
        f.name: decode_text(getattr(task, f.name))
        for f in dataclasses.fields(task)
        if f.name not in ("id", "pins", "validation", "allow_test_aware")
        and isinstance(getattr(task, f.name), (str, list))
    }
    return dataclasses.replace(task, **changes)


def _tests(raw: Mapping[str, Any]) -> list[TestResult]:
    """The parser's per-test statuses, one per name (the worst when reported twice), for the
    ``test_results`` table; entries that are not ``{name, status}`` are left out."""
    entries = (raw.get("parser") or {}).get("tests") or []
    results = [
        TestResult(str(e["name"]), str(e["status"]))
        for e in entries
        if isinstance(e, dict)
        and isinstance(e.get("name"), str)
        and e.get("status") in ("PASSED", "FAILED", "SKIPPED", "ERROR")
    ]
    return merge_worst(results)


__all__ = ["SwebenchProFlavor", "PREDICTION_PATH"]
