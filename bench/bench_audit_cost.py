"""What the runtime audit (envs/coding/verdict/crucible_audit.py) costs a test run: the same
pytest, as grading wraps it (the end plugin, its token), with the audit and without, alternating,
in one process, on the host. The suite is ``wrinkles/data_driven``'s repo with its hidden cases
and a generated module of upstream-like tests (parametrized cases, a dataclass, a namedtuple,
logging, json and a temporary file per test), so the hook sees imports, opens and the framework
checks run before every test.

    .venv/bin/python bench/bench_audit_cost.py [--trials 5] [--tests 1500]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envs.coding import runner_end  # noqa: E402

SHELL, RUNNER = "e" * 32, "f" * 32
GENERATED = """
import dataclasses, json, logging, collections
import pytest
from hikelog.duration import format_duration, parse_duration

Pair = collections.namedtuple("Pair", "text seconds")


@dataclasses.dataclass
class Case:
    seconds: int


@pytest.mark.parametrize("n", range({n}))
def test_round_trip(n, tmp_path):
    logging.getLogger(__name__).debug("case %s", n)
    case = Case(n * 7)
    (tmp_path / "c.json").write_text(json.dumps(Pair(format_duration(case.seconds), case.seconds)._asdict()))
    pair = json.loads((tmp_path / "c.json").read_text())
    assert parse_duration(pair["text"]) == pair["seconds"]
"""


def make_repo(where: Path, tests: int) -> Path:
    repo = where / "repo"
    shutil.copytree(ROOT / "samples" / "wrinkles" / "main" / "01_hikelog" / "files", repo)
    fixed = ROOT / "samples" / "wrinkles" / "tasks" / "data_driven" / "fix" / "files" / "hikelog" / "duration.py"
    shutil.copy(fixed, repo / "hikelog" / "duration.py")
    (repo / "tests" / "test_generated.py").write_text(GENERATED.replace("{n}", str(tests)))
    return repo


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(repo: Path, audited: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the run's processes): on a loaded machine the CPU time is the steadier."""
    results = repo.parent / "results"
    shutil.rmtree(results, ignore_errors=True)
    script = (
        "IFS= read -r go || exit 97\nread -r crucible_end crucible_runner || true\nexec </dev/null 2>&1\n"
        + runner_end.wrap(
            f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
            str(results),
            hide_running_test=True,
            one_process=True,
            audit=audited,
        )
    )
    began, cpu = time.perf_counter(), _cpu()
    done = subprocess.run(
        ["bash", "-c", script], input=f"go\n{SHELL} {RUNNER}\n".encode(), cwd=repo, capture_output=True, timeout=600
    )
    seconds, cpu = time.perf_counter() - began, _cpu() - cpu
    cut = runner_end.split(done.stdout, SHELL, RUNNER)
    if done.returncode != 0 or cut.runner_report is None or (audited and cut.runner_audit is None):
        raise SystemExit(f"the run failed (exit {done.returncode}):\n{done.stdout.decode()[-2000:]}")
    return seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--tests", type=int, default=1500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        repo = make_repo(Path(folder), args.tests)
        run_once(repo, False)  # warm the file cache
        times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.trials):
            for audited in (False, True):
                times[audited].append(run_once(repo, audited))
    for index, what in ((0, "wall"), (1, "cpu")):
        rows = {audited: [t[index] for t in times[audited]] for audited in (False, True)}
        for audited in (False, True):
            row = rows[audited]
            print(
                f"{what:4} {'audit' if audited else 'no audit':9} median {statistics.median(row):7.3f}s  "
                f"min {min(row):7.3f}s  max {max(row):7.3f}s"
            )
        print(
            f"{what:4} audit / no audit = {statistics.median(rows[True]) / statistics.median(rows[False]):.2f} "
            f"by medians, {min(rows[True]) / min(rows[False]):.2f} by the fastest"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
