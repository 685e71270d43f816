"""Executing one planned run end to end, one phase at a time, always ending in a stored status.

    build -> provision -> setup -> agent (served tools) -> capture -> grade (fresh workspace) -> store

Whatever happens — an error in any phase, a timeout, Ctrl-C — the run ends with a recorded
status (completed / error / canceled / timeout), the phase it failed in, and its timings.
The record is written durably beside the run's outputs before it reaches the store.

What does not need to wait, does not: the "running" and build records are written, the
tools' server starts, the agent connects while setup runs, the grading container starts and
is prepared, the server stops and the agent's container is removed, and the grading container
goes while the final record is written, all beside the phases on the critical path (each
``docker exec`` or store write costs ~0.05-0.1 s here). Everything started is always finished
or taken down before ``execute`` returns. The "teardown" timing covers what precedes the
final write; the grading container's removal is inside "store".

A run's workspaces start one way, ahead of its turn (``Runner.start_ahead``: a batch starts
them while the run waits for its slot), and the run takes them over. Beside this module: what a run
holds and takes down (``resources``), its record as it is assembled (``records``), the agent's
side of it (``agent_turn``) and its grading (``grading``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.agents import AgentContext, AgentOutcome
from engine.capabilities import capabilities_used
from engine.config.plugins import instantiate, plugin_class
from engine.interfaces import Agent, Flavor, GradesInMany, ImageBuilder, RunServices, Runtime, Store, Workspace
from engine.models import CapturedSubmission, ImageRef, RunRecord, RunSpec
from engine.plan.spec import Plan, make_agent
from engine.run.agent_turn import agent_outcome, marked_seen, set_up_ahead, setup_beside_agent
from engine.run.grading import graded, start_preparing
from engine.run.records import (
    BuildRecords,
    EarlyWrites,
    Phase,
    infrastructure_failure,
    limit_warnings,
    new_record,
    now_iso,
    obtained_integrity,
    write_plan_files,
    write_traceback,
)
from engine.run.resources import RunResources, close_started, failure, through_cancel
from engine.run.timing import GoldenTimes, timing_warning
from engine.run.untouched import UntouchedCaptures, untouched_key, works_alone
from engine.store.terminals import TerminalLog
from engine.util.aio import within

log = logging.getLogger(__name__)


class Runner:
    def __init__(
        self,
        *,
        store: Store,
        builder: ImageBuilder,
        runtime: Runtime,
        ensured: dict[str, bool] | None = None,
        serving: asyncio.Future[None] | None = None,
        ingest_each: bool = True,
        on_written: Callable[[RunRecord], None] | None = None,
    ) -> None:
        self.store = store
        self.ingest_each = ingest_each
        """Each run's final record ingested as it is written; False: written durably and left in
        the spool for the caller's one ingest (a sweep's; every read ingests first)."""
        self.on_written = on_written
        """Called in the loop once a run's final record is written durably, before its grading
        container is gone: a sweep ingests its records once every job's is written."""
        self.builder = builder
        self.runtime = runtime
        self.ensured = dict(ensured or {})
        """Images a batch ensured before it fanned out (tag -> whether it was cached): a run of
        one of them does not check it again (0.01-0.2 s of ``docker`` calls on its critical path)."""
        self.serving = serving
        """What serves a run's tools, loading in a thread (``engine.capabilities.preload``):
        each run waits for it first."""
        self.untouched = UntouchedCaptures()
        """The kept captures of untouched workspaces (engine/run/untouched.py)."""
        self.golden_times: GoldenTimes = {}
        """The stored goldens' test times this batch looked up (engine/run/timing.py)."""

    def start_ahead(self, plan: Plan, run_id: str) -> RunResources:
        """Start run ``run_id``'s resources now, ahead of its turn (``execute``): its bridge, its
        own workspace and its fresh grading container (the task image, never the agent's layer,
        untouched until grading). With its flavor made: the further grading workspaces of a
        ``GradesInMany`` one, the task's setup in the agent's workspace as soon as it is up
        (setup depends on the spec alone, never on the agent), and the grading workspaces'
        preparation once that has ended. Not for a flavor with per-run services (a mock
        remote): those start with the run, and its setup may need them. The run's images must
        exist (a batch ensures them before anything fans out)."""
        spec = plan.spec
        resources = RunResources.with_new_bridge()
        resources.grading = self.runtime.provision(
            plan.image, run_id=run_id, network=False, purpose="grade", **limited(spec)
        )
        # Its setup of the spec alone done once, into a layer, where the batch could build one.
        layer = plan.setup_image if plan.setup_image is not None and plan.setup_image.tag in self.ensured else None
        resources.script_done = layer is not None
        try:
            flavor: Flavor | None = instantiate(spec.flavor, where="flavor")
        except Exception:  # a flavor that cannot be made: the run itself says so, in its plan phase
            flavor = None
        resources.flavor = flavor
        # An agent that works alone, its image's untouched capture kept: no workspace of its own.
        resources.untouched_key, resources.untouched = self._untouched(
            plan, flavor, layer or plan.agent_workspace_image
        )
        if resources.untouched is None:
            resources.agent = self.runtime.provision(
                layer or plan.agent_workspace_image,
                run_id=run_id,
                network=spec.integrity.agent_network,
                purpose="agent",
                bridge=resources.bridge,
                **limited(spec),
            )
        # The grading one's first: what it prepares (the test runner's start) is a golden run's
        # longest chain; the agent's turn has room to start a moment later.
        resources.grading_started = asyncio.ensure_future(resources.grading.__aenter__())
        if resources.agent is not None:
            resources.agent_started = asyncio.ensure_future(resources.agent.__aenter__())
        if flavor is None:
            return resources
        resources.extra = self._start_extra_grading(plan, flavor, run_id)
        if not isinstance(flavor, RunServices):
            if resources.agent_started is not None:
                resources.set_up = marked_seen(
                    asyncio.ensure_future(set_up_ahead(flavor, resources.agent_started, spec, resources.script_done))
                )
            start_preparing(resources, flavor, spec, after=resources.set_up)
        return resources

    def _untouched(
        self, plan: Plan, flavor: Flavor | None, image: ImageRef
    ) -> tuple[str | None, CapturedSubmission | None]:
        """The key of the run's untouched capture and the capture kept under it, where its agent
        works alone (engine/run/untouched.py): (None, None) for every other run, and (key, None)
        for the first run of an image, which captures its workspace and keeps that. Not for a
        flavor with per-run services: its setup may need them."""
        if flavor is None or isinstance(flavor, RunServices):
            return None, None
        try:
            agent = plugin_class(plan.spec.agent._target_, where="agent")
            key = untouched_key(flavor, agent, self.runtime, image.tag, plan.spec, image is plan.setup_image)
        except Exception as exc:  # a task its flavor cannot set up: the run's own phases say why
            log.debug("no untouched capture for %s: %s", plan.spec.task.id, exc)
            return None, None
        return key, (self.untouched.lookup(key) if key is not None else None)

    def _start_extra_grading(
        self, plan: Plan, flavor: Flavor, run_id: str
    ) -> list[tuple[Workspace, asyncio.Future[Workspace]]]:
        """The further fresh grading workspaces of a ``GradesInMany`` flavor (a differential
        re-run), each starting together with the first."""
        extra: list[tuple[Workspace, asyncio.Future[Workspace]]] = []
        for _ in range(flavor.grading_workspaces(plan.spec) - 1 if isinstance(flavor, GradesInMany) else 0):
            workspace = self.runtime.provision(
                plan.image, run_id=run_id, network=False, purpose="grade", **limited(plan.spec)
            )
            extra.append((workspace, asyncio.ensure_future(workspace.__aenter__())))
        return extra

    async def execute(
        self,
        plan: Plan,
        run_dir: Path,
        *,
        run_id: str,
        resources: RunResources,
        sweep_id: str | None = None,
        done_with_workspaces: Callable[[], None] | None = None,
        retry_of: str | None = None,
    ) -> RunRecord:
        """Run ``plan`` to a stored record. ``resources``: the run's, started by ``start_ahead``
        for ``run_id``; the run owns them from here (and takes them down). ``retry_of``: the
        run this one tries again after an infrastructure error.
        ``done_with_workspaces``: called once the run works in no workspace any more, before its
        final record is written and its grading container removed (a batch hands the run's
        slot to the next run then, so those two overlap that run's start).
        """
        write_plan_files(plan, run_dir)
        record = new_record(plan, run_dir, sweep_id=sweep_id, run_id=run_id, retry_of=retry_of)
        # The "running" record is spooled while the run starts (``EarlyWrites``); every early
        # write is drained before the final record, which stays authoritative.
        early = EarlyWrites(self.store)
        early.record_run(record)
        phase = Phase(record)
        resources.handed_over = True  # taken down by ``resources.close`` from here, whatever happens
        try:
            await self._pipeline(plan, record, phase, early, resources)
            record.status = "completed"
        except TimeoutError:
            record.status, record.error_phase = "timeout", phase.name
            record.error = f"{phase.name} exceeded its timeout"
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.status, record.error_phase, record.error = "canceled", phase.name, "canceled by the user"
            await early.drain()
            await self._finish(record, phase, resources)
            raise
        except Exception as exc:  # a CrucibleError, or an engine bug: still a recorded error, never a lost run
            record.status, record.error_phase, record.error = "error", phase.name, f"{type(exc).__name__}: {exc}"
            infrastructure = infrastructure_failure(exc)
            if infrastructure is not None:  # the machinery's, not the agent's: labelled, never scored
                record.infrastructure = True
                record.host = infrastructure.host or record.host
                if infrastructure is not exc:  # what failed first, in its words (the rest: error.log)
                    record.error = f"{type(infrastructure).__name__}: {infrastructure}"
            elif record.host is not None and self._host_went_away(record.host):
                # A stream cut by its host's death reads as the command's own failure; the
                # host found unreachable since (its teardown's removal, say) says whose it was.
                record.infrastructure = True
                record.error = (
                    f"InfrastructureError: Docker host {record.host} went away during the run ({record.error})"
                )
            write_traceback(run_dir)
        if done_with_workspaces is not None:
            done_with_workspaces()
        cancelled = await early.drain()
        cancelled = await self._finish(record, phase, resources) or cancelled
        if cancelled:
            raise asyncio.CancelledError
        return record

    def _host_went_away(self, host: str) -> bool:
        host_down = getattr(self.runtime, "host_down", None)  # a runtime with hosts of its own
        return bool(host_down is not None and host_down(host))

    async def _finish(self, record: RunRecord, phase: Phase, resources: RunResources) -> bool:
        """Write the final record while the grading container is removed (~0.05 and ~0.1 s):
        both always end before this returns, even through a cancel (whether one arrived is
        returned). A removal that fails turns a completed run into an error, written again."""
        record.ended_at = now_iso()
        # Only a completed run's is left for the caller's ingest: a sweep being torn down (a
        # cancel) may end its own ingest before the last of its runs have written theirs.
        ingest = self.ingest_each or record.status != "completed"
        with phase.timed("store", is_phase=False):
            written = asyncio.ensure_future(
                asyncio.to_thread(self.store.record_run, copy.deepcopy(record), ingest=ingest)
            )
            if self.on_written is not None:
                told = self.on_written
                written.add_done_callback(lambda f: None if f.cancelled() or f.exception() else told(record))
            cancelled = await through_cancel(resources.grading_removed)
            cancelled = await through_cancel(written) or cancelled
        written.result()  # a store that failed raises (StoreError), as it always did
        failed = failure(resources.grading_removed)
        if failed is not None:
            log.warning("could not remove the grading container of run %s: %s", record.run_id, failed)
            if record.status == "completed":
                record.status, record.error_phase = "error", phase.name
                record.error = f"{type(failed).__name__}: {failed}"
                self.store.record_run(record)
        return cancelled

    async def _pipeline(
        self, plan: Plan, record: RunRecord, phase: Phase, early: EarlyWrites, resources: RunResources
    ) -> None:
        spec = plan.spec
        try:
            # The tools' server starts now and learns its workspace later: its start-up overlaps
            # the build check and provisioning instead of adding to the agent phase. What
            # serves it may still be loading (``serving``): a run waits for that as part of it.
            # Only what the agent connects to is served (and waited for): noop gets nothing.
            agent = make_agent(spec.agent, spec.model)
            resources.uses = capabilities_used(agent, spec)
            if self.serving is not None and "mcp" in resources.uses:
                with contextlib.suppress(Exception):  # a failed load: the import below says why
                    await asyncio.shield(self.serving)
            if "mcp" in resources.uses:
                from engine.capabilities.mcp_server import MCP_SOCKET, McpService

                resources.mcp = McpService(token=secrets.token_urlsafe(32), also_uds=f"{resources.bridge}/{MCP_SOCKET}")
                resources.mcp.start()
            # Made ahead, unless that failed: then making it again says why, in the plan phase.
            flavor = resources.flavor if resources.flavor is not None else instantiate(spec.flavor, where="flavor")
            with phase.timed("build"):
                record.from_cache = await self._ensure_image(plan, early)
            if isinstance(flavor, RunServices):
                # A flavor's per-run service (a mock remote), kept until teardown (grading may
                # use it); the task's setup waits for it.
                with phase.timed("setup"):
                    await resources.services.enter_async_context(flavor.services(spec, resources.bridge))
            submission = await self._agent_side(plan, record, phase, flavor, agent, resources)
            with phase.timed("grade"):
                verdict = await graded(flavor, spec, submission, resources)
            record.reward, record.subscores, record.raw_grade = verdict.reward, verdict.subscores, verdict.raw
            self._timing_signal(flavor, record)
            # In the store's order (by name), so the record.json beside the run and the store agree.
            record.tests = sorted(verdict.tests, key=lambda t: (t.name, t.status))
        finally:
            with phase.timed("teardown", is_phase=False):
                await resources.close()

    def _timing_signal(self, flavor: Flavor, record: RunRecord) -> None:
        """A pass whose tests took a small fraction of the golden's time, flagged (engine/run/timing.py)."""
        golden = getattr(flavor, "roles", {}).get("golden")
        try:
            signal = (
                timing_warning(self.store, record, golden.agent, golden.reward, self.golden_times)
                if golden is not None
                else None
            )
        except Exception as exc:  # a warning never costs a run its verdict: the store said no, say so
            log.warning("run %s: no timing signal (%s: %s)", record.run_id, type(exc).__name__, exc)
            return
        if signal is not None:
            record.raw_grade = {**record.raw_grade, "timing": signal}
            record.warnings = [*record.warnings, str(signal["warning"])]

    async def _ensure_image(self, plan: Plan, early: EarlyWrites) -> bool:
        """The run's images (the task image, then the agent's layer over it, if any), each
        built unless cached; whether all were cached. Their build records are written while
        the run goes on."""
        if all(image.tag in self.ensured for image in plan.images):
            return all(self.ensured[image.tag] for image in plan.images)
        builds = BuildRecords()
        try:
            hits = [(await asyncio.to_thread(self.builder.ensure, image, builds)).cache_hit for image in plan.images]
        finally:
            for build_record in builds.records:
                early.record_build(build_record)
        return all(hits)

    async def _agent_side(
        self, plan: Plan, record: RunRecord, phase: Phase, flavor: Flavor, agent: Agent, resources: RunResources
    ) -> CapturedSubmission:
        """The agent's workspace: its start, setup, the agent's turn, capture. Its removal is
        left running (it overlaps grading) in ``resources``."""
        if resources.untouched is not None:
            return await self._alone(plan.spec, record, phase, flavor, agent, resources, resources.untouched)
        spec, timeouts = plan.spec, plan.spec.timeouts
        mcp = resources.mcp  # started with the pipeline, where the agent connects to it
        workspace, starting = resources.agent, resources.agent_started
        assert workspace is not None and starting is not None  # started before the agent side
        resources.agent = resources.agent_started = None  # closed below from here
        with phase.timed("provision"):
            try:
                ws = await starting
            except BaseException:
                await close_started(workspace, starting)
                raise
        record.host = getattr(ws, "host", None)  # a Docker host of ``runtime.docker.hosts``, if placed on one
        try:
            record.integrity_obtained = obtained_integrity(spec.integrity, ws)
            set_up, resources.set_up = resources.set_up, None  # awaited (or cancelled) below from here
            with phase.timed("setup"):
                agent_run = await setup_beside_agent(
                    flavor,
                    agent,
                    ws,
                    spec,
                    mcp,
                    resources.ssh,
                    resources.bridge,
                    TerminalLog(self.store, record.run_id),
                    set_up,
                    serve_ssh="ssh" in resources.uses,
                    script_done=resources.script_done,
                    alone=works_alone(agent),  # the first run of an image too: its capture is kept
                )
            if set_up is not None:  # what setup took, done while the run's agent started
                record.timings["setup_ahead"] = round(set_up.result(), 4)
            # The grading workspace gets ready (a flavor's optional prepare_grading) while the
            # agent works: after setup, so the two do not compete for the machine (unless it
            # was prepared once the setup started ahead had ended).
            if resources.preparing is None:
                start_preparing(resources, flavor, spec)
            with phase.timed("agent"):
                outcome = await agent_outcome(agent_run, timeouts.agent, mcp, resources.ssh)
            self._outcome(record, spec, agent, outcome)
            with phase.timed("capture"):
                submission = await within(flavor.capture(ws, spec), timeouts.capture)
            record.diff, record.violations = submission.diff, submission.violations
            if resources.untouched_key is not None:  # the first of its image: kept for the next
                await asyncio.to_thread(self.untouched.keep, resources.untouched_key, submission)
            return submission
        finally:
            resources.agent_closed = asyncio.ensure_future(workspace.close())

    async def _alone(
        self,
        spec: RunSpec,
        record: RunRecord,
        phase: Phase,
        flavor: Flavor,
        agent: Agent,
        resources: RunResources,
        kept: CapturedSubmission,
    ) -> CapturedSubmission:
        """The agent's side of a run whose agent works alone, its image's untouched capture kept:
        its turn, given no workspace and no tools, then that capture (engine/run/untouched.py)."""
        record.integrity_obtained = obtained_integrity(spec.integrity, None)
        if resources.preparing is None:
            start_preparing(resources, flavor, spec)
        ctx = AgentContext(
            spec=spec,
            capabilities={},
            capability_auth={},
            validation=spec.task.validation or [],
            prompt=spec.task.prompt,
        )
        with phase.timed("agent"):
            outcome = await agent_outcome(
                asyncio.ensure_future(agent.run(ctx)), spec.timeouts.agent, None, resources.ssh
            )
        self._outcome(record, spec, agent, outcome)
        with phase.timed("capture"):
            submission = copy.deepcopy(kept)
        record.diff, record.violations = submission.diff, submission.violations
        return submission

    def _outcome(self, record: RunRecord, spec: RunSpec, agent: Agent, outcome: AgentOutcome) -> None:
        """The agent's outcome into ``record``; a timeout that ends the run raised."""
        record.steps, record.warnings, record.stop_reason = outcome.steps, outcome.warnings, outcome.stop_reason
        record.warnings = [*limit_warnings(spec, self.runtime), *record.warnings]
        record.final_answer = outcome.answer or None
        if outcome.stop_reason == "timeout" and getattr(agent, "timeout_ends_run", False):
            raise TimeoutError  # its steps are recorded; the run is a timeout, never graded


def limited(spec: RunSpec) -> dict[str, Any]:
    """``provision``'s ``limits`` for a spec whose task names its own (``TaskLimits``); nothing
    otherwise, so a runtime from before task limits provisions as it always did."""
    return {"limits": spec.limits} if getattr(spec, "limits", None) is not None else {}
