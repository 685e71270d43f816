"""``crucible run``: the Hydra app. One run (in this process, where it gets what Hydra's run
mode gives it, without Hydra's app: ``_run_directly``; a Hydra flag or ``hydra.*`` override
still goes through the app), or with ``-m`` a sweep (in this process through the batch API,
engine/cli/sweep.py; or through a Hydra launcher named by ``hydra/launcher=``).

Before Hydra sees the command line, group globs are expanded (stock ``glob()`` misses
nested task sets) and every choice is composed once, so a bad key fails in one line
instead of inside a launcher worker. Each job plans its spec, skips it when
``resume=true`` and the store already has a completed run of that spec hash, and
otherwise executes it with its Hydra output directory as the run directory.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import uuid4

from engine.cli.sweep import Sweep, already_done, parallelism, print_record, uses_hydra_launcher
from engine.config.compose import combinations, compose_config, covering, expand_globs
from engine.config.tree import CONF_DIR, searchpath_override
from engine.run.progress import USER_ERROR_MARKER, SweepProgress, mark_job
from engine.util import paths

if TYPE_CHECKING:
    from concurrent.futures import Future

    from omegaconf import DictConfig

    from engine.store.duckdb import DuckDBStore


_FLAGS_WITH_VALUE = {
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
    "--info",
    "-i",
}
_NO_VALIDATION = {"--hydra-help", "--info", "-i", "--version", "--shell-completion", "-sc"}
_outcome: dict[str, int] = {}


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    flags, overrides, i = [], [], 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            flags.append(arg)
            if (
                arg in _FLAGS_WITH_VALUE
                and i + 1 < len(args)
                and not args[i + 1].startswith("-")
                and "=" not in args[i + 1]
            ):
                flags.append(args[i + 1])
                i += 1
        else:
            overrides.append(arg)
        i += 1
    return flags, overrides


def _preflight_agent(cfg: DictConfig) -> None:
    """Build the agent once here, so a missing API key is one line, not one error run per job."""
    from engine.config.compose import to_typed
    from engine.errors import AgentError, ConfigError
    from engine.plan.spec import agent_part, make_agent

    try:
        agent, model = agent_part(to_typed(cfg))
        make_agent(agent, model)
    except AgentError as exc:
        raise ConfigError(str(exc)) from exc


def _validate(overrides: list[str]) -> tuple[list[tuple[list[str], object]], str | None]:
    """Compose enough combinations that every value of every sweep axis is tried once
    (``covering``), so a bad choice fails in one line before anything runs.

    Returns every combination with its composed config (None for those not composed here:
    the sweep composes them when it plans them) and the store they use (a sweep has one:
    ``store`` is no sweep axis). Nothing is composed twice.
    """
    combos = combinations(overrides)
    configs: list[object] = [None] * len(combos)
    store = None
    for index in covering(combos):
        # The launcher's parallelism is no part of a job's config (``parallelism`` checks it):
        # left in, it would send every covering compose to Hydra (~0.25 s each).
        cfg = compose_config([o for o in combos[index] if o.partition("=")[0] != "hydra.launcher.n_jobs"])
        store = cfg.get("store")
        _preflight_agent(cfg)
        configs[index] = cfg
    return list(zip(combos, configs)), store


def run_hydra(args: list[str]) -> int:
    flags, overrides = split_args(args)
    if {"-h", "--help"} & set(flags):  # crucible's own help: Hydra's needs a task= to compose first
        from engine.cli.run_help import run_help

        print(run_help(), end="")
        return 0
    multirun = "-m" in flags or "--multirun" in flags
    runs_jobs = not set(flags) & _NO_VALIDATION and "--cfg" not in flags and "-c" not in flags
    composed: list[tuple[list[str], object]] = []
    store = opened = None
    direct = False
    if not set(flags) & _NO_VALIDATION:
        overrides = expand_globs(overrides)
        if multirun:
            from engine.cli.ray_sweep import require_ray_launcher

            overrides = require_ray_launcher(overrides)  # crucible's; without the ray extra: one line
        ahead = _default_store_ahead(overrides) if runs_jobs else None
        composed, store = _validate(overrides)
        direct = _runs_directly(flags, overrides, composed, runs_jobs=runs_jobs)
        if direct:
            from engine.capabilities.preload import serving_loaded

            serving_loaded()  # what serves the run's tools loads while its store, engine and plan are readied
        if runs_jobs:
            from engine.run.session import open_store
            from engine.runtimes.docker.daemon import require_engine

            # a store= that cannot be one: one line now, before anything runs
            opened = ahead.result() if ahead is not None and store is None else open_store(store)
            require_engine()  # one line now, not one per launcher worker
    extra = searchpath_override()
    sweep_id = None
    if multirun:
        sweep_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid4().hex[:6]
        extra += [f"sweep_id={sweep_id}", f"hydra.sweep.dir={_sweep_dir(sweep_id)}"]
    if direct:
        return _run_directly(*composed[0], store=opened)
    sys.argv = ["crucible run", *flags, *overrides, *extra]
    _outcome.clear()
    if not (multirun and runs_jobs):
        _hydra_main()
        return _outcome.get("exit_code", 0)
    assert sweep_id is not None  # multirun: set above
    if not uses_hydra_launcher(overrides):
        from engine.capabilities.preload import serving_loaded

        serving_loaded()  # the runs' serving machinery loads while the sweep is planned
    _before_sweep(store, opened)
    in_process = (
        None
        if uses_hydra_launcher(overrides)
        else Sweep(
            composed,
            sweep_id=sweep_id,
            sweep_dir=_sweep_dir(sweep_id),
            parallel=parallelism(overrides, _default_parallelism()),
            store=(store, opened) if opened is not None else None,
        )
    )
    if in_process is not None:
        in_process.plan_first()  # a missing repo or ref: one line, before anything runs or is shown
    with SweepProgress(_sweep_dir(sweep_id), len(composed), label=sweep_id):
        if in_process is None:
            _hydra_main()
        else:
            in_process.run()
    return _sweep_summary(sweep_id, store)


def _default_store_ahead(overrides: list[str]) -> Future[DuckDBStore] | None:
    """The default store, opened in a thread while the command composes (DuckDB's attach,
    ~0.05 s, leaves the interpreter to the compose): taken where the config names no store
    of its own. Only a store that exists already: none is made for a config that names another."""
    if any(o.lstrip("+~").partition("=")[0] == "store" for o in overrides) or not paths.store_path().exists():
        return None
    from concurrent.futures import Future

    from engine.run.session import open_store

    opened: Future[DuckDBStore] = Future()

    def run() -> None:
        try:
            opened.set_result(open_store(None))
        except BaseException as exc:  # raised where it is taken, as a store opened there would be
            opened.set_exception(exc)

    threading.Thread(target=run, name="crucible-store-ahead").start()
    return opened


def _default_parallelism() -> int:
    """conf/config.yaml's ``hydra.launcher.n_jobs``: one default for both launchers."""
    import yaml  # a plain number in a plain file: no OmegaConf grammar to warm up (~0.2 s)

    return int(yaml.safe_load((CONF_DIR / "config.yaml").read_text())["hydra"]["launcher"]["n_jobs"])


def _sweep_dir(sweep_id: str) -> Path:
    return paths.runs_dir() / "sweeps" / sweep_id


def _before_sweep(store: str | None, opened: DuckDBStore | None = None) -> None:
    """Housekeeping once, here (a killed sweep's runs are marked before a resume plans), and
    name this process as the sweep's owner, whose death ends its workers (engine.run.sweep_guard).
    ``opened``: that store, opened already."""
    from engine.run.session import housekeeping, open_store
    from engine.run.sweep_guard import claim_sweep

    housekeeping(opened if opened is not None else open_store(store))
    claim_sweep()


def _sweep_summary(sweep_id: str, store_path: str | None = None) -> int:
    from engine.run.session import open_store
    from engine.util.tables import format_table

    store = open_store(store_path)
    failed_jobs = sorted(_sweep_dir(sweep_id).glob(f"*/{USER_ERROR_MARKER}"))
    # A run the infrastructure failed (a host or worker that went away) is shown as such and
    # left out of the pass rate: it is no attempt (its retry, or a resume, is).
    cols, rows = store.query(
        "SELECT task_id, agent, coalesce(model, '') AS model, attempt, "
        "CASE WHEN infrastructure THEN 'error (infrastructure)' ELSE status END AS status, reward, "
        f"round(epoch(ended_at) - epoch(started_at), 2) AS seconds FROM runs WHERE sweep_id = '{sweep_id}' "
        "ORDER BY task_id, agent, model, attempt, started_at",
        ours=True,
    )
    print(f"\nsweep {sweep_id}: {len(rows)} run(s) stored")
    if rows:
        print(format_table(cols, rows))
        cols, rows = store.query(
            "SELECT agent, coalesce(model, '') AS model, count(*) AS runs, "
            "count(*) FILTER (WHERE status = 'completed') AS completed, "
            "count(*) FILTER (WHERE infrastructure) AS infrastructure, "
            "round(avg(CASE WHEN reward >= 1.0 THEN 1.0 ELSE 0.0 END) FILTER (WHERE NOT infrastructure), 3) "
            f"AS pass_rate FROM runs WHERE sweep_id = '{sweep_id}' GROUP BY ALL ORDER BY agent, model",
            ours=True,
        )
        print("\npass rate")
        print(format_table(cols, rows))
    for marker in failed_jobs:
        print(f"job {marker.parent.name} did not run: {marker.read_text().strip()}", file=sys.stderr)
    return 1 if failed_jobs else 0


def _runs_directly(
    flags: list[str], overrides: list[str], composed: list[tuple[list[str], object]], *, runs_jobs: bool
) -> bool:
    """Whether the command is one run that needs nothing of Hydra's app: no flag (``-m``,
    ``--cfg``, ...), no ``hydra.*`` override (``hydra.run.dir=``, a launcher: the app's to
    read), one combination, composed."""
    hydra_own = any(o.lstrip("+~").startswith("hydra") for o in overrides)
    return runs_jobs and not flags and not hydra_own and len(composed) == 1 and composed[0][1] is not None


def _run_directly(overrides: list[str], cfg: object, *, store: DuckDBStore | None) -> int:
    """One run (no ``-m``, no Hydra flag or ``hydra.*`` override) without Hydra's app, which
    would compose the same config twice more (~0.2 s each) to name a directory: the run gets
    what Hydra's run mode gives it, ``runs/single/<local time>-<override dirname>`` with
    ``.hydra/config.yaml`` (the batch writes it) and ``.hydra/overrides.yaml``."""
    from omegaconf import DictConfig

    from engine.config.text import config_yaml

    assert isinstance(cfg, DictConfig)  # composed by _validate
    run_dir = paths.runs_dir() / "single" / f"{datetime.now():%Y%m%d-%H%M%S}-{override_dirname(overrides)}"
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text(config_yaml(overrides))
    (run_dir / ".hydra" / "config.yaml").write_text(config_yaml(cfg))  # as composed: what rerun re-plans
    _outcome.clear()
    _run_job(cfg, run_dir, store)
    return _outcome.get("exit_code", 0)


def override_dirname(overrides: list[str]) -> str:
    """Hydra's ``hydra.job.override_dirname`` as conf/config.yaml sets it up (``item_sep: ","``,
    no key excluded): the overrides as given, sorted, joined."""
    return ",".join(sorted(overrides))


def _job(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    _run_job(cfg, Path(HydraConfig.get().runtime.output_dir))  # Hydra saved its config there


def _run_job(cfg: DictConfig, run_dir: Path, store: DuckDBStore | None = None) -> None:
    """One job, as Hydra's run mode or a launcher's worker runs it (``store``: the store the
    command opened already, if it did)."""
    from omegaconf import OmegaConf

    from engine.config.compose import to_typed
    from engine.errors import BuildError, UserError
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import housekeeping, session_for
    from engine.run.sweep_guard import guard_worker

    guard_worker()
    try:
        OmegaConf.resolve(cfg)
        typed = to_typed(cfg)
        session = session_for(typed, store)
        if typed.sweep_id is None:
            housekeeping(session.store)
        planned = plan(typed, builder=session.builder)
        if typed.resume and already_done(planned, session, run_dir, typed.sweep_id):
            return
        record = asyncio.run(
            run_one(planned, session, run_dir=run_dir, sweep_id=typed.sweep_id, retries=typed.retries.infrastructure)
        )
    except UserError as exc:
        print(f"crucible run: {exc}", file=sys.stderr)
        _outcome["exit_code"] = exc.exit_code
        mark_job(run_dir, USER_ERROR_MARKER, str(exc))  # a sweep's summary reports it
        return
    except BuildError as exc:
        # No run started, so none records it: said here (the step and its last output), not
        # as Hydra's traceback.
        print(f"crucible run: {exc}", file=sys.stderr)
        _outcome["exit_code"] = 1
        mark_job(run_dir, USER_ERROR_MARKER, str(exc).splitlines()[0])
        return
    print_record(record)
    _outcome["exit_code"] = 0 if record.status == "completed" else 1


def _hydra_main() -> None:
    import hydra

    from engine.config.schema import register

    register()  # the structured-config schemas, in Hydra's ConfigStore

    hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(_job)()
