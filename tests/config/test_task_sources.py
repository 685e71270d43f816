"""Task sources (engine/config/sources.py): a set's options from a plug-in, not a YAML file
each, composed like files, selected by glob, and never answered stale from the evaluation
cache when the data behind them changes. The plug-in here is the toy flavor's (tests/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.util.paths import PROJECT_ROOT

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def toyset(tmp_path, monkeypatch):
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"q1": ["What is six times seven?", "42"], "q2": ["Two plus two?", "4"]}))
    conf = tmp_path / "conf" / "task" / "toyset"
    conf.mkdir(parents=True)
    (conf / "_source.yaml").write_text(f"_target_: toy_flavor.source.ToySource\nquestions: {questions}\n")
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", f"{TESTS / 'conf'}:{tmp_path / 'conf'}")
    monkeypatch.setenv("CRUCIBLE_PLUGIN_PACKAGES", "toy_flavor")
    monkeypatch.syspath_prepend(str(TESTS))
    return questions


def test_a_sources_options_compose_like_files_and_a_changed_source_is_a_new_composition(toyset):
    from engine.config.compose import combinations, compose_config, to_typed

    assert combinations(["task=glob(toyset/*)"]) == [["task=toyset/q1"], ["task=toyset/q2"]]
    assert to_typed(compose_config(["task=toyset/q1"])).task.question == "What is six times seven?"
    toyset.write_text(json.dumps({"q1": ["What is seven times six?", "42"]}))
    assert to_typed(compose_config(["task=toyset/q1"])).task.question == "What is seven times six?"
    assert combinations(["task=glob(toyset/*)"]) == [["task=toyset/q1"]]


def test_a_source_outside_the_allowed_packages_is_refused_in_one_line(toyset, monkeypatch):
    import os

    env = {**os.environ, "CRUCIBLE_PLUGIN_PACKAGES": "", "PYTHONPATH": str(TESTS)}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "build", "task=toyset/q1", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "toy_flavor.source.ToySource' is outside crucible's packages" in lines[0]


def test_a_task_a_sources_set_lacks_says_so_in_one_line_even_from_a_source_that_cannot_say_why(toyset):
    """The engine's own words where the source has no ``missing``: the set and the source named."""
    import os

    env = {**os.environ, "PYTHONPATH": str(TESTS)}

    def one_line(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli", *args],
            capture_output=True,
            text=True,
            cwd=PROJECT_ROOT,
            env=env,
            timeout=120,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        return lines[0]

    assert one_line("build", "task=toyset/q9", "--dry-run").endswith(
        "unknown task toyset/q9: task set toyset has no q9: its source (toy_flavor.source.ToySource) makes no option q9"
    )
    toyset.write_text("{}")
    assert one_line("build", "task=toyset/q1", "--dry-run").endswith(
        "unknown task toyset/q1: task set toyset is empty: its source (toy_flavor.source.ToySource) makes no options"
    )
