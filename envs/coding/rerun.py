"""The differential re-run (``integrity.defences.differential_rerun``, on in ``strict``), and the
random hidden file names every grading under ``randomise_test_names`` has.

The hidden tests run a second time, in a second fresh grading workspace (the engine's
``GradesInMany`` hook), with the hidden change laid down under other names: each test module
and data file the task does not refer to by name gets a fresh random name (the original path
removed), the test functions and classes under random names too where
``randomise_test_names`` is on (envs/coding/testnames.py), and the test modules run in another
order, the hidden ones imported first: by the end plugin before the conftests, where pytest runs
them (envs/coding/verdict/README.md), and by name where a directory is collected in name order
(``FIRST_IN_RERUN``).
The results are mapped back to the task's test ids, and the two verdicts must agree:
code under test that passes only where a hidden test or its data has the name the task gives
it (found by a fixed path, a table keyed on test names, an order it counted on) wins the
first run and loses the re-run, and the run scores 0 as tampered, both verdicts in the raw
grade.

Under ``randomise_test_names`` the first grading (``first_grading``) lays the change down
under random names of its own too, files included (the same files the re-run would rename),
in the task's module order: code under test cannot find a hidden module or its data by the
name the task gives it in either grading, re-run or not.

What is renamed, and why only that: pytest collects test modules by pattern and a test
that globs its data directory finds data by pattern, so their names are free; a file that
something in the test ref names (an import, an ``open("x.json")``) or that a tool finds by a
fixed name (``conftest.py``, ``__init__.py``, ``pytest.ini``, a helper module) keeps its
name, or the honest golden would fail the re-run. Which files are named elsewhere is read on
the host, from the test ref, once per task (``renamable``).
"""

from __future__ import annotations

import functools
import posixpath
import random
import re
import secrets
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import GradeError
from engine.models import TestResult
from envs.coding import hidden as hidden_change
from envs.coding import testnames
from envs.coding.explain import map_back as map_back  # explain's, and the re-run's (judging, tests)
from envs.coding.explain import map_text as map_text
from envs.coding.explain import recorded_names as recorded_names
from envs.coding.hidden import HiddenFile

TAMPERED = "tampered: the differential re-run, under other hidden test names, gave another verdict"
FIXED_NAMES = frozenset(
    {
        "__init__.py",
        "__main__.py",
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "setup.py",
        "pyproject.toml",
        "go.mod",
        "go.sum",
        "Makefile",
        "Cargo.toml",
        "package.json",
    }
)
"""Names a tool finds by themselves: never renamed, whatever mentions them."""
_GO_TEST = re.compile(r"^.*_test\.go$")
FIRST_IN_RERUN = ("0", "A")
"""What leads a re-run's random test module names (``test_0x..``, ``Ax.._test``): they sort before
the task's own lower-case names, so a runner that collects a directory in name order collects and
imports the hidden modules first there, before any visible test module imports the code under
test (a first grading's ``test_x..`` sorts after most of them). Code that, once imported, hunts
for the test modules still to come (to serve them emptied, to write their caches) finds the
hidden ones in one grading and not in the other, and the two verdicts disagree."""


@dataclass(frozen=True)
class Renaming:
    """How one re-run lays the hidden change down."""

    hidden: tuple[HiddenFile, ...]
    """The change under its new names: each renamed file written at its new path, and its
    task path removed (so nothing, not even the agent's diff, sits where the task has it)."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Random stem -> the task's stem (``test_x1f..`` -> ``test_parse``, ``x9a..`` -> ``decimal``):
    what maps a result's name back to the task's test id."""
    seed: int | None = 0
    """The module order's shuffle: ``shuffled`` with it always gives the same order. None:
    the task's order (a first grading's)."""
    functions: Mapping[str, str] = field(default_factory=dict)
    """Random test function or class name -> the task's (``randomise_test_names``,
    envs/coding/testnames.py), mapped back the same way."""
    second: bool = True
    """A differential re-run's (it skips what the first grading recorded, the scan); False:
    the first grading's own random names."""

    def record(self) -> dict:
        out: dict = {"names": dict(self.names), "seed": self.seed}
        if self.functions:
            out["functions"] = dict(self.functions)
        return out

    def ordered(self, modules: Sequence[str]) -> list[str]:
        """The test modules (by their new paths) in the order this grading runs them: shuffled
        by ``seed``, or without one in the task's order (that of the paths they had there)."""
        if self.seed is not None:
            return shuffled(modules, self.seed)
        return sorted(modules, key=self.task_path)

    def task_path(self, path: str) -> str:
        """The path the task gives a file this renaming laid down at ``path``."""
        folder, base = posixpath.split(path)
        stem, ext = _split(base)
        return posixpath.join(folder, self.names[stem] + ext) if stem in self.names else path


def renamable(repo_path: Path, test_sha: str, files: Sequence[HiddenFile], command: str = "") -> frozenset[str]:
    """The paths of ``files`` that may take another name: a test module or a data file (not
    a fixed name, not a helper module, not a symlink) that no other file of the test ref
    names (its file name or stem, as a word, in its text or its path) under the same
    top-level directory, nor the test ``command`` (a module it names instead of
    ``{test_files}``)."""
    command = re.sub(r"\{[a-z_]+\}", " ", command)  # its placeholders (``{test_files}``) name nothing
    return _renamable(
        str(repo_path), test_sha, tuple(f for f in files if _candidate(f) and not _named_in(f.path, command))
    )


def _named_in(path: str, text: str) -> bool:
    return any(_as_word(word).search(text) for word in _words(path))


def _as_word(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])")


def _candidate(item: HiddenFile) -> bool:
    base = posixpath.basename(item.path)
    if item.mode not in ("644", "755") or base in FIXED_NAMES or base.startswith("."):
        return False
    if base.endswith(".py"):  # a helper module is imported by its name; a test module is collected
        return hidden_change.TEST_MODULE.match(base) is not None
    if base.endswith(".go"):  # any .go file of a package compiles whatever its name, tests included
        return _GO_TEST.match(base) is not None
    return True


@functools.lru_cache(maxsize=64)
def _renamable(repo_path: str, test_sha: str, candidates: tuple[HiddenFile, ...]) -> frozenset[str]:
    import git as gitpython

    if not candidates:
        return frozenset()
    words = sorted({w for item in candidates for w in _words(item.path)})
    tops = sorted({item.path.split("/", 1)[0] if "/" in item.path else "" for item in candidates})
    pathspecs = [] if "" in tops else ["--", *tops]
    patterns = [arg for word in words for arg in ("-e", word)]
    try:
        with gitpython.Repo(repo_path) as repo:
            paths = repo.git.ls_tree("-r", "--name-only", "-z", test_sha, *pathspecs).split("\0")
            try:
                out = repo.git.grep("-I", "-w", "-F", "-o", "-z", *patterns, test_sha, *pathspecs)
            except gitpython.GitCommandError as exc:
                if exc.status != 1:  # 1: nothing matched
                    raise
                out = ""
    except gitpython.GitCommandError as exc:
        raise GradeError(
            f"cannot read which hidden files the test ref names: {str(exc.stderr).strip()[-300:]}"
        ) from exc
    named: dict[str, set[str]] = {}
    for line in out.splitlines():
        where, _, word = line.partition("\0")
        path = where.split(":", 1)[1] if ":" in where else where
        named.setdefault(word, set()).add(path)
    # A file named after another counts too (a snapshot ``__snapshots__/test_x.ambr`` of ``test_x.py``).
    for word in words:
        found = _as_word(word)
        named.setdefault(word, set()).update(p for p in paths if p and found.search(p))
    return frozenset(
        item.path for item in candidates if not any(named.get(word, set()) - {item.path} for word in _words(item.path))
    )


def _words(path: str) -> tuple[str, ...]:
    """What would name ``path`` elsewhere: its file name, and its stem when that is a word of
    at least three characters (an import, a case name built from it)."""
    base = posixpath.basename(path)
    stem = _split(base)[0]
    return (base, stem) if len(stem) >= 3 and stem != base else (base,)


def _split(base: str) -> tuple[str, str]:
    """(stem, extension from the first dot): ``cases.tar.gz`` -> (``cases``, ``.tar.gz``)."""
    stem, dot, rest = base.partition(".")
    return stem, dot + rest


def randomise(
    files: Sequence[HiddenFile], free: frozenset[str], test_names: Collection[str] = (), *, second: bool = True
) -> Renaming:
    """A fresh renaming of ``files``: each of ``free`` under a new random name in its own
    directory, keeping the pattern its runner collects it by (``test_*.py``, ``*_test.py``,
    ``*_test.go``) and its extension; and each of ``test_names`` (functions and classes,
    ``testnames.renamable``) under a new random name in the hidden modules. A re-run's
    (``second``) shuffles the module order; a first grading's keeps the task's."""
    files, functions = testnames.randomise(files, test_names)
    out: list[HiddenFile] = []
    names: dict[str, str] = {}
    for item in files:
        if item.path not in free:
            out.append(item)
            continue
        folder, base = posixpath.split(item.path)
        stem, ext = _split(base)
        token = "x" + secrets.token_hex(8)  # a letter first: a valid module name
        if base.startswith("test_"):
            new_stem = f"test_{FIRST_IN_RERUN[0] if second else ''}{token}"
        elif stem.endswith("_test"):
            new_stem = f"{FIRST_IN_RERUN[1] if second else ''}{token}_test"
        else:
            new_stem = token
        names[new_stem] = stem
        out.append(HiddenFile(item.path, hidden_change.DELETE))
        out.append(HiddenFile(posixpath.join(folder, new_stem + ext), item.mode, item.data))
    # Deletions before writes, each sorted by path: the stager's order, whatever the names.
    ordered = sorted(out, key=lambda f: (f.mode != hidden_change.DELETE, f.path))
    seed = secrets.randbelow(1 << 30) if second else None
    return Renaming(hidden=tuple(ordered), names=names, seed=seed, functions=functions, second=second)


def first_grading(files: Sequence[HiddenFile], free: frozenset[str], test_names: Collection[str]) -> Renaming | None:
    """The first grading's renaming under ``randomise_test_names``: each of ``free`` (the files
    the re-run would rename, ``renamable``) and each of ``test_names`` under fresh random names
    of its own, the modules run in the task's order; None when there is nothing to rename."""
    renaming = randomise(files, free, test_names, second=False)
    return renaming if renaming.names or renaming.functions else None


def shuffled(modules: Sequence[str], seed: int) -> list[str]:
    """``modules`` in another order (reversed when a shuffle gives back the same one), so a
    suite that depends on which test module runs first shows it."""
    order = list(modules)
    random.Random(seed).shuffle(order)
    if len(order) > 1 and order == list(modules):
        order.reverse()
    return order


def differences(
    first_reward: float,
    first: Sequence[TestResult],
    second_reward: float,
    second: Sequence[TestResult],
    judged: Collection[str] = (),
) -> list[str]:
    """Where two verdicts disagree: the reward, then each test whose status differs (a test
    only one of them reports counts as MISSING in the other), at most 10 named. ``judged``:
    the task's listed tests, when it has lists; only those are compared, since no other test's
    status moves the verdict (a lock leaves its flaky tests out of the lists: they may differ)."""
    found = [] if first_reward == second_reward else [f"reward {first_reward:g} vs {second_reward:g}"]
    a = {t.name: t.status for t in first if not judged or t.name in judged}
    b = {t.name: t.status for t in second if not judged or t.name in judged}
    changed = [
        f"{name} {a.get(name, 'MISSING')} vs {b.get(name, 'MISSING')}"
        for name in sorted(a.keys() | b.keys())
        if a.get(name) != b.get(name)
    ]
    return found + changed[:10] + ([f"and {len(changed) - 10} more"] if len(changed) > 10 else [])
