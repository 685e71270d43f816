"""Result sources: the formats a test run's named results arrive in, one interface and a registry.

Each source (``base.ResultSource``) parses captured bytes into typed named results and explains
what a flavor recorded of a reading. The coding flavor picks one by its task's
``results.format`` (envs/coding/grader.py); SWE-bench Pro's ``strict`` reads several at once
and explains every record it kept (swe_tasks/flavor.py). A new format is a module here with a
``SOURCE`` registered below, or a flavor's own registered with ``register``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.integrity.sources import gojson, jsresults, junit, parser
from envs.integrity.sources.base import ResultSource

REGISTRY: dict[str, ResultSource[Any]] = {}
"""The sources by name, in the order ``explain`` shows their records."""


def register(source: ResultSource[Any]) -> ResultSource[Any]:
    """Add ``source`` to the registry; a name taken by another source is a programming error."""
    if REGISTRY.get(source.name, source) is not source:
        raise ValueError(f"a result source named {source.name!r} is already registered")
    REGISTRY[source.name] = source
    return source


def get(name: str) -> ResultSource[Any]:
    """The source registered as ``name``; KeyError naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no result source {name!r} (known: {', '.join(REGISTRY)})") from None


def explain(raw: Mapping[str, Any]) -> list[str]:
    """What ``raw`` (a raw grade) recorded of each registered source, and the listed tests each
    could not map (``raw["listed"]``), in registry order."""
    listed = [entry for entry in raw.get("listed") or [] if isinstance(entry, Mapping)]
    lines: list[str] = []
    for source in REGISTRY.values():
        record = raw.get(source.record_key)
        lines += source.explain(record if isinstance(record, Mapping) else {}, listed)
    return lines


for _source in (junit.SOURCE, gojson.SOURCE, jsresults.SOURCE, parser.SOURCE):
    register(_source)
