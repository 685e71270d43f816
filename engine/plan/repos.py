"""Task repositories on the host: resolve a task's ``repo`` to a local clone, pin refs, bundle.

``repo`` may be a local path, a git URL, or ``generated://NAME`` — a repo built
deterministically by ``samples/NAME/build_repo.py`` (fixed dates, so its SHAs are the same
on every machine and a spec pinned on one machine re-plans identically on another).
"""

from __future__ import annotations

import contextvars
import fcntl
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import ConfigError, PlanError
from engine.util import paths
from engine.util.inputs import note_files

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from git import Repo as GitRepo

GENERATED = "generated://"
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **_GIT_ENV}
    )
    if check and proc.returncode != 0:
        raise PlanError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout


def git_bytes(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env={**os.environ, **_GIT_ENV})
    if proc.returncode != 0:
        raise PlanError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


@contextmanager
def file_lock(name: str) -> Iterator[None]:
    """An inter-process lock (fcntl) under $CRUCIBLE_HOME/locks."""
    path = paths.locks_dir() / f"{name}.lock"
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_DIGESTS: dict[tuple[tuple[str, int, int], ...], str] = {}
"""Generator digests this process computed, by its files' names, sizes and mtimes: a sweep
plans one job per task of the same generator (~40 ms each to read and hash it again)."""


def _generator_digest(source: Path) -> str:
    """Everything the generator reads: its own folder and the shared generator modules."""
    # Strings, not Paths: a sweep plans each job's task again, and Path objects were most of it.
    parent, found = str(source.parent), []
    for folder, dirs, names in os.walk(source):
        dirs[:] = [d for d in dirs if d != "__pycache__"]  # never walked into
        found += [os.path.join(folder, name) for name in names]
    with os.scandir(parent) as entries:
        found += [entry.path for entry in entries if entry.name.endswith(".py")]
    stats = {}
    for path in found:
        try:
            stats[path] = os.stat(path)
        except OSError:  # a dangling link: nothing the generator can read
            continue
    # in Path order (by component), as this digest always was: the repos' cache is named by it
    files = sorted((path for path, st in stats.items() if stat.S_ISREG(st.st_mode)), key=lambda p: p.split(os.sep))
    note_files(files)  # inputs of what is answered, though the memo below may spare reading them
    key = tuple((path, stats[path].st_size, stats[path].st_mtime_ns) for path in files)
    if key in _DIGESTS:
        return _DIGESTS[key]
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as handle:
            digest.update(os.path.relpath(path, parent).encode() + b"\0" + handle.read() + b"\0")
    _DIGESTS[key] = digest.hexdigest()[:16]
    return _DIGESTS[key]


def _generated_repo(name: str) -> Path:
    source = paths.PROJECT_ROOT / "samples" / name
    script = source / "build_repo.py"
    if not script.is_file():
        raise ConfigError(f"repo '{GENERATED}{name}': no generator at {script}")
    target = paths.cache_dir() / "repos" / f"{name}-{_generator_digest(source)}"
    if (target / ".git").is_dir():
        return target
    with file_lock(f"repo-{target.name}"):
        if (target / ".git").is_dir():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        build = scratch / "repo"
        proc = subprocess.run([sys.executable, str(script), str(build)], capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise PlanError(f"generator {script} failed: {proc.stderr.strip()[-500:]}")
        os.rename(build, target)
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _cloned_repo(url: str) -> Path:
    target = paths.cache_dir() / "repos" / ("url-" + hashlib.sha256(url.encode()).hexdigest()[:16])
    with file_lock(f"repo-{target.name}"):
        if not (target / ".git").is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                ["git", "clone", "--quiet", "--no-checkout", url, str(target)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise ConfigError(f"repo '{url}' cannot be cloned: {proc.stderr.strip().splitlines()[-1:]}")
        # Every branch and tag as the remote has them now. --update-head-ok: the clone's HEAD
        # names one of them, and without it git refuses the whole fetch ("refusing to fetch
        # into branch ... checked out"), so no branch was ever brought up to date.
        fetched = subprocess.run(
            ["git", "-C", str(target), "fetch", "--quiet", "--update-head-ok", "--prune", "origin"]
            + ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
            capture_output=True,
            text=True,
            env={**os.environ, **_GIT_ENV},
        )
        if fetched.returncode != 0:  # offline, say: what was fetched before still pins the task
            log.warning("repo %s: not fetched (%s); its refs as fetched before", url, fetched.stderr.strip()[-300:])
    return target


LOCAL_REPOS: dict[str, Path] = {}
"""Every task ``repo`` given as a local path that this process resolved (as given -> where):
what a sweep's launcher sends with a job to a worker that may not have it (``repo_bundles``)."""
SENT_REPOS: dict[str, Path] = {}
"""Local repos that came with a job from the launcher (as the task gives the path -> this
worker's copy): a path this machine lacks resolves to it. Its commits are the launcher's, and
the spec hash, which pins them, proves it (engine/run/ray_job.py)."""


def resolve_repo(repo: str) -> Path:
    """A local git clone holding every ref the task names."""
    if repo.startswith(GENERATED):
        return _generated_repo(repo[len(GENERATED) :])
    local = Path(repo).expanduser()
    if not local.is_absolute():
        local = paths.PROJECT_ROOT / local
    if local.exists():
        if not (local / ".git").exists() and not (local / "HEAD").exists():
            raise ConfigError(f"repo '{repo}' is not a git repository")
        LOCAL_REPOS[repo] = local.resolve()
        return LOCAL_REPOS[repo]
    if repo in SENT_REPOS:
        return SENT_REPOS[repo]
    if "://" in repo or repo.startswith("git@"):
        return _cloned_repo(repo)
    raise ConfigError(f"repo '{repo}' does not exist")


def repo_bundles(mentioned_in: str) -> dict[str, bytes]:
    """A git bundle of every ref of each local repo this process resolved whose path (as the
    task gives it) ``mentioned_in`` names, a job's spec as JSON: what travels with that job."""
    bundles = {}
    for repo, where in sorted(LOCAL_REPOS.items()):
        if repo in mentioned_in:
            if repo not in _BUNDLES:  # once per repo and process: a sweep's jobs share it
                with tempfile.TemporaryDirectory() as scratch:
                    target = Path(scratch) / "repo.bundle"
                    git(where, "bundle", "create", str(target), "--all")
                    _BUNDLES[repo] = target.read_bytes()
            bundles[repo] = _BUNDLES[repo]
    return bundles


_BUNDLES: dict[str, bytes] = {}


def receive_repos(bundles: dict[str, bytes], into: Path) -> None:
    """Each sent bundle as a bare repo under ``into`` (named by its content: one copy however
    many jobs bring it), registered for ``resolve_repo`` where this machine lacks the path."""
    for repo, data in bundles.items():
        local = Path(repo).expanduser()
        if local.is_absolute() and local.exists():
            continue  # this machine has it: the spec hash says whether it is the same
        copy = into / f"{hashlib.sha256(data).hexdigest()[:24]}.git"
        with file_lock(f"sent-repo-{copy.name}"):
            if not copy.exists():
                into.mkdir(parents=True, exist_ok=True)
                scratch = Path(tempfile.mkdtemp(dir=into))
                try:
                    (scratch / "repo.bundle").write_bytes(data)
                    subprocess.run(
                        ["git", "clone", "-q", "--mirror", str(scratch / "repo.bundle"), str(copy)],
                        check=True,
                        capture_output=True,
                        env={**os.environ, **_GIT_ENV},
                    )
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
        SENT_REPOS[repo] = copy


def pin(repo_path: Path, ref: str, *, task_id: str, role: str) -> str:
    """``ref`` resolved to its commit SHA (GitPython's rev-parse: no process per ref)."""
    sha = _commit_sha(repo_path, ref)
    if sha is None:
        raise ConfigError(f"task '{task_id}': {role} ref '{ref}' not found in {repo_path}")
    return sha


def has_commit(repo_path: Path, sha: str) -> bool:
    return _commit_sha(repo_path, sha) is not None


_PINNED: contextvars.ContextVar[dict[tuple[str, tuple[str, ...]], list[str]] | None] = contextvars.ContextVar(
    "crucible_pinned", default=None
)


@contextmanager
def pinned_once(memo: dict[tuple[str, tuple[str, ...]], list[str]]) -> Iterator[None]:
    """Within the block (a sweep's, ``memo`` its own), refs resolved once per repository: each job
    of a task pins the same refs (one job per agent, model, seed), and each pin is a ``git
    rev-parse`` (~5 ms of a sweep's CPU). A ref moved meanwhile is not seen, so every job of a
    sweep runs the same commits; the next sweep resolves afresh."""
    token = _PINNED.set(memo)
    try:
        yield
    finally:
        _PINNED.reset(token)


def pin_all(repo_path: Path, refs: dict[str, str], *, task_id: str) -> dict[str, str]:
    """Each role's ref resolved to its commit SHA, as ``pin`` resolves it, by one ``git rev-parse``
    for all of them: a plan pins three refs, and GitPython (whose kept ``git cat-file`` spares a
    process per ref) costs ~0.1 s to import, most of a check answered from the store
    (bench/bench_cached_check.py). Where that call cannot answer for every ref (one not found,
    a repository git refuses), each is resolved by ``pin``, whose error names what is wrong."""
    pinned, key = _PINNED.get(), (str(repo_path), tuple(refs.values()))
    shas = pinned.get(key) if pinned is not None else None
    if shas is None:
        shas = _rev_parse_commits(repo_path, list(refs.values()))
    if shas is None:
        return {role: pin(repo_path, ref, task_id=task_id, role=role) for role, ref in refs.items()}
    if pinned is not None:
        pinned[key] = shas
    return dict(zip(refs, shas, strict=True))


def has_commits(repo_path: Path, shas: list[str]) -> bool:
    """Whether every one of ``shas`` is a commit in the repository (one ``git rev-parse``)."""
    return _rev_parse_commits(repo_path, shas) is not None or all(has_commit(repo_path, sha) for sha in shas)


def _rev_parse_commits(repo_path: Path, revs: list[str]) -> list[str] | None:
    """``rev^{commit}`` of every rev (the commit it names, its object looked up), in order; None
    when git does not answer for all of them (then the caller asks one by one). ``--`` after
    them: never read as paths. A rev that git would take for an option is left to the caller."""
    if not revs or any(rev.startswith("-") or not rev for rev in revs):
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo_path), "rev-parse", *(f"{rev}^{{commit}}" for rev in revs), "--"],
            capture_output=True,
            text=True,
            env={**os.environ, **_GIT_ENV},
        )
    except OSError:
        return None
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != len(revs) + 1 or lines[-1] != "--":
        return None
    shas = lines[:-1]
    return shas if all(len(sha) == 40 for sha in shas) else None


_OPEN_REPOS: dict[tuple[str, int], GitRepo] = {}
OPEN_REPOS_MAX = 16
"""Repositories kept open per process (each holds a ``git cat-file`` child)."""
_OPEN_REPOS_LOCK = threading.Lock()


def gitpython_repo(repo_path: Path) -> GitRepo:
    """GitPython's ``Repo`` at ``repo_path``, bare where git reads it as bare.

    GitPython decides bareness from ``core.bare`` alone, so a bare repository without a
    ``config`` file (a mirror copied without it) is taken for the ``.git`` of a work tree in
    its parent, and its object lookups run there: a short SHA is "not found", a full one
    "dubious ownership". git itself reads a repository it finds at the path, not under
    ``.git``, as bare; GIT_DIR points GitPython's git commands at it, as git would."""
    import git as gitpython

    repo = gitpython.Repo(repo_path)
    if not repo.bare and Path(repo.git_dir).resolve() == repo_path.resolve():
        repo.git.update_environment(GIT_DIR=os.fspath(repo.git_dir))
    return repo


def _open_repo(repo_path: Path) -> GitRepo:
    """One GitPython ``Repo`` per repository and process, kept open: its object lookups go
    through one ``git cat-file`` process it starts once, not one per ref (8 plans pin 24 refs).
    Keyed by the directory's inode too, so a repo regenerated at the same path is opened anew.
    Refs are read from disk at every ``rev_parse``: a moved ref is seen at once."""
    key = (str(repo_path), os.stat(repo_path).st_ino)
    repo = _OPEN_REPOS.pop(key, None)
    if repo is None:
        repo = gitpython_repo(repo_path)
        while len(_OPEN_REPOS) >= OPEN_REPOS_MAX:  # a long-lived process meets many repos
            _OPEN_REPOS.pop(next(iter(_OPEN_REPOS))).close()  # the least recently used
    _OPEN_REPOS[key] = repo  # (re)inserted last: dict order is recency
    return repo


def _commit_sha(repo_path: Path, rev: str) -> str | None:
    import git as gitpython

    try:
        with _OPEN_REPOS_LOCK:
            repo = _open_repo(repo_path)
            commit = repo.rev_parse(f"{rev}^{{commit}}")
            repo.odb.info(commit.binsha)  # a full hex SHA parses without being looked up: look
            return commit.hexsha
    except ValueError as exc:
        if "dubious ownership" in str(exc):  # git refuses it whatever the ref: say so, not "not found"
            raise ConfigError(
                f"{repo_path}: git refuses a repository owned by another user; trust it with "
                f"`git config --global --add safe.directory {repo_path}` or clone it"
            ) from exc
        return None
    except (gitpython.BadName, gitpython.BadObject, gitpython.GitCommandError):
        return None
    except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError, FileNotFoundError) as exc:
        raise ConfigError(f"{repo_path} is not a git repository") from exc


def read_blobs(repo_path: Path, sha: str, rel_paths: list[str]) -> dict[str, bytes]:
    """The files ``rel_paths`` as they are at commit ``sha``, read from the object database
    (one ``cat-file --batch`` for all of them). Raises PlanError naming a missing one."""
    import git as gitpython

    with gitpython_repo(repo_path) as repo:
        try:
            tree = repo.commit(sha).tree
        except (gitpython.BadName, ValueError) as exc:
            raise PlanError(f"commit {sha[:12]} is not in {repo_path}") from exc
        found = {}
        for rel in rel_paths:
            try:
                found[rel] = tree[rel].data_stream.read()
            except KeyError as exc:
                raise PlanError(f"{rel} is not in commit {sha[:12]} of {repo_path}") from exc
        return found


def baseline_bundle(repo_path: Path, baseline_ref: str, baseline_sha: str, dest: Path) -> None:
    """A git bundle holding ONLY the baseline's ancestry, as branch ``baseline_ref``.

    The golden and test refs are never in it: the answer key does not enter the image.
    Single-threaded packing keeps the bytes stable, so the image tag is stable too.
    """
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "r"
        subprocess.run(["git", "init", "--quiet", "--bare", str(clone)], check=True)
        git(clone, "fetch", "--quiet", "--no-tags", str(repo_path), f"{baseline_sha}:refs/heads/{baseline_ref}")
        tmp = dest.with_suffix(".tmp")
        git(clone, "-c", "pack.threads=1", "bundle", "create", str(tmp), f"refs/heads/{baseline_ref}")
        os.replace(tmp, dest)
