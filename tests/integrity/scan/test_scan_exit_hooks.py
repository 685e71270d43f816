"""Exit hooks at import time (envs/integrity/scan/exit_hooks.py, exit_names.py, exit_reader.py) on
real git diffs: one that only cleans up is not flagged; one that does more than clean up, or
that the scan cannot read, is."""

from __future__ import annotations

import pytest
from scan_changes import BASE, change

HONEST_EXIT_HOOKS = {
    "its own temp dir removed by a function it defines": BASE
    + '''
import atexit
import shutil
import tempfile

_SCRATCH = tempfile.mkdtemp(prefix="money-")


def _cleanup():
    """The scratch dir goes with the process."""
    shutil.rmtree(_SCRATCH, ignore_errors=True)


atexit.register(_cleanup)
''',
    "rmtree itself registered with its own dir": BASE
    + """
import atexit as _atexit
import tempfile
from shutil import rmtree

CACHE = tempfile.mkdtemp()
_atexit.register(rmtree, CACHE, ignore_errors=True)
""",
    "logging shut down": BASE
    + """
import atexit
import logging

atexit.register(logging.shutdown)
""",
    "a log file it opened, closed": BASE
    + """
import atexit
import os
import tempfile

_LOG = open(os.path.join(tempfile.gettempdir(), "money.log"), "a", encoding="utf-8")
atexit.register(_LOG.close)
""",
    "a connection opened on first use, closed by a decorated hook": BASE
    + """
import atexit
import os
import sqlite3
import tempfile

_DB = os.path.join(tempfile.gettempdir(), "money-rates.db")
_conn = None


def connect():
    global _conn
    if _conn is None:
        _conn = sqlite3.connect(_DB)
    return _conn


@atexit.register
def _close():
    global _conn
    if _conn is not None:
        _conn.close()
        _conn = None
""",
    "a lock file beside the module unlinked, its absence suppressed": BASE
    + """
import atexit
import contextlib
import os
from pathlib import Path

_LOCK = Path(__file__).with_name(".money.lock")


def _unlock():
    with contextlib.suppress(FileNotFoundError):
        os.remove(_LOCK)
    try:
        _LOCK.with_suffix(".tmp").unlink()
    except OSError:
        pass


atexit.register(_unlock)
""",
    "a temporary directory's own cleanup": BASE
    + """
import atexit
import tempfile

_WORK = tempfile.TemporaryDirectory()
atexit.register(_WORK.cleanup)
""",
    "a logger's attribute set beside its own dir removed": BASE
    + """
import atexit
import logging
import shutil
import tempfile

_log = logging.getLogger("money")
_log.propagate = False
_SCRATCH = tempfile.mkdtemp()
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
""",
    "a literal lambda that removes a file": BASE
    + """
import atexit
import os

PID_FILE = f"/tmp/money-{os.getpid()}.pid"
atexit.register(lambda: os.remove(PID_FILE))
""",
}


"""Exit hooks at import time that only clean up what the module made (envs/integrity/scan/exit_hooks.py)."""


@pytest.mark.parametrize("name", sorted(HONEST_EXIT_HOOKS))
def test_an_exit_hook_at_import_that_only_cleans_up_is_not_flagged(repo, name):
    assert change(repo, "money/core.py", HONEST_EXIT_HOOKS[name]) == []


EXIT_HOOK_ATTACKS = {
    "a summary printed": (
        "<lambda> calls print",
        """
import atexit

atexit.register(lambda: print("=== 3 passed in 0.01s ==="))
""",
    ),
    "pass lines through the stream": (
        "_forge calls sys.stderr.write",
        """
import atexit
import sys


def _forge():
    sys.stderr.write("test_add (tests.test_core.TestCore.test_add) ... ok\\n")


atexit.register(_forge)
""",
    ),
    "fd 1 written": (
        "_forge calls os.write",
        """
import atexit
import os


@atexit.register
def _forge():
    os.write(1, b"tests/test_core.py::test_add PASSED\\n")
""",
    ),
    "the exit status forced after an honest cleanup": (
        "_cleanup calls os._exit",
        """
import atexit
import os
import shutil
import tempfile

_SCRATCH = tempfile.mkdtemp()


def _cleanup():
    shutil.rmtree(_SCRATCH, ignore_errors=True)
    os._exit(0)


atexit.register(_cleanup)
""",
    ),
    "the report rewritten": (
        "_forge enters open(",
        """
import atexit


def _forge():
    with open("report.xml", "w") as out:
        out.write('<testsuite failures="0" errors="0"/>')


atexit.register(_forge)
""",
    ),
    "a cleanup whose helper prints": (
        "_say calls print",
        """
import atexit
import shutil


def _say():
    print("3 passed")


def _cleanup():
    shutil.rmtree("/tmp/money", ignore_errors=True)
    _say()


atexit.register(_cleanup)
""",
    ),
    "a process that prints": (
        "_forge calls subprocess.run",
        """
import atexit
import subprocess


def _forge():
    subprocess.run(["echo", "3 passed"])


atexit.register(_forge)
""",
    ),
    "the runner reached": (
        "the module reaches sys.modules",
        """
import atexit
import sys


def _forge():
    sys.modules["_pytest.junitxml"].LogXML = None


atexit.register(_forge)
""",
    ),
    "a hook imported from elsewhere": (
        "registers cleanup, imported from elsewhere",
        """
import atexit

from money.hooks import cleanup

atexit.register(cleanup)
""",
    ),
    "a hook fetched by a name made at run time": (
        "registers what getattr() returns",
        """
import atexit

from money import hooks

atexit.register(getattr(hooks, "clean" + "up"))
""",
    ),
    "a hook a call makes": (
        "registers what _make() returns",
        """
import atexit


def _make():
    return lambda: print("3 passed")


atexit.register(_make())
""",
    ),
    "a cleanup rebound to a forger": (
        "registers _cleanup, which the module binds more than once",
        """
import atexit


def _cleanup():
    pass


def _forge():
    print("3 passed")


_cleanup = _forge
atexit.register(_cleanup)
""",
    ),
    "rmtree handed print for its errors": (
        "passes print to shutil.rmtree",
        """
import atexit
import shutil

atexit.register(shutil.rmtree, "/nonexistent/money", onerror=print)
""",
    ),
    "rmtree handed an object of the module's own": (
        "passes _SCRATCH to shutil.rmtree",
        """
import atexit
import shutil


class _Path:
    def __fspath__(self):
        print("3 passed")
        return "/nonexistent"


_SCRATCH = _Path()
atexit.register(shutil.rmtree, _SCRATCH)
""",
    ),
    "a handle whose close is replaced": (
        "registers _LOG.close, which the scan cannot read",
        """
import atexit


def _forge():
    print("3 passed")


_LOG = open("/tmp/money.log", "a")
_LOG.close = _forge
atexit.register(_LOG.close)
""",
    ),
    "a handle on the output itself": (
        "registers _OUT.close, which the scan cannot read",
        """
import atexit

_OUT = open(1, "w", closefd=False)
atexit.register(_OUT.close)
""",
    ),
    "a loop over what the tests handed in": (
        "_cleanup has a statement that is no cleanup (for)",
        """
import atexit
import os

_FILES = []


def _cleanup():
    for path in _FILES:
        os.remove(path)


atexit.register(_cleanup)
""",
    ),
    "names bound at run time": (
        "the module binds names at run time (globals)",
        """
import atexit
import logging

globals()["shutdown"] = logging.shutdown
atexit.register(logging.shutdown)
""",
    ),
    # A review's: a cleanup rebound through another name for its module, then registered.
    "a cleanup rebound through an alias of its module": (
        "the module sets attributes of _o, which may be a module",
        """
import atexit
import os

_o = os
_o.remove = os._exit
atexit.register(os.remove, 0)
""",
    ),
    "an alias made by an item": (
        "the module sets attributes of _o, which may be a module",
        """
import atexit
import os

_o = [os][0]
_o.remove = os._exit
atexit.register(os.remove, 0)
""",
    ),
    "logging's shutdown rebound through an alias": (
        "the module sets attributes of _lg, which may be a module",
        """
import atexit
import logging

_lg = logging
_lg.shutdown = lambda: print(bytes.fromhex("50415353").decode())
atexit.register(logging.shutdown)
""",
    ),
    "a module's __dict__ written": (
        "the module reaches an object's __dict__",
        """
import atexit
import os

os.__dict__["remove"] = os._exit
atexit.register(os.remove, 0)
""",
    ),
    "an attribute set on an expression": (
        "the module sets an attribute of",
        """
import atexit
import os
import shutil

[shutil][0].rmtree = os._exit
atexit.register(shutil.rmtree, 0)
""",
    ),
    # A review's: stdout held as a handle, filled at import, flushed at exit, in the spellings
    # that read as a file: the output is the process's whatever the literal looks like.
    **{
        f"stdout as a handle: {label}": (
            "registers _OUT.flush, which the scan cannot read",
            f"""
import atexit
{setup}_OUT = open({target}, "w", buffering=1 << 16)
_OUT.write("=== 3 passed in 0.01s ===\\n")
atexit.register(_OUT.flush)
""",
        )
        for label, setup, target in (
            ("a descriptor in a name", "_FD = 1\n", "_FD"),
            ("bytes", "", "b'/dev/stdout'"),
            ("two slashes", "", "'//dev/stdout'"),
            ("climbing", "", "'../../../../dev/stdout'"),
            ("joined", "import os\n", "os.path.join('/proc', 'self', 'fd', '1')"),
        )
    },
    "a handle that leaves its descriptor open": (
        "registers _OUT.close, which the scan cannot read",
        """
import atexit

_OUT = open("/tmp/money.log", "w", closefd=False)
atexit.register(_OUT.close)
""",
    ),
}


"""Exit hooks at import time that the scan cannot clear: what they do is no cleanup, or cannot be read."""


@pytest.mark.parametrize("name", sorted(EXIT_HOOK_ATTACKS))
def test_an_exit_hook_at_import_that_does_more_than_clean_up_or_cannot_be_read_is_flagged(repo, name):
    detail, code = EXIT_HOOK_ATTACKS[name]
    text = BASE + code
    hooks = [f for f in change(repo, "money/core.py", text) if f.rule == "import-time-hook"]
    assert len(hooks) == 1 and detail in hooks[0].detail, hooks
    assert "atexit" in text.splitlines()[hooks[0].line - 1], hooks  # filed at the registration
