"""Data without behaviour: what flows between pipeline stages and what the store keeps.

The store's records map one-to-one onto the DuckDB tables (see ``engine/store/duckdb.py``).

Two modules, one namespace (``from engine.models import X`` for any of them): ``records``, what
the store keeps, loaded now; ``pipeline``, what only a run's stages pass around, loaded on the
first read of one of its names. Creating a dataclass costs ~0.5 ms, and the commands that only
read the store (``query``, ``show``, ``report``: bench/bench_cli_startup.py) need none of those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.models.records import (
    PHASES,
    RUN_STATUSES,
    TERMINAL_STATES,
    TEST_STATUSES,
    BuildRecord,
    RunRecord,
    Step,
    TerminalRecord,
    TerminalSnapshot,
    TestResult,
    canonical_json,
    sha256_hex,
    spec_hash_of,
)

if TYPE_CHECKING:  # what mypy sees; at run time ``__getattr__`` below imports them
    from engine.models.pipeline import (
        CapturedSubmission,
        ExecResult,
        GateRole,
        ImageInputs,
        ImageRef,
        RunSpec,
        SetupScript,
        TaskLimits,
        TtySize,
        UpstreamFix,
        Verdict,
    )

_PIPELINE = frozenset(
    {
        "CapturedSubmission",
        "ExecResult",
        "GateRole",
        "ImageInputs",
        "ImageRef",
        "RunSpec",
        "SetupScript",
        "TaskLimits",
        "TtySize",
        "UpstreamFix",
        "Verdict",
    }
)

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module

    def __getattr__(name: str) -> Any:
        """A pipeline class, imported on first use (then a plain global of this module)."""
        if name not in _PIPELINE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from engine.models import pipeline

        globals().update({n: getattr(pipeline, n) for n in _PIPELINE})
        return globals()[name]


__all__ = [
    "PHASES",
    "RUN_STATUSES",
    "TERMINAL_STATES",
    "TEST_STATUSES",
    "BuildRecord",
    "CapturedSubmission",
    "ExecResult",
    "GateRole",
    "ImageInputs",
    "ImageRef",
    "RunRecord",
    "RunSpec",
    "SetupScript",
    "Step",
    "TaskLimits",
    "TerminalRecord",
    "TerminalSnapshot",
    "TestResult",
    "TtySize",
    "UpstreamFix",
    "Verdict",
    "canonical_json",
    "sha256_hex",
    "spec_hash_of",
]
