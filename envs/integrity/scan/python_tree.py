"""Pure helpers over a Python syntax tree the Python rules share: literals and strings built from
them, names bound by a scope or for certain by a module, names looked up through a namespace.
"""

from __future__ import annotations

import ast
from typing import TypeGuard

from envs.integrity.scan.python_names import KNOWN_NAMES


def runner_receiver(node: ast.AST) -> bool:
    """Whether an expression reaches pytest's plugin machinery by its usual names
    (``config.pluginmanager``, ``config.hook.pytest_pyfunc_call``, ``request.session``): a
    project's own pluggy (``pm.hook.x.get_hookimpls()``) is not the runner's."""
    text = ast.unparse(node)
    return any(word in text for word in ("pluginmanager", "config", "session", "request", "pytest_"))


def namespace(node: ast.AST) -> bool:
    """``vars(x)`` or ``x.__dict__``: an object's attributes as a mapping."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars") or (
        isinstance(node, ast.Attribute) and node.attr == "__dict__"
    )


def fold(node: ast.AST) -> str | None:
    """The string an expression of string literals makes (``+``, f-strings of literals,
    ``"sep".join`` of a literal list or tuple), or None when any part is not a literal. A
    literal on its own is left to ``visit_Constant``: only what is built counts here."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = literal(node.left), literal(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [
            literal(v.value if isinstance(v, ast.FormattedValue) and not v.format_spec else v) for v in node.values
        ]
        return "".join(p for p in parts if p is not None) if all(p is not None for p in parts) else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], (ast.List, ast.Tuple))
    ):
        sep, items = literal(node.func.value), [literal(e) for e in node.args[0].elts]
        if sep is not None and all(i is not None for i in items):
            return sep.join(i for i in items if i is not None)
    return None


def literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return fold(node)


def call_of(node: ast.AST, name: str) -> TypeGuard[ast.Call]:
    """``name(...)``: a call of the bare name (a builtin such as getattr, vars, globals)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


PRIVATE_MODULES = {
    "importlib._bootstrap_external.": "importlib.machinery.",
    "_frozen_importlib_external.": "importlib.machinery.",
    "importlib._bootstrap.": "importlib.machinery.",
    "_frozen_importlib.": "importlib.machinery.",
}
"""Where the import system's classes really live, named as their public module names them:
``importlib._bootstrap_external.SourceFileLoader`` is ``importlib.machinery.SourceFileLoader``."""


def private_module(name: str) -> str:
    for private, public in PRIVATE_MODULES.items():
        if name.startswith(private):
            return public + name[len(private) :]
    return name


def known(name: str) -> bool:
    """A name some rule reads (so a bare name from a star import resolves only to those)."""
    return name in KNOWN_NAMES


def bound_in(scope: ast.AST) -> set[str]:  # noqa: C901 (one branch per statement kind that binds a name)
    """The names ``scope`` (a module, a function, a lambda) binds itself, nested functions and
    lambdas aside: its parameters, defs and classes, and the targets of assignments, loops,
    ``with``, ``except`` and walruses, except an assignment whose value reads the name it binds
    (``exec = exec``, ``compile = partial(compile)``: still the builtin) and an annotation with no
    value (it binds nothing)."""
    bound: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = scope.args
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults = {
            a.arg: d for a, d in zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults)
        }
        defaults.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None})
        # a parameter whose default is the name itself (def run(s, exec=exec)) is still the builtin
        bound.update(
            a.arg
            for a in (*positional, *arguments.kwonlyargs)
            if a.arg not in defaults
            or a.arg not in {n.id for n in ast.walk(defaults[a.arg]) if isinstance(n, ast.Name)}
        )
        bound.update(a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None)
        body: list[ast.AST] = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    else:
        body = [scope]

    def names(target: ast.AST, value: ast.AST | None) -> None:
        read = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and node.id not in read:
                bound.add(node.id)

    declared: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)  # a class body's own names are the class's, not this scope's
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)  # the module's or an outer function's name, not this one's
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        if isinstance(node, ast.Lambda) or node is None:
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names(target, node.value)
        elif (
            isinstance(node, (ast.AnnAssign, ast.AugAssign))
            and node.value is not None
            or isinstance(node, ast.NamedExpr)
        ):
            names(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):  # a comprehension's target stays in it
            names(node.target, node.iter)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            names(node.optional_vars, node.context_expr)
        elif (
            isinstance(node, ast.ExceptHandler)
            and node.name
            or isinstance(node, (ast.MatchAs, ast.MatchStar))
            and node.name
        ):
            bound.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return bound - declared


def _certain(statements: list[ast.stmt]) -> dict[str, int]:
    """What ``statements`` bind on every way through them, each with the line it holds after."""
    found: dict[str, int] = {}
    for statement in statements:
        names: dict[str, int] = {}
        end = getattr(statement, "end_lineno", None) or statement.lineno
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[statement.name] = end
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: end for a in statement.names if a.name != "*"})
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            read = {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name)}
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(
                {n.id: end for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and n.id not in read}
            )
        elif isinstance(statement, ast.If) and statement.orelse:
            body, other = _certain(statement.body), _certain(statement.orelse)
            names.update({name: end for name in body.keys() & other.keys()})
        elif isinstance(statement, ast.Try) and statement.handlers:
            ways = [_certain(statement.body), *[_certain(h.body) for h in statement.handlers]]
            names.update({name: end for name in set.intersection(*[set(w) for w in ways])})
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            names.update(_certain(statement.body))
        for name, line in names.items():
            found.setdefault(name, line)
    return found


def module_bindings(tree: ast.AST) -> dict[str, int]:
    """The names a module's own top-level statements bind for certain (a def, a class, an import,
    an assignment of anything but the name itself), each with the line after which it holds. A
    loop may not run, nor one branch of an ``if`` or a ``try``: a name counts there only where every
    way through binds it (``try: from regex import compile`` / ``except ImportError: from re import
    compile``); one bound from a function (``global``) may never be."""
    body = getattr(tree, "body", [])
    found = _certain(body if isinstance(body, list) else [])  # an eval's Expression holds one expression
    for node in ast.walk(tree):  # a name deleted anywhere (del exec, globals().pop("exec")) may be the builtin again
        if isinstance(node, ast.Delete):
            for target in node.targets:
                key = (
                    target.id
                    if isinstance(target, ast.Name)
                    else literal(target.slice)
                    if isinstance(target, ast.Subscript)
                    else None
                )
                found.pop(key or "", None)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pop"
            and node.args
        ):
            found.pop(literal(node.args[0]) or "", None)
    return found


def ends_in_py(node: ast.AST) -> bool:
    """A path expression whose last part is a literal ending in ``.py``: ``"gen.py"``, ``here /
    "gen.py"``, ``os.path.join(here, "gen.py")``, ``f"{here}/gen.py"``."""
    text = literal(node)
    if text is not None:
        return text.endswith(".py") and not text.startswith("/")  # not one written at run time in /tmp
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
        return ends_in_py(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # "%s/gen.py" % here
        return ends_in_py(node.left)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("resolve", "absolute", "as_posix", "expanduser")
        and not node.args
    ):
        return ends_in_py(node.func.value)  # (here / "gen.py").resolve()
    if (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and (
            isinstance(node.func, ast.Name)
            and node.func.id in ("str", "Path", "PurePath")
            or isinstance(node.func, ast.Attribute)
            and node.func.attr in ("fspath", "abspath", "realpath", "normpath", "Path", "expanduser")
        )
    ):
        return ends_in_py(node.args[0])  # str(here / "gen.py"), os.path.abspath(...)
    if (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("join", "joinpath")
    ):
        return ends_in_py(node.args[-1])
    if isinstance(node, ast.JoinedStr) and node.values:
        return ends_in_py(node.values[-1])
    return False


def namespace_of_builtins(name: str | None) -> bool:
    """``builtins`` itself (``__builtins__`` is its dict outside ``__main__``) or a module's
    ``__dict__`` (``from builtins import __dict__ as b``): a literal key there names an attribute."""
    return name is not None and (name == "builtins" or name.endswith(".__dict__"))


def keyed_lookup(node: ast.AST) -> tuple[ast.AST, str] | None:
    """``X["key"]`` or ``X.get("key")``, a literal key: (X, key)."""
    if isinstance(node, ast.Subscript) and (key := literal(node.slice)) is not None:
        return node.value, key
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and (key := literal(node.args[0])) is not None
    ):
        return node.func.value, key
    return None


def namespace_owner(node: ast.AST) -> ast.AST | None:
    """Whose attributes ``node`` is as a mapping: ``x`` of ``vars(x)`` or ``x.__dict__``."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if call_of(node, "vars") and node.args:
        return node.args[0]
    return None
