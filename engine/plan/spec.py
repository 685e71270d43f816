"""Planning: a composed config becomes a frozen, pinned, content-hashed RunSpec.

Everything that can change a verdict is pinned here, before anything runs: the flavor
pins its task (git refs become commit SHAs) and names its image's inputs, the image is
named by the hash of those inputs, and the engine's own code is hashed into
``engine_version``. Re-planning a job's ``.hydra/config.yaml`` with
its recorded pins (``pins.json``) yields the same ``spec_hash``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config.plugins import instantiate, plugin_class
from engine.config.schema import CrucibleConfig, TaskConfig
from engine.errors import BaseImageMissing, ConfigError
from engine.interfaces import ImageBuilder, PlanContext, SetsUpInImage
from engine.models import ImageRef, RunSpec, TaskLimits
from engine.plan import lock
from engine.plan.layer import PURPOSE as LAYER_PURPOSE
from engine.plan.layer import layer_inputs
from engine.plan.setup_layer import PURPOSE as SETUP_PURPOSE
from engine.plan.setup_layer import setup_layer_inputs
from engine.util import paths
from engine.util.codehash import DOCKERFILE, engine_version


@dataclass(frozen=True)
class Plan:
    spec: RunSpec
    image: ImageRef
    """The task image: grading always runs on it."""
    agent_image: ImageRef | None = None
    """The layer the agent's needs make over ``image`` (``engine/plan/layer.py``); None when
    its agent declares none."""
    setup_image: ImageRef | None = None
    """The layer its flavor's setup of the spec alone makes over ``agent_workspace_image``
    (``engine/plan/setup_layer.py``), where the agent's workspace starts once it is built; None
    for a flavor (or builder) without one. Not among ``images``: a batch builds it apart, and a
    run whose layer could not be built is set up in its workspace instead."""

    @property
    def images(self) -> tuple[ImageRef, ...]:
        """Every image the run needs, in build order (the task image, then its agent layer)."""
        return (self.image,) if self.agent_image is None else (self.image, self.agent_image)

    @property
    def agent_workspace_image(self) -> ImageRef:
        """What the agent's workspace is provisioned from, its setup layer aside."""
        return self.agent_image or self.image


def agent_part(cfg: CrucibleConfig) -> tuple[Any, str | None]:
    """The agent's config and the model it runs, or None for an agent that takes none (so
    ``agent=noop,x model=a,b`` makes one noop spec, not two)."""
    cls = plugin_class(cfg.agent._target_, where="agent")
    if cfg.model is not None and cfg.model.split("/")[-1] in ("integration_test", "noop"):
        raise ConfigError(
            f"'{cfg.model}' is an agent, not a model; to prove a task ships use `crucible check task=...`"
        )
    if not getattr(cls, "takes_model", False):
        return cfg.agent, None
    if cfg.model is None and getattr(cfg.agent, "default_model", None):
        # An agent tied to one provider's protocol (a coding CLI) names its own default, so a
        # sweep across such agents (agent=claude_code,codex) needs no model= that fits them all.
        return cfg.agent, cfg.agent.default_model
    if cfg.model is None:
        raise ConfigError(f"agent '{cfg.agent.name}' needs a model: add model=<provider>/<name>")
    return cfg.agent, cfg.model


def make_agent(agent: Any, model: str | None) -> Any:
    """The agent plug-in from its config part and the spec's model (for agents that take one).
    Its ``image`` needs are the engine's to build, not the agent's to take."""
    cls = plugin_class(agent._target_, where="agent")
    kwargs = {f.name: getattr(agent, f.name) for f in dataclasses.fields(agent) if f.name not in ("_target_", "image")}
    return cls(**kwargs, **({"model": model} if model else {}))


def base_image_tag(cfg: CrucibleConfig, builder: ImageBuilder) -> str:
    """What task images build FROM: the builder's own (a runtime's templates), the env's,
    ``build.base``, else the builder's fallback (Docker's: the bootstrapped offline base, made
    now if missing)."""
    chosen = builder.default_base or cfg.env.base_image or cfg.build.base
    if chosen:
        return chosen
    return builder.fallback_base()


def plan(
    cfg: CrucibleConfig, *, builder: ImageBuilder, pins: Mapping[str, str] | None = None, use_lock: bool = True
) -> Plan:
    """The run spec: the flavor pins and derives its task and names the image's inputs; the
    builder names the image by their hash; the task's lock file (``engine.plan.lock``), when
    it has one and lists no tests itself, gives the named tests it is graded on, and must be
    fresh. Everything else is the typed config as is. ``use_lock=False``: as if the task had
    no lock (``crucible lock`` deriving a new one)."""
    flavor = instantiate(cfg.flavor, where="flavor")
    agent, model = agent_part(cfg)
    task = dataclasses.replace(cfg.task, id=f"{cfg.task.set}/{cfg.task.name}", pins={})
    ctx = PlanContext(
        env=cfg.env,
        base_image=functools.partial(base_image_tag, cfg, builder),
        dockerfile=DOCKERFILE,
        cache_dir=paths.cache_dir(),
        pins=pins,
        integrity=cfg.integrity,
    )
    planned = flavor.plan_task(task, ctx)
    inputs = planned.image
    try:
        image = builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), dict(inputs.build_args), "task")
    except BaseImageMissing as exc:
        if not inputs.missing_base_hint:
            raise
        raise BaseImageMissing(f"{exc}; {inputs.missing_base_hint}") from exc
    if inputs.arg_roles:
        image = dataclasses.replace(image, arg_roles=tuple(sorted(inputs.arg_roles.items())))
    agent_image = _agent_layer(cfg, builder, image)
    planned_task = planned.task
    if use_lock and not (planned_task.fail_to_pass or planned_task.pass_to_pass):
        planned_task = _locked(planned_task)
    timeouts, integrity = folded_limits(cfg.timeouts, cfg.integrity, planned.limits)
    spec = RunSpec(
        engine_version=engine_version(cfg.flavor._target_, cfg.agent._target_),
        task=planned_task,
        env=cfg.env,
        flavor=cfg.flavor,
        agent=agent,
        model=model,
        integrity=integrity,
        runtime=cfg.runtime,
        image={"tag": image.tag, "input_hash": image.input_hash},
        timeouts=timeouts,
        seed=cfg.seed,
        attempt=cfg.attempt,
        agent_image=None if agent_image is None else {"tag": agent_image.tag, "input_hash": agent_image.input_hash},
        limits=planned.limits,
    )
    setup_image = _setup_layer(flavor, spec, builder, agent_image or image) if cfg.build.setup_layers else None
    return Plan(spec=spec, image=image, agent_image=agent_image, setup_image=setup_image)


def folded_limits(timeouts: Any, integrity: Any, limits: TaskLimits | None) -> tuple[Any, Any]:
    """The run's timeouts and integrity with a task's own limits over them: the task's times
    win over the run's config (``timeouts.agent=`` on the command line included: the task's
    author knows what it needs, and one config then runs a dataset of tasks, each under its own
    limit); its network only ever narrows the mode's (``allow_internet = true`` never gives
    ``strict``'s agent a network). Its cpus and memory stay in ``RunSpec.limits``, for the
    runtime. All of it is in the spec, so its hash covers every limit."""
    if limits is None:
        return timeouts, integrity
    times = {
        key: float(value)
        for key, value in (("agent", limits.agent_timeout), ("grade", limits.grade_timeout))
        if value is not None
    }
    if times:
        timeouts = dataclasses.replace(timeouts, **times)
    if limits.network is False and integrity.agent_network:
        integrity = dataclasses.replace(integrity, agent_network=False)
    return timeouts, integrity


def _agent_layer(cfg: CrucibleConfig, builder: ImageBuilder, task_image: ImageRef) -> ImageRef | None:
    """The agent's image: its declared needs as a layer over the task image, or None when it
    declares none. A runtime whose builder makes its own templates (``runtime=local``) cannot
    layer anything over them: that is a ConfigError here, before anything runs."""
    needs = getattr(cfg.agent, "image", None)
    if needs is None or not needs.declares_any():
        return None
    if builder.default_base is not None:
        raise ConfigError(
            f"runtime {cfg.runtime.name} cannot install agent image needs (agent "
            f"{cfg.agent.name} declares agent.image); use runtime=docker"
        )
    inputs = layer_inputs(needs, task_image.tag, agent=cfg.agent.name)
    return builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), dict(inputs.build_args), LAYER_PURPOSE)


def _setup_layer(flavor: object, spec: RunSpec, builder: ImageBuilder, under: ImageRef) -> ImageRef | None:
    """The layer of ``flavor``'s setup of ``spec`` alone over ``under``, where it names one and
    the builder layers over its images (a runtime with its own templates does not)."""
    if builder.default_base is not None or not isinstance(flavor, SetsUpInImage):
        return None
    script = flavor.setup_script(spec)
    if script is None:
        return None
    inputs = setup_layer_inputs(script, under.tag)
    return builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), dict(inputs.build_args), SETUP_PURPOSE)


def _locked(task: TaskConfig) -> TaskConfig:
    """``task`` with the named tests of its lock file, checked fresh; as it is without one."""
    sent = lock.SENT.get(str(task.id))
    path = lock.lock_path(task.id)
    if sent is None and (path is None or not path.is_file()):
        return task
    if sent is not None:  # the launcher's, with the job (engine/run/ray_job.py)
        path = path or Path(f"{task.id}{lock.SUFFIX} (the launcher's)")
        data = lock.read_lock(path, text=sent)
    else:
        assert path is not None
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"lock file {path} cannot be read: {exc}") from exc
        data = lock.read_lock(path, text=text)
        lock.READ[str(task.id)] = text
    lock.check_fresh(data, path, task.id, task.pins, lock.task_inputs(task))
    return dataclasses.replace(task, fail_to_pass=list(data["fail_to_pass"]), pass_to_pass=list(data["pass_to_pass"]))


def replan(run_dir: Path, *, builder: ImageBuilder) -> Plan:
    """Plan a past run again from its saved config and recorded pins (same spec hash)."""
    import json

    from omegaconf import OmegaConf

    from engine.config.schema import typed as to_typed

    config_file = next((p for p in (run_dir / ".hydra" / "config.yaml", run_dir / "config.yaml") if p.is_file()), None)
    if config_file is None:
        raise ConfigError(f"{run_dir} has no .hydra/config.yaml or config.yaml to re-plan from")
    try:
        saved = to_typed(OmegaConf.to_container(OmegaConf.load(config_file), resolve=False))
    except Exception as exc:
        raise ConfigError(f"{config_file}: cannot be re-planned: {str(exc).splitlines()[0]}") from exc
    pins_file = run_dir / "pins.json"
    pins = json.loads(pins_file.read_text()) if pins_file.is_file() else None
    named_file = run_dir / "named_tests.json"
    if named_file.is_file():  # the lists the run was graded on, whatever the lock says now
        named = json.loads(named_file.read_text())
        saved.task.fail_to_pass = list(named.get("fail_to_pass") or [])
        saved.task.pass_to_pass = list(named.get("pass_to_pass") or [])
        return plan(saved, builder=builder, pins=pins, use_lock=False)
    return plan(saved, builder=builder, pins=pins)
