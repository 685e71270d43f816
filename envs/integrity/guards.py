"""A verdict as an ordered list of guard clauses (after the SWE-bench harness's grading).

Each ``Guard`` reads one typed case (a flavor's view of its raw grade) and says why the run
fails, or nothing. The list is read in order, and what each kind of guard does is fixed:

- ``refuse``: before judging; the first reason given is the verdict;
- ``judge``: the judgement proper (lists, plain results, text), the first that applies;
- ``on_pass``: after, only where the verdict so far is the pass: a reason here replaces it.

So the order of a flavor's list is its verdict's order, to be read top to bottom, and a guard
that belongs to a defence names it (``defence``), for the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Case = TypeVar("Case")
KINDS = ("refuse", "judge", "on_pass")


@dataclass(frozen=True)
class Guard(Generic[Case]):
    name: str
    check: Callable[[Case], str | None]
    kind: str = "refuse"
    defence: str = ""
    """The catalogue defence this guard is part of ("" = the verdict's own)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"guard {self.name}: kind {self.kind!r} is not one of {KINDS}")


def verdict(guards: Sequence[Guard[Case]], case: Case, passed: str) -> str:
    """The reason ``guards`` give ``case``, read in order (``passed``: the pass's reason)."""
    reason: str | None = None
    for guard in guards:
        if guard.kind == "on_pass":
            if reason == passed:
                reason = guard.check(case) or reason
        elif reason is None:
            reason = guard.check(case) or None
    if reason is None:
        raise ValueError("no guard judged the case: a verdict's list ends with a judgement that always applies")
    return reason


def first(guards: Sequence[Guard[Case]], case: Case, defence: str) -> str | None:
    """The first reason ``defence``'s own refusing guards give ``case`` (what it alone says)."""
    for guard in guards:
        if guard.defence == defence and guard.kind != "judge":
            reason = guard.check(case)
            if reason:
                return reason
    return None
