"""The Python visitor: every rule family's visits over one walk of the file's tree (imports and
scopes, calls, attributes and names, strings), on top of the families' own layers.
"""

from __future__ import annotations

import ast

from envs.integrity.scan.payloads import pickle_call
from envs.integrity.scan.python_items import ALWAYS, always_answers
from envs.integrity.scan.python_names import (
    BUILTIN_RUNNERS,
    CODE_LOADERS,
    CODE_NAMES,
    CODE_RUNNERS,
    FRAME_ATTRIBUTES,
    HOOK_CALLERS,
    IMPORT_SYSTEM,
    IMPORT_TIME_CALLS,
    MUTATING_METHODS,
    NAME_LOOKUPS,
    PLUGGY_INTERNALS,
    RUNNER_MODULES,
    RUNNER_PATCH_STRING,
    RUNNER_STRING,
    SOURCE_RUNNERS,
    STACK_CALLS,
    STREAM_CALLS,
    TEST_PATH_STRING,
    TREE_CALLS,
    TREE_METHODS,
)
from envs.integrity.scan.python_patches import PatchReader
from envs.integrity.scan.python_tree import bound_in, call_of, fold, literal, runner_receiver


class PythonVisitor(PatchReader):
    """One file's findings. Names are resolved through the file's own imports (``import sys
    as s``, ``from inspect import stack``), so an alias hides nothing."""

    # ---- imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in RUNNER_MODULES:
                self.add("runner-import", node, f"import {alias.name}")
            self._hook(node, alias.asname or "", "imports as")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0 and node.module.split(".")[0] in RUNNER_MODULES:
            self.add("runner-import", node, f"from {node.module} import ...")
        for alias in node.names:  # a hook imported into a conftest is registered from there
            self._hook(node, alias.asname or alias.name, "imports as")

    def visit_keyword(self, node: ast.keyword) -> None:
        self._hook(node, node.arg or "", "binds")  # SimpleNamespace(pytest_pyfunc_call=...)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self._hook(node, node.name or "", "binds")  # case pytest_pyfunc_call: binds the subject
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self._hook(node, node.name or "", "binds")

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self._hook(node, node.rest or "", "binds")
        self.generic_visit(node)

    # ---- scopes
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._hook(node, node.name, "def")  # at any depth: a plugin class's method is registered as well
        if not self.test_file and node.name in ALWAYS and always_answers(node, ALWAYS[node.name]):
            self.add("always-equal", node, f"def {node.name} that answers {ALWAYS[node.name]} whatever it is given")
        self._decorators(node)
        test = self.test_file and node.name.startswith("test")
        self.in_test += test
        self.depth += 1
        self.scopes.append(bound_in(node))
        self.generic_visit(node)
        self.scopes.pop()
        self.depth -= 1
        self.in_test -= test

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.scopes.append(bound_in(node))
        self.generic_visit(node)
        self.scopes.pop()
        self.depth -= 1

    def _decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            name = self.qualified(decorator.func if isinstance(decorator, ast.Call) else decorator)
            if name in ("atexit.register", "signal.signal") and self.depth == 0:
                why = self._exit_hook(node) if name == "atexit.register" else ""
                if why is not None:
                    self.add("import-time-hook", decorator, f"@{name}" + (f": {why}" if why else ""))

    # ---- calls, attributes, names
    def visit_Call(self, node: ast.Call) -> None:  # noqa: C901 (one branch per call form the rules name)
        joined = fold(node)
        if joined is not None:
            self._string(node, joined)
            return
        name = self.qualified(node.func)
        self._taken(node)
        if call_of(node, "getattr") and len(node.args) > 1 and literal(node.args[1]) in FRAME_ATTRIBUTES:
            self.add("stack-inspection", node, f"getattr(..., {literal(node.args[1])!r})")
        runner = self.code_runner(node.func)
        if runner is not None:
            self._runs_code(node, runner, mode=runner)
        elif name in SOURCE_RUNNERS:
            self._runs_code(
                node,
                name,
                SOURCE_RUNNERS[name],
                ("stmt", "cmd", "source", "statement", "expression"),
                "eval" if name == "pdb.runeval" else "exec",
            )
            if name.startswith("timeit."):  # its setup is source too
                self._runs_code(node, name, 1, ("setup",))
        elif name in CODE_LOADERS:
            self._loads_code(node, name)
        elif (
            name in NAME_LOOKUPS
            and node.args
            and (literal(node.args[0]) or "").replace(":", ".") in (*BUILTIN_RUNNERS, *CODE_RUNNERS)
            and not self.in_test
        ):
            self.add("unread-code", node, f"{name}({literal(node.args[0])!r})")
        if (
            any(k.arg == "co_code" for k in node.keywords)
            or (
                call_of(node.func, "type")
                and any(isinstance(a, ast.Attribute) and a.attr == "__code__" for a in node.func.args)
            )
        ) and not self.in_test:
            self.add("unread-code", node, "bytecode built from bytes")
        if name is not None:
            if name in STACK_CALLS:
                self.add("stack-inspection", node, f"{name}()")
                self.called.add(id(node.func))
            elif name in IMPORT_TIME_CALLS and self.depth == 0:
                why = self._exit_hook(node) if name == "atexit.register" else ""
                if why is not None:
                    self.add("import-time-hook", node, f"{name}() at import time" + (f": {why}" if why else ""))
            elif name in STREAM_CALLS and self.depth == 0:
                self.add("import-time-hook", node, f"{name}() at import time")
            elif (
                "." in name
                and name.rsplit(".", 1)[1] in MUTATING_METHODS
                and name.rsplit(".", 1)[0] in IMPORT_SYSTEM
                and self._patches(name)
            ):
                self.add("monkeypatch", node, f"{name}()")
            elif name in TREE_CALLS:
                self.add("tree-walk", node, f"{name}()")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in TREE_METHODS:
            self.add("tree-walk", node, f".{node.func.attr}()")
        if (
            self.test_file
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("force_result", "force_exception")
        ):
            self.add("runner-hook", node, f".{node.func.attr}()")  # a hook wrapper's outcome replaced
        self._setter(node)
        if self.test_file:
            self._test_file_call(node, name)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "pythonapi" and not self.in_test and self.qualified(node) == "ctypes.pythonapi":
            self.add("unread-code", node, "ctypes.pythonapi (the interpreter's C API: PyRun_SimpleString)")
        if node.attr in FRAME_ATTRIBUTES:
            self.add("stack-inspection", node, f".{node.attr}")
        if isinstance(node.ctx, ast.Store):
            self._hook(node, node.attr, "binds")  # plugin.pytest_pyfunc_call = ...
            if self.lasting and node.attr in HOOK_CALLERS:  # config.hook = Relay(config.hook)
                self.add("runner-hook", node, f".{node.attr} = ...")
        if self.lasting and node.attr in PLUGGY_INTERNALS and runner_receiver(node.value):
            self.add("runner-hook", node, f".{node.attr}")
        self._taken(node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self._hook(node, node.id, "binds")  # pytest_pyfunc_call = lambda pyfuncitem: True
        self._taken(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self._taken(node)  # vars(builtins)["exec"] held, to be called elsewhere
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self._string(node, node.value)
        if isinstance(node.value, (str, bytes)) and len(node.value) > 8 and not self.in_test:
            # a pickle as a literal (pickle.loads(b"...")): what it calls runs when it is loaded
            data = node.value.encode("latin-1", "replace") if isinstance(node.value, str) else node.value
            called = pickle_call(data)
            if called is not None:
                self.add("unread-code", node, f"a pickle literal that calls {called} when loaded")

    def _string(self, node: ast.AST, value: str) -> None:
        if self.lasting:
            self._hook(node, value[:2000], "names")  # specname="pytest_pyfunc_call", globals()[...], exec(...)
            if len(value) < 200 and RUNNER_PATCH_STRING.search(value):
                self.add("monkeypatch", node, f"{value[:60]!r} (a patch target in the runner)")
        if value.replace(":", ".") in CODE_NAMES and not self.in_test:
            # a runner named to be looked up by a string: dictConfig's "()", pydoc.locate, resolve_name
            self.add("unread-code", node, f"{value!r} (a runner of code, named)")
        if len(value) < 500:
            if RUNNER_STRING.search(value):
                self.add("runner-detection", node, repr(value)[:80])
            elif TEST_PATH_STRING.search(value):
                self.add("test-path", node, repr(value)[:80])

    # ---- strings split to hide them: "PY" + "TEST_CURRENT_TEST", f"te{'sts'}", "".join(["te", "sts"])
    def visit_BinOp(self, node: ast.BinOp) -> None:
        self._folded(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._folded(node)

    def _folded(self, node: ast.expr) -> None:
        value = fold(node)
        if value is not None:
            self._string(node, value)  # its parts are literals: nothing else in there to find
            return
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring (or a bare string): it says, it does not do
        self.generic_visit(node)
