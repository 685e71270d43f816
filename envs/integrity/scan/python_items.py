"""A collected test swapped from a test file (``runner-hook``: ``request.node.obj = ...``, the
names a file gives an item), and a value made equal to anything (``always-equal``).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Collection, Iterable, Mapping

from envs.integrity.scan.python_names import ITEM_ATTRIBUTES, ITEM_NAMES
from envs.integrity.scan.python_tree import literal, namespace


def item_attribute(
    receiver: ast.AST,
    attribute: object,
    value: ast.expr | None = None,
    in_test: bool = False,
    items: Collection[str] = (),
) -> bool:
    """Whether setting ``attribute`` on ``receiver`` swaps a collected test's function or class (in
    a test file): ITEM_ATTRIBUTES on anything, ``__class__`` on anything but ``self``, ``obj`` on
    what ITEM_NAMES names or on a class (``type(item).obj``) unless given a literal, which is
    no function (``self.obj = obj``, click's ``ctx.obj``, a tree's ``node.obj = {}`` are everyday).
    In a test's own body only ITEM_ATTRIBUTES: a mock's ``__class__`` is set there, and
    ``item.obj = Thing()`` names the test's own things."""
    if attribute in ITEM_ATTRIBUTES:
        return True
    if in_test:
        return False
    if attribute == "__class__":
        return not (isinstance(receiver, ast.Name) and receiver.id == "self")
    if attribute != "obj" or isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set)):
        return False
    if (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "type") or (
        isinstance(receiver, ast.Attribute) and receiver.attr == "__class__"
    ):
        return True
    return _an_item(receiver, items)


def _an_item(node: ast.AST, items: Collection[str]) -> bool:
    """Whether ``node`` holds a collected test by one of its usual names (ITEM_NAMES:
    ``request.node``, a hook's ``item``), looked up by a literal (``getattr(request, "node")``),
    taken from a list of them (``items[0]``), or under a name the file gave one (``items``)."""
    if isinstance(node, ast.Attribute):
        return node.attr in ITEM_NAMES
    if isinstance(node, ast.Name):
        return node.id in ITEM_NAMES or node.id in items
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) > 1
    ):
        return literal(node.args[1]) in ITEM_NAMES
    if isinstance(node, ast.Subscript):  # items[0], vars(request)["node"]
        return _item_list(node.value) or (literal(node.slice) in ITEM_NAMES and namespace(node.value))
    return False


def _item_list(node: ast.AST) -> bool:
    """pytest's list of collected tests: ``items`` (a collection hook's argument), a session's
    ``items`` (``session.items``, ``request.session.items``), a slice of either."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        return _item_list(node.value)
    if isinstance(node, ast.Name):
        return node.id == "items"
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "items"
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "session")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "session")
        )
    )


_ITERATION = frozenset({"enumerate", "list", "tuple", "sorted", "reversed", "iter", "set", "filter"})
"""Calls that pass a list's elements on: ``for i, it in enumerate(items)`` binds an item."""


def item_names(tree: ast.AST) -> set[str]:  # noqa: C901 (one branch per form a collected item takes)
    """The names a file gives a collected test (``n = request.node``, ``for it in items``, ``for i,
    it in enumerate(session.items)``, ``(n := request.node)``, ``a, n = x, request.node``, ``with
    nullcontext(request.node) as n``), to the fixed point (``m = n``): ``.obj`` set on one is a
    test's function swapped as on ``request.node``. Each binding is tried again only when a name it
    reads becomes an item, so a chain of any order takes one pass."""
    found: set[str] = set()
    bindings: list[tuple[ast.AST, ast.AST, bool]] = []
    functions: dict[str, list[ast.arguments]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node.args)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            bindings += [(t, node.value, False) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            bindings.append((node.target, node.value, False))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            bindings.append((node.target, node.iter, True))
        elif (
            isinstance(node, ast.withitem)
            and node.optional_vars is not None
            and isinstance(node.context_expr, ast.Call)
        ):
            bindings += [(node.optional_vars, a, False) for a in node.context_expr.args]
        elif isinstance(node, ast.Call):
            bindings += _arguments_bound(node, functions)

    def holds(value: ast.AST, iterated: bool) -> bool:
        if not iterated:
            return _an_item(value, found)
        return _item_list(value) or (
            isinstance(value, (ast.List, ast.Tuple, ast.Set)) and any(_an_item(e, found) for e in value.elts)
        )

    def bind(target: ast.AST, value: ast.AST, iterated: bool) -> list[str]:
        """The names this binding makes items now."""
        if (
            iterated
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in _ITERATION
            and value.args
        ):
            inner = value.args[-1] if value.func.id == "filter" else value.args[0]
            if value.func.id == "enumerate" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                return bind(target.elts[1], inner, True)
            return bind(target, inner, True)
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and not iterated:
            return [name for t, v in zip(target.elts, value.elts) for name in bind(t, v, False)]
        if isinstance(target, ast.Name) and target.id not in found and holds(value, iterated):
            found.add(target.id)
            return [target.id]
        return []

    readers: dict[str, list[tuple[ast.AST, ast.AST, bool]]] = {}
    work: list[str] = []
    for binding in bindings:
        for node in ast.walk(binding[1]):
            if isinstance(node, ast.Name):
                readers.setdefault(node.id, []).append(binding)
        work += bind(*binding)
    while work:
        for binding in readers.get(work.pop(), ()):
            work += bind(*binding)
    return found


ALWAYS = {"__eq__": True, "__ne__": False}
"""The comparisons whose constant answer makes a value equal to anything: a result that is such
a value passes every ``assert result == expected`` (a review's attack: ``parse_duration`` returned
an ``int`` whose ``__eq__`` said True, and every hidden case passed, honestly reported). A sentinel
that equals anything (``mock.ANY``) is test code's, not a fix's. An answer computed at run time
(``return not 0``) is past the scan."""


def always_answers(function: ast.FunctionDef | ast.AsyncFunctionDef, answer: bool) -> bool:
    """Whether every ``return`` of ``function`` (not of a function nested in it) gives a literal
    of ``answer``'s truth, and the body ends in one: it answers the same whatever it is given."""
    returns = [n for n in _own_nodes(function) if isinstance(n, ast.Return)]
    return (
        bool(returns)
        and isinstance(function.body[-1], ast.Return)
        and all(r.value is not None and constant_answer(r.value, answer) for r in returns)
    )


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a function's body, not those of the functions, lambdas and classes in it."""
    work = list(ast.iter_child_nodes(function))
    while work:
        node = work.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            work.extend(ast.iter_child_nodes(node))


def constant_answer(node: ast.AST, answer: bool) -> bool:
    return (
        isinstance(node, ast.Constant)
        and not isinstance(node.value, (str, bytes))
        and node.value is not None
        and node.value is not ...
        and bool(node.value) is answer
    )


def _arguments_bound(
    call: ast.Call, functions: Mapping[str, list[ast.arguments]]
) -> list[tuple[ast.AST, ast.AST, bool]]:
    """A call of one of the file's functions (by its name, as a method, a lambda called where it
    stands, or mapped over a list) as bindings of its parameters to the arguments: an item handed
    to a helper (``_swap(request.node)``) is an item there too."""
    func, args, iterated = call.func, list(call.args), False
    if isinstance(func, ast.Name) and func.id == "map" and len(args) == 2:
        func, args, iterated = args[0], args[1:], True
    if isinstance(func, ast.Lambda):
        signatures, method = [func.args], False
    elif isinstance(func, ast.Name):
        signatures, method = functions.get(func.id, []), False
    elif isinstance(func, ast.Attribute):
        signatures, method = functions.get(func.attr, []), True
    else:
        return []
    bound: list[tuple[ast.AST, ast.AST, bool]] = []
    for signature in signatures:
        positional = [a.arg for a in (*signature.posonlyargs, *signature.args)]
        if method and positional[:1] in (["self"], ["cls"]):
            positional = positional[1:]
        named = {*positional, *(a.arg for a in signature.kwonlyargs)}
        before_star = itertools.takewhile(lambda arg: not isinstance(arg, ast.Starred), args)
        bound += [(ast.Name(id=name, ctx=ast.Store()), arg, iterated) for name, arg in zip(positional, before_star)]
        bound += [(ast.Name(id=k.arg, ctx=ast.Store()), k.value, False) for k in call.keywords if k.arg in named]
    return bound
