"""One attack of the catalogues (tests/attacks/catalog.py, ordinary.py, runtime.py): the tool calls a
cheating agent would make, the reward each integrity mode must give it, and what ``strict`` must
drop; ``AttackRunner`` (tests/attacks/harness.py) replays it as a real run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Attack:
    id: str
    threat: str
    summary: str
    steps: tuple | None
    """The tool calls; None = the task's own derived validation (the golden)."""
    expect: tuple[float, float, float]
    """Reward under (none, vault, strict)."""
    dropped: tuple[str, ...] = ()
    """The paths ``strict`` must record as violations and keep out of the graded diff."""
    scoring: str = "trick"
    """``trick`` or ``leak`` (tests/attacks/catalog.py says how each scores)."""
    task: tuple[tuple[str, object], ...] = ()
    """Task settings changed for this run (``(key, value)`` pairs), e.g. a proposed defence."""

    def job(self, mode: str) -> tuple:
        """What ``AttackRunner.run`` takes: (id, mode, steps, task overrides)."""
        return self.id, mode, None if self.steps is None else list(self.steps), dict(self.task)

    def expected(self, mode: str) -> float:
        """The reward it must score under ``mode``."""
        return self.expect[("none", "vault", "strict").index(mode)]
