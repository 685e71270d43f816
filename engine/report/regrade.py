"""Stored runs judged again by today's code: the verdict as a pure function of the raw grade.

Every completed run keeps its raw grade and its spec. Rebuilding the typed spec from what is
stored (``stored_spec``) and handing both to the run's flavor (``Flavor.regrade``) must give
the stored verdict back: that is how a store made by older code stays readable, and how a new
rule is applied to old runs without running them again. Nothing here writes to the store.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError
from engine.models import RunRecord, RunSpec, TaskLimits, TestResult, canonical_json

SPEC_PARTS = ("env", "flavor", "agent", "integrity", "runtime", "task", "model", "seed", "attempt", "timeouts")
"""The parts of a stored spec that are typed configs (``CrucibleConfig``'s fields)."""


@dataclass
class Regraded:
    """One stored run beside the verdict today's code gives its raw grade."""

    run_id: str
    task_id: str
    stored_reward: float | None
    stored_reason: str
    reward: float | None
    reason: str
    same_tests: bool
    explained: list[str]
    problem: str = ""
    """Why the run could not be judged again (its flavor or spec no longer loads), else ""."""

    @property
    def same(self) -> bool:
        return (
            not self.problem
            and self.same_tests
            and (self.stored_reward, self.stored_reason) == (self.reward, self.reason)
        )


def stored_spec(spec: dict[str, Any]) -> RunSpec:
    """The typed ``RunSpec`` of a stored spec (``RunSpec.to_dict``), through today's schemas:
    a key today's schemas do not know raises ``ConfigError`` naming it."""
    from omegaconf import OmegaConf

    from engine.config.schema import typed

    if BRACE in canonical_json(spec):
        raise ConfigError(f"stored spec holds {BRACE!r}, which stands for '${{' while it is typed")
    parts = {part: _literal(spec[part], "${", BRACE) for part in SPEC_PARTS if part in spec}
    config = _literal(typed(OmegaConf.create(parts), stored=True), BRACE, "${")
    limits = spec.get("limits")
    return RunSpec(
        engine_version=str(spec.get("engine_version", "")),
        task=config.task,
        env=config.env,
        flavor=config.flavor,
        agent=config.agent,
        model=config.model,
        integrity=config.integrity,
        runtime=config.runtime,
        image=dict(spec.get("image") or {}),
        timeouts=config.timeouts,
        seed=config.seed,
        attempt=config.attempt,
        agent_image=spec.get("agent_image"),
        limits=TaskLimits(**limits) if isinstance(limits, dict) else None,
    )


BRACE = "\ue000{"
"""What ``${`` stands as while a stored spec goes through OmegaConf: a stored spec holds resolved
text (a patch, a script) that OmegaConf must not read as an interpolation, and an escaped
``\\${`` does not survive its resolve-then-convert."""


def _literal(value: Any, there: str, here: str) -> Any:
    """``value`` (plain data or typed dataclasses) with ``there`` written ``here`` in every string."""
    if isinstance(value, str):
        return value.replace(there, here)
    if isinstance(value, dict):
        return {key: _literal(item, there, here) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_literal(item, there, here) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for part in dataclasses.fields(value):
            object.__setattr__(value, part.name, _literal(getattr(value, part.name), there, here))
    return value


def flavor_of(spec: RunSpec) -> Any:
    """The run's flavor plug-in, built from its typed config as planning builds it."""
    from engine.config.plugins import instantiate

    return instantiate(spec.flavor, where="flavor")


def regrade_record(record: RunRecord) -> Regraded:
    """``record``'s stored verdict beside today's: ``Flavor.regrade`` over its stored raw grade
    and spec, and ``Flavor.explain`` of that raw grade."""
    raw = dict(record.raw_grade or {})
    stored_reason = str(raw.get("reason", ""))
    stored = functools.partial(
        Regraded, run_id=record.run_id, task_id=record.task_id, stored_reward=record.reward, stored_reason=stored_reason
    )
    try:
        spec = stored_spec(dict(record.spec or {}))
        flavor = flavor_of(spec)
        verdict = flavor.regrade(spec, raw)
        explained = [str(line) for line in flavor.explain(raw)]
    except ConfigError as exc:
        return stored(reward=None, reason="", same_tests=False, explained=[], problem=str(exc))
    return stored(
        reward=verdict.reward,
        reason=str(verdict.raw.get("reason", "")),
        same_tests=_tests(verdict.tests) == _tests(record.tests),
        explained=explained,
    )


def regrade_records(records: Iterable[RunRecord]) -> list[Regraded]:
    """``regrade_record`` of each completed run that has a raw grade (the others have no
    verdict to judge again)."""
    return [regrade_record(r) for r in records if r.status == "completed" and r.raw_grade]


def _tests(tests: Iterable[TestResult | dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted(
        (t.name, t.status) if dataclasses.is_dataclass(t) else (str(t["name"]), str(t["status"])) for t in tests
    )
