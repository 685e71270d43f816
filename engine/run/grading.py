"""The grading step of a run: its fresh grading workspaces made ready while the agent works
(a flavor's optional ``prepare_grading``), and the verdict from them once they are.

Grading never uses the agent's workspace or image: what the agent installed for itself must
not change how the hidden tests run.
"""

from __future__ import annotations

import asyncio
import logging

from engine.interfaces import Flavor, GradesInMany, Workspace
from engine.models import CapturedSubmission, RunSpec, Verdict
from engine.run.resources import RunResources
from engine.util.aio import within

log = logging.getLogger(__name__)


def start_preparing(
    resources: RunResources, flavor: Flavor, spec: RunSpec, after: asyncio.Future[float] | None = None
) -> None:
    """Start preparing every grading workspace of the run; ``after``: once that (the task's
    setup) has ended, however it ended, so the two do not compete for the machine."""
    assert resources.grading_started is not None  # the workspaces are started first
    resources.preparing = asyncio.ensure_future(_prepare(flavor, resources.grading_started, spec, 0, after))
    resources.preparing_extra = [
        asyncio.ensure_future(_prepare(flavor, started, spec, index, after))
        for index, (_, started) in enumerate(resources.extra, 1)
    ]


async def graded(flavor: Flavor, spec: RunSpec, submission: CapturedSubmission, resources: RunResources) -> Verdict:
    """The verdict: ``grade`` in the one grading workspace, or a ``GradesInMany`` flavor's
    ``grade_many`` in all of them, once each is started and prepared."""
    assert resources.grading_started is not None  # started before the agent side
    gws = await resources.grading_started
    if resources.preparing is not None:
        await resources.preparing
    return await within(_verdict(flavor, gws, spec, submission, resources), spec.timeouts.grade)


async def _verdict(
    flavor: Flavor, gws: Workspace, spec: RunSpec, submission: CapturedSubmission, resources: RunResources
) -> Verdict:
    if not resources.extra:
        return await flavor.grade(gws, spec, submission)
    assert isinstance(flavor, GradesInMany)  # only such a flavor has extra workspaces
    others = [await started for _, started in resources.extra]
    for preparing in resources.preparing_extra:
        await preparing
    return await flavor.grade_many([gws, *others], spec, submission)


async def _prepare(
    flavor: Flavor,
    grading_started: asyncio.Future[Workspace],
    spec: RunSpec,
    index: int,
    after: asyncio.Future[float] | None,
) -> None:
    """The flavor's ``prepare_grading`` on the grading workspace (``prepare_extra_grading``
    on extra workspace ``index``). Never raises: grading does the work itself when it was not
    done, and reports what really breaks."""
    if after is not None:
        await asyncio.wait([after])
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
