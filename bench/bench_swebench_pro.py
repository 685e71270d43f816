"""SWE-bench Pro grading: crucible's replay vs the official evaluator's steps by hand, and
predictions-mode throughput.

1. Grading one instance, gold patch, on two synthetic instances (``calc``: unittest; ``tally``:
   pytest, so strict's JUnit report too): the official steps as ``swe_bench_pro_eval.py`` runs
   them with local Docker (one ``docker run`` of the instance image with the workspace mounted
   and the entry script: ENV exports, reset, checkout, ``git apply -v``, the last
   before_repo_set_cmd line, run_script.sh with stdout/stderr apart, parser.py in the
   container), against crucible's grading path under ``none`` (the official steps replayed in a
   fresh grading container) and ``strict`` (crucible-strict's defences and the differential
   re-run in a second fresh container beside the first). crucible's side twice: as a run grades
   (its runner starts and prepares the grading containers while the agent works,
   ``Runner.start_ahead``, so the clock runs from the submission to the verdict) and cold (the
   containers' start inside the clock, as the official ``docker run`` has its own). Same patch,
   same image lineage (crucible's task image is built FROM the instance image), trials
   interleaved; the outcome must be identical. Ratio = median / the official median, to the
   verdict (removal is off every critical path; shown too). Fails where crucible as a run
   grades passes 1.2 under strict or 1.0 under none, or none cold passes 1.0.
2. ``crucible swe eval`` with 2 workers over the synthetic instances (a new model name per
   trial so nothing comes from the store): instances per minute.

    .venv/bin/python bench/bench_swebench_pro.py [--trials N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import swe_synth  # noqa: E402
import swe_synth_instances  # noqa: E402

from engine.build.baseimage import ensure_base_image  # noqa: E402
from engine.runtimes.docker.daemon import ensure_engine  # noqa: E402
from engine.util.tables import format_table  # noqa: E402

LIMIT = 1.2
"""crucible-strict (its differential re-run included) over the official steps, by medians."""
LIMIT_NONE = 1.0
"""crucible under ``none`` (the official steps, replayed) over the official steps by hand."""
CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"
TALLY = swe_synth_instances.TALLY


def entryscript(row: dict, assets: Path) -> str:
    """The official entry script's steps for ``row`` (written here from the published
    description of ``create_entryscript``), parser run with the image's python3."""
    env = swe_synth_env_lines(assets, row["instance_id"])
    files = ",".join(eval(row["selected_test_files_to_run"]))  # the dataset's Python literal, as officially
    before = row["before_repo_set_cmd"].strip().split("\n")[-1]
    return (
        f"\n{env}\n# apply patch\ncd /app\ngit reset --hard {row['base_commit']}\ngit checkout {row['base_commit']}\n"
        f"git apply -v /workspace/patch.diff\n{before}\n"
        f"bash /workspace/run_script.sh {files} > /workspace/stdout.log 2> /workspace/stderr.log\n"
        "python3 /workspace/parser.py /workspace/stdout.log /workspace/stderr.log /workspace/output.json\n"
    )


def swe_synth_env_lines(assets: Path, iid: str) -> str:
    lines = []
    for kind in ("base_dockerfile", "instance_dockerfile"):
        for line in (assets / "dockerfiles" / kind / iid / "Dockerfile").read_text().split("\n"):
            if line.strip().startswith("ENV"):
                lines.append(line.strip().replace("ENV", "export", 1))
    return "\n".join(lines)


def official(client, image: str, row: dict, assets: Path) -> tuple[float, float, bool]:
    """One by-hand official evaluation: (seconds to the verdict, seconds with the container
    removed, resolved)."""
    with tempfile.TemporaryDirectory(prefix="bench-swe-official-") as tmp:
        work = Path(tmp)
        (work / "patch.diff").write_text(row["patch"])
        (work / "run_script.sh").write_bytes(
            (assets / "run_scripts" / row["instance_id"] / "run_script.sh").read_bytes()
        )
        (work / "parser.py").write_bytes((assets / "run_scripts" / row["instance_id"] / "parser.py").read_bytes())
        (work / "entryscript.sh").write_text(entryscript(row, assets))
        started = time.perf_counter()
        container = client.containers.run(
            image,
            entrypoint="/bin/bash",
            command=["-c", "bash /workspace/entryscript.sh"],
            volumes={str(work): {"bind": "/workspace", "mode": "rw"}},
            detach=True,
        )
        try:
            container.wait()
            passed = {
                t["name"] for t in json.loads((work / "output.json").read_text())["tests"] if t["status"] == "PASSED"
            }
            required = set(eval(row["fail_to_pass"])) | set(eval(row["pass_to_pass"]))
            verdict = time.perf_counter() - started
        finally:
            container.remove(force=True)
        return verdict, time.perf_counter() - started, required <= passed


def crucible_grading(plan, session, flavor, patch: str, ahead: bool) -> tuple[float, float, bool]:
    """crucible's grading: the fresh grading container(s) the flavor asks for (two under strict:
    the differential re-run beside the first) and the flavor's grade: (seconds to the verdict,
    seconds with the containers removed, resolved). ``ahead``: as a run grades, the containers
    started and prepared before the clock (``Runner.start_ahead`` does so while the agent works,
    so a run waits for neither), the clock running from the submission; else cold, their start
    inside the clock, as the official ``docker run`` has its own."""
    from contextlib import AsyncExitStack

    from engine.models import CapturedSubmission

    async def grade() -> tuple[Any, float, float]:
        count = flavor.grading_workspaces(plan.spec)
        async with AsyncExitStack() as stack:
            began = time.perf_counter()
            workspaces = [
                session.runtime.provision(
                    plan.image, run_id=f"bench-{uuid.uuid4().hex[:8]}", network=False, purpose="grade"
                )
                for _ in range(count)
            ]
            await asyncio.gather(*(stack.enter_async_context(ws) for ws in workspaces))
            await flavor.prepare_grading(workspaces[0], plan.spec)
            for index, ws in enumerate(workspaces[1:], 1):
                await flavor.prepare_extra_grading(ws, plan.spec, index)
            if ahead:
                began = time.perf_counter()
            submission = CapturedSubmission(diff=patch)
            verdict = await (
                flavor.grade_many(workspaces, plan.spec, submission)
                if count > 1
                else flavor.grade(workspaces[0], plan.spec, submission)
            )
            to_verdict = time.perf_counter() - began
        return verdict, to_verdict, time.perf_counter() - began

    verdict, to_verdict, with_removal = asyncio.run(grade())
    return to_verdict, with_removal, verdict.reward == 1.0


def throughput(gen: dict, trials: int) -> list[float]:
    rates = []
    rows = [json.loads(line) for line in Path(gen["dataset"]).read_text().splitlines()]
    for _ in range(trials):
        with tempfile.TemporaryDirectory(prefix="bench-swe-eval-") as tmp:
            preds = Path(tmp) / "p.jsonl"
            model = f"bench-{uuid.uuid4().hex[:8]}"
            preds.write_text(
                "".join(
                    json.dumps(
                        {"instance_id": r["instance_id"], "model_patch": r["patch"], "model_name_or_path": model}
                    )
                    + "\n"
                    for r in rows
                )
            )
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "engine.cli", "swe", "eval", str(preds), "--workers", "2", "--output", tmp],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env=dict(os.environ),
            )
            seconds = time.perf_counter() - started
            if proc.returncode != 0 or not all(json.loads((Path(tmp) / "eval_results.json").read_text()).values()):
                raise SystemExit(f"swe eval failed: {proc.stdout[-1000:]}{proc.stderr[-1000:]}")
            rates.append(len(rows) / seconds * 60)
    return rates


SIDES = {
    "official": "official steps by hand (docker run + entry script)",
    "none": "crucible none, as a run grades (started ahead)",
    "strict": "crucible strict, as a run grades (started ahead)",
    "none-cold": "crucible none, cold",
    "strict-cold": "crucible strict, cold (two containers)",
}
TARGETS = {"none": LIMIT_NONE, "strict": LIMIT, "none-cold": LIMIT_NONE}
"""Where a target applies: crucible's grading as its runner grades, and ``none`` cold as well."""


def measure(client, gen: dict, iid: str, trials: int) -> tuple[list[tuple], dict[str, float]]:
    """One instance: the official steps by hand and crucible under ``none`` and ``strict`` (as
    a run grades, and cold), interleaved after one warm-up each; the table's rows and each
    side's ratio of medians to the official steps, to the verdict."""
    from engine.config.compose import compose_config, to_typed
    from engine.config.plugins import instantiate
    from engine.plan.spec import plan as make_plan
    from engine.run.session import session_for

    row = next(i.row for i in gen["instances"] if i.instance_id == iid)
    stand_in = next(i.image for i in gen["instances"] if i.instance_id == iid)
    modes = {}
    for mode in ("none", "strict"):
        typed = to_typed(compose_config([f"task=swebench_pro/{iid}", f"integrity={mode}"]))
        session = session_for(typed)
        planned = make_plan(typed, builder=session.builder)
        session.builder.ensure(planned.image)
        modes[mode] = (planned, session, instantiate(typed.flavor, where="flavor"))
    runs: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}

    def once(side: str) -> tuple[float, float]:
        if side == "official":
            *seconds, resolved = official(client, stand_in, row, Path(gen["assets"]))
        else:
            mode, _, cold = side.partition("-")
            *seconds, resolved = crucible_grading(*modes[mode], row["patch"], ahead=not cold)
        assert resolved, f"{side} did not resolve the gold patch of {iid}"
        return seconds[0], seconds[1]

    for side in runs:  # one warm-up each: imports, first connections, page cache
        once(side)
    for trial in range(trials):
        order = list(runs) if trial % 2 == 0 else list(runs)[::-1]  # no side always first
        for side in order:
            runs[side].append(once(side))
    table = []
    for index, what in ((0, "to the verdict"), (1, "removed too")):
        floor = statistics.median(t[index] for t in runs["official"])
        for side, found in runs.items():
            values = [r[index] for r in found]
            table.append(
                (
                    iid.split("__")[1][:12],
                    f"{SIDES[side]}, {what}",
                    round(statistics.median(values), 3),
                    round(statistics.median(values) / floor, 2),
                    f"{min(values):.3f}..{max(values):.3f}",
                )
            )
    floor = statistics.median(t[0] for t in runs["official"])
    return table, {side: statistics.median(t[0] for t in runs[side]) / floor for side in SIDES if side != "official"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    ns = parser.parse_args()
    client = ensure_engine(client_timeout=600)
    base = ensure_base_image(client).tag
    work = Path(tempfile.mkdtemp(prefix="bench-swe-"))
    # the runs go to a throwaway store, not the user's (its tables are what `make demo` prints)
    os.environ.setdefault("CRUCIBLE_HOME", str(work / "home"))
    gen = swe_synth.generate(work, base, with_pytest=True)
    os.environ.update(swe_synth.env_for(gen))
    table, failed = [], []
    for iid in (CALC, TALLY):
        rows, ratios = measure(client, gen, iid, ns.trials)
        table += rows
        for side, limit in TARGETS.items():
            if ratios[side] > limit:
                failed.append(f"{iid}: {SIDES[side]} is {ratios[side]:.2f}x the official steps (limit {limit})")
    print(f"{ns.trials} trials each (after one warm-up), interleaved, medians; outcome identical (resolved)")
    print(format_table(["instance", "grading", "median s", "x official", "min..max s"], table))
    rates = throughput(gen, max(1, ns.trials // 2))
    print(
        f"crucible swe eval --workers 2 over {len(gen['instances'])} instances: "
        f"{statistics.median(rates):.1f} instances/min (median of {len(rates)})"
    )
    for line in failed:
        print(f"FAIL: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
