"""What an exit hook registered at import time may do and still be cleared (exit_hooks.py): the
cleanups, the makers of data and handles, and the helpers the reader shares.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable, Iterator
from typing import Literal

Qualify = Callable[[ast.AST], "str | None"]
Kind = Literal["data", "handle"]

CLEANUPS = frozenset({"shutil.rmtree", "os.remove", "os.unlink", "os.rmdir", "logging.shutdown"})
"""Calls a hook may make: each deletes or shuts down what the process has, and prints nothing."""
DATA_CALLS = frozenset(
    {
        "tempfile.mkdtemp",
        "tempfile.gettempdir",
        "os.path.join",
        "os.path.dirname",
        "os.path.basename",
        "os.path.abspath",
        "os.path.realpath",
        "os.path.expanduser",
        "os.path.exists",
        "os.path.isdir",
        "os.path.isfile",
        "os.path.lexists",
        "os.getcwd",
        "os.getpid",
        "os.fspath",
        "pathlib.Path",
        "pathlib.PurePath",
        "pathlib.PosixPath",
        "builtins.str",
    }
)
"""The standard library's makers of paths (and tests on them): what they give is data."""
HANDLE_CALLS = frozenset(
    {
        "builtins.open",
        "io.open",
        "tempfile.TemporaryDirectory",
        "tempfile.NamedTemporaryFile",
        "tempfile.TemporaryFile",
        "tempfile.SpooledTemporaryFile",
        "logging.FileHandler",
        "logging.handlers.RotatingFileHandler",
        "logging.handlers.TimedRotatingFileHandler",
        "logging.handlers.WatchedFileHandler",
        "sqlite3.connect",
    }
)
"""The standard library's handles a module opens, whose HANDLE_METHODS run only its own code."""
HANDLE_METHODS = frozenset({"close", "cleanup", "flush"})
DATA_METHODS = frozenset(
    {"joinpath", "with_name", "with_suffix", "exists", "is_dir", "is_file", "resolve", "absolute", "expanduser"}
)
DATA_CLEANUPS = frozenset({"unlink", "rmdir"})
"""A path's own deletions (``Path.unlink``)."""
OUTPUT_PATHS = ("/dev/", "/proc/")
"""A handle opened on one of these (or on a file descriptor) is the process's output, not a file."""
RUN_TIME_BINDERS = frozenset({"globals", "vars", "exec", "eval", "__import__"})
MAX_FUNCTIONS = 16
"""Functions followed from one hook; past them it is not read (and not cleared)."""

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def output_literal(value: object) -> bool:
    """Whether a literal handed to ``open`` is, or may lead to, the process's output: a file
    descriptor, or a path that normalizes into /dev or /proc or climbs with ``..``."""
    if isinstance(value, (bool, int)):
        return True
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str):
        return False
    norm = posixpath.normpath(value)
    if norm.startswith("//"):  # normpath keeps POSIX's two leading slashes; the kernel reads one
        norm = "/" + norm.lstrip("/")
    return norm.startswith(OUTPUT_PATHS) or norm in ("/dev", "/proc") or ".." in norm.split("/")


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module's or a function's own scope: not inside the functions, lambdas and
    classes in it (those are yielded, their names are bound here), nor a comprehension's targets."""
    work: list[ast.AST] = list(getattr(scope, "body", []))
    while work:
        node = work.pop()
        yield node
        if isinstance(node, SCOPES):
            work.extend(node.decorator_list if not isinstance(node, ast.Lambda) else [])
            continue
        if isinstance(node, ast.comprehension):
            work.extend([node.iter, *node.ifs])
            continue
        work.extend(ast.iter_child_nodes(node))


def names_bound(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a function binds in its own scope (its parameters among them)."""
    arguments = function.args
    names = {
        a.arg
        for a in (
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *(x for x in (arguments.vararg, arguments.kwarg) if x is not None),
        )
    }
    for node in own_nodes(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (*SCOPES[:2], ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names


def short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."
