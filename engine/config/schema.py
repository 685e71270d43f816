"""Structured-config schemas for every Hydra group, registered in the ConfigStore.

Each group option under ``conf/<group>/`` starts its defaults list with the schema
(``base_<kind>``), so a misspelled key or a wrong type fails at compose time naming the key.
Plug-ins are chosen by ``_target_``; the engine instantiates only targets in its own packages.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from omegaconf import DictConfig

T = TypeVar("T")

MISSING = "???"
"""OmegaConf's marker of a value still to be given (``omegaconf.MISSING``, the same string): spelt here,
so a module that needs a schema and no config (a flavor that `crucible show` loads to explain a grade)
does not import OmegaConf (~0.05 s); tests/config checks it is OmegaConf's."""


# ---------------------------------------------------------------- task
@dataclass
class TaskConfig:
    """What every task has, whatever its flavor. A flavor's ``task_schema`` extends it with
    its own keys (``envs/coding/schema.py``), so ``task.*`` keys are validated per flavor.

    ``id`` and ``pins`` are filled by planning, never written by hand: the task id
    (``set/name``) and what the flavor pinned (git refs resolved to commit SHAs, ...).
    """

    name: str = MISSING
    set: str = MISSING
    prompt: str = MISSING
    validation: list[Any] | None = None
    """Tool calls ``{name, arguments, capability?}`` that stage the golden solution through
    the task's own tools (the ``integration_test`` agent replays them); None = the flavor
    derives them where it can."""
    fail_to_pass: list[str] = field(default_factory=list)
    """Named tests that must pass and fail on the baseline (SWE-bench's FAIL_TO_PASS). With
    ``pass_to_pass``: reward 1.0 iff every test of both lists is PASSED (a missing one counts
    as failed). Empty in the task = taken from the task's lock file, if it has one."""
    pass_to_pass: list[str] = field(default_factory=list)
    """Named tests that must keep passing (SWE-bench's PASS_TO_PASS)."""
    id: str = ""
    pins: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------- plug-in groups
@dataclass
class EnvConfig:
    """The environment a family of tasks shares (seed 002: one environment, several task
    flavors): the agent's tools and their limits, and the image base its tasks build on."""

    name: str = "coding"
    tools: list[str] = field(default_factory=lambda: ["bash", "str_replace_based_edit_tool"])
    bash_timeout: float = 120.0
    max_output_bytes: int = 32768
    base_image: str | None = None
    """The image the env's tasks build FROM; None = ``build.base``, else the offline base."""
    system_packages: list[str] = field(default_factory=list)
    """Debian packages every task of this env gets, beside the task's own."""


@dataclass
class FlavorConfig:
    """A flavor plug-in (``Flavor`` in engine/interfaces.py). Its class names its own
    ``task_schema`` (and ``config_schema``, a subclass of this, when it takes options)."""

    _target_: str = MISSING
    name: str = MISSING


@dataclass
class AgentImageConfig:
    """What an agent needs in the image it works in (``engine/plan/layer.py``): a layer
    crucible builds over the task image, whose inputs (these fields, the files' contents, the
    task image's tag) name it. Grading never sees it: the hidden tests run on the task image."""

    packages: list[str] = field(default_factory=list)
    """Debian packages to apt-get install (as root, first)."""
    files: dict[str, str] = field(default_factory=dict)
    """Absolute path in the image -> a host file (relative to the project root, or absolute),
    copied in owned by root after the packages; its content is an input of the layer."""
    install: str = ""
    """A shell step run as root in ``/`` last, after the packages and files (a CLI's installer)."""

    def declares_any(self) -> bool:
        return bool(self.packages or self.files or self.install)


@dataclass
class AgentConfig:
    """Every agent's keys. An agent outside crucible's packages names its own schema, a
    subclass of this, as its class's ``config_schema`` (this one when it names none)."""

    _target_: str = MISSING
    name: str = MISSING
    image: AgentImageConfig = field(default_factory=AgentImageConfig)
    """What the agent needs in its image; nothing by default (it works in the task image)."""


@dataclass
class NoopAgentConfig(AgentConfig):
    _target_: str = "engine.agents.noop.NoopAgent"
    name: str = "noop"


@dataclass
class IntegrationTestAgentConfig(AgentConfig):
    _target_: str = "engine.agents.integration_test.IntegrationTestAgent"
    name: str = "integration_test"
    timeout_seconds: float = 600.0


@dataclass
class ToolCallingAgentConfig(AgentConfig):
    """A model drives the task through the run's MCP tools (engine/agents/tool_calling.py).

    The model itself is the top-level ``model=<provider>/<name>``. Every field here is part
    of the run spec; the API key is not (only the variable's name), nor are prices.
    """

    _target_: str = "engine.agents.tool_calling.ToolCallingAgent"
    name: str = "tool_calling"
    base_url: str | None = None
    """The API root; None = the provider's own. Required for ``openai-compatible/...``."""
    api_key_env: str | None = None
    """The environment variable holding the key; None = OPENAI_API_KEY for openai/,
    ANTHROPIC_API_KEY for anthropic/, no key for openai-compatible/."""
    system_prompt: str = (
        "You are an autonomous software engineer working on a task in a code repository, using only "
        "the tools provided. Explore the code, make the change the task asks for, and check your work "
        "(for example by running the tests) before you finish. Nobody will answer questions: decide "
        "for yourself. When you are done, reply with a short summary of what you changed and call no "
        "more tools."
    )
    max_steps: int = 50
    """Model calls at most."""
    temperature: float | None = 0.0
    """None = not sent (some reasoning models accept only their default)."""
    max_tokens: int = 4096
    """Output tokens per model call."""
    seed: int | None = None
    """Sent as the request's ``seed`` where the protocol has one (OpenAI); None = not sent."""
    request_timeout: float = 300.0
    """Seconds one model request may take before it is retried."""
    max_retries: int = 4
    """Retries per model call on 429, 408/409, 5xx and transport errors (exponential backoff,
    Retry-After honoured)."""
    wall_timeout: float | None = None
    """The agent's own wall-clock limit; None = just inside ``timeouts.agent``. Either way it
    ends before the runner's, so the steps so far are kept (stop reason ``timeout``)."""
    max_malformed: int = 3
    """Unusable tool calls in a row (bad JSON, unknown tool) before stopping."""


@dataclass
class IntegrityConfig:
    """What the engine itself enforces of an integrity mode (``conf/integrity/``): the agent's
    uid and network. Everything else a mode does is a flavor's defence: the flavor's
    ``integrity_schema`` (a subclass of this; this one when it names none) declares each as a
    field whose metadata says which modes turn it on (``modes``) and whether the run spec keeps
    it while off (``spec: omit_default`` when not), as envs/integrity/catalogue.py makes them.
    ``typed`` gives each its mode's value and then the user's override from ``defences``."""

    mode: str = MISSING
    uid_wall: bool = True
    """Agent tool calls run as uid 1000."""
    agent_network: bool = False
    defences: dict[str, bool] = field(default_factory=dict, metadata={"spec": "omit_default"})
    """Overrides of the flavor's defences by name (``integrity.defences.canary=false``); a name
    the flavor does not declare fails at compose time. Empty once typed: the values are then the
    schema's own fields."""


@dataclass
class RuntimeConfig:
    _target_: str = MISSING
    name: str = MISSING


@dataclass
class DockerRuntimeConfig(RuntimeConfig):
    _target_: str = "engine.runtimes.docker.runtime.DockerRuntime"
    name: str = "docker"
    api_timeout: float = 1800.0
    default_exec_timeout: float = 1800.0
    memory: str | None = None
    cpus: float | None = None
    pids_limit: int | None = 4096


@dataclass
class LocalRuntimeConfig(RuntimeConfig):
    """``runtime=local``: a per-run host directory, every command in a bubblewrap sandbox."""

    _target_: str = "engine.runtimes.local.runtime.LocalRuntime"
    name: str = "local"
    bwrap: str = "/usr/bin/bwrap"
    """The bubblewrap binary; the sandbox probe runs it (a broken one refuses every integrity mode)."""
    default_exec_timeout: float = 1800.0
    install_timeout: float = 1800.0
    """Limit for a task's ``install`` command while its local template is prepared."""


# ---------------------------------------------------------------- top level
@dataclass
class Timeouts:
    setup: float = 300.0
    agent: float = 1800.0
    capture: float = 120.0
    grade: float = 900.0


@dataclass
class BuildConfig:
    base: str | None = None
    """An image to build FROM instead of the bootstrapped offline base (e.g. a registry image)."""
    ca_bundle: str | None = None
    """CA bundle forwarded into builds; None = $SSL_CERT_FILE or $REQUESTS_CA_BUNDLE if set."""


@dataclass
class CrucibleConfig:
    env: Any = MISSING
    flavor: Any = MISSING
    agent: Any = MISSING
    integrity: Any = MISSING
    runtime: Any = MISSING
    task: Any = MISSING
    model: str | None = None
    seed: int = 0
    attempt: int = 0
    resume: bool = False
    sweep_id: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    build: BuildConfig = field(default_factory=BuildConfig)
    store: str | None = None
    """Path of the DuckDB store; None = $CRUCIBLE_STORE or $CRUCIBLE_HOME/store.duckdb."""


_registered = False


def register() -> None:
    """The engine's own schemas, in Hydra's ConfigStore, for Hydra's composes (called by each
    Hydra entry point, not at import: a command answered from the evaluation cache never
    imports Hydra). A flavor's schemas (its ``task_schema``, its ``config_schema``) are
    applied by ``typed``, from the flavor class the config names."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    _registered = True
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=CrucibleConfig)
    cs.store(group="env", name="base_env", node=EnvConfig)
    cs.store(group="agent", name="base_noop", node=NoopAgentConfig)
    cs.store(group="agent", name="base_integration_test", node=IntegrationTestAgentConfig)
    cs.store(group="agent", name="base_tool_calling", node=ToolCallingAgentConfig)
    integrity = OmegaConf.structured(IntegrityConfig)
    OmegaConf.set_struct(integrity.defences, False)  # any name here; the flavor's schema checks it (with_defences)
    cs.store(group="integrity", name="base_integrity", node=integrity)
    cs.store(group="runtime", name="base_docker", node=DockerRuntimeConfig)
    cs.store(group="runtime", name="base_local", node=LocalRuntimeConfig)


_GROUP_SCHEMAS: dict[str, list[type[Any]]] = {
    "env": [EnvConfig],
    "integrity": [IntegrityConfig],
    "agent": [NoopAgentConfig, IntegrationTestAgentConfig, ToolCallingAgentConfig],
    "runtime": [DockerRuntimeConfig, LocalRuntimeConfig],
}


def _schema_for(group: str, node: Any) -> type[Any]:  # node: the group's config node
    candidates = _GROUP_SCHEMAS[group]
    if len(candidates) == 1:
        return candidates[0]
    target = node.get("_target_")
    for cls in candidates:
        if cls._target_ == target:
            return cls
    if group == "agent" and target:
        return _plugin_agent_schema(str(target))
    raise ValueError(f"{group}._target_ {target!r} has no registered schema")


def _plugin_agent_schema(target: str) -> type:
    """The schema of an agent plug-in crucible does not register (one allowed by
    ``$CRUCIBLE_PLUGIN_PACKAGES``): its class's ``config_schema``, else ``AgentConfig``."""
    import dataclasses

    from engine.config.plugins import plugin_class
    from engine.errors import ConfigError

    schema = getattr(plugin_class(target, where="agent"), "config_schema", AgentConfig)
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema) and issubclass(schema, AgentConfig)):
        raise ConfigError(f"agent {target} declares a config_schema that is not an AgentConfig dataclass")
    return schema


_STRUCTURED: dict[type, DictConfig] = {}


def structured(schema: type) -> DictConfig:
    """``OmegaConf.structured(schema)``, made once per schema and process (about half of what
    typing a config costs): safe to share, as ``OmegaConf.merge`` copies its first argument."""
    from omegaconf import OmegaConf

    if schema not in _STRUCTURED:
        _STRUCTURED[schema] = OmegaConf.structured(schema)
    return _STRUCTURED[schema]


def typed(cfg: Any, *, stored: bool = False) -> CrucibleConfig:  # a DictConfig, or a plain container of one
    """A composed (or saved) config as typed dataclasses: the engine's groups through their
    registered schemas, ``flavor`` and ``task`` through the schemas the flavor class names,
    ``integrity`` through the flavor's ``integrity_schema`` (``with_defences``). ``stored``: the
    parts of a stored run spec (``RunSpec.to_dict``), whose integrity lists the defences as
    resolved, an omitted one off.

    Raises ``ConfigError`` in one line naming the key (``task.hiden_tests``) and the task.
    """
    from omegaconf import DictConfig, OmegaConf

    from engine.config.plugins import flavor_class
    from engine.errors import ConfigError

    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    data = {k: node[k] for k in node if k not in ("hydra", "flavor", "task")}
    flavor_node, task_node = node.get("flavor"), node.get("task")
    if task_node is None:
        from engine.config.tree import no_task_selected

        raise no_task_selected()
    if flavor_node is None:
        raise ConfigError("no flavor selected")
    placeholders = {"flavor": None, "task": None}  # typed below, by the flavor's own schemas
    flat = _flat_defences(data)
    merged = OmegaConf.merge(structured(CrucibleConfig), _typed_groups(data), placeholders)
    top = cast(CrucibleConfig, OmegaConf.to_object(merged))
    cls = flavor_class(str(flavor_node.get("_target_", "")))
    top.flavor = as_schema(getattr(cls, "config_schema", FlavorConfig), flavor_node, "flavor")
    top.integrity = with_defences(
        getattr(cls, "integrity_schema", IntegrityConfig), top.integrity, top.flavor.name, flat=flat, stored=stored
    )
    where = f"task {task_node.get('set', '?')}/{task_node.get('name', '?')}"
    try:
        top.task = as_schema(cls.task_schema, task_node, "task")
        refuse_nonpositive_timeouts(top.task, "task")
    except ConfigError as exc:
        raise ConfigError(f"{where} (flavor {top.flavor.name}): {exc}") from exc
    for part in fields(top):  # the task's own limits are checked above, naming the task
        if part.name != "task":
            refuse_nonpositive_timeouts(getattr(top, part.name), part.name, all_limits=part.name == "timeouts")
    return top


def _flat_defences(data: dict[Any, Any]) -> dict[str, Any]:
    """Take out of ``data["integrity"]`` (a config node) the keys ``IntegrityConfig`` does not
    have: a defence's value where the integrity part is as a run spec stores it, or a config
    saved before the defences were the flavor's (every switch listed beside ``mode``)."""
    from omegaconf import DictConfig, OmegaConf

    node = data.get("integrity")
    if not isinstance(node, (dict, DictConfig)):
        return {}
    part = cast(
        dict[str, Any], OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else dict(node)
    )
    own = {f.name for f in fields(IntegrityConfig)}
    flat = {key: part.pop(key) for key in [k for k in part if k not in own]}
    data["integrity"] = part
    return flat


def with_defences(
    schema: type, chosen: IntegrityConfig, flavor: str, *, flat: dict[str, Any] | None = None, stored: bool = False
) -> IntegrityConfig:
    """``chosen`` (the composed ``integrity``) as the flavor's integrity ``schema``: each defence
    the schema declares at its mode's value (its field's ``modes``; off where ``stored`` and not
    listed), then the values given by name (``flat``, then ``integrity.defences.<name>``).
    Raises ``ConfigError`` naming an ``integrity.defences`` key the flavor does not have."""
    from engine.errors import ConfigError

    if not (isinstance(schema, type) and is_dataclass(schema) and issubclass(schema, IntegrityConfig)):
        raise ConfigError(f"flavor {flavor} declares an integrity_schema that is not an IntegrityConfig dataclass")
    declared = {f.name: f for f in fields(schema) if "modes" in f.metadata}
    # A listed switch this flavor does not declare was one the engine's config had for every
    # flavor (a spec stored before the defences were the flavor's): it never meant anything here.
    given = {**{k: v for k, v in (flat or {}).items() if k in declared}, **chosen.defences}
    for name in chosen.defences:
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ConfigError(
                f"unknown config key 'integrity.defences.{name}': flavor {flavor} has no defence "
                f"of that name (its defences: {known})"
            )
    values = {
        name: bool(given.get(name, False if stored else chosen.mode in f.metadata["modes"]))
        for name, f in declared.items()
    }
    own = {f.name: getattr(chosen, f.name) for f in fields(IntegrityConfig) if f.name != "defences"}
    make: Any = schema  # a subclass of IntegrityConfig: its own fields are the defences
    result: IntegrityConfig = make(**own, **values)
    return result


def is_timeout_key(name: str) -> bool:
    """Whether a schema field is a time limit by its name (``test_timeout``, ``timeout_seconds``,
    ``wall_timeout``): the rule plug-ins' schemas follow too, so the engine checks a flavor's or
    an agent's limits without knowing them. Every field of ``Timeouts`` is one as well."""
    return "timeout" in name


def refuse_nonpositive_timeouts(node: Any, where: str, *, all_limits: bool = False) -> None:
    """Raise ConfigError ``timeouts.agent must be positive, got -1`` for a time limit that is
    zero or negative (or NaN) anywhere in the typed ``node`` (nested dataclasses and lists of
    them included): such a limit would end every run at once, as a timeout, never as the
    mistake it is. None stays allowed where a schema gives it a meaning (``wall_timeout``)."""
    from engine.errors import ConfigError

    if not is_dataclass(node) or isinstance(node, type):
        return
    for f in fields(node):
        value, key = getattr(node, f.name), f"{where}.{f.name}"
        items = value if isinstance(value, (list, tuple)) else [value]
        for index, item in enumerate(items):
            at = f"{key}[{index}]" if items is value else key
            if is_dataclass(item):
                refuse_nonpositive_timeouts(item, at, all_limits=isinstance(item, Timeouts))
            elif (
                (all_limits or is_timeout_key(f.name))
                and isinstance(item, (int, float))
                and not isinstance(item, bool)
                and not item > 0
            ):  # NaN is not > 0 either
                raise ConfigError(f"{at} must be positive, got {item:g}")


def _typed_groups(data: dict[Any, Any]) -> dict[Any, Any]:
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    from engine.errors import ConfigError

    for group in _GROUP_SCHEMAS:
        if group in data:
            node = data[group]
            try:
                data[group] = OmegaConf.merge(structured(_schema_for(group, node)), node)
            except ConfigKeyError as exc:  # a plug-in's schema applies only here, not at compose
                key = getattr(exc, "full_key", None) or getattr(exc, "key", None)
                raise ConfigError(f"unknown config key '{group}.{key}'") from exc
    return data


def as_schema(schema: type[T], node: Any, where: str) -> T:
    """``node`` merged into the dataclass ``schema`` and resolved, as an instance of it."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from engine.errors import ConfigError

    try:
        merged = OmegaConf.merge(structured(schema), node)
        OmegaConf.resolve(merged)
        return cast(T, OmegaConf.to_object(merged))  # an instance of ``schema``
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or getattr(exc, "key", None)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if key and "not in" in message:
            raise ConfigError(f"unknown config key '{where}.{key}'") from exc
        raise ConfigError(f"bad config value at '{where}.{key}': {message}" if key else f"{where}: {message}") from exc
