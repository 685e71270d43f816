"""``crucible show`` of a coding run explains its grade as the coding flavor does, without loading
the flavor (issue 38: its grader costs ~0.07 s): ``envs.coding.EXPLAINERS`` names the flavor's
explainer, ``CodingExplainer``, which is the flavor's own ``explain`` (its base class)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from store_records import make_run

from engine.config.plugins import explainer_class
from engine.errors import ConfigError
from engine.models import RunRecord
from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[2]
CODING = "envs.coding.flavor.CodingFlavor"
RAW = {
    "reason": "tests failed",
    "apply": {"ok": False, "output": "error: patch failed\nhunk 2"},
    "test": {
        "exit_code": 1,
        "timed_out": False,
        "command": "pytest -q",
        "output_tail": "FAILED tests/zq9.py::t\n1 failed",
    },
    "results": {"format": "junit", "tests": [{"name": "tests/zq9.py::t", "status": "FAILED"}]},
    "renamed": {"names": {"zq9": "test_hidden"}},
    "rerun_differences": ["tests/test_hidden.py::t: PASSED, then FAILED"],
    "rerun": {"renamed": {"names": {"ab1": "test_hidden"}}, "test": {"end": {"hidden_first": "tests"}}},
    "scan": {"findings": [{"rule": "tree-walk", "path": "src/m.py", "line": 3, "detail": "os.walk"}]},
    "canary": {"skipped": "no"},
    "durations": {"test": 1.5},
}


def coding_run() -> RunRecord:
    return make_run(
        "coding-1",
        spec={"flavor": {"_target_": CODING, "name": "coding"}},
        task_id="sample/last_page",
        agent="noop",
        integrity_requested="strict",
        integrity_obtained="strict",
        reward=0.0,
        raw_grade=RAW,
    )


def test_show_explains_a_coding_run_as_the_flavor_does_without_loading_it(tmp_path, monkeypatch):
    from envs.coding.flavor import CodingFlavor

    home = tmp_path / "home"
    env = {**{k: v for k, v in os.environ.items() if k != "CRUCIBLE_STORE"}, "CRUCIBLE_HOME": str(home)}
    monkeypatch.setenv("CRUCIBLE_HOME", str(home))  # the spool of this store, not the session's
    DuckDBStore().record_run(coding_run())
    script = (
        "import json, sys\n"
        "from engine.cli.main import main\n"
        "code = main(['show', 'coding-1'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('envs.'))), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert "envs.coding.flavor" not in loaded and "envs.coding.grader" not in loaded
    explained = "verdict    " + "\n           ".join(CodingFlavor().explain(RAW))
    assert explained in proc.stdout
    assert "test-aware code (1): tree-walk at src/m.py:3 (os.walk)" in explained
    assert "test_hidden" in explained and "zq9" not in explained  # random names shown as the task's


def test_the_explainer_is_the_coding_flavors_own_explain():
    from envs.coding.explain import CodingExplainer
    from envs.coding.flavor import CodingFlavor

    assert explainer_class(CODING) is CodingExplainer
    assert issubclass(CodingFlavor, CodingExplainer) and CodingFlavor.explain is CodingExplainer.explain
    assert CodingFlavor.explain_omits is CodingExplainer.explain_omits


def test_a_flavor_whose_package_names_no_explainer_is_loaded_whole():
    from envs.sdlc.flavor import SdlcFlavor

    assert explainer_class("envs.sdlc.flavor.SdlcFlavor") is SdlcFlavor


def test_an_explainer_target_outside_crucibles_packages_is_refused():
    with pytest.raises(ConfigError, match="outside crucible's packages"):
        explainer_class("json.decoder.JSONDecoder")
