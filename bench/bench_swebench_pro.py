"""SWE-bench Pro grading: crucible's replay vs the official evaluator's steps by hand, and
predictions-mode throughput.

1. Grading one instance (the synthetic Python one, gold patch): crucible's grading path (a
   FRESH grading container from the task image + ``SwebenchProFlavor.grade``: history out of
   the vault, every official step as its own exec with its own timeout, the parser host-side)
   against the official steps as ``swe_bench_pro_eval.py`` runs them with local Docker: one
   ``docker run`` of the instance image with the workspace mounted and the entry script (ENV
   exports, reset, checkout, ``git apply -v``, the last before_repo_set_cmd line, run_script.sh
   with stdout/stderr apart, parser.py in the container). Same patch, same image lineage
   (crucible's task image is built FROM the instance image), trials interleaved; the outcome
   must be identical. Ratio = crucible median / official median, to the verdict (the
   container's removal is off both critical paths; shown too); fails above 1.2.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import swe_synth  # noqa: E402
from engine.build.baseimage import ensure_base_image  # noqa: E402
from engine.cli.doctor import ensure_engine  # noqa: E402
from engine.util.tables import format_table  # noqa: E402

LIMIT = 1.2
CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"


def entryscript(row: dict, assets: Path) -> str:
    """The official entry script's steps for ``row`` (written here from the published
    description of ``create_entryscript``), parser run with the image's python3."""
    env = swe_synth_env_lines(assets, row["instance_id"])
    files = ",".join(eval(row["selected_test_files_to_run"]))  # the dataset's Python literal, as officially
    before = row["before_repo_set_cmd"].strip().split("\n")[-1]
    return (f"\n{env}\n# apply patch\ncd /app\ngit reset --hard {row['base_commit']}\ngit checkout {row['base_commit']}\n"
            f"git apply -v /workspace/patch.diff\n{before}\n"
            f"bash /workspace/run_script.sh {files} > /workspace/stdout.log 2> /workspace/stderr.log\n"
            "python3 /workspace/parser.py /workspace/stdout.log /workspace/stderr.log /workspace/output.json\n")


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
        (work / "run_script.sh").write_bytes((assets / "run_scripts" / row["instance_id"] / "run_script.sh").read_bytes())
        (work / "parser.py").write_bytes((assets / "run_scripts" / row["instance_id"] / "parser.py").read_bytes())
        (work / "entryscript.sh").write_text(entryscript(row, assets))
        started = time.perf_counter()
        container = client.containers.run(image, entrypoint="/bin/bash", command=["-c", "bash /workspace/entryscript.sh"],
                                          volumes={str(work): {"bind": "/workspace", "mode": "rw"}}, detach=True)
        try:
            container.wait()
            passed = {t["name"] for t in json.loads((work / "output.json").read_text())["tests"] if t["status"] == "PASSED"}
            required = set(eval(row["fail_to_pass"])) | set(eval(row["pass_to_pass"]))
            verdict = time.perf_counter() - started
        finally:
            container.remove(force=True)
        return verdict, time.perf_counter() - started, required <= passed


def crucible_grading(plan, session, flavor, patch: str) -> tuple[float, float, bool]:
    """crucible's grading: a fresh container + the flavor's grade, as the runner does it:
    (seconds to the verdict, seconds with the container removed, resolved)."""
    from engine.models import CapturedSubmission

    async def grade():
        async with session.runtime.provision(plan.image, run_id=f"bench-{uuid.uuid4().hex[:8]}", network=False,
                                             purpose="grade") as ws:
            verdict = await flavor.grade(ws, plan.spec, CapturedSubmission(diff=patch))
            return verdict, time.perf_counter() - started

    started = time.perf_counter()
    verdict, to_verdict = asyncio.run(grade())
    return to_verdict, time.perf_counter() - started, verdict.reward == 1.0


def throughput(gen: dict, trials: int) -> list[float]:
    rates = []
    rows = [json.loads(line) for line in Path(gen["dataset"]).read_text().splitlines()]
    for _ in range(trials):
        with tempfile.TemporaryDirectory(prefix="bench-swe-eval-") as tmp:
            preds = Path(tmp) / "p.jsonl"
            model = f"bench-{uuid.uuid4().hex[:8]}"
            preds.write_text("".join(json.dumps({"instance_id": r["instance_id"], "model_patch": r["patch"],
                                                 "model_name_or_path": model}) + "\n" for r in rows))
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "engine.cli", "swe", "eval", str(preds), "--workers", "2",
                                   "--output", tmp], cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
            seconds = time.perf_counter() - started
            if proc.returncode != 0 or not all(json.loads((Path(tmp) / "eval_results.json").read_text()).values()):
                raise SystemExit(f"swe eval failed: {proc.stdout[-1000:]}{proc.stderr[-1000:]}")
            rates.append(len(rows) / seconds * 60)
    return rates


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    ns = parser.parse_args()
    client = ensure_engine(client_timeout=600)
    base = ensure_base_image(client).tag
    work = Path(tempfile.mkdtemp(prefix="bench-swe-"))
    # the runs go to a throwaway store, not the user's (its tables are what `make demo` prints)
    os.environ.setdefault("CRUCIBLE_HOME", str(work / "home"))
    gen = swe_synth.generate(work, base)
    os.environ.update(swe_synth.env_for(gen))
    from engine.config.compose import compose_config, to_typed
    from engine.config.plugins import instantiate
    from engine.plan.spec import plan as make_plan
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task=swebench_pro/{CALC}"]))
    session = session_for(typed)
    planned = make_plan(typed, builder=session.builder)
    session.builder.ensure(planned.image)
    flavor = instantiate(typed.flavor, where="flavor")
    row = next(i.row for i in gen["instances"] if i.instance_id == CALC)
    stand_in = next(i.image for i in gen["instances"] if i.instance_id == CALC)
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    crucible_grading(planned, session, flavor, row["patch"])  # one warm-up each: imports, first connections
    official(client, stand_in, row, Path(gen["assets"]))
    for _ in range(ns.trials):
        *seconds, resolved = official(client, stand_in, row, Path(gen["assets"]))
        theirs.append((seconds[0], seconds[1]))
        assert resolved, "the official steps did not resolve the gold patch"
        *seconds, resolved = crucible_grading(planned, session, flavor, row["patch"])
        ours.append((seconds[0], seconds[1]))
        assert resolved, "crucible did not resolve the gold patch"
    rates = throughput(gen, max(1, ns.trials // 2))
    table = []
    for index, what in ((0, "to the verdict"), (1, "container removed too")):
        floor = statistics.median(t[index] for t in theirs)
        for name, runs in (("official steps by hand (docker run + entry script)", theirs),
                           ("crucible (fresh grading container + replay)", ours)):
            values = [r[index] for r in runs]
            table.append((f"{name}, {what}", round(statistics.median(values), 3),
                          round(statistics.median(values) / floor, 2), f"{min(values):.3f}..{max(values):.3f}"))
    print(f"instance {CALC}, task image {planned.image.tag}, {ns.trials} trials each (after one warm-up), "
          "medians; outcome identical (resolved)")
    print(format_table(["grading", "median s", "x official", "min..max s"], table))
    print(f"crucible swe eval --workers 2 over {len(gen['instances'])} instances: "
          f"{statistics.median(rates):.1f} instances/min (median of {len(rates)})")
    ratio = statistics.median(t[0] for t in ours) / statistics.median(t[0] for t in theirs)
    if ratio > LIMIT:
        print(f"FAIL: crucible's grading is {ratio:.2f}x the official steps (limit {LIMIT})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
