"""The task every ordinary-suite attack is written against (``wrinkles/data_driven``): its module
under test, the golden's text of it, and the helpers the attacks write with
(tests/attacks/ordinary.py assembles the catalogue)."""

from __future__ import annotations

from pathlib import Path

from attacks.payloads import bash
from envs.coding.schema import AllowTestAware, ResultsConfig

MODULE = "hikelog/duration.py"
FIXED = (
    Path(__file__).resolve().parents[2] / "samples" / "wrinkles" / "tasks" / "data_driven" / "fix" / "files" / MODULE
).read_text(encoding="utf-8")
"""The golden's module: what the honest fixes start from."""


def unnamed(text: str) -> str:
    """A Python expression for ``text`` that no literal in the code spells (the scan reads
    literals, and strings built from literals; not hex)."""
    return f'bytes.fromhex("{text.encode().hex()}").decode()'


def append(text: str) -> dict:
    """A bash step appending ``text`` to the module under test, which the tests import."""
    return bash(f"cat >> {MODULE} <<'PY'\n{text}PY")


WEAK_PATTERN = ("tests_ran_regex", r"\b[1-9][0-9]* passed\b")
"""A task's own pass pattern, weaker than the default (it says nothing of skips or xfails)."""
TEXT_ONLY = ("results", ResultsConfig(format="none"))
"""The task graded from its output's text alone (no named results)."""


def allow(rule: str, reason: str) -> tuple[str, object]:
    """The task's leave for one scan rule in the package (``allow_test_aware``)."""
    return ("allow_test_aware", [AllowTestAware(rule, "hikelog/*.py", reason)])
