"""Runs of SWE-bench Pro's synthetic instances for the strict-grading tests
(tests/flavors/swebench_pro/test_swe_strict*.py): a prediction's patch made in a clone of the
instance's repo, graded by `crucible swe eval` in a mode, and what the store kept of it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import swe_synth

CALC = "instance_synth__calc-1111111111111111111111111111111111111111-vnan"

crucible = swe_synth.crucible


def row(synth: dict, iid: str = CALC) -> dict:
    return next(i.row for i in synth["instances"] if i.instance_id == iid)


def patch_from(synth: dict, tmp: Path, files: dict[str, str], iid: str = CALC) -> str:
    work = tmp / f"edit-{iid}"
    if not work.exists():
        subprocess.run(
            ["git", "clone", "-q", str(Path(synth["dataset"]).parent / "repos" / iid), str(work)], check=True
        )
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "-f", row(synth, iid)["base_commit"]], check=True)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True)
    diff = subprocess.run(
        ["git", "-C", str(work), "diff", "--cached"], check=True, capture_output=True, text=True
    ).stdout
    subprocess.run(["git", "-C", str(work), "reset", "-q", "--hard"], check=True)
    return diff


def graded(tmp_path: Path, model: str, patch: str, mode: str, iid: str = CALC) -> dict:
    """``patch`` graded by `crucible swe eval` under ``mode``: reward and raw grade as stored."""
    path = tmp_path / f"{model}-{mode}.jsonl"
    path.write_text(json.dumps({"instance_id": iid, "model_patch": patch, "model_name_or_path": f"{model}-{mode}"}))
    proc = crucible("swe", "eval", str(path), f"integrity={mode}", "--output", str(tmp_path / f"{model}-{mode}"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = crucible(
        "query",
        f"select run_id, reward, raw_grade from runs where agent = '{model}-{mode}' order by started_at desc limit 1",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    [record] = json.loads(out.stdout)
    raw = record["raw_grade"]
    return {
        "run_id": record["run_id"],
        "reward": record["reward"],
        "raw": json.loads(raw) if isinstance(raw, str) else raw,
    }


def statuses(raw: dict) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for test in raw["parser"]["tests"]:
        found.setdefault(test["name"], []).append(test["status"])
    return found
