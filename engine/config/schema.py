"""Structured-config schemas: the engine's own groups, and the bases each plug-in's extends.

``env`` and ``integrity`` options start their defaults list with the schema (``base_<group>``
in Hydra's ConfigStore). A plug-in's schema lives beside its class, which names it as its
``config_schema`` (``task_schema`` too, for a flavor), and is found from the node's
``_target_``: a misspelled key or a wrong type fails at compose time naming the key either way.
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
    """Every agent's keys. An agent names its own schema, a subclass of this defined beside it
    (``engine/agents/tool_calling.py``), as its class's ``config_schema`` (this one when it
    names none)."""

    _target_: str = MISSING
    name: str = MISSING
    image: AgentImageConfig = field(default_factory=AgentImageConfig)
    """What the agent needs in its image; nothing by default (it works in the task image)."""


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
    """Every runtime's keys; a runtime's class names its own schema, a subclass of this defined
    beside it, as its ``config_schema`` (``engine/runtimes/docker/runtime.py``)."""

    _target_: str = MISSING
    name: str = MISSING


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
    setup_layers: bool = True
    """A flavor's setup of the spec alone built once into an image layer (engine/plan/setup_layer.py);
    false: every run sets its workspace up itself."""


@dataclass
class Retries:
    """How often a run is tried again, by what ended it. Only the machinery's failures are
    (``InfrastructureError``: a Docker host or worker that went away): an agent's or a task's
    error is its verdict, never retried. No part of the spec: a retry is the same run again."""

    infrastructure: int = 2
    """More tries of a run whose error was the infrastructure's; 0 = none."""


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
    retries: Retries = field(default_factory=Retries)
    store: str | None = None
    """Path of the DuckDB store; None = $CRUCIBLE_STORE or $CRUCIBLE_HOME/store.duckdb."""


_registered = False


def register() -> None:
    """The engine's own schemas, in Hydra's ConfigStore, for Hydra's composes (called by each
    Hydra entry point, not at import: a command answered from the evaluation cache never
    imports Hydra). A plug-in's schemas (a flavor's ``task_schema``, an agent's or a runtime's
    ``config_schema``) are not there: ``check_plugins`` and ``typed`` apply them, from the
    class the node's ``_target_`` names."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    _registered = True
    cs = ConfigStore.instance()
    root = OmegaConf.structured(CrucibleConfig)
    for group in PLUGIN_GROUPS:  # any key here, as Hydra's override may set one the option's file omits:
        root[group] = {}  # the plug-in's schema checks them all (check_plugins)
        OmegaConf.set_struct(root[group], False)
    cs.store(name="base_config", node=root)
    cs.store(group="env", name="base_env", node=EnvConfig)
    integrity = OmegaConf.structured(IntegrityConfig)
    OmegaConf.set_struct(integrity.defences, False)  # any name here; the flavor's schema checks it (with_defences)
    cs.store(group="integrity", name="base_integrity", node=integrity)


_GROUP_SCHEMAS: dict[str, type[Any]] = {"env": EnvConfig, "integrity": IntegrityConfig}
"""The groups whose schema is the engine's own (registered as ``base_<group>``)."""

PLUGIN_GROUPS: dict[str, type[Any]] = {"agent": AgentConfig, "runtime": RuntimeConfig}
"""The groups whose schema is the ``config_schema`` of the class the node's ``_target_`` names
(a subclass of the base given here, defined beside the class; the base when it names none)."""


def _schema_for(group: str, node: Any) -> type[Any]:  # node: the group's config node
    if group in _GROUP_SCHEMAS:
        return _GROUP_SCHEMAS[group]
    return plugin_schema(group, str(node.get("_target_") or ""))


def plugin_schema(group: str, target: str) -> type[Any]:
    """The schema of the ``group`` plug-in ``target`` names: its class's ``config_schema``
    (the group's base in ``PLUGIN_GROUPS`` when it names none). ``ConfigError`` for a target
    that is no allowed class, or a schema that does not extend the group's base."""
    from engine.config.plugins import plugin_class
    from engine.errors import ConfigError

    base = PLUGIN_GROUPS[group]
    schema = getattr(plugin_class(target, where=group), "config_schema", base)
    if not (isinstance(schema, type) and is_dataclass(schema) and issubclass(schema, base)):
        raise ConfigError(f"{group} {target} declares a config_schema that is not a {base.__name__} dataclass")
    return schema


def check_plugins(cfg: DictConfig) -> None:
    """Check each plug-in group of a composed ``cfg`` against its class's schema, as Hydra checks
    a group whose defaults list names its schema: a misspelled key or a wrong type raises
    ``ConfigError`` naming the key. ``cfg`` is left as composed: the schema's defaults are
    filled in by ``typed``, whose cache follows the plug-in's code (a compose's does not)."""
    _typed_groups({group: cfg[group] for group in PLUGIN_GROUPS if group in cfg})


_STRUCTURED: dict[type, DictConfig] = {}


def structured(schema: type) -> DictConfig:
    """``OmegaConf.structured(schema)``, made once per schema and process (about half of what
    typing a config costs): safe to share, as ``OmegaConf.merge`` copies its first argument."""
    from omegaconf import OmegaConf

    if schema not in _STRUCTURED:
        _STRUCTURED[schema] = OmegaConf.structured(schema)
    return _STRUCTURED[schema]


def typed(cfg: Any, *, stored: bool = False) -> CrucibleConfig:  # a DictConfig, or a plain container of one
    """A composed (or saved) config as typed dataclasses: ``env`` through its schema here,
    ``agent`` and ``runtime`` through the ``config_schema`` their classes name (``plugin_schema``),
    ``flavor`` and ``task`` through the schemas the flavor class names,
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
    if top.retries.infrastructure < 0:
        raise ConfigError(f"retries.infrastructure must be 0 or more, not {top.retries.infrastructure}")
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
    from omegaconf.errors import ConfigKeyError, ValidationError

    from engine.errors import ConfigError

    for group in [*_GROUP_SCHEMAS, *PLUGIN_GROUPS]:
        if group in data:
            node = data[group]
            try:
                data[group] = OmegaConf.merge(structured(_schema_for(group, node)), node)
            except ConfigKeyError as exc:  # a plug-in's schema applies only here, not in Hydra
                key = getattr(exc, "full_key", None) or getattr(exc, "key", None)
                key = _located(node, str(key)) or key  # OmegaConf drops the path inside a list
                raise ConfigError(f"unknown config key '{group}.{key}'") from exc
            except ValidationError as exc:  # a value of the wrong type, for the same reason
                key = getattr(exc, "full_key", None) or getattr(exc, "key", None)
                raise ConfigError(f"bad config value at '{group}.{key}': {str(exc).strip().splitlines()[0]}") from exc
    return data


def _located(node: Any, key: str, at: str = "") -> str | None:
    """The path of the first ``key`` in ``node``, nested lists and mappings searched
    (``hosts[0].slot``), for an error OmegaConf reports without it; None when not found."""
    from omegaconf import DictConfig, ListConfig

    if isinstance(node, DictConfig):
        if key in node:
            return f"{at}.{key}" if at else key
        items = [(f"{at}.{k!s}" if at else str(k), v) for k, v in node.items_ex(resolve=False)]
    elif isinstance(node, ListConfig):
        items = [(f"{at}[{i}]", v) for i, v in enumerate(node._iter_ex(resolve=False))]
    else:
        return None
    for path, value in items:
        if isinstance(value, (DictConfig, ListConfig)) and (found := _located(value, key, path)):
            return found
    return None


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
