"""The ``monkeypatch`` family in Python (the standard library, the import system or the runner
patched: by assignment, ``setattr``, a namespace updated) and, in a test file, a collected test's
function or class swapped (``runner-hook``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from envs.integrity.scan.python_code import CodeReader
from envs.integrity.scan.python_items import ALWAYS, constant_answer, item_attribute
from envs.integrity.scan.python_names import FUNCTION_INTERNALS, IMPORT_SYSTEM, ITEM_ATTRIBUTES, PATCHED_MODULES
from envs.integrity.scan.python_tree import literal, namespace


class PatchReader(CodeReader):
    """Patches by assignment and by setter, and a test's function swapped."""

    def _test_file_call(self, node: ast.Call, name: str | None) -> None:
        """What a call in a test file can do to a collected test without a setattr: its namespace
        updated (``vars(item).update(runtest=f)``), its code replaced by ``update_wrapper``."""
        if isinstance(node.func, ast.Attribute) and node.func.attr == "update" and namespace(node.func.value):
            keys = [k.arg for k in node.keywords] + [
                literal(k) for a in node.args if isinstance(a, ast.Dict) for k in a.keys if k is not None
            ]
            if any(key in (*ITEM_ATTRIBUTES, "obj") for key in keys):
                self.add("runner-hook", node, "an object's namespace updated with a test's function", whole=True)
        if name in ("functools.update_wrapper", "functools.wraps"):
            for keyword in node.keywords:
                if keyword.arg == "assigned" and any(
                    literal(e) in FUNCTION_INTERNALS for e in getattr(keyword.value, "elts", [])
                ):
                    self.add("monkeypatch", node, f"{name}(assigned=...) copies a function's code", whole=True)

    def _setter(self, node: ast.Call) -> None:
        """``setattr(x, "a", v)``; in a test file also pytest's ``monkeypatch.setattr`` (its target
        a dotted path in a string: ``monkeypatch.setattr("_pytest.runner.call_and_report", v)``),
        ``object.__setattr__`` and ``mock.patch.object``."""
        by_name = isinstance(node.func, ast.Name)
        setter = (
            node.func.id
            if isinstance(node.func, ast.Name)
            else node.func.attr
            if self.lasting and isinstance(node.func, ast.Attribute)
            else None
        )
        if setter not in (("setattr", "delattr") if by_name else ("setattr", "delattr", "__setattr__", "object")):
            return
        if not node.args:
            return
        first, shown = node.args[0], ast.unparse(node.func)[:40]
        args = node.args
        if (
            setter == "__setattr__"
            and isinstance(node.func, ast.Attribute)
            and not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("object", "type"))
        ):
            first, args = node.func.value, [node.func.value, *node.args]  # item.__setattr__("obj", f)
        dotted = literal(first) if not by_name else None
        target: str | None
        attribute: str | None
        if dotted is not None:  # the dotted form: the path names the attribute, the next argument is the value
            target, attribute, value = dotted, dotted.rsplit(".", 1)[-1], node.args[1] if len(node.args) > 1 else None
        else:
            target = self.qualified(first)
            attribute = literal(args[1]) if len(args) > 1 else None
            value = args[2] if len(args) > 2 else None
            if target is not None and attribute is not None:
                target = f"{target}.{attribute}"  # setattr(sys, "meta_path", ...) patches sys.meta_path
        if (
            target is not None
            and target.split(".")[0] in PATCHED_MODULES
            and self._patches(target)
            and not (self.test_file and isinstance(value, ast.Constant))
        ):
            self.add("monkeypatch", node, f"{shown}({target}, ...)", whole=True)
        elif attribute in FUNCTION_INTERNALS:
            self.add("monkeypatch", node, f"{shown}(..., {attribute!r})", whole=True)
        elif self.test_file and item_attribute(first, attribute, value, self.in_test > 0, self.items):
            self.add("runner-hook", node, f"{shown}(..., {attribute!r})", whole=True)

    # ---- assignments
    def _targets(self, targets: Sequence[ast.expr], value: ast.expr | None = None) -> None:
        """Each target's finding is filed at the target (its own lines): an argument added to the
        value of a statement the project had (click's ``sys.stdout = Wrapper(\n  ...)``) is not
        a patch of the agent's."""
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):  # nested: (_, (item.obj, _)) = ...
                self._targets(target.elts)
                continue
            for element in [target.value if isinstance(target, ast.Starred) else target]:
                if isinstance(element, ast.Attribute) and element.attr in FUNCTION_INTERNALS:
                    self.add("monkeypatch", element, f".{element.attr} = ...")
                    continue
                base = element.value if isinstance(element, ast.Subscript) else element
                name = self.qualified(base) if isinstance(base, (ast.Attribute, ast.Name)) else None
                # in a test file a setting given a constant is a setting (unittest.TestCase.maxDiff
                # = None, _pytest's truncate.DEFAULT_MAX_LINES = 9999), not a patch
                if (
                    name is not None
                    and (
                        name in IMPORT_SYSTEM
                        or (isinstance(element, ast.Attribute) and name.split(".")[0] in PATCHED_MODULES)
                    )
                    and self._patches(name)
                    and not (self.test_file and isinstance(value, ast.Constant))
                ):
                    self.add("monkeypatch", element, f"{name} = ...")
                elif (
                    self.test_file
                    and isinstance(element, ast.Attribute)
                    and item_attribute(element.value, element.attr, value, self.in_test > 0, self.items)
                ):
                    self.add("runner-hook", element, f".{element.attr} = ...")
                elif (
                    self.test_file
                    and isinstance(element, ast.Subscript)
                    and literal(element.slice) in (*ITEM_ATTRIBUTES, "obj")
                    and namespace(element.value)
                ):
                    self.add("runner-hook", element, f"[{literal(element.slice)!r}] = ... (an object's namespace)")

    def visit_For(self, node: ast.For) -> None:
        self._targets([node.target])  # for request.node.obj in [f]: ...
        self.generic_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self._targets([node.target])
        self.generic_visit(node)

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:  # with nullcontext(f) as request.node.obj: ...
            self._targets([node.optional_vars])
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._targets([node.target])
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node.targets, node.value)
        if not self.test_file and isinstance(node.value, ast.Lambda):
            for target in node.targets:
                name = (
                    target.id
                    if isinstance(target, ast.Name)
                    else target.attr
                    if isinstance(target, ast.Attribute)
                    else None
                )
                if name in ALWAYS and constant_answer(node.value.body, ALWAYS[name]):
                    self.add("always-equal", node, f"{name} = a lambda that answers {ALWAYS[name]}")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets([node.target], node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets([node.target], node.value)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node.targets)
        self.generic_visit(node)
