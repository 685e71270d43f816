"""Task sources: a task set whose options come from a dataset, not from a YAML file each.

A task set folder may hold ``_source.yaml`` (``conf/task/<set>/_source.yaml``; the leading
``_`` keeps it out of the set's options). It names a plug-in class by ``_target_`` (crucible's
packages, or ``$CRUCIBLE_PLUGIN_PACKAGES``) and its keyword arguments; ``oc.env``
interpolations are resolved, so a user points a source at a local file by a variable. The
class implements ``TaskSource``:

- ``fingerprint()``: cheap, and different whenever ``options`` would be (a dataset's hash);
- ``options(set_name)``: option name -> that option's config (what its YAML file would hold;
  OmegaConf reads ``${...}`` in it as an interpolation, so a source whose data may hold that
  text encodes it and its flavor decodes it at plan time, as ``swe_tasks.rows`` does);
- optionally ``missing(set_name, name)``: why ``name`` is not among the options (``has no
  dataset``), and which of its arguments would change that, so a task asked for by name is one
  line that says why it is not there (``why_missing``), naming the variable each argument is
  read from where that variable is unset.

The options are written once per fingerprint as ordinary YAML files under
``$CRUCIBLE_HOME/cache/task-sources/<hash>/task/<set>/``, and that folder joins the config
search path: ``task=<set>/<name>`` and ``task='glob(<set>/*x*)'`` work as for files, and Hydra
composes them as files. The folder's name is the hash of everything the options are a
function of (the source's config, its fingerprint, the plug-in's code), so the evaluation
cache keys on the name alone (``generated_key``) and a changed dataset is a new key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from engine.errors import ConfigError
from engine.util import paths

SOURCE_FILE = "_source.yaml"
_LOCK = threading.Lock()
_MEMO: dict[tuple[str, str], Path | None] = {}


class TaskSource(Protocol):
    def fingerprint(self) -> str:
        """A string that changes whenever ``options`` would. Raises ConfigError."""

    def options(self, set_name: str) -> Mapping[str, Mapping[str, Any]]:
        """Option name -> its config (``name``/``set`` included). Raises ConfigError (one line
        naming the row and the field at fault)."""

    # Optional: def missing(self, set_name: str, name: str) -> tuple[str, Sequence[str]]:
    # why option ``name`` is not among ``options(set_name)``, as a clause whose subject is the
    # source ("has no dataset"), and the arguments (keys of _source.yaml) that would change it.


def generated_root() -> Path:
    return paths.cache_dir() / "task-sources"


def source_files(roots: list[Path]) -> list[tuple[str, Path]]:
    """``(set name, _source.yaml)`` for every task set folder of ``roots`` that has one."""
    found = []
    for root in roots:
        base = root / "task"
        if base.is_dir():
            for path in sorted(base.rglob(SOURCE_FILE)):
                found.append((path.parent.relative_to(base).as_posix(), path))
    return found


def why_missing(roots: list[Path], option: str) -> str | None:
    """Why task ``option`` (``set/name``, or ``set/<glob>``) is not there, where its set is one a
    task source makes: the set is empty, or has no such option; in the source's words (its
    ``missing``), with the unset variables its arguments are read from. None where no source
    makes the set, or where a glob meets a set that has options (``selects nothing`` says it)."""
    for set_name, path in source_files(roots):
        name = option[len(set_name) + 1 :] if option.startswith(f"{set_name}/") else ""
        if not name or "/" in name:
            continue  # a source's options are plain names, right under its set
        made = _generated_dir(set_name, path)
        count = len(list((made / "task" / set_name).glob("*.yaml"))) if made is not None else 0
        if count and any(c in name for c in "*?["):
            return None
        target, kwargs = _load(path)
        missing = getattr(_source(target, kwargs, path), "missing", None)
        if callable(missing):
            reason, arguments = missing(set_name, name)
        else:
            reason, arguments = ("makes no options" if not count else f"makes no option {name}"), ()
        head = f"task set {set_name} is empty" if not count else f"task set {set_name} has no {name}"
        return f"{head}: its source ({target}) {reason}{_unset_hint(path, list(arguments))}"
    return None


def _unset_hint(path: Path, arguments: list[str]) -> str:
    """``; set VAR`` for each of ``arguments`` that _source.yaml reads from a variable now unset
    or empty (``dataset: ${oc.env:CRUCIBLE_SWEBENCH_PRO_DATASET,""}``)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except (OmegaConfBaseException, OSError, ValueError):
        return ""  # read once already (``_load``); a hint is no reason to fail here
    values = raw if isinstance(raw, dict) else {}
    unset = [
        name
        for argument in arguments
        for name in _ENV_REF.findall(str(values.get(argument, "")))
        if not os.environ.get(name)
    ]
    return f"; set {' or '.join(dict.fromkeys(unset))}" if unset else ""


def _source(target: str, kwargs: dict[str, Any], path: Path) -> TaskSource:
    from engine.config.plugins import plugin_class

    cls = plugin_class(target, where=f"task source {path}")
    try:
        source: TaskSource = cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return source


def generated_dirs(roots: list[Path]) -> list[Path]:
    """The config dirs holding the options of every task source under ``roots``, generated
    when missing (once per fingerprint). A source that yields nothing adds no dir."""
    dirs = []
    for set_name, path in source_files(roots):
        made = _generated_dir(set_name, path)
        if made is not None:
            dirs.append(made)
    return dirs


def is_generated(root: Path) -> bool:
    return generated_root() in root.parents


_ENV_REF = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)")
_LoadKey = tuple[str, bytes, tuple[tuple[str, str | None], ...]]
"""A source file's path, bytes, and the variables it reads with their values."""
_LOADED: dict[_LoadKey, tuple[str, dict[str, Any]]] = {}


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    """The source's target and arguments, remembered per process by the file's bytes and the
    variables it reads (OmegaConf's resolve costs ~5 ms, and every compose asks for the dirs)."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from exc
    names = sorted(set(_ENV_REF.findall(text.decode("utf-8", "replace"))))
    key = (str(path), text, tuple((n, os.environ.get(n)) for n in names))
    if key not in _LOADED:
        _LOADED[key] = _resolve_cached(path, key)
    target, kwargs = _LOADED[key]
    return target, dict(kwargs)


def _resolve_cached(path: Path, key: _LoadKey) -> tuple[str, dict[str, Any]]:
    """``_resolve`` through a file under the cache: OmegaConf's first resolve in a process
    costs ~0.2 s (its grammar warming up), which a cached command must not pay."""
    digest = hashlib.sha256(json.dumps([key[0], key[1].decode("utf-8", "replace"), key[2]]).encode()).hexdigest()[:32]
    memo = generated_root() / "loaded" / f"{digest}.json"
    try:
        target, kwargs = json.loads(memo.read_text())
        if isinstance(target, str) and isinstance(kwargs, dict):
            return target, kwargs
    except (OSError, ValueError, TypeError):
        pass  # not there or torn: resolve again
    target, kwargs = _resolve(path)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps([target, kwargs]))
        tmp.replace(memo)
    except (OSError, TypeError, ValueError):
        pass  # an optimisation only
    return target, kwargs


def _resolve(path: Path) -> tuple[str, dict[str, Any]]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OmegaConfBaseException, OSError, ValueError) as exc:
        raise ConfigError(f"{path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("_target_"), str):
        raise ConfigError(f"{path}: a task source names its class as _target_")
    target = data.pop("_target_")
    return target, {str(k): v for k, v in data.items()}


def _generated_dir(set_name: str, path: Path) -> Path | None:
    from engine.util.codehash import engine_version

    target, kwargs = _load(path)
    source = _source(target, kwargs, path)
    identity = json.dumps(
        [set_name, target, kwargs, source.fingerprint(), engine_version(target)], sort_keys=True, default=str
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
    memo_key = (str(path), digest)
    with _LOCK:
        if memo_key in _MEMO:
            return _MEMO[memo_key]
        out = generated_root() / digest
        done = out / ".complete"
        if not done.is_file():
            _write_options(out, set_name, source.options(set_name))
            if not done.is_file():
                raise ConfigError(f"task source {path}: its options could not be written under {out}")
        result = out if any((out / "task").rglob("*.yaml")) else None
        _MEMO[memo_key] = result
        return result


def _write_options(out: Path, set_name: str, options: Mapping[str, Mapping[str, Any]]) -> None:
    """Every option as a YAML file, written into a temporary folder renamed into place whole
    (a concurrent process sees no folder or a complete one)."""
    import shutil

    from omegaconf import OmegaConf

    tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    target = tmp / "task" / set_name
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, config in options.items():
            if not name or "/" in name or name.startswith(("_", "base_", ".")):
                raise ConfigError(f"task source for set {set_name!r}: option name {name!r} cannot be a file name")
            OmegaConf.save(OmegaConf.create(dict(config)), target / f"{name}.yaml")
        (tmp / ".complete").write_text(f"{len(options)}\n")
        tmp.rename(out)
    except OSError:
        pass  # another process made it first (the same content), or the cache is unwritable
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def generated_key(root: Path) -> bytes:
    """What the evaluation cache hashes for a generated dir: its content-addressed name."""
    return b"\0generated\0" + root.name.encode()
