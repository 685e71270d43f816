# crucible-strict's pytest plugin in run_script.sh's pytest processes (swe_tasks/junit.py): a
# root-owned copy, found by pytest's plugin autoload (the `pytest11` entry point of the
# `crucible_junit-0.dist-info` beside it) on three paths: PYTHONPATH, a .pth in the tests' user
# site-packages (HOME/.local/lib/python3.X/site-packages, which a runner that rebuilds the
# environment from nothing but HOME and PATH keeps: ansible-test's does), and a .pth in the
# site-packages of each venv a python on the run script's PATH belongs to (a venv ignores the
# user site). A process without any never sees it: nothing fails to import. swe_tasks/junit.py's
# plugin_program puts the results' directory in RESULTS below. Each pytest session (not xdist's
# workers: their controller reports) gets a second JUnit report of its own, besides whatever
# --junitxml the run asks for: RESULTS/pytest-<pid>-<us>.xml, xunit1 (it names each case's
# file). One file per process, so a run script that runs pytest once per test file, or a runner
# that runs it once per context, loses none of them.
# Written for every Python a SWE-bench Pro image may hold (3.6 and later, pytest 3 and later).
# Only the outermost session reports: not a session a test starts inside it (pytester's inline
# runs, in this process; its subprocess runs, which inherit OUTER), whose tests are not the run's.
import os
import time

RESULTS = ""
OUTER = "CRUCIBLE_JUNIT_OUTER_PID"
_reporting = []  # type: list[object]


def pytest_configure(config):  # type: ignore[no-untyped-def]
    if not RESULTS or hasattr(config, "workerinput") or hasattr(config, "slaveinput"):
        return
    if _reporting or os.environ.get(OUTER):
        return
    _reporting.append(config)
    os.environ[OUTER] = str(os.getpid())
    try:
        import inspect
        from typing import Any  # noqa: F401 - named in a type comment (this file runs on Python 3.6)

        from _pytest.junitxml import LogXML
        wanted = {"family": "xunit1", "log_passing_tests": True}  # type: dict[str, Any]
        accepted = inspect.signature(LogXML.__init__).parameters
        options = {key: value for key, value in wanted.items() if key in accepted}
        path = os.path.join(RESULTS, "pytest-%d-%d.xml" % (os.getpid(), int(time.time() * 1e6)))
        config.pluginmanager.register(LogXML(path, None, **options), "crucible-junit-report")
    except Exception as exc:  # noqa: BLE001 - never the reason a test run fails; no report is the verdict
        import sys
        sys.stderr.write("crucible-junit: no report: %r\n" % (exc,))
