"""Exit hooks registered at import time: the ones ``import-time-hook`` clears (python_walk.py).

An exit hook runs after the tests ran and the runner reported, in the runner's own process: it
can print a passing summary after the real one, rewrite or remove the runner's report, or change
the exit status (``os._exit(0)``), after everything that watched the tests. So one registered at
import time is a finding unless the scan can read all it will do, and all of that is cleanup,
which no forgery needs (deleting the module's own files, closing the handles it opened, shutting
logging down: deleting a report only loses the verdict):

- what is registered: a function the module defines and binds once (no other def, assignment
  or import of its name; no decorator but the registration itself), a literal lambda, or a
  cleanup itself (``shutil.rmtree``, ``os.remove``, ``logging.shutdown``, a handle's ``close``),
  handed only data the module made;
- what it does, and what the module's functions it calls by name do: those cleanups, on data the
  module made (literals, paths, ``tempfile``'s names) or on handles it opened (``open`` of a
  path, ``tempfile``'s objects, a ``logging.FileHandler``, ``sqlite3.connect``); conditions on
  them; ``try``; ``with contextlib.suppress(...)``; ``pass``; ``return``; a name set to a literal.

Anything else is not cleared, and the finding names it: a print, a write, a stream
(``sys.stdout``), ``os.write``, ``os._exit``, a subprocess, a file opened at exit, a loop, an
import at exit, a name imported from elsewhere, what a call returns (``getattr``, ``partial``),
a method of an object the module did not open, data the module did not make, a handle whose
attributes the module sets (``_log.close = forge``), a handle on the process's output however
its literal is spelled (a descriptor, also in a name; ``b"/dev/stdout"``, ``//dev``, a climb with
``..``, ``os.path.join`` of literals into /proc; ``closefd=``, ``opener=``). In a module that binds
names at run time (``globals()``, ``vars()``, ``exec``, ``eval``, a star import, ``sys.modules``),
reaches an ``__dict__``, or sets attributes of a name that may be a module (an import, or a name
bound to another name, an attribute or an item: ``_o = os; _o.remove = os._exit``, which the
monkeypatch rule does not read either) nothing is cleared.

Out of reach: code elsewhere that sets a cleared hook's handle's attributes or rebinds the names
it reads (``core.TMP = X()``, or ``_o = os; _o.remove = ...`` from another module of the patch).
That is no new way in: a module runs code at
exit with no hook at all (an object's ``__del__``, ``weakref.finalize``, a file's own close at
shutdown), and a hook registered from a function is not flagged (``trailing-atexit`` in
docs/integrity.md). The rule catches the hook in plain sight; what stands against code at exit
is the runner's end, the named results and the end marker.
"""

from __future__ import annotations

import ast

from envs.integrity.scan.exit_names import Qualify
from envs.integrity.scan.exit_reader import Reader


def refusal(
    tree: ast.Module, hook: ast.Call | ast.FunctionDef | ast.AsyncFunctionDef, qualified: Qualify
) -> str | None:
    """None where the exit hook ``hook`` registers is cleared: ``hook`` is an
    ``atexit.register(...)`` call at import time, or the def ``@atexit.register`` decorates;
    else what keeps it from being cleared, in a few words. ``qualified`` names a call's callee
    through the file's imports (the scanner's)."""
    reader = Reader(tree, qualified)
    if reader.dynamic is not None:
        return reader.dynamic
    if id(hook) not in reader.module_nodes:
        return "registered in a class body"
    if isinstance(hook, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if qualified(hook.decorator_list[-1]) != "atexit.register":
            return "registers what another decorator returns"  # the registration is not the innermost
        return reader.function(hook, [], [], decorated=True)
    if not hook.args:
        return "registers nothing the scan can read"
    return reader.registered(hook.args[0], hook.args[1:], hook.keywords)
