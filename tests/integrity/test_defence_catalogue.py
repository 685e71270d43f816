"""The defence catalogue (envs/integrity/catalogue.py): the flavors' defences as schema fields
with each mode's value, overridden by name, hashed only where on; the coding verdict as an
ordered list of guards; docs/integrity.md's tables as the catalogue renders them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.config.compose import compose_config, to_typed
from engine.errors import ConfigError
from engine.models import RunSpec
from engine.util.paths import PROJECT_ROOT
from envs.coding import judging
from envs.integrity import docs

SPEC_BEFORE = {
    "none": (
        "dd9a178cd200235925623799a4c911d002882788a6f09ae0c175fffaeabd4d9a",
        {
            "mode": "none",
            "vault": False,
            "uid_wall": False,
            "agent_network": True,
            "drop_protected": False,
            "restore_test_paths": False,
            "canary": False,
            "isolate_verdict": False,
        },
    ),
    "vault": (
        "81edb6bfcb3cd062a7df2facd49d4b853e1b9c27c900f2224342f39bdc4081fd",
        {
            "mode": "vault",
            "vault": True,
            "uid_wall": False,
            "agent_network": True,
            "drop_protected": False,
            "restore_test_paths": True,
            "canary": False,
            "isolate_verdict": False,
        },
    ),
    "strict": (
        "c7a14838ffcfe674939f7aa4e4417da2f53ed5ed591920f245ef42030a663434",
        {
            "mode": "strict",
            "vault": True,
            "uid_wall": True,
            "agent_network": False,
            "drop_protected": True,
            "restore_test_paths": True,
            "canary": True,
            "refuse_test_aware_code": True,
            "differential_rerun": True,
            "isolate_verdict": True,
            "hide_running_test": True,
            "tests_in_one_process": True,
            "randomise_test_names": True,
            "named_results_only": True,
        },
    ),
}
"""The spec of sample/last_page in each mode (agent integration_test, engine_version "0.0-test"),
hashed and stored by the code before the defences were the flavor's (the engine's
IntegrityConfig with 14 flags, the later ones left out while off): computed with that code and
written here, so a stored run keeps its hash (and its place in the evaluation cache)."""


def spec_of(mode: str, *overrides: str) -> RunSpec:
    cfg = to_typed(compose_config(["task=sample/last_page", f"integrity={mode}", "agent=integration_test", *overrides]))
    cfg.task.id = "sample/last_page"
    return RunSpec(
        engine_version="0.0-test",
        task=cfg.task,
        env=cfg.env,
        flavor=cfg.flavor,
        agent=cfg.agent,
        model=None,
        integrity=cfg.integrity,
        runtime=cfg.runtime,
        image={},
        timeouts=cfg.timeouts,
        seed=0,
        attempt=0,
    )


@pytest.mark.parametrize("mode", ["none", "vault", "strict"])
def test_a_coding_spec_stores_and_hashes_as_it_did_before_the_defences_were_the_flavors(mode):
    spec = spec_of(mode)
    assert (spec.spec_hash, spec.to_dict()["integrity"]) == SPEC_BEFORE[mode]


def test_a_stored_spec_types_back_to_the_same_hash_an_omitted_defence_off():
    """A stored spec lists each defence as resolved; one left out (a later one, while off) is
    off, whatever its mode turns on: the regrade of a stored run types it so."""
    from engine.report.regrade import stored_spec

    spec = spec_of("strict", "integrity.defences.randomise_test_names=false")
    stored = spec.to_dict()
    assert "randomise_test_names" not in stored["integrity"]
    again = stored_spec(stored)
    assert again.integrity.randomise_test_names is False and again.spec_hash == spec.spec_hash


@pytest.mark.slow
def test_a_defence_is_overridden_by_name_and_a_misspelt_one_fails_in_one_line_naming_it():
    spec = spec_of("strict", "integrity.defences.canary=false")
    assert spec.integrity.canary is False and spec.integrity.named_results_only is True
    assert "canary" in spec.to_dict()["integrity"]  # one of the defences every spec held: always stored
    with pytest.raises(ConfigError) as caught:
        spec_of("strict", "integrity.defences.canarry=false")
    assert "integrity.defences.canarry" in str(caught.value) and "flavor coding" in str(caught.value)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "build",
            "task=sample/last_page",
            "integrity.defences.canarry=false",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=120,
        env={**os.environ},
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "integrity.defences.canarry" in lines[0], proc.stderr


def test_the_coding_verdict_is_its_guards_in_the_order_the_branches_had():
    assert [(g.name, g.kind, g.defence) for g in judging.VERDICT] == [
        ("diff applies", "refuse", ""),
        ("test-aware code refused", "refuse", "refuse_test_aware_code"),
        ("text-only verdict refused", "refuse", "named_results_only"),
        ("test timeout", "refuse", ""),
        ("canary tampered", "refuse", "canary"),
        ("end marker unbelieved", "refuse", "named_results_only"),
        ("no named results", "refuse", ""),
        ("lists judged", "judge", ""),
        ("plain results judged", "judge", ""),
        ("text judged", "judge", ""),
        ("runtime audit", "on_pass", "refuse_test_aware_code"),
    ]


def test_a_defence_judges_and_explains_a_stored_raw_grade_alone():
    """The canary's own judgement of a raw grade whose canary was reported passed, and its line."""
    from envs.coding.defences import CANARY

    raw = {
        "apply": {"ok": True},
        "test": {"exit_code": 0, "output_tail": "2 passed"},
        "canary": {"nodeid": "tests/test_c.py::test_canary", "rel": "tests/test_c.py"},
        "results": {
            "format": "pytest",
            "tests": [
                {"name": "tests/test_c.py::test_canary", "status": "PASSED"},
                {"name": "tests/test_a.py::test_a", "status": "PASSED"},
            ],
        },
    }
    assert CANARY.judge(raw) == judging.regrade(raw).raw["reason"] and CANARY.judge(raw)
    assert CANARY.judge({**raw, "canary": None}) is None
    assert CANARY.explain(raw) == [f"the canary (raw_grade.canary): {raw['canary']}"]
    assert CANARY.explain({**raw, "canary": None}) == []


def test_docs_integrity_md_holds_the_tables_the_catalogue_renders_now():
    page = (PROJECT_ROOT / "docs" / "integrity.md").read_text()
    for table, body in docs.render().items():
        assert docs.between(page, table) == body, (
            f"docs/integrity.md's {table} table is not the catalogue's: run `python -m envs.integrity.docs --write`"
        )


def test_a_raw_grade_of_any_age_types_without_being_changed():
    """``RawGrade.from_dict`` reads what every version stored (keys missing, keys retired) and
    leaves the stored dict as it was: the stored form stays the dict."""
    import copy

    from envs.integrity.raw import RawGrade

    empty = RawGrade.from_dict({})
    assert (empty.apply.ok, empty.test.exit_code, empty.results.read, empty.scan.refuse) == (False, None, False, False)
    stored = {
        "apply": {"ok": True, "attempts": []},
        "test": {"exit_code": 1, "timed_out": False, "output_tail": "x", "end": {"shell": True}},
        "reason": "tests failed",
        "results": {"format": "pytest", "tests": [{"name": "t::a", "status": "FAILED"}]},
        "isolated": {"separate": True},
        "retired_key": 1,
        "tests_ran_regex": None,
    }
    kept = copy.deepcopy(stored)
    grade = RawGrade.from_dict(stored)
    assert stored == kept and grade.data is stored
    assert grade.apply.ok and grade.test.exit_code == 1 and grade.test.end == {"shell": True} and grade.separate
    assert [(t.name, t.status) for t in grade.results.tests] == [("t::a", "FAILED")] and grade.tests_ran_regex is None


@pytest.mark.slow
def test_every_spec_of_the_store_made_before_types_back_to_its_hash_but_swebench_pros_switches_it_never_read():
    """The fixture store made by the code before the defences were the flavors'
    (tests/report/store_before_33): each coding and sdlc spec, typed through today's schemas
    (as a stored run's regrade types it), hashes as stored; SWE-bench Pro's keeps its integrity
    but the switches of the coding flavor it never read (its spec hash moves: the only one)."""
    import dataclasses
    import json

    import duckdb

    from engine.report.regrade import stored_spec
    from swe_tasks.defences import SwebenchIntegrity

    runs = PROJECT_ROOT / "tests" / "report" / "store_before_33" / "runs.parquet"
    rows = duckdb.sql(f"SELECT flavor, spec_hash, spec FROM '{runs}'").fetchall()
    swebench = {f.name for f in dataclasses.fields(SwebenchIntegrity)} - {"defences"}
    assert {flavor for flavor, _, _ in rows} >= {"coding", "sdlc", "swebench_pro"}
    for flavor, stored_hash, text in rows:
        spec = json.loads(text) if isinstance(text, str) else text
        again = stored_spec(spec)
        if flavor == "swebench_pro":
            assert again.to_dict()["integrity"] == {k: v for k, v in spec["integrity"].items() if k in swebench}
        else:
            assert again.spec_hash == stored_hash, (flavor, spec["integrity"])
