"""The ``swebench_pro`` task schema: one dataset row, under the official field names.

``fail_to_pass`` and ``pass_to_pass`` are the base ``TaskConfig``'s (the engine stores and
reports them like any task's); the rest is the row as the benchmark publishes it, plus where
crucible finds the official assets and the instance's image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from engine.config.schema import TaskConfig
from envs.coding.schema import AllowTestAware

DEFAULT_REGISTRY = "jefzda/sweap-images"
"""Where the benchmark publishes its instance images (``<registry>:<dockerhub_tag>``)."""


@dataclass
class SwebenchProTaskConfig(TaskConfig):
    instance_id: str = MISSING
    repo: str = MISSING
    base_commit: str = MISSING
    patch: str = MISSING
    """The gold patch: what the ``integration_test`` agent submits."""
    test_patch: str = ""
    problem_statement: str = MISSING
    requirements: str = ""
    interface: str = ""
    repo_language: str = ""
    selected_test_files_to_run: list[str] = field(default_factory=list)
    before_repo_set_cmd: str = ""
    """Only its last line runs at grading (as the official evaluator does): it restores the
    instance's test files, overwriting whatever the patch did to them."""
    dockerhub_tag: str = ""
    assets: str = MISSING
    """A local checkout of the benchmark's public repository: ``run_scripts/<id>/run_script.sh``,
    ``run_scripts/<id>/parser.py``, ``dockerfiles/{base,instance}_dockerfile/<id>/Dockerfile``."""
    registry: str = DEFAULT_REGISTRY
    base_image: str = ""
    """The image the instance image builds FROM; empty = ``<registry>:<dockerhub_tag>``. Offline,
    any locally present image with the instance's /app stands in."""
    workdir: str = "/app"
    test_timeout: float = 3600.0
    """run_script.sh's limit (the official default is an hour)."""
    step_timeout: float = 300.0
    """Each git step's and the parser's limit."""
    allow_test_aware: list[AllowTestAware] = field(default_factory=list)
    """Findings of the test-awareness scan (crucible-strict grading, swe_tasks/strict.py) this
    instance's honest fix needs: ``{rule, path, reason}``, as a coding task's."""
