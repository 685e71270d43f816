"""For hidden tests whose verdict must not be forgeable by the code they test. Stdlib only.

A hidden test of a task with ``isolated_verdict: true`` never imports the code under test.
It asks for a *scenario* to be run, and asserts on what comes back::

    from crucible_probe import isolated

    @isolated
    def pages_for(total, per_page):          # runs in the repo, in its own interpreter
        from stockroom.report import page_count
        return page_count(total, per_page)   # plain data only: it crosses as repr

    def test_a_partial_last_page_counts():   # runs in pytest, which the code never touches
        assert pages_for(45, 20) == 3

A scenario is self-contained (its imports inside it, plain helper functions it calls named
in ``uses=``: their source goes with it), takes and returns plain data
(literals, lists, tuples, dicts, sets), and only its own source crosses to the code under
test, never the test's expectations. If it raises, the call raises ``ScenarioRaised`` with
the exception's type and message; if it cannot give an answer (timeout, a crash, an answer
that is not plain data) the call raises ``ScenarioFailed``. Either fails the test unless
the test expects it.

Under crucible's ``strict`` the scenario goes to the grader's launcher (launch.py), which
runs it as a different uid from pytest's. Modes that do not isolate the verdict set
``CRUCIBLE_PROBE=in-process``: the scenario is called right here, with the same contract
(plain data in and out, its exceptions as ``ScenarioRaised``). Otherwise (a task author
running the hidden tests by hand) it runs in a subprocess, in the current directory.
"""
import ast
import inspect
import json
import os
import socket
import struct
import subprocess
import sys
import textwrap

ENV_FD = "CRUCIBLE_PROBE_FD"
ENV_MODE = "CRUCIBLE_PROBE"
MAX_ANSWER = 8 << 20
DEFAULT_TIMEOUT = 120.0
_connection = None


class ScenarioRaised(Exception):
    """The scenario raised: ``type_name`` (module.qualname) and ``message`` say what."""

    def __init__(self, type_name, message):
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message = type_name, message

    def is_a(self, name):
        """Whether the exception's type is called ``name`` (``PageError`` or its full name)."""
        return self.type_name == name or self.type_name.rsplit(".", 1)[-1] == name


class ScenarioFailed(Exception):
    """No answer came back: a timeout, a crash, or an answer that is not plain data."""


def isolated(function=None, *, uses=(), timeout=DEFAULT_TIMEOUT):
    """Decorate a scenario function; calling it runs it isolated and returns its answer.
    ``uses``: undecorated helper functions the scenario calls, sent along with it."""
    def wrap(scenario):
        source = "\n\n".join(_source_of(f) for f in (*uses, scenario))
        name = scenario.__name__
        filename = f"<scenario {name} from {os.path.basename(inspect.getsourcefile(scenario) or '?')}>"

        def call(*args, **kwargs):
            if os.environ.get(ENV_MODE) == "in-process":
                return _call_here(scenario, args, kwargs)
            return run(source, name, args, kwargs, filename=filename, timeout=timeout)

        call.__name__, call.__qualname__, call.__doc__ = name, scenario.__qualname__, scenario.__doc__
        return call
    return wrap(function) if function is not None else wrap


def run(source, name, args=(), kwargs=None, *, filename="<scenario>", timeout=DEFAULT_TIMEOUT):
    """Run function ``name`` defined by ``source`` with plain-data arguments; its answer."""
    request = json.dumps({"source": source, "name": name, "filename": filename, "timeout": timeout,
                          "args": _plain(tuple(args), "arguments"),
                          "kwargs": _plain(dict(kwargs or {}), "keyword arguments")}).encode()
    reply = _ask_launcher(request) if os.environ.get(ENV_FD) else _run_here(request, timeout)
    if reply.get("stderr"):
        sys.stderr.write(reply["stderr"])  # pytest shows it under the failing test
    if reply.get("error"):
        raise ScenarioFailed(reply["error"])
    if reply.get("timed_out"):
        raise ScenarioFailed(f"scenario {name} did not finish within {reply.get('timeout')} s")
    answer = _last_json_line(reply.get("result") or "")
    if isinstance(answer, dict) and isinstance(answer.get("returned"), str):
        if len(answer["returned"]) > MAX_ANSWER:
            raise ScenarioFailed(f"scenario {name} answered with over {MAX_ANSWER} bytes")
        try:
            return ast.literal_eval(answer["returned"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            raise ScenarioFailed(f"scenario {name} answered something that is not plain data: {exc}") from None
    raised = answer.get("raised") if isinstance(answer, dict) else None
    if isinstance(raised, list) and len(raised) == 2 and all(isinstance(part, str) for part in raised):
        raise ScenarioRaised(*raised)
    raise ScenarioFailed(f"scenario {name} gave no answer (exit code {reply.get('exit_code')})")


def _call_here(scenario, args, kwargs):
    args, kwargs = ast.literal_eval(_plain(tuple(args), "arguments")), ast.literal_eval(_plain(dict(kwargs), "kwargs"))
    try:
        value = scenario(*args, **kwargs)
    except Exception as exc:
        kind = type(exc)
        raise ScenarioRaised(f"{kind.__module__}.{kind.__qualname__}", str(exc)) from exc
    try:
        return ast.literal_eval(_plain(value, "answers"))
    except TypeError as exc:
        raise ScenarioFailed(str(exc)) from None


def _source_of(scenario):
    """The function's own source, without its decorators, at column 0."""
    lines = textwrap.dedent(inspect.getsource(scenario)).splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async def ")))
    return "".join(lines[start:])


def _plain(value, what):
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError):
        same = False
    if not same:
        raise TypeError(f"scenario {what} must be plain data (literals, lists, tuples, dicts, sets): {text[:200]}")
    return text


def _last_json_line(text):
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def _ask_launcher(request):
    global _connection
    if _connection is None:
        _connection = socket.socket(fileno=int(os.environ[ENV_FD]))
    _connection.sendall(struct.pack(">Q", len(request)) + request)
    head = _read_exactly(_connection, 8)
    body = _read_exactly(_connection, struct.unpack(">Q", head)[0]) if head else None
    if body is None:
        raise ScenarioFailed("the grader's launcher went away")
    return json.loads(body)


def _read_exactly(sock, size):  # launch.py has its own: each script runs alone in the workspace
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _run_here(request, timeout):
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crucible_scenario.py")
    try:
        done = subprocess.run([sys.executable, "-I", runner], input=request, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "timeout": timeout}
    return {"exit_code": done.returncode, "result": done.stdout.decode("utf-8", "replace"),
            "stderr": done.stderr.decode("utf-8", "replace")}
