"""The Python visitor's ground: one file's walk state (imports, scopes, depth, test bodies), how a
finding is filed, how a name resolves to the module path it names, and the hook and patch tests
the rule families share. The families add their visits on top (python_code, python_patches,
python_visitor), so one walk reads every rule.
"""

from __future__ import annotations

import ast

from envs.integrity.scan import exit_hooks
from envs.integrity.scan.model import Finding
from envs.integrity.scan.python_items import item_names
from envs.integrity.scan.python_names import (
    BUILTIN_RUNNERS,
    CODE_RUNNERS,
    HOOK_NAME,
    PATCHED_IN_TESTS,
    PYTEST_HOOKS,
    RUNNER_HOOKS,
    RUNNER_MODULES,
)
from envs.integrity.scan.python_tree import (
    call_of,
    keyed_lookup,
    known,
    literal,
    module_bindings,
    namespace_of_builtins,
    namespace_owner,
    private_module,
)


class Walker(ast.NodeVisitor):
    """One file's findings. Names are resolved through the file's own imports (``import sys
    as s``, ``from inspect import stack``), so an alias hides nothing."""

    def __init__(self, path: str, test_file: bool = False, added: set[int] | None = None) -> None:
        self.path = path
        self.test_file = test_file
        """A test file: patching counts only on the runner and the import system (``_patches``)."""
        self.added = added
        """The lines the diff adds, where known: a finding on a statement over several lines is
        filed at its first added one (``add``), so a continuation line added alone is not lost."""
        self.in_test = 0
        """Inside a test's own body (``def test*``) in a test file: it runs when that test runs,
        and a patch there (monkeypatch, mock) is undone after it; only what lasts counts there."""
        self.aliases: dict[str, str] = {}
        self.depth = 0  # functions entered: 0 = runs at import time (class bodies do too)
        self.findings: list[Finding] = []
        self.called: set[int] = set()
        """The callees of stack-inspecting calls and of code runners already flagged as calls
        (not again as taken)."""
        self.items: set[str] = set()
        """Names the file gives a collected test (``item_names``): in a test file only."""
        self.scopes: list[set[str]] = []
        """The names each function and lambda we are in binds itself (a parameter, a def, an
        assignment of anything but the name itself: ``bound_in``): ``compile`` bound there is the
        function's everywhere in it, not the builtin (``def f(eval=False)``), and only there."""
        self.functions: set[str] = set()
        """The names of the file's own functions (``timeit.Timer(f)`` times a function, not text)."""
        self.module_bound: dict[str, int] = {}
        """Names the module binds for certain, by a top-level statement, with its line: the module
        runs top down, so such a name is the module's only after that line (``exec(data)`` then
        ``exec = print`` calls the builtin first)."""
        self.star_modules: list[str] = []
        """Modules imported whole (``from importlib.machinery import *``): a bare name may be theirs."""
        self.module: ast.Module | None = None
        """The file's tree, where an exit hook registered at import time may be cleared by what
        it does (``exit_hooks``); None in source exec runs, where none is (its names are the file's)."""
        self.clears_exit_hooks = True

    def run(self, tree: ast.AST) -> list[Finding]:
        for node in ast.walk(tree):  # aliases first: an import below its use still names it
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name == "*":
                        self.star_modules.append(node.module)
                    else:
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        self.module_bound.update(module_bindings(tree))
        self.module = tree if isinstance(tree, ast.Module) and self.clears_exit_hooks else None
        self.functions |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if self.test_file:
            self.items |= item_names(tree)
        self.visit(tree)
        return self.findings

    def code_runner(self, func: ast.AST) -> str | None:
        """Which of exec, eval and compile ``func`` names (the builtin, through an import or a
        lookup of the builtins, or bare where no scope we are in binds the name), else None."""
        name = self.qualified(func)
        if name in CODE_RUNNERS:
            return name.split(".")[1]
        if (
            isinstance(func, ast.Name)
            and func.id in BUILTIN_RUNNERS
            and not any(func.id in scope for scope in self.scopes)
            and not self.module_bound.get(func.id, func.lineno) < func.lineno
        ):
            return func.id
        return None

    def add(self, rule: str, node: ast.AST, detail: str, whole: bool = False) -> None:
        """A finding at ``node``'s first added line: a definition's header, a call's callee (its
        arguments too when ``whole``: what a setattr sets is in them), any other node whole."""
        first = getattr(node, "lineno", 1)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            last = node.body[0].lineno - 1 if node.body else first  # its header, not its body
        elif isinstance(node, ast.Call) and not whole:
            last = getattr(node.func, "end_lineno", None) or first
        else:
            last = getattr(node, "end_lineno", None) or first
        line = next((n for n in range(first, last + 1) if self.added is not None and n in self.added), first)
        self.findings.append(Finding(rule, self.path, line, detail))

    @property
    def lasting(self) -> bool:
        """In a test file, outside any test's own body: what runs here lasts (a conftest's module
        level, its fixtures and hooks, a helper)."""
        return self.test_file and not self.in_test

    def qualified(self, node: ast.AST) -> str | None:
        """``a.b.c`` as the module path it names (through the imports), else None. A module
        looked up by a literal name counts as named: ``sys.modules["pytest"].raises``,
        ``importlib.import_module("_pytest.python").Function``."""
        parts: list[str] = []
        root: str | None = None
        while True:
            if isinstance(node, ast.Attribute) and node.attr == "__builtins__":
                root = "builtins"  # any function's or module's __builtins__ (f.__globals__ too, below)
                break
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif call_of(node, "getattr") and len(node.args) in (2, 3) and literal(node.args[1]) is not None:
                parts.append(literal(node.args[1]) or "")  # getattr(sys, "_getframe")
                node = node.args[0]
            elif (keyed := keyed_lookup(node)) is not None and (
                namespace_owner(keyed[0]) is not None or namespace_of_builtins(self.qualified(keyed[0]))
            ):
                # vars(sys)["_getframe"], builtins.__dict__.get("exec"); __builtins__["exec"],
                # globals()["__builtins__"]["exec"]: the key is an attribute of the mapping's owner
                parts.append(keyed[1])
                node = namespace_owner(keyed[0]) or keyed[0]
            else:
                break
        if root is not None:
            pass  # an object's __builtins__
        elif isinstance(node, ast.Name):
            root = self.aliases.get(node.id)
            if root is None and node.id == "__builtins__":
                root = "builtins"
            elif root is None and self.star_modules and not any(node.id in scope for scope in self.scopes):
                root = next(
                    (f"{m}.{node.id}" for m in self.star_modules if known(private_module(f"{m}.{node.id}"))), None
                )
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, (ast.Attribute, ast.Name))
            and self.qualified(node.value) == "sys.modules"
        ):
            root = literal(node.slice)
        elif isinstance(node, ast.Subscript) and (
            (call_of(node.value, "globals") or call_of(node.value, "vars"))
            and not node.value.args
            or isinstance(node.value, ast.Attribute)
            and node.value.attr == "__globals__"
        ):
            name = literal(node.slice)  # globals()["__builtins__"], f.__globals__["sys"]
            root = "builtins" if name == "__builtins__" else self.aliases.get(name or "")
        elif (
            isinstance(node, ast.Call)
            and node.args
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or self.qualified(node.func) in ("importlib.import_module", "builtins.__import__")
            )
        ):
            root = literal(node.args[0])
        if root is None:
            return None
        return private_module(".".join([root, *reversed(parts)]).replace(".__dict__.", "."))

    def _exit_hook(self, hook: ast.Call | ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
        """Why an exit hook registered at import time is a finding, None where what it does is
        cleanup the scan reads (``exit_hooks``); "" (no reason but the hook) in source exec runs."""
        if self.module is None:
            return ""
        return exit_hooks.refusal(self.module, hook, self.qualified)

    def _hook(self, node: ast.AST, text: str, how: str) -> None:
        """``runner-hook`` where ``text`` (a name bound, a string) names one of RUNNER_HOOKS, or
        in code under test any of PYTEST_HOOKS."""
        hooks = RUNNER_HOOKS if self.test_file else PYTEST_HOOKS
        for name in HOOK_NAME.findall(text):
            if name in hooks:
                self.add("runner-hook", node, f"{how} {name}"[:80])
                return

    def _patches(self, target: str) -> bool:
        """Whether patching ``target`` (a module path) counts: anything of PATCHED_MODULES' in
        code under test; in a test file, where patching the library for a test is everyday, only
        the runner and the import machinery."""
        return not self.test_file or target.split(".")[0] in RUNNER_MODULES or target.startswith(PATCHED_IN_TESTS)
