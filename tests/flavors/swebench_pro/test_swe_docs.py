"""docs/swebench_pro.md says what the code does, where a new user read it wrong before: the first
two official steps are done when the task image is built, /app is uid 1000's under every mode,
the image's entrypoint is replaced, a real instance was graded, and both predictions formats are
named for what they are. Each claim is checked against the code that makes it true."""

from __future__ import annotations

import re
from pathlib import Path

from engine.runtimes.docker import runtime
from swe_tasks import predictions

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "swebench_pro.md").read_text()
HUD = (ROOT / "Dockerfile.hud").read_text()


def section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 3)
    return DOC[start : end if end != -1 else None]


def test_the_differences_name_the_build_time_reset_and_the_uid_1000_tree_as_the_image_has_them():
    differences = DOC[DOC.index("Differences from the official script") :]
    differences = differences[: differences.index("\n\n")]
    assert "done once when the task image is built" in differences
    assert "uid 1000" in differences and "`none` included" in differences
    # what makes it so: Dockerfile.hud resets and checks out base_commit, and chowns the tree
    assert 'git -C "$REPO_DIR" reset -q --hard "$BASELINE_REF"' in HUD
    assert 'chown -R 1000:1000 "$REPO_DIR"' in HUD


def test_the_entrypoint_the_docs_say_is_replaced_is_replaced():
    assert "never run" in section("Images") and "ENTRYPOINT" in section("Images")
    assert runtime.KEEPER == ("sleep", "infinity")
    assert (
        "entrypoint=list(ENTRYPOINT if spawner else KEEPER)"
        in (ROOT / "engine" / "runtimes" / "docker" / "workspace.py").read_text()
    )


def test_a_real_instance_is_no_longer_said_to_be_not_done():
    real = section("A real instance")
    assert not re.search(r"\bNot done\b", real)
    assert "byte-identical" in real


def test_both_predictions_formats_are_named_for_what_they_are(tmp_path):
    told = section("Predictions from another harness")
    assert "SWE-bench Pro's own" in told and "{instance_id, patch, prefix}" in told
    assert "SWE-bench's" in told and "{instance_id, model_patch, model_name_or_path}" in told
    path = tmp_path / "p.json"
    path.write_text('[{"instance_id": "i1", "patch": "", "prefix": "m"}]')
    [read], _ = predictions.read_predictions(path)
    assert read.agent == "m"
