"""The ``coding`` flavor: three-branch repo tasks graded by their hidden tests.

plan -> the refs pinned to SHAs on the host repo, ``validation`` derived from the
baseline..golden diff, the image = Dockerfile.hud over a bundle of the baseline's ancestry;
setup -> ``envs.coding.repo.setup_repo``; capture -> ``capture_diff``; grade -> the hidden
change (baseline..test, ``envs.coding.hidden``) is read from the HOST repo at the pinned
SHAs (the answer key never enters the agent's workspace, only the grading one) and handed
to ``envs.coding.grader.grade``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

from engine.errors import ConfigError, CrucibleError, GradeError
from engine.interfaces import AGENT_UID, ROOT_UID, PlanContext, PlannedTask, Workspace
from engine.models import CapturedSubmission, GateRole, ImageInputs, RunSpec, SetupScript, UpstreamFix, Verdict
from engine.plan import repos
from envs.coding import advice, grader, hidden, isolated, judging, reading, repo, rerun, testnames
from envs.coding.defences import CodingIntegrity
from envs.coding.explain import EXPLAINED as EXPLAINED  # re-exported: its home was here
from envs.coding.explain import CodingExplainer
from envs.coding.held import HeldCapture
from envs.coding.hidden import HiddenFile
from envs.coding.schema import CodingTaskConfig
from envs.coding.tools import CodingTools
from envs.integrity.scan import model

GATE = {"golden": GateRole(agent="integration_test", reward=1.0), "baseline": GateRole(agent="noop", reward=0.0)}


RERUN_NEEDLESS = (
    "no differential re-run: the verdict is isolated behind a uid wall, so the hidden files "
    "are out of the tested code's reach and their names cannot matter"
)


def rerun_defends(spec: RunSpec) -> bool:
    """Whether a differential re-run can tell anything under ``spec``: not where the verdict
    is isolated behind a uid wall (the code under test cannot reach a hidden file)."""
    task, integrity = spec.task, spec.integrity
    return not (grader.isolates(task, integrity) and integrity.uid_wall)


class CodingFlavor(CodingExplainer):
    """The coding flavor; its ``explain`` is ``CodingExplainer``'s (envs/coding/explain.py), which
    ``crucible show`` loads alone."""

    task_schema: ClassVar[type] = CodingTaskConfig
    integrity_schema: ClassVar[type] = CodingIntegrity
    roles: ClassVar[Mapping[str, GateRole]] = GATE
    holds_capture: ClassVar[bool] = True
    """Whether ``setup`` starts the capture ahead (envs/coding/held.py; a flavor that captures
    otherwise says no)."""

    def __init__(self, name: str = "coding") -> None:
        self.name = name
        self._hidden: asyncio.Future | None = None
        self._hidden_for: tuple | None = None
        self._prepared: tuple[Workspace, grader.staging.Staging] | None = None
        self._rerun: asyncio.Future | None = None
        """The differential re-run's renaming (``rerun.Renaming``), made once per run."""
        self._rerun_prepared: tuple[Workspace, grader.staging.Staging] | None = None
        self._test_names: asyncio.Future | None = None
        """The test names the hidden modules may take at random (``testnames.renamable``)."""
        self._free: asyncio.Future | None = None
        """The hidden files that may take random names (``rerun.renamable``)."""
        self._first: asyncio.Future | None = None
        """The first grading's renaming (``rerun.first_grading``), or None: made once per run."""
        self._held: asyncio.Future[HeldCapture] | None = None
        """The capture, started once the repo is set up (envs/coding/held.py)."""

    # ------------------------------------------------------------ authoring
    @classmethod
    def new_task(cls, fix: UpstreamFix) -> Path:
        """``crucible task new``: the fix split into a three-branch task repo and its YAML."""
        from envs.coding.upstream import new_task

        return new_task(fix)

    # ------------------------------------------------------------ plan
    def plan_task(self, task: CodingTaskConfig, ctx: PlanContext) -> PlannedTask:
        repo_path = repos.resolve_repo(task.repo)
        pins = _pins(task, repo_path, ctx.pins)
        task.pins = pins
        if (task.fail_to_pass or task.pass_to_pass) and reading.declared_format(task) == "none":
            raise ConfigError(
                f"task '{task.id}' lists fail_to_pass/pass_to_pass but reads no named test results "
                f"(results.format {task.results.format!r} for `{task.test_command}`): set results.format"
            )
        refused = reading.text_only_refusal(task, cast(CodingIntegrity | None, ctx.integrity))
        if refused:
            raise ConfigError(refused)
        if task.isolated_verdict and (held := isolated.workdir_refusal(repo.workdir_of(task, ConfigError))):
            raise ConfigError(f"task '{task.id}': {held} (isolated_verdict: true)")
        for index, allowance in enumerate(task.allow_test_aware):
            if allowance.rule not in model.RULES:
                raise ConfigError(
                    f"task '{task.id}': allow_test_aware[{index}].rule {allowance.rule!r} is no scanner "
                    f"rule; rules: {', '.join(model.RULES)}"
                )
            if not allowance.reason.strip():
                raise ConfigError(
                    f"task '{task.id}': allow_test_aware[{index}] ({allowance.rule} at "
                    f"{allowance.path}) gives no reason"
                )
        # The change is read here too, so a filter that selects nothing or a submodule in it
        # is one line before any container starts (and cached for grading).
        hidden.read_change(repo_path, pins["baseline"], pins["test"], task.hidden_tests, task_id=task.id)
        if task.validation is None:
            from envs.coding.validation import derive_validation

            task.validation = derive_validation(repo_path, pins["baseline"], pins["golden"], task.workdir)
        build_args = {
            "BASE": ctx.base_image(),
            "INSTANCE_ID": "",
            "SYSTEM_PACKAGES": " ".join(sorted({*ctx.env.system_packages, *task.system_packages})),
            "INSTALL_CMD": task.install,
            "REPO_DIR": task.workdir,
            "BASELINE_REF": task.refs.baseline,
        }
        context = _baseline_context(repo_path, task, ctx.cache_dir)
        roles = {"INSTALL_CMD": "the `install:` step", "SYSTEM_PACKAGES": "the `system_packages` install"}
        return PlannedTask(task=task, image=ImageInputs(str(ctx.dockerfile), str(context), build_args, arg_roles=roles))

    # ------------------------------------------------------------ run
    def tools(self, ws: Workspace, spec: RunSpec) -> CodingTools:
        """The agent's tools on ``ws``, as uid 1000 under the uid wall, else root."""
        env = spec.env
        try:
            return CodingTools(
                ws,
                workdir=repo.workdir_of(spec.task, ConfigError),
                user=AGENT_UID if spec.integrity.uid_wall else ROOT_UID,
                bash_timeout=float(env.bash_timeout),
                max_output_bytes=int(env.max_output_bytes),
                enabled=list(env.tools),
            )
        except ValueError as exc:
            raise ConfigError(f"env {env.name!r}: {exc}") from exc

    def setup_script(self, spec: RunSpec) -> SetupScript | None:
        """The repo setup (``repo.setup_command``): the baseline, fresh or with its history,
        and its ownership, all of the spec alone (``SetsUpInImage``)."""
        return repo.setup_command(spec.task, spec.integrity)

    async def setup(self, ws: Workspace, spec: RunSpec, *, script_done: bool = False) -> None:
        # The hidden tests are read from the host repo while the agent works, not between
        # capture and grading, where those git processes (~0.05 s) would hold up the run.
        self._prefetch_hidden(spec.task)
        if spec.integrity.randomise_test_names and rerun_defends(spec):
            self._names(spec.task)  # which test names may change, read on the host meanwhile too
        if (spec.integrity.randomise_test_names or spec.integrity.differential_rerun) and rerun_defends(spec):
            self._free_files(spec.task)  # and which hidden files may
        if not script_done:  # else the workspace started from the layer it made (engine/plan/setup_layer.py)
            await repo.setup_repo(ws, spec.task, spec.integrity, timeout=float(spec.timeouts.setup))
        if self.holds_capture:  # waiting, beside the agent, for it to be done
            self._held = asyncio.ensure_future(repo.hold_capture(ws, spec.task, spec.integrity))
            self._held.add_done_callback(lambda held: held.cancelled() or held.exception())  # a capture afresh says why

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        change = await self._prefetch_hidden(spec.task)
        held, self._held = self._held, None
        return await repo.capture_diff(
            ws,
            spec.task,
            spec.integrity,
            timeout=float(spec.timeouts.capture),
            hidden_paths=[f.path for f in change],
            held=await _started(held),
        )

    def untouched_key(self, spec: RunSpec, image_id: str, script_done: bool) -> str | None:
        """The key of an untouched workspace's capture (``CapturesUntouched``): ``repo.untouched_key``.
        None for a flavor that sets up or captures its own way (a subclass's own ``setup`` or
        ``capture``): what those read is theirs to name."""
        own = type(self)
        if own.setup is not CodingFlavor.setup or own.capture is not CodingFlavor.capture:
            return None
        return repo.untouched_key(spec.task, spec.integrity, image_id, script_done, spec.engine_version)

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        """Grading's commands start on the fresh workspace and wait for the submission."""
        change, _ = await self._first_change(spec)
        self._prepared = (ws, await grader.prepare(ws, spec.task, spec.integrity, change))

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        change, renaming = await self._first_change(spec)
        prepared, self._prepared = self._prepared, None
        verdict = await grader.grade(
            ws,
            spec.task,
            spec.integrity,
            submission,
            change,
            timeout=float(spec.timeouts.grade),
            renaming=renaming,
            prepared=prepared[1] if prepared is not None and prepared[0] is ws else None,
        )
        if spec.integrity.differential_rerun and not rerun_defends(spec):
            verdict.raw["rerun_skipped"] = RERUN_NEEDLESS
        return verdict

    async def _first_change(self, spec: RunSpec) -> tuple[Sequence[HiddenFile], rerun.Renaming | None]:
        """The hidden change the first grading lays down: the task's, with its hidden files
        (those the re-run would rename) and its test names at random under
        ``randomise_test_names`` (where they can matter: ``rerun_defends``)."""
        change = await self._prefetch_hidden(spec.task)
        if not (spec.integrity.randomise_test_names and rerun_defends(spec)):
            return change, None
        if self._first is None or self._first.get_loop() is not asyncio.get_running_loop():
            self._first = asyncio.ensure_future(self._new_first(spec.task))
        renaming = await self._first
        return (renaming.hidden, renaming) if renaming is not None else (change, None)

    async def _new_first(self, task: CodingTaskConfig) -> rerun.Renaming | None:
        change, free, names = await self._prefetch_hidden(task), await self._free_files(task), await self._names(task)
        return await asyncio.to_thread(rerun.first_grading, change, free, names)  # a parse per module: not on the loop

    def _names(self, task: CodingTaskConfig) -> asyncio.Future:
        """Which test names the hidden modules may take at random, read once on the host (in a
        thread, while the agent works)."""
        if self._test_names is None or self._test_names.get_loop() is not asyncio.get_running_loop():
            self._test_names = asyncio.ensure_future(self._read_names(task))
            # A run that ends before grading never awaits it: its error is not news then.
            self._test_names.add_done_callback(lambda fut: fut.cancelled() or fut.exception())
        return self._test_names

    def _free_files(self, task: CodingTaskConfig) -> asyncio.Future:
        """Which hidden files may take random names, read once on the host (in a thread, while
        the agent works): the same for the first grading and the re-run."""
        if self._free is None or self._free.get_loop() is not asyncio.get_running_loop():
            self._free = asyncio.ensure_future(self._read_free(task))
            self._free.add_done_callback(lambda fut: fut.cancelled() or fut.exception())
        return self._free

    async def _read_free(self, task: CodingTaskConfig) -> frozenset[str]:
        change = await self._prefetch_hidden(task)
        try:
            return await asyncio.to_thread(
                rerun.renamable, repos.resolve_repo(task.repo), task.pins["test"], change, str(task.test_command)
            )
        except KeyError as exc:
            raise GradeError(f"task {task.id!r} lacks pins.{exc.args[0]}") from exc
        except CrucibleError as exc:
            raise GradeError(
                f"cannot read which hidden files of task {task.id!r} may take random names: {exc}"
            ) from exc

    async def _read_names(self, task: CodingTaskConfig) -> frozenset[str]:
        change = await self._prefetch_hidden(task)
        try:
            return await asyncio.to_thread(
                testnames.renamable, repos.resolve_repo(task.repo), task.pins["test"], change, str(task.test_command)
            )
        except KeyError as exc:
            raise GradeError(f"task {task.id!r} lacks pins.{exc.args[0]}") from exc
        except CrucibleError as exc:
            raise GradeError(f"cannot read which test names task {task.id!r} may randomise: {exc}") from exc

    # ------------------------------------------------------------ differential re-run (GradesInMany)
    def grading_workspaces(self, spec: RunSpec) -> int:
        """Two under ``integrity.defences.differential_rerun``: the second grades the re-run. One where
        the verdict is isolated behind a uid wall: every hidden file then lives in the tester's
        own directory (mode 700, written by envs/coding/verdict/launch.py), which the code under test can
        neither read nor list, so no name of it can matter and a re-run would defend nothing."""
        return 2 if spec.integrity.differential_rerun and rerun_defends(spec) else 1

    async def prepare_extra_grading(self, ws: Workspace, spec: RunSpec, index: int) -> None:
        """The re-run's commands start on its workspace, with its renamed hidden change."""
        renaming = await self._renaming(spec)
        self._rerun_prepared = (
            ws,
            await grader.prepare(ws, spec.task, spec.integrity, renaming.hidden, renaming=renaming),
        )

    async def grade_many(
        self, workspaces: Sequence[Workspace], spec: RunSpec, submission: CapturedSubmission
    ) -> Verdict:
        """The grading and its differential re-run at once, each in its own fresh workspace."""
        first, second = await _both(
            CodingFlavor.grade(self, workspaces[0], spec, submission),
            self._grade_rerun(workspaces[1], spec, submission),
        )
        return judging.with_rerun(first, second, spec.task)

    async def _grade_rerun(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        renaming = await self._renaming(spec)
        prepared, self._rerun_prepared = self._rerun_prepared, None
        return await grader.grade(
            ws,
            spec.task,
            spec.integrity,
            submission,
            renaming.hidden,
            timeout=float(spec.timeouts.grade),
            renaming=renaming,
            prepared=prepared[1] if prepared is not None and prepared[0] is ws else None,
        )

    def _renaming(self, spec: RunSpec) -> asyncio.Future:
        """The re-run's renaming, made once (which files the test ref names is read on the host,
        in a thread, while the agent works); its test names at random too under
        ``randomise_test_names``."""
        if self._rerun is None or self._rerun.get_loop() is not asyncio.get_running_loop():
            self._rerun = asyncio.ensure_future(
                self._new_renaming(spec.task, bool(spec.integrity.randomise_test_names))
            )
        return self._rerun

    async def _new_renaming(self, task: CodingTaskConfig, functions: bool) -> rerun.Renaming:
        change, free = await self._prefetch_hidden(task), await self._free_files(task)
        names = await self._names(task) if functions else frozenset()
        return await asyncio.to_thread(rerun.randomise, change, free, names)

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        return judging.regrade(raw, spec.task)

    def remedy(self, spec: RunSpec, raw: Mapping[str, Any]) -> str | None:
        return advice.remedy(spec, raw)

    def notes(self, spec: RunSpec, raw: Mapping[str, Any]) -> list[str]:
        return advice.notes(spec, raw)

    def lock_refusal(self, spec: RunSpec) -> str | None:
        return advice.lock_refusal(spec)

    def _prefetch_hidden(self, task: CodingTaskConfig) -> asyncio.Future:
        """Start reading ``task``'s hidden tests (host git; maybe a repo generator) once per task."""
        stale = self._hidden is None or self._hidden.get_loop() is not asyncio.get_running_loop()
        if stale or self._hidden_for != _hidden_key(task):
            self._hidden_for = _hidden_key(task)
            self._hidden = asyncio.ensure_future(asyncio.to_thread(hidden_files, task))
            # A run that ends before grading never awaits it: its error is not news then.
            self._hidden.add_done_callback(lambda fut: fut.cancelled() or fut.exception())
        assert self._hidden is not None  # not stale: set
        return self._hidden


async def _both(first, second) -> tuple[Verdict, Verdict]:
    """Both gradings' verdicts; each runs to its end even when the other fails (then the first
    failure is raised), so neither is cut off mid-way by the other's error."""
    outcomes = await asyncio.gather(first, second, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes[0], outcomes[1]  # type: ignore[return-value]


def _pins(task: CodingTaskConfig, repo_path: Path, recorded: Mapping[str, str] | None) -> dict[str, str]:
    refs = {"baseline": task.refs.baseline, "test": task.refs.test, "golden": task.refs.golden}
    if not recorded:
        return repos.pin_all(repo_path, refs, task_id=task.id)
    if repos.has_commits(repo_path, list(recorded.values())):  # one git call; else say which is missing
        return dict(recorded)
    for role, sha in recorded.items():
        if not repos.has_commit(repo_path, sha):
            raise ConfigError(f"task '{task.id}': pinned {role} commit {sha[:12]} is not in {task.repo}")
    return dict(recorded)


def _baseline_context(repo_path: Path, task: CodingTaskConfig, cache_dir: Path) -> Path:
    """The build context for a task image: the baseline's ancestry as a git bundle, nothing else."""
    sha = task.pins["baseline"]
    context = cache_dir / "contexts" / f"{sha[:20]}-{task.refs.baseline}"
    bundle = context / "repo.bundle"
    if not bundle.is_file():
        with repos.file_lock(f"context-{context.name}"):
            if not bundle.is_file():
                context.mkdir(parents=True, exist_ok=True)
                repos.baseline_bundle(repo_path, task.refs.baseline, sha, bundle)
    return context


def _hidden_key(task: CodingTaskConfig) -> tuple:
    return (task.repo, str(task.pins.get("baseline")), str(task.pins.get("test")), tuple(task.hidden_tests))


def hidden_files(task: CodingTaskConfig) -> list[HiddenFile]:
    """The task's hidden change (baseline..test, filtered by ``hidden_tests``), read from the host repo."""
    try:
        repo_path = repos.resolve_repo(task.repo)
        return hidden.read_change(
            repo_path, task.pins["baseline"], task.pins["test"], task.hidden_tests, task_id=task.id
        )
    except KeyError as exc:
        raise GradeError(f"task {task.id!r} lacks pins.{exc.args[0]}") from exc
    except CrucibleError as exc:
        raise GradeError(f"cannot read the hidden change of task {task.id!r}: {exc}") from exc


async def _started(held: asyncio.Future[HeldCapture] | None) -> HeldCapture | None:
    """The capture started ahead, once it has started; None where it could not start."""
    if held is None or held.cancelled():
        return None
    with contextlib.suppress(Exception):
        return await held
    return None
