"""The ``unread-code`` family in Python: source run from text (exec, eval, compile and the
library's other runners: a literal's source is read as code where it runs, any other text is
code no file shows), code loaded from paths or bytes, and a runner or a stack-inspecting
function taken to be called under another name.
"""

from __future__ import annotations

import ast

from envs.integrity.scan.model import Finding
from envs.integrity.scan.python_names import BUILTIN_RUNNERS, STACK_CALLS
from envs.integrity.scan.python_tree import ends_in_py, literal
from envs.integrity.scan.python_walk import Walker


class CodeReader(Walker):
    """Code the file runs or loads from text, a path or bytes."""

    def _runs_code(
        self, node: ast.Call, runner: str, at: int = 0, keywords: tuple[str, ...] = ("source",), mode: str = "exec"
    ) -> None:
        """A runner of source text (exec, eval, compile, SOURCE_RUNNERS), its text argument ``at``
        (or by one of ``keywords``). A literal's source is read here as code, at this call's depth
        (exec at import time runs it at import time); any other text (a data file read, made at run
        time) is ``unread-code``, and so is a literal the scan's Python cannot parse (a coding
        cookie it reads otherwise, a later version's syntax). In a test's own body in a test file
        only what lasts counts, and exec there runs a test's own snippet."""
        self.called.add(id(node.func))
        source = (
            node.args[at] if len(node.args) > at else next((k.value for k in node.keywords if k.arg in keywords), None)
        )
        if (
            source is None
            and not any(k.arg is None for k in node.keywords)
            and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            return  # nothing to run (exec() fails), or the code object is another argument
        if isinstance(source, ast.Call) and self.code_runner(source.func) == "compile":
            return  # exec(compile("...", ...)): the compile's source is read where it is
        if runner not in BUILTIN_RUNNERS and (
            isinstance(source, (ast.Lambda, ast.Attribute))
            or (isinstance(source, ast.Name) and source.id in self.functions)
            or (isinstance(source, ast.Call) and self.qualified(source.func) == "functools.partial")
        ):
            return  # timeit.timeit(lambda: f()), timeit.Timer(self.run), partial(f, x): a function, not text
        if self.in_test:
            return
        text: str | bytes | None = literal(source) if source is not None else None
        if text is None and isinstance(source, ast.Constant) and isinstance(source.value, bytes):
            text = source.value  # parsed as bytes: its coding cookie is honoured, as exec honours it
        if text is None:
            self.add("unread-code", node, f"{runner}() of source the scan cannot read", whole=True)
            return
        if runner == "compile":
            given = (
                node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            mode = "eval" if given is not None and literal(given) == "eval" else "exec"
        try:
            tree = ast.parse(text, mode="eval" if mode == "eval" else "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.add("unread-code", node, f"{runner}() of source the scan cannot parse", whole=True)
            return
        inner = type(self)(self.path, test_file=self.test_file)
        inner.clears_exit_hooks = False
        inner.aliases, inner.scopes, inner.star_modules = dict(self.aliases), list(self.scopes), list(self.star_modules)
        inner.module_bound = {name: 0 for name, line in self.module_bound.items() if line < node.lineno}
        inner.depth, inner.in_test, inner.items = self.depth, self.in_test, set(self.items)
        try:
            found = inner.run(tree)
        except (RecursionError, MemoryError):
            found = [Finding("unscannable", self.path, 1, "nested too deep to read")]
        for finding in found:  # filed at the call's first added line, the literal's lines included
            self.add(finding.rule, node, f"{finding.detail} in source {runner}() runs"[:160], whole=True)

    def _loads_code(self, node: ast.Call, name: str) -> None:
        """A loader of code from a path or bytes (CODE_LOADERS): ``unread-code`` unless given a
        path that ends in a literal ``.py`` (``"gen.py"``, ``here / "gen.py"``, ``os.path.join(here,
        "gen.py")``: a file the scan reads where the diff writes it, and flags where it is no
        Python source), or a spec with no loader or the finder's own (``spec_from_loader(name,
        None)``, ``(name, self)``: a meta path finder's everyday spec)."""
        if self.in_test:
            return
        where = {
            "runpy.run_path": 0,
            "importlib.machinery.SourceFileLoader": 1,
            "imp.load_source": 1,
            "importlib.util.spec_from_file_location": 1,
            "importlib.machinery.spec_from_file_location": 1,
        }.get(name)
        if where is not None:
            given = (
                node.args[where]
                if len(node.args) > where
                else next(
                    (k.value for k in node.keywords if k.arg in ("path", "path_name", "location", "pathname")), None
                )
            )
            if given is not None and ends_in_py(given):
                return
        if name.endswith(("spec_from_loader", ".ModuleSpec")):
            loader = (
                node.args[1]
                if len(node.args) > 1
                else next((k.value for k in node.keywords if k.arg == "loader"), None)
            )
            if (
                loader is None
                or (isinstance(loader, ast.Constant) and loader.value is None)
                or (isinstance(loader, ast.Name) and loader.id in ("self", "cls"))
            ):
                return
        self.add("unread-code", node, f"{name}()", whole=True)

    def _taken(self, node: ast.AST) -> None:
        """A stack-inspecting function or a code runner taken, not called here (``peek =
        sys._getframe``, ``partial(inspect.stack)``, ``run = exec``, ``getattr(sys, "_getframe")``,
        ``vars(builtins)["exec"]``): it is called later under another name."""
        if id(node) in self.called or isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            return
        name = self.qualified(node)
        if name in STACK_CALLS:
            self.add("stack-inspection", node, f"{name} (taken, to be called elsewhere)")
        elif not self.in_test and (runner := self.code_runner(node)) is not None:
            self.add("unread-code", node, f"{runner} (taken, to be called elsewhere)")
