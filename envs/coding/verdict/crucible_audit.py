"""crucible's runtime audit of the code under test, inside pytest's process (envs/coding/verdict/README.md,
"The runtime audit"). The end plugin loads it at its own import under ``strict``, before any
conftest, collection or code under test: a PEP 578 hook installed first cannot be removed. It
records what the code under test does at run time that honest code has no reason to, whatever
names it spelled: an event counts only where the innermost frame that caused it is the repo's
own non-test code, reached directly or through the few stdlib modules made for that very thing
(so dataclasses, namedtuple, pytest's rewriting and the import system never count). Before each
test it compares the framework with a snapshot taken at load, by identity, and checks the test's
provenance. The events go out beside the end line; envs/coding/audit.py judges them.
"""
from __future__ import annotations

import base64
import fnmatch
import gc
import importlib.util
import json
import os
import sys
import zlib
from _thread import get_ident
from types import MappingProxyType
from typing import Any


def _beside(name: str) -> Any:
    """A module of this directory, loaded by its path (a repo module of the same name on
    ``sys.path`` cannot stand in for it)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                      f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_checks = _beside("crucible_provenance")

CODE = frozenset({"compile", "exec", "marshal.loads", "marshal.load", "code.__new__", "function.__new__"})
FRAMES = frozenset({"sys._getframe", "sys._current_frames"})
FRAME_ATTRS = frozenset({"f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame"})
WATCHED = CODE | FRAMES | frozenset({
    "pickle.find_class", "object.__setattr__", "object.__delattr__", "object.__getattr__", "sys.settrace", "sys.setprofile",
    "sys.addaudithook", "open", "os.rename", "os.link", "os.symlink", "os.putenv", "os.listdir", "os.scandir",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "import"})
"""The audit events looked at; every other event returns at the first test (the hook is called for all)."""
LOADERS = frozenset({"get_code", "exec_module", "_compile_bytecode", "_rewrite_test", "_read_pyc"})
"""Import-system functions: an event under one of them is an import of a file, never the caller's text."""
PASSES = MappingProxyType({
    "code": frozenset({"importlib", "codeop", "code", "runpy", "timeit", "types"}),
    "frames": frozenset({"inspect", "traceback"}),
    "pickle": frozenset({"pickle", "copyreg", "shelve"}),
    "files": frozenset({"pathlib", "shutil", "io", "codecs", "os", "tempfile", "py_compile", "compileall", "importlib",
                        "zipfile", "tarfile", "glob", "fnmatch", "linecache", "tokenize"}),
    # Not importlib: importlib.metadata lists every sys.path entry, the tests' own among them.
    "listing": frozenset({"os", "glob", "pathlib", "fnmatch", "shutil"}),
    "hooks": frozenset({"threading"}),
    "direct": frozenset(),
})
"""Read-only, like every module-level value here: nothing of the audit's a caller could widen."""
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pth", ".so")
ENV_PREFIXES = ("PYTEST", "PY_", "PYTHON", "_PYTEST")
LIMIT = 400
"""At most this many distinct events are kept (each with its count); the rest are counted only."""
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _stdlib_dir() -> str:
    return os.path.dirname(os.path.abspath(os.__file__)) + os.sep


def _is_write(mode: object, flags: object) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


class Audit(_checks.Checks):  # type: ignore[name-defined,misc]
    """The hook's state, held by the hook's closure and the end plugin, named nowhere else."""

    def __init__(self, root: str, plugin_dir: str) -> None:
        self.root = os.path.abspath(root) + os.sep
        self.plugin_dir = os.path.abspath(plugin_dir) + os.sep
        self.stdlib = _stdlib_dir()
        self.patterns = ["test_*.py", "*_test.py", "conftest.py"]
        self.kinds: dict[str, str] = {}
        self.events: dict[tuple, list] = {}
        self.dropped = 0
        self.errors = 0
        self.error = ""
        """The times the hook's handler raised, and the first one's text: an event it could not
        judge (an argument whose methods raise) may be one it was meant to see, so the judge
        takes a record with any as tampered (envs/coding/audit.py)."""
        self.where = "collection"
        self.written: set[str] = set()
        self.collected: dict[str, int] = {}
        self.sources: dict[str, dict | None] = {}
        self.seen = 0
        self.listed: dict[str, bool] = {}
        """Tests the checks ran before: none where tests ran means the checks were unregistered."""
        import unittest  # noqa: F401 (its classes snapshotted before any code under test can patch them)
        self.framework = _checks.identities(_checks.FRAMEWORK)
        self.bytecode = (sys.pycache_prefix, sys.dont_write_bytecode, _checks.cache_from_source())
        self.lists = self._hook_lists()
        self.held: list = [*sys.meta_path, *sys.path_hooks, *gc.callbacks]
        """Every hook seen, kept alive: an id in ``lists`` is never a later object's."""

    # -- where a frame's code comes from ------------------------------------------------------
    def kind(self, filename: str) -> str:
        """``repo`` (the task's non-test code, or code from no known file), ``test``, ``site``,
        ``plugin``, ``std:<module>`` (``std:importlib`` for the frozen import system)."""
        found = self.kinds.get(filename)
        if found is None:
            found = self.kinds[filename] = self._kind(filename)
        return found

    def _kind(self, filename: str) -> str:
        if filename.startswith("<frozen "):
            return "std:" + filename[8:-1].split(".")[0].lstrip("_") if filename.endswith(">") else "repo"
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        if path.startswith(self.plugin_dir):
            return "plugin"
        if "/site-packages/" in path or "/dist-packages/" in path:
            return "site"
        if path.startswith(self.stdlib):
            return "std:" + path[len(self.stdlib):].split(os.sep)[0].removesuffix(".py")
        if path.startswith(self.root) and self.is_test(path):
            return "test"
        return "repo"

    def is_test(self, path: str) -> bool:
        rel = path[len(self.root):] if path.startswith(self.root) else path
        parts = rel.split(os.sep)
        return (any(fnmatch.fnmatchcase(parts[-1], p) for p in self.patterns)
                or any(p in ("tests", "test", "testing") for p in parts[:-1]))

    def test_module(self, path: str) -> bool:
        """A test module or conftest (not a module that only matches ``*_test.py`` outside the tests)."""
        name = os.path.basename(path)
        return self.is_test(path) and (name.startswith("test") or name == "conftest.py"
                                       or any(p in ("tests", "test", "testing") for p in path.split(os.sep)[:-1]))

    def holds_tests(self, path: str) -> bool:
        if path not in self.listed:
            try:
                self.listed[path] = any(self.test_module(os.path.join(path, n)) for n in os.listdir(path)
                                        if n.endswith(".py"))
            except OSError:
                self.listed[path] = False
        return self.listed[path]

    def caller(self, frame: object, passes: frozenset[str] | None) -> object:
        """The innermost frame of the repo's own code that caused the event, reached through
        ``passes`` only (None: through anything but the import system), or None."""
        depth = 0
        while frame is not None and depth < 60:
            code = frame.f_code  # type: ignore[attr-defined]
            kind = self.kind(code.co_filename)
            if kind == "repo":
                return frame
            if code.co_name in LOADERS and kind in ("std:importlib", "site"):
                return None
            if passes is not None and not (kind.startswith("std:") and kind[4:] in passes):
                return None
            frame, depth = frame.f_back, depth + 1  # type: ignore[attr-defined]
        return None

    # -- the record ------------------------------------------------------------------------------
    def note(self, event: str, frame: object, detail: str, file: str = "", line: int = 0) -> None:
        if frame is not None:
            file, line = frame.f_code.co_filename, frame.f_lineno  # type: ignore[attr-defined]
        rel = file[len(self.root):] if file.startswith(self.root) else file
        key = (event, self.where, rel, line, detail[:160])
        if key in self.events:
            self.events[key][5] += 1
        elif len(self.events) < LIMIT:
            self.events[key] = [event, self.where, rel, line, detail[:160], 1]
        else:  # past the limit: one entry per place in the code, so no flood of events hides another
            key = (event, "(more)", rel, line, "")
            if key in self.events:
                self.events[key][5] += 1
            elif len(self.events) < 4 * LIMIT:
                self.events[key] = [event, "(more)", rel, line, "", 1]
            else:
                self.dropped += 1

    def failed(self, event: str, exc: BaseException) -> None:
        """The handler raised on ``event``: counted, the first one's text kept (its own ``str``
        may raise too: the attacker's object chose it)."""
        self.errors += 1
        if self.errors == 1:
            try:
                self.error = f"{event}: {type(exc).__name__}: {exc}"[:200]
            except BaseException:
                self.error = f"{event}: an exception that cannot be printed"

    def dump(self) -> str:
        """The events as the end line carries them: base64 of zlib'd JSON."""
        body: dict = {"events": list(self.events.values()), "dropped": self.dropped}
        if self.errors:
            body.update(hook_errors=self.errors, hook_error=self.error)
        return base64.b64encode(zlib.compress(json.dumps(body).encode())).decode("ascii")

    # -- the hook ---------------------------------------------------------------------------------
    def on_event(self, event: str, args: tuple, frame: object) -> None:  # noqa: C901 (one branch per audit event it judges)
        if event in CODE:
            found = self.caller(frame, PASSES["code"])
            if found is not None:
                self.note(event, found, _describe(args))
            elif event == "compile" and len(args) > 1 and isinstance(args[1], str) and self._written(args[1]):
                self.note("written-code-run", None, args[1], args[1], 0)
        elif event in FRAMES or (event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRS):
            passes = PASSES["frames"] if event in FRAMES else PASSES["direct"]
            found = self.caller(frame, passes)
            if found is not None and event == "sys._getframe" and args and args[0] is found and \
                    frame is not found and frame.f_code.co_name == "currentframe":  # type: ignore[attr-defined]
                # Its own frame, by inspect.currentframe (a C extension asks so: duckdb's replacement
                # scans); recorded, counted by no rule (verdict/README.md).
                self.note("sys._getframe(0)", found, "")
            elif found is not None:
                got = args[0] if event == "sys._getframe" and args else None
                self.note(event if event in FRAMES else f"frame.{args[1]}", found,
                          f"{got.f_code.co_filename}:{got.f_code.co_name}" if got is not None else "")
        elif event in ("object.__setattr__", "object.__delattr__"):
            self._setattr(event, args, frame)
        elif event == "pickle.find_class":
            found = self.caller(frame, PASSES["pickle"])
            if found is not None:
                self.note(event, found, ".".join(str(a) for a in args[:2]))
        elif event in ("sys.settrace", "sys.setprofile", "sys.addaudithook"):
            found = self.caller(frame, PASSES["hooks"])
            if found is not None:
                self.note(event, found, "")
        elif event == "open":
            self._open(args, frame)
        elif event in ("os.rename", "os.link", "os.symlink"):
            self._moved(event, args, frame)
        elif event == "os.putenv" and _env_name(args).upper().lstrip("_").startswith(ENV_PREFIXES):
            found = self.caller(frame, PASSES["files"])
            if found is not None:
                self.note(event, found, _env_name(args)[:80])
        elif event in ("os.listdir", "os.scandir"):
            self._listed(event, args, frame)
        elif event.startswith("gc.get_"):
            found = self.caller(frame, PASSES["direct"])
            if found is not None:
                self.note(event, found, "")
        elif event == "import":
            self.check_hooks()

    def _setattr(self, event: str, args: tuple, frame: object) -> None:
        target, name = (args[0], str(args[1])) if len(args) > 1 else (None, "")
        if name == "__code__":
            old = getattr(getattr(target, "__code__", None), "co_filename", "")
            found = self.caller(frame, None)
            if found is not None or self.kind(old) == "test":
                self.note("code-swap", found, f"{getattr(target, '__qualname__', '?')} ({os.path.basename(old)})")
        elif isinstance(target, type) and str(getattr(target, "__module__", "")).startswith(
                ("unittest", "_pytest", "pytest", "pluggy", "builtins")):
            found = self.caller(frame, None)
            if found is not None:
                self.note("framework-setattr", found, f"{target.__qualname__}.{name}")

    def _open(self, args: tuple, frame: object) -> None:
        path = args[0] if args else None
        if not isinstance(path, str):
            return
        writing = _is_write(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None)
        if writing:
            found = self.caller(frame, PASSES["files"])
            if found is None:
                return
            full = os.path.abspath(path)
            self.written.add(full)
            if full.endswith(CODE_SUFFIXES):
                self.note("write-code", found, full)
        else:
            full = os.path.abspath(path)
            # The test modules' own text (a test's data files are honest code's to read where a
            # test hands it their path; a listing of the test directories is not, see _listed).
            if full.endswith(".py") and full.startswith(self.root) and self.test_module(full):
                found = self.caller(frame, PASSES["files"])
                if found is not None:
                    self.note("read-tests", found, full[len(self.root):])

    def _moved(self, event: str, args: tuple, frame: object) -> None:
        target = args[1] if len(args) > 1 else None
        if not isinstance(target, str):
            return
        found = self.caller(frame, PASSES["files"])
        if found is not None:
            self.written.add(os.path.abspath(target))
            if target.endswith(CODE_SUFFIXES):
                self.note("write-code", found, os.path.abspath(target))

    def _listed(self, event: str, args: tuple, frame: object) -> None:
        path = args[0] if args else None
        path = os.path.abspath(path if isinstance(path, str) else ".")
        rel = path[len(self.root):] if path.startswith(self.root) else None
        if rel is None or not self.holds_tests(path):  # a data directory a test names is honest code's to list
            return
        found = self.caller(frame, PASSES["listing"])
        if found is not None:
            self.note("list-tests", found, rel)

    def _written(self, filename: str) -> bool:
        return os.path.abspath(filename) in self.written

def _env_name(args: tuple) -> str:
    """``os.putenv``'s name: bytes (the event carries it encoded), read as text."""
    name = args[0] if args else ""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)


def _describe(args: tuple) -> str:
    if len(args) > 1 and isinstance(args[1], str):
        return args[1]
    code = args[0] if args else None
    return str(getattr(code, "co_filename", "") or type(code).__name__)


SIFTED = frozenset({"object.__getattr__", "object.__setattr__", "open"})
"""The frequent events, sifted by their arguments before any frame is looked at."""


def _wanted(event: str, args: tuple) -> bool:
    if event == "object.__getattr__":
        return len(args) > 1 and args[1] in FRAME_ATTRS
    if event == "object.__setattr__":
        return len(args) > 1 and (args[1] == "__code__" or isinstance(args[0], type))
    path = args[0] if args else None
    return isinstance(path, str) and (path.endswith(".py") or _is_write(args[1] if len(args) > 1 else None,
                                                                        args[2] if len(args) > 2 else None))


def install(root: str, plugin_dir: str) -> Audit:
    """The audit, its hook installed: from now on every watched event of the process is seen."""
    audit = Audit(root, plugin_dir)
    busy: set[int] = set()
    getframe = sys._getframe

    def hook(event: str, args: tuple) -> None:
        if event not in WATCHED:
            return
        try:
            if event in SIFTED and not _wanted(event, args):
                return
        except BaseException as exc:  # an argument whose own methods raise (a str subclass)
            failed(event, exc)
            return
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            audit.on_event(event, args, getframe(1))
        except BaseException as exc:
            failed(event, exc)
        finally:
            busy.discard(me)

    def failed(event: str, exc: BaseException) -> None:
        """The audit never breaks the run it watches, and never fails unseen: counted in the
        record (a tampered verdict), and an interrupt still interrupts."""
        audit.failed(event, exc)
        if not isinstance(exc, Exception):
            raise exc

    sys.addaudithook(hook)
    return audit
