"""What an answer was computed from, recorded as it is read, so the answer can be given again
while none of it has changed: Nix's evaluation cache, for a whole command's answer (``crucible
check``'s, engine/cli/answers.py).

Recorded while ``recording()`` is active, through the interpreter's audit hooks (PEP 578), so
no reader has to declare what it reads:

* every file opened for reading (its size, mtime and inode, or that it was missing), with its
  directory (a file added beside it, which a later lookup might find, changes the directory);
* every directory listed (``os.scandir``, ``os.listdir``: what globbing and walking use);
* every ``git`` run: the state of its repository's references (``HEAD``, ``packed-refs``, the
  ``refs/`` tree, the config and the grafts); objects are content-addressed, so the same
  references answer every question about them alike;
* what the caller notes itself: an image's ID (``note_image``: the Docker engine is no file),
  and files no Python code opens (a store's write-ahead log).

Anything else the answer might have depended on makes it unrecordable (``Inputs.foreign``):
a subprocess other than git. The interpreter's own files and installed packages are not
inputs (``engine_version`` does not hash them either).
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Stat = tuple[int, int, int] | None
"""(size, mtime in ns, inode) of a file, or None where there was none."""

_SKIPPED_PREFIXES = tuple(
    sorted(
        {
            str(Path(p).resolve()) + os.sep
            for p in (sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])
        }
    )
) + ("/proc/", "/sys/", "/dev/")
_HARMLESS = frozenset({"ldconfig"})
"""Programs whose output is no input of an answer: ``ctypes.util.find_library`` asks ldconfig
where a shared library is."""
_GIT_FILES = ("HEAD", "packed-refs", "config", "shallow", "commondir", "info/grafts", "objects/info/alternates")


def stat_of(path: str) -> Stat:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass
class Inputs:
    files: dict[str, Stat] = field(default_factory=dict)
    dirs: dict[str, Stat] = field(default_factory=dict)
    git_dirs: dict[str, dict[str, Stat]] = field(default_factory=dict)
    images: dict[str, str | None] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)
    """Why the answer cannot be given again from these inputs (empty: it can)."""

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "dirs": self.dirs, "git_dirs": self.git_dirs, "images": self.images}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Inputs:
        def stats(items: dict[str, Any]) -> dict[str, Stat]:
            return {k: tuple(v) if v is not None else None for k, v in items.items()}

        return cls(
            files=stats(data["files"]),
            dirs=stats(data["dirs"]),
            git_dirs={k: stats(v) for k, v in data["git_dirs"].items()},
            images=dict(data["images"]),
        )

    def changed(self, image_id: Any = None) -> str | None:
        """The first input that is no longer as recorded (a sentence), or None: nothing changed.
        ``image_id(name)``: an image's ID now (None: not there); without it, images count as
        changed."""
        for path, recorded in self.files.items():
            if stat_of(path) != recorded:
                return f"file {path} changed"
        for path, recorded in self.dirs.items():
            if stat_of(path) != recorded:
                return f"directory {path} changed"
        for git_dir, refs in self.git_dirs.items():
            if git_state(git_dir) != refs:
                return f"the references of {git_dir} changed"
        for name, recorded_id in self.images.items():
            try:
                now = image_id(name) if image_id is not None else ()
            except OSError as exc:  # no engine to ask: nothing known of the image now
                return f"image {name}: {exc}"
            if now != recorded_id:
                return f"image {name} changed"
        return None


def git_state(git_dir: str) -> dict[str, Stat]:
    """What a repository's references are read from: the files that name them, and every file
    and directory of ``refs/`` (a new branch is a new file, or a changed ``packed-refs``)."""
    state = {name: stat_of(os.path.join(git_dir, name)) for name in _GIT_FILES}
    for root, dirs, files in os.walk(os.path.join(git_dir, "refs")):
        dirs.sort()
        state[os.path.relpath(root, git_dir) + "/"] = stat_of(root)
        for name in sorted(files):
            path = os.path.join(root, name)
            state[os.path.relpath(path, git_dir)] = stat_of(path)
    return state


_active: Inputs | None = None
_lock = threading.Lock()
_hooked = False


@contextlib.contextmanager
def recording() -> Iterator[Inputs]:
    """Record what is read while the block runs (one recording at a time per process)."""
    global _active, _hooked
    inputs = Inputs()
    with _lock:
        if _active is not None:
            raise RuntimeError("inputs are already being recorded")
        if not _hooked:
            sys.addaudithook(_audit)  # for the process's life: inert while nothing records
            _hooked = True
        _active = inputs
    try:
        yield inputs
    finally:
        with _lock:
            _active = None


@contextlib.contextmanager
def not_recorded() -> Iterator[None]:
    """What the block reads is no input of the answer (a chore beside it: housekeeping)."""
    global _active
    with _lock:
        paused, _active = _active, None
    try:
        yield
    finally:
        with _lock:
            _active = paused


def note_image(name: str, image_id: str | None) -> None:
    """That ``name`` resolved to image ``image_id`` (None: no such image) while recording."""
    inputs = _active
    if inputs is not None:
        inputs.images.setdefault(name, image_id)


def note_file(path: str | Path) -> None:
    """A file read by something other than Python's own ``open`` (a database's log)."""
    inputs = _active
    if inputs is not None:
        _note_file(inputs, os.path.abspath(path))


def note_dir(path: str | Path) -> None:
    inputs = _active
    if inputs is not None:
        inputs.dirs.setdefault(os.path.abspath(path), stat_of(os.path.abspath(path)))


def _note_file(inputs: Inputs, path: str) -> None:
    if path.startswith(_SKIPPED_PREFIXES) or path in inputs.files:
        return
    inputs.files[path] = stat_of(path)
    parent = os.path.dirname(path)
    inputs.dirs.setdefault(parent, stat_of(parent))


def _audit(event: str, args: tuple[Any, ...]) -> None:
    inputs = _active
    if inputs is None:
        return
    try:
        if event == "open":
            _opened(inputs, *args[:3])
        elif event in ("os.scandir", "os.listdir"):
            where = args[0] if args and args[0] is not None else "."
            if isinstance(where, (str, bytes, os.PathLike)):
                path = os.path.abspath(os.fsdecode(where))
                if not path.startswith(_SKIPPED_PREFIXES):
                    inputs.dirs.setdefault(path, stat_of(path))
        elif event == "subprocess.Popen":
            _ran(inputs, args[1], args[2], args[3])
    except Exception as exc:  # noqa: BLE001 - a recorder that cannot tell must not break the read
        inputs.foreign.append(f"{event}: {type(exc).__name__}: {exc}")


def _opened(inputs: Inputs, path: Any, mode: Any, flags: Any) -> None:
    if isinstance(path, int) or path is None:
        return  # a descriptor already open: its file was recorded when it was opened
    writes = (
        any(c in mode for c in "wax+")
        if isinstance(mode, str)
        else isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
    )
    if not writes:
        _note_file(inputs, os.path.abspath(os.fsdecode(path)))


def _ran(inputs: Inputs, argv: Any, cwd: Any, env: Any) -> None:
    args = [os.fsdecode(a) for a in argv] if isinstance(argv, (list, tuple)) else [os.fsdecode(argv)]
    if args and os.path.basename(args[0]) in _HARMLESS:
        return
    if not args or os.path.basename(args[0]) != "git":
        inputs.foreign.append(f"ran {args[:1]}")
        return
    where = os.fsdecode(cwd) if cwd is not None else os.getcwd()
    git_dir = (env or os.environ).get("GIT_DIR")
    for i, arg in enumerate(args[1:], start=1):
        if arg == "-C" and i + 1 < len(args):
            where = os.path.join(where, args[i + 1])
        elif arg.startswith("--git-dir="):
            git_dir = arg[len("--git-dir=") :]
        elif not arg.startswith("-"):
            break  # the git command itself: what follows is its own
    found = _git_dir_of(os.path.join(where, git_dir) if git_dir else where)
    if found is None:
        inputs.foreign.append(f"git outside a repository ({where})")
    elif found not in inputs.git_dirs:
        inputs.git_dirs[found] = git_state(found)


def _git_dir_of(where: str) -> str | None:
    """The repository's own directory for a git run in ``where``: ``where`` itself when it is
    one (bare, or a ``.git``), else the ``.git`` of it or of a directory above it."""
    path = os.path.abspath(where)
    while True:
        if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects")):
            return path
        dot_git = os.path.join(path, ".git")
        if os.path.isdir(dot_git):
            return dot_git
        if os.path.isfile(dot_git):
            return None  # a worktree or submodule's pointer file: not followed, so not recorded
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
