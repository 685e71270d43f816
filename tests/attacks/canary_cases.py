"""The runs of tests/flavors/coding/test_canary_runs.py against fixtures/good: (steps, task overrides) by id."""

from __future__ import annotations

from attacks.payloads import FORCE_PASS_IN_PROCESS, FORCE_PASS_SPARING_THE_CANARY, FORGE_EXIT_IN_PROCESS, bash


def _append_to_calc(code: str) -> dict:
    return bash(f"cat >> calc.py <<'EOF'\n\n{code}EOF")


CASES: dict[str, tuple[list | None, dict]] = {
    "golden": (None, {}),
    "golden-no-short-summary": (None, {"test_command": "python3 -m pytest -q -rN -p no:cacheprovider {test_files}"}),
    "force-pass": ([_append_to_calc(FORCE_PASS_IN_PROCESS)], {}),
    "forge-exit": ([_append_to_calc(FORGE_EXIT_IN_PROCESS)], {}),
    "spare-the-canary": ([_append_to_calc(FORCE_PASS_SPARING_THE_CANARY)], {}),
}
