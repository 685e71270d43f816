"""The runtime audit's checks between tests (loaded beside ``crucible_audit``, by its path): the
test framework against a snapshot taken at load, by identity; new entries on the import system's
hook lists, ``gc.callbacks`` and the trace and profile hooks; and each collected test's
provenance (its module is the file pytest collected, loaded by the import system or pytest's
rewriter, its code object the one collected, with the lines of that function in the file's own
text); and no bytecode cache read from a directory the tested uid can write, so none it planted
stands in for a test module. ``Checks`` is a part of ``crucible_audit.Audit``: ``note``, ``kind``
and its state are there.
"""
from __future__ import annotations

import ast
import gc
import operator
import os
import sys
import threading
from importlib import _bootstrap_external as _external

FRAMEWORK = ("builtins", "unittest.case", "unittest.suite", "unittest.result", "_pytest.runner", "_pytest.python",
             "_pytest.unittest", "_pytest.main", "_pytest.reports", "_pytest.outcomes", "_pytest.fixtures",
             "_pytest.skipping", "_pytest.junitxml", "_pytest.terminal", "_pytest.assertion.rewrite",
             "_pytest.assertion.util", "_pytest.python_api", "pluggy._callers", "pluggy._hooks", "pluggy._manager")
"""The modules whose functions and classes are snapshotted at load: the test framework (the end
plugin's own module is added by ``watch_module`` once it is whole)."""
NO_BYTECODE = "/dev/null/crucible-no-bytecode"
"""``sys.pycache_prefix`` under the audit: a path below a device, where no uid (root included)
can make a directory or a file, so no bytecode cache is read or written from any directory the
tested uid can write (pytest's assertion-rewrite cache beside a hidden module, with the real
file's mtime and size or hash, included): every such module loaded from then on is compiled from
its source (``Audit.keep_bytecode_out``)."""


def cache_from_source() -> object:
    """The import system's own function naming a source's bytecode cache, as it is now."""
    return _external.cache_from_source


def where_defined(value: object) -> tuple[str, int]:
    """The file and first line of a callable's code (a class: its first method's), else ('', 0)."""
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    if code is None and isinstance(value, type):
        for member in vars(value).values():
            code = getattr(member, "__code__", None)
            if code is not None:
                break
    if code is None:
        call = vars(type(value)).get("__call__")
        code = getattr(call, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else ("", 0)


def identities(modules: tuple[str, ...]) -> list[list]:
    """``[prefix, namespace, keys, values]`` per namespace: the callables, classes and containers
    of each loaded module, and the callables of the classes it defines (a class's namespace is its
    live mapping proxy, so a later change shows there). Grouped so a check is one C-level pass."""
    seen: list[list] = []
    for name in modules:
        module = sys.modules.get(name)
        if module is None:
            continue
        space = vars(module)
        kept = [(attr, value) for attr, value in list(space.items())
                if attr != "_" and (callable(value) or isinstance(value, (set, dict, list)))]
        seen.append([name, space, tuple(k for k, _ in kept), [v for _, v in kept]])
        for attr, value in kept:
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                inner = [(m, v) for m, v in list(vars(value).items())
                         if callable(v) or isinstance(v, (staticmethod, classmethod))]
                seen.append([f"{name}.{attr}", vars(value), tuple(m for m, _ in inner), [v for _, v in inner]])
    return seen


class Checks:
    """The audit's snapshot and provenance checks (a mixin of ``crucible_audit.Audit``)."""

    framework: list
    lists: dict
    held: list
    collected: dict
    sources: dict
    where: str
    seen: int
    bytecode: tuple

    def note(self, event: str, frame: object, detail: str, file: str = "", line: int = 0) -> None:
        raise NotImplementedError

    def kind(self, filename: str) -> str:
        raise NotImplementedError

    def keep_bytecode_out(self) -> None:
        """No bytecode cache read or written from now on in a directory the tested uid can write
        (``NO_BYTECODE``; a root-owned library keeps its own ``__pycache__``), and the checks see
        it stay so. The end plugin calls it as pytest is about to import the first conftest, after
        the site's own plugins loaded (compiling those from source on every run would be most of a
        small suite's time, bench/bench_audit_cost.py)."""
        _external.cache_from_source = _cache_from_source  # type: ignore[assignment]
        sys.pycache_prefix, sys.dont_write_bytecode = NO_BYTECODE, True
        self.bytecode = (sys.pycache_prefix, sys.dont_write_bytecode, _external.cache_from_source)

    # -- snapshots --------------------------------------------------------------------------------
    def _hook_lists(self) -> dict[str, set[int]]:
        return {"sys.meta_path": {id(x) for x in sys.meta_path}, "sys.path_hooks": {id(x) for x in sys.path_hooks},
                "gc.callbacks": {id(x) for x in gc.callbacks},
                "sys.settrace": {id(sys.gettrace())}, "sys.setprofile": {id(sys.getprofile())},
                "threading.settrace": {id(getattr(threading, "_trace_hook", None))},
                "threading.setprofile": {id(getattr(threading, "_profile_hook", None))}}

    def check_hooks(self) -> None:
        """New entries on the import system's hook lists, ``gc.callbacks``, trace and profile
        hooks: each once, named by where its code is defined, unless that is not the repo's."""
        now: dict[str, list] = {"sys.meta_path": list(sys.meta_path), "sys.path_hooks": list(sys.path_hooks),
               "gc.callbacks": list(gc.callbacks), "sys.settrace": [sys.gettrace()],
               "sys.setprofile": [sys.getprofile()], "threading.settrace": [getattr(threading, "_trace_hook", None)],
               "threading.setprofile": [getattr(threading, "_profile_hook", None)]}
        for name, values in now.items():
            known = self.lists[name]
            for value in values:
                if id(value) in known:
                    continue
                known.add(id(value))
                self.held.append(value)
                file, line = where_defined(value)
                finder = getattr(value, "find_spec", None) or getattr(value, "find_module", None)
                if finder is not None and not file:
                    file, line = where_defined(finder)
                if self.kind(file) in ("repo",) or not file:
                    self.note("hook-installed", None, f"{name}: {type(value).__qualname__}", file, line)

    def watch_module(self, name: str) -> None:
        """``name``'s callables and containers snapshotted too (the end plugin, once it is defined)."""
        self.framework.extend(identities((name,)))

    def check_framework(self) -> None:
        """The framework's callables against the snapshot taken at load, by identity."""
        for prefix, space, keys, values in self.framework:
            if all(map(operator.is_, map(space.get, keys), values)):
                continue
            for index, key in enumerate(keys):
                value = space.get(key)
                if value is values[index]:
                    continue
                file, line = where_defined(value)
                if self.kind(file) != "test":
                    self.note("framework-patch", None, f"{prefix}.{key} {'replaced' if value is not None else 'removed'}",
                              file, line)
                values[index] = value  # reported once
        now = (sys.pycache_prefix, sys.dont_write_bytecode, _external.cache_from_source)
        if any(a is not b for a, b in zip(now, self.bytecode)):
            self.note("framework-patch", None, "sys.pycache_prefix, sys.dont_write_bytecode or the import system's "
                      "cache_from_source set (a bytecode cache the tested uid can write read again)")
            self.bytecode = now  # reported once
        self.check_hooks()

    def collected_items(self, items: list) -> None:
        for item in items:
            code = _test_code(item)
            if code is not None:
                self.collected[str(getattr(item, "nodeid", ""))] = id(code)
            self.check_provenance(item, code)

    def check_provenance(self, item: object, code: object) -> None:
        """The item's module is the file pytest collected, loaded by the import system or
        pytest's rewriter, and its code was compiled from that file."""
        module = getattr(item, "module", None)
        path = str(getattr(item, "path", "") or getattr(item, "fspath", ""))
        nodeid = str(getattr(item, "nodeid", ""))
        if module is None or not path:
            return
        file = os.path.realpath(str(getattr(module, "__file__", "") or ""))
        loader = type(getattr(module, "__loader__", None))
        problems = []
        if file != os.path.realpath(path):
            problems.append(f"module file {file}")
        if not str(loader.__module__).startswith(("_pytest", "importlib", "_frozen_importlib")):
            problems.append(f"loader {loader.__module__}.{loader.__qualname__}")
        if code is not None and os.path.realpath(getattr(code, "co_filename", "")) != os.path.realpath(path):
            problems.append(f"code from {getattr(code, 'co_filename', '')}")
        elif code is not None and not self.compiled_from(path, code):
            problems.append("code not compiled from the file's own text")
        if problems:
            self.note("test-provenance", None, f"{nodeid}: {'; '.join(problems)}", path, 0)

    def compiled_from(self, path: str, code: object) -> bool:
        """The test's code has every line and every name of the function of its name and first
        line in the file's text as read now (root's locked file), and no line outside it:
        pytest's assertion rewriting adds names, and gives every part of an assertion the
        assertion's first line (so the lines an assertion continues on are not required)."""
        if path not in self.sources:
            try:
                with open(path, "rb") as handle:
                    tree = ast.parse(handle.read(), path)
                self.sources[path] = _functions(compile(tree, path, "exec", dont_inherit=True),
                                                _assertion_continuations(tree))
            except (OSError, SyntaxError, ValueError):
                self.sources[path] = None
        functions = self.sources[path]
        if functions is None:
            return True
        want = functions.get((getattr(code, "co_name", ""), getattr(code, "co_firstlineno", 0)))
        lines = _lines(code)
        return want is not None and want[0] <= lines and want[1] <= set(getattr(code, "co_names", ())) \
            and all(min(want[0]) <= line <= max(want[0]) + 200 for line in lines)

    def before_test(self, item: object) -> None:
        self.check_framework()
        nodeid = str(getattr(item, "nodeid", ""))
        self.where = nodeid
        self.seen += 1
        code = _test_code(item)
        if code is not None and nodeid in self.collected and id(code) != self.collected[nodeid]:
            self.note("test-provenance", None, f"{nodeid}: its code changed after collection",
                      getattr(code, "co_filename", ""), getattr(code, "co_firstlineno", 0))
            self.collected[nodeid] = id(code)


def _cache_from_source(path: str, debug_override: object = None, *, optimization: object = None) -> str:
    """The import system's bytecode path of ``path`` under the audit: under ``NO_BYTECODE`` (none
    read) for a source in a directory the tested uid can write, where it could plant one; the
    classic ``__pycache__`` beside it for one it cannot (the image's root-owned libraries, whose
    caches root wrote: numpy or duckdb compiled from source would cost every run ~0.4 s)."""
    path = os.fspath(path)
    head, tail = os.path.split(path)
    cache = os.path.join(head, "__pycache__")
    if os.access(head or ".", os.W_OK) or os.access(cache, os.W_OK):
        return os.path.join(NO_BYTECODE, path.lstrip(os.sep))
    base, sep, rest = tail.rpartition(".")
    name = "".join([base if base else rest, sep, str(sys.implementation.cache_tag)])
    if debug_override is not None:  # the import system's own, deprecated: as it reads it
        optimization = "" if debug_override else 1
    if optimization is None:
        optimization = "" if not sys.flags.optimize else sys.flags.optimize
    if optimization != "":
        name = f"{name}.opt-{optimization}"
    return os.path.join(cache, name + ".pyc")


def _lines(code: object) -> frozenset:
    lines = getattr(code, "co_lines", None)
    return frozenset(line for _, _, line in lines() if line is not None) if lines else frozenset()


def _assertion_continuations(tree: ast.AST) -> frozenset:
    """The lines after the first of each assertion that spans several: pytest's rewriter moves
    everything it builds for an assertion onto the assertion's first line."""
    return frozenset(line for node in ast.walk(tree) if isinstance(node, ast.Assert)
                     for line in range(node.lineno + 1, (node.end_lineno or node.lineno) + 1))


def _functions(module: object, continuations: frozenset = frozenset()) -> dict:
    """(name, first line) -> (lines, names), for every function compiled from one file; the
    lines less an assertion's continuation lines."""
    found, todo = {}, [module]
    while todo:
        code = todo.pop()
        found[(code.co_name, code.co_firstlineno)] = (_lines(code) - continuations,  # type: ignore[attr-defined]
                                                     frozenset(code.co_names))  # type: ignore[attr-defined]
        todo.extend(c for c in code.co_consts if hasattr(c, "co_lines"))  # type: ignore[attr-defined]
    return found


def _test_code(item: object) -> object:
    function = getattr(item, "obj", None)
    return getattr(getattr(function, "__func__", function), "__code__", None)
