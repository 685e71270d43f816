"""The flavor contract (``Flavor`` in engine/interfaces.py) as checks any flavor passes.

Each check is a function of one ``Subject`` (a task of the flavor: its composed config, its
plans and the stored runs of its shipping gate) that raises ``SelfCheckFailure`` with one line
saying what broke. ``CHECKS`` lists them in the order they run; the runner
(``engine.cli.selfcheck``) turns each into a ``CheckResult``. Only the engine's interfaces are
used: nothing here knows any flavor by name.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any

from engine.config.schema import CrucibleConfig, TaskConfig, typed
from engine.errors import ConfigError
from engine.interfaces import Flavor, ImageBuilder
from engine.models import RunRecord, RunSpec, Verdict, spec_hash_of
from engine.plan.spec import plan

EXPLAIN_OMITS = "explain_omits"
"""The optional flavor attribute naming raw-grade keys its ``explain`` leaves out on purpose
(bookkeeping no author needs), each with why: ``{"durations": "timings, shown by crucible show"}``.
Every other top-level key must be read by ``explain``."""


class SelfCheckFailure(AssertionError):
    """A flavor broke its contract; the message (one line) says how."""


def expect(condition: object, message: str) -> None:
    if not condition:
        raise SelfCheckFailure(message)


@dataclass
class Side:
    """One side of the gate (``golden``, ``baseline``): its planned spec, the reward it must
    score, and its run as the store holds it (None when the store has no completed run)."""

    role: str
    expected: float
    spec: RunSpec
    stored: RunRecord | None = None
    ran: list[RunRecord] = field(default_factory=list)
    """What the gate's batch gave (a failed run included), for the gate's message."""


@dataclass
class Subject:
    """One task of the flavor under check."""

    task_id: str
    config: Any
    """The composed config (a DictConfig): the bad-config check edits copies of its task."""
    typed: CrucibleConfig
    flavor: Flavor
    builder: ImageBuilder
    sides: list[Side] = field(default_factory=list)


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Subject], None]
    needs_runs: bool
    """Whether it reads the gate's runs (the runner runs the gate first)."""


CHECKS: list[Check] = []


def check(needs_runs: bool) -> Callable[[Callable[[Subject], None]], Callable[[Subject], None]]:
    def register(fn: Callable[[Subject], None]) -> Callable[[Subject], None]:
        CHECKS.append(Check(fn.__name__.removeprefix("check_"), fn, needs_runs))
        return fn

    return register


# -- 1. plan is pure and hashable ---------------------------------------------------------------


@check(needs_runs=False)
def check_plan_is_pure_and_hashable(subject: Subject) -> None:
    """Planning twice gives equal specs and hashes, leaves the config as it was, and the spec's
    stored form (canonical JSON, read back) hashes the same: a cached verdict is the task's."""
    before = _task_as_dict(subject.typed)
    first = plan(subject.typed, builder=subject.builder).spec
    expect(_task_as_dict(subject.typed) == before, "planning changed the task config it was given")
    second = plan(subject.typed, builder=subject.builder).spec
    expect(
        first.spec_hash == second.spec_hash,
        f"two plans of the same task differ: {_first_difference(first.to_dict(), second.to_dict())}",
    )
    expect(first == second, "two plans of the same task hash the same but are not equal specs")
    stored = json.loads(json.dumps(first.to_dict(), sort_keys=True))
    expect(
        spec_hash_of(stored) == first.spec_hash,
        f"the spec's stored form hashes differently: {_first_difference(first.to_dict(), stored)}",
    )
    again = plan(subject.typed, builder=subject.builder, pins=dict(first.task.pins)).spec
    expect(
        again.spec_hash == first.spec_hash,
        "planning with the recorded pins (crucible rerun) gives another "
        f"spec: {_first_difference(first.to_dict(), again.to_dict())}",
    )


def _task_as_dict(cfg: CrucibleConfig) -> Any:
    return json.loads(json.dumps(dataclasses.asdict(cfg.task), sort_keys=True, default=str))


def _first_difference(a: Any, b: Any, at: str = "spec") -> str:
    """Where two stored forms first differ, as ``spec.task.pins.x: 'a' != 'b'``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key, _ABSENT) != b.get(key, _ABSENT):
                return _first_difference(a.get(key, _ABSENT), b.get(key, _ABSENT), f"{at}.{key}")
    return f"{at}: {_short(a)} != {_short(b)}"


_ABSENT = "<absent>"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- 2. golden and baseline gate ----------------------------------------------------------------


@check(needs_runs=True)
def check_golden_and_baseline_gate(subject: Subject) -> None:
    """Each side of the flavor's gate (``Flavor.roles``) completed with the reward it must have."""
    expect(subject.sides, "the flavor declares no gate roles (golden, baseline)")
    for side in subject.sides:
        record = side.stored or (side.ran[-1] if side.ran else None)
        expect(record is not None, f"{side.role}: no run")
        assert record is not None
        expect(
            record.status == "completed", f"{side.role}: status {record.status} in {record.error_phase}: {record.error}"
        )
        expect(
            record.reward == side.expected,
            f"{side.role}: reward {record.reward} (expected {side.expected}): "
            + " | ".join(subject.flavor.explain(record.raw_grade or {}))[:300],
        )


# -- 3. grading is a pure function of the raw grade ----------------------------------------------


@check(needs_runs=True)
def check_regrade_equals_the_stored_verdict(subject: Subject) -> None:
    """``regrade(stored spec, stored raw grade)`` gives the stored reward, reason and tests."""
    for side in _stored_sides(subject):
        record = side.stored
        assert record is not None
        expect(
            spec_hash_of(record.spec) == record.spec_hash == side.spec.spec_hash,
            f"{side.role}: the stored spec does not hash to the run's spec hash",
        )
        verdict = subject.flavor.regrade(side.spec, record.raw_grade)
        expect(
            verdict.reward == record.reward,
            f"{side.role}: regrade gives reward {verdict.reward}, the store holds {record.reward}",
        )
        reason, stored_reason = verdict.raw.get("reason"), record.raw_grade.get("reason")
        expect(
            reason == stored_reason, f"{side.role}: regrade gives reason {reason!r}, the store holds {stored_reason!r}"
        )
        expect(
            _tests(verdict) == _tests(record),
            f"{side.role}: regrade gives other tests: {_short(sorted(_tests(verdict) ^ _tests(record)))}",
        )


def _tests(result: Verdict | RunRecord) -> set[tuple[str, str]]:
    return {(t.name, t.status) for t in result.tests}


def _stored_sides(subject: Subject) -> list[Side]:
    stored = [side for side in subject.sides if side.stored is not None and side.stored.raw_grade]
    expect(stored, "no stored raw grade to check (no side of the gate completed)")
    return stored


# -- 4. explain covers every raw-grade field ------------------------------------------------------


class ReadLog(dict[str, Any]):
    """A raw grade that notes which of its top-level keys are read: by key, ``get``, ``in``, or
    all of them by iterating it (``items()``, ``json.dumps``, ``{**raw}``)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self.read.update(self)
        return super().__iter__()

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        self.read.update(super().keys())
        return super().keys()

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        self.read.update(super().keys())
        return super().items()

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        self.read.update(super().keys())
        return super().values()


@check(needs_runs=True)
def check_explain_covers_every_raw_grade_field(subject: Subject) -> None:
    """``explain`` looks at every top-level key of each stored raw grade (a key may show only in
    the verdicts it matters to), but for those the flavor names in ``explain_omits``, with why."""
    omits = getattr(subject.flavor, EXPLAIN_OMITS, {}) or {}
    unexplained = [key for key, why in omits.items() if not str(why).strip()]
    expect(not unexplained, f"{EXPLAIN_OMITS} gives no reason for {unexplained}")
    for side in _stored_sides(subject):
        assert side.stored is not None
        raw = ReadLog(side.stored.raw_grade)
        lines = subject.flavor.explain(raw)
        expect(
            isinstance(lines, list) and lines and all(isinstance(line, str) for line in lines),
            f"{side.role}: explain gives no lines of text: {_short(lines)}",
        )
        dropped = sorted(set(side.stored.raw_grade) - raw.read - set(omits))
        expect(
            not dropped,
            f"{side.role}: explain never reads raw-grade field(s) {dropped}; show them, or name "
            f"them in the flavor's {EXPLAIN_OMITS} with why",
        )


# -- 5. a bad task config is one line -------------------------------------------------------------


@check(needs_runs=False)
def check_a_bad_task_config_is_one_line(subject: Subject) -> None:
    """A misspelled task key and a value of the wrong type each fail to compose in one
    ConfigError line naming the key and the task."""
    schema = type(subject.typed.task)
    own = [f for f in dataclasses.fields(schema) if f.name not in {g.name for g in dataclasses.fields(TaskConfig)}]
    misspelled = _misspelling((own or dataclasses.fields(schema))[0].name, schema)
    _expect_one_line(subject, misspelled, "x", "a misspelled task key")
    key, value = _wrong_type(schema, own)
    _expect_one_line(subject, key, value, "a task value of the wrong type")


def _misspelling(name: str, schema: type) -> str:
    """``name`` with two letters swapped (or one doubled), not itself a field of ``schema``."""
    names = {f.name for f in dataclasses.fields(schema)}
    for i in range(len(name) - 1):
        swapped = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
        if swapped not in names:
            return swapped
    return name + name[-1]


def _wrong_type(schema: type, own: list[dataclasses.Field[Any]]) -> tuple[str, Any]:
    """A key of the flavor's own schema typed as a number or a flag given a word, else one typed
    as a string given a list; else the base schema's ``fail_to_pass`` (a list) given a word."""
    hints = typing.get_type_hints(schema)
    for wanted, value in (((int, float, bool), "not-a-number"), ((str,), ["not", "a", "string"])):
        for f in own:
            if hints.get(f.name) in wanted:
                return f.name, value
    return "fail_to_pass", "not-a-list"


def _expect_one_line(subject: Subject, key: str, value: Any, what: str) -> None:
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(subject.config, resolve=False)
    assert isinstance(config, dict)
    config["task"] = {**config["task"], key: value}
    try:
        typed(config)
    except ConfigError as exc:
        message = str(exc)
        expect("\n" not in message.strip(), f"{what} ({key}) fails in more than one line: {_short(message)}")
        expect(
            f"task.{key}" in message and subject.task_id in message,
            f"{what} ({key}) fails without naming task.{key} and the task {subject.task_id}: {_short(message)}",
        )
        return
    except Exception as exc:  # the contract is a ConfigError; anything else is a traceback for the user
        raise SelfCheckFailure(
            f"{what} ({key}) raises {type(exc).__name__}, not ConfigError: {_short(str(exc))}"
        ) from exc
    raise SelfCheckFailure(f"{what} (task.{key}={value!r}) composes without an error")
