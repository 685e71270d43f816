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
import hashlib
from dataclasses import dataclass
from pathlib import Path

from typing import Any

from engine.config.plugins import instantiate, plugin_class
from engine.config.schema import CrucibleConfig
from engine.errors import ConfigError
from engine.interfaces import ImageBuilder, PlanContext
from engine.models import ImageRef, RunSpec
from engine.util import paths

DOCKERFILE = paths.PROJECT_ROOT / "Dockerfile.hud"


@functools.lru_cache(maxsize=1)
def engine_version() -> str:
    """A content hash of the engine's and environments' code (and the image definition)."""
    digest = hashlib.sha256()
    files = [DOCKERFILE]
    for package in ("engine", "envs", "swe_tasks"):
        files += (paths.PROJECT_ROOT / package).rglob("*.py")
    for path in sorted(set(files)):
        if path.is_file():
            digest.update(str(path.relative_to(paths.PROJECT_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Plan:
    spec: RunSpec
    image: ImageRef


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
    if cfg.model is None:
        raise ConfigError(f"agent '{cfg.agent.name}' needs a model: add model=<provider>/<name>")
    return cfg.agent, cfg.model


def make_agent(agent: Any, model: str | None) -> Any:
    """The agent plug-in from its config part and the spec's model (for agents that take one)."""
    return instantiate(agent, where="agent", **({"model": model} if model else {}))


def base_image_tag(cfg: CrucibleConfig, builder: ImageBuilder) -> str:
    """What task images build FROM: the builder's own (a runtime's templates), the env's,
    ``build.base``, else the bootstrapped offline base (made now if missing)."""
    chosen = builder.default_base or cfg.env.base_image or cfg.build.base
    if chosen:
        return chosen
    from engine.build.baseimage import ensure_base_image

    return ensure_base_image().tag


def plan(cfg: CrucibleConfig, *, builder: ImageBuilder, pins: dict | None = None) -> Plan:
    """The run spec: the flavor pins and derives its task and names the image's inputs; the
    builder names the image by their hash; everything else is the typed config as is."""
    flavor = instantiate(cfg.flavor, where="flavor")
    agent, model = agent_part(cfg)
    task = dataclasses.replace(cfg.task, id=f"{cfg.task.set}/{cfg.task.name}", pins={})
    ctx = PlanContext(env=cfg.env, base_image=functools.partial(base_image_tag, cfg, builder),
                      dockerfile=DOCKERFILE, cache_dir=paths.cache_dir(), pins=pins)
    planned = flavor.plan_task(task, ctx)
    inputs = planned.image
    image = builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), dict(inputs.build_args), "task")
    spec = RunSpec(
        engine_version=engine_version(),
        task=planned.task,
        env=cfg.env,
        flavor=cfg.flavor,
        agent=agent,
        model=model,
        integrity=cfg.integrity,
        runtime=cfg.runtime,
        image={"tag": image.tag, "input_hash": image.input_hash},
        timeouts=cfg.timeouts,
        seed=cfg.seed,
        attempt=cfg.attempt,
    )
    return Plan(spec=spec, image=image)


def replan(run_dir: Path, *, builder) -> Plan:
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
    return plan(saved, builder=builder, pins=pins)
