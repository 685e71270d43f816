"""The coding flavor's task schema: three-branch repos graded by a test command.

Registered by the flavor (``CodingFlavor.task_schema``), so every ``task.*`` key of a
coding task is validated at compose time, by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.config.schema import MISSING, TaskConfig


@dataclass
class TaskRefs:
    """The three-branch convention; any ref may be overridden per task."""

    baseline: str = "${..name}_baseline"
    test: str = "${..name}_test"
    golden: str = "${..name}_golden"


@dataclass
class ResultsConfig:
    """How the test run's named results are read (a result source, ``envs/integrity/sources/``)."""

    format: str = "auto"
    """``pytest``: a JUnit XML report pytest writes outside the repo; ``go``: the ``go test
    -json`` event stream (the test command's output); ``parser``: ``parser`` writes the
    SWE-bench Pro format; ``none``: no named results (the exit code and ``tests_ran_regex``
    decide); ``auto``: ``pytest`` when the test command runs pytest, ``go`` when it runs
    ``go test -json``, else ``none``."""
    parser: str = ""
    """For ``format=parser``: a shell command run as root in the grading workspace after the
    tests; ``{stdout}`` and ``{stderr}`` become files holding the test command's output (all
    of it in ``{stdout}``, ``{stderr}`` empty: the two are one stream), and it writes
    ``{"tests": [{"name", "status"}]}`` to ``{output}``."""


@dataclass
class AllowTestAware:
    """One kind of finding of the test-awareness scanner (envs/integrity/scan/) that the
    task's honest code needs, where, and why."""

    rule: str = MISSING
    """A scanner rule (``envs.integrity.scan.model.RULES``)."""
    path: str = MISSING
    """A path pattern (fnmatch) of the files where it is allowed."""
    reason: str = MISSING
    """Why an honest fix does this here (required: an allowance nobody can explain is a hole)."""


@dataclass
class CodingTaskConfig(TaskConfig):
    repo: str = MISSING
    """A git URL, a local path, or ``generated://NAME`` (built by samples/NAME/build_repo.py)."""
    refs: TaskRefs = field(default_factory=TaskRefs)
    hidden_tests: list[str] = field(default_factory=list)
    """A filter (git pathspec-like globs) over the hidden change, which is by default EVERYTHING
    between the baseline and the test ref: added, modified, deleted, renamed, binary and mode
    changes, applied in grading after the agent's diff. Empty = the whole change."""
    test_command: str = MISSING
    """Shell command run in the repo dir; ``{test_files}`` (optional) becomes the hidden
    change's test modules that exist at the test ref."""
    results: ResultsConfig = field(default_factory=ResultsConfig)
    test_paths: list[str] | None = None
    """Paths that belong to the task, not the agent (globs; ``**/`` matches any depth): in
    grading they are restored from the test ref and the agent's changes to them recorded as
    violations. None = pytest's defaults (``envs/coding/testpaths.py``); [] = only the
    hidden change's own paths."""
    allow_test_aware: list[AllowTestAware] = field(default_factory=list)
    """Findings of the test-awareness scanner this task's honest fixes need (a worker thread
    started at import, an exit hook): under ``strict`` any other finding fails the run."""
    isolated_verdict: bool = False
    """The hidden tests never import the code under test: they call ``crucible_probe``
    scenarios, which return plain data. Under an integrity mode that isolates the verdict
    (``strict``) each scenario runs in its own interpreter as the agent's uid and pytest runs
    outside the repo as another uid with the grader's own options (``test_command`` unused),
    so no code under test can forge the verdict (envs/coding/isolated.py); otherwise
    ``test_command`` runs them in the repo and the scenarios are called in-process."""
    prompt_from_commit: str = field(default="", metadata={"spec": "omit_default"})
    """Written by ``crucible task new`` when the prompt is the fix's commit message (no
    ``--prompt-file``): the sha256 of that prompt. While ``prompt`` still hashes to it,
    ``crucible check`` says the prompt is still the commit message (which usually names the
    fix); editing the prompt ends that, and the key may then be deleted. Never changes a
    verdict, so the spec leaves it out while empty (every other task keeps its spec hash)."""
    system_packages: list[str] = field(default_factory=list)
    install: str = ""
    workdir: str = "/app"
    protected_paths: list[str] = field(default_factory=list)
    test_timeout: float = 600.0
    tests_ran_regex: str = (
        r"(?m)^(?!.*\b[1-9][0-9]* (?:failed|skipped|deselected|xfailed|xpassed|errors?)\b)"
        r".*\b[1-9][0-9]* passed\b"
    )
    """Output must match this for a passing exit code to count: no tests run scores 0, and so
    does a summary that also counts skipped, deselected, xfailed or errored tests (code under
    test calling pytest.skip() where it would fail must not pass). A task whose hidden tests
    legitimately skip sets its own pattern."""
