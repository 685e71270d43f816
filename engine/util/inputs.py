"""What an answer was computed from, recorded as it is read, so the answer can be given again
while none of it has changed: Nix's evaluation cache, for a whole command's answer (``crucible
check``'s, engine/cli/answers.py).

Recorded while ``recording()`` is active, through the interpreter's audit hooks (PEP 578), so
no reader has to declare what it reads:

* every file opened for reading (its size, mtime and inode, or that it was missing), with its
  directory (a file added beside it, which a later lookup might find, changes the directory);
* every directory listed (``os.scandir``, ``os.listdir``: what globbing and walking use);
* every ``git`` run: the state of its repository's references (``HEAD``, ``packed-refs``, the
  ``refs/`` tree, the config and the grafts) and the user's and system's git config; objects
  are content-addressed, so the same references answer every question about them alike;
* what the caller notes itself: an image's ID (``note_image``: the Docker engine is no file),
  files no Python code opens (a store's write-ahead log), files only looked for
  (``os.path.isfile``: their appearing counts) or remembered by a stat-keyed memo (the code
  hash, a dataset's digest), wherever they are (``note_file``).

A file's record holds its ctime, which no one sets back: an edit that keeps the size and
restores the mtime is seen. Anything else the answer might have depended on makes it
unrecordable (``Inputs.foreign``): a subprocess other than git, a git run that may reach
another repository (fetch, clone, ls-remote, ...). Installed libraries and bytecode are not
inputs (``engine_version`` hashes the code itself, plug-ins installed as packages included).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Stat = tuple[int, int, int, int, int] | None
"""(size, mtime in ns, ctime in ns, inode, device) of a file, or None where there was none. The
ctime, which no one can set back, sees an edit that kept the size and restored the mtime."""


@functools.cache
def _skipped_prefixes() -> tuple[str, ...]:
    """Where the interpreter and installed libraries live (sysconfig costs ~5 ms: asked once,
    when something is recorded), and the kernel's own file systems."""
    import sysconfig

    where = (sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])
    return (*sorted({str(Path(p).resolve()) + os.sep for p in where}), "/proc/", "/sys/", "/dev/")


_RACY_S = 2.0
"""An input changed this close to the answer's keeping may have changed again within its
timestamps' resolution (git's "racily clean" files): such an answer is not kept."""
_REMOTE = frozenset({"fetch", "clone", "pull", "push", "ls-remote", "remote", "submodule", "fetch-pack", "archive"})
"""git commands that may reach another repository, whose state no local file records."""
_HARMLESS = frozenset({"ldconfig"})
"""Programs whose output is no input of an answer: ``ctypes.util.find_library`` asks ldconfig
where a shared library is."""
_GIT_FILES = (
    "HEAD",
    "packed-refs",
    "config",
    "shallow",
    "commondir",
    "info/grafts",
    "objects/info/alternates",
    "reftable/tables.list",
)


def stat_of(path: str) -> Stat:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


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

    def changed(self, image_id: Callable[[str], str | None] | None = None) -> str | None:
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
            if image_id is None:
                return f"image {name}: no engine asked"
            try:
                now = image_id(name)
            except OSError as exc:  # no engine to ask: nothing known of the image now
                return f"image {name}: {exc}"
            if now != recorded_id:
                return f"image {name} changed"
        return None


def racy(stats: dict[str, Stat], now_ns: int) -> str | None:
    """The first of ``stats`` changed within ``_RACY_S`` of ``now_ns``, if any."""
    for path, st in stats.items():
        if st is not None and now_ns - max(st[1], st[2]) < _RACY_S * 1e9:
            return path
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
        _skipped_prefixes()  # now, not first inside the hook (its import would be recorded into itself)
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
    """A file read by something other than Python's own ``open`` (a database's log), looked
    for without being opened (``os.path.isfile``), or remembered by its stat in a memo that
    spares reading it: recorded wherever it is (missing too)."""
    inputs = _active
    if inputs is not None:
        _note_file(inputs, os.path.abspath(path), always=True)


def note_files(paths: Iterable[str | Path]) -> None:
    if _active is not None:
        for path in paths:
            note_file(path)


def note_dir(path: str | Path) -> None:
    inputs = _active
    if inputs is not None:
        inputs.dirs.setdefault(os.path.abspath(path), stat_of(os.path.abspath(path)))


def _note_file(inputs: Inputs, path: str, *, always: bool = False) -> None:
    if path in inputs.files:
        return
    if not always and (path.startswith(_skipped_prefixes()) or f"{os.sep}__pycache__{os.sep}" in path):
        return  # an installed library, or bytecode (its source is code engine_version hashes)
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
                if not path.startswith(_skipped_prefixes()):
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
    environ = env if env is not None else os.environ
    where = os.fsdecode(cwd) if cwd is not None else os.getcwd()
    git_dir, command, i = environ.get("GIT_DIR"), None, 1
    while i < len(args):
        arg = args[i]
        if arg in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") and i + 1 < len(args):
            if arg == "-C":
                where = os.path.join(where, args[i + 1])
            elif arg == "--git-dir":
                git_dir = args[i + 1]
            i += 2
            continue
        if arg.startswith("--git-dir="):
            git_dir = arg[len("--git-dir=") :]
        elif not arg.startswith("-"):
            command = arg  # the git command itself: what follows is its own
            break
        i += 1
    if command in _REMOTE:
        inputs.foreign.append(f"git {command}: another repository's state")
        return
    found = _git_dir_of(os.path.join(where, git_dir) if git_dir else where)
    if found is None:
        inputs.foreign.append(f"git outside a repository ({where})")
        return
    if found not in inputs.git_dirs:
        inputs.git_dirs[found] = git_state(found)
    for config in _git_configs(environ):  # what git reads besides the repository (safe.directory, ...)
        _note_file(inputs, config, always=True)


def _git_configs(environ: Any) -> list[str]:
    home = environ.get("HOME") or os.path.expanduser("~")
    xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig"]
    found += [environ[v] for v in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM") if environ.get(v)]
    return [os.path.abspath(p) for p in found if p != os.devnull]


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
