"""Planning: a composed config becomes a frozen, pinned, content-hashed RunSpec.

Everything that can change a verdict is pinned here, before anything runs: git refs
become commit SHAs, the image is named by the hash of its inputs, and the engine's own
code is hashed into ``engine_version``. Re-planning a job's ``.hydra/config.yaml`` with
its recorded pins (``pins.json``) yields the same ``spec_hash``.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from hydra.utils import get_class

from engine.util import paths
from engine.plan import repos
from engine.errors import ConfigError
from engine.models import ImageRef, RunSpec
from engine.config.schema import ALLOWED_TARGET_PREFIXES, CrucibleConfig

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
    repo_path: Path


def plugin_class(target: str, *, where: str):
    if not target.startswith(ALLOWED_TARGET_PREFIXES):
        raise ConfigError(f"{where}._target_ '{target}' is outside crucible's packages; refusing to instantiate it")
    try:
        return get_class(target)
    except Exception as exc:  # hydra wraps ImportError/AttributeError in its own types
        raise ConfigError(f"{where}._target_ '{target}' cannot be imported: {str(exc).splitlines()[0]}") from exc


def agent_part(cfg: CrucibleConfig) -> dict:
    agent = dataclasses.asdict(cfg.agent)
    cls = plugin_class(agent["_target_"], where="agent")
    if cfg.model is not None and cfg.model.split("/")[-1] in ("integration_test", "noop"):
        raise ConfigError(
            f"'{cfg.model}' is an agent, not a model; to prove a task ships use `crucible check task=...`"
        )
    if getattr(cls, "takes_model", False):
        if cfg.model is None:
            raise ConfigError(f"agent '{agent['name']}' needs a model: add model=<provider>/<name>")
        agent["model"] = cfg.model
    # Agents without a model drop it, so agent=noop,x model=a,b makes one noop spec, not two.
    return agent


def _task_part(cfg: CrucibleConfig, repo_path: Path, pins: dict | None) -> dict:
    task = dataclasses.asdict(cfg.task)
    task_id = f"{task['set']}/{task['name']}"
    task["id"] = task_id
    if pins:
        for role, sha in pins.items():
            if not repos.has_commit(repo_path, sha):
                raise ConfigError(f"task '{task_id}': pinned {role} commit {sha[:12]} is not in {task['repo']}")
        task["pins"] = dict(pins)
    else:
        task["pins"] = {role: repos.pin(repo_path, ref, task_id=task_id, role=role) for role, ref in task["refs"].items()}
    if "{test_files}" not in task["test_command"]:
        raise ConfigError(f"task '{task_id}': test_command has no {{test_files}} placeholder")
    if task["validation"] is None:
        from envs.coding.validation import derive_validation

        task["validation"] = derive_validation(repo_path, task["pins"]["baseline"], task["pins"]["golden"], task["workdir"])
    return task


def task_context(repo_path: Path, task: dict) -> Path:
    """The build context for a task image: the baseline's ancestry as a git bundle, nothing else."""
    sha = task["pins"]["baseline"]
    context = paths.cache_dir() / "contexts" / f"{sha[:20]}-{task['refs']['baseline']}"
    bundle = context / "repo.bundle"
    if not bundle.is_file():
        with repos.file_lock(f"context-{context.name}"):
            if not bundle.is_file():
                context.mkdir(parents=True, exist_ok=True)
                repos.baseline_bundle(repo_path, task["refs"]["baseline"], sha, bundle)
    return context


def base_image_tag(cfg: CrucibleConfig) -> str:
    if cfg.build.base:
        return cfg.build.base
    from engine.build.baseimage import ensure_base_image

    return ensure_base_image().tag


def image_for(cfg: CrucibleConfig, task: dict, repo_path: Path, builder) -> ImageRef:
    build_args = {
        "BASE": getattr(builder, "default_base", None) or base_image_tag(cfg),
        "INSTANCE_ID": "",
        "SYSTEM_PACKAGES": " ".join(sorted(task["system_packages"])),
        "INSTALL_CMD": task["install"],
        "REPO_DIR": task["workdir"],
        "BASELINE_REF": task["refs"]["baseline"],
    }
    return builder.plan(DOCKERFILE, task_context(repo_path, task), build_args, "task")


def plan(cfg: CrucibleConfig, *, builder, pins: dict | None = None) -> Plan:
    repo_path = repos.resolve_repo(cfg.task.repo)
    task = _task_part(cfg, repo_path, pins)
    image = image_for(cfg, task, repo_path, builder)
    runtime = {k: v for k, v in dataclasses.asdict(cfg.runtime).items()}
    spec = RunSpec(
        engine_version=engine_version(),
        task=task,
        env=dataclasses.asdict(cfg.env),
        flavor=dataclasses.asdict(cfg.flavor),
        agent=agent_part(cfg),
        integrity=dataclasses.asdict(cfg.integrity),
        runtime=runtime,
        image={"tag": image.tag, "input_hash": image.input_hash},
        timeouts=dataclasses.asdict(cfg.timeouts),
        seed=cfg.seed,
        attempt=cfg.attempt,
    )
    return Plan(spec=spec, image=image, repo_path=repo_path)


def replan(run_dir: Path, *, builder) -> Plan:
    """Plan a past run again from its saved config and recorded pins (same spec hash)."""
    import json

    from omegaconf import OmegaConf

    from engine.config.schema import typed_from_plain

    config_file = next((p for p in (run_dir / ".hydra" / "config.yaml", run_dir / "config.yaml") if p.is_file()), None)
    if config_file is None:
        raise ConfigError(f"{run_dir} has no .hydra/config.yaml or config.yaml to re-plan from")
    try:
        typed = typed_from_plain(OmegaConf.to_container(OmegaConf.load(config_file), resolve=False))
    except Exception as exc:
        raise ConfigError(f"{config_file}: cannot be re-planned: {str(exc).splitlines()[0]}") from exc
    pins_file = run_dir / "pins.json"
    pins = json.loads(pins_file.read_text()) if pins_file.is_file() else None
    return plan(typed, builder=builder, pins=pins)
