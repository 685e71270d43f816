"""Every sample task ships under every integrity mode on both runtimes: golden 1.0, baseline 0.0.

4 sample tasks x {none, vault, strict} x {docker, local}, each run twice as a real crucible
run (plan, build or cache, provision, setup, agent through the task's MCP tools, capture,
grade in a fresh workspace, store): the golden replayed by ``integration_test`` must score
1.0 and the untouched baseline (``noop``) 0.0, both ``completed``, each record saying it got
the mode and the runtime it asked for.

The 48 runs are made once, in-process and a few at a time (most of a run waits on Docker or
on a sandbox's processes), by one module fixture; the parametrized tests only read records,
so each (task, mode, runtime) is its own test id. Hydra composes every option of every group
(four composes cover them all); a run's config is those options put together, which is what
composing its four overrides gives, since no group of crucible's config interpolates another
(the fixture checks two combinations against a whole compose). Each run is then planned for
real (pins, derived validation, image inputs), in a worker thread while earlier runs go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path

import pytest

from engine.models import RunRecord

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = sorted(p.stem for p in (Path(__file__).resolve().parents[3] / "conf" / "task" / "sample").glob("*.yaml"))
MODES = ("none", "vault", "strict")
RUNTIMES = ("docker", "local")
ROLES = {"golden": ("integration_test", 1.0), "baseline": ("noop", 0.0)}
# Runs at once: enough to overlap the waits on Docker and on the sandboxes, few enough not
# to thrash two cores (3, 4 and 6 measured alike here; 1 takes twice as long).
CONCURRENCY = 4
CASES = [
    pytest.param(task, mode, runtime, id=f"{task}-{mode}-{runtime}")
    for task, mode, runtime in itertools.product(TASKS, MODES, RUNTIMES)
]
Key = tuple[str, str, str, str]  # (task, mode, runtime, role)


def _typed(task: str, mode: str, runtime: str, role: str):
    from engine.config.compose import compose_config, to_typed

    agent = ROLES[role][0]
    return to_typed(
        compose_config([f"task=sample/{task}", f"integrity={mode}", f"runtime={runtime}", f"agent={agent}"])
    )


def _configs() -> dict[Key, object]:
    """Every run's typed config, from one compose per option (~0.3 s each) rather than 48."""
    axes = (TASKS, MODES, RUNTIMES, tuple(ROLES))
    groups = ("task", "integrity", "runtime", "agent")
    nodes: dict[str, dict[str, object]] = {group: {} for group in groups}
    for i in range(max(map(len, axes))):
        picks = [options[i % len(options)] for options in axes]
        typed = _typed(*picks)
        for group, pick in zip(groups, picks):
            nodes[group][pick] = getattr(typed, group)
    configs = {
        key: dataclasses.replace(typed, **{g: nodes[g][pick] for g, pick in zip(groups, key)})
        for key in itertools.product(*axes)
    }
    # The control for the shortcut: combinations no compose above made, composed whole.
    for key in ((TASKS[-1], "strict", "local", "golden"), (TASKS[0], "vault", "docker", "baseline")):
        assert configs[key] == _typed(*key), key
    return configs


@dataclasses.dataclass
class Matrix:
    records: dict[Key, RunRecord]
    unavailable: dict[tuple[str, str], str]  # (runtime, mode) -> why this host cannot give it


def _unavailable(sessions: dict, configs: dict[Key, object]) -> dict[tuple[str, str], str]:
    """The runtime's own one-line reason for each mode it cannot give here (e.g. no bubblewrap)."""
    found = {}
    for (_, mode, runtime, _), cfg in configs.items():
        reason = sessions[runtime].runtime.supports(cfg.integrity)
        if reason is not None:
            found[runtime, mode] = reason
    return found


async def _run_all(configs: dict[Key, object], sessions: dict) -> dict[Key, RunRecord]:
    from engine.plan.spec import plan
    from engine.run.batch import BatchJob, RunSlots, run_batch
    from engine.util import paths

    slots = RunSlots(CONCURRENCY)  # shared: both runtimes' runs count against it
    jobs: dict[Key, BatchJob] = {}
    # Docker's and the sandboxes' runs alternate: their waits differ, so they overlap well.
    for key in sorted(configs, key=lambda k: (k[0], k[1], k[3], k[2])):
        jobs[key] = BatchJob(await asyncio.to_thread(plan, configs[key], builder=sessions[key[2]].builder))
    await asyncio.gather(
        *(
            run_batch(
                [job for key, job in jobs.items() if key[2] == runtime],
                session,
                root=paths.runs_dir() / "modes_matrix",
                slots=slots,
            )
            for runtime, session in sessions.items()
        )
    )
    return {key: job.records[0] for key, job in jobs.items()}


def _make_matrix() -> Matrix:
    from engine.run.session import session_for

    configs = _configs()
    sessions, store = {}, None
    for runtime in RUNTIMES:
        sessions[runtime] = session_for(configs[TASKS[0], MODES[0], runtime, "golden"], store=store)
        store = sessions[runtime].store
    unavailable = _unavailable(sessions, configs)
    todo = {key: cfg for key, cfg in configs.items() if (key[2], key[1]) not in unavailable}
    return Matrix(records=asyncio.run(_run_all(todo, sessions)), unavailable=unavailable)


@pytest.fixture(scope="module")
def matrix(docker_client, base_image) -> Matrix:
    return _make_matrix()


def _check(matrix: Matrix, task: str, mode: str, runtime: str, role: str) -> None:
    if (runtime, mode) in matrix.unavailable:
        pytest.skip(matrix.unavailable[runtime, mode])
    agent, expected = ROLES[role]
    record = matrix.records[task, mode, runtime, role]
    outcome = (
        f"reward {record.reward}"
        if record.status == "completed"
        else f"status {record.status} (error in {record.error_phase}: {record.error})"
    )
    where = (
        f"sample/{task} integrity={mode} runtime={runtime} agent={agent}: {outcome}; raw grade reason "
        f"{(record.raw_grade or {}).get('reason')!r}; run {record.run_id} in {record.run_dir}"
    )
    assert record.status == "completed", where
    assert record.reward == expected, f"{where} (expected {expected})"
    assert record.integrity_obtained == mode, f"{where}: integrity obtained {record.integrity_obtained!r}"
    assert record.runtime == runtime, f"{where}: ran on runtime {record.runtime!r}"
    assert record.task_id == f"sample/{task}" and record.agent == agent, where
    if role == "golden":  # every replayed tool call of the golden worked, not just the score
        assert not record.warnings, f"{where}: validation warnings {record.warnings}"


@pytest.mark.parametrize("task, mode, runtime", CASES)
def test_golden_scores_one_under_every_mode_and_runtime(matrix, task, mode, runtime):
    _check(matrix, task, mode, runtime, "golden")


@pytest.mark.parametrize("task, mode, runtime", CASES)
def test_baseline_scores_zero_under_every_mode_and_runtime(matrix, task, mode, runtime):
    _check(matrix, task, mode, runtime, "baseline")
