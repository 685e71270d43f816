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
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import importlib
import logging
import os
import secrets
import shutil
import socket
import tempfile
import time
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from typing import TYPE_CHECKING, Callable

from engine.agents import AgentContext, AgentOutcome
from engine.errors import CrucibleError
from engine.interfaces import (Flavor, GradesInMany, RecordsServedCalls, RunServices, TerminalSink, Workspace,
                               capabilities_used)
from engine.models import CapturedSubmission, RunRecord, Verdict
from engine.config.plugins import instantiate
from engine.plan.spec import Plan, make_agent
from engine.run.reaper import BRIDGE_ROOT, bridge_prefix
from engine.store.terminals import TerminalLog

if TYPE_CHECKING:
    from engine.capabilities.mcp_server import McpService

log = logging.getLogger(__name__)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:10]


class Runner:
    def __init__(self, *, store, builder, runtime, ensured: dict[str, bool] | None = None,
                 serving: asyncio.Future | None = None) -> None:
        self.store = store
        self.builder = builder
        self.runtime = runtime
        self.ensured = dict(ensured or {})
        """Images a batch ensured before it fanned out (tag -> whether it was cached): a run of
        one of them does not check it again (0.01-0.2 s of ``docker`` calls on its critical path)."""
        self.serving = serving
        """What serves a run's tools, loading in a thread (``engine.capabilities.preload``):
        each run waits for it first."""

    def new_record(self, plan: Plan, run_dir: Path, *, sweep_id: str | None, run_id: str | None = None) -> RunRecord:
        spec = plan.spec
        return RunRecord(
            run_id=run_id or new_run_id(), spec_hash=spec.spec_hash, spec=spec.to_dict(), status="running",
            task_id=spec.task_id, agent=spec.agent_name, model=spec.model, flavor=spec.flavor.name,
            runtime=spec.runtime.name, integrity_requested=spec.integrity.mode, integrity_obtained=None,
            attempt=spec.attempt, seed=spec.seed, sweep_id=sweep_id, started_at=now_iso(), run_dir=str(run_dir),
            image_tag=plan.image.tag, owner_pid=os.getpid(), owner_host=socket.gethostname(),
        )

    def start_ahead(self, plan: Plan, run_id: str) -> "StartedAhead":
        """Start a run's workspaces (its own, and its fresh grading container) and its bridge
        now, ahead of ``execute(..., ahead=)``: a batch does this while the run waits for a
        slot. Its images must exist (a batch ensures them before anything fans out)."""
        bridge = _new_bridge()
        grading = self.runtime.provision(plan.image, run_id=run_id, network=False, purpose="grade",
                                         **limited(plan.spec))
        agent = self.runtime.provision(plan.agent_workspace_image, run_id=run_id,
                                       network=plan.spec.integrity.agent_network, purpose="agent", bridge=bridge,
                                       **limited(plan.spec))
        # The agent's first: it is the first one a run waits for.
        agent_started = asyncio.ensure_future(agent.__aenter__())
        grading_started = asyncio.ensure_future(grading.__aenter__())
        ahead = StartedAhead(bridge=bridge, agent=agent, agent_started=agent_started, grading=grading,
                             grading_started=grading_started)
        try:
            flavor = instantiate(plan.spec.flavor, where="flavor")
        except Exception:  # a flavor that cannot be made: the run itself says so, in its plan phase
            return ahead
        ahead.flavor = flavor
        ahead.extra = self._start_extra_grading(plan, flavor, run_id)
        # The task is set up in the agent's workspace as soon as it is up: setup depends on the
        # spec alone, never on the agent. Not for a flavor with per-run services (a mock
        # remote): those start with the run, and its setup may need them.
        # Its grading workspaces are prepared then too (``prepare_grading``: the reset to the
        # baseline, the test process started and waiting), as the run would once set up.
        if not isinstance(flavor, RunServices):
            set_up = ahead.set_up = _observed(asyncio.ensure_future(_set_up_ahead(flavor, agent_started, plan.spec)))
            ahead.preparing = asyncio.ensure_future(_prepare_after(set_up, flavor, grading_started, plan.spec))
            ahead.preparing_extra = [asyncio.ensure_future(_prepare_after(set_up, flavor, started, plan.spec, index))
                                     for index, (_, started) in enumerate(ahead.extra, 1)]
        return ahead

    def _start_extra_grading(self, plan: Plan, flavor, run_id: str) -> list[tuple[Workspace, asyncio.Future]]:
        """The further fresh grading workspaces of a ``GradesInMany`` flavor, each starting."""
        extra = []
        for _ in range(flavor.grading_workspaces(plan.spec) - 1 if isinstance(flavor, GradesInMany) else 0):
            workspace = self.runtime.provision(plan.image, run_id=run_id, network=False, purpose="grade",
                                               **limited(plan.spec))
            extra.append((workspace, asyncio.ensure_future(workspace.__aenter__())))
        return extra

    async def execute(self, plan: Plan, run_dir: Path, *, sweep_id: str | None = None,
                      run_id: str | None = None, ahead: "StartedAhead | None" = None,
                      done_with_workspaces: Callable[[], None] | None = None) -> RunRecord:
        """Run ``plan`` to a stored record. ``ahead``: its workspaces, started by ``start_ahead``
        for this run id; the run owns them from here (and takes them down).
        ``done_with_workspaces``: called once the run works in no workspace any more, before its
        final record is written and its grading container removed (a batch hands the run's
        slot to the next run then, so those two overlap that run's start).
        """
        run_dir.mkdir(parents=True, exist_ok=True)
        record = self.new_record(plan, run_dir, sweep_id=sweep_id, run_id=run_id)
        (run_dir / "spec.json").write_text(json.dumps(plan.spec.to_dict(), indent=2, sort_keys=True))
        (run_dir / "pins.json").write_text(json.dumps(plan.spec.task.pins, indent=2, sort_keys=True))
        # The named tests it is graded on (from the task or its lock, as the lock was then): a
        # re-plan uses these, not whatever the lock says by the time of a rerun.
        (run_dir / "named_tests.json").write_text(json.dumps(
            {"fail_to_pass": list(plan.spec.task.fail_to_pass), "pass_to_pass": list(plan.spec.task.pass_to_pass)},
            indent=2))
        # The "running" record is spooled while the run starts (``_EarlyWrites``); every early
        # write is drained before the final record, which stays authoritative.
        early = _EarlyWrites(self.store)
        early.record_run(record)
        phase = _Phase(record)
        # The bridge: a host directory the agent's workspace sees read-only at BRIDGE_PATH, where
        # the run's MCP server listens on a unix socket too, for agents working inside a
        # workspace that has no network (coding CLIs). Short, under /tmp: socket paths are
        # limited to 108 bytes.
        bridge = ahead.bridge if ahead is not None else _new_bridge()
        parts = _Parts(bridge=bridge)
        if ahead is not None:
            ahead.handed_over = True  # taken down by ``parts`` from here, whatever happens
            parts.grading, parts.grading_started, parts.extra = ahead.grading, ahead.grading_started, ahead.extra
            parts.agent_ahead, parts.agent_started = ahead.agent, ahead.agent_started
            parts.flavor, parts.set_up = ahead.flavor, ahead.set_up
            parts.preparing, parts.preparing_extra = ahead.preparing, ahead.preparing_extra
        try:
            await self._pipeline(plan, record, phase, early, parts)
            record.status = "completed"
        except asyncio.TimeoutError:
            record.status, record.error_phase = "timeout", phase.name
            record.error = f"{phase.name} exceeded its timeout"
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.status, record.error_phase, record.error = "canceled", phase.name, "canceled by the user"
            await early.drain()
            await self._finish(record, phase, parts)
            raise
        except CrucibleError as exc:
            record.status, record.error_phase, record.error = "error", phase.name, f"{type(exc).__name__}: {exc}"
            _write_traceback(run_dir)
        except Exception as exc:  # an engine bug must still end as a recorded error, never a lost run
            record.status, record.error_phase, record.error = "error", phase.name, f"{type(exc).__name__}: {exc}"
            _write_traceback(run_dir)
        if done_with_workspaces is not None:
            done_with_workspaces()
        cancelled = await early.drain()
        cancelled = await self._finish(record, phase, parts) or cancelled
        if cancelled:
            raise asyncio.CancelledError
        return record

    async def _finish(self, record: RunRecord, phase: "_Phase", parts: "_Parts") -> bool:
        """Write the final record while the grading container is removed (~0.05 and ~0.1 s):
        both always end before this returns, even through a cancel (whether one arrived is
        returned). A removal that fails turns a completed run into an error, written again."""
        record.ended_at = now_iso()
        with phase.timed("store", is_phase=False):
            written = asyncio.ensure_future(asyncio.to_thread(self.store.record_run, copy.deepcopy(record)))
            cancelled = await _through_cancel(parts.grading_removed)
            cancelled = await _through_cancel(written) or cancelled
        written.result()  # a store that failed raises (StoreError), as it always did
        failed = _failure(parts.grading_removed)
        if failed is not None:
            log.warning("could not remove the grading container of run %s: %s", record.run_id, failed)
            if record.status == "completed":
                record.status, record.error_phase = "error", phase.name
                record.error = f"{type(failed).__name__}: {failed}"
                self.store.record_run(record)
        return cancelled

    async def _pipeline(self, plan: Plan, record: RunRecord, phase: "_Phase", early: "_EarlyWrites",
                        parts: "_Parts") -> None:
        spec = plan.spec
        try:
            # The tools' server starts now and learns its workspace later: its start-up overlaps
            # the build check and provisioning instead of adding to the agent phase. What
            # serves it may still be loading (``serving``): a run waits for that as part of it.
            # Only what the agent connects to is served (and waited for): noop gets nothing.
            agent = make_agent(spec.agent, spec.model)
            parts.uses = capabilities_used(agent, spec)
            if self.serving is not None and "mcp" in parts.uses:
                with contextlib.suppress(Exception):  # a failed load: the import below says why
                    await asyncio.shield(self.serving)
            if "mcp" in parts.uses:
                from engine.capabilities.mcp_server import MCP_SOCKET, McpService

                parts.mcp = McpService(token=secrets.token_urlsafe(32), also_uds=f"{parts.bridge}/{MCP_SOCKET}")
                parts.mcp.start()
            flavor = parts.flavor if parts.flavor is not None else instantiate(spec.flavor, where="flavor")
            with phase.timed("build"):
                record.from_cache = await self._ensure_image(plan, early)
            # The grading container starts now, beside the agent's, and stays untouched until
            # grading: still a fresh workspace, its start-up hidden behind the agent's side.
            # (Starting it once the agent's is up instead spares the agent's start the
            # contention, but then it is late for a quick agent: no faster overall, measured.)
            # It is the task image, never the agent's layer: what the agent installed for
            # itself must not change how the hidden tests run.
            if parts.grading_started is None:  # not started ahead of the run
                parts.grading = self.runtime.provision(plan.image, run_id=record.run_id, network=False,
                                                       purpose="grade", **limited(spec))
                parts.grading_started = asyncio.ensure_future(parts.grading.__aenter__())
                # A flavor that grades in more than one fresh workspace (a differential re-run)
                # gets the others started now too, together with the first: their start-up is
                # hidden behind the agent's side as well.
                parts.extra = self._start_extra_grading(plan, flavor, record.run_id)
            if isinstance(flavor, RunServices) and parts.bridge is not None:
                # A flavor's per-run service (a mock remote), up before the agent's workspace and
                # kept until teardown (grading may use it); its start overlaps the grading
                # container's.
                with phase.timed("setup"):
                    await parts.services.enter_async_context(flavor.services(spec, parts.bridge))
            submission = await self._agent_side(plan, record, phase, flavor, agent, parts)
            with phase.timed("grade"):
                gws = await parts.grading_started
                if parts.preparing is not None:
                    await parts.preparing
                verdict: Verdict = await asyncio.wait_for(_graded(flavor, gws, spec, submission, parts),
                                                          spec.timeouts.grade)
            record.reward, record.subscores, record.raw_grade = verdict.reward, verdict.subscores, verdict.raw
            # In the store's order (by name), so the record.json beside the run and the store agree.
            record.tests = sorted(verdict.tests, key=lambda t: (t.name, t.status))
        finally:
            with phase.timed("teardown", is_phase=False):
                await parts.close()

    async def _ensure_image(self, plan: Plan, early: "_EarlyWrites") -> bool:
        """The run's images (the task image, then the agent's layer over it, if any), each
        built unless cached; whether all were cached. Their build records are written while
        the run goes on."""
        if all(image.tag in self.ensured for image in plan.images):
            return all(self.ensured[image.tag] for image in plan.images)
        builds = _BuildRecords()
        try:
            hits = [(await asyncio.to_thread(self.builder.ensure, image, builds)).cache_hit for image in plan.images]
        finally:
            for build_record in builds.records:
                early.record_build(build_record)
        return all(hits)

    async def _agent_side(self, plan: Plan, record: RunRecord, phase: "_Phase", flavor, agent,
                          parts: "_Parts") -> CapturedSubmission:
        """The agent's workspace: provision, setup, the agent's turn, capture. Its removal is
        left running (it overlaps grading) in ``parts``."""
        spec, timeouts = plan.spec, plan.spec.timeouts
        mcp = parts.mcp  # started with the pipeline, where the agent connects to it
        with phase.timed("provision"):
            if parts.agent_ahead is not None and parts.agent_started is not None:
                workspace, starting = parts.agent_ahead, parts.agent_started
                parts.agent_ahead = parts.agent_started = None  # closed below from here
                try:
                    ws = await starting
                except BaseException:
                    await _close_started(workspace, starting)
                    raise
            else:
                # The agent's image: its declared needs layered over the task image (grading's).
                workspace = self.runtime.provision(plan.agent_workspace_image, run_id=record.run_id,
                                                   network=spec.integrity.agent_network, purpose="agent",
                                                   bridge=parts.bridge, **limited(spec))
                ws = await workspace.__aenter__()
        try:
            record.integrity_obtained = obtained_integrity(spec.integrity, ws)
            set_up, parts.set_up = parts.set_up, None  # awaited (or cancelled) below from here
            with phase.timed("setup"):
                agent_run = await _setup_beside_agent(flavor, agent, ws, spec, mcp, parts.ssh, parts.bridge,
                                                      TerminalLog(self.store, record.run_id), set_up,
                                                      serve_ssh="ssh" in parts.uses)
            if set_up is not None:  # what setup took, done while the run waited for its slot
                record.timings["setup_ahead"] = round(set_up.result(), 4)
            # The grading workspace gets ready (a flavor's optional prepare_grading) while the
            # agent works: after setup, so the two do not compete for the machine (unless it
            # was prepared while the run waited for its slot).
            assert parts.grading_started is not None  # started before the agent side
            if parts.preparing is None:
                parts.preparing = asyncio.ensure_future(_prepare_grading(flavor, parts.grading_started, spec))
                parts.preparing_extra = [asyncio.ensure_future(_prepare_grading(flavor, started, spec, index))
                                         for index, (_, started) in enumerate(parts.extra, 1)]
            with phase.timed("agent"):
                outcome = await _agent_outcome(agent_run, timeouts.agent, mcp, parts.ssh)
            record.steps, record.warnings, record.stop_reason = outcome.steps, outcome.warnings, outcome.stop_reason
            record.warnings = [*limit_warnings(spec, self.runtime), *record.warnings]
            record.final_answer = outcome.answer or None
            if outcome.stop_reason == "timeout" and getattr(agent, "timeout_ends_run", False):
                raise asyncio.TimeoutError  # its steps are recorded; the run is a timeout, never graded
            with phase.timed("capture"):
                submission = await asyncio.wait_for(flavor.capture(ws, spec), timeouts.capture)
            record.diff, record.violations = submission.diff, submission.violations
            return submission
        finally:
            parts.agent_closed = asyncio.ensure_future(workspace.close())


def limited(spec) -> dict:
    """``provision``'s ``limits`` for a spec whose task names its own (``TaskLimits``); nothing
    otherwise, so a runtime from before task limits provisions as it always did."""
    return {"limits": spec.limits} if getattr(spec, "limits", None) is not None else {}


LIMIT_NOTICE = "task limit: "
"""How a task-limit warning begins: a notice of what the run withheld, not a failed step (the
shipping gate, which fails a golden with warnings, passes over these)."""


def limit_warnings(spec, runtime) -> list[str]:
    """One line each for a task limit the run does not give: a network the integrity mode
    withholds, cpus or memory a runtime without cgroups cannot set."""
    limits, found = getattr(spec, "limits", None), list[str]()
    if limits is None:
        return found
    if limits.network and not spec.integrity.agent_network:
        found.append(f"{LIMIT_NOTICE}the task allows the agent internet access; integrity {spec.integrity.mode} "
                     "gives it no network")
    if (limits.cpus or limits.memory_bytes) and not getattr(runtime, "limits_resources", False):
        found.append(f"{LIMIT_NOTICE}the task's cpus/memory are not applied: runtime "
                     f"{getattr(runtime, 'name', spec.runtime.name)} sets no cgroups")
    return found


async def _setup_beside_agent(flavor, agent, ws: Workspace, spec, mcp: "McpService | None",
                              ssh: contextlib.AsyncExitStack, bridge_host: str | None = None,
                              terminals: TerminalSink | None = None,
                              set_up: asyncio.Future | None = None, *, serve_ssh: bool = True) -> asyncio.Future:
    """Set the task up while the agent already starts: it connects and lists the tools (a model
    takes its first turn) meanwhile, and a tool call waits until setup is done. Returns the
    agent's running ``run`` once setup succeeded; a failed setup takes the agent down with it.
    ``set_up``: the setup already under way (or done) since the run waited for its slot.
    ``mcp`` None / ``serve_ssh`` False: the agent connects to neither, so neither is served."""
    tools = flavor.tools(ws, spec)
    # An outside agent records no steps itself: the servers record them for it.
    observed = agent if isinstance(agent, RecordsServedCalls) else None
    setup = set_up if set_up is not None else asyncio.ensure_future(
        asyncio.wait_for(flavor.setup(ws, spec), spec.timeouts.setup))
    agent_run: asyncio.Future | None = None
    try:
        capabilities: dict[str, str] = {}
        auth: dict[str, str] = {}
        if mcp is not None:
            from engine.capabilities.mcp_server import MCP_SOCKET

            capabilities["mcp"] = await mcp.serve(observed.served_tools(tools) if observed else tools, ready=setup)
            auth["mcp"] = auth["mcp_socket"] = mcp.token
            if ws.bridge is not None:  # the same MCP server, from inside the workspace, with no network
                capabilities["mcp_socket"] = f"{ws.bridge}/{MCP_SOCKET}"
        if serve_ssh:
            # Imported in a thread (asyncssh: ~0.3 s), not on the loop every run shares.
            await asyncio.to_thread(importlib.import_module, "engine.capabilities.ssh_server")
            from engine.capabilities.ssh_server import serve_ssh as ssh_server

            # ssh/2 onto the same workspace shell, as the same uid as the bash tool; its per-run
            # key is handed to the engine-side agent only, never into the workspace.
            endpoint = await ssh.enter_async_context(ssh_server(
                ws, user=tools.user, cwd=tools.workdir, ready=setup,
                on_step=observed.record_step if observed else None))
            capabilities["ssh"], auth["ssh"] = endpoint.url, endpoint.credential()
        ctx = AgentContext(spec=spec, capabilities=capabilities, capability_auth=auth,
                           validation=spec.task.validation or [], prompt=spec.task.prompt,
                           workspace=ws, uid=tools.user, workdir=tools.workdir,
                           bridge_host=bridge_host if ws.bridge is not None else None,
                           setup_done=_observed(asyncio.shield(setup)), terminals=terminals)
        agent_run = asyncio.ensure_future(agent.run(ctx))
        await setup
        return agent_run
    except BaseException:
        await _cancelled(setup, agent_run)
        raise


def _observed(fut: asyncio.Future) -> asyncio.Future:
    """``fut``, its failure marked as seen (an agent that never awaits it leaves no warning)."""
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    return fut


async def _agent_outcome(agent_run: asyncio.Future, timeout: float, mcp: "McpService | None",
                         ssh: contextlib.AsyncExitStack) -> AgentOutcome:
    """The agent's outcome, its turn bounded by ``timeout`` from the end of setup. An agent
    stopped by its timeout says nothing of its steps: the MCP server's calls stand for them,
    the ones still in flight included (their effects may be in the captured diff)."""
    try:
        return await asyncio.wait_for(asyncio.shield(agent_run), timeout)
    except asyncio.TimeoutError:
        return AgentOutcome(stop_reason="timeout", steps=mcp.calls() if mcp is not None else [],
                            warnings=[f"agent exceeded timeouts.agent={timeout:g}s"])
    finally:
        await _cancelled(agent_run)
        await ssh.aclose()  # kills any session still running: nothing may change the workspace now
        # The server drains while capture runs (~0.15 s); with a tool call still running
        # (a timed-out agent) this waits until the server is gone, so nothing changes the
        # workspace under the capture.
        if mcp is not None:
            await mcp.stop()


async def _cancelled(*futures: asyncio.Future | None) -> None:
    """Cancel what is still running among ``futures`` and wait until it has ended."""
    pending = [f for f in futures if f is not None and not f.done()]
    for fut in pending:
        fut.cancel()
    for fut in pending:
        with contextlib.suppress(BaseException):
            await fut


class _EarlyWrites:
    """Store writes a run need not wait for (its "running" record, its build record): made in
    order, in a worker thread, while the run goes on. ``drain`` waits for them; a failed one is
    logged, since the final record supersedes it (and ``_finish`` raises if the store still fails).

    They are written durably but not ingested: the final record's ingest commits them in the
    same turn at the store (each turn opens the file: ~20 ms), and any crucible command that
    reads the store ingests them first, so a running run is never missing from a query."""

    def __init__(self, store) -> None:
        self.store = store
        self._last: asyncio.Future | None = None

    def record_run(self, record: RunRecord) -> None:
        self._then(self.store.record_run, copy.deepcopy(record))  # a snapshot: the run goes on mutating it

    def record_build(self, record) -> None:
        self._then(self.store.record_build, record)

    def _then(self, write, item) -> None:
        previous = self._last

        async def in_order() -> None:
            if previous is not None:
                await previous
            try:
                await asyncio.to_thread(write, item, ingest=False)
            except Exception as exc:
                log.warning("an early store write failed (the final record supersedes it): %s", exc)

        self._last = asyncio.ensure_future(in_order())

    async def drain(self) -> bool:
        """Wait until every write is done, even through a cancel; whether one arrived meanwhile
        (then the caller still writes its final record, and re-raises the cancel after)."""
        return await _through_cancel(self._last)


class _BuildRecords:
    """Stands in for the store during ``ensure`` (a worker thread): keeps its build records."""

    def __init__(self) -> None:
        self.records: list = []

    def record_build(self, record, *, ingest: bool = True) -> None:
        self.records.append(record)  # written by the run's early writes, which never ingest


@dataclass
class _Parts:
    """What a run has started and must take down, whatever happens."""

    mcp: "McpService | None" = None
    """The run's tools' server, from the start of its pipeline."""
    uses: frozenset[str] = frozenset()
    """The capabilities the run's agent connects to (``capabilities_used``): only these are served."""
    bridge: str | None = None
    """The host side of the agent workspace's bridge (removed by ``close``)."""
    ssh: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    services: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    """The flavor's per-run services (``RunServices``), closed after everything that may use them."""
    grading: Workspace | None = None
    grading_started: asyncio.Future | None = None
    agent_ahead: Workspace | None = None
    agent_started: asyncio.Future | None = None
    """The agent's workspace started ahead of the run, until the run takes it (``_agent_side``)."""
    flavor: Flavor | None = None
    """The flavor the setup ahead used (the run goes on with the same one)."""
    set_up: asyncio.Future | None = None
    """The task's setup started ahead of the run, until the run takes it (``_agent_side``)."""
    preparing: asyncio.Future | None = None
    extra: list[tuple[Workspace, asyncio.Future]] = field(default_factory=list)
    """The further fresh grading workspaces of a ``GradesInMany`` flavor, with their starts."""
    preparing_extra: list[asyncio.Future] = field(default_factory=list)
    agent_closed: asyncio.Future | None = None
    grading_removed: asyncio.Future | None = None
    """The grading container's removal: started by ``close``, awaited beside the final store
    write (``Runner._finish``)."""

    async def close(self) -> None:
        """Take everything down; the grading container's removal is left running. Every part is
        closed even when closing another one failed: an exit stack runs each callback whatever
        the ones before it raised, cancellation included."""
        async with contextlib.AsyncExitStack() as stack:
            if self.bridge is not None:
                stack.callback(shutil.rmtree, self.bridge, True)
            stack.push_async_callback(self.services.aclose)
            if self.mcp is not None:
                stack.push_async_callback(self.mcp.close)
            stack.push_async_callback(self.ssh.aclose)
            if self.agent_closed is not None:
                stack.push_async_callback(_finished, self.agent_closed)
            if self.agent_ahead is not None and self.agent_started is not None:  # never taken: the run failed first
                stack.push_async_callback(_close_started, self.agent_ahead, self.agent_started)
            if self.set_up is not None:  # never taken: ended before the workspace goes
                stack.push_async_callback(_cancelled, self.set_up)
            if self.grading_started is not None:
                stack.callback(self._start_grading_removal)
            if self.preparing is not None:  # first: its exec is killed before the container goes
                stack.push_async_callback(_cancelled, self.preparing, *self.preparing_extra)

    def _start_grading_removal(self) -> None:
        assert self.grading_started is not None  # registered only once it is set
        removals = [(self.grading, self.grading_started), *self.extra]
        self.grading_removed = asyncio.ensure_future(_all_done(*(_close_started(ws, started)
                                                                  for ws, started in removals)))


@dataclass
class StartedAhead:
    """A run's workspaces and bridge, started before its turn (``Runner.start_ahead``)."""

    bridge: str
    agent: Workspace
    agent_started: asyncio.Future
    grading: Workspace
    grading_started: asyncio.Future
    extra: list[tuple[Workspace, asyncio.Future]] = field(default_factory=list)
    """A ``GradesInMany`` flavor's further grading workspaces, with their starts."""
    flavor: Flavor | None = None
    set_up: asyncio.Future | None = None
    """The task's setup in the agent's workspace (``_set_up_ahead``); None for a flavor with
    per-run services, set up by the run itself."""
    preparing: asyncio.Future | None = None
    preparing_extra: list[asyncio.Future] = field(default_factory=list)
    """The grading workspaces' ``prepare_grading``, once set up (None: the run does it)."""
    handed_over: bool = False
    """Given to ``execute``, which then owns it; until then ``discard`` takes it down."""

    async def discard(self) -> None:
        """Take down what was started for a run that never began (a cancel while it waited);
        nothing once ``execute`` took it."""
        if self.handed_over:
            return
        self.handed_over = True
        # Both at once, and finished even through another cancel (a batch being torn down
        # cancels its waiting runs more than once).
        started = [(self.agent, self.agent_started), (self.grading, self.grading_started), *self.extra]

        async def close_all() -> list:
            await _cancelled(self.set_up, self.preparing, *self.preparing_extra)  # before their containers go
            return await asyncio.gather(*(_close_started(ws, starting) for ws, starting in started),
                                        return_exceptions=True)

        closing = asyncio.ensure_future(close_all())
        try:
            cancelled = await _through_cancel(closing)
        finally:
            shutil.rmtree(self.bridge, True)
        for failed in closing.result():
            if isinstance(failed, BaseException):
                log.warning("could not remove a workspace started ahead: %s", failed)
        if cancelled:
            raise asyncio.CancelledError


async def _prepare_after(set_up: asyncio.Future, flavor: Flavor, grading_started: asyncio.Future, spec,
                         index: int = 0) -> None:
    """``_prepare_grading`` once the setup ahead has ended (however it ended): the two do not
    compete with each other for the machine, as in the run."""
    await asyncio.wait([set_up])
    await _prepare_grading(flavor, grading_started, spec, index)


async def _set_up_ahead(flavor: Flavor, agent_started: asyncio.Future, spec) -> float:
    """The flavor's setup in the agent's workspace once it is up, bounded by the setup timeout
    as in the run; the seconds it took."""
    ws = await asyncio.shield(agent_started)
    began = time.perf_counter()
    await asyncio.wait_for(flavor.setup(ws, spec), spec.timeouts.setup)
    return time.perf_counter() - began


def _new_bridge() -> str:
    """A run's bridge directory on the host (``_Parts.close`` removes it)."""
    bridge = tempfile.mkdtemp(prefix=bridge_prefix(), dir=str(BRIDGE_ROOT))
    os.chmod(bridge, 0o755)
    return bridge


class _Phase:
    """Tracks the current phase (for error records) and per-stage wall time."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self.name = "plan"

    @contextmanager
    def timed(self, name: str, *, is_phase: bool = True):
        if is_phase:  # teardown runs in a finally: it must not hide the phase that failed
            self.name = name
        began = time.perf_counter()
        try:
            yield
        finally:
            self.record.timings[name] = round(self.record.timings.get(name, 0.0) + time.perf_counter() - began, 4)


async def _finished(fut: asyncio.Future) -> None:
    await fut


async def _through_cancel(fut: asyncio.Future | None) -> bool:
    """Wait until ``fut`` has ended, even if we are cancelled meanwhile; whether we were."""
    cancelled = False
    while fut is not None and not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = cancelled or not fut.done()
        except Exception:
            pass  # read by the caller
    return cancelled


def _failure(fut: asyncio.Future | None) -> BaseException | None:
    if fut is None or fut.cancelled():
        return None
    return fut.exception()


async def _graded(flavor: Flavor, gws: Workspace, spec, submission: CapturedSubmission, parts: "_Parts") -> Verdict:
    """The verdict: ``grade`` in the one grading workspace, or a ``GradesInMany`` flavor's
    ``grade_many`` in all of them once each is started and prepared."""
    if not parts.extra:
        return await flavor.grade(gws, spec, submission)
    assert isinstance(flavor, GradesInMany)  # only such a flavor has extra workspaces
    others = [await started for _, started in parts.extra]
    for preparing in parts.preparing_extra:
        await preparing
    return await flavor.grade_many([gws, *others], spec, submission)


async def _all_done(*closing) -> None:
    """Wait for every one of ``closing``, each to its end, whatever the others did; then
    raise the first failure (a workspace left behind is an error, as for one workspace)."""
    outcomes = await asyncio.gather(*closing, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


async def _prepare_grading(flavor: Flavor, grading_started: asyncio.Future, spec, index: int = 0) -> None:
    """The flavor's ``prepare_grading`` on the grading workspace (``prepare_extra_grading``
    on extra workspace ``index``). Never raises: grading does the work itself when it was not
    done, and reports what really breaks."""
    try:
        gws = await asyncio.shield(grading_started)
    except Exception:
        return  # the grade phase says why there is no grading workspace
    try:
        if index and isinstance(flavor, GradesInMany):
            await flavor.prepare_extra_grading(gws, spec, index)
        else:
            await flavor.prepare_grading(gws, spec)
    except Exception as exc:
        log.warning("preparing the grading workspace failed (grading does it itself): %s", exc)


async def _close_started(workspace, starting: asyncio.Future) -> None:
    """Close a workspace whose start may still be in flight (its start cleans up on cancel)."""
    if not starting.done():
        starting.cancel()
    try:
        await starting
    except BaseException:  # a start that failed or was cancelled removed its own container
        return
    await workspace.close()


def obtained_integrity(requested, ws: Workspace) -> str:
    """The mode the run actually got, from what the workspace reports of itself: a mode
    that wants the agent off the network, given a workspace with one, is recorded as
    ``none`` (the runtime refuses what it cannot give before anything starts; this is the
    record of what it gave)."""
    if not requested.agent_network and ws.network:
        return "none"
    return requested.mode


def _write_traceback(run_dir: Path) -> None:
    (run_dir / "error.log").write_text(traceback.format_exc())
