"""What serves a run's tools, imported in a thread ahead of the first run.

The MCP SDK is ~0.6 s of imports, and nearly every agent connects to it. A sweep starts
loading it as soon as its command line is validated, so the import overlaps the sweep's
planning (git), the store and engine checks and the first containers' start instead of
delaying the first runs. Once per process; a batch that finds it not started starts it.
Nothing that only reads results (a check answered from the store, ``query``) ever loads it.
asyncssh (~0.3 s more) is not loaded here: few agents connect over ssh (``Agent.capabilities``),
so a run whose agent does imports it then, in a thread (engine/run/agent_turn.py).
"""

from __future__ import annotations

import concurrent.futures
import threading

_loading: concurrent.futures.Future[None] | None = None
_lock = threading.Lock()


def _load() -> None:
    import engine.capabilities.mcp_server  # noqa: F401


def serving_loaded() -> concurrent.futures.Future[None]:
    """The import of what serves runs' capabilities, started now in a daemon thread unless
    it already was. Its failure is only a hint: a run imports them again itself, and then
    the real error is the run's."""
    global _loading
    with _lock:
        if _loading is None:
            loading: concurrent.futures.Future[None] = concurrent.futures.Future()

            def load() -> None:
                try:
                    _load()
                except BaseException as exc:  # seen by whoever waits, never raised in the thread
                    loading.set_exception(exc)
                else:
                    loading.set_result(None)

            threading.Thread(target=load, name="crucible-load-serving", daemon=True).start()
            _loading = loading
        return _loading
