"""Which of the agent's changes ``strict`` drops from the graded diff, and why.

The grader runs the hidden tests on the agent's diff, so anything in the diff that the test
run executes or reads *besides the code under test* is an injection point. A change is
protected (dropped and recorded as a violation) when it touches:

1. a hidden test, anything below its path, or a path that replaces one of its directories
   (a file or symlink where ``tests/`` was);
2. a glob of the task's own ``protected_paths``;
3. test-runner configuration, interpreter start-up files, bytecode, extension modules or
   package metadata, at any depth (``patch.PYTEST_PROTECTED``);
4. the ``__init__.py`` of a hidden test's directory named like a test directory
   (``tests/__init__.py`` runs when the hidden test is imported, like a conftest);
5. a NEW module that shadows one the test run imports: ``NAME.py``, ``NAME/__init__.py`` or
   ``NAME/__main__.py`` created in an import root — the repo root (``python -m`` puts the
   working directory first on ``sys.path``) or a hidden test's directory or one of its
   parents (pytest's rootdir-based import inserts one of them) — where NAME is a standard
   library module, part of the pytest stack, the test command's ``-m`` module, or a hidden
   test's own module name (a package beside the hidden test would be imported instead of
   it). Only new files: a repo that already ships such a module keeps its changes to it;
6. a repo file the test command names (``bash tests/run.sh``: the runner itself).

Why name rules and not running the tests with ``python -I``/``-P``: the test command is the
task's (official scripts included), and many projects need the working directory on
``sys.path`` to import themselves; dropping the few files that could stand in for the
runner's modules keeps every honest diff working. What this cannot stop — the code under
test itself subverting the test process it runs in — is in docs/integrity.md.
"""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from envs.coding.schema import CodingTaskConfig
from envs.integrity import patch

RUNNER_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "packaging",
        "attr",
        "attrs",
        "tomli",
        "exceptiongroup",
        "xdist",
        "hypothesis",
        "_hypothesis_pytestplugin",
        "coverage",
        "pytest_cov",
        "nose",
        "mock",
        "six",
        "setuptools",
        "pkg_resources",
        "_distutils_hack",
        "importlib_metadata",
        "zipp",
        "typing_extensions",
    }
)
"""The test runner's own modules and what it imports: a new top-level one would replace it."""

SHADOWED = frozenset(sys.stdlib_module_names - {"test"}) | RUNNER_MODULES
"""Module names a new top-level module must not take (``test``, the CPython regression suite,
is left out: no test run imports it, and many repos have a ``test/`` directory)."""

SCRIPT_SUFFIXES = (".sh", ".bash", ".py", ".pl", ".rb", ".js", ".mjs", ".cjs", ".ts")


@dataclass(frozen=True)
class Policy:
    """The protection rules for one task, built once by ``Policy.for_task``."""

    hidden_tests: tuple[str, ...]
    patterns: tuple[str, ...]
    import_roots: tuple[str, ...]
    test_packages: tuple[str, ...]
    shadowed: frozenset[str]
    command_files: tuple[str, ...]

    @classmethod
    def for_task(cls, task: CodingTaskConfig, hidden_paths: Sequence[str] = ()) -> Policy:
        """``hidden_paths``: the hidden change's paths (what grading writes); without them,
        the task's ``hidden_tests`` as a list of files (a caller that has no change read)."""
        source = hidden_paths or task.hidden_tests or ()
        hidden = tuple(str(p).strip("/") for p in source)
        extra = tuple(str(p) for p in task.protected_paths or ())
        roots = {""} | {d for h in hidden for d in _parents(h)}
        test_dirs = sorted(d for d in roots if d and "test" in posixpath.basename(d).lower())
        command = str(task.test_command or "")
        return cls(
            hidden_tests=hidden,
            patterns=(*extra, *patch.PYTEST_PROTECTED),
            import_roots=tuple(sorted(roots)),
            test_packages=tuple(f"{d}/__init__.py" for d in test_dirs),
            shadowed=SHADOWED | _run_modules(command) | {_module_name(h) for h in hidden},
            command_files=_command_files(command, str(task.workdir or "/app")),
        )

    def reason(self, path: str, *, new: bool = False) -> str | None:
        """Why ``path`` is protected (``new``: the diff creates it), or None if it is not."""
        for hidden in self.hidden_tests:
            if path == hidden or path.startswith(hidden + "/"):
                return "hidden test"
            if hidden.startswith(path + "/"):
                return "replaces a directory of the hidden tests"
        if path in self.command_files:
            return "named by the test command"
        if path in self.test_packages:
            return "test package __init__ (runs when the hidden tests are imported)"
        if patch.is_protected(path, self.patterns):
            return "test-runner configuration, start-up file, bytecode or package metadata"
        if new and (module := self._shadowed_module(path)):
            return f"new module shadowing '{module}' on the test run's import path"
        return None

    def _shadowed_module(self, path: str) -> str | None:
        parent, name = posixpath.split(path)
        if name.endswith(".py") and parent in self.import_roots and name[:-3] in self.shadowed:
            return name[:-3]
        if name in ("__init__.py", "__main__.py") and parent:
            root, package = posixpath.split(parent)
            if root in self.import_roots and package in self.shadowed:
                return package
        return None

    def split(self, chunks: list[patch.FileChunk]) -> tuple[list[patch.FileChunk], list[str]]:
        """(the chunks kept, the sorted protected paths of the chunks dropped)."""
        kept, violations = [], set()
        for chunk in chunks:
            created = _created_paths(chunk)
            hits = [p for p in chunk.paths if self.reason(p, new=p in created)]
            if hits:
                violations.update(hits)
            else:
                kept.append(chunk)
        return kept, sorted(violations)


DEFAULT_TEST_PATHS = (
    "tests/",
    "testdata/",  # a directory of that name at any depth (not test/ or testing/:
    # django/test/ and numpy/testing/ are library code a fix may have to change)
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",  # pytest's own
    "*_test.go",
)
"""The task's test paths when it names none (``task.test_paths: null``): pytest's default
module names, its conftest and ini file, the usual test directories, Go's test files. The
pytest sections of pyproject.toml, setup.cfg and tox.ini are not split out of their files:
``strict`` drops those files whole (``patch.PYTEST_PROTECTED``)."""


def test_path_patterns(task: CodingTaskConfig) -> tuple[str, ...]:
    return DEFAULT_TEST_PATHS if task.test_paths is None else tuple(str(p) for p in task.test_paths)


def split_test_paths(
    chunks: list[patch.FileChunk], task: CodingTaskConfig, hidden_paths: Sequence[str]
) -> tuple[list[patch.FileChunk], list[str]]:
    """(the chunks kept, the sorted paths of the chunks dropped): a chunk that touches a path
    of the hidden change or one of the task's test paths is the agent writing the task's
    tests, which grading restores from the test ref."""
    hidden = frozenset(hidden_paths)
    patterns = test_path_patterns(task)
    kept, dropped = [], set()
    for chunk in chunks:
        hits = [p for p in chunk.paths if p in hidden or patch.is_protected(p, patterns)]
        if hits:
            dropped.update(hits)
        else:
            kept.append(chunk)
    return kept, sorted(dropped)


def split_protected(
    chunks: list[patch.FileChunk], task: CodingTaskConfig, hidden_paths: Sequence[str] = ()
) -> tuple[list[patch.FileChunk], list[str]]:
    """The chunks ``strict`` grades and the protected paths it drops (the run's violations)."""
    return Policy.for_task(task, hidden_paths).split(chunks)


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _module_name(path: str) -> str:
    name = posixpath.basename(path)
    return name[:-3] if name.endswith(".py") else name


def _created_paths(chunk: patch.FileChunk) -> set[str]:
    """The paths a chunk brings into existence: a new file, or the target of a rename."""
    created = {chunk.new_path} if chunk.old_path != chunk.new_path else set()
    for line in chunk.data.split(b"\n")[1:]:
        if line.startswith((b"@@", b"GIT binary patch", b"--- ", b"+++ ")):
            break
        if line.startswith(b"new file mode "):
            created.add(chunk.new_path)
    return created


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command.replace("{test_files}", ""))
    except ValueError:  # unbalanced quotes: the task's problem, not a reason to protect nothing
        return command.split()


def _run_modules(command: str) -> frozenset[str]:
    """Top-level names of the modules the command runs with ``-m``."""
    tokens = _tokens(command)
    return frozenset(tokens[i + 1].split(".")[0] for i, t in enumerate(tokens[:-1]) if t == "-m")


def _command_files(command: str, workdir: str) -> tuple[str, ...]:
    """Repo paths the test command names (its runner scripts), relative to the repo."""
    prefix = workdir.rstrip("/") + "/"
    found = []
    for token in _tokens(command):
        if token.startswith("-") or "=" in token or any(c in token for c in "$`;|&<>*?"):
            continue
        if token.startswith(prefix):
            token = token[len(prefix) :]
        elif token.startswith("/"):
            continue
        token = posixpath.normpath(token)
        if token.startswith("..") or token == ".":
            continue
        if "/" in token or token.endswith(SCRIPT_SUFFIXES) or fnmatch.fnmatchcase(token, "[Mm]akefile"):
            found.append(token)
    return tuple(found)


__all__ = ["Policy", "RUNNER_MODULES", "SHADOWED", "split_protected"]
