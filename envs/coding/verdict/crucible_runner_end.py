"""crucible's runner end marker: a pytest plugin the grader loads with ``-p`` from the fresh
directory pytest writes its JUnit report to (outside the repo; envs/coding/runner_end.py).

At import (pytest loads ``-p`` plugins before any conftest, collection, or code under test) it
takes a one-time token from ``end.nonce`` beside it and deletes the file. As each test reports
it counts the outcome itself, in a wrapper tried first (and says so where a wrapper registered
later ran before it), for the session it was configured for. When pytest ends
(``pytest_unconfigure``, after the terminal summary and the JUnit report are written) it prints
one line: the token, ``runner-end``, the report's
sha256, its own counts and which tests passed (short digests of their names). Whatever appears after that line (an exit hook, a thread, a process
left behind) is not pytest's, a report that differs from the digest was rewritten after pytest
wrote it, and one with more passes or fewer failures than the counts was written with pytest's
objects by a later hook (a ``pytest_sessionfinish`` that rewrites the report and a terminal
summary edited to match it: pytest's printed summary is no witness then, these counts are), and
one that says PASSED for a test this plugin did not see pass was too (a failure swapped with a
pass keeps the counts). Asked for ``audit`` (``strict``), it installs the runtime audit
(``crucible_audit`` beside it) before anything else can run, and its end line carries the audit's
record (``audit=``).
"""
from __future__ import annotations

import hashlib
import os
import re
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))


def _take_token() -> tuple[str, list[str]]:
    """The one-time token and the words after it (what else grading asks of this plugin)."""
    path = os.path.join(_HERE, "end.nonce")
    try:
        with open(path, encoding="ascii") as handle:
            words = handle.read().split()
        os.unlink(path)  # gone before any code under test is imported
    except OSError:
        return "", []  # a nested or second pytest run: only the first one speaks
    return (words[0], words[1:]) if words else ("", [])


def _hide_running_test() -> None:
    """pytest puts the running test's id in the process environment (PYTEST_CURRENT_TEST),
    where the code under test could read which hidden case is asking. Nothing of a verdict
    needs it: pytest's own function that sets and clears it is replaced by one that does not."""
    from _pytest import runner

    if hasattr(runner, "_update_current_test_var"):
        runner._update_current_test_var = lambda item, when: None
    os.environ.pop("PYTEST_CURRENT_TEST", None)


def _start_audit() -> list:
    """The runtime audit (``crucible_audit`` beside this file, loaded by its path so no module of
    the repo can stand in for it), its hook installed now: before any conftest or code under test."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("crucible_audit", os.path.join(_HERE, "crucible_audit.py"))
    if spec is None or spec.loader is None:
        return []
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [module.install(os.getcwd(), _HERE)]


def _digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "none"


def key(name: str) -> str:
    """A test's name as the end line carries it: short, and the grader's for the same name."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def reported_name(report: object, prefix: str | None = None, with_file: bool = True) -> str:
    """The name crucible's grader gives this report's JUnit entry (envs/integrity/sources/junit.py
    ``parse_junit``): the entry's classname, name and file made as pytest's own junitxml makes
    them, then read back as the grader reads them (``with_file``: the report's family writes
    ``file``, as xunit1 does). The node id where junitxml has no such parts."""
    nodeid = str(getattr(report, "nodeid", ""))
    try:
        from _pytest import junitxml

        names = junitxml.mangle_test_address(nodeid)
        location = getattr(report, "location", None)
        file = str(location[0]) if location and with_file else ""
        classname = ".".join([prefix, *names[:-1]] if prefix else names[:-1])
        name = str(junitxml.bin_xml_escape(names[-1]))
    except Exception:  # a pytest without these: the node id, which is the grader's name for most tests
        return nodeid
    return junit_node_id(classname, name, file)


# The three below are envs/integrity/sources/junit.py's, copied verbatim (docstrings aside): this plugin
# runs in the container, where crucible is not importable. tests/flavors/coding/test_runner_end_names.py
# holds the copy to the source, code and names.
def junit_node_id(classname: str, name: str, file: str | None) -> str:
    if file:
        exact = _node_id_from_file(classname, name, file)
        if exact is not None:
            return exact
    return _guess_node_id(classname, name)


def _node_id_from_file(classname: str, name: str, file: str) -> str | None:
    dotted = re.sub(r"\.py$", "", file.replace("/", "."))
    if not classname and name == dotted:
        return file
    if classname == dotted:
        return f"{file}::{name}"
    if classname.startswith(dotted + "."):
        classes = classname[len(dotted) + 1:].split(".")
        return "::".join([file, *classes, name])
    return None


def _guess_node_id(classname: str, name: str) -> str:
    if not classname:
        return name.replace(".", "/") + ".py" if name else name
    parts = classname.split(".")
    module_end = len(parts)
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].startswith("test") or parts[index].endswith("_test"):
            module_end = index + 1
            break
    path = "/".join(parts[:module_end]) + ".py"
    return "::".join([path, *parts[module_end:], name])


def _outcome(report: object) -> str | None:
    """A test report's outcome as pytest's summary counts it (``passed``, ``failed``, ``error``,
    ``skipped``, ``xfailed``, ``xpassed``), or None for a set-up or tear-down that passed, a rerun."""
    when, outcome = getattr(report, "when", "call"), getattr(report, "outcome", None)
    xfail = hasattr(report, "wasxfail")
    if outcome == "passed":
        return ("xpassed" if xfail else "passed") if when == "call" else None
    if outcome == "failed":
        return "failed" if when == "call" else "error"
    if outcome == "skipped":
        return "xfailed" if xfail else "skipped"
    return None


def _in_this_process(config: object) -> None:
    """pytest-xdist would run the tests in worker processes, each a pytest of its own that
    sends its reports here: there the code under test registers a hook (on the worker's Config,
    found among live objects) that makes a failure a pass before the report is sent, and this
    count, the summary and the report all see the pass (a review's attack). No worker holds a
    token to count with, so the tests run here, where the count sees each report first. Done
    before xdist's own configure (tried last) reads these options."""
    option = getattr(config, "option", None)
    distributed = any(getattr(option, name, None) for name in ("numprocesses", "tx", "distload")) \
        or getattr(option, "dist", "no") not in ("no", None)
    if option is None or not distributed:
        return
    option.dist, option.tx, option.numprocesses = "no", [], 0
    if hasattr(option, "distload"):
        option.distload = False


def _watch(config: object, audit: object) -> None:
    """The audit's checks at pytest's steps: the test files pytest collects by, each collected
    test's provenance, and before each test the framework against its snapshot."""
    try:
        audit.patterns = [*config.getini("python_files"), "conftest.py"]  # type: ignore[attr-defined]
    except (ValueError, AttributeError):
        pass

    class Watch:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, items: list) -> None:
            audit.check_framework()  # type: ignore[attr-defined]
            audit.collected_items(items)  # type: ignore[attr-defined]

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_protocol(self, item: object):  # type: ignore[no-untyped-def]
            audit.before_test(item)  # type: ignore[attr-defined]
            yield

    config.pluginmanager.register(Watch(), f"crucible-{os.urandom(6).hex()}")  # type: ignore[attr-defined]


def _first_paths(asked: list[str]) -> list[str]:
    """The hidden test modules a differential re-run asks to import first (``first=``: base64 of
    their paths, NUL-separated, relative to pytest's working directory), or none."""
    import base64

    for word in asked:
        if word.startswith("first="):
            try:
                return [p for p in base64.urlsafe_b64decode(word[6:]).decode("utf-8").split("\0") if p]
            except ValueError:
                return []
    return []


def _import_first(config: object, paths: list[str], session: object = None) -> bool:
    """Import the hidden test modules now, as pytest's collection would (its ``import_path``, its
    import mode, its rewriter), so a later collection finds them imported: before the initial
    conftests (``session`` None, from ``pytest_load_initial_conftests``) or, where that failed
    (a module that needs what a conftest sets up), before the first test module (``session``, from
    ``pytest_collection``, each module's conftests loaded first as collection loads them). Code
    under test imported from here on finds no hidden module still to come. False, and what was
    imported undone, where one of them could not be imported here: collection imports it then,
    and reports why as it would have."""
    import inspect
    from pathlib import Path

    try:
        from _pytest.pathlib import import_path
    except ImportError:
        return False
    if session is None:
        mode = getattr(getattr(config, "known_args_namespace", None), "importmode", "prepend")
    else:
        mode = config.getoption("importmode")  # type: ignore[attr-defined]
    if str(getattr(mode, "value", mode)) not in ("prepend", "append"):
        return False  # importlib mode imports a module again where it is collected
    accepts = inspect.signature(import_path).parameters
    options: dict = {"mode": mode}
    try:
        if "root" in accepts:
            options["root"] = config.rootpath  # type: ignore[attr-defined]
        if "consider_namespace_packages" in accepts:
            options["consider_namespace_packages"] = config.getini("consider_namespace_packages")  # type: ignore[attr-defined]
        home = Path(str(config.invocation_params.dir))  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False
    modules = [home / p for p in paths if (home / p).is_file()]
    if session is not None and not _load_conftests(config, session, modules, mode, options):
        return False
    names, search = set(sys.modules), list(sys.path)
    try:
        for module in modules:
            import_path(module, **options)
    except KeyboardInterrupt:
        raise
    except BaseException:  # an import error, a module-level skip or exit: collection meets it again
        for name in set(sys.modules) - names:
            del sys.modules[name]
        sys.path[:] = search
        return False
    return True


def _load_conftests(config: object, session: object, modules: list, mode: object, options: dict) -> bool:
    """The conftests along each module's path, loaded as collection would load them before it
    (pytest 8 as it collects a directory, 7 in ``gethookproxy``); False where one fails to import
    (collection reports it)."""
    import inspect

    load = getattr(config.pluginmanager, "_loadconftestmodules", None)  # type: ignore[attr-defined]
    try:
        for module in modules:
            if load is None:
                session.gethookproxy(module)  # type: ignore[attr-defined]
            elif "consider_namespace_packages" in inspect.signature(load).parameters:
                load(module.parent, mode, config.rootpath,  # type: ignore[attr-defined]
                     consider_namespace_packages=options.get("consider_namespace_packages", False))
            else:
                load(module.parent, mode, config.rootpath)  # type: ignore[attr-defined]
    except Exception:
        return False
    return True


_HIDE_IN_WORKERS = "crucible_hide_running_test"


def _counter(outcomes: dict[str, int], passed: set[str], not_passed: set[str]) -> type:
    """The counter's class, over the state it fills (the closure's, named by no module global)."""
    outcome_of, name_of = _outcome, reported_name  # bound now: a module global replaced later changes no count

    class Counter:
        """Registered on the run's own config only: counts what each report was when pytest made
        it, before any other hook of the report sees it. A wrapper registered later and tried first
        would run before this one (pluggy calls the last registered first): each report checks that
        this one is still the outermost, and a count that was not is marked ``outranked``."""

        def __init__(self, hook: object, prefix: str | None, with_file: bool) -> None:
            self.hook = hook
            self.prefix = prefix
            self.with_file = with_file

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_logreport(self, report: object):  # type: ignore[no-untyped-def]
            kind = outcome_of(report)
            if kind is not None:
                outcomes[kind] = outcomes.get(kind, 0) + 1
            if kind in ("passed", "xpassed"):
                passed.add(name_of(report, self.prefix, self.with_file))
            elif getattr(report, "outcome", None) in ("failed", "skipped"):
                not_passed.add(name_of(report, self.prefix, self.with_file))
            impls: list[object] = getattr(self.hook, "get_hookimpls", list)()
            if impls and getattr(impls[-1], "plugin", self) is not self:
                outcomes["outranked"] = 1
            yield

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_collectreport(self, report: object):  # type: ignore[no-untyped-def]
            if getattr(report, "outcome", None) == "failed":
                outcomes["error"] = outcomes.get("error", 0) + 1
                not_passed.add(name_of(report, self.prefix, self.with_file))
            yield

    return Counter


def _speak_for_this_run() -> None:  # noqa: C901 (one branch per pytest outcome and phase)
    """The plugin's pytest hooks, made here and put on this module, with everything they keep
    (the token, the counts, the names that passed, the audit) in their closures only: no module
    global holds state that code under test could find by its shape (a set of names, a dict of
    counts, the config) and change or wrap. The config spoken for is kept by its id alone, and
    what is registered with pytest is registered under a random name."""
    token, asked = _take_token()
    if "hide-running-test" in asked:
        _hide_running_test()
    audits = _start_audit() if "audit" in asked else []
    audit = audits[0] if audits else None
    session_of: list[int] = []
    """The id of the config this plugin speaks for: the first one configured (a session a test
    starts inside this process, pytester's inline run, is not the run's)."""
    outcomes: dict[str, int] = {}
    passed: set[str] = set()
    not_passed: set[str] = set()
    """The names (as crucible's grader reads them from the JUnit report) that a report said passed,
    and that one said did not: failed, errored, skipped or xfailed at any phase, or failed to collect."""
    counter = _counter(outcomes, passed, not_passed)
    hide, in_this_process, watch, digest = _hide_running_test, _in_this_process, _watch, _digest
    first, import_first = _first_paths(asked), _import_first
    ordered: list[str] = []
    """Where the hidden modules asked for first were imported: ``conftests`` (before them),
    ``tests`` (after them, before any test module), ``no`` (where collection came to them)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config: object) -> None:
        if not token and (getattr(config, "workerinput", None) or {}).get(_HIDE_IN_WORKERS):
            hide()  # a pytest-xdist worker of a run that hides it: the token was the controller's
        if token and not session_of:
            session_of.append(id(config))
            if "one-process" in asked:
                in_this_process(config)
            prefix = getattr(getattr(config, "option", None), "junitprefix", None)
            try:  # the grader forces xunit1; a task's own -o after it wins, and xunit2 writes no file
                with_file = str(config.getini("junit_family")) in ("xunit1", "legacy")  # type: ignore[attr-defined]
            except (ValueError, AttributeError):
                with_file = True
            count = counter(config.hook.pytest_runtest_logreport, prefix, with_file)  # type: ignore[attr-defined]
            config.pluginmanager.register(count, f"crucible-{os.urandom(6).hex()}")  # type: ignore[attr-defined]
            if audit is not None:
                watch(config, audit)

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(early_config: object) -> None:
        """Before pytest imports the first conftest or test module: under the audit no bytecode
        cache is read from here on, so none the tested uid planted beside a hidden module (pytest's
        own rewrite cache, its header the real file's) stands in for the file."""
        if token and audit is not None:
            audit.keep_bytecode_out()
        if token and first and import_first(early_config, first):
            ordered.append("conftests")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(session: object) -> None:
        config = getattr(session, "config", None)
        if token and first and not ordered and session_of == [id(config)]:
            ordered.append("tests" if import_first(config, first, session) else "no")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(node: object) -> None:
        """pytest-xdist's, in the controller as it starts each worker: a worker loads this plugin
        too but finds the token taken, so it is told here (its ``workerinput``) to hide the id."""
        if token and "hide-running-test" in asked:
            node.workerinput[_HIDE_IN_WORKERS] = True  # type: ignore[attr-defined]

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(config: object) -> None:
        if not token or (session_of and id(config) != session_of[0]):
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        counted = ",".join(f"{kind}:{n}" for kind, n in sorted(outcomes.items()))
        audited = ""
        if audit is not None:
            audit.check_framework()
            ran = sum(n for kind, n in outcomes.items() if kind in ("passed", "failed", "xpassed", "xfailed", "skipped"))
            if ran and not audit.seen:
                audit.note("framework-patch", None, "the audit's checks never ran before a test (unregistered)")
            audited = f" audit={audit.dump()}"
        placed = f" first={(ordered or ['no'])[0]}" if first else ""
        line = (f"\n{token} runner-end {digest(os.path.join(_HERE, 'junit.xml'))} outcomes={counted}"
                f" passed={','.join(sorted({key(name) for name in passed - not_passed}))}{placed}{audited}\n")
        os.write(1, line.encode("ascii"))

    globals().update(pytest_configure=pytest_configure, pytest_load_initial_conftests=pytest_load_initial_conftests,
                     pytest_collection=pytest_collection, pytest_configure_node=pytest_configure_node,
                     pytest_unconfigure=pytest_unconfigure)
    if audit is not None:  # this module whole now: its functions snapshotted, so a replaced one is a patch
        audit.watch_module(__name__)


_speak_for_this_run()
