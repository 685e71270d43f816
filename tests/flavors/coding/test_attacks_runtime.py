"""The attacks that spell every name at run time (tests/attacks/runtime.py) as real runs of
``wrinkles/data_driven`` on Docker (an ordinary suite: its tests import the code under test into
pytest's process): each wins under ``none`` with no scanner finding, and scores 0 under
``strict``, refused by the runtime audit's rule the catalogue names, with the test it happened in
and the caller's file and line; the golden and an honest alternative still score 1.0 under strict
with no audit finding. The same payloads in a host pytest (and a unittest-style suite):
test_runtime_audit.py."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from attacks.catalog import Attack
from attacks.harness import AttackRunner, why
from attacks.ordinary import TASK, bash
from attacks.runtime import RUNTIME, RuntimeAttack
from attacks.runtime_host import HONEST_DYNAMIC, MODULES_TO_COME, ORDER_TASK

from envs.coding import audit

ROOT = Path(__file__).resolve().parents[3]
MODES = ("none", "strict")
CONTROLS = [Attack("control-golden", "control", "the task's golden", None, (1.0, 1.0, 1.0))]


@pytest.fixture(scope="module")
def records(base_image):
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("CRUCIBLE_CONFIG_PATH", str(ROOT / "tests" / "conf"))
        runner = AttackRunner(task=TASK, modes=MODES)
        honest = Attack(
            "honest-dynamic",
            "control",
            "the golden with a helper class, computed __lt__, a namedtuple, a dynamic import and logging",
            (bash(f"cat > hikelog/duration.py <<'PY'\n{HONEST_DYNAMIC}PY"),),
            (1.0, 1.0, 1.0),
        )
        jobs = [a.job(mode) for a in [*CONTROLS, honest, *(r.attack for r in RUNTIME)] for mode in MODES]
        return asyncio.run(runner.run(jobs, concurrency=3))


def _record(records, attack_id: str, mode: str):
    record = records[(attack_id, mode)]
    assert record.status == "completed", f"{attack_id} [{mode}]: {record.error_phase}: {record.error}"
    return record


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("attack", RUNTIME, ids=[r.attack.id for r in RUNTIME])
def test_an_attack_spelling_its_names_at_run_time_wins_under_none_and_is_refused_by_the_audit_under_strict(
    records, attack: RuntimeAttack
):
    plain = _record(records, attack.attack.id, "none")
    assert plain.reward == 1.0, why(plain)
    assert not plain.raw_grade["scan"]["findings"], plain.raw_grade["scan"]  # no literal name to read
    assert "audit" not in plain.raw_grade["test"]  # none asks for no audit
    strict = _record(records, attack.attack.id, "strict")
    assert strict.reward == 0.0, why(strict)
    assert not strict.raw_grade["scan"]["findings"], strict.raw_grade["scan"]
    assert strict.raw_grade["reason"].startswith("tampered: runtime audit: "), why(strict)
    refused, _ = audit.judge(strict.raw_grade["test"]["audit"], [], strict.raw_grade["audit_scope"])
    found = [f for f in refused if f.rule == attack.rule]
    assert found and all(f.path and f.where for f in found), [f.describe() for f in refused]


@pytest.mark.docker
@pytest.mark.slow
def test_the_golden_and_an_honest_alternative_score_one_under_strict_with_the_audits_record_kept(records):
    for attack_id in ("control-golden", "honest-dynamic"):
        record = _record(records, attack_id, "strict")
        assert record.reward == 1.0, why(record)
        kept = record.raw_grade["test"]["audit"]
        assert "events" in kept and audit.findings(kept) == [], kept  # the record is there, nothing found


@pytest.mark.docker
@pytest.mark.slow
def test_test_modules_still_to_come_served_emptied_win_under_none_and_the_rerun_importing_hidden_first_disagrees(
    base_image,
):
    """Ordering: the re-run collects and imports the hidden module first (its random name sorts
    first), so code under test that hunts for the test modules still to come finds no hidden one
    there; its hidden tests run and fail, the first grading's pass, and strict scores 0 with the
    disagreement named (the audit refuses the finder too)."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("CRUCIBLE_CONFIG_PATH", str(ROOT / "tests" / "conf"))
        runner = AttackRunner(task=ORDER_TASK, modes=MODES)
        records = asyncio.run(runner.run([MODULES_TO_COME.attack.job(mode) for mode in MODES], concurrency=2))
    plain = _record(records, MODULES_TO_COME.attack.id, "none")
    assert plain.reward == 1.0, why(plain)
    strict = _record(records, MODULES_TO_COME.attack.id, "strict")
    assert strict.reward == 0.0, why(strict)
    differences = strict.raw_grade.get("rerun_differences") or []
    assert any("test_slugify.py::" in d and "PASSED vs FAILED" in d for d in differences), why(strict)
    assert strict.raw_grade["rerun"]["test"]["end"]["hidden_first"] == "conftests", why(strict)  # asked, and done
    assert "hidden_first" not in strict.raw_grade["test"]["end"]  # the first grading keeps the task's order


LOCAL = ("replaced-thread", "patched-runtest", "aware-getattr-stack", "unreadable-rot13")
"""One attack of each class, on ``runtime=local`` (strict only: never as root on the host)."""


@pytest.mark.slow
def test_an_attack_of_each_class_is_refused_by_the_audit_under_strict_on_the_local_runtime():
    from attacks.runtime import BY_ID
    from flavors.coding.test_attacks_local import WALL_PROBE, _walls_hold

    from engine.errors import IntegrityUnavailable

    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("CRUCIBLE_CONFIG_PATH", str(ROOT / "tests" / "conf"))
        try:
            runner = AttackRunner(task=TASK, modes=("strict",), runtime="local")
        except IntegrityUnavailable as exc:
            if os.environ.get("CI") == "true":
                pytest.fail(str(exc))
            pytest.skip(str(exc))
        first = asyncio.run(runner.run([WALL_PROBE, CONTROLS[0].job("strict")], concurrency=2))
        _walls_hold(first[("wall-probe", "strict")])
        records = asyncio.run(runner.run([BY_ID[i].attack.job("strict") for i in LOCAL], concurrency=2))
    golden = _record(first, "control-golden", "strict")
    assert golden.reward == 1.0 and audit.findings(golden.raw_grade["test"]["audit"]) == [], why(golden)
    for attack_id in LOCAL:
        record = _record(records, attack_id, "strict")
        assert record.reward == 0.0, why(record)
        assert record.raw_grade["reason"].startswith("tampered: runtime audit: "), why(record)
        refused, _ = audit.judge(record.raw_grade["test"]["audit"], [])
        assert BY_ID[attack_id].rule in {f.rule for f in refused}, [f.describe() for f in refused]
