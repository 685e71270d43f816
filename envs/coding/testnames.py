"""Random names for the hidden tests' functions and classes (``integrity.defences.randomise_test_names``).

Code under test that runs in pytest's process can ask who is calling (a frame's function
name, a class's name) and answer a hidden test it recognises by the name the task gives it.
Under this flag each grading writes the hidden pytest modules with every test function,
test method and test class that can safely take another name under a fresh random one that
pytest still collects (``test_x<hex>``, ``TestX<hex>``); the named results are mapped back
to the task's test ids (``rerun.map_back``), so verdicts, ``test_results`` rows and the
task's lists are unaffected. A parametrised test keeps its parameter suffix (``[1-2]``): only
the name before it changes.

What is renamed is decided soundly or not at all:
- the rewrite reads each module with ``tokenize`` and ``ast``: an identifier is renamed only
  where every one of its name tokens in the module is a ``def``/``class`` name or a plain
  name (``ast.Name``), so no attribute (``self.test_x``), parameter, keyword, import,
  ``global`` statement or f-string expression (3.11's tokens do not show them) is involved,
  and no string in the module names it (``getattr(self, "test_x")``, ``-k``-like lookups,
  ``usefixtures("...")``, docstrings);
- it must have at least one definition pytest collects (``test*`` at module level; ``test*``
  methods of a ``Test*`` class or of a ``...TestCase`` subclass; ``Test*`` classes and
  ``...TestCase`` subclasses at module level or nested in such a class);
- nothing else in the test ref names it (a helper, a conftest, a visible test module, an
  ini file, a snapshot, a module that does not parse; nor a file's path: data found by the
  running test's name), nor does the test command (node ids): ``renamable``, read on the host
  from the test ref once per task. Nothing at all is renamed where tests are selected by parts
  of their names (``-k`` in the command or an ini file's ``addopts``) or collected by other
  patterns (``python_functions``, ``python_classes``).

The same identifier gets the same new name in every hidden module of one grading, so a test
class inheriting methods from another module still overrides what it overrode. Line and
column positions never move (tracebacks read the same).
"""

from __future__ import annotations

import ast
import functools
import io
import posixpath
import re
import secrets
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from engine.errors import GradeError
from envs.coding import hidden as hidden_change
from envs.coding.hidden import HiddenFile

_FSTRING_MIDDLE = getattr(tokenize, "FSTRING_MIDDLE", None)


def is_module(item: HiddenFile) -> bool:
    """A hidden pytest module this may rewrite: a plain file named as pytest collects it."""
    return (
        item.mode in ("644", "755")
        and item.path.endswith(".py")
        and hidden_change.TEST_MODULE.match(posixpath.basename(item.path)) is not None
    )


def _lines(text: str) -> list[str]:
    return io.StringIO(text, newline="").readlines()


def _decode(data: bytes) -> tuple[str, str] | None:
    """The module's text and its encoding, or None where it cannot be read as Python source."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), encoding
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None


def _tokens(text: str) -> list[tokenize.TokenInfo] | None:
    lines = iter(_lines(text))
    try:
        return list(tokenize.generate_tokens(lambda: next(lines, "")))
    except (tokenize.TokenError, SyntaxError):
        return None


class _Module:
    """One hidden module as the rewrite sees it: what it defines, what it may rename."""

    def __init__(self, text: str) -> None:
        self.text = text
        tree = ast.parse(text)
        tokens = _tokens(text)
        if tokens is None:
            raise SyntaxError("does not tokenize")
        self.positions = [(tok.string, tok.start) for tok in tokens if tok.type == tokenize.NAME]
        """Where each name token is: all the rewrite needs of the tokens."""
        self.collected: set[str] = set()
        self.defined: dict[str, int] = {}
        self.named: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined[node.name] = self.defined.get(node.name, 0) + 1
            elif isinstance(node, ast.Name):
                self.named[node.id] = self.named.get(node.id, 0) + 1
        _collect(tree.body, self.collected)
        self.name_tokens: dict[str, int] = {}
        self.string_words: set[str] = set()
        """Every word any string literal of the module spells."""
        for tok in tokens:
            if tok.type == tokenize.NAME:
                self.name_tokens[tok.string] = self.name_tokens.get(tok.string, 0) + 1
            elif tok.type == tokenize.STRING or (_FSTRING_MIDDLE is not None and tok.type == _FSTRING_MIDDLE):
                self.string_words.update(_WORDS.findall(tok.string))

    def mentions(self, name: str) -> bool:
        return name in self.name_tokens or name in self.string_words

    def safe(self, name: str) -> bool:
        """Every name token of ``name`` is a definition or a plain name, and no string names it."""
        plain = self.defined.get(name, 0) + self.named.get(name, 0)
        return self.name_tokens.get(name, 0) == plain and name not in self.string_words

    def rewrite(self, tokens_for: Mapping[str, str]) -> str:
        lines = _lines(self.text)
        # Right to left within a line, so earlier columns stay where the tokenizer put them.
        for name, (row, col) in sorted(
            ((n, at) for n, at in self.positions if n in tokens_for), key=lambda found: found[1], reverse=True
        ):
            line = lines[row - 1]
            lines[row - 1] = line[:col] + tokens_for[name] + line[col + len(name) :]
        return "".join(lines)


def _collect(body: Sequence[ast.stmt], found: set[str]) -> None:
    """The names pytest collects among ``body``'s definitions (a module's, or a collected class's)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_testcase(node)):
            found.add(node.name)  # a TestCase subclass is collected whatever its name
            _collect(node.body, found)


def _is_testcase(node: ast.ClassDef) -> bool:
    """A class with a base spelled ``...TestCase`` (unittest's, or a project's own subclass)."""
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
        if name.endswith("TestCase"):
            return True
    return False


_SELECTS_BY_NAME = re.compile(r"(?:^|\s|['\"])(?:-k|--keyword)(?:\s|=|['\"]|$)")
"""``-k`` selects tests by any part of their names: with it in the command nothing is renamed."""
_COLLECTION_SETTINGS = frozenset({"python_functions", "python_classes"})
"""Settings that collect tests by other patterns: where the test ref has one, nothing is renamed."""
_INI_FILES = ("*pytest.ini", "*tox.ini", "*setup.cfg", "*pyproject.toml", "*pytest.toml")
"""Where pytest reads ``addopts`` (a ``-k`` there selects by name as in the command)."""
_WORDS = re.compile(r"\w+")
"""A word: what an identifier is made of (a name is spelled somewhere when it is one of its words)."""


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text))


@functools.lru_cache(maxsize=64)
def _parse(data: bytes) -> _Module | None:
    """The module, read once per content (each grading rewrites the same ones), or None."""
    decoded = _decode(data)
    if decoded is None:
        return None
    try:
        return _Module(decoded[0])
    except (SyntaxError, ValueError, RecursionError):
        return None


def candidates(files: Sequence[HiddenFile]) -> frozenset[str]:
    """What the hidden modules might rename, before anything else in the test ref is read:
    collected names that every hidden module mentioning them could rewrite. A module that
    does not parse renames nothing, and keeps every name it spells."""
    modules = [(item, _parse(item.data)) for item in files if is_module(item)]
    unreadable = {
        word for item, module in modules if module is None for word in _words(item.data.decode("utf-8", "replace"))
    }
    parsed = [module for _, module in modules if module is not None]
    wanted = {name for module in parsed for name in module.collected}
    return frozenset(
        name
        for name in wanted
        if all(module.safe(name) for module in parsed if module.mentions(name)) and name not in unreadable
    )


def renamable(repo_path: Path, test_sha: str, files: Sequence[HiddenFile], command: str = "") -> frozenset[str]:
    """The test names (``candidates``) no file of the test ref names except the hidden modules
    being rewritten, and that ``command`` does not name. Raises ``GradeError`` when the test
    ref cannot be read."""
    return _renamable(str(repo_path), test_sha, tuple(files), command)


@functools.lru_cache(maxsize=64)
def _renamable(repo_path: str, test_sha: str, files: tuple[HiddenFile, ...], command: str) -> frozenset[str]:
    import git as gitpython

    names = candidates(files) - _words(command)
    if not names or _SELECTS_BY_NAME.search(command):
        return frozenset()
    own = {item.path for item in files if is_module(item) and _parse(item.data) is not None}
    patterns = [arg for name in sorted(names | _COLLECTION_SETTINGS) for arg in ("-e", name)]
    try:
        with gitpython.Repo(repo_path) as repo:
            paths = repo.git.ls_tree("-r", "--name-only", "-z", test_sha).split("\0")
            out = _grep(repo, "-I", "-w", "-F", "-o", "-z", *patterns, test_sha)
            selecting = _grep(repo, "-I", "-l", "-E", "-e", r"addopts.*(-k|--keyword)", test_sha, "--", *_INI_FILES)
    except gitpython.GitCommandError as exc:
        raise GradeError(f"cannot read which test names the test ref uses: {str(exc.stderr).strip()[-300:]}") from exc
    elsewhere = set()
    for line in out.splitlines():
        where, _, word = line.partition("\0")
        path = where.split(":", 1)[1] if ":" in where else where
        if path not in own:
            elsewhere.add(word)
    if selecting.strip() or elsewhere & _COLLECTION_SETTINGS:
        return frozenset()  # names selected by substring, or collected by other patterns: none may change
    # A file named after a test counts too (its snapshot, its data found by the running test's name).
    elsewhere.update(names & {word for path in paths if path not in own for word in _words(path)})
    return frozenset(names - elsewhere)


def _grep(repo, *args: str) -> str:
    """``git grep``'s output; empty where nothing matched (its exit status 1)."""
    import git as gitpython

    try:
        return repo.git.grep(*args)
    except gitpython.GitCommandError as exc:
        if exc.status != 1:
            raise
        return ""


def fresh_tokens(names: Iterable[str]) -> dict[str, str]:
    """A new random name for each of ``names`` that pytest collects the same way."""
    out = {}
    for name in sorted(names):
        token = secrets.token_hex(8)
        if name.startswith("test"):  # a function (or a class spelled like one)
            out[name] = f"test_x{token}"
        else:  # a class: as a JUnit classname part it still reads as no module (sources.junit._guess_node_id)
            out[name] = f"TestX{token}_test" if name.endswith("_test") else f"TestX{token}"
    return out


def randomise(files: Sequence[HiddenFile], names: Iterable[str]) -> tuple[tuple[HiddenFile, ...], dict[str, str]]:
    """``files`` with each of ``names`` under a fresh random name in every hidden module that
    spells it; and the mapping back (random name -> the task's), for the names it used."""
    tokens_for = fresh_tokens(names)
    if not tokens_for:
        return tuple(files), {}
    out: list[HiddenFile] = []
    used: set[str] = set()
    for item in files:
        module = _parse(item.data) if is_module(item) else None
        here = {name: token for name, token in tokens_for.items() if module is not None and name in module.name_tokens}
        if module is None or not here:
            out.append(item)
            continue
        decoded = _decode(item.data)
        assert decoded is not None  # parsed above
        out.append(HiddenFile(item.path, item.mode, module.rewrite(here).encode(decoded[1])))
        used.update(here)
    return tuple(out), {tokens_for[name]: name for name in sorted(used)}
