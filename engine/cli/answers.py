"""``crucible check``'s answer, given again while nothing it was computed from has changed.

A check whose every verdict came from the store computes nothing new: it composes, plans and
looks its spec hashes up (~0.5 s, most of it importing and opening what does that). Its
answer is a function of what those steps read, which ``engine.util.inputs`` records as they
read it: the config and code files, the task repositories' references, the build contexts,
the base images' IDs, and the store (its file, its write-ahead log and its spool). The answer
is kept under a key of the command line and the environment that steers it; the next time, if
every recorded input is as it was, the answer is printed from there, without importing
Hydra, OmegaConf, DuckDB or the Docker SDK. One input changed, and the check runs as before
(and keeps its new answer, if it is again all from the store).

What an answered check does not do: the store's housekeeping (marking the runs of processes
that died), which the next command that opens the store does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from engine.config.tree import env_variables
from engine.runtimes.docker.daemon import ask_local_engine, local_engine_socket
from engine.util import paths
from engine.util.inputs import Inputs, note_dir, note_file, racy, recording

ANSWER_VERSION = "1"
_STEERING = ("PATH", "HOME", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PYTHONPATH")
_STEERING_PREFIXES = ("CRUCIBLE_", "DOCKER_", "GIT_")


def _key(command: str, overrides: list[str]) -> str:
    """The command line and what in the environment steers it (where the store and config
    are, which engine, which git), here: the same question asked the same way."""
    env = {k: v for k, v in os.environ.items() if k in _STEERING or k.startswith(_STEERING_PREFIXES)}
    text = json.dumps([ANSWER_VERSION, command, overrides, os.getcwd(), sorted(env.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _file(command: str, overrides: list[str]) -> Path:
    return paths.cache_dir() / "answers" / f"{_key(command, overrides)}.json"


def cached_answer(command: str, overrides: list[str]) -> tuple[str, int] | None:
    """The answer kept for this command line (what it printed, its exit code), if nothing it
    was computed from has changed since; else None."""
    try:
        kept = json.loads(_file(command, overrides).read_text())
        inputs = Inputs.from_dict(kept["inputs"])
        env, text, code = kept["env"], kept["stdout"], int(kept["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, or torn by a killed writer: answer it again
    if any(os.environ.get(name) != value for name, value in env.items()):
        return None
    if inputs.changed(image_id=_engine_image_id) is not None:
        return None
    return str(text), code


@dataclass
class Answering:
    """What a check prints while its inputs are recorded; kept if it may be given again."""

    command: str
    overrides: list[str]
    inputs: Inputs
    lines: list[str] = field(default_factory=list)
    store: set[str] = field(default_factory=set)
    """The store's files and directories (``note_store``)."""

    def echo_through(self, echo: Callable[[str], object]) -> Callable[[str], object]:
        def both(line: str) -> object:
            self.lines.append(line)
            return echo(line)

        return both

    def note_store(self, store_path: Path, spool: Path) -> None:
        """The store's own files, which DuckDB reads without Python's ``open``."""
        for path in (store_path, Path(f"{store_path}.wal")):
            note_file(path)
            self.store.add(os.path.abspath(path))
        note_dir(spool)
        self.store.update({os.path.abspath(spool), os.path.abspath(store_path.parent)})

    def keep(self, exit_code: int) -> None:
        """Keep the answer, unless something it read cannot be checked again, or changed
        while it was being answered (its own writes included: then the next check keeps it),
        or so shortly before that a change within its timestamps' resolution could go unseen."""
        if self.inputs.foreign or self.inputs.changed(image_id=_engine_image_id) is not None:
            return
        # (The store's own files are exempt: each check's read turn touches its log, and every
        # write to the store changes its size or mtime, in nanoseconds here.)
        read = {path: st for path, st in {**self.inputs.files, **self.inputs.dirs}.items() if path not in self.store}
        if racy(read, time.time_ns()) is not None:
            return
        variables: set[str] = set()
        for path in self.inputs.files:
            if path.endswith(".yaml"):
                with contextlib.suppress(OSError):
                    variables |= env_variables(Path(path).read_text("utf-8", "replace"))
        kept = {
            "env": {name: os.environ.get(name) for name in sorted(variables)},
            "inputs": self.inputs.to_dict(),
            "stdout": "".join(line + "\n" for line in self.lines),
            "exit_code": exit_code,
        }
        target = _file(self.command, self.overrides)
        with contextlib.suppress(OSError):  # an optimisation: a cache that cannot be written is none
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(kept))
            tmp.replace(target)


@contextlib.contextmanager
def answering(command: str, overrides: list[str]) -> Iterator[Answering]:
    """Record what the block reads, for an answer ``Answering.keep`` may keep."""
    with recording() as inputs:
        yield Answering(command, overrides, inputs)


def _engine_image_id(name: str) -> str | None:
    """The ID of image ``name`` on the engine, asked on its unix socket (no Docker SDK: its
    import is most of what an answered check would cost); None where there is no such image.
    Raises OSError where no engine answers, or one that is not on a unix socket."""
    where = local_engine_socket()
    if where is None:
        raise OSError(f"not a local engine: {os.environ.get('DOCKER_HOST')}")
    status, body = ask_local_engine(where, f"/images/{quote(name, safe='')}/json", timeout=10)
    if status == 404:
        return None
    try:
        found = json.loads(body)["Id"] if status == 200 else None
    except (ValueError, KeyError, TypeError) as exc:
        raise OSError(f"the engine's answer about image {name} is not one: {exc}") from exc
    if found is None:
        raise OSError(f"the engine answered {status} about image {name}")
    return str(found)
