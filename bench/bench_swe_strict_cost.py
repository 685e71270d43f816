"""What crucible-strict costs on SWE-bench Pro, by the kind of second source an instance gets.

For each synthetic instance (tests/swe_synth.py: unittest ``calc``, pytest ``tally`` (JUnit
report), ``ledger`` (pytest once per file, through a runner in ansible-test's shape: a
JUnit report per session), Go ``gosum`` (test2json events), jest ``jestshout`` and mocha ``mochashout`` (the
runner's own results through the node hook), and ``mochafile`` (mocha after the run script's sed
of every test file, NodeBB's shape: under strict root makes that edit of the locked files)), the gold patch is graded by ``crucible swe eval``
under ``integrity=none`` (the official evaluator's steps) and ``integrity=strict``
(crucible-strict: the defences, and the differential re-run in a second grading container beside
the first), alternating, a new model name each time so nothing comes from the store. Reported:
the median wall time of the eval per mode, and their ratio; and the median time of the grading
itself (the raw grade's ``seconds``: the replay, without the run's agent and store).

    .venv/bin/python bench/bench_swe_strict_cost.py [--trials N] [--only SUBSTRING ...]
"""

from __future__ import annotations

import argparse
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
import swe_synth_instances  # noqa: E402

from engine.build.baseimage import ensure_base_image  # noqa: E402
from engine.runtimes.docker.daemon import ensure_engine  # noqa: E402
from engine.util.tables import format_table  # noqa: E402

KINDS = {
    "instance_synth__calc-1111111111111111111111111111111111111111-vnan": "unittest (parser alone)",
    swe_synth_instances.TALLY: "pytest (JUnit report)",
    swe_synth_instances.LEDGER: "pytest per file via a runner (JUnit reports)",
    swe_synth_instances.GO_SUM: "go test (test2json events)",
    swe_synth_instances.JEST_SHOUT: "jest via yarn (runner results)",
    swe_synth_instances.MOCHA_SHOUT: "mocha (runner results)",
    swe_synth_instances.MOCHA_FILE: "mocha after the script's sed of the tests (root's edit)",
}


def grade(work: Path, iid: str, patch: str, mode: str) -> tuple[float, float, float]:
    """(wall seconds of `crucible swe eval`, the grading's own seconds, reward)."""
    model = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
    predictions = work / f"{model}.jsonl"
    predictions.write_text(json.dumps({"instance_id": iid, "model_patch": patch, "model_name_or_path": model}))
    started = time.perf_counter()
    done = swe_synth.crucible("swe", "eval", str(predictions), f"integrity={mode}", "--output", str(work / model))
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stdout + done.stderr
    out = swe_synth.crucible("query", f"select reward, raw_grade from runs where agent = '{model}'", "--json")
    [record] = json.loads(out.stdout)
    raw = record["raw_grade"] if isinstance(record["raw_grade"], dict) else json.loads(record["raw_grade"])
    return wall, float(raw.get("seconds") or 0.0), float(record["reward"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], help="instances whose id holds one of these (default: all)")
    ns = parser.parse_args()
    client = ensure_engine(client_timeout=600)
    base = ensure_base_image(client).tag
    work = Path(tempfile.mkdtemp(prefix="bench-swe-strict-"))
    # the runs go to a throwaway store, not the user's (its tables are what `make demo` prints)
    os.environ.setdefault("CRUCIBLE_HOME", str(work / "home"))
    gen = swe_synth.generate(work, base, with_pytest=True, with_go=True, with_js=True)
    os.environ.update(swe_synth.env_for(gen))
    rows = []
    for inst in gen["instances"]:
        if inst.instance_id not in KINDS or (ns.only and not any(part in inst.instance_id for part in ns.only)):
            continue
        for mode in ("none", "strict"):  # one warm-up each: the task image, first connections
            grade(work, inst.instance_id, inst.row["patch"], mode)
        runs: dict[str, list[tuple[float, float]]] = {"none": [], "strict": []}
        for _ in range(ns.trials):
            for mode in ("none", "strict"):
                wall, seconds, reward = grade(work, inst.instance_id, inst.row["patch"], mode)
                assert reward == 1.0, f"{inst.instance_id} gold under {mode}: {reward}"
                runs[mode].append((wall, seconds))
        wall = {m: statistics.median(w for w, _ in r) for m, r in runs.items()}
        graded = {m: statistics.median(s for _, s in r) for m, r in runs.items()}
        rows.append(
            [
                KINDS[inst.instance_id],
                round(wall["none"], 2),
                round(wall["strict"], 2),
                round(wall["strict"] / wall["none"], 2),
                round(graded["none"], 2),
                round(graded["strict"], 2),
                round(graded["strict"] / graded["none"], 2),
            ]
        )
    print(f"gold patch, {ns.trials} trials per mode, alternating; medians")
    print(
        format_table(["instance", "eval none s", "eval strict s", "x", "grading none s", "grading strict s", "x"], rows)
    )
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
