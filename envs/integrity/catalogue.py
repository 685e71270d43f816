"""The defence catalogue: one ``Defence`` per thing a flavor does against a cheating agent,
and a registry of which flavor applies which.

A flavor declares its defences as the fields of its integrity schema (a dataclass over the
engine's ``IntegrityConfig``, named by the flavor class's ``integrity_schema`` as it names its
``task_schema``): each field is made by ``Defence.field``, so the engine reads from the field
alone which modes turn it on and whether the run spec stores it while off. ``register`` puts
the schema (and any defences with no switch of their own) under the flavor's name, for the
generated docs (``envs.integrity.docs``) and for whoever lists what a flavor applies.

A new defence is a ``Defence`` and a field: no engine file, no ``conf/integrity/*.yaml`` (each
mode's value comes from ``modes``), and ``integrity.defences.<name>=false`` turns it off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.schema import IntegrityConfig

MODES = ("none", "vault", "strict")
"""The integrity modes (conf/integrity/), weakest first."""


@dataclass(frozen=True)
class Defence:
    """One defence: what it answers, what it adds to grading, and when it is on.

    ``judge`` and ``explain`` read the raw grade (the stored dict, or a flavor's typed view of
    it) only, so a stored run is judged again the same way: None where this defence has
    nothing against the run, else the run's reason (it scores 0)."""

    name: str
    """Its key (``integrity.defences.<name>``) and its name in the catalogue."""
    threat: str
    """What an agent would do that this answers."""
    adds: str
    """What it adds to the grading."""
    modes: tuple[str, ...] = ("strict",)
    """The modes that turn it on by default."""
    switch: bool = True
    """Whether it has a key of its own; False: part of the flavor's strict grading, on while
    that is (``needs`` names the key it follows, ``!key`` for the key being off)."""
    needs: str = ""
    stored: bool = False
    """Always written into the run spec: the defences every spec held from the start, whose
    hashes stay as they were. Any other is written only while on, so a new defence leaves the
    hash of every spec that has it off alone."""
    judging: Callable[[Any], str | None] | None = dataclasses.field(default=None, compare=False)
    explaining: Callable[[Any], list[str]] | None = dataclasses.field(default=None, compare=False)

    def field(self) -> Any:
        """The schema field declaring it (off by default: ``typed`` sets each mode's value)."""
        spec = {} if self.stored else {"spec": "omit_default"}
        return dataclasses.field(default=False, metadata={"modes": self.modes, "defence": self, **spec})

    def on(self, integrity: Any) -> bool:
        """Whether it applies under ``integrity`` (a flavor's typed integrity config)."""
        if self.switch:
            return bool(getattr(integrity, self.name, False))
        if not self.needs:
            return True
        key = self.needs.lstrip("!")
        return bool(getattr(integrity, key, False)) != self.needs.startswith("!")

    def judge(self, raw: Any) -> str | None:
        return self.judging(raw) if self.judging is not None else None

    def explain(self, raw: Any) -> list[str]:
        return self.explaining(raw) if self.explaining is not None else []


@dataclass(frozen=True)
class Entry:
    """What one flavor registered: its integrity schema and its switchless defences."""

    schema: type
    grading: tuple[Defence, ...] = ()

    def defences(self) -> list[Defence]:
        """Every defence, the schema's in field order, then the switchless ones."""
        return [*declared(self.schema), *self.grading]


_REGISTRY: dict[str, Entry] = {}


def declared(schema: type) -> list[Defence]:
    """The defences ``schema``'s fields declare (``Defence.field``), in field order."""
    return [f.metadata["defence"] for f in dataclasses.fields(schema) if "defence" in f.metadata]


def register(flavor: str, schema: type, *grading: Defence) -> None:
    """Put ``flavor``'s integrity ``schema`` (and its ``grading`` defences, those with no key)
    in the catalogue. Again with the same schema: nothing changes (a module imported twice)."""
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema) and issubclass(schema, IntegrityConfig)):
        raise TypeError(f"flavor {flavor}: an integrity schema is an IntegrityConfig dataclass, not {schema!r}")
    for f in dataclasses.fields(schema):
        if "defence" in f.metadata and f.metadata["defence"].name != f.name:
            raise TypeError(f"flavor {flavor}: defence {f.metadata['defence'].name} is declared by field {f.name}")
    names = [d.name for d in [*declared(schema), *grading]]
    if len(set(names)) != len(names):
        raise TypeError(f"flavor {flavor}: a defence name is given twice: {names}")
    _REGISTRY[flavor] = Entry(schema, tuple(grading))


def unregister(flavor: str) -> None:
    """Take ``flavor`` out of the catalogue (a test's flavor, when the test is done)."""
    _REGISTRY.pop(flavor, None)


def catalogue(flavor: str) -> list[Defence]:
    """``flavor``'s defences; KeyError when it registered none."""
    return _REGISTRY[flavor].defences()


def flavors() -> list[str]:
    return list(_REGISTRY)


def schema_of(flavor: str) -> type:
    return _REGISTRY[flavor].schema


def defaults(schema: type, mode: str) -> dict[str, bool]:
    """Each switch of ``schema`` as ``mode`` sets it by default."""
    return {f.name: mode in f.metadata["modes"] for f in dataclasses.fields(schema) if "modes" in f.metadata}


def refusal(integrity: Any, raw: Mapping[str, Any] | Any) -> str | None:
    """The first reason a defence of ``integrity``'s schema that is on gives against ``raw``,
    or None: for a flavor whose verdict stands unless one of its defences refuses it."""
    for defence in declared(type(integrity)) if dataclasses.is_dataclass(integrity) else []:
        reason = defence.judge(raw) if defence.on(integrity) else None
        if reason:
            return reason
    return None
