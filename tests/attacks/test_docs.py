"""tests/attacks/README.md's attack tables are the catalogue entries as tests/attacks/docs.py
renders them, and every defence a row names is one the coding flavor's catalogue registers."""

from __future__ import annotations

import dataclasses

import pytest

from attacks import docs
from attacks.runtime import RUNTIME
from envs.coding.defences import CodingIntegrity
from envs.integrity import catalogue


@pytest.fixture(scope="module")
def readme() -> str:
    return docs.README.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def coding_defences() -> set[str]:
    """The coding flavor's catalogue (envs/coding/defences.py registers it when imported)."""
    assert catalogue.schema_of("coding") is CodingIntegrity
    return {defence.name for defence in catalogue.catalogue("coding")}


def test_the_readme_holds_the_attack_tables_the_catalogue_renders_now(readme):
    stale = docs.stale(readme)
    assert stale == [], (
        f"tests/attacks/README.md's {', '.join(stale)} table differs from the catalogue: run `{docs.COMMAND}`"
    )


def test_a_row_edited_by_hand_or_a_lost_marker_makes_the_readme_stale(readme):
    row = "| 1 | 0 | `runtime-code-swap` |"
    assert row in readme
    assert docs.stale(readme.replace(row, "| 1 | 1 | `runtime-code-swap` |", 1)) == ["attacks-runtime"]
    assert docs.stale(readme.replace("<!-- attacks-sample:end -->", "")) == ["attacks-sample"]


def test_every_defence_an_attack_names_is_in_the_coding_catalogue(coding_defences):
    named = docs.defences_named(docs.runtime_rows())
    assert named, "the runtime attacks name the defences that refuse them"
    assert named <= coding_defences, f"not in envs/coding/defences.py's catalogue: {sorted(named - coding_defences)}"


def test_a_defence_the_catalogue_lacks_is_named_by_the_check(coding_defences):
    row = dataclasses.replace(RUNTIME[0], also=("no-such-defence",))
    assert docs.defences_named([row]) - coding_defences == {"no-such-defence"}
