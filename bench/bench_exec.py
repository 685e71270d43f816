"""The fixed cost of one ``Workspace.exec`` on Docker, before and after a change, in one run.

"before" is ``engine/runtimes/docker/exec.py`` as a git revision has it (``--before``,
default HEAD), loaded beside the working tree's under another name; each round runs both,
alternating which goes first, so the machine's load hits them alike. Swapped in for
"before": ``run_exec`` (the workspace's exec), and the process module's exec start and
inspect (the SDK's ``exec_start`` and ``exec_inspect``).

(a) 20 trivial execs (``true``) on one DockerWorkspace, per round.
(b) the in-process golden run of ``bench_golden.py`` (spec to stored verdict), per round.
(c) with ``--breakdown``: one exec's phases, SDK against the wire (wire.ExecWire), and the
    engine's own floor for the same (raw HTTP on fresh unix connections).

    .venv/bin/python bench/bench_exec.py [--rounds 6] [--golden-rounds 6] [--breakdown]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def load_before(rev: str) -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{rev}:engine/runtimes/docker/exec.py"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="bench-exec-")) / "exec_before.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("exec_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def using(before: ModuleType | None):
    """The workspace's exec path as ``before`` has it (None: as the working tree has it)."""
    from engine.runtimes.docker import files, process, runtime

    if before is None:
        yield
        return
    swaps = [
        (runtime, "run_exec", before.run_exec),
        (process, "start_exec", before.start_exec),
        (process, "inspect_exec", lambda api, exec_id: api.exec_inspect(exec_id)),
        (files, "run_simple", before.run_simple),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, value in swaps:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def spread(values: list[float], unit: float = 1.0) -> str:
    v = sorted(x * unit for x in values)
    return f"median {statistics.median(v):.3f}  min {v[0]:.3f}  max {v[-1]:.3f}  (n={len(v)})"


def paired(figures: dict[str, list[float]]) -> str:
    """after - before, round by round (both ran back to back, under the same load)."""
    deltas = [a - b for a, b in zip(figures["after"], figures["before"], strict=True)]
    return f"after - before, per round: {spread(deltas)}; after faster in {sum(d < 0 for d in deltas)}/{len(deltas)}"


async def trivial_rounds(image: str, before: ModuleType, rounds: int) -> dict[str, list[float]]:
    from engine.runtimes.docker.runtime import DockerRuntime

    ws = DockerRuntime().provision(image, run_id=f"bench-exec-{uuid.uuid4().hex[:8]}", network=False, purpose="test")
    out: dict[str, list[float]] = {"before": [], "after": []}
    async with ws:
        for r in range(-1, rounds):  # round -1 warms both up, untimed
            for name in ("before", "after") if r % 2 else ("after", "before"):
                with using(before if name == "before" else None):
                    began = time.perf_counter()
                    for _ in range(20):
                        result = await ws.exec(["true"])
                        assert result.exit_code == 0, result
                    if r >= 0:
                        out[name].append(time.perf_counter() - began)
    return out


def golden_rounds(task: str, before: ModuleType, rounds: int) -> tuple[dict[str, list[float]], dict[str, list[dict]]]:
    from bench_golden import inprocess_trial

    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task={task}", "agent=integration_test"]))
    session = session_for(typed)
    planned = plan(typed, builder=session.builder)
    session.builder.ensure(planned.image, session.store)
    run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "bench"
    totals: dict[str, list[float]] = {"before": [], "after": []}
    stages: dict[str, list[dict]] = {"before": [], "after": []}
    for r in range(-1, rounds):
        for name in ("before", "after") if r % 2 else ("after", "before"):
            with using(before if name == "before" else None):
                seconds, timings = inprocess_trial(planned, session, run_root)
            if r >= 0:
                totals[name].append(seconds)
                stages[name].append(timings)
    return totals, stages


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="HEAD", help="git revision whose exec.py is 'before'")
    parser.add_argument("--task", default="sample/last_page")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--golden-rounds", type=int, default=6)
    parser.add_argument("--breakdown", action="store_true")
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-"))
    before = load_before(ns.before)
    print(f"before: {ns.before}'s exec.py; after: the working tree's; load average at start {os.getloadavg()}")

    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task={ns.task}", "agent=integration_test"]))
    planned = plan(typed, builder=session_for(typed).builder)
    if ns.breakdown:
        from exec_breakdown import breakdown

        breakdown(planned.image.tag)
    if ns.rounds:
        trivial = asyncio.run(trivial_rounds(planned.image.tag, before, ns.rounds))
        print(f"\n(a) 20 trivial execs on one DockerWorkspace, seconds per 20, {ns.rounds} interleaved rounds:")
        for name, values in trivial.items():
            print(f"  {name:6} {spread(values)}  = {statistics.median(values) / 20 * 1000:.1f} ms an exec")
        print(f"  {paired(trivial)}")
        print(f"  load average now {os.getloadavg()}")
    if ns.golden_rounds:
        totals, stages = golden_rounds(ns.task, before, ns.golden_rounds)
        print(f"\n(b) in-process golden run of {ns.task}, seconds, {ns.golden_rounds} interleaved rounds:")
        for name, values in totals.items():
            print(f"  {name:6} {spread(values)}")
        print(f"  {paired(totals)}")
        print("  stage medians, before -> after (s):")
        for stage in stages["after"][0]:
            b, a = (statistics.median(s.get(stage, 0.0) for s in stages[k]) for k in ("before", "after"))
            print(f"    {stage:12} {b:.3f} -> {a:.3f}")
        print(f"  load average now {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
