"""What the coding flavor says of a raw grade (``Flavor.explain``), importable without the flavor.

``crucible show`` explains a stored run's grade; importing ``envs.coding.flavor`` for that would
load the whole grader (the scanner, the judging, the re-run: ~0.07 s of a ~0.1 s command). So the
explainer lives here, on the standard library alone, as ``CodingExplainer``, the base class of
``CodingFlavor``: the flavor's ``explain`` is this one, and ``envs.coding.EXPLAINERS`` names it for
``engine.config.plugins.explainer_class``. The random-name helpers the explainer needs
(``recorded_names``, ``map_back``, ``map_text``) live here too; ``envs.coding.rerun`` re-exports them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

EXPLAINED = frozenset({"reason", "test", "apply", "results", "renamed", "rerun", "rerun_differences", "scan"})
"""The raw-grade keys ``explain`` shows in lines of their own; the others go on its ``other fields`` line."""


def recorded_names(record: Mapping) -> dict[str, str]:
    """Every random name a grading's ``renamed`` record holds -> the task's: what ``map_back``
    takes (file stems and, where there are some, test names)."""
    return {**(record.get("names") or {}), **(record.get("functions") or {})}


def map_back(tests: Sequence[Mapping], names: Mapping[str, str]) -> list[dict]:
    """Named results (``{name, status}``) with every random stem put back as the task's."""
    return [{**t, "name": map_text(str(t["name"]), names)} for t in tests]


def map_text(text: str, names: Mapping[str, str]) -> str:
    """``text`` (a test id, the test output) with every random name put back as the task's."""
    if not names:
        return text
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m.group(0)], text)


class CodingExplainer:
    """The coding flavor's ``explain`` and nothing else; constructed as ``CodingFlavor`` is."""

    explain_omits: ClassVar[Mapping[str, str]] = {"durations": "seconds each grading step took: no part of the verdict"}
    """Raw-grade keys ``explain`` leaves out, with why (the flavor self-check holds it to the rest)."""

    def __init__(self, name: str = "coding") -> None:
        self.name = name

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        """The reason, the diff's apply result and the test command's exit code and last
        lines: what a task author needs to see why a golden failed."""
        test = raw.get("test") or {}
        apply = raw.get("apply") or {}
        facts = {
            "reason": raw.get("reason"),
            "test_exit_code": test.get("exit_code"),
            "test_timed_out": test.get("timed_out"),
            "apply_ok": apply.get("ok"),
        }
        lines = [json.dumps({k: v for k, v in facts.items() if v is not None}, sort_keys=True)]
        if not apply.get("ok", True) and apply.get("output"):
            lines += ["apply output:", *str(apply["output"]).strip().splitlines()[-8:]]
        named = raw.get("results") or {}
        if named.get("error"):
            lines.append(f"named test results ({named.get('format')}): {named['error']}")
        read = map_back(named.get("tests") or [], recorded_names(raw.get("renamed") or {}))
        not_passed = [t for t in read if t.get("status") != "PASSED"]
        if not_passed:
            lines.append(
                f"tests not passed ({len(not_passed)} of {len(named.get('tests') or [])}): "
                + ", ".join(f"{t['name']} {t['status']}" for t in not_passed[:8])
            )
        differences = raw.get("rerun_differences") or []
        if differences:
            second = raw.get("rerun") or {}
            names = (second.get("renamed") or {}).get("names") or {}
            placed = ((second.get("test") or {}).get("end") or {}).get("hidden_first")
            lines.append(
                f"differential re-run (hidden files renamed: {', '.join(sorted(names.values())) or 'none'}"
                + (f"; imported first, before the {placed}" if placed in ("conftests", "tests") else "")
                + ") disagrees: "
                + "; ".join(differences[:5])
            )
        findings = (raw.get("scan") or {}).get("findings") or []
        if findings:
            from envs.integrity.scan.model import Finding  # a run with findings only

            lines.append(
                f"test-aware code ({len(findings)}): " + "; ".join(Finding(**f).describe() for f in findings[:5])
            )
        rest = {
            k: v
            for k, v in sorted(raw.items())
            if k not in EXPLAINED and k not in self.explain_omits and v not in (None, "", [], {})
        }  # every other defence's record, where it holds anything
        if rest:
            lines.append(
                "other fields: " + "; ".join(f"{k} {json.dumps(v, sort_keys=True)[:160]}" for k, v in rest.items())
            )
        # Random test names (randomise_test_names) shown as the task's, as the results are.
        tail = map_text(str(test.get("output_tail") or ""), recorded_names(raw.get("renamed") or {})).strip()
        if tail:
            lines += [f"test output (last lines of `{test.get('command', '')}`):", *tail.splitlines()[-12:]]
        return lines
