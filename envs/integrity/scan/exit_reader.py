"""The reader behind ``exit_hooks.refusal``: a module's bindings collected, then what a hook and
the module's functions it calls do, statement by statement, each value kept as data or a handle.
"""

from __future__ import annotations

import ast
import builtins
import posixpath
from collections.abc import Iterable, Mapping, Sequence

from envs.integrity.scan.exit_names import (
    CLEANUPS,
    DATA_CALLS,
    DATA_CLEANUPS,
    DATA_METHODS,
    HANDLE_CALLS,
    HANDLE_METHODS,
    MAX_FUNCTIONS,
    RUN_TIME_BINDERS,
    Kind,
    Qualify,
    names_bound,
    output_literal,
    own_nodes,
    short,
)


class Reader:
    def __init__(self, tree: ast.Module, qualified: Qualify) -> None:
        self.qualified = qualified
        self.bindings: dict[str, list[tuple[str, ast.AST, frozenset[str]]]] = {}
        """Module name -> every binding of it: (``value``, the value, the function's own names
        where a function binds it through ``global``) or (``import`` / ``def`` / ``other``, the node)."""
        self.module_nodes: set[int] = set()
        self.mutated: set[str] = set()
        """Names whose attributes the module sets or deletes (``_log.close = forge``): what a
        method of theirs runs is not the standard library's."""
        self.dynamic: str | None = None
        self.followed: list[int] = []
        self.evaluating: set[str] = set()
        self._aliases_set: set[str] = set()
        self._collect(tree)
        self.dynamic = self.dynamic or self._alias_refusal()

    # ---- what the module binds
    def _collect(self, tree: ast.Module) -> None:
        for node in own_nodes(tree):
            self.module_nodes.add(id(node))
            self._bind(node, None, frozenset())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                self.dynamic = "the module star-imports names the scan cannot read"
            elif isinstance(node, ast.Name) and node.id in RUN_TIME_BINDERS:
                self.dynamic = f"the module binds names at run time ({node.id})"
            elif isinstance(node, ast.Attribute) and node.attr == "modules" and self.qualified(node) == "sys.modules":
                self.dynamic = "the module reaches sys.modules"
            if isinstance(node, ast.Attribute) and node.attr == "__dict__":
                self.dynamic = "the module reaches an object's __dict__"
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self._set_on(node.value)
            if (
                isinstance(node, ast.Call)
                and node.args
                and (
                    (isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"))
                    or (isinstance(node.func, ast.Attribute) and node.func.attr in ("__setattr__", "__delattr__"))
                )
            ):
                self._set_on(node.args[0])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                declared = {n for s in own_nodes(node) if isinstance(s, ast.Global) for n in s.names}
                if declared:  # what the function binds of these is the module's
                    own = frozenset(names_bound(node) - declared)
                    for inner in own_nodes(node):
                        self._bind(inner, declared, own)

    def _set_on(self, target: ast.AST) -> None:
        """An attribute of ``target`` is set or deleted: a handle's method is then the module's
        own (``_log.close = forge``); and where ``target`` may be a module (an import, or a name
        bound to another name, an attribute or an item: ``_o = os; _o.remove = os._exit``), no
        call the hook makes is known to be the standard library's, so nothing is cleared."""
        if not isinstance(target, ast.Name):
            self.dynamic = f"the module sets an attribute of {ast.unparse(target)[:40]}"
            return
        self.mutated.add(target.id)
        self._aliases_set.add(target.id)

    def _alias_refusal(self) -> str | None:
        for name in sorted(self._aliases_set):
            for kind, value, _ in self._of_module(name):
                if kind == "import" or (
                    kind == "value"
                    and isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Starred, ast.NamedExpr))
                ):
                    return f"the module sets attributes of {name}, which may be a module"
        return None

    def _bind(self, node: ast.AST, only: set[str] | None, local: frozenset[str]) -> None:  # noqa: C901 (one branch per binding form of the grammar)
        def add(name: str, kind: str, what: ast.AST) -> None:
            if only is None or name in only:
                self.bindings.setdefault(name, []).append((kind, what, local))

        def stored(target: ast.AST, kind: str = "other", value: ast.AST | None = None) -> None:
            if isinstance(target, ast.Name) and value is not None:
                add(target.id, "value", value)
                return
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    add(name.id, kind, node)

        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.name, "def", node)
        elif isinstance(node, ast.ClassDef):
            add(node.name, "other", node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                add((alias.asname or alias.name).split(".")[0], "import", node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                stored(target, value=node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            stored(node.target, value=node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
            stored(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            stored(node.optional_vars)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                stored(target)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            add(node.name, "other", node)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            add(node.rest, "other", node)

    def _of_module(self, name: str) -> list[tuple[str, ast.AST, frozenset[str]]]:
        return self.bindings.get(name, [])

    def _only_def(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The def that is the module's one binding of ``name``, if it is that."""
        bound = self._of_module(name)
        node = bound[0][1] if len(bound) == 1 else None
        return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None

    def name_of(self, node: ast.AST, scope: Mapping[str, Kind | None]) -> str | None:
        """The module path ``node`` (a name, or attributes of one) names: through an import the
        module never rebinds, or a builtin where the module binds nothing of the name."""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in scope:
            return None
        kinds = {kind for kind, _, _ in self._of_module(root.id)}
        if not kinds:
            return f"builtins.{ast.unparse(node)}" if root is node else None
        return self.qualified(node) if kinds == {"import"} else None

    # ---- what is registered
    def registered(self, target: ast.expr, args: Sequence[ast.expr], keywords: Sequence[ast.keyword]) -> str | None:
        if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in keywords):
            return "registers with arguments unpacked at run time"
        if isinstance(target, ast.Lambda):
            return self.lambda_(target, args, keywords)
        if isinstance(target, ast.Name):
            defined = self._only_def(target.id)
            if defined is not None:
                return self.function(defined, args, keywords)
            bound = self._of_module(target.id)
            name = self.name_of(target, {})
            if name in CLEANUPS:
                return self.handed(args, keywords, name, {})
            if len(bound) > 1:
                return f"registers {target.id}, which the module binds more than once"
            if not bound:
                return f"registers {target.id}, a builtin"
            if bound[0][0] == "import":
                return f"registers {target.id}, imported from elsewhere"
            return f"registers {target.id}, which the scan cannot read"
        if isinstance(target, ast.Attribute):
            name = self.name_of(target, {})
            if name in CLEANUPS:
                return self.handed(args, keywords, name, {})
            if self._method_clears(target, {}):
                return self.handed(args, keywords, ast.unparse(target), {})
            return f"registers {short(target)}, which the scan cannot read"
        if isinstance(target, ast.Call):
            return f"registers what {short(target.func)}() returns"
        return "registers what the scan cannot read"

    def function(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        args: Sequence[ast.expr],
        keywords: Sequence[ast.keyword],
        decorated: bool = False,
    ) -> str | None:
        if isinstance(node, ast.AsyncFunctionDef):
            return f"{node.name} is async"
        if node.decorator_list and not decorated:
            return f"{node.name} is decorated"  # its name is what the decorator returned
        if id(node) in self.followed:
            return None  # read already, or being read (a recursion)
        if len(self.followed) >= MAX_FUNCTIONS:
            return f"{node.name}: more functions than the scan follows from one hook"
        self.followed.append(id(node))
        scope = self.parameters(node.name, node.args, args, keywords)
        if isinstance(scope, str):
            return scope
        declared = {n for s in own_nodes(node) if isinstance(s, ast.Global) for n in s.names}
        for name in names_bound(node) - declared - set(scope):
            scope[name] = "data"  # a local the body may only set to a literal (``statements``)
        return self.statements(node.name, node.body, scope)

    def lambda_(self, node: ast.Lambda, args: Sequence[ast.expr], keywords: Sequence[ast.keyword]) -> str | None:
        scope = self.parameters("<lambda>", node.args, args, keywords)
        if isinstance(scope, str):
            return scope
        return self.effect("<lambda>", node.body, scope)

    def parameters(
        self, where: str, signature: ast.arguments, args: Sequence[ast.expr], keywords: Sequence[ast.keyword]
    ) -> dict[str, Kind | None] | str:
        """What each parameter is given (an argument, else its default): data or a handle, or
        why not."""
        if signature.vararg or signature.kwarg:
            return f"{where} takes *args or **kwargs"
        positional = [*signature.posonlyargs, *signature.args]
        if len(args) > len(positional):
            return f"{where} is given more arguments than it takes"
        given: dict[str, ast.expr] = {p.arg: a for p, a in zip(positional, args)}
        named = {p.arg for p in (*signature.args, *signature.kwonlyargs)}
        for keyword in keywords:
            if keyword.arg not in named or keyword.arg in given:
                return f"{where} is given an argument it does not take"
            given[str(keyword.arg)] = keyword.value
        defaults = dict(
            zip([p.arg for p in positional][len(positional) - len(signature.defaults) :], signature.defaults)
        )
        defaults.update({p.arg: d for p, d in zip(signature.kwonlyargs, signature.kw_defaults) if d is not None})
        scope: dict[str, Kind | None] = {}
        for param in (*positional, *signature.kwonlyargs):
            value = given.get(param.arg, defaults.get(param.arg))
            if value is None:
                return f"{where}'s parameter {param.arg} is given nothing"
            kind = self.value(value, {})  # arguments and defaults are the module's
            if kind is None:
                return f"{where} is given {short(value)}, which is no data the module made"
            scope[param.arg] = kind
        return scope

    # ---- what it does
    def statements(self, where: str, body: Iterable[ast.stmt], scope: dict[str, Kind | None]) -> str | None:
        for statement in body:
            why = self.statement(where, statement, scope)
            if why is not None:
                return why
        return None

    def statement(self, where: str, node: ast.stmt, scope: dict[str, Kind | None]) -> str | None:
        if isinstance(node, (ast.Pass, ast.Global)):
            return None
        if isinstance(node, ast.Expr):
            return None if isinstance(node.value, ast.Constant) else self.effect(where, node.value, scope)
        if isinstance(node, ast.Return):
            return (
                None
                if node.value is None or isinstance(node.value, ast.Constant)
                else f"{where} returns {short(node.value)}"
            )
        if isinstance(node, ast.Assign):
            if all(isinstance(t, ast.Name) for t in node.targets) and isinstance(node.value, ast.Constant):
                return None  # ``_handle = None`` once it is closed
            return f"{where} sets {short(node.targets[0])} to what is no literal"
        if isinstance(node, ast.If):
            if self.value(node.test, scope) is None:
                return f"{where} tests {short(node.test)}, which the scan cannot read"
            return self.statements(where, [*node.body, *node.orelse], scope)
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                if handler.type is not None and not self.builtin_exceptions(handler.type, scope):
                    return f"{where} catches {short(handler.type)}, no builtin exception"
                if handler.name:
                    scope[handler.name] = None  # an exception is no data of the module's
            return self.statements(
                where, [*node.body, *(s for h in node.handlers for s in h.body), *node.orelse, *node.finalbody], scope
            )
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (
                    item.optional_vars is not None
                    or not isinstance(call, ast.Call)
                    or call.keywords
                    or self.name_of(call.func, scope) != "contextlib.suppress"
                    or not all(self.builtin_exceptions(a, scope) for a in call.args)
                ):
                    return f"{where} enters {short(call)}"
            return self.statements(where, node.body, scope)
        return f"{where} has a statement that is no cleanup ({type(node).__name__.lower()})"

    def effect(self, where: str, node: ast.expr, scope: Mapping[str, Kind | None]) -> str | None:
        """What evaluating ``node`` for its effect does: None where it is cleanup (or inert)."""
        if not isinstance(node, ast.Call):
            return None if self.value(node, scope) is not None else f"{where} evaluates {short(node)}"
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return f"{where} unpacks arguments at run time"
        func = node.func
        defined = self._only_def(func.id) if isinstance(func, ast.Name) and func.id not in scope else None
        if defined is not None:
            why = self.handed(node.args, node.keywords, defined.name, scope)
            return f"{where} {why}" if why is not None else self.function(defined, node.args, node.keywords)
        name = self.name_of(func, scope)
        if name in CLEANUPS or name in DATA_CALLS or (name is None and self._method_clears(func, scope)):
            why = self.handed(node.args, node.keywords, name or ast.unparse(func), scope)
            return None if why is None else f"{where} {why}"
        return f"{where} calls {short(func)}" + (
            "" if name is not None or isinstance(func, ast.Name) else ", on what the module did not open"
        )

    def _method_clears(self, func: ast.expr, scope: Mapping[str, Kind | None]) -> bool:
        """``handle.close`` on a handle the module opened, ``path.unlink`` on a path it made."""
        if not isinstance(func, ast.Attribute):
            return False
        kind = self.value(func.value, scope)
        return (kind == "handle" and func.attr in HANDLE_METHODS) or (kind == "data" and func.attr in DATA_CLEANUPS)

    def handed(
        self, args: Sequence[ast.expr], keywords: Sequence[ast.keyword], callee: str, scope: Mapping[str, Kind | None]
    ) -> str | None:
        """None where every argument is data the module made or a handle it opened (never a
        function: ``rmtree(p, onerror=print)`` runs print)."""
        for value in (*args, *(k.value for k in keywords)):
            if self.value(value, scope) is None:
                return f"passes {short(value)} to {callee}, which is no data the module made"
        return None

    def builtin_exceptions(self, node: ast.expr, scope: Mapping[str, Kind | None]) -> bool:
        """A builtin exception class, or a tuple of them (the module binds none of their names):
        a class of the module's could run its metaclass's ``__instancecheck__``."""
        if isinstance(node, ast.Tuple):
            return all(self.builtin_exceptions(e, scope) for e in node.elts)
        if not isinstance(node, ast.Name) or node.id in scope or self._of_module(node.id):
            return False
        found = getattr(builtins, node.id, None)
        return isinstance(found, type) and issubclass(found, BaseException)

    # ---- what a value is
    def value(self, node: ast.AST, scope: Mapping[str, Kind | None]) -> Kind | None:
        """``data`` (literals, paths and tests on them, made by the standard library from data),
        ``handle`` (one of HANDLE_CALLS' objects), or None: anything else, a builtin function's
        name or an object of the module's own class included."""
        if isinstance(node, ast.Constant):
            return "data"
        if isinstance(node, ast.FormattedValue):
            if node.format_spec is not None and self.value(node.format_spec, scope) is None:
                return None
            return "data" if self.value(node.value, scope) else None
        if isinstance(node, (ast.JoinedStr, ast.BoolOp)):
            kinds = [self.value(v, scope) for v in node.values]
            return None if None in kinds else "handle" if "handle" in kinds else "data"
        if isinstance(node, ast.BinOp):
            return "data" if self.value(node.left, scope) and self.value(node.right, scope) else None
        if isinstance(node, ast.UnaryOp):
            return "data" if self.value(node.operand, scope) else None
        if isinstance(node, ast.Compare):
            return "data" if all(self.value(v, scope) for v in (node.left, *node.comparators)) else None
        if isinstance(node, ast.Name):
            return self._name(node.id, scope)
        if isinstance(node, ast.Attribute):  # a path's .parent, a handle's .name; not a module's (sys.stdout)
            return "data" if self.name_of(node, scope) is None and self.value(node.value, scope) else None
        if (
            isinstance(node, ast.Call)
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and all(k.arg is not None for k in node.keywords)
        ):
            return self._made(node, scope)
        return None

    def _name(self, name: str, scope: Mapping[str, Kind | None]) -> Kind | None:
        if name in scope:
            return scope[name]
        if name in ("__file__", "__name__"):
            return "data"
        bound = self._of_module(name)
        if not bound or name in self.evaluating or name in self.mutated or any(kind != "value" for kind, _, _ in bound):
            return None
        self.evaluating.add(name)
        try:
            kinds = [self.value(value, dict.fromkeys(local)) for _, value, local in bound]
        finally:
            self.evaluating.discard(name)
        return None if None in kinds else "handle" if "handle" in kinds else "data"

    def _may_be_output(self, where: ast.AST | None) -> bool:
        """``open``'s target read as far as the module spells it: a literal, a name bound once
        to one, or ``os.path.join`` of literals (``open(_FD)``, ``open(b"//dev/stdout")``,
        ``os.path.join("/proc", "self", "fd", "1")``)."""
        if isinstance(where, ast.Name):
            bound = self._of_module(where.id)
            where = bound[0][1] if len(bound) == 1 and bound[0][0] == "value" else where
        if isinstance(where, ast.Constant):
            return output_literal(where.value)
        if isinstance(where, ast.Call) and self.qualified(where.func) == "os.path.join" and where.args:
            parts = [a.value for a in where.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            return len(parts) == len(where.args) and output_literal(posixpath.join(*parts))
        return False

    def _made(self, node: ast.Call, scope: Mapping[str, Kind | None]) -> Kind | None:
        if any(self.value(v, scope) is None for v in (*node.args, *(k.value for k in node.keywords))):
            return None
        name = self.name_of(node.func, scope)
        if name in DATA_CALLS:
            return "data"
        if name in HANDLE_CALLS:
            where = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg in ("file", "filename")), None)
            )
            if self._may_be_output(where) or any(k.arg in ("closefd", "opener") for k in node.keywords):
                return None  # open(1, "w"), FileHandler("/dev/stdout"): the output itself
            return "handle"
        if (
            name is None
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in DATA_METHODS
            and self.value(node.func.value, scope) == "data"
        ):
            return "data"
        return None
