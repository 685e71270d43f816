"""Toy flavors that each break one clause of the flavor contract, for the flavor self-check's
own tests (tests/flavors/test_flavor_selfcheck.py): each must fail its check, by its message."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, ClassVar

from engine.interfaces import PlanContext, PlannedTask
from engine.models import RunSpec, Verdict
from toy_flavor.flavor import ToyFlavor, ToyTaskConfig

_plans = itertools.count()


class ImpurePlan(ToyFlavor):
    """Pins something that differs every time it plans: no two plans of a task are one spec."""

    def plan_task(self, task: ToyTaskConfig, ctx: PlanContext) -> PlannedTask:
        planned = super().plan_task(task, ctx)
        planned.task.pins["planned"] = str(next(_plans))
        return planned


class RegradeDiffers(ToyFlavor):
    """Regrades to the opposite of what its grade stored."""

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        verdict = super().regrade(spec, raw)
        return Verdict(reward=1.0 - verdict.reward, subscores=verdict.subscores, raw=verdict.raw)


class ExplainDropsAField(ToyFlavor):
    """Never shows the answer the agent gave."""

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        return [f"reason: {raw.get('reason')}; the comparison exited {raw.get('exit_code')}"]


class ExplainOmitsAFieldSaying(ExplainDropsAField):
    """Leaves the answer out on purpose, and says why."""

    explain_omits: ClassVar[Mapping[str, str]] = {"answer": "the agent's answer: crucible show prints it whole"}


class ExplainOmitsAFieldSilently(ExplainDropsAField):
    """Names the answer as left out, without a reason."""

    explain_omits: ClassVar[Mapping[str, str]] = {"answer": ""}
