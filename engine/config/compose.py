"""Composing configs: the conf/ tree, set selection with glob(), and one-line config errors.

Stock Hydra's ``glob()`` does not look into nested group folders, so
``task='glob(sample/*)'`` would silently launch 0 jobs. Every crucible command therefore
rewrites group globs into explicit choices before Hydra sees them, and a selection that
matches nothing is an error.

Composing is evaluation in Nix's sense, and it is cached like Nix's evaluation cache: a
composed config is stored under a hash of everything it is a function of (the overrides as
given, every file of every config dir, the environment variables the configs read, the
code that registers the schemas) and answered from there the next time, without importing
Hydra (~0.3 s a compose, ~0.4 s the import). A changed file, override or variable is a new
key; nothing is ever invalidated by hand.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
import os
import pickle
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import omegaconf
import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from engine.config.describe import describe, first_line, from_override, yaml_error
from engine.config.tree import (
    CONF_DIR,
    GROUPS,
    config_dirs,
    env_variables,
    group_options,
    searchpath_override,
    written_config_dirs,
)
from engine.errors import ConfigError
from engine.util import cachefile, paths
from engine.util.codehash import engine_version

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Glob, Override

    from engine.config.schema import CrucibleConfig

T = TypeVar("T")


# Hydra's compose API works through one process-wide GlobalHydra: two threads composing
# at once make the second fail with "GlobalHydra is already initialized".
_COMPOSE_LOCK = threading.Lock()


def _parse(overrides: list[str]) -> list[Override]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise ConfigError(f"bad override: {first_line(exc)}") from exc


def _matching(group: str, glob: Glob) -> list[str]:
    options = group_options(group)
    chosen = [o for o in options if any(fnmatch.fnmatchcase(o, pat) for pat in glob.include)]
    return [o for o in chosen if not any(fnmatch.fnmatchcase(o, pat) for pat in glob.exclude)]


def expand_globs(overrides: list[str]) -> list[str]:
    """Rewrite ``group=glob(...)`` into ``group=a,b,c``; an empty match is an error. Cached
    like ``combinations`` (a function of the glob overrides alone, each rewritten in its
    place, and of which options exist: a new seed beside them is no new evaluation)."""
    globs = [text for text in overrides if "glob(" in text]
    if not globs:
        return list(overrides)
    expanded = iter(_evaluated("globs", globs, _expand_globs, item=str))
    return [next(expanded) if "glob(" in text else text for text in overrides]


def _expand_globs(overrides: list[str]) -> list[str]:
    from hydra.core.override_parser.types import Glob

    result = []
    for text, parsed in zip(overrides, _parse(overrides)):
        key = parsed.get_key_element()
        if key in GROUPS and isinstance(parsed._value, Glob):
            matches = _matching(key, parsed._value)
            if not matches:
                for pattern in parsed._value.include:
                    _from_a_source(key, pattern, f"{text!r} selects nothing")
                raise ConfigError(
                    f"{text!r} selects nothing; {key} options are: {', '.join(group_options(key)) or '(none)'}"
                )
            result.append(f"{key}=" + ",".join(matches))
        else:
            result.append(text)
    return result


def combinations(overrides: list[str]) -> list[list[str]]:
    """The cartesian product of every sweep in ``overrides`` (for commands that are not -m).
    Cached like composes: a function of the overrides and the config files (``glob()``
    reads which options exist), and Hydra's override parser alone costs ~0.1 s to import.
    An override that cannot be a sweep (``key=word``, no sweep syntax) is kept in its place
    without parsing and is no part of the key: a new seed is no new evaluation."""
    swept = [text for text in overrides if not _single_value(text)]
    product = _evaluated("combinations", swept, _combinations, item=list) if swept else [[]]
    combos = []
    for combo in product:
        values = iter(combo)
        combos.append([text if _single_value(text) else next(values) for text in overrides])
    return combos


_SINGLE_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_./@-]*=[A-Za-z0-9_./:@+-]*")


def _single_value(text: str) -> bool:
    """Whether an override is certainly one value: a plain key and a value without anything
    Hydra's sweep grammar is made of (``,``, a function call, brackets, quotes, ``$``)."""
    return _SINGLE_VALUE.fullmatch(text) is not None


def _evaluated(what: str, overrides: list[str], evaluate: Callable[[list[str]], list[T]], *, item: type) -> list[T]:
    """``evaluate(overrides)``, through the evaluation cache (keyed like composes, by ``what``
    too): a list of ``item``s, answered from the cache when nothing it depends on changed."""
    key = _cache_key([f"\0{what}", *overrides])
    try:
        cached = json.loads(_cache_file(key).read_text())
        if isinstance(cached, list) and all(isinstance(c, item) for c in cached):
            return cached
    except (OSError, ValueError):
        pass  # not there, or torn: evaluate again
    result = evaluate(overrides)
    _write_json(_cache_file(key), result)
    return result


def _combinations(overrides: list[str]) -> list[list[str]]:
    expanded = expand_globs(overrides)
    axes = []
    for text, parsed in zip(expanded, _parse(expanded)):
        if parsed.is_sweep_override():
            key = parsed.get_key_element()
            axes.append([f"{key}={value}" for value in parsed.sweep_string_iterator()])
        else:
            axes.append([text])
    return [list(combo) for combo in itertools.product(*axes)] if axes else [[]]


def covering(combos: list[list[str]]) -> list[int]:
    """Indexes of a few of ``combos`` (the cartesian product ``combinations`` made) that
    together use every value of every sweep axis at least once: what must be composed to know
    every choice of a sweep is valid, without composing the whole product. The first one at
    least, even with no override at all (``crucible run`` alone must be composed, to say what
    it lacks)."""
    seen: set[tuple[int, str]] = set()
    chosen = []
    for index, combo in enumerate(combos):
        new = {(axis, value) for axis, value in enumerate(combo)} - seen
        if new:
            chosen.append(index)
            seen |= new
    return chosen if chosen or not combos else [0]


def compose_config(overrides: list[str]) -> DictConfig:
    """Compose one config (no sweeps) with every error reduced to one clear line; answered
    from the evaluation cache when nothing it depends on changed."""
    key = _cache_key(overrides)
    cached = _cache_read(key)
    if cached is not None:
        return cached
    cfg = _from_group_choices(overrides)
    if cfg is not None:  # already what the cache keeps: a config made from plain data, resolved
        _write_bytes(_cache_file(key, ".pickle"), pickle.dumps(cfg))
        return cfg
    cfg = _compose(overrides)
    _cache_write(key, cfg)
    return cfg


_GROUP_CHOICE = re.compile(r"({})(/[A-Za-z0-9_]+)*=[A-Za-z0-9_./-]+".format("|".join(GROUPS)))
_VALUE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+")
_WORD = re.compile(r"[A-Za-z_/][A-Za-z0-9_./:@-]*")
_ABSENT = object()


def _plain_value(text: str) -> tuple[str, object] | None:
    """``key=value`` as Hydra reads it, when the value needs none of Hydra's grammar (an int,
    a float, a bool, null, or a bare word): else None, and Hydra composes it."""
    key, sep, raw = text.partition("=")
    if not sep or not _VALUE_KEY.fullmatch(key) or key in GROUPS:
        return None
    lowered = raw.lower()
    if _INT.fullmatch(raw):
        return key, int(raw)
    if _FLOAT.fullmatch(raw):
        return key, float(raw)
    if lowered in ("true", "false"):
        return key, lowered == "true"
    if lowered == "null":
        return key, None
    if _WORD.fullmatch(raw) and lowered not in ("inf", "nan"):
        return key, raw
    return None


def _from_group_choices(overrides: list[str]) -> DictConfig | None:
    """The config Hydra would compose for ``overrides``, made from the evaluation cache's
    composition of their group choices alone, with the value overrides applied after, as
    Hydra applies them (after the defaults list, before interpolations are resolved).

    So a new seed, model or timeout is not a new compose (~0.25 s each). None when that
    cannot be certain to match Hydra: any override other than a group choice or a plain
    value, a key the config lacks or that holds a whole node, or a value the schemas refuse
    (then Hydra composes, and its error is the one the user sees).
    """
    choices: list[str] = []
    values: list[tuple[str, object]] = []
    for text in overrides:
        if _GROUP_CHOICE.fullmatch(text):
            choices.append(text)
        elif (plain := _plain_value(text)) is not None:
            values.append(plain)
        else:
            return None
    if not values:
        return None  # nothing shared with another config: composing it is the same work
    key = _cache_key(["\0unresolved", *choices])
    base = _cache_read(key)
    if base is None:
        base = _compose(choices, resolve=False)
        _cache_write(key, base, resolve=False)
    for dotted, value in values:
        if not _settable(base, dotted):
            return None
        OmegaConf.update(base, dotted, value, merge=False)
    try:
        OmegaConf.resolve(base)
        to_typed(base)  # what Hydra would refuse by the schemas' types, it refuses itself
    except (ConfigError, OmegaConfBaseException, ValueError):
        return None
    return base


def _settable(base: DictConfig, dotted: str) -> bool:
    """Whether Hydra would set ``dotted`` in ``base`` as a plain value: a key it has that holds no
    node, or a new key of a mapping under a plug-in group (``agent.max_steps``, where the option's
    file omits it), which Hydra leaves open for the plug-in's schema to check (``register``)."""
    from engine.config.schema import PLUGIN_GROUPS

    found = OmegaConf.select(base, dotted, default=_ABSENT)
    if found is not _ABSENT:
        return not OmegaConf.is_config(found)
    parent = dotted.rpartition(".")[0]
    return dotted.split(".")[0] in PLUGIN_GROUPS and isinstance(OmegaConf.select(base, parent), DictConfig)


EVAL_CACHE_VERSION = "2"

_DIR_DIGESTS: dict[tuple[object, ...], tuple[bytes, frozenset[str]]] = {}
"""A config dir's part of the cache key (its files' names and contents, the variables they
read), by its files' stats: a sweep composes twice a job, and each key read and hashed every
file again (~1.5 ms). Kept only for files older than RACY_NS, whose stats an edit must change."""
RACY_NS = 2_000_000_000


def _cache_key(overrides: list[str]) -> str:
    """Everything a composed config is a function of: the overrides as given, the config
    dirs' files (names and contents), the variables they read with ``oc.env``, and the code
    registering the schemas (``engine_version``)."""
    from engine.config.sources import generated_key, is_generated

    # OmegaConf's version too: what it pickled, another may unpickle differently
    digest = hashlib.sha256(f"{EVAL_CACHE_VERSION}\0{engine_version()}\0{omegaconf.__version__}\0".encode())
    digest.update(json.dumps(overrides).encode())
    variables: set[str] = set()
    for root in config_dirs():
        if is_generated(root):  # content-addressed by its name (its dataset's hash among it)
            digest.update(generated_key(root))
            continue
        files_digest, read = _dir_digest(root)
        digest.update(files_digest)
        variables |= read
    for name in sorted(variables):
        digest.update(f"\0env\0{name}={os.environ.get(name)}".encode())
    return digest.hexdigest()[:32]


def _dir_digest(root: Path) -> tuple[bytes, frozenset[str]]:
    """One config dir's files (names and contents) as a digest, and the variables they read."""
    resolved = root.resolve()
    files = sorted(root.rglob("*.yaml")) if root.is_dir() else []
    try:
        stats = [path.stat() for path in files]
    except OSError:
        stats = []  # one went away while listed: read them all below, which says so
    memo_key = (
        str(resolved),
        *((str(p), s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino) for p, s in zip(files, stats)),
    )
    if len(stats) == len(files) and memo_key in _DIR_DIGESTS:
        return _DIR_DIGESTS[memo_key]
    digest = hashlib.sha256(b"\0dir\0" + str(resolved).encode())
    variables: set[str] = set()
    for path in files:
        data = path.read_bytes()
        variables.update(env_variables(data.decode("utf-8", "replace")))
        digest.update(str(path.relative_to(root)).encode() + b"\0" + hashlib.sha256(data).digest())
    answer = digest.digest(), frozenset(variables)
    newest = max((max(s.st_mtime_ns, s.st_ctime_ns) for s in stats), default=0)
    if len(stats) == len(files) and newest < time.time_ns() - RACY_NS:
        _DIR_DIGESTS[memo_key] = answer
    return answer


def _cache_file(key: str, suffix: str = ".json") -> Path:
    return paths.cache_dir() / "eval" / f"{key}{suffix}"


def _cache_read(key: str) -> DictConfig | None:
    """The config kept under ``key``: pickled, since making a DictConfig again from its JSON
    (~4.5 ms here) was most of an answered compose; unpickling it takes ~0.4 ms."""
    try:
        cfg = pickle.loads(_cache_file(key, ".pickle").read_bytes())
    except Exception:  # noqa: BLE001 -- not there, torn by a killed writer, or from other code: compose again
        return None
    return cfg if isinstance(cfg, DictConfig) else None


def _cache_write(key: str, cfg: DictConfig, *, resolve: bool = True) -> None:
    """Hydra's config kept as a config made from its plain data (none of Hydra's flags), as
    every reader of the cache has always got it."""
    try:
        data = pickle.dumps(OmegaConf.create(OmegaConf.to_container(cfg, resolve=resolve)))
    except (ValueError, OmegaConfBaseException, pickle.PicklingError):
        return  # the cache is an optimisation: a config that cannot be stored is composed again
    _write_bytes(_cache_file(key, ".pickle"), data)


def _write_json(target: Path, data: object) -> None:
    """``data`` as ``target``, atomically (readers see the old file or the whole new one); an
    optimisation only, so a failure is ignored."""
    try:
        _write_bytes(target, json.dumps(data).encode())
    except (ValueError, TypeError):
        pass


def _write_bytes(target: Path, data: bytes) -> None:
    cachefile.keep(target, data)  # an evaluation not kept is computed again


def _compose(overrides: list[str], *, resolve: bool = True) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    from engine.config.schema import check_plugins, register

    register()  # the structured-config schemas, in Hydra's ConfigStore

    overrides = expand_globs(overrides)
    for text, parsed in zip(overrides, _parse(overrides)):
        if parsed.is_sweep_override():
            raise ConfigError(f"'{text}' selects several values; this command takes one (use `crucible run -m`)")
    _check_options(overrides)
    with _COMPOSE_LOCK:
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                cfg = compose("config", overrides=[*overrides, *searchpath_override()], return_hydra_config=False)
                try:
                    check_plugins(cfg)  # each agent's and runtime's keys, by the schema its class names
                except ConfigError as exc:
                    raise ConfigError(from_override(str(exc), overrides)) from exc
                if resolve:
                    OmegaConf.resolve(cfg)
                    return cfg
                # Interpolations kept (a value override may feed them), schemas' types dropped
                # (the override is checked by typing, as in ``_from_group_choices``).
                unresolved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
                assert isinstance(unresolved, DictConfig)  # a composed config is a mapping
                return unresolved
        except (HydraException, OmegaConfBaseException, ValueError) as exc:
            raise ConfigError(describe(exc, overrides)) from exc
        except yaml.YAMLError as exc:  # a config file that is not YAML: Hydra lets PyYAML's error through
            raise ConfigError(yaml_error(exc)) from exc
        finally:
            GlobalHydra.instance().clear()


def to_typed(cfg: DictConfig) -> CrucibleConfig:
    """The config as typed dataclasses, converted once at the edge (``schema.typed``): the
    task through its flavor's own schema, so a misspelled task key fails here, by name.
    Cached like composes (~0.15 s of OmegaConf merges each): keyed by the config itself and
    the code of the schemas it goes through, the flavor's and agent's plug-in packages too."""
    import pickle

    from engine.config.schema import typed

    container = OmegaConf.to_container(cfg, resolve=True)
    per_job = _per_job_values(container)
    targets = [
        str((container.get(part) or {}).get("_target_", "")) if isinstance(container, dict) else ""
        for part in ("flavor", "agent")
    ]
    plugins = os.environ.get("CRUCIBLE_PLUGIN_PACKAGES", "")  # which targets may load at all
    key = hashlib.sha256(
        f"{EVAL_CACHE_VERSION}\0typed\0{engine_version(*filter(None, targets))}\0{plugins}\0".encode()
        + json.dumps([container, sorted(per_job)], sort_keys=True, default=str).encode()
    ).hexdigest()[:32]
    cached = paths.cache_dir() / "eval" / f"{key}.typed.pickle"
    try:
        loaded: CrucibleConfig = pickle.loads(cached.read_bytes())
        for name, value in per_job.items():
            setattr(loaded, name, value)
        return loaded
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass  # not there, torn, or from code that has changed shape: convert again
    try:
        result = typed(cfg)
    except OmegaConfBaseException as exc:
        raise ConfigError(describe(exc, [])) from exc
    try:
        cachefile.keep(cached, pickle.dumps(result))
    except (pickle.PicklingError, TypeError, AttributeError):
        pass  # an optimisation only
    return result


PER_JOB = {"seed": int, "attempt": int, "sweep_id": str}
"""Top-level values a sweep sets per job, which no schema reads: each job's typed config is
the cached one of its siblings with these set (a sweep of 8 seeds types once, not 8 times, at
~0.04 s each). A value interpolated elsewhere is there resolved, so it still keys the cache."""


def _per_job_values(container: object) -> dict[str, object]:
    """``container``'s per-job values taken out of it, where each is of its plain type (any
    other is left in: typing it is what refuses it)."""
    if not isinstance(container, dict):
        return {}
    taken: dict[str, object] = {}
    for name, kind in PER_JOB.items():
        value = container.get(name)
        if name in container and (value is None and kind is str or type(value) is kind):
            taken[name] = container.pop(name)
    return taken


def _check_options(overrides: list[str]) -> None:
    """Name the unknown group option, and the file, before Hydra's multi-line message."""
    for parsed in _parse(overrides):
        key = parsed.get_key_element().lstrip("+~")
        if key in GROUPS and not parsed.is_sweep_override() and not parsed.is_delete():
            value = parsed.value()
            if isinstance(value, str) and value not in group_options(key) and not value.startswith("base_"):
                _from_a_source(key, value)
                known = group_options(key)
                hint = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
                raise ConfigError(f"unknown {key} '{value}' (no conf/{key}/{value}.yaml); available: {hint}")


def _from_a_source(group: str, value: str, selection: str | None = None) -> None:
    """Raise the one line that says why task ``value`` is not there, where its set is a task
    source's (``sources.why_missing``: an empty set says why it is empty, and what to set)."""
    from engine.config.sources import why_missing

    if group == "task":
        why = why_missing(written_config_dirs(), value)
        if why is not None:
            raise ConfigError(f"{selection or f'unknown task {value}'}: {why}")
