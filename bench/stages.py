"""Where a crucible command's time and memory go, in one process: run as
``python bench/stages.py ARGS...`` (the crucible command's arguments), it imports the command,
wraps its stages, runs it as ``crucible`` would (``engine.cli.main.main``) and prints one JSON
line on stderr: each stage's seconds (summed over its calls) and the peak RSS when it first ended.

The stages are the functions the command goes through, by dotted name (STAGES); "imports" is
importing the command's modules, "rest" what no stage covers (argument parsing, printing).
Interpreter start-up and exit are outside: the benches time those as ``python3 -c pass``.
"""

from __future__ import annotations

import functools
import json
import resource
import sys
import time

STARTED = time.perf_counter()

STAGES = {
    # (module, attribute) -> stage name; a module the command never imports is skipped
    ("engine.cli.check", "combinations"): "compose",
    ("engine.config.compose", "compose_config"): "compose",
    ("engine.config.compose", "to_typed"): "compose",
    ("engine.cli.check", "compose_config"): "compose",
    ("engine.cli.check", "to_typed"): "compose",
    ("engine.run.session", "open_store"): "store open",
    ("engine.run.session", "housekeeping"): "housekeeping",
    ("engine.cli.check", "housekeeping"): "housekeeping",
    ("engine.cli.check", "session_for"): "session (store, engine, builder)",
    ("engine.cli.check", "instantiate"): "plan",
    ("engine.cli.check", "plan"): "plan",
    ("engine.cli.check", "run_batch"): "batch (store lookup / runs)",
    ("engine.store.duckdb", "DuckDBStore.query"): "answer",
    ("engine.store.duckdb", "DuckDBStore.get_run"): "answer",
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> int:
    import importlib

    sys.argv = ["crucible", *argv]
    seconds: dict[str, float] = {}
    rss: dict[str, float] = {}
    depth = [0]

    def wrap(owner, name: str, stage: str) -> None:
        inner = getattr(owner, name)
        if getattr(inner, "_staged", False):
            return

        def timed(*args, **kwargs):
            depth[0] += 1
            began = time.perf_counter()
            try:
                result = inner(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # a stage inside another (compose inside plan) counts once
                    seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - began
                    rss.setdefault(stage, _rss_mb())
            return result

        if asyncio_coroutine(inner):

            async def timed_async(*args, **kwargs):
                began = time.perf_counter()
                result = await inner(*args, **kwargs)
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - began
                rss.setdefault(stage, _rss_mb())
                return result

            timed_async._staged = True  # type: ignore[attr-defined]
            setattr(owner, name, functools.wraps(inner)(timed_async))
            return
        timed._staged = True  # type: ignore[attr-defined]
        setattr(owner, name, functools.wraps(inner)(timed))

    import engine.cli.main as cli

    command = argv[0]
    reading = ["engine.run.session", "engine.store.duckdb", "engine.util.tables"]
    modules = {
        "check": ["engine.cli.check"],
        "query": reading,
        "show": reading,
        "report": [*reading, "engine.report.query"],
    }
    for module in modules.get(command, []):
        importlib.import_module(module)
    seconds["imports"] = time.perf_counter() - STARTED
    rss["imports"] = _rss_mb()
    for (module_name, dotted), stage in STAGES.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        owner, _, attr = dotted.rpartition(".")
        target = getattr(module, owner) if owner else module
        if hasattr(target, attr):
            wrap(target, attr, stage)
    began = time.perf_counter()
    code = cli.main(argv)
    total = time.perf_counter() - STARTED
    covered = sum(v for k, v in seconds.items() if k != "imports")
    seconds["rest"] = max(0.0, (time.perf_counter() - began) - covered)
    print(
        json.dumps({"seconds": seconds, "rss_mb": rss, "total": total, "peak_rss_mb": _rss_mb(), "code": code}),
        file=sys.stderr,
    )
    return code


def asyncio_coroutine(function) -> bool:
    import inspect

    return inspect.iscoroutinefunction(function)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
